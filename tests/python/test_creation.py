"""Creation ops: zeros/ones/empty/full/arange/linspace/rand/randn (+ *_like), tensor()."""
import math

import dyntrace as dt
from testlib import (ALL_DTYPES, FLOAT_DTYPES, INT_DTYPES, np, assert_close, assert_equal,
                     assert_raises, rand_tensor, seed)


def test_zeros_ones_full_empty_all_dtypes():
    for dtype in ALL_DTYPES:
        for shape in ((), (1,), (7,), (3, 5), (2, 0, 4), (33, 2)):
            n = 1
            for s in shape:
                n *= s
            z = dt.zeros(shape, dtype=dtype)
            assert z.shape == shape and z.dtype == dtype and z.is_contiguous()
            assert z.numel() == n
            assert z.sum().item() == 0
            o = dt.ones(*shape, dtype=dtype) if shape else dt.ones((), dtype=dtype)
            assert o.shape == shape and o.dtype == dtype
            assert o.sum().item() == n
            e = dt.empty(shape, dtype=dtype)
            assert e.shape == shape and e.dtype == dtype
        fill = {dt.bool: True}.get(dtype, 7 if dtype in INT_DTYPES else 0.25)
        f = dt.full((2, 3), fill, dtype=dtype)
        assert f.dtype == dtype and f.tolist() == [[fill] * 3] * 2
    assert dt.zeros(4).dtype == dt.float32
    assert dt.ones([2, 2]).shape == (2, 2)
    assert dt.zeros(()).shape == ()
    assert dt.full([3], -1.5).tolist() == [-1.5] * 3


def test_like_variants():
    seed(9001)
    for dtype in ALL_DTYPES:
        x = rand_tensor((3, 4), dtype).T
        for name, value in (("zeros_like", 0), ("ones_like", 1)):
            y = getattr(dt, name)(x)
            assert y.shape == (4, 3) and y.dtype == dtype
            assert all(v == value for r in y.tolist() for v in r)
        assert dt.empty_like(x).shape == (4, 3)
        f = dt.full_like(x, 1)
        assert f.dtype == dtype and f.sum().item() == 12
        z = dt.zeros_like(x, dtype=dt.float64)
        assert z.dtype == dt.float64
    for dtype in FLOAT_DTYPES:
        x = dt.zeros(5, 6, dtype=dtype)
        r = dt.rand_like(x)
        assert r.dtype == dtype and r.shape == (5, 6)
        assert dt.randn_like(x).shape == (5, 6)
    assert_raises(TypeError, dt.rand_like, dt.zeros(2, dtype=dt.int64))


def test_arange_matches_python_range():
    cases = [(5,), (0,), (2, 9), (-3, 4), (0, 10, 3), (10, 0, -3), (5, 5), (-7, -2, 2), (1, 1000, 7)]
    for args in cases:
        t = dt.arange(*args)
        assert t.dtype == dt.int64
        assert t.tolist() == list(range(*args)), args
    for dtype in INT_DTYPES + FLOAT_DTYPES:
        t = dt.arange(0, 12, 2, dtype=dtype)
        assert t.dtype == dtype and t.tolist() == [0, 2, 4, 6, 8, 10]


def test_arange_float_steps():
    cases = [(0.0, 1.0, 0.1), (1.5,), (-1.0, 1.0, 0.25), (0, 2, 0.3), (3.0, 0.0, -0.7), (0.5, 7)]
    for args in cases:
        t = dt.arange(*args, dtype=dt.float64)
        start, end, step = (0.0, args[0], 1.0) if len(args) == 1 else (args + (1.0,))[:3]
        n = max(0, math.ceil((end - start) / step))
        want = [start + i * step for i in range(n)]
        assert_close(t, want, 1e-12, 1e-12)
        if np is not None:
            assert t.shape == np.arange(*args).shape
    assert dt.arange(0.0, 1.0, 0.1).dtype == dt.float32
    assert_raises(ValueError, dt.arange, 0, 10, 0)
    assert_raises(ValueError, dt.arange, 10, 0, 1)


def test_linspace():
    for start, end, steps in ((0, 1, 5), (-2.0, 3.5, 12), (1, 1, 3), (0, 10, 1), (5, -5, 11),
                              (0, 1, 0), (0.0, 1.0, 1001)):
        t = dt.linspace(start, end, steps, dtype=dt.float64)
        assert t.shape == (steps,)
        if steps == 0:
            continue
        step = (end - start) / (steps - 1) if steps > 1 else 0.0
        want = [start + i * step for i in range(steps)]
        assert_close(t, want, 1e-12, 1e-12)
        if steps > 1:
            assert t[-1].item() == end and t[0].item() == start
        if np is not None:
            assert_close(t, np.linspace(start, end, steps), 1e-12, 1e-12)
    assert dt.linspace(0, 1, 4).dtype == dt.float32
    assert dt.linspace(0, 10, 6, dtype=dt.int64).tolist() == [0, 2, 4, 6, 8, 10]
    assert_raises(ValueError, dt.linspace, 0, 1, -1)


def test_rand_range_and_reproducibility():
    for dtype in FLOAT_DTYPES:
        dt.manual_seed(9002)
        a = dt.rand(10000, dtype=dtype)
        dt.manual_seed(9002)
        b = dt.rand(10000, dtype=dtype)
        assert a.tolist() == b.tolist()
        c = dt.rand(10000, dtype=dtype)
        assert a.tolist() != c.tolist()
        assert a.amin().item() >= 0.0 and a.amax().item() <= 1.0
        if dtype != dt.float16:
            assert a.amax().item() < 1.0
        m = a.double().mean().item()
        assert abs(m - 0.5) < 0.02, m
        v = a.double().var().item()
        assert abs(v - 1.0 / 12.0) < 0.01, v
    dt.manual_seed(1)
    s1 = dt.rand(3, 4)
    dt.manual_seed(2)
    s2 = dt.rand(3, 4)
    assert s1.tolist() != s2.tolist()
    assert dt.rand(2, 3).shape == (2, 3) and dt.rand((2, 3)).dtype == dt.float32


def test_randn_statistics():
    for dtype in FLOAT_DTYPES:
        seed(9003)
        x = dt.randn(20000, dtype=dtype).double()
        m, s = x.mean().item(), x.std().item()
        assert abs(m) < 0.03, m
        assert abs(s - 1.0) < 0.03, s
        # about 68% within one sigma
        frac = (x.abs() < 1.0).double().mean().item()
        assert abs(frac - 0.6827) < 0.02, frac
    seed(9004)
    a = dt.randn(5, 5)
    seed(9004)
    assert dt.randn(5, 5).tolist() == a.tolist()


def test_tensor_from_python_data():
    assert dt.tensor([[1, 2], [3, 4]]).tolist() == [[1, 2], [3, 4]]
    assert dt.tensor([1.5, -2]).tolist() == [1.5, -2.0]
    assert dt.tensor([True, False]).tolist() == [True, False]
    assert dt.tensor(3.5).shape == () and dt.tensor(3.5).item() == 3.5
    assert dt.tensor([]).shape == (0,)
    assert dt.tensor([[], []]).shape == (2, 0)
    assert dt.tensor(((1, 2), (3, 4))).shape == (2, 2)
    assert dt.tensor([1, 2], dtype=dt.float16).dtype == dt.float16
    assert dt.tensor([1.7, -1.7], dtype=dt.int32).tolist() == [1, -1]
    assert dt.tensor([0, 2], dtype=dt.bool).tolist() == [False, True]
    assert dt.tensor([2 ** 40]).tolist() == [2 ** 40]
    x = dt.tensor([dt.tensor([1.0, 2.0]), dt.tensor([3.0, 4.0])])
    assert x.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    y = dt.tensor(x)
    y[0, 0] = 9.0
    assert x[0, 0].item() == 1.0  # tensor(t) copies
    assert dt.tensor(x, dtype=dt.int64).dtype == dt.int64
    assert dt.tensor([1, 2], device="cpu").device == dt.device("cpu")
    if np is not None:
        a = np.arange(6, dtype=np.float32).reshape(2, 3)
        t = dt.tensor(a)
        assert t.dtype == dt.float32 and t.tolist() == a.tolist()
        a[0, 0] = 100.0
        assert t[0, 0].item() == 0.0  # a copy, not a view
        assert dt.tensor(np.array([1, 2], dtype=np.int32)).dtype == dt.int32
        assert dt.tensor([np.float64(1.5), np.int64(2)]).tolist() == [1.5, 2.0]


def test_tensor_from_bad_data():
    assert_raises(ValueError, dt.tensor, [[1, 2], [3]])
    assert_raises(TypeError, dt.tensor, ["a"])
    assert_raises(TypeError, dt.tensor, [1, None])
    assert_raises(ValueError, dt.tensor, [2 ** 70], match="too large")
    assert dt.tensor([1.0], requires_grad=True).requires_grad
    assert_raises(RuntimeError, dt.tensor, [1], requires_grad=True)  # integer tensors can't require grad
    assert_raises(RuntimeError, dt.tensor, [1.0], device="cuda")
    assert_raises(Exception, dt.tensor, [1.0], dtype="floaty")


def test_creation_errors():
    assert_raises(ValueError, dt.zeros, -1, 2, match="-1")
    assert_raises(ValueError, dt.full, (2, -3), 1.0)
    assert_raises(TypeError, dt.zeros, 2.5)
    assert_raises(TypeError, dt.rand, 3, dtype=dt.int32, match="int32")
    assert_raises(TypeError, dt.randn, 3, dtype=dt.bool)
    assert_raises(RuntimeError, dt.zeros, 2, device="cuda")
    assert_raises(TypeError, dt.ones, 2, dtype=3)


def test_dtype_and_device_objects():
    assert dt.float32.itemsize == 4 and dt.float16.itemsize == 2 and dt.bool.itemsize == 1
    assert dt.float16.is_floating_point and not dt.int64.is_floating_point
    assert repr(dt.float64) == "dyntrace.float64"
    assert dt.float is dt.float32 and dt.double is dt.float64 and dt.half is dt.float16
    assert dt.long is dt.int64 and dt.int is dt.int32
    assert dt.zeros(2, dtype=float).dtype == dt.float32
    assert dt.zeros(2, dtype=int).dtype == dt.int64
    assert dt.zeros(2, dtype=bool).dtype == dt.bool
    d = dt.device("cpu")
    assert str(d) == "cpu" and d.type == "cpu" and d == dt.zeros(1).device
    assert repr(d) == "device(type='cpu')"
    assert {d: 1}[dt.device("cpu")] == 1
