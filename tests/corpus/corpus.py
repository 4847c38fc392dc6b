"""The Python-semantics corpus's registry and input helpers (issue 16).

Each case module (`cases_*.py` beside this file) registers ordinary Python functions that work on
dyntrace tensors with `@case(factory)`. `factory(i)` builds the inputs of call i (a value, a tuple
or a `jitlib.Call`); it runs under a fixed seed, twice per call, so the plain and the jit run get
equal inputs that are never shared. run_corpus.py checks every case in a process of its own.

    @case(lambda i: Call(T(4), scale=2.0))
    def scaled(x, scale=1.0):
        return x * scale

`xfail="why"` marks a case whose jit run is known to differ from CPython: the driver reports it
loudly as a known failure, and fails the run if it starts to pass (so the mark is removed).

`must_break="why"` marks a case that cannot compile with `fullgraph=True` by its nature, not for
want of tracer work: it raises by design (an exception escapes to the caller, or CPython, a
builtin or dyntrace's runtime raises it, so that its type, message and traceback are CPython's
own), it needs tensor values as Python values (`.item()`, `.tolist()`, the truth of a tensor, a
tensor's values formatted into a string), or it does I/O (`print`, `redirect_stdout`). A
construct that CPython runs without error and that dyntrace merely does not trace yet is not
must-break. The driver counts compiling whole over the unmarked cases too (issue 23's figure), and
fails the run if a marked case compiles with `fullgraph=True` (so the mark is removed).
"""
import sys

import dyntrace as dt
from jitlib import Call  # noqa: F401 - re-exported for the case modules
from testlib import positive, rand_tensor, uniform

CASES = {}  # name -> Case, in registration order


class Case:
    def __init__(self, name, fn, factory, calls, xfail, must_break):
        self.name = name
        self.fn = fn
        self.factory = factory
        self.calls = calls
        self.xfail = xfail
        self.must_break = must_break


def case(factory, calls=2, xfail=None, name=None, must_break=None):
    """Registers the decorated function; returns it unchanged."""
    def register(fn):
        key = name or fn.__name__
        assert key not in CASES, "two corpus cases named %r" % key
        CASES[key] = Case(key, fn, factory, calls, xfail, must_break)
        return fn
    return register


# Inputs are drawn after the driver sets the seed, so both runs of a call get equal values.
T = uniform   # uniform(3, 4): values in [-2, 2)
P = positive  # values in [0.5, 2): safe for log, sqrt and division


def I(*shape, low=0, high=10):
    """int64 values in [low, high)."""
    return rand_tensor(shape, dt.int64, low, high)


SIZES = (3, 5, 4)


def n_of(i):
    """A size that changes from call to call, so later calls meet the cached graphs."""
    return SIZES[i % len(SIZES)]


CASE_MODULES = ("cases_containers", "cases_functions", "cases_objects", "cases_control",
                "cases_state", "cases_guards", "cases_edges", "cases_everyday", "cases_whole")


def load_all():
    """Imports every case module; returns the registry."""
    for module in CASE_MODULES:
        __import__(module)
    return CASES


def find(name):
    load_all()
    if name not in CASES:
        sys.exit("no corpus case named %r" % name)
    return CASES[name]
