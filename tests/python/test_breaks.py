"""Graph breaks: when the tracer cannot capture something at instruction P, the graph so far
becomes a compiled segment ending at P; data-dependent jumps and uncapturable calls escape (run on
real values, then execution continues with the cached, guarded segment after them); anything else
hands the frame back to CPython at P with its locals and stack. Results, printed output, side
effects and exceptions must be those of plain CPython, and repeated calls must reuse the segments.

The dedicated tests come first (the canonical example, print order, data-dependent loops, a break
three calls deep, exceptions, stats, fullgraph, explain); then a differential corpus of small
break-y functions, one generated `test_corpus_<name>` per entry (plain CPython on an unmarked copy
against dt.jit, several calls on fresh inputs of odd sizes, inputs constructed to take each
branch), with global lists / dicts, printed text and mutated inputs compared.
"""
import contextlib
import io
import math
import os
import time
import warnings

import dyntrace as dt
from breaklib import (break_stats, check_call, clone_args, line_of, run_break_differential,
                      user_frames)
from jitlib import fresh_copy, jitted_copy
from testlib import assert_raises, rand_tensor, seed

THIS_FILE = os.path.abspath(__file__)

# Python-side effects written by the functions below; compared between the two runs.
LOG = []
STATE = {}


def effects():
    """Snapshot of the side-effect globals, then clears them (called before and after runs)."""
    snap = (list(LOG), dict(STATE))
    LOG.clear()
    STATE.clear()
    return snap


ODD = (5, 7, 9, 11, 13, 6)       # rows for call i (never 1: no size-1 specialisation)
ODD2 = (3, 5, 7, 9, 4, 11)       # columns for call i


def T(*shape, dtype=dt.float32, low=-2.0, high=2.0):
    return rand_tensor(shape, dtype, low, high)


def P(*shape, dtype=dt.float32):
    """Strictly positive values."""
    return rand_tensor(shape, dtype, 0.5, 2.0)


def signed(shape, positive, low=0.7, high=2.0):
    """Values of one sign only, magnitudes in [low, high)."""
    t = rand_tensor(shape, dt.float32, low, high)
    return t if positive else -t


def x1(i):
    return T(ODD[i], ODD2[i])


def x2(i):
    return (T(ODD[i], ODD2[i]), T(ODD[i], ODD2[i]))


def sgn1(i):
    """Positive on even calls, negative on odd ones."""
    return signed((ODD[i], ODD2[i]), i % 2 == 0)


def sgn2(i):
    """Two inputs whose signs go through (+,+), (-,+), (+,-), (-,-)."""
    shape = (ODD[i], ODD2[i])
    return signed(shape, i % 2 == 0), signed(shape, (i // 2) % 2 == 0)


def three_way(i):
    """Mean well above 0.5, well below -0.5, and near 0, in turn."""
    shape = (ODD[i], ODD2[i])
    k = i % 3
    if k == 0:
        return T(*shape, low=0.7, high=2.0)
    if k == 1:
        return T(*shape, low=-2.0, high=-0.7)
    return T(*shape, low=-0.4, high=0.4)


def scaled(i):
    """Max |x| from below 1 to about 32 (0 to 6 halvings)."""
    return T(ODD[i], ODD2[i]) * (0.3, 4.0, 16.0, 1.5, 0.45, 8.0)[i]


def rows(i):
    """At least 4 rows; row signs alternate with the call."""
    t = T(ODD[i], ODD2[i])
    for r in range(4):
        t[r] = t[r].abs() + 0.1 if (r + i) % 2 == 0 else -(t[r].abs() + 0.1)
    return t


def flagged(i):
    """Values in [-1, 1), plus one element of 1.9 on odd calls."""
    t = T(ODD[i], ODD2[i], low=-1.0, high=1.0)
    if i % 2:
        t[1, 2] = 1.9
    return t


def ok_bad_ok(i):
    """Shapes that broadcast, then shapes that do not (same ranks, no size-1 dims)."""
    n = ODD[i]
    return T(n, 5), T(n, (5, 4, 5, 6)[i])


# ---------------------------------------------------------------------------------------------
# Functions for the dedicated tests.

def canonical(a, b):
    x = a / (abs(a) + 1)
    if b.sum() < 0:
        b = b * -1
    return x * b


def print_mid(x, w):
    h = x @ w
    print("before", h.sum())
    y = dt.relu(h) * 2
    print("after", y.sum(), y.shape)
    return y + 1, h


def halve_count(x):
    n = 0
    while x.abs().amax() > 1:
        x = x / 2
        n += 1
    return x, n


def halve_only(x):
    while x.abs().amax() > 1:
        x = x * 0.5
    return x + 1


def deep_inner(t):
    if t.sum() > 0:
        print("inner positive", t.amax())
        LOG.append("inner+")
        return t * 2
    print("inner negative", t.amin())
    LOG.append("inner-")
    return t - 1


def deep_mid(t):
    u = deep_inner(t + 1) * 3
    LOG.append("mid")
    return u


def deep_outer(t):
    return deep_mid(t * 0.5) - t


def three_deep(x):
    y = x.tanh() * 4
    z = deep_outer(y)
    return z + y, z.sum()


def print_then_mismatch(x, y):
    z = x * 2
    print("z", z.sum())
    return z + y


def refusing_helper(t):
    print("helper sees", t.ndim)
    raise ValueError("refused %d-d input" % t.ndim)


def escaped_call_raises(x):
    y = x * 2
    return refusing_helper(y) + 1


def raise_in_try(x):
    y = x * 2
    try:
        if y.sum() > 0:
            raise ValueError("positive sum")
        r = y - 1
        tag = "ok"
    except ValueError as e:
        r = y + 1
        tag = str(e)
    return r * 3, tag


def item_scale(x):
    s = x.sum().item()
    return x * s, s


def sorted_middle(x):
    vals = sorted(x.reshape(-1).tolist())
    return x - vals[len(vals) // 2], vals[0]


def two_breaks(x):
    y = x.exp()
    print("y", y.amax())
    z = y * 2
    if z.sum() > 0:
        z = z - 1
    return z


def branch_only(x):
    y = x * 2
    if y.sum() > 0:
        return y + 1
    return y - 1


# ---------------------------------------------------------------------------------------------
# 1. The canonical example.

def test_canonical_both_branches_compiled():
    dt.reset()
    compiled = []

    def backend(graph, example_inputs):
        compiled.append(str(graph))
        return graph.run

    jf = jitted_copy(canonical, backend=backend)
    seed(41001)
    a = T(6, 7)
    b_neg = signed((6, 7), False)
    b_pos = signed((6, 7), True)
    assert b_neg.sum().item() < 0 < b_pos.sum().item()
    check_call(canonical, jf, a, b_neg)
    s1 = break_stats()
    assert s1["graph_breaks"] >= 1 and s1["escapes"] >= 1, s1
    assert s1["fallbacks"] == 0 and s1["handbacks"] == 0, s1
    assert s1["graphs"] >= 2 and len(compiled) >= 2, (s1, compiled)
    check_call(canonical, jf, a, b_pos)
    s2 = break_stats()
    assert s2["fallbacks"] == 0 and s2["handbacks"] == 0, s2
    # The other branch's target got its own compiled segment.
    assert s2["graphs"] >= 3 and len(compiled) >= 3, (s2, compiled)
    assert s2["graphs"] > s1["graphs"], (s1, s2)
    # Both branches cached: fresh inputs of the same shapes trace nothing new.
    n_compiled = len(compiled)
    for k in range(4):
        a = T(6, 7)
        b = signed((6, 7), k % 2 == 0)
        check_call(canonical, jf, a, b)
    s3 = break_stats()
    assert s3["frames_traced"] == s2["frames_traced"], (s2, s3)
    assert s3["graphs"] == s2["graphs"], (s2, s3)
    assert s3["graph_breaks"] == s2["graph_breaks"], (s2, s3)
    assert s3["cache_hits"] >= s2["cache_hits"] + 8, (s2, s3)   # >= 2 segments per call
    assert s3["escapes"] >= s2["escapes"] + 4, (s2, s3)
    assert s3["fallbacks"] == 0 and s3["handbacks"] == 0, s3
    assert len(compiled) == n_compiled, compiled


def test_canonical_other_sizes_and_the_boundary():
    # Batch sizes are not guarded, sum == 0 takes the "not < 0" branch, as in CPython.
    dt.reset()
    jf = jitted_copy(canonical)
    seed(41002)
    for n in (3, 5, 9):
        check_call(canonical, jf, T(n, 4), signed((n, 4), n != 5))
    check_call(canonical, jf, T(4, 4), dt.zeros(4, 4))
    b = dt.ones(4, 4)
    b[0] = -3.0                                  # sum -12 + 12 = 0
    check_call(canonical, jf, T(4, 4), b)
    assert break_stats()["fallbacks"] == 0


def test_canonical_explain():
    seed(41003)
    a = T(5, 7)
    line = line_of(canonical, "if b.sum() < 0:")
    for positive in (False, True):
        dt.reset()
        b = signed((5, 7), positive)
        e = dt.explain(fresh_copy(canonical), a, b)
        assert e.graph_count >= 2, str(e)
        assert e.break_count >= 1 and len(e.breaks) == e.break_count, str(e)
        assert len(e.graphs) == e.graph_count, e.graphs
        assert all(isinstance(g, str) and g for g in e.graphs), e.graphs
        assert all(isinstance(g, str) for g in e.guards) and e.guards, e.guards
        assert any(br["line"] == line for br in e.breaks), (line, e.breaks)
        br = [br for br in e.breaks if br["line"] == line][0]
        assert os.path.basename(br["file"]) == "test_breaks.py", br
        assert isinstance(br["reason"], str) and br["reason"], br
        assert isinstance(br["offset"], int) and br["offset"] >= 0, br


# ---------------------------------------------------------------------------------------------
# 2. print in the middle of a function.

def test_print_in_the_middle_keeps_order():
    dt.reset()
    jf = jitted_copy(print_mid)
    seed(41004)
    for n in (5, 7, 5):
        x, w = T(n, 4), T(4, 3)
        _, _, out = check_call(print_mid, jf, x, w)
        lines = out.splitlines()
        assert len(lines) == 2 and lines[0].startswith("before ") and (
            lines[1].startswith("after ")), out
        h = x @ w
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            print("before", h.sum())
            print("after", (dt.relu(h) * 2).sum(), (dt.relu(h) * 2).shape)
        assert out == buf.getvalue(), (out, buf.getvalue())
    s = break_stats()
    assert s["graph_breaks"] >= 2, s
    assert s["escapes"] >= 6, s          # two escaped calls per call
    assert s["fallbacks"] == 0 and s["handbacks"] == 0, s


def test_print_sees_values_before_later_inplace_ops():
    # The printed value is the one at the time of the print, even though x changes afterwards.
    def f(x):
        x.add_(1)
        print("mid", x.sum())
        x.mul_(2)
        print("end", x.sum())
        return x

    dt.reset()
    jf = jitted_copy(f)
    seed(41005)
    for n in (3, 5):
        check_call(f, jf, T(n, 3))
    assert break_stats()["fallbacks"] == 0


# ---------------------------------------------------------------------------------------------
# 3. Data-dependent while loops.

def test_while_loop_halving_with_counter():
    dt.reset()
    jf = jitted_copy(halve_count)
    seed(41006)
    counts = []
    for scale in (0.5, 4.0, 30.0, 3.0, 0.25, 20.0):
        x = T(7, 5) * scale
        x[0, 0] = scale * 1.9          # decides the number of halvings
        r, _, _ = check_call(halve_count, jf, x)
        counts.append(r[1])
    assert counts[0] == 0 and max(counts) >= 5, counts
    s = break_stats()
    assert s["graph_breaks"] >= 1 and s["escapes"] >= sum(counts), s
    assert s["fallbacks"] == 0 and s["handbacks"] == 0, s


def test_while_loop_segments_reused_across_iterations():
    dt.reset()
    jf = jitted_copy(halve_only)
    seed(41007)
    x = T(6, 5) * 4.0
    x[0, 0] = 7.5                      # 3 halvings: loop entry, body and exit all run
    check_call(halve_only, jf, x)
    s1 = break_stats()
    assert s1["fallbacks"] == 0 and s1["handbacks"] == 0, s1
    x = T(6, 5)
    x[2, 3] = -1500.0                  # 11 halvings
    check_call(halve_only, jf, x)
    s2 = break_stats()
    assert s2["frames_traced"] == s1["frames_traced"], (s1, s2)
    assert s2["graphs"] == s1["graphs"], (s1, s2)
    assert s2["cache_hits"] >= s1["cache_hits"] + 11, (s1, s2)
    assert s2["escapes"] >= s1["escapes"] + 11, (s1, s2)
    assert s2["fallbacks"] == 0 and s2["handbacks"] == 0, s2


def test_while_loop_counter_many_iterations():
    # A Python int counter across many iterations: still segments, no whole-frame fallback and
    # no cache-limit warning.
    dt.reset()
    jf = jitted_copy(halve_count)
    seed(41008)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for big in (3000.0, 5000.0):
            x = T(4, 6)
            x[3, 1] = big
            r, _, _ = check_call(halve_count, jf, x)
            assert r[1] == 12 if big == 3000.0 else r[1] == 13, r[1]
    assert not [w for w in caught if issubclass(w.category, RuntimeWarning)], [
        str(w.message) for w in caught]
    s = break_stats()
    assert s["fallbacks"] == 0 and s["handbacks"] == 0, s
    assert s["escapes"] >= 25, s


def test_for_loop_with_breaking_body_runs_as_segments():
    def f(x):
        total = 0.0
        for k in range(5):
            x = x * 1.1 + k
            total += x.sum().item()
            print(k, round(total, 1))
        return x, total

    dt.reset()
    jf = jitted_copy(f)
    seed(41009)
    for n in (3, 5):
        check_call(f, jf, T(n, 2, low=0.0, high=1.0))
    s = break_stats()
    assert s["fallbacks"] == 0 and s["handbacks"] == 0, s
    assert s["escapes"] >= 20, s     # 5 iterations x (item + print) x 2 calls


# ---------------------------------------------------------------------------------------------
# 4. A break three calls deep.

def test_break_three_calls_deep():
    dt.reset()
    jf = jitted_copy(three_deep)
    seed(41010)
    runs = 0
    for k, n in enumerate((5, 7, 3, 9)):
        x = signed((n, 4), k % 2 == 0)
        _, _, out = check_call(three_deep, jf, x, effects=effects)
        assert ("inner positive" if k % 2 == 0 else "inner negative") in out, out
        runs += 1
    s = break_stats()
    assert s["graph_breaks"] >= 1 and s["escapes"] >= runs, s
    assert s["fallbacks"] == 0, s


def test_break_three_calls_deep_reuses_segments():
    dt.reset()
    jf = jitted_copy(three_deep)
    seed(41011)
    x = signed((5, 4), True)
    check_call(three_deep, jf, x, effects=effects)
    s1 = break_stats()
    check_call(three_deep, jf, x, effects=effects)
    s2 = break_stats()
    assert s2["frames_traced"] == s1["frames_traced"] and s2["graphs"] == s1["graphs"], (s1, s2)
    assert s2["cache_hits"] > s1["cache_hits"], (s1, s2)


# ---------------------------------------------------------------------------------------------
# 5. Exceptions after breaks, and breaks inside try blocks.

def _exception_pair(fn, *args):
    """(plain exception, jit exception, plain stdout, jit stdout) for fn(*args)."""
    jf = jitted_copy(fn)
    plain_args, jit_args = clone_args(args), clone_args(args)
    outs = []
    excs = []
    for g, a in ((fresh_copy(fn), plain_args), (jf, jit_args)):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            try:
                g(*a)
            except Exception as e:  # noqa: BLE001 - compared below
                excs.append(e)
            else:
                excs.append(None)
        outs.append(buf.getvalue())
    return excs[0], excs[1], outs[0], outs[1]


def test_exception_after_print_break():
    dt.reset()
    seed(41012)
    x, y = T(5, 4), T(5, 3)
    e_plain, e_jit, out_plain, out_jit = _exception_pair(print_then_mismatch, x, y)
    assert e_plain is not None and e_jit is not None, (e_plain, e_jit)
    assert type(e_jit) is type(e_plain), (type(e_jit), type(e_plain))
    assert str(e_jit) == str(e_plain), (str(e_jit), str(e_plain))
    assert out_jit == out_plain and out_plain.startswith("z "), (out_jit, out_plain)
    frames_plain = user_frames(e_plain, THIS_FILE)
    frames_jit = user_frames(e_jit, THIS_FILE)
    assert "print_then_mismatch" in [name for name, _ in frames_jit], frames_jit
    line = line_of(print_then_mismatch, "return z + y")
    assert ("print_then_mismatch", line) in frames_plain, frames_plain
    assert ("print_then_mismatch", line) in frames_jit, (line, frames_jit)
    assert break_stats()["graph_breaks"] >= 1


def test_exception_after_successful_segments():
    # The same guards pass with shapes that no longer broadcast: the compiled segment after the
    # break must raise CPython's exception.
    dt.reset()
    jf = jitted_copy(print_then_mismatch)
    seed(41013)
    check_call(print_then_mismatch, jf, T(5, 4), T(5, 4))
    check_call(print_then_mismatch, jf, T(5, 4), T(5, 3))
    check_call(print_then_mismatch, jf, T(7, 4), T(7, 4))


def test_exception_from_escaped_call():
    dt.reset()
    seed(41014)
    x = T(3, 4)
    e_plain, e_jit, out_plain, out_jit = _exception_pair(escaped_call_raises, x)
    assert isinstance(e_plain, ValueError) and type(e_jit) is ValueError, (e_plain, e_jit)
    assert str(e_jit) == str(e_plain) == "refused 2-d input", (str(e_jit), str(e_plain))
    assert out_jit == out_plain == "helper sees 2\n", (out_jit, out_plain)
    names = [name for name, _ in user_frames(e_jit)]
    assert "escaped_call_raises" in names and "refusing_helper" in names, names
    assert names.index("escaped_call_raises") < names.index("refusing_helper"), names
    assert user_frames(e_jit, THIS_FILE) == user_frames(e_plain, THIS_FILE), (
        user_frames(e_jit, THIS_FILE), user_frames(e_plain, THIS_FILE))


def test_exception_after_item_break():
    def f(x, k):
        s = (x * k).sum().item()
        y = x * 2
        return y, 1 / s

    dt.reset()
    seed(41015)
    e_plain, e_jit, _, _ = _exception_pair(f, T(4, 3), 0)
    assert type(e_plain) is ZeroDivisionError and type(e_jit) is ZeroDivisionError, (e_plain,
                                                                                     e_jit)
    assert str(e_jit) == str(e_plain), (str(e_jit), str(e_plain))
    assert "f" in [name for name, _ in user_frames(e_jit)], user_frames(e_jit)


def test_break_inside_try_block():
    dt.reset()
    jf = jitted_copy(raise_in_try)
    seed(41016)
    results = []
    for k, n in enumerate((5, 7, 3, 9)):
        r, _, _ = check_call(raise_in_try, jf, signed((n, 3), k % 2 == 0))
        results.append(r[1])
    assert results == ["positive sum", "ok", "positive sum", "ok"], results
    s = break_stats()
    assert s["graph_breaks"] >= 1, s
    assert s["handbacks"] + s["escapes"] >= 1, s


# ---------------------------------------------------------------------------------------------
# 6. stats(): the new keys, and second calls reuse the segments.

def test_stats_new_keys():
    dt.reset()
    s = break_stats()
    for k in ("graph_breaks", "escapes", "handbacks"):
        assert s[k] == 0, (k, s)
    for k in ("frames_seen", "frames_traced", "frames_skipped", "cache_hits", "cache_misses",
              "recompiles", "fallbacks", "graphs"):
        assert type(s[k]) is int, (k, s)
    for k in ("recompile_reasons", "fallback_reasons"):
        assert isinstance(s[k], list), (k, s)


# (function, input factory, segments run per call at least)
REUSE_CASES = (
    (canonical, lambda: (T(5, 3), signed((5, 3), False)), 2),
    (canonical, lambda: (T(5, 3), signed((5, 3), True)), 2),
    (print_mid, lambda: (T(5, 4), T(4, 3)), 3),
    (halve_count, lambda: (T(5, 3) * 6.0,), 3),
    (item_scale, lambda: (T(5, 3),), 2),
    (sorted_middle, lambda: (T(5, 3),), 2),
    (two_breaks, lambda: (T(5, 3),), 3),
    (three_deep, lambda: (signed((5, 3), False),), 2),
)


def test_second_call_reuses_segments():
    for k, (fn, make, segments) in enumerate(REUSE_CASES):
        dt.reset()
        jf = jitted_copy(fn)
        seed(41100 + k)
        args = make()
        check_call(fn, jf, *args, effects=effects)
        s1 = break_stats()
        assert s1["graph_breaks"] >= 1 and s1["fallbacks"] == 0, (fn.__name__, s1)
        check_call(fn, jf, *args, effects=effects)
        s2 = break_stats()
        where = "%s (case %d)" % (fn.__name__, k)
        assert s2["frames_traced"] == s1["frames_traced"], (where, s1, s2)
        assert s2["graphs"] == s1["graphs"], (where, s1, s2)
        assert s2["graph_breaks"] == s1["graph_breaks"], (where, s1, s2)
        assert s2["cache_misses"] == s1["cache_misses"], (where, s1, s2)
        assert s2["cache_hits"] >= s1["cache_hits"] + segments, (where, s1, s2)
        assert s2["escapes"] > s1["escapes"], (where, s1, s2)
        assert s2["fallbacks"] == 0, (where, s2)


def test_graph_breaks_counted_once_per_trace():
    dt.reset()
    jf = jitted_copy(two_breaks)
    seed(41200)
    x = T(5, 3, low=0.0, high=1.0)
    with contextlib.redirect_stdout(io.StringIO()):
        jf(x)
        s1 = break_stats()
        assert s1["graph_breaks"] >= 2, s1
        for _ in range(3):
            jf(x.clone())
    s2 = break_stats()
    assert s2["graph_breaks"] == s1["graph_breaks"], (s1, s2)
    assert s2["escapes"] >= s1["escapes"] + 6, (s1, s2)


# ---------------------------------------------------------------------------------------------
# 7. fullgraph=True and explain().

def test_fullgraph_raises_on_print():
    dt.reset()
    jf = jitted_copy(print_mid, fullgraph=True)
    seed(41300)
    e = assert_raises(RuntimeError, jf, T(3, 4), T(4, 2))
    msg = str(e)
    assert "print" in msg, msg
    line = line_of(print_mid, 'print("before"')
    assert str(line) in msg, (line, msg)


def test_fullgraph_raises_on_data_dependent_branch():
    dt.reset()
    seed(41301)
    a, b = T(3, 4), T(3, 4)
    e = dt.explain(fresh_copy(canonical), a, b)
    reasons = [br["reason"] for br in e.breaks]
    assert reasons, str(e)
    dt.reset()
    jf = jitted_copy(canonical, fullgraph=True)
    err = assert_raises(RuntimeError, jf, a, b)
    msg = str(err)
    assert reasons[0] in msg, (reasons[0], msg)
    line = line_of(canonical, "if b.sum() < 0:")
    assert str(line) in msg, (line, msg)


def test_fullgraph_raises_on_while_and_item():
    for fn, args, text in ((halve_count, (T(3, 3) * 8,), "while x.abs().amax() > 1:"),
                           (item_scale, (T(3, 3),), "s = x.sum().item()")):
        dt.reset()
        jf = jitted_copy(fn, fullgraph=True)
        err = assert_raises(RuntimeError, jf, *args)
        line = line_of(fn, text)
        assert str(line) in str(err), (fn.__name__, line, str(err))


def test_explain_reports_each_break():
    dt.reset()
    seed(41302)
    x = T(4, 3, low=0.0, high=1.0)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        e = dt.explain(fresh_copy(two_breaks), x)
    assert buf.getvalue().startswith("y "), buf.getvalue()
    assert e.break_count >= 2 and len(e.breaks) == e.break_count, str(e)
    assert e.graph_count >= 3 and len(e.graphs) == e.graph_count, str(e)
    lines = [br["line"] for br in e.breaks]
    assert line_of(two_breaks, 'print("y"') in lines, (lines, e.breaks)
    assert line_of(two_breaks, "if z.sum() > 0:") in lines, (lines, e.breaks)
    for br in e.breaks:
        assert set(br) >= {"reason", "file", "line", "instruction", "offset"}, br
        assert isinstance(br["reason"], str) and br["reason"], br
        assert os.path.basename(br["file"]) == "test_breaks.py", br
        assert isinstance(br["line"], int) and isinstance(br["offset"], int), br
        assert isinstance(br["instruction"], str) and br["instruction"], br
    offsets = [br["offset"] for br in e.breaks]
    assert len(set(offsets)) == len(offsets), offsets
    assert all(isinstance(g, str) for g in e.graphs + e.guards), (e.graphs, e.guards)
    report = str(e)
    for br in e.breaks:
        assert br["reason"] in report and str(br["line"]) in report, report


def test_explain_break_in_loop_and_helper():
    dt.reset()
    seed(41303)
    x = T(4, 3) * 10
    e = dt.explain(fresh_copy(halve_only), x)
    assert e.break_count >= 1 and e.graph_count >= 2, str(e)
    assert line_of(halve_only, "while x.abs()") in [br["line"] for br in e.breaks], e.breaks
    dt.reset()
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        e = dt.explain(fresh_copy(three_deep), signed((4, 3), True))
    LOG.clear()
    assert "inner positive" in buf.getvalue(), buf.getvalue()
    assert e.break_count >= 1 and e.graph_count >= 2, str(e)
    inner_lines = range(line_of(deep_inner, "def deep_inner"), line_of(deep_inner, "return t - 1")
                        + 1)
    assert any(br["line"] in inner_lines for br in e.breaks), e.breaks


# ---------------------------------------------------------------------------------------------
# 8. The differential corpus.

CASES = []


def case(factory, kind="escape", calls=4, name=None):
    """Registers a function with an input factory(i) -> Call / tuple / value.
    kind: 'escape'   every break is a data-dependent jump or an uncapturable call: graph_breaks and
                     escapes grow, and no frame falls back;
          'handback' the frame goes back to CPython mid-way (try/with/yield regions...);
          'error'    plain Python raises on some calls: only graph_breaks is checked;
          'any'      graph_breaks grows; how the break is handled is not checked."""
    def deco(fn):
        CASES.append((name or fn.__name__, fn, factory, kind, calls))
        return fn
    return deco


# -- Helpers the corpus functions call (inlined by the tracer, with breaks inside).

def branchy(t):
    if t.mean() > 0:
        return t * 2
    return -t


def noisy(t, tag):
    print(tag, t.amax())
    return t + 1


def helper_try(t):
    try:
        return t * 2
    except ValueError:
        return t


def helper_with(t):
    with contextlib.nullcontext():
        u = t.exp()
    return u


def lvl_c(t):
    if t.sum() > 0:
        LOG.append("c+")
        return t * 2
    LOG.append("c-")
    return t - 1


def lvl_b(t):
    return lvl_c(t + 1) * 0.5


def lvl_a(t):
    return lvl_b(t * 2) + t


def make_gate(thr):
    def gate(t):
        if t.mean() > thr:
            return t - thr
        return t + thr
    return gate


GATE_HALF = make_gate(0.5)


class Gate:
    def __init__(self, k):
        self.k = k

    def __call__(self, t):
        if t.sum() > 0:
            return t * self.k
        return t / self.k


GATE3 = Gate(3.0)


# -- Data-dependent if / elif / ternary.

@case(sgn1)
def if_sum_positive(x):
    y = x * 2
    if y.sum() > 0:
        y = y + 1
    else:
        y = y - 1
    return y * 0.5


@case(three_way)
def if_elif_else_mean(x):
    m = x.mean()
    if m > 0.5:
        out = x.exp()
    elif m < -0.5:
        out = -x
    else:
        out = x * 10
    return out + m


def _maxabs_below_or_above_one(i):
    t = T(ODD[i], ODD2[i], low=-0.9, high=0.9)
    if i % 2:
        t[0, 0] = 1.5
    return t


@case(_maxabs_below_or_above_one)
def if_float_lt(x):
    s = x.abs().amax()
    if float(s) < 1:
        return x * 3, s
    return x / s, s


@case(sgn2)
def if_and_or_short_circuit(x, y):
    a = x + y
    if x.sum() > 0 and y.mean() < 0:
        a = a * 2
    elif x.sum() < 0 or y.amax() > 1.9:
        a = a - 3
    return a


@case(sgn1)
def if_not_all(x):
    y = x - 0.1
    if not (y > 0).all():
        y = y.abs()
    return y.sqrt()


@case(sgn1)
def ternary_on_mean(x):
    z = x * 2 if x.mean() > 0 else x * -2
    return z + x


@case(sgn1)
def if_item_compare(x):
    h = x.tanh()
    if h.sum().item() > 0:
        return h * 2
    return h.exp()


@case(sgn2)
def if_tensor_vs_tensor(x, y):
    if x.sum() > y.sum():
        big, small = x, y
    else:
        big, small = y, x
    return big - small, big


@case(sgn2)
def nested_ifs(a, b):
    c = a * b
    if a.sum() > 0:
        if b.sum() > 0:
            c = c + 1
        else:
            c = c - 1
    else:
        if c.sum() > 0:
            c = c * 2
        else:
            c = c * -2
    return c


def _early(i):
    t = T(ODD[i], ODD2[i], low=-2.0, high=1.5)
    if i % 2 == 0:
        t[1, 1] = 1.95
    return t


@case(_early)
def early_return_on_data(x):
    y = x * 0.5
    if y.amax() > 0.9:
        return y
    y = y.exp()
    return y - 1


def _parity(i):
    base = T(ODD[i], ODD2[i], dtype=dt.int64, low=0, high=9)
    return base * 2 if i % 2 == 0 else base * 2 + 1


@case(_parity)
def if_int_tensor_parity(x):
    even = (x % 2 == 0).sum()
    if even * 2 > x.numel():
        return x // 2, True
    return x * 3 + 1, False


@case(sgn1)
def breaks_in_both_branches(x):
    y = x.abs() + 1
    if x.sum() > 0:
        print("positive", y.amax())
        y = y * 2
    else:
        LOG.append("negative")
        y = y.log()
    return y


@case(lambda i: (T(ODD[i], ODD2[i]), signed((ODD[i], ODD2[i]), i % 2 == 1)))
def canonical_in_corpus(a, b):
    x = a / (abs(a) + 1)
    if b.sum() < 0:
        b = b * -1
    return x * b


@case(three_way)
def if_on_bool_of_comparison(x):
    ok = bool(x.mean() > 0.5)
    y = x * 2
    if ok:
        y = y + 100
    return y, ok


# -- While loops.

@case(scaled, calls=6)
def while_halve_count(x):
    n = 0
    while x.abs().amax() > 1:
        x = x / 2
        n += 1
    return x, n


@case(lambda i: T(ODD[i], ODD2[i], low=-1.0, high=(0.0, 0.5, -0.5, 1.0)[i]))
def while_float_sum_below(x):
    steps = 0
    while float(x.sum()) < 10.0:
        x = x + 0.5
        steps += 1
    return x, steps


@case(x1)
def while_item_total(x):
    total = 0.0
    while total < 5.0:
        total += x.abs().mean().item() + 0.5
        x = x * 1.1
    return total, x


@case(x1)
def while_true_break_on_data(x):
    k = 0
    while True:
        x = x * 1.5 + 0.1
        k += 1
        if x.abs().amax() > 4:
            break
    return x, k


def _two_cond(i):
    shape = (ODD[i], ODD2[i])
    k = i % 3
    if k == 0:
        return signed(shape, True)
    if k == 1:
        return T(*shape, low=-0.4, high=-0.1)
    return T(*shape, low=-2.0, high=-1.9)


@case(_two_cond, calls=5)
def while_two_conditions(x):
    k = 0
    while x.sum() < 0 and k < 5:
        x = x + 0.25
        k += 1
    return x, k


@case(lambda i: T(ODD[i], ODD2[i]) * (1.0, 0.2, 3.0, 0.6)[i])
def while_prints_each_step(x):
    while x.amax() > 0.5:
        print("step", x.amax())
        x = x * 0.5
    return x


@case(lambda i: T(ODD[i], ODD2[i]) * (1.0, 0.05, 0.5, 0.01)[i])
def for_range_data_break(x):
    k = -1
    for k in range(10):
        x = x * 1.3
        if x.abs().amax() > 3:
            break
    return x, k


@case(rows)
def for_range_continue_on_data(x):
    acc = dt.zeros_like(x[0])
    for k in range(4):
        if x[k].sum() > 0:
            continue
        acc = acc + x[k] * k
    return acc


# -- .item(), float(), int(), bool(), .tolist() used in Python.

@case(x1)
def item_in_arithmetic(x):
    s = x.sum().item()
    return x * s, s


@case(x1)
def item_min_max_normalise(x):
    hi = x.amax().item()
    lo = x.amin().item()
    return (x - lo) / (hi - lo + 1e-3), hi - lo


@case(x1)
def float_of_mean(x):
    f = float(x.mean())
    y = x + f
    return y, f * 2


@case(x1)
def int_count_slice(x):
    n = int((x > 0).sum())
    flat = x.reshape(-1)
    return flat[:n] * 2, n


@case(flagged)
def bool_any_flag(x):
    flag = bool((x > 1.5).any())
    return x * (2 if flag else 3), flag


@case(x1)
def tolist_len_rows(x):
    vals = x.tolist()
    return x * len(vals), len(vals[0]), vals[0][0]


@case(x1)
def tolist_python_sum(x):
    y = x * 2
    s = sum(y.reshape(-1).tolist())
    return y - s / y.numel(), s


@case(lambda i: P(ODD[i], ODD2[i]))
def item_math_sqrt(x):
    s = x.abs().sum().item()
    r = math.sqrt(s)
    return x / r, r


@case(lambda i: T(ODD[i], ODD2[i], low=0.0, high=(0.9, 1.9, 2.9, 3.9)[i]))
def item_drives_range(x):
    n = int(x.abs().amax().item()) + 1
    acc = dt.zeros_like(x)
    for k in range(n):
        acc = acc + x * k
    return acc, n


@case(x1)
def tolist_argmax_gather(x):
    idx = x.argmax(1).tolist()
    picked = [x[r, c] for r, c in enumerate(idx)]
    return dt.stack(picked) * 2, idx


@case(x1)
def item_mid_expression(x):
    return x * 2 + x.sum().item(), (x + 1) * float(x.mean())


@case(x1)
def tolist_inside_list_display(x):
    return dt.stack([x, x * len(x.tolist()), x - 1]), [x.amax(), len(x[0].tolist())]


# -- Uncapturable calls in the middle: print, sorted, len(tolist), C functions, helpers that
#    fail to trace.

@case(x2)
def print_middle(x, y):
    z = x * y
    print("z sum", z.sum())
    return z + x


@case(x1)
def print_before_and_after(x):
    print("in", x.sum())
    y = x.exp()
    print("out", y.mean(), y.shape)
    return y


@case(x1)
def print_with_kwargs(x):
    y = x - 1
    print("a", 1, y.amin(), sep="-", end="|\n")
    return y * 2


@case(x1)
def sorted_tolist_median(x):
    vals = sorted(x.reshape(-1).tolist())
    mid = vals[len(vals) // 2]
    return x - mid, vals[:3]


@case(x2)
def sorted_scalar_tensors(x, y):
    ys = sorted([x.sum(), y.sum(), (x * y).sum()])
    return ys[0] + ys[-1], ys[1] * 2


@case(x1)
def len_of_tolist(x):
    n = len(x.tolist())
    return x * n


@case(x1)
def perf_counter_between(x):
    t0 = time.perf_counter()
    y = x * 2
    t1 = time.perf_counter()
    return y + 1, t1 >= t0


@case(x1, kind="any")
def class_attribute_after_call(x):
    t0 = time.perf_counter()
    y = x * 2
    return y + 1, type(t0).__name__


@case(x1)
def fsum_of_tolist(x):
    y = x.exp()
    s = math.fsum(y.reshape(-1).tolist())
    return y / s, s


@case(x1, kind=None)  # the helper's try compiles: no break since with/try are traced
def helper_with_try_is_called(x):
    y = x + 1
    z = helper_try(y)
    return z * 3


@case(x1, kind=None)  # the helper's with block compiles (trace_with.cc)
def helper_with_block_is_called(x):
    y = x * 0.5
    z = helper_with(y)
    return z + y


@case(x1)
def generator_expression_in_expression(x):
    return x * 2 + sum(v for v in x[0].tolist())


# -- Python-side effects between tensor ops.

@case(x1)
def log_append_floats(x):
    LOG.append(float(x.sum()))
    y = x * 2
    LOG.append("after")
    return y + 1


@case(x1, kind=None)  # LOG's changes are replayed after the graph: no break
def log_append_tensors(x):
    y = x * 2
    LOG.append(y)
    z = y.exp()
    LOG.append(z.sum())
    return z


@case(x1, kind="any")
def state_dict_counter(x):
    STATE["calls"] = STATE.get("calls", 0) + 1
    y = x * STATE["calls"]
    STATE["last"] = y.sum().item()
    return y


@case(sgn1)
def log_in_branch(x):
    if x.mean() > 0:
        LOG.append(("positive", x.shape[0]))
    y = x.abs()
    LOG.append(len(LOG))
    return y


# -- Breaks inside for loops over range.

@case(x1)
def for_range_print(x):
    for k in range(3):
        x = x * 0.5 + k
        print(k, x.sum())
    return x


@case(rows)
def for_range_if_rows(x):
    acc = dt.zeros_like(x[0])
    for k in range(4):
        if x[k].sum() > 0:
            acc = acc + x[k]
        else:
            acc = acc - x[k]
    return acc


@case(x1)
def for_range_item_total(x):
    total = 0.0
    for k in range(3):
        total += (x * (k + 1)).sum().item()
    return total, x * total


def _rows_maybe_none(i):
    t = T(ODD[i], ODD2[i])
    return -(t.abs() + 0.1) if i == 1 else t


@case(_rows_maybe_none)
def for_rows_break_on_data(x):
    found = None
    for row in x:
        if row.sum() > 0:
            found = row * 2
            break
    return found


@case(x1)
def for_range_log_append(x):
    y = x
    for k in range(3):
        y = x * k
        LOG.append(y.sum().item())
    return y


# -- Breaks inside inlined helpers, lambdas, closures and methods.

@case(sgn1)
def helper_branches(x):
    y = branchy(x + 0.1) * 3
    return y - x


@case(x1)
def helper_prints_twice(x):
    a = noisy(x * 2, "first")
    b = noisy(a.exp(), "second")
    return a + b


@case(x1)
def lambda_with_item(x):
    g = lambda t: t * t.sum().item()  # noqa: E731
    return g(x) + 1


@case(x1)
def lambda_prints(x):
    show = lambda t: print("v", t.amax())  # noqa: E731
    y = x * 2
    show(y)
    return y - 1


@case(sgn1)
def three_deep_branch(x):
    y = x.tanh()
    return lvl_a(y) - y


@case(three_way)
def closure_gate(x):
    return GATE_HALF(x * 1.0) * 2


@case(sgn1)
def method_gate_both_branches(x):
    return GATE3(x) + GATE3(-x)


# -- Cell variables (captured by closures and, on 3.11, by comprehensions) across a break.

@case(x1)
def comprehension_after_break(x):
    print("n", x.shape[0])
    return [x * k for k in range(3)]


@case(x1)
def closure_over_arg_after_break(x):
    print("hi", x.shape)
    g = lambda: x * 2  # noqa: E731
    return g()


@case(x1)
def closure_over_local_after_break(x):
    y = x * 2
    print("y", y.sum())
    h = lambda: y + 1  # noqa: E731
    return h()


@case(x1, kind="any")
def cell_reassigned_after_break(x):
    y = x * 2
    h = lambda: y + 1  # noqa: E731
    print("y", y.amax())
    y = y * 10
    return h(), y


@case(sgn1)
def closure_made_before_branch(x):
    scale = x.abs().mean()
    f = lambda t: t / scale  # noqa: E731
    if x.sum() > 0:
        return f(x) + 1
    return f(-x)


# -- In-place mutation of inputs before and after the break.

@case(x1)
def inplace_around_print(x):
    x.add_(1)
    print("mid", x.sum())
    x.mul_(2)
    return x.sum()


@case(sgn1)
def inplace_then_branch(x):
    x.mul_(-1)
    if x.sum() > 0:
        x.add_(1)
    else:
        x.sub_(1)
    return x


@case(x1)
def setitem_around_item(x):
    x[0] = x[0] * 2
    s = x[0].sum().item()
    x[-1] = s
    return s


@case(lambda i: (T(ODD[i], ODD2[i]), T(ODD[i], ODD2[i], low=-3.0, high=-1.0)))
def inplace_in_while(x, y):
    while y.sum() < 0:
        y.add_(0.5)
        x.sub_(0.1)
    return x, y


@case(x2)
def inplace_after_sorted(x, y):
    vals = sorted(y.reshape(-1).tolist())
    x.add_(vals[0])
    y.mul_(0)
    return vals[-1]


# -- Tuples / dicts / lists mixing tensors and Python values computed after the break.

@case(x1)
def mixed_tuple_after_item(x):
    s = x.sum().item()
    y = x * s
    return y, s, int(s > 0), "tag", (y.shape, len(y))


@case(sgn1)
def dict_result_after_branch(x):
    if x.amax() > 0:
        kind = "has-positive"
    else:
        kind = "all-negative"
    return {"kind": kind, "y": x.exp(), "n": x.shape[0]}


@case(x1)
def list_result_after_print(x):
    out = [x * 2]
    print("built")
    out.append(x.sum())
    out.append(len(out))
    return out


# -- Several breaks per function.

@case(sgn2)
def three_breaks(x, y):
    a = x.sum().item()
    print("a", a > 0)
    if y.mean() > 0:
        z = x * a
    else:
        z = y - a
    return z, sorted([a, 1.0, -1.0])


@case(lambda i: T(ODD[i], ODD2[i], low=(-1.0, -2.0, 0.0, -0.5)[i], high=(2.0, 0.0, 1.0, 0.5)[i]))
def if_then_print_then_while(x):
    if x.sum() > 0:
        x = x * 3
    print("scale", x.abs().amax())
    while x.abs().amax() > 1:
        x = x * 0.5
    return x


@case(sgn2)
def item_sorted_if(x, y):
    s = y.abs().sum().item()
    order = sorted([x.sum().item(), s])
    if order[0] == s:
        return x * 2, order
    return y * 2, order


@case(x1)
def print_item_print(x):
    print("start", x.shape)
    k = x.amax().item()
    y = x / (abs(k) + 1)
    print("k", k > 1)
    return y


# -- Exceptions after breaks and from escaped calls (same type, message, traceback frame).

@case(ok_bad_ok, kind="error")
def print_then_shape_error(x, y):
    z = x * 2
    print("z", z.sum())
    return z + y


@case(lambda i: (T(ODD[i], ODD2[i]), (0, 1, 0, 2)[i]), kind="error")
def item_then_zero_division(x, k):
    s = (x * k).sum().item()
    return x * 2, 1 / s


@case(sgn1, kind="error")
def if_then_index_error(x):
    if x.sum() > 0:
        return x[:, 100]
    return x * 2


@case(x2, kind="error")
def sorted_raises_ambiguous(x, y):
    z = x + y
    return sorted([z, x])


@case(x1, kind="error")
def helper_raises_after_print(x):
    y = x * 2
    return refusing_helper(y) + 1


@case(sgn1, kind="error")
def assert_on_data(x):
    y = x * 2
    assert y.sum() > 0, "sum must be positive"
    return y


@case(lambda i: (P(ODD[i], ODD2[i]), (1000, 1, 1000, 2)[i]), kind="error")
def raise_after_data_branch(x, n):
    y = x.exp()
    if y.sum() > n:
        raise ValueError("too big: %d" % n)
    return y


# -- Hand-backs: try / with / finally regions and generators.

@case(sgn1)  # the branch escapes; the segment after it raises and catches ValueError in the trace
def break_inside_try(x):
    y = x * 2
    try:
        if y.sum() > 0:
            raise ValueError("positive sum")
        r = y - 1
        tag = "ok"
    except ValueError as e:
        r = y + 1
        tag = str(e)
    return r, tag


@case(sgn1)  # the with block compiles; only the branch escapes
def with_block_then_branch(x):
    y = x * 2
    with contextlib.nullcontext():
        y = y + 1
    if y.sum() > 0:
        y = y * 3
    return y


@case(x1)  # the print inside the try escapes; the segments around it compile
def try_finally_print(x):
    y = x.exp()
    try:
        print("body", y.amax())
        z = y * 2
    finally:
        LOG.append("finally")
    return z


@case(x1)  # the store into STATE is replayed; .item() escapes
def global_dict_store_mid(x):
    y = x * 2
    STATE["y"] = y.sum().item()
    z = y + STATE["y"]
    STATE["z"] = z.amax()
    return z * 0.5


@case(ok_bad_ok, kind=None)  # the bad call raises in the try: CPython runs it and its handler
def try_after_work(x, y):
    a = x.exp()
    try:
        b = a + y
        tag = "broadcast"
    except dt.ShapeError as e:
        b = a
        tag = str(e)
    return b * 2, tag


@case(sgn1, kind=None)
def generator_with_branch(x):
    y = x * 2
    for k in range(3):
        if y.sum() > k:
            yield y * k
        else:
            yield -y


# -- Test generation.

def _check_kind(name, kind, before, after):
    if kind is None:
        return
    assert after["graph_breaks"] > before["graph_breaks"], (
        "%s: no graph break recorded: %r" % (name, after))
    if kind == "escape":
        assert after["escapes"] > before["escapes"], "%s: no escape performed: %r" % (name,
                                                                                       after)
        assert after["fallbacks"] == before["fallbacks"], (
            "%s fell back to CPython for the whole frame: %r" % (name, after))
        assert after["handbacks"] == before["handbacks"], (
            "%s was handed back to CPython mid-way (its breaks are jumps and calls, which must "
            "escape and continue in compiled segments): %r" % (name, after))
    elif kind == "handback":
        assert after["handbacks"] > before["handbacks"], "%s: no hand-back: %r" % (name, after)


def _make_test(name, fn, factory, kind, calls, seed_base):
    def test():
        dt.reset()
        effects()
        jfn = jitted_copy(fn)
        before = break_stats()
        run_break_differential(fn, jfn, factory, calls, seed_base, effects=effects)
        _check_kind(name, kind, before, break_stats())
    test.__name__ = "test_corpus_" + name
    return test


def _register():
    for k, (name, fn, factory, kind, calls) in enumerate(CASES):
        test_name = "test_corpus_" + name
        assert test_name not in globals(), "duplicate case name " + name
        globals()[test_name] = _make_test(name, fn, factory, kind, calls, 9000 + 17 * k)


_register()


def test_corpus_size():
    assert len(CASES) >= 60, len(CASES)
    assert len([c for c in CASES if c[3] == "escape"]) >= 45, len(CASES)


class _Box:
    def __init__(self, v):
        self.v = v

    @staticmethod
    def of(v):
        return _Box(v)


def _boxed_lengths(*operands):
    boxes = [_Box.of(x) for x in operands]  # the break happens inside the comprehension's loop
    return len(boxes), [b.v for b in boxes]


def test_break_inside_comprehension_keeps_its_iterator():
    # Regression: an inlined comprehension consumed items of its iterator before the break, and
    # the escaped call then ran over the consumed (empty) iterator.
    dt.reset()
    f = jitted_copy(_boxed_lengths)
    for n in (1, 3, 2):
        args = tuple(dt.ones(k + 1) for k in range(n))
        count, values = f(*args)
        assert count == n, (count, n)
        assert all(v is a for v, a in zip(values, args))


def _enumerate_print(x, ws):
    for i, w in enumerate(ws):
        x = x * w + i
        print(i, round(x.sum().item(), 3))
    return x


def test_enumerate_loop_longer_than_cache_limit_stays_compiled():
    # The (index, value) pairs an enumerate loop carries across each break are read at run time,
    # not specialised, so a 12-iteration loop reuses its segments instead of hitting cache_limit.
    dt.reset()
    f = jitted_copy(_enumerate_print)
    ws = [0.5, 1.5, 2.0, 1.0, 0.25, 3.0, 1.0, 2.0, 0.5, 1.0, 1.5, 2.0]
    x = rand_tensor((3,))
    plain_out, jit_out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(plain_out):
        expected = _enumerate_print(x.clone(), ws)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a cache_limit warning would fail the test
        with contextlib.redirect_stdout(jit_out):
            got = f(x.clone(), ws)
    assert plain_out.getvalue() == jit_out.getvalue()
    assert ((got - expected).abs() <= 1e-4 * (1 + expected.abs())).all().item()
    s = break_stats()
    assert s["recompiles"] == 0 and s["handbacks"] == 0 and s["fallbacks"] == 0, s
    assert s["escapes"] >= 24, s


def _kinds_break_on_data(x):
    y = x * 2
    if y.sum() > 0:
        return y + 1
    return y - 1


def _kinds_break_on_raise(x):
    y = x + 1
    return {"a": y}["b"]


def test_break_kinds_say_why_graphs_broke():
    dt.reset()
    x = dt.ones(3)
    assert dt.jit(_kinds_break_on_data)(x).tolist() == [3.0, 3.0, 3.0]
    try:
        dt.jit(_kinds_break_on_raise)(x)
        raise AssertionError("KeyError expected")
    except KeyError as e:
        assert e.args == ("b",)
    kinds = dt.stats()["break_kinds"]
    assert set(kinds) == {"data-dependent", "unsupported", "raises", "limit"}, kinds
    assert kinds["data-dependent"] == 1 and kinds["raises"] == 1, kinds
    assert sum(kinds.values()) == dt.stats()["graph_breaks"], (kinds, dt.stats()["graph_breaks"])
