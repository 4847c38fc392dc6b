"""`with` blocks and try/except/finally inside compiled code (issue 18): context managers whose
__enter__/__exit__ are Python functions are inlined, so the block compiles; a block whose body
breaks compiles around the break; whatever raises inside a protected region is left to CPython,
whose exception table runs the handler (or __exit__ with the exception) exactly as it would
have. Each function runs plain (an unmarked copy) and under `dt.jit` on the eager and cpu
backends on equal inputs (jitlib.run_differential)."""
import contextlib
import threading

import dyntrace as dt
from jitlib import Call, check_compiled
from testlib import rand_tensor

def T(n=3):
    return rand_tensor((n,), dt.float32, -2.0, 2.0)


def check(fn, factory, whole=True, calls=3):
    return check_compiled(fn, factory, whole=whole, calls=calls, seed_base=18)


class Scaled:
    """A user context manager that counts how often it is entered and left."""

    def __init__(self, k):
        self.k = k
        self.depth = 0
        self.log = []

    def __enter__(self):
        self.depth += 1
        self.log.append("enter")
        return self.k

    def __exit__(self, kind, value, tb):
        self.depth -= 1
        self.log.append("exit" if kind is None else kind.__name__)
        return False


class Swallow(Scaled):
    def __exit__(self, kind, value, tb):
        self.log.append("swallowed" if kind is not None else "exit")
        return True


# ---------------------------------------------------------------------------------------------
# Blocks that compile whole.

def with_argument_manager(x, cm):
    with cm as k:
        y = x * k
    return y + cm.depth


def with_manager_made_inside(x):
    cm = Scaled(3)
    with cm as k:
        with contextlib.nullcontext(2.0) as m:
            y = x * k + m
    return y, cm.log, cm.depth


def with_return_inside(x, cm):
    with cm:
        return x.exp()


def try_except_finally_without_raise(x, log):
    try:
        y = x * 2
    except ValueError:
        y = x
    else:
        y = y + 1
    finally:
        log.append("finally")
    return y


def test_with_blocks_of_python_managers_compile_whole():
    check(with_argument_manager, lambda i: Call(T(), Scaled(i + 1)))
    check(with_manager_made_inside, lambda i: Call(T()))
    check(with_return_inside, lambda i: Call(T(), Scaled(1)))


def test_try_without_a_raise_compiles_whole():
    check(try_except_finally_without_raise, lambda i: Call(T(), []))


# ---------------------------------------------------------------------------------------------
# Breaks and raises inside protected regions.

def with_break_inside(x, cm):
    with cm as k:
        y = x * k
        print("inside", cm.depth)
        y = y + 1
    return y, cm.log


def with_body_raises(x, cm):
    with cm as k:
        y = x * k
        if k > 1:
            raise ValueError("k too big")
    return y


def try_catches_escaped_call(x, lookup, key):
    y = x + 1
    try:
        y = y * lookup(key)  # a builtin method: an escape, which raises KeyError at run time
    except KeyError:
        y = y - 1
    return y


def try_catches_shape_error(x, y):
    a = x.exp()
    try:
        b = a + y
        tag = "ok"
    except dt.ShapeError:
        b = a
        tag = "caught"
    return b * 2, tag


def test_with_body_with_a_break_compiles_around_it():
    s = check(with_break_inside, lambda i: Call(T(), Scaled(2)), whole=False)
    assert s["graph_breaks"] >= 1 and s["handbacks"] == 0, s


def test_raises_inside_protected_regions_behave_as_in_cpython():
    check(with_body_raises, lambda i: Call(T(), Scaled(1 + i % 2)), whole=False, calls=4)
    check(with_body_raises, lambda i: Call(T(), Swallow(1 + i % 2)), whole=False, calls=4)
    table = {"a": 2.0}
    check(try_catches_escaped_call, lambda i: Call(T(), table.__getitem__, "ab"[i % 2]), whole=False,
          calls=4)
    check(try_catches_shape_error, lambda i: Call(T(), T(3 if i % 2 == 0 else 4)), whole=False, calls=4)


LOCK = threading.Lock()


def with_c_manager(x):
    with LOCK:
        y = x * 2
    return y


def test_a_c_manager_the_tracer_does_not_know_breaks_with_a_reason():
    s = check(with_c_manager, lambda i: Call(T()), whole=False)
    reasons = " ".join(s["break_reasons"] + s["fallback_reasons"])
    assert "KnownContextManagers" in reasons and "lock" in reasons, reasons


# ---------------------------------------------------------------------------------------------
# @contextlib.contextmanager generators: run in step with the block.

class State:
    def __init__(self):
        self.scale = 1.0
        self.log = []


@contextlib.contextmanager
def scaled_state(state, k, tag="t"):
    old = state.scale
    state.scale = k
    state.log.append("enter " + tag)
    try:
        yield state.scale * 2
    finally:
        state.scale = old
        state.log.append("exit")


def with_contextmanager(x, state):
    with scaled_state(state, 3.0, tag="a") as v:
        y = x * state.scale + v
    return y + state.scale, state.log


def with_contextmanager_break(x, state):
    with scaled_state(state, 2.0) as v:
        print("inside", state.scale)
        y = x * v
    return y, state.scale


def with_contextmanager_raises(x, state):
    with scaled_state(state, 2.0 + x.shape[0]):
        if x.shape[0] > 3:
            raise ValueError("too long")
        y = x * state.scale
    return y


def test_contextmanager_generators_compile_in_step_with_the_block():
    check(with_contextmanager, lambda i: Call(T(), State()))
    check(with_contextmanager_break, lambda i: Call(T(), State()), whole=False)
    check(with_contextmanager_raises, lambda i: Call(T(3 + i % 2), State()), whole=False, calls=4)


# ---------------------------------------------------------------------------------------------
# dyntrace's grad-mode managers (Python classes calling dt._set_grad_enabled): inlined, with the
# mode followed by the trace and left behind by the segment, also at a break inside the block.

def with_grad_modes(x, w):
    a = dt.is_grad_enabled()
    with dt.no_grad():
        y = x @ w
        b = dt.is_grad_enabled()
        with dt.enable_grad():
            c = dt.is_grad_enabled()
    with dt.inference_mode():
        z = (y * 2).relu()
        d = dt.is_grad_enabled()
    with dt.set_grad_enabled(False):
        e = dt.is_grad_enabled()
    return z, a, b, c, d, e, dt.is_grad_enabled()


def grad_mode_with_a_break(x, w):
    with dt.no_grad():
        y = x @ w
        print("inside", dt.is_grad_enabled())
        y = y + 1
    return y, dt.is_grad_enabled()


def test_grad_mode_managers_compile_whole_and_leave_the_mode_as_cpython():
    make = lambda i: Call(rand_tensor((3, 4), dt.float32), rand_tensor((4, 2 + i), dt.float32))
    check(with_grad_modes, make)
    check(grad_mode_with_a_break, make, whole=False)
    assert dt.is_grad_enabled()
    with dt.no_grad():  # entered with the mode off: the trace starts from it
        check(with_grad_modes, make, whole=False)
        assert not dt.is_grad_enabled()
    assert dt.is_grad_enabled()
