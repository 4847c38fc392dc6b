"""einsum against numpy.einsum over many equations; isclose/allclose/equal, addmm/baddbmm, lerp,
hypot, logaddexp, norms, outer, cross, diag, trace, tile, movedim, t, new_*, type_as against
numpy; and all of them under dt.jit (eager and cpu backends) without graph breaks.

float64 inputs: results are sums of at most ~60 products of O(1) values, so 1e-12 bounds the
rounding with a wide margin (60 * 2**-52 * 60 ~ 1e-12 is the worst case, far from reached)."""
import dyntrace as dt
from cpulib import check_traced_and_compiled
from jitlib import Call
from testlib import assert_close, assert_raises, np, rand_tensor, require_numpy, seed

TOL64 = dict(rtol=1e-12, atol=1e-12)


def _np(t):
    return np.array(t.tolist(), dtype=np.float64)


EQUATIONS = [
    ("ij,jk->ik", [(3, 4), (4, 5)]), ("ij,jk", [(3, 4), (4, 5)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("ij->ji", [(3, 4)]), ("ij->", [(3, 4)]), ("ii->i", [(4, 4)]), ("ii", [(4, 4)]), ("i,i->", [(5,), (5,)]),
    ("i,j->ij", [(3,), (4,)]), ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 2)]), ("...j,j", [(2, 3, 4), (4,)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]), ("ijk,ikl,ilm->ijm", [(2, 3, 4), (2, 4, 5), (2, 5, 2)]),
    ("iij->j", [(3, 3, 2)]), ("ij,ij->ij", [(3, 4), (1, 4)]), ("a b, b c -> a c", [(2, 3), (3, 2)]),
    ("ijk->kji", [(2, 3, 4)]), ("ij,kl->ijkl", [(2, 3), (2, 2)]), ("bi,bi->b", [(4, 3), (4, 3)]),
]


def test_einsum_matches_numpy():
    require_numpy()
    seed(1931)
    for eq, shapes in EQUATIONS:
        ops = [rand_tensor(s, dt.float64) for s in shapes]
        want = np.einsum(eq.replace(" ", ""), *[_np(o) for o in ops])
        assert_close(dt.einsum(eq, *ops), want, msg=eq, **TOL64)
        assert_close(dt.einsum(eq, ops), want, msg=eq + " (list)", **TOL64)
    assert dt.einsum("ij,jk", dt.ones(2, 3, dtype=dt.int32), dt.ones(3, 2, dtype=dt.int32)).dtype == dt.int32


def test_einsum_errors():
    a = dt.ones(2, 3)
    assert_raises(ValueError, dt.einsum, "ij,jk", a, match="2 operands but 1")
    assert_raises(ValueError, dt.einsum, "ijk", a, match="number of dimensions")
    assert_raises(ValueError, dt.einsum, "ij->k", a, match="output subscript")
    assert_raises(ValueError, dt.einsum, "ij->ii", a, match="more than once")
    assert_raises(ValueError, dt.einsum, "i1", a, match="invalid subscript")
    assert_raises(RuntimeError, dt.einsum, "ij,ij", a, dt.ones(2, 4), match=("size 4", "3"))
    assert_raises(RuntimeError, dt.einsum, "ii", a, match="repeated")


def test_comparisons_and_products():
    require_numpy()
    seed(1932)
    a = rand_tensor((3, 4), dt.float64)
    b = a + dt.tensor([1e-9, 1e-3, 0.0, 0.0], dtype=dt.float64)
    inf, nan = float("inf"), float("nan")
    c = dt.tensor([1.0, inf, -inf, nan, 1.0], dtype=dt.float64)
    d = dt.tensor([1.0 + 1e-7, inf, inf, nan, 2.0], dtype=dt.float64)
    assert dt.isclose(a, b).tolist() == np.isclose(_np(a), _np(b)).tolist()    # |a-b| <= atol + rtol*|b| in both
    assert dt.isclose(c, d).tolist() == np.isclose(_np(c), _np(d)).tolist()
    assert dt.isclose(c, d, equal_nan=True).tolist() == np.isclose(_np(c), _np(d), equal_nan=True).tolist()
    assert bool(dt.allclose(a, a + 1e-10)) and not bool(dt.allclose(a, b))
    assert bool(dt.equal(a, a.clone())) and not bool(dt.equal(a, b)) and not bool(dt.equal(a, a[:2]))
    assert dt.isclose(dt.tensor([1, 2]), dt.tensor([1, 3])).tolist() == [True, False]
    assert_raises(RuntimeError, dt.isclose, a, a.float(), match="same dtype")
    m1, m2, inp = rand_tensor((3, 4), dt.float64), rand_tensor((4, 5), dt.float64), rand_tensor((5,), dt.float64)
    assert_close(dt.addmm(inp, m1, m2, beta=0.5, alpha=2), 0.5 * _np(inp) + 2 * _np(m1) @ _np(m2), **TOL64)
    nan_in = dt.full((3, 5), nan, dtype=dt.float64)
    assert_close(dt.addmm(nan_in, m1, m2, beta=0), _np(m1) @ _np(m2), **TOL64)    # beta 0 ignores NaN
    b1, b2 = rand_tensor((2, 3, 4), dt.float64), rand_tensor((2, 4, 2), dt.float64)
    assert_close(dt.baddbmm(dt.ones(2, 3, 2, dtype=dt.float64), b1, b2, alpha=3), 1 + 3 * _np(b1) @ _np(b2), **TOL64)
    assert_close(dt.outer(inp, m1[0]), np.outer(_np(inp), _np(m1[0])), **TOL64)
    u, v = rand_tensor((4, 3), dt.float64), rand_tensor((4, 3), dt.float64)
    assert_close(dt.cross(u, v), np.cross(_np(u), _np(v)), **TOL64)
    assert_close(dt.linalg.cross(u, v), np.cross(_np(u), _np(v)), **TOL64)
    assert_close(dt.cross(u.T, v.T, dim=0), np.cross(_np(u), _np(v)).T, **TOL64)
    assert_raises(RuntimeError, dt.cross, dt.ones(2, 4), dt.ones(2, 4), match="length 3")


def test_pointwise_math():
    require_numpy()
    seed(1933)
    s, e = rand_tensor((5,), dt.float64), rand_tensor((5,), dt.float64)
    w = dt.tensor([0.0, 0.25, 0.5, 0.75, 1.0], dtype=dt.float64)
    assert_close(dt.lerp(s, e, w), _np(s) + _np(w) * (_np(e) - _np(s)), **TOL64)
    assert dt.lerp(s, e, w)[4].item() == e[4].item() and dt.lerp(s, e, 0.0).tolist() == s.tolist()  # exact ends
    assert_close(dt.lerp(s, e, 0.3), _np(s) + 0.3 * (_np(e) - _np(s)), **TOL64)
    assert_close(dt.hypot(s, e), np.hypot(_np(s), _np(e)), **TOL64)
    # addcmul / addcdiv: value times tensor1 first, as PyTorch's kernel; the in-place forms
    # (custom optimizers' `v.mul_(b2).addcmul_(g, g, value=1 - b2)`) write the input.
    assert_close(dt.addcmul(s, e, w, value=0.5), _np(s) + 0.5 * _np(e) * _np(w), **TOL64)
    assert_close(s.addcdiv(e, w + 1, value=-2), _np(s) - 2 * _np(e) / (_np(w) + 1), **TOL64)
    acc = s.clone()
    assert acc.addcmul_(e, e) is acc and acc.tolist() == (s + e * e).tolist()
    assert dt.addcmul(dt.tensor([1, 2]), dt.tensor([3, 4]), dt.tensor([5, 6]), value=2).tolist() == [31, 50]
    assert_raises(RuntimeError, dt.addcdiv, dt.tensor([1]), dt.tensor([1]), dt.tensor([2]),
                  match="Integer division with addcdiv is no longer supported")
    # count_nonzero and diff (n-th differences; prepend/append joined first; bool by xor).
    m = dt.tensor([[0.0, 1.5, 0.0], [2.0, 0.0, -3.0]], dtype=dt.float64)
    assert dt.count_nonzero(m).item() == np.count_nonzero(_np(m)) and dt.count_nonzero(m).dtype == dt.int64
    assert dt.count_nonzero(m, dim=0).tolist() == np.count_nonzero(_np(m), axis=0).tolist()
    assert m.count_nonzero(dim=[0, 1]).item() == 3
    assert_close(dt.diff(s), np.diff(_np(s)), **TOL64)
    assert_close(dt.diff(m, n=2, dim=1, prepend=m[:, :1], append=m), np.diff(_np(m), n=2, axis=1, prepend=_np(m)[:, :1],
                                                                               append=_np(m)), **TOL64)
    flags = dt.tensor([True, False, False, True])
    assert dt.diff(flags).tolist() == np.diff(np.array([True, False, False, True])).tolist()
    assert_raises(RuntimeError, dt.diff, dt.tensor(1.0), match="at least one-dimensional")
    x = dt.tensor([0.0, -800.0, 800.0, -float("inf"), float("inf"), 3.0], dtype=dt.float64)
    y = dt.tensor([0.0, -801.0, 1.0, -float("inf"), float("inf"), -float("inf")], dtype=dt.float64)
    assert_close(dt.logaddexp(x, y), np.logaddexp(_np(x), _np(y)), **TOL64)


def test_norms():
    require_numpy()
    seed(1934)
    x = rand_tensor((3, 4, 5), dt.float64)
    xn = _np(x)
    for p in (1, 2, 3, 0.5, float("inf"), -float("inf")):
        assert_close(dt.linalg.vector_norm(x, p, dim=(1, 2)),
                     np.linalg.norm(xn.reshape(3, -1), ord=p, axis=1), msg=str(p), **TOL64)
        assert_close(x.norm(p, dim=-1, keepdim=True), np.linalg.norm(xn, ord=p, axis=-1, keepdims=True), **TOL64)
    assert_close(dt.norm(x), np.linalg.norm(xn.ravel()), **TOL64)
    assert_close(dt.norm(x, "fro", dim=(0, 1)), np.sqrt((xn ** 2).sum((0, 1))), **TOL64)
    assert_close(dt.linalg.vector_norm(x, 0), float((xn != 0).sum()), **TOL64)
    m = x[0]
    for ord_ in ("fro", 1, -1, float("inf"), -float("inf")):
        assert_close(dt.linalg.norm(m, ord_), np.linalg.norm(_np(m), ord=ord_), msg=str(ord_), **TOL64)
    assert_close(dt.linalg.norm(x, dim=(1, 2), ord=1), np.linalg.norm(xn, ord=1, axis=(1, 2)), **TOL64)
    assert_close(dt.linalg.norm(x), np.linalg.norm(xn.ravel()), **TOL64)
    assert_raises(NotImplementedError, dt.linalg.norm, m, 2, match="singular")
    assert_raises(NotImplementedError, dt.linalg.norm, m, "nuc", match="singular")
    assert_raises(TypeError, dt.linalg.vector_norm, dt.tensor([1, 2]), match="int64")


def test_shape_helpers():
    require_numpy()
    x = dt.arange(24.0).reshape(2, 3, 4)
    xn = _np(x)
    assert_close(dt.tile(x, (2,)), np.tile(xn, 2), **TOL64)
    assert_close(x.tile((2, 1, 1, 2)), np.tile(xn, (2, 1, 1, 2)), **TOL64)
    assert_close(dt.movedim(x, 0, -1), np.moveaxis(xn, 0, -1), **TOL64)
    assert_close(x.movedim((0, 1), (2, 0)), np.moveaxis(xn, (0, 1), (2, 0)), **TOL64)
    assert_raises(RuntimeError, dt.movedim, x, (0, 1), (0,))
    assert x[0].t().shape == (4, 3) and dt.t(x[0, 0]).shape == (4,)
    assert_raises(RuntimeError, x.t, match="3D")
    z = x.new_zeros(2, 2)
    assert z.dtype == dt.float32 and z.tolist() == [[0, 0], [0, 0]]
    assert x.new_ones((3,), dtype=dt.int64).tolist() == [1, 1, 1] and x.new_empty(4).shape == (4,)
    assert x.new_full((2,), 7).tolist() == [7.0, 7.0]
    assert dt.tensor([1, 2]).type_as(x).dtype == dt.float32
    m = rand_tensor((4, 5), dt.float64)
    for k in (-5, -2, 0, 1, 4, 6):
        assert_close(dt.diag(m, k), np.diag(_np(m), k), msg=str(k), **TOL64)
    v = rand_tensor((3,), dt.float64)
    for k in (-2, 0, 1):
        assert_close(dt.diag(v, k), np.diag(_np(v), k), **TOL64)
    assert_close(dt.trace(m), np.trace(_np(m)), **TOL64)
    assert dt.trace(dt.arange(9).reshape(3, 3)).item() == 12
    assert_raises(RuntimeError, dt.trace, x, match="matrix")


def mathy(a, b, c, w):
    e = dt.einsum("ij,jk->ik", a, b) + dt.einsum("...ij->...ji", c).sum((0, 1))
    f = dt.addmm(e, a, b, beta=0.5) + dt.lerp(e, e * 2, 0.3) + dt.hypot(e, e) + dt.logaddexp(e, e)
    g = dt.outer(w, w).sum(0) + dt.norm(e, dim=1, keepdim=True) + dt.linalg.norm(e, 1)
    h = dt.cross(a[:, :3], b.t()[:2, :3].sum(0, keepdim=True).expand(a.shape[0], 3), dim=1)
    return (f + g, dt.isclose(f, f), h, dt.diag(e).sum() + dt.trace(e), dt.tile(w, (2,)), dt.movedim(c, 0, 2),
            c.new_zeros(2, 3) + w.type_as(c)[:3], dt.baddbmm(c, c, dt.ones(3, 3, 3)))


def _math_inputs(i):
    return Call(rand_tensor((3 + i, 3)), rand_tensor((3, 3)), rand_tensor((3, 3, 3)), rand_tensor((3,)))


def test_math_under_jit_match_eager_without_breaks():
    check_traced_and_compiled(mathy, _math_inputs, 1935, rtol=1e-5, atol=1e-5)
