"""index_select, gather, scatter, scatter_add, take_along_dim, masked_fill, embedding, one_hot,
nonzero, where(cond) and masked_select against plain-Python references (and numpy where
importable): duplicate scatter indices, negative and out-of-range indices, empty dims,
non-contiguous inputs and broadcasting. Values only move (scatter_add of small integers in float
is exact), so comparisons are exact."""
import itertools

import dyntrace as dt
from testlib import ALL_DTYPES, assert_raises, noncontig, np, rand_tensor, seed


def _get(nested, pos):
    for p in pos:
        nested = nested[p]
    return nested


def _set(nested, pos, value):
    for p in pos[:-1]:
        nested = nested[p]
    nested[pos[-1]] = value


def _positions(shape):
    return itertools.product(*(range(n) for n in shape))


def _ref_gather(x, dim, index):
    out = index.tolist()
    xs, idx = x.tolist(), index.tolist()
    for pos in _positions(index.shape):
        src = list(pos)
        src[dim] = _get(idx, pos)
        _set(out, pos, _get(xs, src))
    return out


def _ref_scatter(x, dim, index, src, add):
    out, idx = x.tolist(), index.tolist()
    values = src.tolist() if isinstance(src, dt.Tensor) else None
    for pos in _positions(index.shape):
        dst = list(pos)
        dst[dim] = _get(idx, pos)
        v = _get(values, pos) if values is not None else src
        _set(out, dst, _get(out, dst) + v if add else v)
    return out


def test_index_select_every_dim_and_dtype():
    seed(19101)
    idx = dt.tensor([2, 0, -1, 2])
    for dtype in ALL_DTYPES:
        for x in (rand_tensor((3, 4, 5), dtype), noncontig((3, 4, 5), dtype)):
            for dim in (0, 1, 2, -1):
                got = dt.index_select(x, dim, idx)
                d = dim % 3
                want = [_get(x.tolist(), p[:d] + ((2, 0, -1, 2)[p[d]],) + p[d + 1:])
                        for p in _positions(got.shape)]
                assert got.flatten().tolist() == want, (dtype, dim)
    x = dt.arange(6).reshape(2, 3)
    assert x.index_select(1, dt.tensor(1)).tolist() == [[1], [4]]       # a 0-d index keeps the dim
    assert x.index_select(0, dt.tensor([], dtype=dt.int64)).shape == (0, 3)
    assert_raises(IndexError, x.index_select, 1, dt.tensor([3]), match=("index 3", "size 3"))
    assert_raises(IndexError, x.index_select, 0, dt.tensor([[0]]), match="1-d")
    assert_raises(IndexError, x.index_select, 0, dt.tensor([0.0]), match="float32")


def test_gather_and_take_along_dim():
    seed(19102)
    for x in (rand_tensor((4, 5, 3)), noncontig((4, 5, 3))):
        for dim in range(3):
            shape = [2, 3, 2]
            shape[dim] = 6
            index = (dt.rand(*shape) * x.shape[dim]).floor().long()
            assert dt.gather(x, dim, index).tolist() == _ref_gather(x, dim, index), dim
            assert x.gather(dim - 3, index).tolist() == _ref_gather(x, dim, index)
    x = dt.arange(12).reshape(3, 4)
    assert_raises(IndexError, dt.gather, x, 1, dt.tensor([[4]]), match=("index 4", "size 4"))
    assert_raises(IndexError, dt.gather, x, 1, dt.tensor([[-1]]), match="index -1")  # no wrap, as PyTorch
    assert_raises(TypeError, dt.gather, x, 1, dt.tensor([[1]], dtype=dt.int32), match="int64")
    assert_raises(IndexError, dt.gather, x, 1, dt.tensor([1]), match="dims")
    assert_raises(dt.ShapeError, dt.gather, x, 1, dt.zeros(4, 1, dtype=dt.int64))
    assert dt.gather(x, 0, dt.zeros(0, 4, dtype=dt.int64)).shape == (0, 4)
    # take_along_dim: broadcasts off the dim; without a dim, over the flattened input.
    order = dt.tensor([[3, 0, 1, 2]])
    assert dt.take_along_dim(x, order, dim=1).tolist() == [[r[3], r[0], r[1], r[2]] for r in x.tolist()]
    assert dt.take_along_dim(x, dt.tensor([11, 0, 5])).tolist() == [11, 0, 5]
    if np is not None:
        xn = np.array(x.tolist())
        idx = np.array([[2], [0], [1]])
        assert dt.take_along_dim(x, dt.tensor(idx.tolist()), 1).tolist() == np.take_along_axis(xn, idx, 1).tolist()


def test_scatter_and_scatter_add_with_duplicates():
    seed(19103)
    for dtype in (dt.float32, dt.float64, dt.int64, dt.int32):
        # Whole numbers: float sums of a few of them are exact, so any order gives the reference.
        x = rand_tensor((4, 5), dt.float64, -8, 8).floor().to(dtype)
        src = rand_tensor((3, 5), dt.float64, -8, 8).floor().to(dtype)
        index = dt.tensor([[0, 1, 2, 3, 0], [0, 1, 1, 3, 3], [2, 2, 2, 0, 0]])  # duplicates down columns
        got = dt.scatter_add(x, 0, index, src)
        assert got.tolist() == _ref_scatter(x, 0, index, src, add=True), dtype
        assert dt.scatter(x, 0, index, src).tolist() == _ref_scatter(x, 0, index, src, add=False)
        assert dt.scatter(x, 0, index, 2).tolist() == _ref_scatter(x, 0, index, 2, add=False)
        y = x.clone()
        assert y.scatter_add_(0, index, src) is y and y.tolist() == got.tolist()
    z = dt.zeros(2, 3)
    z.scatter_(1, dt.tensor([[2], [0]]), dt.tensor([[5.0], [6.0]]))
    assert z.tolist() == [[0, 0, 5], [6, 0, 0]]
    assert_raises(IndexError, dt.scatter_add, z, 1, dt.tensor([[3]]), dt.ones(1, 1), match=("index 3", "size 3"))
    assert_raises(TypeError, dt.scatter, z, 1, dt.tensor([[0]]), dt.ones(1, 1, dtype=dt.int64), match="dtype")
    assert_raises(dt.ShapeError, dt.scatter_add, z, 1, dt.tensor([[0, 1]]), dt.ones(1, 1))
    assert z.tolist() == [[0, 0, 5], [6, 0, 0]]    # failed calls changed nothing
    if np is not None:
        acc = np.zeros(6)
        np.add.at(acc, [1, 1, 4, 1], [1, 2, 3, 4])
        got = dt.scatter_add(dt.zeros(6, dtype=dt.float64), 0, dt.tensor([1, 1, 4, 1]),
                             dt.tensor([1.0, 2, 3, 4], dtype=dt.float64))
        assert got.tolist() == acc.tolist()


def test_masked_fill_keeps_the_input_dtype_and_broadcasts():
    seed(19104)
    x = rand_tensor((3, 4))
    m = x > 0
    assert dt.masked_fill(x, m, -1.5).tolist() == [[-1.5 if v > 0 else v for v in r] for r in x.tolist()]
    rows = dt.tensor([[True], [False], [True]])
    assert x.masked_fill(rows, 0.0).tolist() == [r if i == 1 else [0.0] * 4 for i, r in enumerate(x.tolist())]
    i = dt.arange(5)
    assert i.masked_fill(i > 2, 2.7).tolist() == [0, 1, 2, 2, 2] and i.masked_fill(i > 2, 2.7).dtype == dt.int64
    assert x.masked_fill(m, dt.tensor(9.0)).tolist() == [[9.0 if v > 0 else v for v in r] for r in x.tolist()]
    y = x.clone()
    assert y.masked_fill_(m, 0.0) is y and y.tolist() == x.masked_fill(m, 0.0).tolist()
    nan = dt.tensor([float("nan"), 1.0])
    assert dt.masked_fill(nan, dt.isnan(nan) if hasattr(dt, "isnan") else nan != nan, 0.0).tolist() == [0.0, 1.0]
    assert_raises(TypeError, dt.masked_fill, x, x, 0.0, match="bool")
    assert_raises(ValueError, dt.masked_fill, x, m, dt.ones(2), match="0-d")


def test_embedding_and_one_hot():
    seed(19105)
    w = dt.randn(6, 3)
    idx = dt.tensor([[5, 0, -1], [2, 2, 0]])
    got = dt.embedding(idx, w)
    assert got.shape == (2, 3, 3)
    assert got.tolist() == [[w[i % 6].tolist() for i in row] for row in idx.tolist()]
    assert dt.embedding(idx, w, padding_idx=0).tolist() == got.tolist()   # padding only stops gradients
    assert dt.embedding(dt.tensor([1], dtype=dt.int32), w.T.contiguous().T).tolist() == [w[1].tolist()]
    assert_raises(IndexError, dt.embedding, dt.tensor([6]), w, match=("index 6", "size 6"))
    assert_raises(TypeError, dt.embedding, dt.tensor([1.0]), w, match="float32")
    assert_raises(ValueError, dt.embedding, idx, w, padding_idx=6, match="padding_idx")
    assert_raises(NotImplementedError, dt.embedding, idx, w, max_norm=1.0)
    oh = dt.one_hot(dt.tensor([[0, 2], [1, 0]]), 4)
    assert oh.dtype == dt.int64 and oh.tolist() == [[[1, 0, 0, 0], [0, 0, 1, 0]], [[0, 1, 0, 0], [1, 0, 0, 0]]]
    assert dt.one_hot(dt.tensor([3, 1])).shape == (2, 4)
    assert_raises(ValueError, dt.one_hot, dt.tensor([3]), 3, match="num_classes")
    assert_raises(ValueError, dt.one_hot, dt.tensor([-1]), 3, match="non-negative")
    assert_raises(TypeError, dt.one_hot, dt.tensor([1.0]), 3)


def test_nonzero_where_condition_masked_select():
    x = dt.tensor([[0.0, 1.5, 0.0], [-2.0, 0.0, 3.0]])
    assert dt.nonzero(x).tolist() == [[0, 1], [1, 0], [1, 2]]
    assert x.nonzero().dtype == dt.int64
    rows, cols = dt.where(x != 0)
    assert rows.tolist() == [0, 1, 1] and cols.tolist() == [1, 0, 2]
    assert dt.nonzero(dt.zeros(0, 2)).shape == (0, 2)
    assert dt.masked_select(x, x > 0).tolist() == [1.5, 3.0]
    assert dt.masked_select(x, dt.tensor([True, False, True])).tolist() == [0.0, 0.0, -2.0, 3.0]
    assert_raises(TypeError, dt.masked_select, x, x, match="bool")
