"""numpy interop, checked against numpy itself: from_numpy and numpy() share memory both ways
(writes through one are read through the other), as_tensor shares where dtype and device allow,
operators take ndarray operands on either side with PyTorch's promotion (an array is a tensor,
a numpy scalar is a number), and get/set_default_dtype type float factories. Error types and
messages are PyTorch 1.13's. Without numpy only the default-dtype tests run; the rest skip loudly."""
import gc

import dyntrace as dt
from testlib import assert_raises, np, require_numpy, seed

# dyntrace dtype -> numpy dtype name, for the dtypes both have.
DTYPE_PAIRS = ((dt.bool, "bool"), (dt.uint8, "uint8"), (dt.int8, "int8"), (dt.int16, "int16"), (dt.int32, "int32"),
               (dt.int64, "int64"), (dt.float16, "float16"), (dt.float32, "float32"), (dt.float64, "float64"))
UNSUPPORTED_MESSAGE = ("The only supported types are: float64, float32, float16, int64, int32, int16, int8, uint8, "
                       "and bool.")


def sample(np_dtype, shape=(3, 4)):
    rng = np.random.default_rng(19)
    if np_dtype == "bool":
        return rng.integers(0, 2, size=shape).astype(bool)
    return (rng.standard_normal(size=shape) * 10).astype(np_dtype)


def one_value(np_dtype):
    return True if np_dtype == "bool" else 7


def test_from_numpy_shares_memory_for_each_dtype():
    require_numpy()
    for dtype, name in DTYPE_PAIRS:
        a = sample(name)
        t = dt.from_numpy(a)
        assert t.dtype == dtype and t.shape == a.shape, (name, t.dtype, t.shape)
        assert t.tolist() == a.tolist(), name
        assert t.data_ptr() == a.ctypes.data, name
        t[1, 2] = one_value(name)
        assert a[1, 2] == one_value(name), name  # written through the tensor, read through numpy
        a[0, :] = 0
        assert t[0].tolist() == a[0].tolist(), name  # written through numpy, read through the tensor


def test_from_numpy_keeps_the_array_alive():
    require_numpy()
    a = np.arange(1000, dtype=np.float64)
    t = dt.from_numpy(a)
    del a
    gc.collect()
    np.arange(1000, dtype=np.float64) * 3  # would reuse the memory had it been freed
    assert t.tolist() == [float(i) for i in range(1000)]


def test_from_numpy_views_keep_their_strides():
    require_numpy()
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    for view in (base.T, base[:, ::2], base[1:, 2:5], base[::2]):
        t = dt.from_numpy(view)
        assert t.shape == view.shape and t.tolist() == view.tolist()
        assert t.stride() == tuple(s // view.itemsize for s in view.strides)
        t[0, 0] = -1
        assert view[0, 0] == -1
    scalar = np.array(2.5, dtype=np.float64)
    t = dt.from_numpy(scalar)
    assert t.shape == () and t.item() == 2.5
    empty = dt.from_numpy(np.zeros((0, 3), dtype=np.int64))
    assert empty.shape == (0, 3) and empty.dtype == dt.int64


def test_from_numpy_refuses_what_pytorch_refuses():
    require_numpy()
    a = np.arange(6, dtype=np.float32)
    assert_raises(ValueError, dt.from_numpy, a[::-1], match=("negative", "array.copy()"))
    assert_raises(ValueError, dt.from_numpy, np.arange(6, dtype=np.float32).reshape(2, 3)[:, ::-1],
                  match=("negative",))
    assert_raises(TypeError, dt.from_numpy, [1, 2], match=("expected np.ndarray (got list)",))
    assert_raises(TypeError, dt.from_numpy, dt.ones(2), match=("expected np.ndarray (got dyntrace.Tensor)",))
    for np_dtype, type_name in ((np.complex64, "numpy.complex64"), (np.complex128, "numpy.complex128"),
                                (np.uint16, "numpy.uint16"), (np.uint64, "numpy.uint64"),
                                (object, "numpy.object_"), ("U3", "numpy.str_")):
        bad = np.zeros(3, dtype=np_dtype)
        for fn in (dt.from_numpy, dt.as_tensor, dt.tensor):
            assert_raises(TypeError, fn, bad, match=("can't convert np.ndarray of type " + type_name,
                                                     UNSUPPORTED_MESSAGE))
    assert_raises(ValueError, dt.from_numpy, np.ones(3, dtype=">f4"), match=("byte order",))
    # A strided view whose strides are not whole elements (a field of a packed record).
    packed = np.zeros(4, dtype=[("a", np.int8), ("b", np.float32)])
    assert_raises(ValueError, dt.from_numpy, packed["b"], match=("multiple of the element byte size",))


def test_read_only_arrays_are_refused_by_from_numpy_and_copied_by_as_tensor():
    require_numpy()
    a = np.arange(4, dtype=np.float32)
    a.flags.writeable = False
    assert_raises(ValueError, dt.from_numpy, a, match=("not writable",))
    t = dt.as_tensor(a)
    assert t.tolist() == a.tolist() and t.data_ptr() != a.ctypes.data
    t[0] = 9
    assert a[0] == 0
    frozen = np.frombuffer(b"\x00\x00\x80\x3f" * 3, dtype=np.float32)  # memory numpy cannot write
    assert dt.as_tensor(frozen).tolist() == [1.0, 1.0, 1.0]
    assert (dt.ones(3) + frozen).tolist() == [2.0, 2.0, 2.0]  # an operand is only read


def test_as_tensor_shares_when_it_can():
    require_numpy()
    for dtype, name in DTYPE_PAIRS:
        a = sample(name)
        t = dt.as_tensor(a)
        assert t.dtype == dtype and t.data_ptr() == a.ctypes.data, name
        same = dt.as_tensor(a, dtype=dtype, device="cpu")
        assert same.data_ptr() == a.ctypes.data, name
    a = np.arange(4, dtype=np.int64)
    converted = dt.as_tensor(a, dtype=dt.float32)
    assert converted.dtype == dt.float32 and converted.tolist() == [0.0, 1.0, 2.0, 3.0]
    converted[0] = 5
    assert a[0] == 0  # a converted dtype is a copy
    assert_raises(ValueError, dt.as_tensor, a[::-1], match=("negative",))  # as PyTorch 1.13


def test_as_tensor_of_tensors_and_python_data():
    x = dt.arange(4)
    assert dt.as_tensor(x) is x
    assert dt.as_tensor(x, dtype=dt.int64) is x
    y = dt.as_tensor(x, dtype=dt.float64)
    assert y.dtype == dt.float64 and y.tolist() == [0.0, 1.0, 2.0, 3.0]
    z = dt.as_tensor([[1, 2], [3, 4]])
    assert z.dtype == dt.int64 and z.tolist() == [[1, 2], [3, 4]]
    w = dt.as_tensor([1, 2.5], dtype=dt.float64)
    assert w.dtype == dt.float64 and w.tolist() == [1.0, 2.5]
    assert dt.as_tensor(3.5).dtype == dt.float32
    assert_raises(ValueError, dt.as_tensor, [1, 2], dtype="int8x", match=("unknown dtype 'int8x'",))


def test_numpy_method_shares_memory_and_refuses_grad():
    require_numpy()
    for dtype, name in DTYPE_PAIRS:
        t = dt.from_numpy(sample(name))
        a = t.numpy()
        assert a.dtype == np.dtype(name) and a.tolist() == t.tolist() and a.flags.writeable, name
        a[2, 3] = one_value(name)
        assert t[2, 3].item() == a[2, 3], name
    x = dt.ones(3, requires_grad=True)
    assert_raises(RuntimeError, x.numpy,
                  match=("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.",))
    assert_raises(RuntimeError, np.asarray, x, match=("Can't call numpy() on Tensor that requires grad",))
    assert x.detach().numpy().tolist() == [1.0, 1.0, 1.0]
    assert x.numpy(force=True).tolist() == [1.0, 1.0, 1.0]
    with dt.no_grad():
        assert x.numpy().tolist() == [1.0, 1.0, 1.0]  # PyTorch checks grad mode too
    view = dt.arange(12.0).reshape(3, 4).t()
    assert view.numpy().tolist() == np.arange(12.0).reshape(3, 4).T.tolist()


def test_array_protocol_respects_dtype():
    require_numpy()
    t = dt.tensor([1.5, -2.0, 3.25])
    a = np.asarray(t)
    assert a.dtype == np.float32 and a.ctypes.data == t.data_ptr()
    b = np.asarray(t, dtype=np.float64)
    assert b.dtype == np.float64 and b.tolist() == [1.5, -2.0, 3.25]
    c = np.array(t, dtype=np.int32)
    assert c.dtype == np.int32 and c.tolist() == [1, -2, 3]
    assert np.asarray(t, dtype=np.float32).ctypes.data == t.data_ptr()  # same dtype: no copy


# (tensor dtype, array dtype) -> the dtype PyTorch 1.13 gives for tensor + array (the array is a
# tensor there, dimensioned or 0-d).
PROMOTIONS = (
    ("float32", "float64", (3,), dt.float64),
    ("float32", "float16", (3,), dt.float32),
    ("int32", "int64", (3,), dt.int64),
    ("int32", "float16", (3,), dt.float16),
    ("bool", "int32", (3,), dt.int32),
    ("float32", "float64", (), dt.float32),  # a 0-d array does not widen a dimensioned tensor
    ("int32", "float64", (), dt.float64),    # ... except across categories, as a 0-d tensor
    ("int64", "int32", (), dt.int64),
)


def test_operators_take_arrays_on_either_side():
    require_numpy()
    seed(1901)
    x_np = (np.random.default_rng(3).standard_normal((2, 3)) + 3).astype(np.float32)
    a = (np.random.default_rng(4).standard_normal((2, 3)) + 3).astype(np.float32)
    x = dt.tensor(x_np)
    cases = (("+", lambda p, q: p + q), ("-", lambda p, q: p - q), ("*", lambda p, q: p * q),
             ("/", lambda p, q: p / q), ("**", lambda p, q: p ** q), ("<", lambda p, q: p < q),
             ("<=", lambda p, q: p <= q), ("==", lambda p, q: p == q), ("!=", lambda p, q: p != q),
             (">", lambda p, q: p > q), (">=", lambda p, q: p >= q))
    for name, op in cases:
        for left, right, ref in ((x, a, op(x_np, a)), (a, x, op(a, x_np))):
            got = op(left, right)
            assert isinstance(got, dt.Tensor), (name, type(got))
            assert got.tolist() == ref.tolist() if ref.dtype == bool else np.allclose(got.numpy(), ref, rtol=1e-6), name
    assert_raises(TypeError, lambda: dt.add(x, a))  # functions take tensors, as PyTorch's


def test_operator_promotion_with_arrays_follows_pytorch():
    require_numpy()
    for t_dtype, a_dtype, shape, want in PROMOTIONS:
        t = dt.from_numpy(np.ones(3, dtype=t_dtype))
        a = np.ones(shape, dtype=a_dtype)
        for got in (t + a, a + t):
            assert got.dtype == want, (t_dtype, a_dtype, shape, got.dtype)
            assert got.tolist() == [2, 2, 2] or got.tolist() == [True] * 3


def test_numpy_scalars_are_numbers():
    require_numpy()
    ti = dt.tensor([1, 2, 3], dtype=dt.int32)
    t = dt.tensor([1.0, 2.0, 3.0])
    for value, want_int, want_float in ((np.float64(2), dt.float32, dt.float32), (np.float32(2), dt.float32, dt.float32),
                                        (np.int64(2), dt.int32, dt.float32), (np.int8(2), dt.int32, dt.float32),
                                        (np.bool_(True), dt.int32, dt.float32)):
        for got, want in ((ti + value, want_int), (value + ti, want_int), (t * value, want_float),
                          (value * t, want_float)):
            assert isinstance(got, dt.Tensor) and got.dtype == want, (type(value), got.dtype, want)
    assert (ti + np.bool_(True)).tolist() == [2, 3, 4]
    assert (np.float64(0.5) * t).tolist() == [0.5, 1.0, 1.5]
    assert (t < np.float32(2.5)).tolist() == [True, True, False]


def test_inplace_operators_take_arrays():
    require_numpy()
    t = dt.tensor([1.0, 2.0, 3.0])
    before = t.data_ptr()
    t += np.array([1.0, 1.0, 1.0])
    t *= np.float64(2)
    assert t.tolist() == [4.0, 6.0, 8.0] and t.data_ptr() == before and t.dtype == dt.float32
    ti = dt.tensor([1, 2])

    def add_float(other):
        nonlocal ti
        ti += other

    # float into an int tensor: the error a float64 tensor operand gives.
    assert_raises(TypeError, add_float, dt.tensor([0.5, 0.5], dtype=dt.float64), match=("Double", "Long"))
    assert_raises(TypeError, add_float, np.array([0.5, 0.5]), match=("Double", "Long"))
    assert ti.tolist() == [1, 2]


# ---- the default dtype --------------------------------------------------------------------

FACTORIES = (
    ("zeros", lambda: dt.zeros(2)), ("ones", lambda: dt.ones(2)), ("empty", lambda: dt.empty(2)),
    ("full", lambda: dt.full((2,), 1.5)), ("rand", lambda: dt.rand(2)), ("randn", lambda: dt.randn(2)),
    ("tensor", lambda: dt.tensor([1.5, 2.0])), ("tensor scalar", lambda: dt.tensor(2.5)),
    ("arange", lambda: dt.arange(0.0, 1.0, 0.25)), ("linspace", lambda: dt.linspace(0, 1, 5)),
    ("int * float", lambda: dt.tensor([1, 2]) * 2.5), ("int / int", lambda: dt.tensor([1, 2]) / 2),
)


def test_default_dtype_types_float_factories():
    assert dt.get_default_dtype() == dt.float32
    try:
        for default in (dt.float64, dt.float16, dt.float32):
            dt.set_default_dtype(default)
            assert dt.get_default_dtype() == default
            for name, make in FACTORIES:
                assert make().dtype == default, (name, default, make().dtype)
            assert dt.tensor([1, 2]).dtype == dt.int64 and dt.arange(3).dtype == dt.int64
            assert dt.zeros(2, dtype=dt.float32).dtype == dt.float32
            assert dt.full((2,), 3).dtype == dt.int64 and dt.full((2,), True).dtype == dt.bool
    finally:
        dt.set_default_dtype(dt.float32)
    assert dt.tensor([1.0 / 3]).item() != 1.0 / 3  # float32 again


def test_set_default_dtype_refuses_non_floating_types():
    for bad in (dt.int32, dt.int64, dt.bool):
        assert_raises(TypeError, dt.set_default_dtype, bad,
                      match=("only floating-point types are supported as the default type",))
    assert_raises(TypeError, dt.set_default_dtype, "float64")
    assert dt.get_default_dtype() == dt.float32


def test_compiled_code_follows_a_changed_default_dtype():
    def f(x):
        return x * 2.5 + dt.ones(3)

    for backend in ("eager", "cpu"):
        dt.reset()
        jf = dt.jit(f, backend=backend)
        x = dt.tensor([1, 2, 3])
        try:
            assert jf(x).dtype == dt.float32
            dt.set_default_dtype(dt.float64)
            got = jf(x)
            assert got.dtype == dt.float64 and got.tolist() == [3.5, 6.0, 8.5], (backend, got.dtype)
            reasons = " ".join(dt.stats()["recompile_reasons"])
            assert "get_default_dtype(): expected float32, actual float64" in reasons, reasons
        finally:
            dt.set_default_dtype(dt.float32)
        assert jf(x).dtype == dt.float32


# ---- under dt.jit --------------------------------------------------------------------------

def interop_body(a, b):
    t = dt.from_numpy(a)
    u = dt.as_tensor(b, dtype=dt.float64)
    s = (t * 2 + u).sum()
    n = (t + a).numpy()
    return s, n, t + 1


def test_interop_under_jit_matches_cpython():
    require_numpy()
    from jitlib import fresh_copy
    for backend in ("eager", "cpu"):
        dt.reset()
        plain = fresh_copy(interop_body)
        jf = dt.jit(fresh_copy(interop_body), backend=backend)
        for i in range(3):
            a = np.arange(6, dtype=np.float64).reshape(2, 3) + i
            b = [[1.5 * i, 2, 3], [4, 5, 6]]
            want = plain(a.copy(), b)
            a_jit = a.copy()
            got = jf(a_jit, b)
            assert got[0].dtype == want[0].dtype and got[0].item() == want[0].item(), backend
            assert isinstance(got[1], np.ndarray) and got[1].tolist() == want[1].tolist(), backend
            assert got[2].tolist() == want[2].tolist(), backend
            got[2][0, 0] = -1  # t + 1 is a new tensor; `a` is untouched
            assert a_jit.tolist() == a.tolist()
    reasons = [b["reason"] for b in dt.explain(fresh_copy(interop_body), np.ones((2, 3)), [[1.0] * 3] * 2).breaks]
    assert any("from_numpy" in r for r in reasons) and any("as_tensor" in r for r in reasons), reasons
    assert any("numpy arrays are not traced values" in r for r in reasons), reasons


def scale_by_array(x, a):
    return x * a + 1


def test_array_operands_under_jit_are_not_baked_in():
    require_numpy()
    from jitlib import fresh_copy
    for backend in ("eager", "cpu"):
        dt.reset()
        jf = dt.jit(fresh_copy(scale_by_array), backend=backend)
        for a in (np.array(2.0), np.array(3.0), np.array([2.0, 4.0]), np.array([1, 5], dtype=np.int32)):
            x = dt.tensor([1, 2], dtype=dt.int32)
            want = scale_by_array(x, a)
            got = jf(x, a)
            assert got.dtype == want.dtype and got.tolist() == want.tolist(), (backend, a, got, want)


def test_cuda_tensors_and_numpy():
    from test_cuda_runtime import run_with_fake_driver
    out = run_with_fake_driver("""
        x = dt.ones(2, device='cuda')
        try:
            x.numpy()
        except TypeError as e:
            print(e)
        """)
    assert ("can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host "
            "memory first.") in out, out
    require_numpy()
    out = run_with_fake_driver("""
        import numpy as np
        print(dt.ones(2, device='cuda').numpy(force=True).tolist())
        a = np.arange(3.0)
        t = dt.as_tensor(a, device='cuda')
        print(t.device, t.dtype, t.cpu().tolist())
        print(t.cpu().numpy().tolist() == a.tolist())
        """)
    assert "[1.0, 1.0]" in out and "cuda:0 dyntrace.float64 [0.0, 1.0, 2.0]" in out and "True" in out, out
