"""Advanced indexing (`x[t]`, `x[:, t]`, `x[t1, t2]`, int lists, 0-d index tensors, `x[mask]`)
and writes through it (`x[t] = v`, `x[mask] = v`, index_put/index_put_), against numpy's fancy
indexing where PyTorch and numpy agree and against plain Python where they do not (an int or a
0-d index tensor selects first in PyTorch, so it never separates the other index tensors).
Values move without arithmetic, so every comparison is exact."""
import dyntrace as dt
from testlib import ALL_DTYPES, assert_raises, noncontig, np, rand_tensor, require_numpy, seed


def _np(t):
    return np.array(t.tolist(), dtype=np.float64 if t.is_floating_point() else None)


def _as_np_key(key):
    items = key if isinstance(key, tuple) else (key,)
    out = tuple(np.array(k.tolist(), dtype=bool if k.dtype == dt.bool else np.int64) if isinstance(k, dt.Tensor)
                else k for k in items)
    return out if isinstance(key, tuple) else out[0]


def _check_against_numpy(x, key):
    got = x[key]
    want = _np(x)[_as_np_key(key)]
    assert got.shape == want.shape, (key, got.shape, want.shape)
    assert got.tolist() == want.tolist(), key
    assert got.dtype == x.dtype


def _keys():
    t = dt.tensor([3, 0, -1, 3])       # negative and repeated
    u = dt.tensor([[1, -2], [0, 3]])   # 2-d
    v = dt.tensor([2, 1], dtype=dt.int32)
    col = dt.tensor([[0], [2]])
    return [t, (slice(None), t), (t, slice(1, 3)), (Ellipsis, v), (u,), (slice(None), u),
            (col, v), (v, slice(None), v), (v, v), (slice(None), v, v), (v, v, v),
            [0, 2, -1], ([1, 0], slice(None), [2, 3]), (None, t), (t, None), (slice(None, None, 2), v),
            (dt.tensor([], dtype=dt.int64),), (t[::2],), (Ellipsis, col, v)]


def test_index_tensors_and_lists_match_numpy():
    require_numpy()
    seed(19001)
    for dtype in ALL_DTYPES:
        for x in (rand_tensor((4, 5, 6), dtype), noncontig((4, 5, 6), dtype)):
            for key in _keys():
                _check_against_numpy(x, key)


def test_adjacent_index_tensors_stay_in_place_separated_ones_go_first():
    x = dt.arange(2 * 3 * 4 * 5).reshape(2, 3, 4, 5)
    i, j = dt.tensor([0, 1, 1]), dt.tensor([2, 0, 3])
    assert x[:, i, j].shape == (2, 3, 5)        # adjacent: in place
    assert x[:, :, i, j].shape == (2, 3, 3)
    assert x[i, :, j].shape == (3, 3, 5)        # separated: first
    assert x[:, i, :, j].shape == (3, 2, 4)
    # PyTorch (unlike numpy) selects with an int first: x[:, 0, :, j] indexes x[:, 0] with j alone.
    assert x[:, 0, :, j].shape == (2, 4, 3)
    assert x[:, 0, :, j].tolist() == [[[x[a, 0, c, k].item() for k in (2, 0, 3)] for c in range(4)]
                                       for a in range(2)]


def test_zero_dim_index_tensor_selects_like_an_int():
    x = dt.arange(24).reshape(2, 3, 4)
    idx = dt.tensor([1, 0, 2])
    assert x[idx[0]].tolist() == x[1].tolist()
    assert x[idx[0], 2].tolist() == x[1, 2].tolist()
    assert x[dt.tensor(-1)].tolist() == x[1].tolist()
    # It drops its dim before the others are placed: x[i0, :, t] is x[i0][:, t].
    t = dt.tensor([3, 1])
    assert x[idx[1], :, t].shape == (3, 2)
    assert x[idx[1], :, t].tolist() == x[0][:, t].tolist()
    rows = dt.tensor([1, 0])
    assert x[rows, idx[1]].tolist() == [x[1, 0].tolist(), x[0, 0].tolist()]
    # A 0-d index is a copy, not a view (as in PyTorch).
    y = x[idx[0]]
    y[0, 0] = -5
    assert x[1, 0, 0].item() == 12


def test_boolean_masks():
    seed(19002)
    x = rand_tensor((4, 5, 3))
    m = x > 0
    flat = [v for v in x.flatten().tolist() if v > 0]
    assert x[m].tolist() == flat
    rows = dt.tensor([True, False, True, True])
    assert x[rows].tolist() == [x[0].tolist(), x[2].tolist(), x[3].tolist()]
    cols = dt.tensor([False, True, False, False, True])
    assert x[:, cols].tolist() == [[r[1], r[4]] for r in x.tolist()]
    m2 = x[..., 0] > 0
    assert x[m2].shape == (sum(1 for v in x[..., 0].flatten().tolist() if v > 0), 3)
    assert x[dt.zeros(4, 5, 3, dtype=dt.bool)].shape == (0,)
    if np is not None:
        for key in (m, rows, (slice(None), cols), (rows, slice(None), dt.tensor([2, 0, 1]))):
            _check_against_numpy(x, key)
    assert_raises(IndexError, lambda: x[dt.tensor([True, False])], match=("mask", "[2]", "[4, 5, 3]"))


def test_out_of_range_and_bad_index_tensors_raise():
    x = dt.zeros(4, 5)
    assert_raises(IndexError, lambda: x[dt.tensor([0, 4])], match=("index 4", "dimension 0", "size 4"))
    assert_raises(IndexError, lambda: x[:, dt.tensor([-6])], match=("index -6", "dimension 1", "size 5"))
    assert_raises(IndexError, lambda: x[[1, 9]], match=("index 9", "size 4"))
    assert_raises(IndexError, lambda: x[dt.tensor(7)], match=("index 7", "size 4"))
    assert_raises(IndexError, lambda: x[dt.tensor([1.0])], match="float32")
    assert_raises(IndexError, lambda: x[dt.tensor([0]), dt.tensor([0]), dt.tensor([0])], match="too many")
    assert_raises(dt.ShapeError, lambda: x[dt.tensor([0, 1]), dt.tensor([0, 1, 2])])
    assert_raises(IndexError, lambda: dt.zeros(0, 3)[dt.tensor([0])], match="size 0")
    assert_raises(NotImplementedError, lambda: x[[[0, 1]]], match="list")
    assert_raises(NotImplementedError, lambda: x[[True, False]], match="list")


def test_setitem_through_index_tensors():
    x = dt.zeros(4, 3)
    x[dt.tensor([2, 0])] = dt.tensor([1.0, 2.0, 3.0])       # broadcast over the rows
    assert x.tolist() == [[1, 2, 3], [0, 0, 0], [1, 2, 3], [0, 0, 0]]
    x[:, [-1]] = 7
    assert [r[2] for r in x.tolist()] == [7, 7, 7, 7]
    x[dt.tensor([1, 1, 1]), dt.tensor([0, 0, 0])] = dt.tensor([4.0, 5.0, 6.0])
    assert x[1, 0].item() == 6.0                               # duplicates: the last write stays
    y = dt.arange(6)
    y[y % 2 == 0] = -1
    assert y.tolist() == [-1, 1, -1, 3, -1, 5]
    z = dt.zeros(3, 2)
    z[dt.tensor([True, False, True])] = dt.tensor([8.0, 9.0])
    assert z.tolist() == [[8, 9], [0, 0], [8, 9]]
    z[z > 8] = dt.tensor(0.5)
    assert z.tolist() == [[8, 0.5], [0, 0], [8, 0.5]]
    assert_raises(IndexError, lambda: z.__setitem__(dt.tensor([3]), 1.0), match=("index 3", "size 3"))
    assert z.tolist() == [[8, 0.5], [0, 0], [8, 0.5]]           # nothing written
    assert_raises(dt.ShapeError, lambda: z.__setitem__(dt.tensor([0, 1]), dt.ones(3)), match="shape mismatch")


def test_index_put_accumulates_duplicates():
    x = dt.zeros(5)
    idx = dt.tensor([1, 1, 3, 1])
    got = x.index_put((idx,), dt.tensor([1.0, 2.0, 3.0, 4.0]), accumulate=True)
    assert got.tolist() == [0, 7, 0, 3, 0] and x.tolist() == [0] * 5   # out of place
    assert x.index_put_((idx,), dt.tensor(2.0), accumulate=True) is x
    assert x.tolist() == [0, 6, 0, 2, 0]
    m = dt.zeros(2, 3, dtype=dt.int64)
    m.index_put_((dt.tensor([0, 0, 1]), dt.tensor([2, 2, 0])), dt.tensor([5, 6, 7]), accumulate=True)
    assert m.tolist() == [[0, 0, 11], [7, 0, 0]]
    m.index_put_((dt.tensor([0]), dt.tensor([2])), dt.tensor([1]))
    assert m.tolist() == [[0, 0, 1], [7, 0, 0]]
    assert_raises(TypeError, lambda: m.index_put((dt.tensor([0]),), dt.tensor([1.0])), match="dtype")
    assert_raises(IndexError, lambda: m.index_put_((dt.tensor([2]),), dt.tensor([1])), match="index 2")
