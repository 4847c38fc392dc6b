"""Type promotion follows PyTorch: categories first (bool < int < float), dimensioned tensors
above 0-d tensors above Python numbers, and a Python float means the default float32."""
import dyntrace as dt
from testlib import (ALL_DTYPES, FLOAT_DTYPES, INT_DTYPES, assert_close, assert_equal,
                     rand_tensor, ref_map, seed)

ORDER = [dt.bool, dt.int32, dt.int64, dt.float16, dt.float32, dt.float64]


def _category(d):
    return 0 if d == dt.bool else (1 if d in INT_DTYPES else 2)


def _promote(a, b):
    # the lattice restricted to these six dtypes is a total order
    return a if ORDER.index(a) >= ORDER.index(b) else b


def _expected(dim_dtypes, zero_dim_dtypes=(), numbers=()):
    """PyTorch's result_type over dimensioned tensors, 0-d tensors and Python numbers."""
    def fold(ds):
        r = None
        for d in ds:
            r = d if r is None else _promote(r, d)
        return r
    dim = fold(dim_dtypes)
    zero = fold(zero_dim_dtypes)
    wrapped = fold([dt.bool if isinstance(n, bool) else dt.int64 if isinstance(n, int) else dt.float32
                    for n in numbers])

    def combine(higher, lower):
        if higher is None:
            return lower
        if lower is None:
            return higher
        if _category(higher) == 2:
            return higher
        if higher == dt.bool or _category(lower) == 2 or _category(lower) > _category(higher):
            return _promote(higher, lower)
        return higher
    return combine(dim, combine(zero, wrapped)) or dt.float32


def test_tensor_tensor_pairs_all_dtypes():
    seed(4001)
    for a_t in ALL_DTYPES:
        for b_t in ALL_DTYPES:
            a = rand_tensor((3,), a_t, 0, 3)
            b = rand_tensor((3,), b_t, 1, 3)
            want = _expected([a_t, b_t])
            r = dt.add(a, b)
            assert r.dtype == want, (a_t, b_t, r.dtype, want)
            assert_close(r, ref_map(lambda x, y: x + y, a, b), dtype=want)
            assert (a * b).dtype == want
            assert (a == b).dtype == dt.bool
            assert dt.maximum(a, b).dtype == want


def test_tensor_python_number():
    seed(4002)
    for a_t in ALL_DTYPES:
        a = rand_tensor((4,), a_t, 0, 3)
        for number in (True, 3, 2.5):
            want = _expected([a_t], numbers=[number])
            r = a + number
            assert r.dtype == want, (a_t, number, r.dtype, want)
            r2 = number + a
            assert r2.dtype == want
            assert_close(r, ref_map(lambda x: x + number, a), dtype=want)


def test_brief_examples():
    assert (dt.tensor([1, 2], dtype=dt.int32) * 2.5).dtype == dt.float32
    assert_close(dt.tensor([1, 2], dtype=dt.int32) * 2.5, [2.5, 5.0], dtype=dt.float32)
    assert (dt.ones(3, dtype=dt.float16) + 1.0).dtype == dt.float16
    assert (dt.ones(3, dtype=dt.int32) + True).dtype == dt.int32
    assert (dt.ones(3, dtype=dt.int32) + dt.ones(3, dtype=dt.bool)).dtype == dt.int32
    assert (dt.ones(3, dtype=dt.int64) / dt.ones(3, dtype=dt.int64)).dtype == dt.float32
    assert (dt.ones(3, dtype=dt.int32) / 2).dtype == dt.float32
    assert (dt.ones(3, dtype=dt.int32) + 2).dtype == dt.int32  # a Python int doesn't widen
    assert (dt.ones(3, dtype=dt.bool) + 2).dtype == dt.int64


def test_zero_dim_tensors_rank_below_dimensioned():
    seed(4003)
    for dim_t in ALL_DTYPES:
        for zero_t in ALL_DTYPES:
            a = rand_tensor((5,), dim_t, 0, 3)
            z = rand_tensor((), zero_t, 1, 3)
            want = _expected([dim_t], [zero_t])
            r = a * z
            assert r.dtype == want, (dim_t, zero_t, r.dtype, want)
            assert (z * a).dtype == want
            assert_close(r, ref_map(lambda x, y: x * y, a, z), dtype=want)
    # concrete cases
    assert (dt.ones(2, dtype=dt.float16) + dt.tensor(1.0, dtype=dt.float64)).dtype == dt.float16
    assert (dt.ones(2, dtype=dt.int32) + dt.tensor(5)).dtype == dt.int32
    assert (dt.ones(2, dtype=dt.int32) + dt.tensor(5.0, dtype=dt.float64)).dtype == dt.float64
    # two 0-d tensors promote normally
    assert (dt.tensor(1, dtype=dt.int32) + dt.tensor(2.0, dtype=dt.float64)).dtype == dt.float64


def test_int_to_float_ops():
    seed(4004)
    for t in INT_DTYPES + (dt.bool,):
        x = rand_tensor((6,), t, 1, 5)
        for name in ("exp", "log", "sqrt", "sin", "sigmoid", "tanh", "reciprocal"):
            assert getattr(dt, name)(x).dtype == dt.float32, (name, t)
        assert dt.atan2(x, x).dtype == dt.float32
        assert dt.div(x, x).dtype == dt.float32
    for t in FLOAT_DTYPES:
        x = rand_tensor((6,), t, 1, 5)
        assert dt.exp(x).dtype == t
        assert dt.div(x, 2).dtype == t


def test_where_promotion():
    c = dt.tensor([True, False])
    assert dt.where(c, dt.ones(2, dtype=dt.int32), dt.zeros(2, dtype=dt.int64)).dtype == dt.int64
    assert dt.where(c, dt.ones(2, dtype=dt.float16), 2.0).dtype == dt.float16
    assert dt.where(c, dt.ones(2, dtype=dt.int32), 2).dtype == dt.int32
    assert dt.where(c, 1.0, 2).dtype == dt.float32
    assert_equal(dt.where(c, dt.ones(2, dtype=dt.int32), 2.5), [1.0, 2.5], dtype=dt.float32)


def test_inplace_keeps_dtype_and_rejects_unsafe_casts():
    x = dt.ones(3, dtype=dt.float16)
    x += dt.ones(3, dtype=dt.float64)
    assert x.dtype == dt.float16
    assert_equal(x, [2.0, 2.0, 2.0])
    i = dt.ones(3, dtype=dt.int32)
    i += dt.ones(3, dtype=dt.int64) * 4
    assert i.dtype == dt.int32 and i.tolist() == [5, 5, 5]
    try:
        i += 1.5
    except TypeError as e:
        assert "Float" in str(e) and "Int" in str(e), str(e)
    else:
        raise AssertionError("int32 += 1.5 should raise TypeError")
    try:
        i /= 2
    except TypeError:
        pass
    else:
        raise AssertionError("int32 /= 2 should raise TypeError (result is float)")
    b = dt.tensor([True, False])
    try:
        b += 1
    except TypeError:
        pass
    else:
        raise AssertionError("bool += 1 should raise TypeError")
    f = dt.ones(2, dtype=dt.float32)
    f *= dt.tensor([2, 3])
    assert f.dtype == dt.float32 and f.tolist() == [2.0, 3.0]


def test_reduction_and_creation_dtypes():
    for t in INT_DTYPES + (dt.bool,):
        x = dt.ones(4, dtype=t)
        assert x.sum().dtype == dt.int64
        assert x.prod().dtype == dt.int64
        assert x.amax().dtype == t
        assert x.sum(dtype=dt.float64).dtype == dt.float64
    for t in FLOAT_DTYPES:
        x = dt.ones(4, dtype=t)
        assert x.sum().dtype == t and x.mean().dtype == t and x.var().dtype == t
    assert dt.arange(5).dtype == dt.int64
    assert dt.arange(5.0).dtype == dt.float32
    assert dt.arange(0, 5, 0.5).dtype == dt.float32
    assert dt.full((2,), 3).dtype == dt.int64
    assert dt.full((2,), 3.0).dtype == dt.float32
    assert dt.full((2,), True).dtype == dt.bool
    assert dt.tensor([1, 2.0]).dtype == dt.float32
    assert dt.tensor([True, 2]).dtype == dt.int64
    assert dt.tensor([True, False]).dtype == dt.bool
    assert dt.tensor(3).dtype == dt.int64
    assert dt.tensor([]).dtype == dt.float32
