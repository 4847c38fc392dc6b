"""uint8, int8 and int16: PyTorch's promotion table (checked against torch itself where it imports,
and against the table written from PyTorch 1.13 here), eager arithmetic, casts and reductions
against numpy (wrap-around included, as both do), dt.jit on the eager and cpu backends, DLPack
round trips and numpy interop."""
import dyntrace as dt
from jitlib import check_compiled
from testlib import assert_raises, np, require_numpy, skip

NAMES = ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64")
SMALL = ("uint8", "int8", "int16")

# torch.promote_types(row, column) in PyTorch 1.13, columns in NAMES order.
PYTORCH_TABLE = {
    'bool': ('bool', 'uint8', 'int8', 'int16', 'int32', 'int64', 'float16', 'float32', 'float64'),
    'uint8': ('uint8', 'uint8', 'int16', 'int16', 'int32', 'int64', 'float16', 'float32', 'float64'),
    'int8': ('int8', 'int16', 'int8', 'int16', 'int32', 'int64', 'float16', 'float32', 'float64'),
    'int16': ('int16', 'int16', 'int16', 'int16', 'int32', 'int64', 'float16', 'float32', 'float64'),
    'int32': ('int32', 'int32', 'int32', 'int32', 'int32', 'int64', 'float16', 'float32', 'float64'),
    'int64': ('int64', 'int64', 'int64', 'int64', 'int64', 'int64', 'float16', 'float32', 'float64'),
    'float16': ('float16', 'float16', 'float16', 'float16', 'float16', 'float16', 'float16', 'float32',
                'float64'),
    'float32': ('float32', 'float32', 'float32', 'float32', 'float32', 'float32', 'float32', 'float32',
                'float64'),
    'float64': ('float64',) * 9,
}


def dtype(name):
    return getattr(dt, name)


def promoted(a, b):
    x = dt.zeros(2, dtype=dtype(a))
    y = dt.zeros(2, dtype=dtype(b))
    return str(dt.maximum(x, y).dtype).split(".")[-1]


def test_promotion_matches_pytorch_table():
    for i, a in enumerate(NAMES):
        for j, b in enumerate(NAMES):
            assert promoted(a, b) == PYTORCH_TABLE[a][j], (a, b, promoted(a, b), PYTORCH_TABLE[a][j])


def test_promotion_matches_torch_when_it_imports():
    try:
        import torch
    except ImportError:
        skip("torch is not importable: the table written from PyTorch 1.13 was checked instead")
    for a in NAMES:
        for b in NAMES:
            want = str(torch.promote_types(getattr(torch, a), getattr(torch, b))).split(".")[-1]
            assert promoted(a, b) == want, (a, b)


def test_numbers_and_zero_dim_tensors_do_not_widen():
    for name in SMALL:
        x = dt.tensor([1, 2, 3], dtype=dtype(name))
        assert (x + 1000).dtype == dtype(name)
        assert (x * 2.5).dtype == dt.float32
        assert (x + dt.tensor(7, dtype=dt.int64)).dtype == dtype(name)
        assert (x + True).dtype == dtype(name)
    assert (dt.tensor([250], dtype=dt.uint8) + 10).tolist() == [4]  # wraps, as PyTorch and numpy
    assert (dt.tensor([127], dtype=dt.int8) + 1).tolist() == [-128]
    assert dt.iinfo(dt.uint8).max == 255 and dt.iinfo(dt.int8).min == -128
    assert dt.iinfo(dt.int16).bits == 16 and dt.iinfo(dt.int16).max == 32767


def test_names_methods_and_casts():
    assert dt.short == dt.int16 and repr(dt.uint8) == "dyntrace.uint8"
    x = dt.tensor([-3.7, 0.2, 100.9])
    assert x.byte().dtype == dt.uint8 and x.char().dtype == dt.int8 and x.short().dtype == dt.int16
    assert x.char().tolist() == [-3, 0, 100] and x.short().tolist() == [-3, 0, 100]
    assert x.to(dt.int16).element_size() == 2 and x.byte().element_size() == 1
    assert dt.tensor([1, 2], dtype=dt.int8).to(dt.float16).tolist() == [1.0, 2.0]


def rng_ints(name, shape, low, high, seed):
    return np.random.default_rng(seed).integers(low, high, size=shape).astype(name)


OPS = (
    ("add", lambda p, q: p + q), ("sub", lambda p, q: p - q), ("mul", lambda p, q: p * q),
    ("floor_divide", lambda p, q: p // q), ("remainder", lambda p, q: p % q),
    ("maximum", lambda p, q: dt.maximum(p, q) if isinstance(p, dt.Tensor) else np.maximum(p, q)),
    ("lt", lambda p, q: p < q), ("eq", lambda p, q: p == q),
)


def test_eager_arithmetic_matches_numpy():
    require_numpy()
    for name in SMALL:
        low, high = {"uint8": (0, 256), "int8": (-128, 128), "int16": (-32768, 32768)}[name]
        a = rng_ints(name, (4, 5), low, high, 1)
        b = rng_ints(name, (4, 5), low, high, 2)
        b[b == 0] = 3
        x, y = dt.from_numpy(a.copy()), dt.from_numpy(b.copy())
        with np.errstate(over="ignore"):
            for op_name, op in OPS:
                got, want = op(x, y), op(a, b)
                assert got.dtype == (dt.bool if want.dtype == bool else dtype(name)), (name, op_name, got.dtype)
                assert got.tolist() == want.tolist(), (name, op_name)
            assert (-x).tolist() == (-a).tolist(), name
            assert abs(x).tolist() == np.abs(a).tolist(), name
            div = x / y
            assert div.dtype == dt.float32 and div.tolist() == (a.astype(np.float32) / b.astype(np.float32)).tolist()
        assert x.sum().dtype == dt.int64 and x.sum().item() == int(a.astype(np.int64).sum()), name
        assert x.sum(1).tolist() == a.astype(np.int64).sum(1).tolist(), name
        assert x.amax(0).dtype == dtype(name) and x.amax(0).tolist() == a.max(0).tolist(), name
        assert x.to(dt.float32).tolist() == a.astype(np.float32).tolist(), name
        assert x.to(dt.int64).tolist() == a.astype(np.int64).tolist(), name
        assert dt.from_numpy(a.astype(np.float64)).to(dtype(name)).tolist() == a.tolist(), name


def mixed(a, b, c):
    return ((a + b) * 3 - c // b, (a < c).sum(), a.to(dt.float32) / 4 + b, dt.maximum(a, c) % 5, a.amax(0),
            a.amin(1), -c)


def factory_for(name):
    def make(i):
        lo = 0 if name == "uint8" else -50
        a = dt.randint(lo, 50, (3, 4)).to(dtype(name))
        b = dt.randint(1, 9, (3, 4)).to(dtype(name))
        c = dt.randint(lo, 50, (4,)).to(dtype(name))
        return a, b, c
    return make


def test_compiled_matches_eager():
    for name in SMALL:
        check_compiled(mixed, factory_for(name))
    # uint8 with int8 promotes to int16 inside the compiled graph as well.
    check_compiled(lambda a, b: a * 2 + b,
                   lambda i: (dt.randint(0, 200, (5,)).to(dt.uint8), dt.randint(-100, 100, (5,)).to(dt.int8)))


def test_dlpack_round_trip():
    for name in SMALL:
        x = dt.tensor([1, 2, 3], dtype=dtype(name))
        y = dt.from_dlpack(x)
        assert y.dtype == x.dtype and y.data_ptr() == x.data_ptr() and y.tolist() == [1, 2, 3]
    require_numpy()
    for name in SMALL:
        a = np.array([5, 6, 7], dtype=name)
        t = dt.from_dlpack(a)
        assert t.dtype == dtype(name) and t.tolist() == [5, 6, 7], name
        back = np.from_dlpack(dt.tensor([9, 8], dtype=dtype(name)))
        assert back.dtype == np.dtype(name) and back.tolist() == [9, 8], name


def test_numpy_interop():
    require_numpy()
    for name in SMALL:
        a = np.array([[1, 2], [3, 4]], dtype=name)
        t = dt.from_numpy(a)
        assert t.dtype == dtype(name) and t.data_ptr() == a.ctypes.data
        t[0, 0] = 9
        assert a[0, 0] == 9
        n = t.numpy()
        assert n.dtype == np.dtype(name) and n.tolist() == a.tolist()
        assert dt.tensor(a).dtype == dtype(name)
    assert_raises(TypeError, dt.from_numpy, np.zeros(2, dtype=np.uint16), match=("numpy.uint16",))


NVRTC_CHILD = """
import dyntrace as dt
def f(a, b):
    return (a + b) * 3 - a // b, a.amax(0), (a < b).sum(), a.to(dt.float32) / 4, -b
for d in (dt.uint8, dt.int8, dt.int16):
    g = dt.jit(f, backend="cpu")
    a = dt.randint(1, 50, (3, 70)).to(d)
    b = dt.randint(1, 9, (3, 70)).to(d)
    g(a, b)
    sources = dt.kernels(g, target="cuda")
    assert any(str(d).split(".")[-1] + "_t" in s for s in sources), sources
s = dt.stats()
print("NVRTC", s["nvrtc_checked"], s["nvrtc_failures"])
"""


def test_cuda_kernels_for_small_ints_compile_with_nvrtc():
    from cpulib import assert_cuda_kernels_compile
    assert_cuda_kernels_compile(NVRTC_CHILD)
