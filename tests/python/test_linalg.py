"""matmul / @ / mm / bmm / dot against numpy or a pure-Python reference."""
import dyntrace as dt
from testlib import (FLOAT_DTYPES, INT_DTYPES, np, assert_close, assert_equal, assert_raises,
                     noncontig, rand_tensor, ref_matmul, seed, to_np)


def _tol(dtype, k):
    if dtype == dt.float16:
        return 1e-2, 1e-2 * max(1, k) ** 0.5
    if dtype == dt.float32:
        return 1e-5, 1e-5 * max(1, k) ** 0.5
    return (None, None) if dtype == dt.float64 else (0.0, 0.0)


def _want(a, b):
    if np is not None and a.numel() * b.numel() > 0:
        return np.matmul(to_np(a), to_np(b))
    return ref_matmul(a, b)


def _check(a, b, msg=""):
    k = a.shape[-1]
    rtol, atol = _tol(a.dtype, k)
    want = _want(a, b)
    assert_close(a @ b, want, rtol, atol, dtype=a.dtype, msg=msg)
    assert_close(dt.matmul(a, b), want, rtol, atol, dtype=a.dtype, msg=msg)
    assert_close(a.matmul(b), want, rtol, atol, dtype=a.dtype, msg=msg)


SHAPE_PAIRS = [
    ((7,), (7,)), ((5,), (5, 3)), ((4, 5), (5,)), ((3, 4), (4, 2)), ((1, 1), (1, 1)),
    ((2, 3, 4), (4, 5)), ((4,), (2, 4, 3)), ((2, 3, 4), (4,)), ((2, 1, 3, 4), (5, 4, 2)),
    ((6, 2, 3), (6, 3, 2)), ((1, 33), (33, 1)), ((7, 1), (1, 7)), ((3, 0), (0, 4)), ((0, 3), (3, 2)),
]


def test_matmul_shapes_float():
    seed(10001)
    for dtype in FLOAT_DTYPES:
        for sa, sb in SHAPE_PAIRS:
            _check(rand_tensor(sa, dtype), rand_tensor(sb, dtype), "%s@%s %s" % (sa, sb, dtype))


def test_matmul_int():
    seed(10002)
    for dtype in INT_DTYPES:
        for sa, sb in SHAPE_PAIRS[:10]:
            a = rand_tensor(sa, dtype, -5, 5)
            b = rand_tensor(sb, dtype, -5, 5)
            assert_equal(a @ b, ref_matmul(a, b), dtype=dtype, msg="%s@%s" % (sa, sb))


def test_matmul_larger_sizes():
    seed(10003)
    for dtype in (dt.float32, dt.float64):
        for m, k, n in ((33, 65, 17), (128, 64, 96), (1, 1000, 1), (257, 3, 129)):
            a = rand_tensor((m, k), dtype, -1, 1)
            b = rand_tensor((k, n), dtype, -1, 1)
            _check(a, b, "%dx%dx%d" % (m, k, n))


def test_matmul_noncontiguous():
    seed(10004)
    for dtype in FLOAT_DTYPES + INT_DTYPES:
        a = noncontig((5, 6), dtype, "transposed", -3, 3)
        b = noncontig((6, 4), dtype, "strided", -3, 3)
        if dtype in INT_DTYPES:
            assert_equal(a @ b, ref_matmul(a, b))
        else:
            _check(a, b, "transposed@strided")
        c = noncontig((3, 5, 6), dtype, "expanded", -3, 3)
        d = rand_tensor((6, 4), dtype, -3, 3).T.contiguous().T
        if dtype in INT_DTYPES:
            assert_equal(c @ d, ref_matmul(c, d))
        else:
            _check(c, d, "expanded batch")
        v = rand_tensor((12,), dtype, -3, 3)[::2]
        if dtype not in INT_DTYPES:
            _check(a, v, "matrix@strided vector")
            _check(rand_tensor((2, 6, 3), dtype).mT, rand_tensor((2, 6, 4), dtype), "mT")


def test_mm_bmm_dot():
    seed(10005)
    for dtype in FLOAT_DTYPES:
        a, b = rand_tensor((4, 6), dtype), rand_tensor((6, 3), dtype)
        assert_close(dt.mm(a, b), _want(a, b), *_tol(dtype, 6), dtype=dtype)
        assert_close(a.mm(b), _want(a, b), *_tol(dtype, 6), dtype=dtype)
        a, b = rand_tensor((5, 2, 7), dtype), rand_tensor((5, 7, 3), dtype)
        assert_close(dt.bmm(a, b), _want(a, b), *_tol(dtype, 7), dtype=dtype)
        assert_close(a.bmm(b), _want(a, b), *_tol(dtype, 7), dtype=dtype)
        u, v = rand_tensor((33,), dtype), rand_tensor((33,), dtype)
        r = dt.dot(u, v)
        assert r.shape == ()
        assert_close(r, _want(u, v), *_tol(dtype, 33), dtype=dtype)
        assert_close(u.dot(v), _want(u, v), *_tol(dtype, 33), dtype=dtype)
    i = dt.tensor([1, 2, 3])
    assert dt.dot(i, i).item() == 14


def test_matmul_empty_inner_dim_is_zero():
    r = dt.ones(3, 0) @ dt.ones(0, 4)
    assert r.shape == (3, 4)
    assert r.tolist() == [[0.0] * 4] * 3
    assert (dt.ones(0, 3) @ dt.ones(3, 2)).shape == (0, 2)
    assert (dt.zeros(2, 0, 3) @ dt.zeros(3, 5)).shape == (2, 0, 5)
    assert dt.dot(dt.ones(0), dt.ones(0)).item() == 0.0


def test_matmul_result_is_fresh_and_contiguous():
    a = dt.ones(3, 3)
    r = a @ a
    assert r.is_contiguous()
    r[0, 0] = 100.0
    assert a[0, 0].item() == 1.0


def test_linalg_errors():
    assert_raises(dt.ShapeError, lambda: dt.ones(2, 3) @ dt.ones(4, 5), match=("[2, 3]", "[4, 5]"))
    assert_raises(dt.ShapeError, dt.matmul, dt.ones(3), dt.ones(4), match=("[3]", "[4]"))
    assert_raises(dt.ShapeError, dt.matmul, dt.ones(2, 2, 3), dt.ones(3, 3, 4), match=("[2, 2, 3]",))
    assert_raises(dt.ShapeError, dt.mm, dt.ones(2, 3, 4), dt.ones(4, 5), match="[2, 3, 4]")
    assert_raises(dt.ShapeError, dt.bmm, dt.ones(2, 3, 4), dt.ones(3, 4, 5), match=("[2, 3, 4]", "[3, 4, 5]"))
    assert_raises(dt.ShapeError, dt.dot, dt.ones(3), dt.ones(4), match=("[3]", "[4]"))
    assert_raises(ValueError, dt.matmul, dt.tensor(1.0), dt.ones(2))
    assert_raises(TypeError, dt.matmul, dt.ones(2, 2), dt.ones(2, 2, dtype=dt.float64),
                  match=("float32", "float64"))
    assert_raises(TypeError, lambda: dt.ones(2, 2) @ [[1.0, 0.0], [0.0, 1.0]])
    assert_raises(TypeError, dt.matmul, dt.ones(2, 2), 2.0)
