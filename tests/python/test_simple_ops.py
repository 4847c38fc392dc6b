"""isnan/isinf/isfinite, nan_to_num, clamp_min/clamp_max, add/sub with alpha, fill_/zero_/copy_,
tril/triu, flip, roll, repeat, unbind and eye against plain Python (and numpy where importable),
then all of them under dt.jit on the eager and cpu backends, bit for bit and without a graph
break. Every expected value is exact (selects, moves and small-integer arithmetic)."""
import math

import dyntrace as dt
from jitlib import Call, jitted_copy, run_differential, stats
from testlib import ALL_DTYPES, FLOAT_DTYPES, NAN, assert_raises, noncontig, np, rand_tensor, seed

INF = float("inf")
SPECIAL = [[1.0, NAN, INF], [-INF, -0.0, 3.5]]


def test_isnan_isinf_isfinite():
    for dtype in FLOAT_DTYPES:
        x = dt.tensor(SPECIAL, dtype=dtype)
        flat = [v for row in SPECIAL for v in row]
        assert dt.isnan(x).flatten().tolist() == [math.isnan(v) for v in flat]
        assert x.isinf().flatten().tolist() == [math.isinf(v) for v in flat]
        assert dt.isfinite(x).flatten().tolist() == [math.isfinite(v) for v in flat]
        assert dt.isnan(x).dtype == dt.bool
    for dtype in (dt.bool, dt.int32, dt.int64):
        i = dt.ones(3, dtype=dtype)
        assert dt.isnan(i).tolist() == [False] * 3 and dt.isinf(i).tolist() == [False] * 3
        assert dt.isfinite(i).tolist() == [True] * 3


def test_nan_to_num():
    for dtype, largest in ((dt.float16, 65504.0), (dt.float32, 3.4028234663852886e38), (dt.float64, 1.7976931348623157e308)):
        x = dt.tensor(SPECIAL, dtype=dtype)
        assert x.nan_to_num().tolist() == [[1.0, 0.0, largest], [-largest, -0.0, 3.5]]
        assert dt.nan_to_num(x, nan=2.0, posinf=9.0, neginf=-9.0).tolist() == [[1.0, 2.0, 9.0], [-9.0, -0.0, 3.5]]
        y = x.clone()
        assert y.nan_to_num_(neginf=0.0) is y and y.tolist() == [[1.0, 0.0, largest], [0.0, -0.0, 3.5]]
    i = dt.arange(4)
    assert dt.nan_to_num(i).tolist() == [0, 1, 2, 3] and dt.nan_to_num(i).dtype == dt.int64
    if np is not None:
        assert dt.nan_to_num(dt.tensor(SPECIAL, dtype=dt.float64)).tolist() == np.nan_to_num(np.array(SPECIAL)).tolist()


def test_clamp_min_max_and_alpha():
    seed(19301)
    x = rand_tensor((4, 5))
    xs = x.tolist()
    assert dt.clamp_min(x, 0.5).tolist() == [[max(v, 0.5) for v in r] for r in xs]
    assert x.clamp_max(-0.25).tolist() == [[min(v, -0.25) for v in r] for r in xs]
    lim = rand_tensor((5,))
    assert x.clamp_min(lim).tolist() == [[max(v, l) for v, l in zip(r, lim.tolist())] for r in xs]
    assert math.isnan(dt.clamp_min(dt.tensor([NAN]), 0.0).item())     # NaN propagates, as in PyTorch
    y = x.clone()
    assert y.clamp_max_(0.0) is y and y.tolist() == x.clamp_max(0.0).tolist()
    a, b = dt.arange(4), dt.tensor([3, 1, 4, 1])
    assert dt.add(a, b, alpha=2).tolist() == [6, 3, 10, 5] and dt.add(a, b, alpha=2).dtype == dt.int64
    assert a.sub(b, alpha=3).tolist() == [-9, -2, -10, 0]
    assert dt.add(a, 2, alpha=3).tolist() == [6, 7, 8, 9]
    f = dt.tensor([1.0, 2.0])
    assert dt.add(f, f, alpha=0.5).tolist() == [1.5, 3.0] and dt.sub(f, 1, alpha=0.25).tolist() == [0.75, 1.75]
    g = f.clone()
    assert g.add_(dt.tensor([2.0, 4.0]), alpha=-0.5) is g and g.tolist() == [0.0, 0.0]
    assert_raises(TypeError, dt.add, a, b, alpha=0.5, match="alpha")
    assert_raises(TypeError, dt.add, a, b, alpha="x")


def test_fill_zero_copy():
    for dtype in ALL_DTYPES:
        x = dt.ones(2, 3, dtype=dtype)
        assert x.zero_() is x and x.tolist() == [[0] * 3] * 2
        assert x.fill_(1) is x and x.tolist() == [[1] * 3] * 2
    x = dt.zeros(2, 3)
    x.fill_(dt.tensor(2.5))
    assert x.tolist() == [[2.5] * 3] * 2
    i = dt.zeros(3, dtype=dt.int32)
    assert i.copy_(dt.tensor([1.0, 2.0, 3.0])).tolist() == [1, 2, 3]      # copy_ converts
    t = noncontig((3, 4))
    t.copy_(dt.arange(4))                                                 # and broadcasts
    assert t.tolist() == [[0.0, 1.0, 2.0, 3.0]] * 3
    col = dt.zeros(4, 3).T
    col.fill_(7.0)
    assert col.tolist() == [[7.0] * 4] * 3
    assert dt.fill(dt.zeros(2), 3.0).tolist() == [3.0, 3.0]
    assert_raises(dt.ShapeError, t.copy_, dt.ones(5))
    assert_raises(ValueError, x.fill_, dt.ones(2), match="0-d")


def test_tril_triu_eye():
    seed(19302)
    for dtype in ALL_DTYPES:
        for x in (rand_tensor((2, 4, 5), dtype), noncontig((2, 4, 5), dtype)):
            xs = x.tolist()
            for k in (-2, 0, 1, 7):
                want_l = [[[v if j - i <= k else 0 for j, v in enumerate(r)] for i, r in enumerate(m)] for m in xs]
                want_u = [[[v if j - i >= k else 0 for j, v in enumerate(r)] for i, r in enumerate(m)] for m in xs]
                assert dt.tril(x, k).tolist() == want_l and x.triu(k).tolist() == want_u, (dtype, k)
    y = dt.ones(3, 3)
    assert y.tril_() is y and y.tolist() == [[1, 0, 0], [1, 1, 0], [1, 1, 1]]
    assert dt.triu(dt.zeros(0, 3)).shape == (0, 3)
    assert_raises(ValueError, dt.tril, dt.ones(3), match="2 dims")
    assert dt.eye(3).tolist() == [[1, 0, 0], [0, 1, 0], [0, 0, 1]] and dt.eye(3).dtype == dt.float32
    assert dt.eye(2, 4, dtype=dt.int64).tolist() == [[1, 0, 0, 0], [0, 1, 0, 0]]
    assert dt.eye(0).shape == (0, 0)
    assert_raises(ValueError, dt.eye, -1)


def test_flip_roll_repeat_unbind():
    seed(19303)
    x = noncontig((3, 4, 5), dt.int64, low=-9, high=9)
    xs = x.tolist()
    assert dt.flip(x, [0, 2]).tolist() == [[r[::-1] for r in m] for m in xs[::-1]]
    assert x.flip(-2).tolist() == [m[::-1] for m in xs]
    assert_raises(ValueError, dt.flip, x, [0, 0])
    assert x.roll(2, 2).tolist() == [[r[-2:] + r[:-2] for r in m] for m in xs]
    assert x.roll((-1, 1), (0, 1)).tolist() == [m[-1:] + m[:-1] for m in xs[1:] + xs[:1]]
    flat = [v for m in xs for r in m for v in r]
    assert dt.roll(x, 7).flatten().tolist() == flat[-7:] + flat[:-7] and dt.roll(x, 7).shape == x.shape
    assert dt.roll(x, -61, 0).tolist() == xs[1:] + xs[:1]
    assert_raises(ValueError, dt.roll, x, (1, 2), (0,))
    r = x.repeat(2, 1, 3)
    assert r.shape == (6, 4, 15) and r.tolist() == [[row * 3 for row in m] for m in xs + xs]
    assert dt.tensor([1, 2]).repeat(2, 2).tolist() == [[1, 2, 1, 2], [1, 2, 1, 2]]
    assert x.repeat(1, 0, 1).shape == (3, 0, 5)
    assert_raises(ValueError, x.repeat, 2, 2)
    parts = x.unbind(1)
    assert len(parts) == 4 and parts[2].tolist() == [m[2] for m in xs]
    assert [p.tolist() for p in dt.unbind(x)] == xs
    if np is not None:
        xn = np.array(xs)
        assert x.roll(3, 1).tolist() == np.roll(xn, 3, 1).tolist() and dt.flip(x, [1]).tolist() == np.flip(xn, 1).tolist()
        assert x.repeat(2, 2, 1).tolist() == np.tile(xn, (2, 2, 1)).tolist()


def simple_ops(x, y, i):
    a = dt.nan_to_num(x / y).clamp_min(-3.0).clamp_max(3.0)
    b = dt.isfinite(x / y) & ~dt.isnan(x) | dt.isinf(y)
    c = dt.add(x, y, alpha=2) - dt.sub(i, 1, alpha=2)
    z = x.clone()
    z.zero_()
    z.copy_(y)
    z.fill_(0.5)
    t = dt.tril(x, -1) + x.triu(1) + dt.eye(x.shape[0], x.shape[1])
    f = dt.flip(x, [1]).roll(1, 0).repeat(2, 1)
    u, v = y.unbind(0)[:2]
    return a, b, c, z, t, f, u + v


def test_simple_ops_under_jit_match_eager_bit_for_bit():
    for backend in ("eager", "cpu"):
        dt.reset()
        jfn = jitted_copy(simple_ops, backend=backend)
        run_differential(simple_ops, jfn, lambda n: Call(rand_tensor((4, 5)), rand_tensor((4, 5)),
                                                         dt.arange(5)), 3, seed_base=41, exact=True)
        s = stats()
        assert s["graph_breaks"] == 0 and s["fallbacks"] == 0, (backend, s["break_reasons"])
