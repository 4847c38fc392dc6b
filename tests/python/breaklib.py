"""Helpers for the graph-break tests (test_breaks.py): a differential run that also compares
Python-side effects (global lists and dicts the functions write to), tracebacks of the exceptions
raised, and the graph-break counters of stats().

Builds on jitlib: the reference run uses an unmarked copy of the function (`fresh_copy`), inputs
come from the same factory under the same seed, and results, exceptions, printed text and inputs
afterwards are compared. Python floats are compared with the tolerance used for float32 tensors,
since values read with `.item()` / `float()` may come out of a compiled segment.
"""
import inspect
import os
import traceback
import types

import dyntrace as dt
from jitlib import Call, as_call, assert_same, assert_same_exception, capture, input_pairs, stats
from testlib import close

BREAK_KEYS = ("graph_breaks", "escapes", "handbacks")

FLOAT_RTOL = 1e-5
FLOAT_ATOL = 1e-6


def break_stats():
    """stats() as a dict of plain values; fails clearly while the graph-break keys are missing."""
    s = stats()
    for k in BREAK_KEYS:
        assert k in s, ("stats() has no %r key: graph breaks are not implemented (keys: %s)"
                        % (k, sorted(s)))
        assert type(s[k]) is int, (k, s[k])
    return s


def line_of(fn, text):
    """The absolute line number of the first source line of fn containing `text`."""
    lines, first = inspect.getsourcelines(fn)
    for k, line in enumerate(lines):
        if text in line:
            return first + k
    raise AssertionError("%r not in source of %s" % (text, fn.__name__))


def snap_floats(actual, expected):
    """A copy of `actual` in which each Python float close to the float at the same place in
    `expected` is replaced by that float (lists, tuples and dicts are rebuilt; tensors and other
    objects are kept as they are, so identity checks still see the original objects)."""
    if type(actual) is float and type(expected) is float:
        both_nan = actual != actual and expected != expected
        if both_nan or close(actual, expected, FLOAT_RTOL, FLOAT_ATOL):
            return expected
        return actual
    if type(actual) in (list, tuple) and type(expected) is type(actual) and (
            len(actual) == len(expected)):
        items = [snap_floats(a, e) for a, e in zip(actual, expected)]
        return items if type(actual) is list else tuple(items)
    if type(actual) is dict and type(expected) is dict and list(actual) == list(expected):
        return {k: snap_floats(actual[k], expected[k]) for k in actual}
    return actual


def user_frames(exc, filename=None):
    """[(function name, line)] of the traceback of `exc`, restricted to frames of `filename`
    (default: every frame)."""
    out = []
    for fs in traceback.extract_tb(exc.__traceback__):
        if filename is None or os.path.abspath(fs.filename) == os.path.abspath(filename):
            out.append((fs.name, fs.lineno))
    return out


def assert_traceback_names(exc, fn, where):
    names = [name for name, _ in user_frames(exc)]
    assert fn.__name__ in names, (
        "%s: the traceback of %s(%s) does not contain the user function %r; frames: %r"
        % (where, type(exc).__name__, exc, fn.__name__, names))


def run_break_differential(fn, jfn, factory, calls, seed_base, effects=None):
    """For i in range(calls): builds inputs twice from factory(i) under the same seed, runs fn
    (plain) and jfn (jit), and compares results, exceptions (type, message, the user function in
    the traceback), printed text, the inputs afterwards and, with `effects` (a callable that
    returns a snapshot of the module's side-effect state and clears it), the side effects.
    Returns the list of (plain result, plain exception) per call."""
    outcomes = []
    for i in range(calls):
        where = "call %d" % i
        dt.manual_seed(seed_base + 1000 * i)
        call_plain = as_call(factory(i))
        dt.manual_seed(seed_base + 1000 * i)
        call_jit = as_call(factory(i))
        pairs = input_pairs(call_plain, call_jit)
        jit_inputs = set()
        for v in list(call_jit.args) + list(call_jit.kwargs.values()):
            _collect_tensor_ids(v, jit_inputs)
        if effects is not None:
            effects()
        r_plain, e_plain, out_plain = capture(fn, call_plain)
        if isinstance(r_plain, types.GeneratorType):
            r_plain, e_plain, more = capture(list, Call(r_plain))
            out_plain += more
        fx_plain = effects() if effects is not None else None
        r_jit, e_jit, out_jit = capture(jfn, call_jit)
        if isinstance(r_jit, types.GeneratorType):
            r_jit, e_jit, more = capture(list, Call(r_jit))
            out_jit += more
        fx_jit = effects() if effects is not None else None
        assert_same_exception(e_jit, e_plain, where + " exception")
        if e_plain is not None:
            assert_traceback_names(e_jit, fn, where)
        assert_same(snap_floats(r_jit, r_plain), r_plain, pairs, jit_inputs, where + " result")
        assert out_jit == out_plain, "%s stdout %r != %r" % (where, out_jit, out_plain)
        assert_same(call_jit.args, call_plain.args, path=where + " inputs after the call",
                    identity=False)
        assert_same(call_jit.kwargs, call_plain.kwargs, path=where + " kwargs after the call",
                    identity=False)
        if effects is not None:
            assert_same(snap_floats(fx_jit, fx_plain), fx_plain,
                        path=where + " side effects", identity=False)
        outcomes.append((r_plain, e_plain))
    return outcomes


def _collect_tensor_ids(obj, out):
    if isinstance(obj, dt.Tensor):
        out.add(id(obj))
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _collect_tensor_ids(v, out)
    elif isinstance(obj, dict):
        for v in obj.values():
            _collect_tensor_ids(v, out)


def clone_args(args):
    """Tensors cloned (recursively through lists/tuples/dicts); everything else shared."""
    if isinstance(args, dt.Tensor):
        return args.clone()
    if isinstance(args, list):
        return [clone_args(a) for a in args]
    if isinstance(args, tuple):
        return tuple(clone_args(a) for a in args)
    if isinstance(args, dict):
        return {k: clone_args(v) for k, v in args.items()}
    return args


def check_call(fn, jfn, *args, effects=None):
    """One differential call on explicit inputs (each side gets its own clones). Returns the
    jit run's (result, exception, stdout)."""
    plain_args = clone_args(args)
    jit_args = clone_args(args)
    if effects is not None:
        effects()
    r_plain, e_plain, out_plain = capture(fn, Call(*plain_args))
    fx_plain = effects() if effects is not None else None
    r_jit, e_jit, out_jit = capture(jfn, Call(*jit_args))
    fx_jit = effects() if effects is not None else None
    assert_same_exception(e_jit, e_plain)
    if e_plain is not None:
        assert_traceback_names(e_jit, fn, "check_call")
    assert_same(snap_floats(r_jit, r_plain), r_plain, identity=False)
    assert out_jit == out_plain, "stdout %r != %r" % (out_jit, out_plain)
    assert_same(jit_args, plain_args, path="inputs after the call", identity=False)
    if effects is not None:
        assert_same(snap_floats(fx_jit, fx_plain), fx_plain, path="side effects",
                    identity=False)
    return r_jit, e_jit, out_jit
