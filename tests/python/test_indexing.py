"""Basic indexing (ints, slices with step > 0, None, Ellipsis) checked against Python list
indexing of tolist(), and __setitem__ with scalars and broadcast tensors."""
import dyntrace as dt
from testlib import (ALL_DTYPES, assert_equal, assert_raises, np, noncontig, rand_tensor, seed)


def _pyindex(nested, key):
    """Python-list model of basic indexing (no None/Ellipsis)."""
    if not isinstance(key, tuple):
        key = (key,)
    if not key:
        return nested
    k, rest = key[0], key[1:]
    if isinstance(k, int):
        return _pyindex(nested[k], rest)
    return [_pyindex(item, rest) for item in nested[k]]


KEYS = [0, -1, 2, slice(None), slice(1, None), slice(None, 3), slice(None, None, 2),
        slice(1, 5, 3), slice(-3, None), slice(-100, 100), slice(4, 2), slice(1, 4, 10),
        (1, 2), (-1, slice(None, None, 2)), (slice(None), 0), (slice(1, 3), slice(0, 4, 2), -1),
        (2, 3, 4), (slice(None, None, 3), slice(None), slice(2, None, 2))]


def test_basic_int_slice_indexing():
    seed(8001)
    for dtype in ALL_DTYPES:
        x = rand_tensor((5, 6, 7), dtype)
        xs = x.tolist()
        for key in KEYS:
            got = x[key]
            want = _pyindex(xs, key)
            if isinstance(want, list):
                assert got.tolist() == want, key
            else:
                assert got.shape == () and got.item() == want, key
            assert got.dtype == dtype


def test_indexing_numpy_agrees():
    seed(8002)
    x = rand_tensor((4, 5, 6), dt.float64)
    keys = KEYS + [(None,), (None, 1), (Ellipsis, 2), (1, Ellipsis), (Ellipsis,), (slice(None), None, 1),
                   (1, None, slice(None, None, 2), None), (Ellipsis, None), (None, Ellipsis, None)]
    for key in keys:
        got = x[key]
        if np is not None:
            want = np.array(x.tolist())[key]
            assert got.shape == want.shape, (key, got.shape, want.shape)
            assert got.tolist() == want.tolist(), key
        else:
            assert got.ndim <= 5


def test_none_and_ellipsis_shapes():
    x = dt.zeros(2, 3, 4)
    assert x[None].shape == (1, 2, 3, 4)
    assert x[:, None].shape == (2, 1, 3, 4)
    assert x[..., None].shape == (2, 3, 4, 1)
    assert x[None, ..., None].shape == (1, 2, 3, 4, 1)
    assert x[..., 0].shape == (2, 3)
    assert x[0, ...].shape == (3, 4)
    assert x[0, ..., 1].shape == (3,)
    assert x[...].shape == (2, 3, 4)
    assert x[1, None, 2].shape == (1, 4)
    s = dt.tensor(5.0)
    assert s[...].shape == () and s[None].shape == (1,)
    assert s[()].item() == 5.0


def test_index_results_are_views():
    x = dt.zeros(4, 5)
    row = x[1]
    row[2] = 7.0
    assert x[1, 2].item() == 7.0
    col = x[:, 3]
    col += 1.0
    assert x[:, 3].tolist() == [1.0, 1.0, 1.0, 1.0]
    strided = x[::2, 1::2]
    assert strided.stride() == (10, 2)
    strided.mul_(0).add_(3)
    want = [[0.0] * 5 for _ in range(4)]
    want[1][2] = 7.0
    for r in want:
        r[3] += 1.0
    for i in (0, 2):
        for j in (1, 3):
            want[i][j] = 3.0
    assert x.tolist() == want


def test_setitem_scalar_and_tensor():
    seed(8003)
    for dtype in ALL_DTYPES:
        x = rand_tensor((4, 6), dtype)
        ref = x.tolist()
        v = {dt.bool: True}.get(dtype, 3 if dtype in (dt.int32, dt.int64) else 2.5)
        x[1, 2] = v
        ref[1][2] = v
        x[2] = v
        ref[2] = [v] * 6
        x[:, ::3] = v
        for r in ref:
            r[0] = v
            r[3] = v
        assert x.tolist() == ref
        src = rand_tensor((6,), dtype)
        x[3] = src
        ref[3] = src.tolist()
        assert x.tolist() == ref
        col = rand_tensor((2, 1), dtype)
        x[1:3, 4:] = col  # broadcast [2,1] -> [2,2]
        for i in (1, 2):
            ref[i][4] = ref[i][5] = col.tolist()[i - 1][0]
        assert x.tolist() == ref


def test_setitem_casts_and_broadcasts():
    x = dt.zeros(3, 4, dtype=dt.int32)
    x[0] = dt.tensor([1, 2, 3, 4], dtype=dt.int64)
    x[1] = 7
    x[2, 1:] = dt.tensor(5)
    assert x.tolist() == [[1, 2, 3, 4], [7, 7, 7, 7], [0, 5, 5, 5]]
    f = dt.zeros(2, 3)
    f[...] = dt.tensor([1.0, 2.0, 3.0])
    assert f.tolist() == [[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]]
    f[:, None, 0] = 9.0
    assert f[:, 0].tolist() == [9.0, 9.0]
    h = dt.zeros(2, dtype=dt.float16)
    h[0] = 1.0 / 3.0
    assert abs(h[0].item() - 1.0 / 3.0) < 1e-3
    # assigning from an overlapping view of itself
    t = dt.arange(6)
    t[1:] = t[:5].clone()
    assert t.tolist() == [0, 0, 1, 2, 3, 4]
    # source non-contiguous
    s = noncontig((3, 4), dt.float32, "transposed")
    d = dt.zeros(3, 4)
    d[:] = s
    assert d.tolist() == s.tolist()


def test_iteration_and_len_follow_dim0():
    seed(8004)
    x = rand_tensor((3, 4))
    assert len(x) == 3
    rows = list(x)
    assert len(rows) == 3 and all(r.shape == (4,) for r in rows)
    assert [r.tolist() for r in rows] == x.tolist()
    rows[0][0] = 42.0
    assert x[0, 0].item() == 42.0
    assert [v.item() for v in dt.arange(4)] == [0, 1, 2, 3]
    assert len(dt.zeros(0, 3)) == 0 and list(dt.zeros(0, 3)) == []


def test_indexing_errors():
    x = dt.zeros(3, 4)
    assert_raises(IndexError, lambda: x[3], match="3")
    assert_raises(IndexError, lambda: x[-4])
    assert_raises(IndexError, lambda: x[0, 0, 0])
    assert_raises(IndexError, lambda: x[..., ...])
    assert_raises(ValueError, lambda: x[::-1], match="step")
    assert_raises(ValueError, lambda: x[::0])
    assert_raises(TypeError, lambda: x[1.5])
    assert_raises(TypeError, lambda: x["a"])
    assert_raises(TypeError, lambda: x[0:1.5])
    assert_raises(IndexError, lambda: dt.tensor(1.0)[0])

    def assign_bad_shape():
        x[0] = dt.ones(3)
    assert_raises(dt.ShapeError, assign_bad_shape)

    def delete():
        del x[0]
    assert_raises(TypeError, delete)

    def assign_str():
        x[0] = "a"
    assert_raises(TypeError, assign_str)


def test_index_with_tensor_scalars_and_numpy_ints():
    x = dt.arange(10)
    assert x[int(dt.tensor(3))].item() == 3
    assert x[dt.tensor(2):dt.tensor(5)].tolist() == [2, 3, 4]
    if np is not None:
        assert x[np.int64(4)].item() == 4
        assert x[np.int32(1):np.int32(3)].tolist() == [1, 2]
    assert_raises(TypeError, lambda: x[dt.tensor(1.0):])
