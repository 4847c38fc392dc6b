"""cummax, cummin, logcumsumexp, kthvalue, searchsorted, bucketize, index_add, index_copy,
scatter_reduce and unique against numpy (np.searchsorted, np.add.at, np.unique ...) or plain
Python where numpy has no match (cummax/cummin's indices, scatter_reduce's include_self):
PyTorch's signatures, defaults and named tuples, dtypes, negative and empty dims, ties, NaN,
duplicate / negative / out-of-range indices; then the same calls under dt.jit on the eager and
cpu backends (bit for bit, no graph break but unique's, whose reason says why).

Error model. Values that only move (cummax, kthvalue, searches, index_copy) and sums of a few
whole numbers (index_add, scatter_reduce sum/mean) are exact. logcumsumexp accumulates in double:
each step log(e^a + e^b) = max + log1p(e^-|a-b|) rounds at most three times, so after k steps the
error is below k * 4 * 2**-53 * (max|y| + 1), and a float32 result adds half an ulp (2**-24
relative) rounding the double once."""
import math

import dyntrace as dt
from jitlib import Call, jitted_copy, run_differential, stats
from testlib import NAN, assert_raises, noncontig, np, rand_tensor, require_numpy, seed

INF = float("inf")
EPS64 = 2.0 ** -53


def _same(a, b):
    return len(a) == len(b) and all(x == y or (x != x and y != y) for x, y in zip(a, b))


def _rows(t, dim):
    """t's values as rows along dim (dim moved last, leading dims flattened)."""
    moved = t.movedim(dim, -1)
    return moved.reshape(-1, moved.shape[-1]).tolist() if moved.numel() else []


# ---- cummax / cummin --------------------------------------------------------------------------

def _ref_cum_extreme(row, is_max):
    """PyTorch's rule: a value at least as large (small) as the running extreme takes its place,
    so equal extremes move the index to the last of them; a NaN takes over and stays until the
    next NaN."""
    values, indices, best = [], [], 0
    for i, v in enumerate(row):
        b = row[best]
        if v != v or (b == b and (v >= b if is_max else v <= b)):
            best = i
        values.append(row[best])
        indices.append(best)
    return values, indices


def test_cummax_cummin_match_pytorch_on_ties_and_nan():
    x = dt.tensor([1.0, 3.0, 3.0, NAN, 2.0, NAN, 5.0])
    # PyTorch 1.13's outputs for this row.
    r = dt.cummax(x, 0)
    assert type(r).__name__ == "cummax" and type(r).__module__ == "dyntrace.return_types"
    assert _same(r.values.tolist(), [1, 3, 3, NAN, NAN, NAN, NAN]) and r.indices.tolist() == [0, 1, 2, 3, 3, 5, 5]
    v, i = x.cummin(0)
    assert _same(v.tolist(), [1, 1, 1, NAN, NAN, NAN, NAN]) and i.tolist() == [0, 0, 0, 3, 3, 5, 5]
    ints = dt.tensor([1, 3, 3, 0, 3])
    assert dt.cummax(ints, 0).indices.tolist() == [0, 1, 2, 2, 4]
    assert dt.cummin(ints, dim=0).indices.tolist() == [0, 0, 0, 3, 3]
    b = dt.cummax(dt.tensor([True, False, True]), 0)
    assert b.values.tolist() == [True, True, True] and b.indices.tolist() == [0, 0, 2]


def test_cummax_cummin_every_dtype_dim_and_layout():
    seed(19301)
    for dtype in (dt.int32, dt.int64, dt.float16, dt.float32, dt.float64, dt.bool):
        for x in (rand_tensor((3, 4, 5), dtype, -2, 2), noncontig((3, 4, 5), dtype, low=-2, high=2)):
            for dim in (0, 1, -1):
                for fn, is_max in ((dt.cummax, True), (dt.cummin, False)):
                    v, i = fn(x, dim)
                    assert v.dtype == dtype and i.dtype == dt.int64 and v.shape == x.shape
                    want = [_ref_cum_extreme(row, is_max) for row in _rows(x, dim)]
                    assert _rows(v, dim) == [w[0] for w in want], (dtype, dim, is_max)
                    assert _rows(i, dim) == [w[1] for w in want], (dtype, dim, is_max)
    if np is not None:  # the values are numpy's running maximum/minimum (NaN propagating)
        y = rand_tensor((6, 9), dt.float64)
        yn = np.array(y.tolist())
        assert dt.cummax(y, 1).values.tolist() == np.maximum.accumulate(yn, axis=1).tolist()
        assert dt.cummin(y, 0).values.tolist() == np.minimum.accumulate(yn, axis=0).tolist()
    e = dt.cummax(dt.zeros(0, 3), 0)
    assert e.values.shape == (0, 3) and e.indices.shape == (0, 3) and e.indices.dtype == dt.int64
    s = dt.cummin(dt.tensor(2.5), 0)
    assert s.values.item() == 2.5 and s.indices.item() == 0 and s.values.ndim == 0
    assert_raises(IndexError, dt.cummax, dt.zeros(2, 3), 2,
                  match="Dimension out of range (expected to be in range of [-2, 1], but got 2)")
    assert_raises(IndexError, dt.cummin, dt.zeros(2, 3), -3, match="but got -3")


# ---- logcumsumexp -----------------------------------------------------------------------------

def test_logcumsumexp_against_numpy_within_its_error_model():
    require_numpy()
    seed(19302)
    for dtype, rel in ((dt.float64, 0.0), (dt.float32, 2.0 ** -24)):
        for x, dim in ((rand_tensor((3, 200), dtype, -30, 30), 1), (noncontig((7, 5), dtype), 0),
                       (rand_tensor((2, 3, 4), dtype, -700, 700), -2)):
            got = _rows(dt.logcumsumexp(x, dim), dim)
            for g_row, row in zip(got, _rows(x, dim)):
                want = np.logaddexp.accumulate(np.array(row, dtype=np.float64)).tolist()
                top = max(abs(w) for w in want) + 1
                for k, (g, w) in enumerate(zip(g_row, want)):
                    assert abs(g - w) <= rel * abs(w) + (k + 1) * 4 * EPS64 * top, (dtype, k, g, w)
    # Infinities and NaN as PyTorch 1.13 gives them: -inf adds nothing, inf + inf is inf.
    special = dt.tensor([1.0, INF, INF, -INF, NAN, 2.0], dtype=dt.float64)
    assert _same(dt.logcumsumexp(special, 0).tolist(), [1.0, INF, INF, INF, NAN, NAN])
    assert dt.logcumsumexp(dt.tensor([-INF, -INF, 1.0]), 0).tolist() == [-INF, -INF, 1.0]
    assert dt.tensor([0.0, 0.0], dtype=dt.float64).logcumsumexp(0).tolist()[1] == math.log(2.0)
    assert dt.logcumsumexp(dt.zeros(0, 2), 1).shape == (0, 2)
    assert dt.logcumsumexp(dt.tensor(3.0), 0).item() == 3.0
    assert_raises(TypeError, dt.logcumsumexp, dt.tensor([1, 2]), 0, match="int64")
    assert_raises(IndexError, dt.logcumsumexp, dt.zeros(2), 1, match="Dimension out of range")


# ---- kthvalue ---------------------------------------------------------------------------------

def test_kthvalue_against_numpy_stable_sort():
    require_numpy()
    seed(19303)
    for dtype in (dt.int32, dt.int64, dt.float32, dt.float64):
        x = rand_tensor((4, 6, 5), dtype, -3, 3)      # few distinct values: many ties
        for dim in (0, 1, -1):
            xn = np.array(x.tolist())
            order = np.argsort(xn, axis=dim, kind="stable")  # NaN last, ties in input order
            for k in (1, 3, x.shape[dim]):
                for keepdim in (False, True):
                    r = dt.kthvalue(x, k, dim, keepdim)
                    want_i = np.take(order, [k - 1], axis=dim)
                    want_v = np.take_along_axis(xn, want_i, axis=dim)
                    if not keepdim:
                        want_i, want_v = want_i.squeeze(dim), want_v.squeeze(dim)
                    assert r.indices.tolist() == want_i.tolist(), (dtype, dim, k, keepdim)
                    assert r.values.tolist() == want_v.tolist() and r.values.dtype == dtype
    y = dt.tensor([3.0, 1.0, 2.0, 1.0, NAN])
    r = y.kthvalue(2)
    assert type(r).__name__ == "kthvalue" and r.values.item() == 1.0 and r.indices.item() == 3  # PyTorch's
    assert math.isnan(dt.kthvalue(y, 5).values.item()) and dt.kthvalue(y, 5).indices.item() == 4
    z = dt.kthvalue(dt.tensor(3.0), 1)
    assert z.values.item() == 3.0 and z.indices.item() == 0
    assert_raises(ValueError, dt.kthvalue, y, 6, match=("k (6)", "[1, 5]"))
    assert_raises(ValueError, dt.kthvalue, y, 0)
    assert_raises(IndexError, dt.kthvalue, y, 1, 1, match="Dimension out of range")
    assert_raises(ValueError, dt.kthvalue, dt.zeros(3, 0), 1)


# ---- searchsorted / bucketize -----------------------------------------------------------------

def test_searchsorted_against_numpy():
    require_numpy()
    seed(19304)
    seq = dt.tensor([-1.5, 0.0, 0.0, 1.0, 2.5, 2.5, 4.0])
    values = dt.tensor([[-2.0, 0.0, 0.5], [2.5, 4.0, 9.0]])
    sn, vn = np.array(seq.tolist()), np.array(values.tolist())
    for side in ("left", "right"):
        want = np.searchsorted(sn, vn, side=side).tolist()
        assert dt.searchsorted(seq, values, side=side).tolist() == want
        assert dt.searchsorted(seq, values, right=side == "right").tolist() == want
        assert dt.searchsorted(seq, values, right=side == "right", side=side).tolist() == want
    r = dt.searchsorted(seq, values)
    assert r.dtype == dt.int64 and dt.searchsorted(seq, values, out_int32=True).dtype == dt.int32
    assert dt.searchsorted(seq, values, out_int32=True).tolist() == r.tolist()
    # N-d: each row of the sequence serves the same row of the values.
    rows = rand_tensor((3, 8), dt.float64).sort(-1).values
    vals = rand_tensor((3, 5), dt.float64)
    want = [np.searchsorted(np.array(a), np.array(b), side="right").tolist()
            for a, b in zip(rows.tolist(), vals.tolist())]
    assert dt.searchsorted(rows, vals, right=True).tolist() == want
    # sorter: positions that sort an unsorted sequence.
    u = rand_tensor((9,), dt.int64, -5, 5)
    order = dt.argsort(u, stable=True)
    q = dt.arange(-6, 7)
    want = np.searchsorted(np.array(u.tolist()), np.array(q.tolist()), sorter=np.array(order.tolist())).tolist()
    assert dt.searchsorted(u, q, sorter=order).tolist() == want
    # A Python number gives a 0-d result; an int sequence searched with floats compares as floats.
    assert dt.searchsorted(seq, 2.5).ndim == 0 and dt.searchsorted(seq, 2.5).item() == 4
    assert dt.searchsorted(dt.tensor([1, 2, 3]), 2.5).item() == 2
    assert dt.searchsorted(dt.tensor([1, 2, 3], dtype=dt.int32), dt.tensor([2.5])).tolist() == [2]
    assert dt.searchsorted(dt.zeros(0), dt.tensor([1.0])).tolist() == [0]
    assert dt.searchsorted(seq, dt.zeros(0)).shape == (0,)
    # NaN compares false both ways, as in PyTorch's bound tests.
    nan_seq = dt.tensor([1.0, 2.0, 2.0, 3.0, NAN])
    nan_vals = dt.tensor([0.0, 2.0, 2.5, NAN, 4.0])
    assert dt.searchsorted(nan_seq, nan_vals).tolist() == [0, 1, 5, 5, 5]               # PyTorch 1.13
    assert dt.searchsorted(nan_seq, nan_vals, right=True).tolist() == [0, 5, 5, 5, 5]


def test_searchsorted_errors():
    seq = dt.tensor([[1.0, 3.0, 5.0], [2.0, 4.0, 6.0]])
    assert_raises(ValueError, dt.searchsorted, seq, dt.zeros(2, 1), side="left", right=True, match="opposite")
    assert_raises(ValueError, dt.searchsorted, seq, dt.zeros(2, 1), side="mid", match="'mid'")
    assert_raises(dt.ShapeError, dt.searchsorted, seq, dt.zeros(1, 2), match=("[2, 3]", "[1, 2]"))
    assert_raises(dt.ShapeError, dt.searchsorted, dt.tensor(1.0), dt.zeros(2), match="0-d")
    flat = dt.tensor([3.0, 1.0, 2.0])
    assert_raises(IndexError, dt.searchsorted, flat, dt.zeros(2), sorter=dt.tensor([0, 5, 1]),
                  match=("index 5", "size 3"))
    assert_raises(IndexError, dt.searchsorted, flat, dt.zeros(2), sorter=dt.tensor([0, -1, 1]), match="index -1")
    assert_raises(TypeError, dt.searchsorted, flat, dt.zeros(2), sorter=dt.tensor([0, 1, 2], dtype=dt.int32),
                  match="int64")
    assert_raises(dt.ShapeError, dt.searchsorted, flat, dt.zeros(2), sorter=dt.tensor([0, 1]))
    assert_raises(TypeError, dt.searchsorted, dt.tensor([True]), dt.tensor([False]), match="bool")


def test_bucketize_is_searchsorted_with_the_arguments_swapped():
    require_numpy()
    boundaries = dt.tensor([1, 3, 5, 7])
    x = dt.tensor([[1, 5], [3, 9]])
    bn, xn = np.array(boundaries.tolist()), np.array(x.tolist())
    assert dt.bucketize(x, boundaries).tolist() == np.searchsorted(bn, xn, side="left").tolist()
    assert dt.bucketize(x, boundaries, right=True).tolist() == [[1, 3], [2, 4]]      # PyTorch 1.13
    assert dt.bucketize(x, boundaries, right=True).tolist() == np.digitize(xn, bn, right=False).tolist()
    assert dt.bucketize(x, boundaries, out_int32=True).dtype == dt.int32
    assert dt.bucketize(3, boundaries).item() == 1 and dt.bucketize(3, boundaries).ndim == 0
    assert dt.bucketize(noncontig((3, 4)), dt.tensor([-1.0, 0.0, 1.0])).shape == (3, 4)
    assert_raises(dt.ShapeError, dt.bucketize, dt.tensor([1]), dt.tensor([[1, 2]]), match="1-D")


# ---- index_add / index_copy -------------------------------------------------------------------

def test_index_add_against_numpy_add_at():
    require_numpy()
    seed(19305)
    index = dt.tensor([2, 0, 2, 3, 2])                 # duplicates add up
    for dtype in (dt.float32, dt.float64, dt.int32, dt.int64):
        for dim in (0, 1, -1):
            shape = [4, 4, 4]
            x = rand_tensor(shape, dt.float64, -8, 8).floor().to(dtype)   # whole numbers: exact sums
            src_shape = list(shape)
            src_shape[dim] = 5
            src = rand_tensor(src_shape, dt.float64, -8, 8).floor().to(dtype)
            alpha = 3 if dtype in (dt.int32, dt.int64) else -0.5
            want = np.array(x.tolist())
            moved = np.moveaxis(want, dim, 0)                              # a view: add.at writes want
            np.add.at(moved, np.array(index.tolist()), alpha * np.moveaxis(np.array(src.tolist()), dim, 0))
            got = dt.index_add(x, dim, index, src, alpha=alpha)
            assert got.dtype == dtype and got.tolist() == want.tolist(), (dtype, dim)
            y = x.clone()
            assert y.index_add_(dim, index.to(dt.int32), src, alpha=alpha) is y and y.tolist() == want.tolist()
    t = noncontig((3, 4), dt.float64)
    assert dt.index_add(t, 1, dt.tensor([1]), dt.ones(3, 1, dtype=dt.float64)).tolist() == [
        [v + (j == 1) for j, v in enumerate(row)] for row in t.tolist()]
    assert dt.index_add(dt.zeros(3, dtype=dt.int64), 0, dt.tensor([0]), dt.ones(1, dtype=dt.int64),
                        alpha=2.5).tolist() == [2, 0, 0]                   # PyTorch truncates alpha
    assert dt.index_add(dt.tensor(1.0), 0, dt.tensor(0), dt.tensor(2.0)).item() == 3.0
    assert dt.index_add(dt.zeros(2, 3), 0, dt.tensor([], dtype=dt.int64), dt.zeros(0, 3)).tolist() == [[0] * 3] * 2


def test_index_copy_last_duplicate_wins():
    x = dt.zeros(3, 2)
    src = dt.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    assert dt.index_copy(x, 0, dt.tensor([2, 0]), src[:2]).tolist() == [[3, 4], [0, 0], [1, 2]]
    assert dt.index_copy(x, 1, dt.tensor([1, 1]), src[:, :2]).tolist() == [[0, 2], [0, 4], [0, 6]]  # PyTorch's
    y = x.clone()
    assert y.index_copy_(0, dt.tensor([1]), src[:1]) is y and y.tolist() == [[0, 0], [1, 2], [0, 0]]
    assert x.tolist() == [[0, 0]] * 3


def test_index_add_and_copy_errors_name_the_index_and_size():
    x = dt.zeros(3, 2)
    for name, fn in (("index_add", dt.index_add), ("index_copy", dt.index_copy)):
        assert_raises(IndexError, fn, x, 0, dt.tensor([3]), dt.ones(1, 2), match=("index 3", "size 3"))
        assert_raises(IndexError, fn, x, 0, dt.tensor([-1]), dt.ones(1, 2), match=("index -1", "size 3"))  # no wrap
        assert_raises(IndexError, fn, x, 2, dt.tensor([0]), dt.ones(1, 2), match="Dimension out of range")
        assert_raises(IndexError, fn, x, 0, dt.tensor([[0]]), dt.ones(1, 2), match="1-d")
        assert_raises(TypeError, fn, x, 0, dt.tensor([0.0]), dt.ones(1, 2), match="float32")
        assert_raises(TypeError, fn, x, 0, dt.tensor([0]), dt.ones(1, 2, dtype=dt.float64), match="float64")
        assert_raises(dt.ShapeError, fn, x, 0, dt.tensor([0]), dt.ones(2, 2), match=name)
    assert_raises(TypeError, dt.index_copy, x, 0, dt.tensor([0], dtype=dt.int32), dt.ones(1, 2), match="int32")
    assert x.tolist() == [[0, 0]] * 3


# ---- scatter_reduce ---------------------------------------------------------------------------

def _ref_scatter_reduce(x, index, src, reduce, include_self):
    """1-d reference: PyTorch's fold, amax/amin propagating NaN, integer means rounding down."""
    out, folded = list(x), [[v] if include_self else [] for v in x]
    for i, v in zip(index, src):
        folded[i].append(v)
    for i, vals in enumerate(folded):
        if not vals:
            continue
        if reduce in ("sum", "mean"):
            s = sum(vals)
            out[i] = s if reduce == "sum" else (s // len(vals) if isinstance(s, int) else s / len(vals))
        elif reduce == "prod":
            out[i] = math.prod(vals)
        elif any(v != v for v in vals):
            out[i] = NAN
        else:
            out[i] = max(vals) if reduce == "amax" else min(vals)
    return out


def test_scatter_reduce_every_reduce_with_and_without_self():
    x, index = [1.0, 2.0, 3.0, 4.0], [0, 0, 2, 2, 2]
    src = [5.0, 6.0, 7.0, 8.0, NAN]
    pytorch = {("sum", True): [12, 2, NAN, 4], ("sum", False): [11, 2, NAN, 4], ("prod", True): [30, 2, NAN, 4],
               ("mean", True): [4, 2, NAN, 4], ("mean", False): [5.5, 2, NAN, 4], ("amax", True): [6, 2, NAN, 4],
               ("amin", True): [1, 2, NAN, 4], ("amin", False): [5, 2, NAN, 4]}   # PyTorch 1.13
    for reduce in ("sum", "prod", "mean", "amax", "amin"):
        for include_self in (True, False):
            got = dt.scatter_reduce(dt.tensor(x), 0, dt.tensor(index), dt.tensor(src), reduce,
                                    include_self=include_self).tolist()
            assert _same(got, _ref_scatter_reduce(x, index, src, reduce, include_self)), (reduce, include_self)
            if (reduce, include_self) in pytorch:
                assert _same(got, pytorch[reduce, include_self]), (reduce, include_self)
    xi, si = dt.tensor([1, 2, 3, 4]), dt.tensor([5, 6, 7, 8, 9])
    assert dt.scatter_reduce(xi, 0, dt.tensor(index), si, "mean").tolist() == [4, 2, 6, 4]
    assert dt.scatter_reduce(xi, 0, dt.tensor(index), -si, "mean").tolist() == [-4, 2, -6, 4]   # floor
    assert dt.scatter_reduce(xi, 0, dt.tensor(index), si, "mean", include_self=False).tolist() == [5, 2, 8, 4]
    y = dt.tensor(x)
    assert y.scatter_reduce_(0, dt.tensor([1]), dt.tensor([9.0]), reduce="amax") is y and y.tolist()[1] == 9.0


def test_scatter_reduce_2d_against_numpy_ufunc_at():
    require_numpy()
    seed(19306)
    ufuncs = {"sum": np.add, "prod": np.multiply, "amax": np.maximum, "amin": np.minimum}
    for dtype in (dt.float64, dt.float32, dt.int64):
        x = rand_tensor((4, 5), dt.float64, -4, 4).floor().to(dtype)
        src = rand_tensor((3, 5), dt.float64, -4, 4).floor().to(dtype)
        index = dt.tensor([[0, 1, 2, 3, 0], [0, 1, 1, 3, 3], [2, 2, 2, 0, 0]])   # duplicates down columns
        cols = np.broadcast_to(np.arange(5), (3, 5))
        for reduce, ufunc in ufuncs.items():
            want = np.array(x.tolist())
            ufunc.at(want, (np.array(index.tolist()), cols), np.array(src.tolist()))
            got = dt.scatter_reduce(x, 0, index, src, reduce)
            assert got.dtype == dtype and got.tolist() == want.tolist(), (dtype, reduce)
        for dim in (1, -1):   # along rows: row r of the index and src folds into row r of x
            got = x.scatter_reduce(dim, index[:, :2], src[:, :2], "sum", include_self=False).tolist()
            for r in range(3):
                want = _ref_scatter_reduce(x[r].tolist(), index[r, :2].tolist(), src[r, :2].tolist(), "sum", False)
                assert got[r] == want, (dtype, dim, r)
            assert got[3] == x[3].tolist()


def test_scatter_reduce_errors():
    x = dt.zeros(4)
    i = dt.tensor([0, 0])
    s = dt.ones(2)
    assert_raises(ValueError, dt.scatter_reduce, x, 0, i, s, "max", match=("'max'", "amax"))
    assert_raises(IndexError, dt.scatter_reduce, x, 0, dt.tensor([4]), s, "sum", match=("index 4", "size 4"))
    assert_raises(IndexError, dt.scatter_reduce, x, 0, dt.tensor([-1]), s, "sum", match="index -1")
    assert_raises(TypeError, dt.scatter_reduce, x, 0, i, s.double(), "sum", match="float64")
    assert_raises(TypeError, dt.scatter_reduce, x, 0, i.int(), s, "sum", match="int64")
    assert_raises(TypeError, dt.scatter_reduce, dt.tensor([True]), 0, dt.tensor([0]), dt.tensor([True]), "mean")
    assert_raises(TypeError, dt.scatter_reduce, x, 0, i, s)                 # reduce is required
    assert_raises(IndexError, dt.scatter_reduce, x, 1, i, s, "sum", match="Dimension out of range")
    assert x.tolist() == [0, 0, 0, 0]


# ---- unique -----------------------------------------------------------------------------------

def test_unique_against_numpy():
    require_numpy()
    seed(19307)
    for dtype in (dt.int32, dt.int64, dt.float32, dt.float64, dt.bool):
        x = rand_tensor((5, 6), dtype, -3, 3)
        xn = np.array(x.tolist())
        u, inv, cnt = np.unique(xn, return_inverse=True, return_counts=True)
        got = dt.unique(x)
        assert isinstance(got, dt.Tensor) and got.dtype == dtype and got.tolist() == u.tolist()
        g_u, g_inv, g_cnt = dt.unique(x, return_inverse=True, return_counts=True)
        assert g_inv.tolist() == inv.reshape(xn.shape).tolist() and g_cnt.tolist() == cnt.tolist()
        assert g_inv.dtype == dt.int64 and g_cnt.dtype == dt.int64
        pair = x.unique(sorted=False, return_counts=True)
        assert type(pair) is tuple and len(pair) == 2 and pair[1].tolist() == cnt.tolist()
    rows = dt.tensor([[1, 2], [1, 2], [0, 5], [1, 0]])
    for dim in (0, 1, -1):
        u, inv, cnt = np.unique(np.array(rows.tolist()), axis=dim, return_inverse=True, return_counts=True)
        g_u, g_inv, g_cnt = dt.unique(rows, return_inverse=True, return_counts=True, dim=dim)
        assert g_u.tolist() == u.tolist() and g_inv.tolist() == inv.reshape(-1).tolist()
        assert g_cnt.tolist() == cnt.tolist(), dim
    nan = dt.tensor([2.0, NAN, 1.0, NAN, 2.0, -0.0, 0.0])
    want = np.unique(np.array(nan.tolist()), equal_nan=False)   # each NaN stays apart, sorted last
    assert _same(dt.unique(nan).tolist(), want.tolist())
    e = dt.unique(dt.zeros(0, 3), return_inverse=True, return_counts=True)
    assert e[0].shape == (0,) and e[1].shape == (0, 3) and e[2].shape == (0,)
    s = dt.unique(dt.tensor(5.0), return_inverse=True)
    assert s[0].tolist() == [5.0] and s[1].ndim == 0 and s[1].item() == 0
    assert_raises(IndexError, dt.unique, rows, dim=2, match="Dimension out of range")
    # PyTorch refuses slices with no elements (they could not be told apart) unless dim is the empty one.
    assert dt.unique(dt.zeros(0, 3), dim=0).shape == (0, 3)
    assert_raises(RuntimeError, dt.unique, dt.zeros(4, 0), dim=0, match="size 0")
    assert_raises(RuntimeError, dt.unique, dt.zeros(0, 0), dim=1, match="more than one")


# ---- under dt.jit -----------------------------------------------------------------------------

def scans_and_searches(x, seq, idx, src, order):
    m = dt.cummax(x, 1)
    v, i = x.cummin(0)
    k = dt.kthvalue(x, 2, -1, keepdim=True)
    pos = dt.searchsorted(seq, x, right=True) + dt.searchsorted(seq, x, side="left", out_int32=True)
    b = dt.bucketize(x * 2, seq)
    s = dt.searchsorted(seq[order.argsort()], x, sorter=order.argsort())
    a = dt.index_add(x, 0, idx, src, alpha=2.0).relu()
    c = x.index_copy(0, idx[:2], src[:2])
    y = x.clone()
    y.index_add_(0, idx, src)
    r = dt.scatter_reduce(x, 1, idx.unsqueeze(0).expand(4, -1), src, "amax", include_self=False)
    q = x.scatter_reduce(0, idx.unsqueeze(1).expand(-1, x.shape[1]), src, reduce="mean")
    return (m, m.values * 2, v, i, k, pos, b, s, a, c, y, r, q, dt.logcumsumexp(x, -1).exp(), x.cummax(0).indices)


def _scan_inputs(i):
    x = rand_tensor((4 + i, 6)) if i != 1 else noncontig((5, 6))
    seq = dt.sort(rand_tensor((7,))).values
    idx = dt.tensor([3, 0, 3, 1])
    src = rand_tensor((4, 6))
    return Call(x, seq, idx, src, dt.tensor([6, 0, 1, 2, 3, 4, 5]))


def test_scans_searches_and_index_reductions_under_jit_match_eager_bit_for_bit():
    for backend in ("eager", "cpu"):
        dt.reset()
        jfn = jitted_copy(scans_and_searches, backend=backend)
        run_differential(scans_and_searches, jfn, _scan_inputs, 3, seed_base=41, exact=True)
        st = stats()
        assert st["graph_breaks"] == 0 and st["fallbacks"] == 0, (backend, st["break_reasons"])
        out = jfn(*_scan_inputs(0).args)
        assert type(out[0]).__name__ == "cummax" and type(out[4]).__name__ == "kthvalue"


def bad_indices(x, idx, src):
    out = dt.index_add(x, 0, idx, src) * 2
    return out + dt.scatter_reduce(x, 0, idx.unsqueeze(1).expand(-1, x.shape[1]), src, "sum")


def test_compiled_index_ops_check_bounds_like_eager():
    # The same IndexError (type and message) from compiled code as from plain Python, never a
    # read or write out of bounds.
    for backend in ("eager", "cpu"):
        dt.reset()
        jfn = jitted_copy(bad_indices, backend=backend)
        run_differential(bad_indices, jfn, lambda i: Call(rand_tensor((3, 4)), dt.tensor([0, 2] if i == 0 else
                                                                                         [0, 3 + i]),
                                                          rand_tensor((2, 4))), 3, seed_base=43, exact=True)
        try:
            jfn(rand_tensor((3, 4)), dt.tensor([1, 7]), rand_tensor((2, 4)))
            raise AssertionError("no IndexError")
        except IndexError as e:
            assert "index 7" in str(e) and "size 3" in str(e), e


def uniques(x):
    y = x * 2
    u, counts = dt.unique(y, return_counts=True)
    return u + 1, counts, (x + 1).sum()


def test_unique_breaks_the_graph_saying_why():
    for backend in ("eager", "cpu"):
        dt.reset()
        jfn = jitted_copy(uniques, backend=backend)
        run_differential(uniques, jfn, lambda i: Call(rand_tensor((3 + i, 4), dt.int64, -3, 3)), 3, seed_base=47,
                         exact=True)
        st = stats()
        reasons = " ".join(str(r) for r in st["break_reasons"])
        assert st["graph_breaks"] >= 1 and "unique()" in reasons and "distinct value" in reasons, st["break_reasons"]
