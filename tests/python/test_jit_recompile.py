"""Recompilation: which changes retrace (with a reason naming the guard's source and both values),
which do not (batch size when sizes are never read), the cache limit and its one warning, and
cache hits."""
import warnings

import dyntrace as dt
from jitlib import assert_reason, assert_same, fresh_copy, jitted_copy, stats
from testlib import assert_close, rand_tensor, seed

SCALE_G = 2.0


def _double_plus_one(x):
    return x * 2 + 1


def _uses_rows(x):
    n = x.shape[0]
    return x * n


def _uses_size0(x):
    return x.sum(0) / x.size(0)


def _uses_global(x):
    return x * SCALE_G


def _never_reads_sizes(x, w):
    return dt.relu(x @ w) + dt.exp(x).sum(-1, keepdim=True)


def _scaled(x, n):
    return x * n


def _scaled_by_parity(x, n):
    # A branch on n: once n is dynamic the branch's condition is guarded (`L['n'] % 2`), so one
    # trace per direction, not per value.
    if n % 2:
        return x * n
    return x * n


def _scaled_by_repeats(x, n):
    # range(n) is unrolled: n shapes the graph, so each value is specialised and recompiles.
    acc = x * 0
    for _ in range(n):
        acc = acc + x
    return acc


def _loop_list(xs):
    acc = xs[0]
    for t in xs[1:]:
        acc = acc + t
    return acc


def make_fn(k):
    def f(x):
        return x * k
    return f


def _check(fn, *args):
    """fn(*args) under jit equals an unmarked copy's result on equal inputs."""
    plain = fresh_copy(fn)
    cloned = tuple(a.clone() if isinstance(a, dt.Tensor) else a for a in args)
    expected = plain(*cloned)
    actual = fn(*args)
    assert_same(actual, expected, identity=False)
    return actual


def _last_reason(before, after):
    assert after["recompiles"] == before["recompiles"] + 1, (before, after)
    reasons = after["recompile_reasons"]
    assert len(reasons) == len(before["recompile_reasons"]) + 1, reasons
    assert isinstance(reasons[-1], str) and reasons[-1], reasons
    return reasons[-1]


def test_second_call_is_cache_hit():
    dt.reset()
    seed(21001)
    f = jitted_copy(_double_plus_one)
    _check(f, rand_tensor((5, 3)))
    s1 = stats()
    assert s1["cache_misses"] == 1 and s1["frames_traced"] == 1, s1
    assert s1["cache_hits"] == 0 and s1["recompiles"] == 0, s1
    _check(f, rand_tensor((5, 3)))
    s2 = stats()
    assert s2["cache_hits"] == s1["cache_hits"] + 1, s2
    assert s2["cache_misses"] == s1["cache_misses"], s2
    assert s2["frames_traced"] == s1["frames_traced"], s2
    assert s2["recompiles"] == 0, s2
    assert len(dt.guards(f)) == 1


def test_dtype_change_recompiles():
    dt.reset()
    seed(21002)
    f = jitted_copy(_double_plus_one)
    _check(f, rand_tensor((4, 3)))
    before = stats()
    _check(f, rand_tensor((4, 3), dt.int64, -5, 5))
    after = stats()
    reason = _last_reason(before, after)
    assert_reason(reason, "L['x']", "float32", "int64")
    assert after["frames_traced"] == before["frames_traced"] + 1, after
    assert len(dt.guards(f)) == 2
    # Both entries are live: going back to float32 is a hit, not another recompile.
    _check(f, rand_tensor((4, 3)))
    again = stats()
    assert again["recompiles"] == after["recompiles"], again
    assert again["cache_hits"] == after["cache_hits"] + 1, again


def test_rank_change_recompiles():
    dt.reset()
    seed(21003)
    f = jitted_copy(_double_plus_one)
    _check(f, rand_tensor((4, 3)))
    before = stats()
    _check(f, rand_tensor((2, 4, 3)))
    reason = _last_reason(before, stats())
    assert_reason(reason, "L['x']", 2, 3)
    assert len(dt.guards(f)) == 2


def test_read_size_change_recompiles():
    dt.reset()
    seed(21004)
    f = jitted_copy(_uses_rows)
    _check(f, rand_tensor((4, 3)))
    g0 = dt.guards(f)
    assert len(g0) == 1 and "L['x']" in g0[0]
    before = stats()
    _check(f, rand_tensor((6, 3)))
    reason = _last_reason(before, stats())
    assert_reason(reason, "L['x']", 4, 6)
    # The other dim was never read: changing it with the same rows is a hit.
    before = stats()
    _check(f, rand_tensor((6, 9)))
    after = stats()
    assert after["recompiles"] == before["recompiles"], after["recompile_reasons"]
    assert after["cache_hits"] == before["cache_hits"] + 1, after


def test_size_method_read_recompiles():
    dt.reset()
    seed(21005)
    f = jitted_copy(_uses_size0)
    _check(f, rand_tensor((5, 2)))
    before = stats()
    _check(f, rand_tensor((7, 2)))
    reason = _last_reason(before, stats())
    assert_reason(reason, "L['x']", 5, 7)


def test_global_rebound_recompiles():
    global SCALE_G
    dt.reset()
    seed(21006)
    f = jitted_copy(_uses_global)
    x = rand_tensor((3, 3))
    try:
        SCALE_G = 2.0
        r1 = f(x)
        assert_close(r1, x * 2.0)
        before = stats()
        SCALE_G = 3.0
        r2 = f(x)
        assert_close(r2, x * 3.0)
        reason = _last_reason(before, stats())
        assert_reason(reason, "G['SCALE_G']", 2.0, 3.0)
        guards = "\n".join(dt.guards(f))
        assert "G['SCALE_G']" in guards, guards
    finally:
        SCALE_G = 2.0


def test_closure_value_change_recompiles():
    # Two closures of one code object, run under tracing(): they share that mode's entries, so
    # the second one's closure value is a guard failure and a recompile. (Each dt.jit(...) of
    # them would have entries of its own.)
    dt.reset()
    seed(21007)
    f2 = make_fn(2)
    f3 = make_fn(3)
    assert f2.__code__ is f3.__code__
    x = rand_tensor((4, 5))

    def traced(f):
        with dt.tracing():
            return f(x)

    assert_close(traced(f2), x * 2)
    before = stats()
    assert_close(traced(f3), x * 3)
    reason = _last_reason(before, stats())
    assert_reason(reason, "C['k']", 2, 3)
    # Both cache entries serve later calls.
    before = stats()
    assert_close(traced(f2), x * 2)
    assert_close(traced(f3), x * 3)
    after = stats()
    assert after["recompiles"] == before["recompiles"], after["recompile_reasons"]
    assert after["cache_hits"] == before["cache_hits"] + 2, after
    guards = "\n".join(dt.guards(f2))
    assert "C['k']" in guards, guards
    # Compiled separately, each closure has entries of its own: no recompile at all.
    dt.reset()
    j2, j3 = dt.jit(make_fn(2)), dt.jit(make_fn(3))
    assert_close(j2(x), x * 2)
    assert_close(j3(x), x * 3)
    assert stats()["recompiles"] == 0, stats()["recompile_reasons"]


def test_int_argument_value_change_recompiles():
    dt.reset()
    seed(21008)
    f = jitted_copy(_scaled)
    x = rand_tensor((3, 2))
    assert_close(f(x, 3), x * 3)
    before = stats()
    assert_close(f(x, 4), x * 4)
    reason = _last_reason(before, stats())
    assert_reason(reason, "L['n']", 3, 4)


def test_int_to_float_argument_recompiles():
    dt.reset()
    seed(21009)
    f = jitted_copy(_scaled)
    x = rand_tensor((3, 2))
    assert_close(f(x, 2), x * 2)
    before = stats()
    r = f(x, 2.0)
    assert r.dtype == dt.float32
    assert_close(r, x * 2.0)
    reason = _last_reason(before, stats())
    assert "L['n']" in reason, reason
    assert "int" in reason and "float" in reason, reason


def test_list_length_change_recompiles():
    dt.reset()
    seed(21010)
    f = jitted_copy(_loop_list)
    xs2 = [rand_tensor((3,)) for _ in range(2)]
    xs3 = [rand_tensor((3,)) for _ in range(3)]
    assert_close(f(xs2), xs2[0] + xs2[1])
    before = stats()
    assert_close(f(xs3), xs3[0] + xs3[1] + xs3[2])
    reason = _last_reason(before, stats())
    assert_reason(reason, "L['xs']", 2, 3)


def test_batch_size_change_does_not_recompile():
    dt.reset()
    seed(21011)
    f = jitted_copy(_never_reads_sizes)
    w = rand_tensor((4, 6))
    _check(f, rand_tensor((5, 4)), w)
    s1 = stats()
    assert s1["frames_traced"] == 1 and s1["recompiles"] == 0, s1
    for batch in (9, 17, 3, 33):
        _check(f, rand_tensor((batch, 4)), w)
    s2 = stats()
    assert s2["recompiles"] == 0, s2["recompile_reasons"]
    assert s2["frames_traced"] == s1["frames_traced"], s2
    assert s2["cache_hits"] == s1["cache_hits"] + 4, s2
    assert len(dt.guards(f)) == 1
    guards = dt.guards(f)[0]
    assert "size(0)" not in guards and "shape[0]" not in guards, guards
    # The inner dims may change too (same rank, none of size 1): still one entry.
    _check(f, rand_tensor((7, 8)), rand_tensor((8, 5)))
    s3 = stats()
    assert s3["recompiles"] == 0, s3["recompile_reasons"]
    assert len(dt.guards(f)) == 1


def test_size_one_dim_recompiles():
    dt.reset()
    seed(21012)
    f = jitted_copy(_never_reads_sizes)
    w = rand_tensor((4, 6))
    _check(f, rand_tensor((5, 4)), w)
    before = stats()
    _check(f, rand_tensor((1, 4)), w)
    after = stats()
    assert after["recompiles"] == before["recompiles"] + 1, after
    assert "L['x']" in after["recompile_reasons"][-1], after["recompile_reasons"]
    assert len(dt.guards(f)) == 2


def test_cache_limit_warns_once_and_stays_correct():
    dt.reset()
    seed(21013)
    f = jitted_copy(_scaled_by_repeats, cache_limit=2)
    x = rand_tensor((3, 4))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in (1, 2, 3):
            assert_close(f(x, n), x * n)
        for n in (4, 5, 3, 1):
            assert_close(f(x, n), x * n)
    runtime = [w for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(runtime) == 1, [str(w.message) for w in caught]
    assert "cache_limit" in str(runtime[0].message), str(runtime[0].message)
    assert len(dt.guards(f)) <= 2, dt.guards(f)
    s = stats()
    assert s["frames_traced"] <= 2, s


def test_a_branch_on_a_dynamic_int_guards_the_condition():
    dt.reset()
    seed(21015)
    f = jitted_copy(_scaled_by_parity)
    x = rand_tensor((2, 2))
    for n in range(2, 14):
        assert_close(f(x, n), x * n)
    s = stats()
    assert s["frames_traced"] == 3, s["recompile_reasons"]  # static, then one per direction
    guards = "\n".join(dt.guards(f))
    assert "not (L['n'] % 2)" in guards and "\nL['n'] % 2  #" in guards, guards


def test_cache_limit_default_is_eight():
    dt.reset()
    seed(21014)
    f = jitted_copy(_scaled_by_repeats)
    x = rand_tensor((2, 2))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in range(8):
            assert_close(f(x, n), x * n)
        assert not [w for w in caught if issubclass(w.category, RuntimeWarning)], (
            [str(w.message) for w in caught])
        assert_close(f(x, 8), x * 8)
    runtime = [w for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(runtime) == 1 and "cache_limit" in str(runtime[0].message), (
        [str(w.message) for w in caught])
    assert len(dt.guards(f)) == 8


def _sgd_step(w, g, lr, k):
    return w - lr * g * k


def test_changing_numbers_become_run_time_scalars_after_one_recompile():
    # A learning-rate schedule and an int argument: a float argument is a run-time number from
    # the first trace (automatic dynamic), an int after its first change recompiles (with the
    # reason); from then on both are run-time numbers of the graph, on every backend.
    for backend in ("eager", "cpu"):
        dt.reset()
        seed(21020)
        f = jitted_copy(_sgd_step, backend=backend)
        w, g = rand_tensor((8,)), rand_tensor((8,))
        for i in range(12):
            lr, k = 0.1 / (i + 1), 1 + i % 3
            assert f(w, g, lr, k).tolist() == _sgd_step(w, g, lr, k).tolist(), (backend, i)
        s = stats()
        assert s["recompiles"] == 1 and s["graphs"] <= 2, (backend, s["recompile_reasons"])
        assert not any("L['lr']" in r for r in s["recompile_reasons"]), s["recompile_reasons"]
        assert any("L['k']" in r for r in s["recompile_reasons"]), s["recompile_reasons"]
        assert s["cache_hits"] >= 9, (backend, s)
