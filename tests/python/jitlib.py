"""Helpers for the frame-evaluator tests (test_jit_*.py): differential runs of a function under
plain CPython and under `dyntrace.jit`, deep comparison of results, inputs and exceptions, and
stats bookkeeping.

The reference run always uses an unmarked copy of the function (a fresh code object made with
`code.replace()`), so it runs under plain CPython whatever `dt.jit` did to the original's code.
Inputs for the two runs come from the same factory after the same seed, so they are equal but
never shared: mutations of inputs are compared afterwards.
"""
import contextlib
import io
import math
import types

import dyntrace as dt
from testlib import assert_close, default_tol


class Call:
    """Arguments for one call: `Call(x, y, scale=2)`."""

    def __init__(self, *args, **kwargs):
        self.args = args
        self.kwargs = kwargs


def as_call(value):
    if isinstance(value, Call):
        return value
    if isinstance(value, tuple):
        return Call(*value)
    return Call(value)


def fresh_copy(fn):
    """A new function object with a new (unmarked) code object, same globals/defaults/closure;
    of what dt.jit returned, a copy of the function it wraps."""
    if isinstance(fn, dt.CompiledFunction):
        fn = fn.__wrapped__
    code = fn.__code__.replace()
    assert code is not fn.__code__
    g = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    g.__kwdefaults__ = dict(fn.__kwdefaults__) if fn.__kwdefaults__ else None
    g.__qualname__ = fn.__qualname__
    g.__dict__.update(fn.__dict__)
    return g


def jitted_copy(fn, **options):
    """dt.jit applied to a fresh copy of fn: the compiled callable (fn's copy stays plain)."""
    g = fresh_copy(fn)
    out = dt.jit(g, **options) if options else dt.jit(g)
    assert isinstance(out, dt.CompiledFunction) and out.__wrapped__ is g, out
    assert out.__name__ == g.__name__ and out.__qualname__ == g.__qualname__
    return out


def capture(fn, call):
    """Runs fn(*call.args, **call.kwargs); returns (result, exception, stdout text)."""
    buf = io.StringIO()
    result = exc = None
    with contextlib.redirect_stdout(buf):
        try:
            result = fn(*call.args, **call.kwargs)
        except Exception as e:  # noqa: BLE001 - compared below
            exc = e
    return result, exc, buf.getvalue()


# ---------------------------------------------------------------------------------------------
# Deep comparison.

def _pair_inputs(plain, jit, pairs):
    """Records id(plain object) -> (plain object, jit object) for everything reachable from the
    inputs. The plain object is held so that its id stays its own: an input the call drops (an
    attribute it rebinds) would otherwise free its id for the result."""
    if id(plain) in pairs:
        return
    if isinstance(plain, (dt.Tensor, list, tuple, dict)) or hasattr(plain, "__dict__"):
        pairs[id(plain)] = (plain, jit)
    if isinstance(plain, (list, tuple)) and isinstance(jit, (list, tuple)):
        for a, b in zip(plain, jit):
            _pair_inputs(a, b, pairs)
    elif isinstance(plain, dict) and isinstance(jit, dict):
        for k in plain:
            if k in jit:
                _pair_inputs(plain[k], jit[k], pairs)
    elif (hasattr(plain, "__dict__") and not isinstance(plain, (type, types.FunctionType,
                                                                  types.ModuleType))
          and hasattr(jit, "__dict__")):
        for k, v in vars(plain).items():
            if k in vars(jit):
                _pair_inputs(v, vars(jit)[k], pairs)


def input_pairs(call_plain, call_jit):
    pairs = {}
    _pair_inputs(call_plain.args, call_jit.args, pairs)
    _pair_inputs(call_plain.kwargs, call_jit.kwargs, pairs)
    pairs.pop(id(call_plain.args), None)
    pairs.pop(id(call_plain.kwargs), None)
    return pairs


def _tensors_in(obj, out):
    """id -> tensor for the tensors in obj (held, so their ids stay theirs during the call)."""
    if isinstance(obj, dt.Tensor):
        out[id(obj)] = obj
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _tensors_in(v, out)
    elif isinstance(obj, dict):
        for v in obj.values():
            _tensors_in(v, out)
    return out


def assert_same(actual, expected, pairs=None, jit_inputs=frozenset(), path="result", memo=None,
                identity=True, exact=False):
    """Structure, types, tensor dtype/shape/values (tight tolerance; bit for bit, NaN equal to
    NaN, with `exact`) and tensor identity:
    an input tensor returned by the plain run must be the corresponding input object in the jit
    run; a new tensor must not be one of the jit run's inputs; a tensor returned twice must be
    returned twice."""
    pairs = {} if pairs is None else pairs
    memo = {} if memo is None else memo
    if isinstance(expected, dt.Tensor):
        assert isinstance(actual, dt.Tensor), "%s: expected a Tensor, got %r" % (path, type(actual))
        if identity:
            if id(expected) in memo:
                assert actual is memo[id(expected)], "%s: aliasing differs" % path
            memo[id(expected)] = actual
            if id(expected) in pairs:
                assert actual is pairs[id(expected)][1], (
                    "%s: plain Python returned the input tensor itself; jit returned a different "
                    "object" % path)
            elif actual is not expected:
                assert id(actual) not in jit_inputs, (
                    "%s: jit returned an input tensor where plain Python made a new one" % path)
        assert actual.dtype == expected.dtype, "%s: dtype %s != %s" % (path, actual.dtype,
                                                                        expected.dtype)
        assert tuple(actual.shape) == tuple(expected.shape), "%s: shape %s != %s" % (
            path, actual.shape, expected.shape)
        rtol, atol = (0.0, 0.0) if exact else default_tol(expected.dtype)
        assert_close(actual, expected, rtol=rtol, atol=atol, dtype=expected.dtype, msg=path)
        return
    assert type(actual) is type(expected), "%s: type %s != %s (%r vs %r)" % (
        path, type(actual).__name__, type(expected).__name__, actual, expected)
    if isinstance(expected, (list, dict)) or (hasattr(expected, "__dict__") and
                                              not isinstance(expected, (types.FunctionType, type))):
        # Objects with identity: met again, the same object must be met again (a cycle ends).
        key = ("object", id(expected))
        if key in memo:
            assert actual is memo[key], "%s: aliasing of a %s differs" % (path, type(expected).__name__)
            return
        memo[key] = actual
    if isinstance(expected, (list, tuple)):
        assert len(actual) == len(expected), "%s: length %d != %d" % (path, len(actual),
                                                                      len(expected))
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_same(a, e, pairs, jit_inputs, "%s[%d]" % (path, i), memo, identity, exact)
    elif isinstance(expected, dict):
        assert list(actual.keys()) == list(expected.keys()), "%s: keys %r != %r" % (
            path, list(actual.keys()), list(expected.keys()))
        for k in expected:
            assert_same(actual[k], expected[k], pairs, jit_inputs, "%s[%r]" % (path, k), memo,
                        identity, exact)
    elif isinstance(expected, float):
        assert (math.isnan(actual) and math.isnan(expected)) or actual == expected, (
            "%s: %r != %r" % (path, actual, expected))
    elif isinstance(expected, (int, str, bool, bytes, type(None), dt.dtype)):
        assert actual == expected, "%s: %r != %r" % (path, actual, expected)
    elif hasattr(expected, "__dict__") and not isinstance(expected, (types.FunctionType, type)):
        assert_same(dict(vars(actual)), dict(vars(expected)), pairs, jit_inputs,
                    path + ".__dict__", memo, identity, exact)
    else:
        assert actual == expected, "%s: %r != %r" % (path, actual, expected)


def assert_same_exception(actual, expected, path="exception"):
    if expected is None:
        assert actual is None, "%s: jit raised %s: %s; plain Python raised nothing" % (
            path, type(actual).__name__, actual)
        return
    assert actual is not None, "%s: plain Python raised %s: %s; jit raised nothing" % (
        path, type(expected).__name__, expected)
    assert type(actual) is type(expected), "%s: %s(%s) != %s(%s)" % (
        path, type(actual).__name__, actual, type(expected).__name__, expected)
    assert str(actual) == str(expected), "%s: message %r != %r" % (path, str(actual),
                                                                     str(expected))


def run_differential(fn, jfn, factory, calls, seed_base, exact=False):
    """For i in range(calls): builds inputs twice from factory(i) under the same seed, runs fn
    (plain) and jfn (jit), and compares results, exceptions, stdout and the inputs afterwards.
    `exact`: tensors must be equal bit for bit (where the backend promises eager's results)."""
    for i in range(calls):
        dt.manual_seed(seed_base + 1000 * i)
        call_plain = as_call(factory(i))
        dt.manual_seed(seed_base + 1000 * i)
        call_jit = as_call(factory(i))
        pairs = input_pairs(call_plain, call_jit)
        jit_inputs = _tensors_in(call_jit.kwargs, _tensors_in(call_jit.args, {}))
        r_plain, e_plain, out_plain = capture(fn, call_plain)
        r_jit, e_jit, out_jit = capture(jfn, call_jit)
        where = "call %d" % i
        assert_same_exception(e_jit, e_plain, where + " exception")
        if isinstance(r_plain, types.GeneratorType):
            assert isinstance(r_jit, types.GeneratorType), where + ": expected a generator"
            r_plain, e_plain, out2_plain = capture(list, Call(r_plain))
            r_jit, e_jit, out2_jit = capture(list, Call(r_jit))
            out_plain += out2_plain
            out_jit += out2_jit
            assert_same_exception(e_jit, e_plain, where + " generator exception")
        assert_same(r_jit, r_plain, pairs, jit_inputs, where + " result", exact=exact)
        assert out_jit == out_plain, "%s stdout %r != %r" % (where, out_jit, out_plain)
        assert_same(call_jit.args, call_plain.args, path=where + " inputs after the call",
                    identity=False, exact=exact)
        assert_same(call_jit.kwargs, call_plain.kwargs, path=where + " kwargs after the call",
                    identity=False, exact=exact)


# ---------------------------------------------------------------------------------------------
# Stats.

STAT_INT_KEYS = ("frames_seen", "frames_traced", "frames_skipped", "cache_hits", "cache_misses",
                 "recompiles", "fallbacks", "graphs")
STAT_LIST_KEYS = ("recompile_reasons", "fallback_reasons")


def check_compiled(fn, factory, whole=True, calls=3, seed_base=23, backends=("eager", "cpu")):
    """fn under dt.jit matches plain Python on each backend (run_differential); `whole`: with no
    graph break and no fallback, also with fullgraph=True. Returns the last run's stats."""
    s = None
    for backend in backends:
        for fullgraph in ((False, True) if whole else (False,)):
            dt.reset()
            jfn = jitted_copy(fn, backend=backend, fullgraph=fullgraph)
            run_differential(fn, jfn, factory, calls, seed_base=seed_base)
            s = stats()
            if whole:
                assert s["graph_breaks"] == 0 and s["fallbacks"] == 0, (fn.__name__, backend,
                                                                         s["break_reasons"])
    return s


def stats():
    s = dt.stats()
    return {k: (list(v) if isinstance(v, (list, tuple)) else v) for k, v in s.items()}


def assert_reason(reason, source, expected, actual):
    """The recompile reason names `source` and both values: `expected` after the word
    'expected' and `actual` after the word 'actual'."""
    assert source in reason, "reason %r does not name %r" % (reason, source)
    low = reason
    i = low.find("expected")
    assert i >= 0, "reason %r has no 'expected'" % reason
    assert str(expected) in low[i:], "reason %r: expected value %r missing" % (reason, expected)
    j = low.find("actual")
    assert j >= 0, "reason %r has no 'actual'" % reason
    assert str(actual) in low[j:], "reason %r: actual value %r missing" % (reason, actual)
