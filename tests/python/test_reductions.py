"""Reductions over dims (None, int, negative, tuple), keepdim, dtypes, odd sizes,
non-contiguous and empty inputs, against numpy or a pure-Python reference."""
import math

import dyntrace as dt
from testlib import (ALL_DTYPES, FLOAT_DTYPES, INT_DTYPES, NAN, INF, SIZES, np, assert_close,
                     assert_equal, assert_raises, noncontig, rand_tensor, ref_reduce, seed)

DIMS_3D = [None, 0, 1, 2, -1, (0, 2), (1, -1), (0, 1, 2), ()]


def _tol(dtype, n):
    # accumulation error grows with the number of summands; float16 results round at the end
    if dtype == dt.float16:
        return 4e-3, 4e-3
    if dtype == dt.float32:
        return 1e-5, 1e-5 * max(1, math.sqrt(n))
    return None, None


def _sum(vs):
    return math.fsum(vs) if any(isinstance(v, float) for v in vs) else sum(int(v) for v in vs)


def _prod(vs):
    p = 1
    for v in vs:
        p *= v
    return p if not isinstance(p, bool) else int(p)


def _mean(vs):
    return math.fsum(vs) / len(vs) if vs else NAN


def _var(correction):
    def f(vs):
        if not vs:
            return NAN
        m = math.fsum(vs) / len(vs)
        d = len(vs) - correction
        return math.fsum((v - m) ** 2 for v in vs) / d if d > 0 else (NAN if sum((v - m) ** 2 for v in vs) == 0 else INF)
    return f


def _amax(vs):
    return NAN if any(v != v for v in vs) else max(vs)


def _amin(vs):
    return NAN if any(v != v for v in vs) else min(vs)


def _logsumexp(vs):
    m = max(vs)
    if math.isinf(m):
        m = 0.0
    return m + math.log(math.fsum(math.exp(v - m) for v in vs))


def _check(name, x, dim, keepdim, py_fn, want_dtype, extra=None, **kwargs):
    args = {} if dim is None else {"dim": dim}
    args.update(kwargs)
    r = getattr(dt, name)(x, keepdim=keepdim, **args)
    want = ref_reduce(py_fn, x, dim if dim != () else None, keepdim)
    n = x.numel() // max(1, want.values and len(want.values) or 1)
    rtol, atol = _tol(want_dtype, max(n, 1))
    assert_close(r, want, rtol, atol, dtype=want_dtype, msg="%s dim=%s keepdim=%s %s" % (
        name, dim, keepdim, extra or ""))
    m = getattr(x, name)(keepdim=keepdim, **args)
    assert_close(m, want, rtol, atol, dtype=want_dtype)


def test_sum_all_dtypes_dims():
    seed(5001)
    for dtype in ALL_DTYPES:
        x = rand_tensor((3, 5, 7), dtype, -4, 4)
        want_dtype = dt.int64 if dtype in INT_DTYPES + (dt.bool,) else dtype
        for dim in DIMS_3D:
            for keepdim in (False, True):
                _check("sum", x, dim, keepdim, _sum, want_dtype)


def test_sum_sizes_and_numpy():
    seed(5002)
    for dtype in FLOAT_DTYPES + INT_DTYPES:
        for n in SIZES + (4099,):
            x = rand_tensor((n,), dtype, -3, 3)
            _check("sum", x, None, False, _sum, dt.int64 if dtype in INT_DTYPES else dtype)
            if np is not None and dtype != dt.float16:
                a = np.array(x.tolist())
                assert_close(x.sum(), a.sum(), *_tol(dtype, n))


def test_sum_dtype_argument():
    seed(5003)
    x = rand_tensor((4, 6), dt.int32, -10, 10)
    assert_close(x.sum(dtype=dt.float64), float(sum(sum(r) for r in x.tolist())), dtype=dt.float64)
    assert_close(dt.sum(x, 1, dtype=dt.int32), [sum(r) for r in x.tolist()], dtype=dt.int32)
    h = rand_tensor((1000,), dt.float16, 0, 1)
    s = h.sum(dtype=dt.float32)
    assert_close(s, math.fsum(h.tolist()), 1e-5, 1e-4, dtype=dt.float32)
    assert_close(x.mean(dtype=dt.float64), _mean([v for r in x.tolist() for v in r]), dtype=dt.float64)


def test_prod():
    seed(5004)
    for dtype in ALL_DTYPES:
        x = rand_tensor((3, 4, 5), dtype, -2, 2) if dtype in INT_DTYPES else rand_tensor(
            (3, 4, 5), dtype, 0.5, 1.5)
        want_dtype = dt.int64 if dtype in INT_DTYPES + (dt.bool,) else dtype
        for dim in (None, 0, -1, (0, 2)):
            for keepdim in (False, True):
                _check("prod", x, dim, keepdim, _prod, want_dtype)


def test_mean():
    seed(5005)
    for dtype in FLOAT_DTYPES:
        x = rand_tensor((4, 9, 6), dtype)
        for dim in DIMS_3D:
            for keepdim in (False, True):
                _check("mean", x, dim, keepdim, _mean, dtype)
        for n in SIZES:
            _check("mean", rand_tensor((n,), dtype), None, False, _mean, dtype)


def test_amax_amin():
    seed(5006)
    for dtype in ALL_DTYPES:
        x = rand_tensor((5, 3, 8), dtype, -50, 50)
        for dim in DIMS_3D:
            for keepdim in (False, True):
                _check("amax", x, dim, keepdim, _amax, dtype)
                _check("amin", x, dim, keepdim, _amin, dtype)


def test_amax_amin_nan_propagates():
    x = dt.tensor([[1.0, NAN, 3.0], [4.0, 5.0, -INF]])
    assert_equal(x.amax(dim=1), [NAN, 5.0])
    assert_equal(x.amin(dim=1), [NAN, -INF])
    assert_equal(x.amax(), NAN)
    assert_equal(x.amin(dim=0), [1.0, NAN, -INF])


def test_argmax_argmin():
    seed(5007)
    for dtype in ALL_DTYPES:
        x = rand_tensor((4, 7, 5), dtype, -3, 3)  # small ranges give ties
        xs = x.tolist()
        flat = [v for a in xs for b in a for v in b]
        r = x.argmax()
        assert r.dtype == dt.int64 and r.shape == ()
        assert r.item() == flat.index(max(flat))
        assert x.argmin().item() == flat.index(min(flat))
        for dim in (0, 1, 2, -1):
            for keepdim in (False, True):
                want = ref_reduce(lambda vs: vs.index(max(vs)), x, dim, keepdim)
                assert_equal(dt.argmax(x, dim=dim, keepdim=keepdim), want, dtype=dt.int64)
                want = ref_reduce(lambda vs: vs.index(min(vs)), x, dim, keepdim)
                assert_equal(x.argmin(dim, keepdim), want, dtype=dt.int64)
    x = dt.tensor([[1.0, NAN, 7.0, NAN], [2.0, 9.0, 9.0, 0.0]])
    assert_equal(x.argmax(dim=1), [1, 1])
    assert_equal(x.argmin(dim=1), [1, 3])
    assert x.argmax(keepdim=True).shape == (1, 1)


def test_var_std_corrections():
    seed(5008)
    for dtype in FLOAT_DTYPES:
        x = rand_tensor((6, 5, 4), dtype)
        for dim in (None, 0, -1, (0, 2)):
            for keepdim in (False, True):
                _check("var", x, dim, keepdim, _var(1), dtype)
                _check("std", x, dim, keepdim, lambda vs: math.sqrt(_var(1)(vs)), dtype)
                _check("var", x, dim, keepdim, _var(0), dtype, correction=0)
                _check("var", x, dim, keepdim, _var(2), dtype, correction=2)
                _check("var", x, dim, keepdim, _var(0), dtype, unbiased=False)
                _check("std", x, dim, keepdim, lambda vs: math.sqrt(_var(0)(vs)), dtype,
                       unbiased=False)
    x = rand_tensor((1000,), dt.float64, 5, 6)
    if np is not None:
        a = np.array(x.tolist())
        assert_close(x.var(), a.var(ddof=1))
        assert_close(x.std(correction=0), a.std())
    # a single element with correction 1: 0/0
    assert_equal(dt.tensor([3.0]).var(), NAN)


def test_logsumexp():
    seed(5009)
    for dtype in FLOAT_DTYPES:
        x = rand_tensor((4, 6, 3), dtype, -5, 5)
        for dim in (0, -1, (0, 2), (0, 1, 2)):
            for keepdim in (False, True):
                _check("logsumexp", x, dim, keepdim, _logsumexp, dtype)
    big = dt.tensor([[1000.0, 1000.0], [-1000.0, -1001.0], [-INF, -INF]], dtype=dt.float64)
    assert_close(big.logsumexp(1), [1000.0 + math.log(2.0), _logsumexp([-1000.0, -1001.0]), -INF])
    i = dt.tensor([[1, 2], [3, 4]])
    assert_close(dt.logsumexp(i, 1), [_logsumexp([1, 2]), _logsumexp([3, 4])], dtype=dt.float32)


def test_any_all():
    seed(5010)
    for dtype in ALL_DTYPES:
        x = rand_tensor((3, 4, 5), dtype, -1, 2)  # ints: -1, 0, 1
        for dim in (None, 0, -1, (1, 2)):
            for keepdim in (False, True):
                _check("any", x, dim, keepdim, lambda vs: any(bool(v) for v in vs), dt.bool)
                _check("all", x, dim, keepdim, lambda vs: all(bool(v) for v in vs), dt.bool)
    assert dt.tensor([0.0, NAN]).all().item() is False
    assert dt.tensor([NAN]).all().item() is True


def test_reductions_noncontiguous():
    seed(5011)
    for kind in ("transposed", "strided", "expanded"):
        for dtype in (dt.float32, dt.float64, dt.int64):
            x = noncontig((6, 10), dtype, kind, -3, 3)
            sum_dtype = dt.int64 if dtype == dt.int64 else dtype
            for dim in (None, 0, 1):
                _check("sum", x, dim, False, _sum, sum_dtype, kind)
                _check("amax", x, dim, True, _amax, dtype, kind)
                if dtype != dt.int64:
                    _check("mean", x, dim, False, _mean, dtype, kind)
                    _check("var", x, dim, False, _var(1), dtype, kind)
            want = ref_reduce(lambda vs: vs.index(max(vs)), x, 1)
            assert_equal(x.argmax(dim=1), want)


def test_reductions_empty():
    e = dt.zeros(0, 3)
    assert_equal(e.sum(), 0.0)
    assert_equal(e.sum(dim=0), [0.0, 0.0, 0.0])
    assert_equal(e.sum(dim=1), dt.zeros(0))
    assert_equal(e.prod(dim=0), [1.0, 1.0, 1.0])
    assert_equal(e.mean(dim=0), [NAN, NAN, NAN])
    assert_equal(e.any(), False)
    assert_equal(e.all(), True)
    assert_equal(dt.zeros(0, dtype=dt.int32).sum(), 0, dtype=dt.int64)
    assert e.amax(dim=1).shape == (0,)
    assert_raises(IndexError, e.amax, match="[0, 3]")
    assert_raises(IndexError, e.amin, dim=0)
    assert_raises(IndexError, e.argmax)


def test_reductions_zero_dim_input():
    x = dt.tensor(2.5)
    assert_equal(x.sum(), 2.5)
    assert_equal(x.sum(dim=0), 2.5)
    assert_equal(x.amax(dim=-1), 2.5)
    assert x.sum(keepdim=True).shape == ()
    assert x.argmax().item() == 0
    assert_equal(x.mean(), 2.5)


def test_reduction_dim_errors():
    x = dt.ones(2, 3)
    assert_raises(IndexError, x.sum, dim=2)
    assert_raises(IndexError, x.sum, dim=-3)
    assert_raises(IndexError, x.argmax, dim=5)
    assert_raises(ValueError, x.sum, dim=(0, 0), match="multiple")
    assert_raises(TypeError, x.sum, dim=1.5)
    assert_raises(TypeError, dt.mean, dt.ones(3, dtype=dt.int64), match="Long")
    assert_raises(TypeError, dt.var, dt.ones(3, dtype=dt.int32))


def test_thread_count_is_settable_and_leaves_results_alone():
    # Parallel eager loops split only dims each output element owns, so every thread count
    # gives the same bits; sums along rows and over leading dims take the vectorised paths.
    before = dt.get_num_threads()
    assert before >= 1
    x = dt.randn(300, 700)
    results = []
    try:
        for threads in (1, 2):
            dt.set_num_threads(threads)
            assert dt.get_num_threads() == threads
            results.append([t.tolist() for t in (x.sum(0), x.sum(1), dt.nn.functional.gelu(x), x.erf())])
    finally:
        dt.set_num_threads(before)
    assert results[0] == results[1]
    rows = x.tolist()
    for got, row in zip(results[0][1], rows):
        assert abs(got - math.fsum(row)) <= 1e-6 * (1 + sum(abs(v) for v in row))
    for j in (0, 1, 699):
        column = [r[j] for r in rows]
        assert abs(results[0][0][j] - math.fsum(column)) <= 1e-6 * (1 + sum(abs(v) for v in column))
    for bad in (0, -3):
        try:
            dt.set_num_threads(bad)
        except RuntimeError as e:
            assert "positive" in str(e)
        else:
            raise AssertionError("set_num_threads(%d) was accepted" % bad)
