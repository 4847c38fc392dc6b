"""DLPack: zero-copy exchange with numpy both ways (writes through shared memory are visible,
producers stay alive after `del`), and dyntrace-to-dyntrace round trips where numpy is absent."""
import gc

import dyntrace as dt
from testlib import ALL_DTYPES, FLOAT_DTYPES, np, assert_raises, noncontig, rand_tensor, require_numpy, seed


def test_dlpack_device_and_capsule():
    x = dt.ones(3)
    assert x.__dlpack_device__() == (1, 0)  # kDLCPU, device 0
    cap = x.__dlpack__()
    assert type(cap).__name__ == "PyCapsule"
    y = dt.from_dlpack(cap)
    assert y.tolist() == [1.0, 1.0, 1.0] and y.data_ptr() == x.data_ptr()
    assert_raises(ValueError, dt.from_dlpack, cap)  # a capsule is consumed once
    del cap
    gc.collect()


def test_dyntrace_roundtrip_shares_memory_all_dtypes():
    seed(12001)
    for dtype in ALL_DTYPES:
        x = rand_tensor((4, 5), dtype)
        y = dt.from_dlpack(x)
        assert y.dtype == dtype and y.shape == x.shape and y.tolist() == x.tolist()
        assert y.data_ptr() == x.data_ptr()
        y[1, 2] = True if dtype == dt.bool else 7
        assert x[1, 2].item() == y[1, 2].item()
        x[0] = False if dtype == dt.bool else 0
        assert y[0].tolist() == x[0].tolist()


def test_roundtrip_keeps_strides_and_offset():
    seed(12002)
    for kind in ("transposed", "strided"):
        x = noncontig((3, 4), dt.float32, kind)
        y = dt.from_dlpack(x)
        assert y.shape == x.shape and y.stride() == x.stride() and y.tolist() == x.tolist()
    base = dt.arange(20).reshape(4, 5)
    view = base[1:, 2:]
    y = dt.from_dlpack(view)
    assert y.tolist() == view.tolist()
    y[0, 0] = -1
    assert base[1, 2].item() == -1


def test_producer_kept_alive_after_del():
    seed(12003)
    x = rand_tensor((1000,), dt.float64)
    want = x.tolist()
    y = dt.from_dlpack(x)
    del x
    gc.collect()
    rand_tensor((1000,), dt.float64)  # reuse freed memory if it had been freed
    assert y.tolist() == want
    require_numpy()
    a = np.arange(1000, dtype=np.float64)
    t = dt.from_dlpack(a)
    del a
    gc.collect()
    np.ones(1000)
    assert t.tolist() == [float(i) for i in range(1000)]
    t2 = dt.arange(50, dtype=dt.float32)
    b = np.from_dlpack(t2)
    del t2
    gc.collect()
    dt.zeros(50)
    assert b.tolist() == [float(i) for i in range(50)]


def test_numpy_to_dyntrace_zero_copy():
    x = dt.zeros(3, 3)
    y = dt.from_dlpack(x.T)
    y[0, 1] = 4.0
    assert x[1, 0].item() == 4.0
    require_numpy()
    for npt, dtype in ((np.float32, dt.float32), (np.float64, dt.float64), (np.float16, dt.float16),
                       (np.int32, dt.int32), (np.int64, dt.int64)):
        a = np.arange(12).astype(npt).reshape(3, 4)
        t = dt.from_dlpack(a)
        assert t.dtype == dtype and t.shape == (3, 4) and t.tolist() == a.tolist()
        t[1, 1] = 42
        assert a[1, 1] == 42
        a[2, 3] = 9
        assert t[2, 3].item() == 9
        t += 1
        assert a[0, 0] == 1
    # non-contiguous numpy views keep their strides
    a = np.arange(24, dtype=np.float64).reshape(4, 6)
    t = dt.from_dlpack(a[:, ::2].T)
    assert t.shape == (3, 4) and t.tolist() == a[:, ::2].T.tolist()
    assert t.stride() == (2, 6)
    t[0, 0] = -5.0
    assert a[0, 0] == -5.0


def test_dyntrace_to_numpy_zero_copy():
    if np is None:
        assert_raises(ImportError, dt.ones(4).numpy)
    require_numpy()
    for dtype in FLOAT_DTYPES + (dt.int32, dt.int64):
        t = dt.arange(6, dtype=dtype).reshape(2, 3)
        a = t.numpy()
        assert a.shape == (2, 3) and a.tolist() == t.tolist()
        a[0, 1] = 11
        assert t[0, 1].item() == 11
        t[1, 2] = 5
        assert a[1, 2] == 5
        assert a.flags.writeable and a.base is not None
        b = np.from_dlpack(t)  # read-only under numpy < 2.1, but shared
        t[1, 0] = 8
        assert b[1, 0] == 8
    b = dt.tensor([True, False, True])
    a = b.numpy()
    assert a.dtype == np.bool_ and a.tolist() == [True, False, True]
    a[1] = True
    assert b.tolist() == [True, True, True]
    t = dt.zeros(3, 4).T
    a = t.numpy()
    assert a.shape == (4, 3) and a.strides == (4, 16)
    a[3, 2] = 1.0
    assert t[3, 2].item() == 1.0
    arr = np.asarray(dt.ones(2, 2))
    assert arr.shape == (2, 2) and arr.dtype == np.float32
    assert np.asarray(dt.ones(2), dtype=np.float64).dtype == np.float64


def test_numpy_ufuncs_on_tensors():
    assert dt.from_dlpack(dt.ones(2)).sum().item() == 2.0
    require_numpy()
    t = dt.tensor([1.0, 4.0, 9.0])
    assert np.sqrt(t.numpy()).tolist() == [1.0, 2.0, 3.0]
    # __array_priority__ makes mixed operators produce tensors
    r = np.float64(2.0) * t
    assert isinstance(r, dt.Tensor)
    assert r.tolist() == [2.0, 8.0, 18.0]


def test_from_dlpack_errors():
    assert_raises(TypeError, dt.from_dlpack, [1, 2, 3])
    assert_raises(TypeError, dt.from_dlpack, 3.0)
