"""Stress mode (DYNTRACE_STRESS=1 / enable(stress=True)) and the interpreter bugs it found.

Stress mode runs every frame of every module through the tracer, the standard library included.
Each bug it found in CPython's own regression tests has a regression test here, reduced to the
construct that went wrong, compared against plain CPython on an unmarked copy of the function
(check_call). tests/cpython/run_regrtests.py runs the regression tests themselves.
"""
import collections
import contextlib
import dataclasses
import enum
import io
import json
import re
import sys
import textwrap

import dyntrace as dt
from breaklib import check_call
from jitlib import jitted_copy
from testlib import rand_tensor, seed


def T(*shape):
    return rand_tensor(shape, dt.float32, -2.0, 2.0)


def stdlib_workload():
    """Standard-library code nobody wrote for dyntrace: imports, classes, regexes, closures."""
    out = [json.dumps({"b": [1, 2.5, None], "a": {"c": "d"}}, sort_keys=True, indent=1),
           json.loads('{"x": [1, {"y": 2}]}'),
           collections.Counter("abracadabra").most_common(3),
           textwrap.fill("the quick brown fox jumps over the lazy dog " * 3, 17),
           re.sub(r"(\w+)@(\w+)", r"\2 at \1", "alice@example bob@test"),
           sorted({"b": 2, "a": 1}.items(), key=lambda kv: -kv[1])]

    @dataclasses.dataclass(frozen=True)
    class Point:
        x: int
        y: int = 3

    class Colour(enum.Enum):
        RED = enum.auto()
        GREEN = enum.auto()

    out += [Point(1), dataclasses.asdict(Point(2, 4)), list(Colour), Colour(2).name]
    return repr(out)


def run_stressed(fn, *args):
    dt.enable(stress=True)
    try:
        return fn(*args)
    finally:
        dt.disable()


def test_stress_mode_switch_and_stdlib_workload():
    expected = stdlib_workload()
    assert not dt._stress_mode()
    dt.reset()
    before = dt.stats()["frames_seen"]
    dt.enable(stress=True)
    try:
        assert dt._stress_mode()
        actual = stdlib_workload()
        again = stdlib_workload()  # second run: cached segments, guards, hand-backs
    finally:
        dt.disable()
    assert not dt._stress_mode()
    assert actual == expected, (actual, expected)
    assert again == expected, (again, expected)
    # The standard library's frames went through the hook (enable() alone skips them).
    assert dt.stats()["frames_seen"] > before + 50, dt.stats()["frames_seen"]


def test_stress_option_belongs_to_enable_only():
    try:
        dt.jit(lambda x: x, stress=True)
    except TypeError as e:
        assert "stress" in str(e)
    else:
        raise AssertionError("jit(stress=True) must be a TypeError")


# --- coverage: frames run, skips by reason, generator frames apart -------------------------------

def numbered(n):
    yield from range(n)


def describe(value):
    return f"{type(value).__name__}:{value!r}"


def tagged(x, value):
    return x + 1, value == value  # tensor work, then a guard on type(value)


def test_stress_coverage_counts_skips_by_reason():
    dt.reset()
    dt.enable(stress=True)
    try:
        json.dumps({"a": 1})  # the standard library's frames run through dyntrace ...
    finally:
        dt.disable()
    dt.reset()
    dt.enable()  # ... and are excluded again outside stress mode, though seen in it
    try:
        json.dumps({"a": 1})
    finally:
        dt.disable()
    plain = dt.stats()
    # The standard library is outside what dyntrace runs: counted apart, not as skips, so it
    # does not lower the coverage of the user's own frames.
    assert plain["frames_excluded"] > 0 and "excluded" not in plain["frames_skipped_by"], plain
    assert plain["frames_skipped"] == sum(plain["frames_skipped_by"].values()), plain
    dt.reset()
    dt.enable(stress=True)
    try:
        json.dumps({"a": 1})
        assert list(numbered(3)) == [0, 1, 2]
    finally:
        dt.disable()
    s = dt.stats()
    assert s["frames_excluded"] == 0, s
    assert s["frames_generator"] >= 1 and s["frames_skipped"] == 0, s  # generators stay apart
    assert s["coverage"] == 1.0 and s["frames_seen"] >= 3, s


def test_stress_never_gives_a_frame_up_at_cache_limit():
    """Outside stress mode a code object past cache_limit runs under CPython from then on, with a
    warning; stress mode drops its oldest entry instead and stays silent."""
    import warnings
    values = [1, "a", 2.5, None, (1,), [2], {3}, b"x", 3j, True]
    expected = [describe(v) for v in values]
    dt.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a cache_limit warning would fail the test
        dt.enable(stress=True, cache_limit=2)
        try:
            # A loop in this frame (which runs uncompiled), not a comprehension: a comprehension's
            # frame is traced too and would inline the first calls of describe, which then make no
            # cache entries of their own.
            actual = []
            for v in values:
                actual.append(describe(v))
        finally:
            dt.disable()
    s = dt.stats()
    assert actual == expected, actual
    assert s["frames_skipped_by"]["cache_limit"] == 0 and s["entries_evicted"] >= len(values) - 2, s
    assert not any("cache_limit" in r for r in s["fallback_reasons"]), s["fallback_reasons"]
    dt.reset()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dt.enable(cache_limit=2)
        try:
            [tagged(T(2), v) for v in values]
        finally:
            dt.disable()
    s = dt.stats()
    dt.reset()  # later tests must not meet these entries under cache_limit=2
    assert s["frames_skipped_by"]["cache_limit"] > 0 and s["entries_evicted"] == 0, s
    assert any("cache_limit" in str(w.message) for w in caught), [str(w.message) for w in caught]


def test_tracing_new_code_adds_no_python_objects():
    """CPython's test_descr counts gc.get_objects() around `g == g` with a class made in the test:
    the tracer's decoded-bytecode cache made a weak reference per new code object."""
    import gc

    def count_around_compares():
        class G:
            def __eq__(self, other):
                return False
        g = G()
        before = len(gc.get_objects())
        for _ in range(10):
            g == g
        return len(gc.get_objects()) - before

    plain = count_around_compares()
    assert run_stressed(count_around_compares) == plain


def test_code_objects_die_cleanly_with_only_the_decoded_slot_set():
    """CPython calls every co_extra free function of a dying code object, set or not: an inner
    function decoded for inlining but never run by the hook had a null hook slot, and freeing it
    crashed at exit (3.12, CPython's test_scope)."""
    from cpulib import run_child
    rc, out, err = run_child(textwrap.dedent("""
        import dyntrace
        def g():
            def h():
                return 1
            return h()
        dyntrace.enable(stress=True)
        print(g())
    """), {})
    assert rc == 0 and out.strip() == "1", (rc, out, err)


# --- zero-argument super() and sys._getframe() in a call the trace escapes -----------------------

class Base:
    def __init__(self, scale):
        self.scale = scale


class Derived(Base):
    def build(self, x):
        y = x * 2
        super().__init__(3)          # an escaped call: must see this frame's self and __class__
        return y + self.scale


def caller_name_and_line():
    frame = sys._getframe(1)
    return frame.f_code.co_name, frame.f_lineno - frame.f_code.co_firstlineno


def uses_caller_frame(x):
    y = x + 1
    who = caller_name_and_line()      # sys._getframe(1) must be this frame, at this line
    return y * 2, who


def test_escaped_super_call_sees_its_frame():
    seed(1)
    jfn = jitted_copy(Derived.build)
    plain = Derived(0).build(T(5))
    for _ in range(2):
        x = T(5)
        out = jfn(Derived(0), x)
        assert out.tolist() == (x * 2 + 3).tolist()
    assert plain.shape == (5,)


def test_escaped_call_sees_caller_frame():
    seed(2)
    jfn = jitted_copy(uses_caller_frame)
    for _ in range(2):
        _, who = check_call(uses_caller_frame, jfn, T(4))[0]
        assert who == ("uses_caller_frame", 2), who


# --- classmethod / staticmethod read from a class ----------------------------------------------

class Maker:
    factor = 3

    @classmethod
    def scaled(cls, x):
        return x * cls.factor, cls.__name__

    @staticmethod
    def shifted(x):
        return x + 1


class SubMaker(Maker):
    factor = 5


def calls_class_methods(x):
    a, name = Maker.scaled(x)
    b, sub = SubMaker.scaled(x)
    return a + Maker.shifted(b), name, sub


def test_classmethod_and_staticmethod_from_class():
    seed(3)
    jfn = jitted_copy(calls_class_methods)
    for _ in range(2):
        check_call(calls_class_methods, jfn, T(3, 2))


# --- f(*args, **kwargs) on a bound method after a break ----------------------------------------

class Suite:
    def __init__(self, items):
        self.items = items

    def __call__(self, *args, **kwargs):
        return self.run(*args, **kwargs)      # PUSH_NULL + LOAD_ATTR + CALL_FUNCTION_EX

    def run(self, x, scale=1):
        total = x
        for item in self:                     # iterating a user object: breaks the trace
            total = total + item * scale
        return total

    def __iter__(self):
        return iter(self.items)


def calls_suite(x):
    return Suite([1.0, 2.0])(x, scale=2)


def test_call_function_ex_of_bound_method_across_break():
    seed(4)
    jfn = jitted_copy(calls_suite)
    for _ in range(2):
        check_call(calls_suite, jfn, T(3))


# --- identity of the frame's own tuples across a break -----------------------------------------

def keeps_tuple_identity(x, *exc_info):
    ex = exc_info
    print("break")                           # an escape: the state is rebuilt after it
    return x + 1, ex is exc_info, ex


def test_frame_tuple_keeps_identity_across_break():
    seed(5)
    jfn = jitted_copy(keeps_tuple_identity)
    for _ in range(2):
        out = check_call(keeps_tuple_identity, jfn, T(2), None, None, None)[0]
        assert out[1] is True


# --- a local that is unbound in a later call of the same segment -------------------------------

def maybe_binds(x, items):
    for i in items:
        if i > 0:
            g = x * i
        print(i)                             # the segment after this call leaves `g` untouched
    return x + 1


def test_untouched_unbound_local_crosses_break():
    seed(6)
    jfn = jitted_copy(maybe_binds)
    for items in ([1, 2], [-1], [3, -2], [-4]):
        check_call(maybe_binds, jfn, T(3), items)


# --- a closure that refers to itself, rebuilt at a break ---------------------------------------

def self_referencing_closure(x):
    seen = []

    def visit(n):
        seen.append(n)
        return visit if n < 3 else None

    state = sys.getrecursionlimit()          # an escape with `visit` (in its own cell) live
    step = visit(1)
    while step is not None:
        step = step(len(seen) + 1)
    return x * len(seen), state > 0


def test_self_referencing_closure_across_break():
    seed(7)
    jfn = jitted_copy(self_referencing_closure)
    for _ in range(2):
        check_call(self_referencing_closure, jfn, T(4))


# --- sys.settrace sees the lines of plain CPython ------------------------------------------------

def traced_body(x):
    y = x + 1
    if y.shape[0] > 1:
        y = y * 2
    return y


def line_events(fn, *args):
    lines = []
    code = getattr(fn, "__wrapped__", fn).__code__

    def tracer(frame, event, arg):
        if event == "line" and frame.f_code is code:
            lines.append(frame.f_lineno - code.co_firstlineno)
        return tracer

    old = sys.gettrace()
    sys.settrace(tracer)
    try:
        fn(*args)
    finally:
        sys.settrace(old)
    return lines


def test_settrace_line_events_unchanged():
    seed(8)
    jfn = jitted_copy(traced_body)
    jfn(T(3))  # compiled before the trace function is set
    assert line_events(jfn, T(3)) == line_events(traced_body, T(3)) == [1, 2, 3, 4]


# --- functions made with annotations --------------------------------------------------------------

def makes_annotated_function(x):
    def inner(a: int, /) -> float: ...
    print("break")                           # `inner` crosses the break
    return x * 2, inner.__annotations__


def test_made_function_keeps_annotations():
    seed(9)
    jfn = jitted_copy(makes_annotated_function)
    for _ in range(2):
        out = check_call(makes_annotated_function, jfn, T(3))[0]
        assert out[1] == {"a": int, "return": float}, out[1]


# --- fuzzer finding: a local unbound when a segment was traced, bound in a later run -----------

def binds_on_some_paths(x, k):
    if x.sum() > 0:                          # an escape: the segments after it are shared
        t = x * 2
    if k > 1:
        t = x + 1
    print("break")                           # `t` untouched by this segment: passed on as is
    return t * 3


def test_local_unbound_at_trace_time_bound_later():
    seed(10)
    jfn = jitted_copy(binds_on_some_paths)
    neg = -(T(4).abs() + 0.5)
    pos = T(4).abs() + 0.5
    # Traced first with `t` unbound (raises), then run with `t` bound: must not raise.
    for x, k in ((neg, 0), (pos, 0), (neg, 2), (pos, 0), (neg, 0)):
        check_call(binds_on_some_paths, jfn, x, k)


# --- containers: self-containing, very large, repeated -----------------------------------------

def reads_self_containing_list(x, items):
    return x * len(items), items[0] is items


def test_self_containing_and_large_containers():
    seed(11)
    jfn = jitted_copy(reads_self_containing_list)
    loop = []
    loop.append(loop)                        # wrapping it item by item never ended (segfault)
    big = list(range(5000))                  # thousands of per-item guards made every call slow
    for items in (loop, big, big + [1], loop):
        x = T(3)
        out, same = jfn(x, items)
        assert out.tolist() == (x * len(items)).tolist()
        assert same == (items[0] is items)


def repeats(x, n):
    xs = [1, 2]
    alias = xs
    xs *= 2                                  # in place: `alias` sees it
    big = None
    try:
        big = [0] * n                         # huge n: MemoryError / OverflowError in CPython
    except (MemoryError, OverflowError) as e:
        big = type(e).__name__
    return x + len(alias), alias, (2, 3) * 2, big


def test_sequence_repetition():
    seed(12)
    jfn = jitted_copy(repeats)
    for n in (3, 2**62, 2**70):
        check_call(repeats, jfn, T(2), n)


# --- iterator objects keep their type across a break, tuple(t) is t ---------------------------

def holds_enumerate(x, seq):
    it = enumerate(seq)
    print("break")                           # `it` must still be an enumerate object
    return x + 1, type(it).__name__, list(it)


def tuple_of_tuple(x, t):
    u = tuple(t)
    return x * 2, u is t


def test_iterator_type_and_tuple_identity():
    seed(13)
    for fn, extra in ((holds_enumerate, "ab"), (tuple_of_tuple, (1, [2]))):
        jfn = jitted_copy(fn)
        for _ in range(2):
            check_call(fn, jfn, T(2), extra)


# --- identity of equal values, of built tuples and self-containing lists -----------------------

def is_(a, b):
    return a is b


def identity_of_equal_strings(x, a, c):
    print("break")                           # a hand-back/escape rebuilds a and c
    return x + 1, is_(a, c), is_(a, a)


def test_is_on_equal_but_distinct_values():
    seed(14)
    jfn = jitted_copy(identity_of_equal_strings)
    a = "xyzpdq"
    c = a[:3] + "pdq"                        # equal to a, another object
    for args in ((a, a), (a, c), (a, a), (a, c)):
        out = check_call(identity_of_equal_strings, jfn, T(2), *args)[0]
        assert out[1] == (args[0] is args[1])


def built_tuple_and_reflexive_list(x):
    t = (1, 2, [])
    loop = []
    loop.append(loop)
    same = is_(t, t)                         # `t` crosses the call's escape once, as one object
    print("break")
    return x * 2, same, t is t, loop[0] is loop


def test_built_tuple_identity_and_reflexive_list():
    seed(15)
    jfn = jitted_copy(built_tuple_and_reflexive_list)
    for _ in range(2):
        x = T(3)
        out = jfn(x)
        assert out[0].tolist() == (x * 2).tolist()
        assert out[1:] == (True, True, True), out[1:]


# --- a function stored in its own closure cell, rebuilt at a break (3.12 inlined comprehension) -

def comprehension_lambda_in_own_cell(x):
    (func, c), = [(a, b) for b in [1] for a in [lambda: a]]
    print("break")
    return x + c, func() is func


def test_function_in_its_own_cell_across_break():
    seed(16)
    jfn = jitted_copy(comprehension_lambda_in_own_cell)
    for _ in range(2):
        out = check_call(comprehension_lambda_in_own_cell, jfn, T(2))[0]
        assert out[1] is True


# --- user code removing a builtin that the tracer's own `dis` needs ----------------------------

def sums_after_break(x):
    print("break")
    return x.sum() + 1


def test_tracer_survives_removed_builtin():
    import builtins
    seed(17)
    saved = builtins.iter
    jfn = jitted_copy(sums_after_break)
    x = T(3)
    del builtins.iter                        # dis.get_instructions / _parse_exception_table use it
    try:
        with contextlib.redirect_stdout(io.StringIO()) as printed:
            out = jfn(x)
    finally:
        builtins.iter = saved
    assert printed.getvalue() == "break\n"
    assert abs(out.item() - (x.sum().item() + 1)) < 1e-5
    assert not sys.exc_info()[0]


# test_bisect's precomputed cases: functions read from a list attribute and inlined, whose
# defaults (one of them None) the trace reads through the function (`fn.__defaults__`), with a
# break in the loop so the frame state holding them is rebuilt from those sources. Reading
# `__defaults__` as an instance attribute found nothing and the rebuilt state "disappeared".
def _search(a, x, lo=0, hi=None):
    if hi is None:
        hi = len(a)
    while lo < hi:
        mid = (lo + hi) // 2
        if a[mid] <= x:
            lo = mid + 1
        else:
            hi = mid
    return lo


class _Cases:
    def __init__(self):
        self.cases = [(_search, [1, 2, 3], 2, 2), (_search, [1, 2, 3], 0, 0), (_search, [], 5, 0)]


def _run_cases(cases):
    out = []
    for fn, data, elem, want in cases.cases:
        # An empty list returns `lo` itself: the default, a value read through the function.
        out.append((fn(data, elem), want))
        print("", end="")  # a call the tracer does not follow: a break inside the loop
    return [got == want for got, want in out]


def test_inlined_defaults_survive_a_rebuilt_frame_state():
    assert _run_cases(_Cases()) == [True, True, True]
    assert run_stressed(_run_cases, _Cases()) == [True, True, True]


# --- a list changed while list.sort sorts it (CPython's test_sort, test_undetected_mutation) ----
# list.sort empties the list it sorts and marks it; a comparison that appends and pops (or
# empties it) removes the mark, and the sort raises "list modified during sort". The trace
# replayed only the final contents, which were those of the emptied list: no mark removed, no
# error. Such a change is left to CPython, and an entry that changes a caller's list is guarded
# to run only on a list that is not being sorted.
def _append_pop_cmp(L, x, y):
    L.append(3)
    L.pop()
    return (x > y) - (x < y)


def _append_clear_cmp(L, x, y):
    L.append(3)
    del L[:]
    return (x > y) - (x < y)


def _sort_calling(cmp):
    import functools
    out = []
    for _ in range(3):
        L = [1, 2]
        try:
            L.sort(key=functools.cmp_to_key(lambda x, y: cmp(L, x, y)))
            out.append(("sorted", list(L)))
        except ValueError as e:
            out.append(("ValueError", str(e)))
    return out


def test_list_changed_during_its_sort_raises_like_cpython():
    for cmp in (_append_pop_cmp, _append_clear_cmp):
        plain = _sort_calling(cmp)
        assert plain == [("ValueError", "list modified during sort")] * 3, plain
        # Traced first while a sort is on; then first outside one, on an empty list (a list
        # being sorted reads as empty, so only the NotSorting guard keeps a call during a sort
        # from using that entry).
        jfn = jitted_copy(cmp)
        assert _sort_calling(jfn) == plain, cmp.__name__
        jfn = jitted_copy(cmp)
        for _ in range(2):
            check_call(cmp, jfn, [], 2, 1)  # the one comparison sorting [1, 2] makes
        assert _sort_calling(jfn) == plain, cmp.__name__
        assert run_stressed(_sort_calling, cmp) == plain, cmp.__name__


# --- a frame object taken during an escape (CPython's test_unittest, testAssertRaisesRefcount) --
# A traceback or sys._getframe() during an escaped call gives Python the frame's frame object,
# whose locals are the frame's fast locals. Segments left them as the escape saw them, so after
# `context = None; return` the object still held the context: unittest's assertRaises cycle
# (context -> exception -> traceback -> frames -> context) outlived the call until the next
# garbage collection, and f_locals showed stale values. CPython now runs the rest of such a frame.
def _caller_frame():
    return sys._getframe(1)


def _drops_its_local(obj):
    frame = _caller_frame()
    obj = None
    return frame, obj


def _assert_raises_refcount(case):
    def func():
        try:
            raise ValueError
        except ValueError:
            raise ValueError

    before = sys.getrefcount(func)
    case.assertRaises(ValueError, func)
    return sys.getrefcount(func) - before


def test_frame_object_taken_in_an_escape_shows_the_final_locals():
    import gc
    import unittest
    frame, _ = _drops_its_local([1])
    assert frame.f_locals["obj"] is None
    jfn = jitted_copy(_drops_its_local)
    for _ in range(2):
        frame, _ = jfn([1])
        assert frame.f_locals["obj"] is None, frame.f_locals
    case = unittest.TestCase()
    gc.disable()  # the cycle would be found by a collection; CPython's refcounts free it at once
    try:
        assert _assert_raises_refcount(case) == 0
        for _ in range(2):
            assert run_stressed(_assert_raises_refcount, case) == 0
    finally:
        gc.enable()


# --- the recursion limit (CPython's test_exceptions, test_recursion_in_except_handler) ---------
# A frame dyntrace runs counted one level only while an escape ran, and only as C depth: on 3.12
# (where sys.setrecursionlimit bounds Python frames apart from the fixed C depth) a function
# recursing through escapes went 1500 deep under any limit, and test_exceptions' doubly
# recursive function ran for 2**1500 calls; on both versions a frame entered past the limit ran
# its body up to its first escape. The counts of calls made before RecursionError must be
# CPython's.
def _recursion_counts():
    calls = [0]

    def recurse_in_except():
        calls[0] += 1
        try:
            1 / 0
        except ZeroDivisionError:
            recurse_in_except()

    def recurse_after_except():
        calls[0] += 1
        try:
            1 / 0
        except ZeroDivisionError:
            pass
        recurse_after_except()

    def recurse_in_body_and_except():
        calls[0] += 1
        if calls[0] > 100_000:  # far past 2**(limit + 1): the limit is not working
            raise OverflowError(f"{calls[0]} calls")
        try:
            recurse_in_body_and_except()
        except RecursionError:
            recurse_in_body_and_except()

    def below_the_limit(n):
        # The lowest limit sys.setrecursionlimit accepts here, plus n.
        depth = 1
        while True:
            try:
                sys.setrecursionlimit(depth)
            except RecursionError:
                depth += 1
            else:
                break
        sys.setrecursionlimit(depth + n)

    counts = []
    limit = sys.getrecursionlimit()
    try:
        below_the_limit(9)
        for fn in (recurse_in_except, recurse_after_except, recurse_in_body_and_except):
            calls[0] = 0
            try:
                fn()
            except RecursionError:
                counts.append(calls[0])
            except OverflowError as e:
                counts.append(str(e))
    finally:
        sys.setrecursionlimit(limit)
    return counts


def test_recursion_limit_counts_frames_as_cpython():
    plain = _recursion_counts()
    assert len(plain) == 3 and plain[2] == 2 ** plain[0] - 1, plain  # the doubly recursive tree
    assert run_stressed(_recursion_counts) == plain
