"""max/min as PyTorch has them, sort/argsort/topk and cumsum/cumprod, against plain Python (and
numpy where importable): ties keep their input order (stable), NaN sorts as the largest value,
empty dims, non-contiguous inputs; the named tuples' types and fields; and the same calls under
dt.jit (eager and cpu backends, bit for bit, no graph break).

Scans accumulate in double and round each running value once, so a float32 cumsum is within half
an ulp of the exact prefix sum plus the double accumulator's own error (n * 2**-53 of the sum of
magnitudes); float64 results are checked against math.fsum with n * 2**-53 of that sum."""
import math

import dyntrace as dt
from jitlib import Call, jitted_copy, run_differential, stats
from testlib import NAN, assert_raises, noncontig, np, rand_tensor, seed

INF = float("inf")


def _key(descending):
    # NaN is the largest value; Python's sort is stable, like dyntrace's.
    if descending:
        return lambda v: (0, 0.0) if v != v else (1, -v)
    return lambda v: (1, 0.0) if v != v else (0, v)


def _sorted_row(row, descending):
    order = sorted(range(len(row)), key=lambda i: _key(descending)(row[i]))
    return [row[i] for i in order], order


def _same(a, b):
    return len(a) == len(b) and all(x == y or (x != x and y != y) for x, y in zip(a, b))


def test_sort_is_stable_with_ties_and_nan_largest():
    rows = [[2.0, NAN, 1.0, 2.0, -INF, 1.0, NAN, INF], [0.0, -0.0, 0.0, 3.0, 3.0, 3.0, -1.0, 2.0]]
    x = dt.tensor(rows)
    for descending in (False, True):
        s = dt.sort(x, descending=descending)
        for r, row in enumerate(rows):
            want_values, want_order = _sorted_row(row, descending)
            assert _same(s.values[r].tolist(), want_values), (descending, r)
            assert s.indices[r].tolist() == want_order, (descending, r, s.indices[r].tolist(), want_order)
        assert x.argsort(descending=descending, stable=True).tolist() == s.indices.tolist()
    assert type(s).__name__ == "sort" and type(s).__module__ == "dyntrace.return_types"
    assert isinstance(s, tuple) and s[0] is not None and len(s) == 2


def test_sort_every_dim_dtype_and_layout():
    seed(19201)
    for dtype in (dt.int32, dt.int64, dt.float16, dt.float32, dt.float64, dt.bool):
        for x in (rand_tensor((4, 5, 6), dtype, -3, 3), noncontig((4, 5, 6), dtype, low=-3, high=3)):
            for dim in (0, 1, -1):
                v, i = x.sort(dim, descending=dim == 1)
                assert v.dtype == dtype and i.dtype == dt.int64 and v.shape == x.shape
                moved = x.transpose(dim, -1).tolist()
                got_v, got_i = v.transpose(dim, -1).tolist(), i.transpose(dim, -1).tolist()
                for a in range(len(moved)):
                    for b in range(len(moved[a])):
                        wv, wi = _sorted_row(moved[a][b], dim == 1)
                        assert got_v[a][b] == wv and got_i[a][b] == wi, (dtype, dim)
    assert dt.sort(dt.zeros(3, 0)).values.shape == (3, 0)
    assert dt.sort(dt.tensor(2.0)).values.item() == 2.0 and dt.sort(dt.tensor(2.0)).indices.item() == 0
    assert_raises(IndexError, dt.sort, dt.zeros(2, 3), 2)


def test_topk():
    x = dt.tensor([[1.0, 5.0, NAN, 5.0, 2.0], [0.0, -1.0, 3.0, 3.0, 3.0]])
    t = dt.topk(x, 3)
    assert _same(t.values[0].tolist(), [NAN, 5.0, 5.0]) and t.indices[0].tolist() == [2, 1, 3]
    assert t.values[1].tolist() == [3.0, 3.0, 3.0] and t.indices[1].tolist() == [2, 3, 4]
    s = x.topk(2, dim=1, largest=False)
    assert s.values.tolist() == [[1.0, 2.0], [-1.0, 0.0]] and s.indices.tolist() == [[0, 4], [1, 0]]
    assert dt.topk(x, 0).values.shape == (2, 0) and dt.topk(x, 2, 0).values.shape == (2, 5)
    assert_raises(ValueError, dt.topk, x, 6, match=("k (6)", "size 5"))
    assert_raises(ValueError, dt.topk, x, -1)


def test_max_min_all_dim_and_elementwise():
    seed(19202)
    x = rand_tensor((4, 7))
    xs = x.tolist()
    assert dt.max(x).item() == max(max(r) for r in xs) and x.min().item() == min(min(r) for r in xs)
    for keepdim in (False, True):
        r = x.max(1, keepdim=keepdim)
        assert type(r).__name__ == "max" and r.values.dtype == x.dtype and r.indices.dtype == dt.int64
        want = [max(row) for row in xs]
        assert r.values.flatten().tolist() == want and r.values.ndim == (2 if keepdim else 1)
        assert r.indices.flatten().tolist() == [row.index(max(row)) for row in xs]
        v, i = dt.min(x, dim=0, keepdim=keepdim)
        cols = list(zip(*xs))
        assert v.flatten().tolist() == [min(c) for c in cols]
        assert i.flatten().tolist() == [list(c).index(min(c)) for c in cols]
    ties = dt.tensor([[1, 3, 3, 0], [2, 2, 2, 2]])
    assert ties.max(1).indices.tolist() == [1, 0] and ties.min(1).indices.tolist() == [3, 0]  # first one
    nan = dt.tensor([[1.0, NAN, 5.0, NAN]])
    r = nan.max(1)
    assert math.isnan(r.values.item()) and r.indices.item() == 1         # NaN propagates, first NaN
    assert math.isnan(nan.min().item())
    y = rand_tensor((7,))
    assert dt.max(x, y).tolist() == [[max(a, b) for a, b in zip(row, y.tolist())] for row in xs]
    assert x.min(y).tolist() == [[min(a, b) for a, b in zip(row, y.tolist())] for row in xs]
    assert_raises(IndexError, dt.max, dt.zeros(0, 3), 0)
    if np is not None:
        xn = np.array(xs)
        assert x.max(0).values.tolist() == xn.max(0).tolist() and x.max(0).indices.tolist() == xn.argmax(0).tolist()


def _check_cumsum(x, dim, rel):
    got = dt.cumsum(x, dim).transpose(dim, -1).tolist()
    rows = x.transpose(dim, -1).tolist()
    for g_row, row in zip(got, rows):
        for k in range(len(row)):
            exact = math.fsum(row[:k + 1])
            bound = rel * abs(exact) + (k + 1) * 2.0 ** -52 * math.fsum(abs(v) for v in row[:k + 1])
            assert abs(g_row[k] - exact) <= bound, (k, g_row[k], exact, bound)


def test_cumsum_within_its_error_model():
    seed(19203)
    for dtype, rel in ((dt.float32, 2.0 ** -24), (dt.float64, 0.0), (dt.float16, 2.0 ** -11)):
        n = 60 if dtype == dt.float16 else 1031
        _check_cumsum(rand_tensor((3, n), dtype), 1, rel)
        _check_cumsum(noncontig((5, 4), dtype), 0, rel)
    i = dt.tensor([[1, 2, 3], [4, 5, 6]], dtype=dt.int32)
    assert dt.cumsum(i, 1).tolist() == [[1, 3, 6], [4, 9, 15]] and dt.cumsum(i, 1).dtype == dt.int64
    assert dt.cumsum(i, 0, dtype=dt.float64).tolist() == [[1, 2, 3], [5, 7, 9]]
    assert dt.cumsum(dt.tensor([True, False, True]), 0).tolist() == [1, 1, 2]
    assert dt.cumsum(dt.tensor([1.0, NAN, 2.0]), 0).tolist()[0] == 1.0
    assert dt.cumsum(dt.zeros(0, 3), 0).shape == (0, 3)
    assert_raises(IndexError, dt.cumsum, i, 2)


def test_cumprod():
    x = dt.tensor([[1.5, -2.0, 0.5, 3.0], [2.0, 0.0, 7.0, 1.0]], dtype=dt.float64)
    want = [[1.5, -3.0, -1.5, -4.5], [2.0, 0.0, 0.0, 0.0]]
    assert x.cumprod(1).tolist() == want               # exact in binary
    assert dt.cumprod(dt.arange(1, 6), 0).tolist() == [1, 2, 6, 24, 120]
    seed(19204)
    y = rand_tensor((200,), dt.float64, 0.5, 1.5)
    got, acc = dt.cumprod(y, 0).tolist(), 1.0
    for k, v in enumerate(y.tolist()):
        acc *= v
        assert abs(got[k] - acc) <= (k + 2) * 2.0 ** -52 * abs(acc)


def searching(x, y):
    v, i = x.max(1)
    r = x.min(0, keepdim=True)
    s = dt.sort(x, 1, descending=True)
    t = x.topk(2, largest=False)
    return (v * 2, i, r, r.values + 1, s.indices, s.values.exp(), t, x.argsort(0),
            dt.cumsum(x, 1).relu(), x.cumprod(0), dt.max(x, y), x.min(), x.max())


def test_sorts_scans_and_max_under_jit_match_eager_bit_for_bit():
    for backend in ("eager", "cpu"):
        dt.reset()
        jfn = jitted_copy(searching, backend=backend)
        run_differential(searching, jfn, lambda i: Call(noncontig((4, 6)) if i else rand_tensor((4, 6)),
                                                        rand_tensor((6,))), 3, seed_base=31, exact=True)
        s = stats()
        assert s["graph_breaks"] == 0 and s["fallbacks"] == 0, (backend, s["break_reasons"])
        out = jfn(rand_tensor((4, 6)), rand_tensor((6,)))
        assert type(out[2]).__name__ == "min" and type(out[6]).__name__ == "topk"
