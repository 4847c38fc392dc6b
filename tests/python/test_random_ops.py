"""randint, randperm, multinomial, bernoulli, normal and Tensor.uniform_: ranges, dtypes, errors,
the same numbers for the same seed, and the same numbers under dt.jit (eager and cpu backends)
as eagerly. Distribution checks use counts far from their bounds: with n draws a frequency's
standard deviation is at most 0.5/sqrt(n), and the tolerances are 6 of those."""
import math

import dyntrace as dt
from jitlib import jitted_copy, stats
from testlib import assert_close, assert_raises


def _same_seed(fn):
    dt.manual_seed(19)
    a = fn()
    dt.manual_seed(19)
    b = fn()
    return a, b


def test_randint_and_randperm():
    n = 20000
    x = dt.randint(10, (n,))
    assert x.dtype == dt.int64 and 0 <= x.min().item() and x.max().item() <= 9
    counts = [(x == k).sum().item() / n for k in range(10)]
    assert all(abs(c - 0.1) < 6 * 0.5 / math.sqrt(n) for c in counts), counts
    y = dt.randint(-3, 4, (3, 5), dtype=dt.int32)
    assert y.dtype == dt.int32 and y.shape == (3, 5) and -3 <= y.min().item() and y.max().item() <= 3
    a, b = _same_seed(lambda: dt.randint(100, (50,)))
    assert a.tolist() == b.tolist()
    p = dt.randperm(100)
    assert sorted(p.tolist()) == list(range(100)) and p.tolist() != list(range(100))
    assert dt.randperm(0).shape == (0,)
    assert_raises(RuntimeError, dt.randint, 5, 5, (2,), match="from=5 >= to=5")
    assert_raises(RuntimeError, dt.randperm, -1)


def test_multinomial():
    n = 20000
    probs = dt.tensor([0.2, 0.0, 0.5, 0.3])
    s = dt.multinomial(probs, n, replacement=True)
    freq = [(s == k).sum().item() / n for k in range(4)]
    assert freq[1] == 0 and all(abs(f - p) < 6 * 0.5 / math.sqrt(n) for f, p in zip(freq, [0.2, 0, 0.5, 0.3])), freq
    rows = dt.multinomial(dt.tensor([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0]]), 2)
    assert rows.shape == (2, 2) and [sorted(r) for r in rows.tolist()] == [[0, 1], [1, 2]]   # no repeats, no zeros
    # Without replacement the first draw follows the weights.
    firsts = [dt.multinomial(dt.tensor([0.9, 0.1]), 1).item() for _ in range(400)]
    assert abs(firsts.count(0) / 400 - 0.9) < 6 * 0.5 / math.sqrt(400)
    assert_raises(RuntimeError, dt.multinomial, probs, 5, match="without replacement")
    assert_raises(RuntimeError, dt.multinomial, probs, 4, match="not enough")
    assert_raises(RuntimeError, dt.multinomial, dt.tensor([0.5, -0.1]), 1, match="< 0")
    assert_raises(RuntimeError, dt.multinomial, dt.zeros(3), 1, replacement=True, match="sum of probabilities")


def test_bernoulli_normal_uniform():
    n = 20000
    b = dt.bernoulli(dt.full((n,), 0.3))
    assert b.dtype == dt.float32 and set(b.tolist()) <= {0.0, 1.0}
    assert abs(b.mean().item() - 0.3) < 6 * 0.5 / math.sqrt(n)
    assert dt.bernoulli(dt.zeros(5)).tolist() == [0.0] * 5 and dt.bernoulli(dt.ones(5)).tolist() == [1.0] * 5
    assert abs(dt.bernoulli(dt.zeros(n), 0.7).mean().item() - 0.7) < 6 * 0.5 / math.sqrt(n)
    assert_raises(RuntimeError, dt.bernoulli, dt.zeros(2), 1.5, match="1.5")
    z = dt.normal(dt.full((n,), 2.0), 3.0)
    # Sample mean within 6 standard errors (3/sqrt(n)); sample std within 6 of its ~3/sqrt(2n).
    assert abs(z.mean().item() - 2.0) < 6 * 3 / math.sqrt(n) and abs(z.std().item() - 3.0) < 6 * 3 / math.sqrt(2 * n)
    w = dt.normal(dt.zeros(2, 1), dt.ones(3))
    assert w.shape == (2, 3)
    v = dt.normal(1.0, 0.5, (4, 5), dtype=dt.float64)
    assert v.shape == (4, 5) and v.dtype == dt.float64
    u = dt.zeros(n)
    assert u.uniform_(-2, 3) is u
    assert -2 <= u.min().item() and u.max().item() < 3 and abs(u.mean().item() - 0.5) < 6 * 5 / math.sqrt(12 * n)
    a, c = _same_seed(lambda: (dt.normal(0.0, 1.0, (5,)), dt.bernoulli(dt.full((5,), 0.5)), dt.zeros(3).uniform_()))
    for x, y in zip(a, c):
        assert x.tolist() == y.tolist()
    assert_raises(RuntimeError, dt.zeros(2).uniform_, 3, 2, match="from=3")


def draws(x, p):
    return (dt.randint(5, (4,)) + dt.randperm(4), dt.multinomial(p, 3), dt.multinomial(p, 6, replacement=True),
            dt.bernoulli(x.sigmoid()), dt.normal(x, 0.5), dt.normal(0.0, 1.0, (3,)), x.clone().uniform_(1, 2))


def test_random_ops_under_jit_draw_what_eager_draws():
    for backend in ("eager", "cpu"):
        dt.reset()
        jfn = jitted_copy(draws, backend=backend)
        for i in range(2):
            x, p = dt.randn(4 + i), dt.tensor([0.1, 0.2, 0.3, 0.4])
            dt.manual_seed(50 + i)
            want = draws(x, p)
            dt.manual_seed(50 + i)
            got = jfn(x, p)
            for g, w in zip(got, want):
                assert_close(g, w, rtol=0, atol=0, msg=backend)
        s = stats()
        assert s["graph_breaks"] == 0 and s["fallbacks"] == 0, (backend, s["break_reasons"])
