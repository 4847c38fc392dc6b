"""softmax, log_softmax, layer_norm, rms_norm against per-row pure-Python references."""
import math

import dyntrace as dt
from testlib import (FLOAT_DTYPES, NAN, INF, Ref, assert_close, assert_raises, noncontig,
                     rand_tensor, seed)


def _along(x, dim, row_fn):
    """Applies row_fn(list) -> list along `dim` of tensor/Ref x; returns a Ref of x's shape."""
    r = Ref.of(x)
    nd = len(r.shape)
    dim %= nd
    perm = [d for d in range(nd) if d != dim] + [dim]
    moved = r.transpose(perm)
    n = r.shape[dim]
    out = []
    for i in range(0, len(moved.values), max(n, 1)):
        out.extend(row_fn(moved.values[i:i + n]))
    inv = [perm.index(d) for d in range(nd)]
    return Ref(out, moved.shape).transpose(inv)


def _softmax_row(vs):
    m = max(vs)
    if math.isinf(m):
        m = 0.0
    es = [math.exp(v - m) for v in vs]
    s = math.fsum(es)
    return [e / s for e in es]


def _log_softmax_row(vs):
    m = max(vs)
    if math.isinf(m):
        m = 0.0
    lse = m + math.log(math.fsum(math.exp(v - m) for v in vs))
    return [v - lse for v in vs]


def _tol(dtype):
    return (1e-2, 1e-2) if dtype == dt.float16 else (None, None)


def test_softmax_all_dims_dtypes():
    seed(6001)
    for dtype in FLOAT_DTYPES:
        x = rand_tensor((3, 5, 7), dtype, -4, 4)
        for dim in (0, 1, 2, -1, -3):
            want = _along(x, dim, _softmax_row)
            assert_close(dt.softmax(x, dim), want, *_tol(dtype), dtype=dtype, msg="dim=%d" % dim)
            assert_close(x.softmax(dim=dim), want, *_tol(dtype), dtype=dtype)


def test_log_softmax_all_dims_dtypes():
    seed(6002)
    for dtype in FLOAT_DTYPES:
        x = rand_tensor((4, 6, 3), dtype, -4, 4)
        for dim in (0, 1, -1):
            want = _along(x, dim, _log_softmax_row)
            assert_close(dt.log_softmax(x, dim), want, *_tol(dtype), dtype=dtype, msg="dim=%d" % dim)
            assert_close(x.log_softmax(dim), want, *_tol(dtype), dtype=dtype)


def test_softmax_sizes_and_rows_sum_to_one():
    seed(6003)
    for n in (1, 7, 33, 1031):
        x = rand_tensor((2, n), dt.float32, -10, 10)
        y = dt.softmax(x, -1)
        assert_close(y, _along(x, -1, _softmax_row), 1e-5, 1e-7)
        assert_close(y.sum(-1), [1.0, 1.0], 1e-5, 1e-5)


def test_softmax_stability_and_infinities():
    x = dt.tensor([[1000.0, 1001.0, 1002.0], [-INF, 0.0, -INF], [-INF, -INF, -INF]])
    y = dt.softmax(x, 1)
    assert_close(y[0], _softmax_row([1000.0, 1001.0, 1002.0]))
    assert_close(y[1], [0.0, 1.0, 0.0])
    assert_close(y[2], [NAN, NAN, NAN])
    ly = dt.log_softmax(x[:2], 1)
    assert_close(ly[0], _log_softmax_row([1000.0, 1001.0, 1002.0]), 1e-5, 1e-5)
    assert_close(ly[1], [-INF, 0.0, -INF])


def test_softmax_dtype_argument_and_int_input():
    seed(6004)
    x = rand_tensor((3, 4), dt.float16, -2, 2)
    y = dt.softmax(x, 1, dtype=dt.float32)
    assert y.dtype == dt.float32
    assert_close(y, _along(x, 1, _softmax_row), 1e-5, 1e-6)
    y = dt.log_softmax(x, 0, dtype=dt.float64)
    assert y.dtype == dt.float64
    assert_close(y, _along(x, 0, _log_softmax_row))


def test_softmax_noncontiguous():
    seed(6005)
    for kind in ("transposed", "strided", "expanded"):
        x = noncontig((5, 8), dt.float64, kind, -3, 3)
        for dim in (0, 1):
            assert_close(dt.softmax(x, dim), _along(x, dim, _softmax_row), msg=kind)
            assert_close(dt.log_softmax(x, dim), _along(x, dim, _log_softmax_row), msg=kind)


def _layer_norm_ref(x, k, weight=None, bias=None, eps=1e-5):
    r = Ref.of(x)
    inner = 1
    for s in r.shape[len(r.shape) - k:]:
        inner *= s
    w = Ref.of(weight).values if weight is not None else [1.0] * inner
    b = Ref.of(bias).values if bias is not None else [0.0] * inner
    out = []
    for i in range(0, len(r.values), inner):
        row = r.values[i:i + inner]
        m = math.fsum(row) / inner
        v = math.fsum((a - m) ** 2 for a in row) / inner
        inv = 1.0 / math.sqrt(v + eps)
        out.extend((a - m) * inv * wi + bi for a, wi, bi in zip(row, w, b))
    return Ref(out, r.shape)


def _rms_norm_ref(x, k, weight=None, eps=None):
    r = Ref.of(x)
    inner = 1
    for s in r.shape[len(r.shape) - k:]:
        inner *= s
    w = Ref.of(weight).values if weight is not None else [1.0] * inner
    out = []
    for i in range(0, len(r.values), inner):
        row = r.values[i:i + inner]
        ms = math.fsum(a * a for a in row) / inner
        inv = 1.0 / math.sqrt(ms + eps)
        out.extend(a * inv * wi for a, wi in zip(row, w))
    return Ref(out, r.shape)


def test_layer_norm():
    seed(6006)
    for dtype in FLOAT_DTYPES:
        x = rand_tensor((3, 4, 6), dtype, -3, 3)
        tol = (2e-2, 2e-2) if dtype == dt.float16 else (1e-4, 1e-5) if dtype == dt.float32 else (None, None)
        for shape in ((6,), (4, 6), [3, 4, 6]):
            k = len(shape)
            w = rand_tensor(tuple(shape), dtype, 0.5, 1.5)
            b = rand_tensor(tuple(shape), dtype, -1, 1)
            assert_close(dt.layer_norm(x, shape), _layer_norm_ref(x, k), *tol, dtype=dtype)
            assert_close(dt.layer_norm(x, shape, w, b), _layer_norm_ref(x, k, w, b), *tol, dtype=dtype)
            assert_close(dt.layer_norm(x, shape, weight=w), _layer_norm_ref(x, k, w), *tol, dtype=dtype)
            assert_close(dt.layer_norm(x, shape, bias=b, eps=1e-2),
                         _layer_norm_ref(x, k, None, b, 1e-2), *tol, dtype=dtype)
    x = noncontig((7, 33), dt.float64, "transposed")
    assert_close(dt.layer_norm(x, (33,)), _layer_norm_ref(x, 1))
    assert_close(dt.layer_norm(x, 33), _layer_norm_ref(x, 1))
    # constant rows normalise to zero rather than NaN thanks to eps
    assert_close(dt.layer_norm(dt.ones(2, 5), (5,)), dt.zeros(2, 5))


def test_rms_norm():
    seed(6007)
    default_eps = {dt.float16: 2.0 ** -10, dt.float32: 2.0 ** -23, dt.float64: 2.0 ** -52}
    for dtype in FLOAT_DTYPES:
        x = rand_tensor((5, 2, 9), dtype, -3, 3)
        tol = (2e-2, 2e-2) if dtype == dt.float16 else (1e-4, 1e-5) if dtype == dt.float32 else (None, None)
        for shape in ((9,), (2, 9)):
            k = len(shape)
            w = rand_tensor(shape, dtype, 0.5, 1.5)
            eps = default_eps[dtype]
            assert_close(dt.rms_norm(x, shape), _rms_norm_ref(x, k, eps=eps), *tol, dtype=dtype)
            assert_close(dt.rms_norm(x, shape, w), _rms_norm_ref(x, k, w, eps), *tol, dtype=dtype)
            assert_close(dt.rms_norm(x, shape, weight=w, eps=0.5), _rms_norm_ref(x, k, w, 0.5), *tol,
                         dtype=dtype)
    assert_close(dt.rms_norm(dt.zeros(2, 3), (3,)), dt.zeros(2, 3))


def test_norm_errors():
    x = dt.ones(2, 3, 4)
    assert_raises(dt.ShapeError, dt.layer_norm, x, (3,), match=("[2, 3, 4]",))
    assert_raises(dt.ShapeError, dt.layer_norm, x, (4,), dt.ones(3), match=("[4]", "[3]"))
    assert_raises(dt.ShapeError, dt.rms_norm, x, (5,), match="[2, 3, 4]")
    assert_raises(TypeError, dt.layer_norm, dt.ones(2, 3, dtype=dt.int64), (3,), match="Long")
    assert_raises(IndexError, dt.softmax, x, 3)
    assert_raises(TypeError, dt.softmax, x, 1.0)


def test_composites_match_primitive_definitions():
    seed(6008)
    x = rand_tensor((4, 9), dt.float64)
    y = dt.softmax(x, 1)
    manual = dt.exp(x - x.amax(1, keepdim=True))
    manual = manual / manual.sum(1, keepdim=True)
    assert_close(y, manual)
    assert_close(dt.log_softmax(x, 1), dt.log(y))
    assert_close(x.logsumexp(1), dt.log(dt.exp(x).sum(1)))
    ln = dt.layer_norm(x, (9,), eps=0.0)
    assert_close(ln, (x - x.mean(1, keepdim=True)) / x.std(1, keepdim=True, correction=0))
    assert_close(ln.mean(1), [0.0] * 4, atol=1e-12)


def test_softmax_dtype_argument_converts_first():
    # softmax(x, dim, dtype=...) computes in the requested dtype, so integer inputs are accepted.
    x = dt.tensor([[1, 2, 3], [0, -1, 4]])
    got = dt.softmax(x, -1, dtype=dt.float64)
    assert got.dtype == dt.float64
    for row_in, row_out in zip(x.tolist(), got.tolist()):
        total = sum(math.exp(v) for v in row_in)
        for v, p in zip(row_in, row_out):
            assert abs(p - math.exp(v) / total) < 1e-12, (v, p)
    assert dt.log_softmax(x.float(), 1, dtype=dt.float16).dtype == dt.float16
