"""Exceptions the traced code raises and catches itself compile (issue 23): `raise` inside a
`try` of the same frame or of a traced caller goes to the handler CPython's exception table names.
Each function is compared with plain CPython on an unmarked copy, on the eager and cpu backends,
and must compile whole with fullgraph=True where CPython's result does not expose the caught
exception object itself."""
import dyntrace as dt
from jitlib import Call, jitted_copy, run_differential, stats
from testlib import assert_raises, rand_tensor


def raise_in_while_with_else_and_finally(x):
    events, k = [], 0
    while k < 4:
        try:
            y = x + k
            if k % 2:
                raise ValueError("odd", k)
        except ValueError as e:
            events.append(("except", e.args))
        else:
            events.append(("else", k))
        finally:
            k += 1
    return y, events


class Loader:
    def __init__(self, fails):
        self.fails = fails

    def load(self, t, attempt):
        if attempt < self.fails:
            raise RuntimeError(f"attempt {attempt} of {self.fails}")
        return t * attempt


def retry_a_method_that_raises(x):
    loader, notes = Loader(2), []
    for attempt in range(4):
        try:
            result = loader.load(x, attempt)
        except RuntimeError as e:
            notes.append(str(e))
            continue
        break
    return result, notes


def nested_handlers_and_tuples(x):
    try:
        try:
            raise KeyError("k")
        except ValueError:
            return x, "wrong"
        finally:
            x = x + 1
    except (KeyError, IndexError) as e:
        return x * 2, repr(e), e.args, type(e).__name__, isinstance(e, LookupError)


def bare_raise_reraises(x):
    try:
        try:
            raise ValueError("a")
        except ValueError:
            x = x + 1
            raise
    except ValueError as e:
        return x, str(e)


class ShapeProblem(ValueError):
    pass


def user_exception_class_and_class_raise(x):
    caught = []
    for cls in (ShapeProblem, ValueError):
        try:
            if cls is ShapeProblem:
                raise ShapeProblem("rows", 3)
            raise cls
        except ShapeProblem as e:
            caught.append(("shape", e.args))
        except ValueError as e:
            caught.append(("value", repr(e)))
    return x + len(caught), caught


def next_until_stop_iteration(x):
    it = iter((1, 2))
    out = []
    while True:
        try:
            out.append(x * next(it))
        except StopIteration:
            break
    return out


def next_over_a_list_that_grows(x):
    # iter() of a list reads it live, as CPython's list iterator does; list() uses up the rest.
    xs = [1, 2]
    it = iter(xs)
    out = []
    while True:
        try:
            v = next(it)
        except StopIteration:
            break
        if v == 1:
            xs.append(3)
        out.append(x * v)
    d = {"a": 1, "b": 2}
    keys = iter(d)
    first = next(keys)
    return out, first, list(keys), list(keys)


def generator_raises_after_its_items(x):
    # The generator runs ahead of its loop; its raise comes at the loop's last FOR_ITER, after
    # the body ran for every item, as in CPython. list() of such a generator raises as a whole.
    def batches(t):
        for k in range(2):
            yield t + k
        raise ValueError("ran out", t.shape[0])
    out = []
    try:
        for v in batches(x):
            out.append(v * 2)
    except ValueError as e:
        message = e.args
    try:
        everything = list(batches(x))
    except ValueError:
        everything = None
    g = batches(x)
    first = next(g)
    return out, message, everything, first, next(g), next(g, None) if False else len(out)


WHOLE = [generator_raises_after_its_items, next_over_a_list_that_grows, raise_in_while_with_else_and_finally,
         retry_a_method_that_raises, nested_handlers_and_tuples, bare_raise_reraises,
         user_exception_class_and_class_raise, next_until_stop_iteration]


def test_caught_exceptions_compile_whole_and_match_cpython():
    for fn in WHOLE:
        for backend in ("eager", "cpu"):
            dt.reset()
            jfn = jitted_copy(fn, backend=backend, fullgraph=True)
            run_differential(fn, jfn, lambda i: Call(rand_tensor((3,))), 2, seed_base=7, exact=True)
            s = stats()
            assert s["graph_breaks"] == 0 and s["fallbacks"] == 0 and s["graphs"] >= 1, (fn.__name__, s)


def raises_out_of_the_function(x):
    y = x + 1
    if y.shape[0] == 3:
        raise ValueError(f"bad size {y.shape[0]}")
    return y


def returns_a_new_exception(x):
    return x * 2, ValueError("made", 1)


def returns_a_caught_exception(x):
    try:
        raise KeyError("k")
    except KeyError as e:
        return x, e


def raises_while_handling(x):
    try:
        raise KeyError("first")
    except KeyError:
        raise ValueError("second")


def test_exceptions_that_leave_the_function_are_cpythons_own():
    # Uncaught: CPython raises its own (type, message, traceback, __context__); the work before
    # the raise is compiled. Returned: a new exception each call (made again from its
    # arguments); a caught one would need CPython's traceback, so that frame runs in CPython.
    for backend in ("eager", "cpu"):
        for fn in (raises_out_of_the_function, returns_a_new_exception, returns_a_caught_exception,
                   raises_while_handling):
            dt.reset()
            run_differential(fn, jitted_copy(fn, backend=backend), lambda i: Call(rand_tensor((3,))), 2,
                             seed_base=8, exact=True)
        dt.reset()
        f = jitted_copy(returns_a_new_exception, backend=backend)
        first, second = f(rand_tensor((3,)))[1], f(rand_tensor((3,)))[1]
        assert first is not second and first.args == ("made", 1) and first.__traceback__ is None
        dt.reset()
        e = assert_raises(ValueError, jitted_copy(raises_while_handling, backend=backend), rand_tensor((3,)),
                          match="second")
        assert isinstance(e.__context__, KeyError) and e.__traceback__ is not None
    # fullgraph=True: a raise that leaves the function is CPython's, not a capture failure.
    dt.reset()
    assert_raises(ValueError, jitted_copy(raises_out_of_the_function, fullgraph=True), rand_tensor((3,)),
                  match="bad size 3")


def lookups_with_fallbacks(x, table):
    # The idioms `try: d[k] except KeyError:`, an index past the end, a division by zero: the
    # error CPython's operation raises, caught by the function's own handler.
    out = []
    for key in ("w", "missing"):
        try:
            out.append(table[key] * x)
        except KeyError as e:
            out.append(f"no {e}")
    for i in (0, 5):
        try:
            out.append((1, 2)[i])
        except IndexError as e:
            out.append(str(e))
    try:
        out.append(10 // 0)
    except ZeroDivisionError as e:
        out.append(repr(e))
    return out


def chained_and_contexted(x):
    try:
        try:
            {}["missing"]
        except KeyError as e:
            raise ValueError("lookup failed") from e
    except ValueError as e:
        chained = (str(e), type(e.__cause__).__name__, e.__cause__.args, e.__suppress_context__)
    try:
        try:
            raise KeyError("first")
        except KeyError:
            raise IndexError("second")
    except IndexError as e:
        contexted = (repr(e.__context__), e.__cause__)
    return x * 2, chained, contexted


def test_errors_operations_raise_are_caught_in_the_trace_too():
    for fn, factory in ((lookups_with_fallbacks, lambda i: Call(rand_tensor((3,)), {"w": rand_tensor((3,))})),
                        (chained_and_contexted, lambda i: Call(rand_tensor((3,))))):
        for backend in ("eager", "cpu"):
            dt.reset()
            run_differential(fn, jitted_copy(fn, backend=backend, fullgraph=True), factory, 2, seed_base=9,
                             exact=True)
            assert stats()["graph_breaks"] == 0 and stats()["fallbacks"] == 0, (fn.__name__, stats())


def break_inside_a_handler(x, log):
    y = x * 2
    try:
        z = {}["missing"]
    except KeyError:
        log.append("caught")
        print("inside the handler")  # I/O: a break the frame cannot resume from inside a handler
        z = y + 1
    return z


def test_a_break_inside_a_handler_breaks_where_the_exception_was_raised():
    # CPython cannot resume inside a handler the trace entered: the segment ends at the raising
    # instruction, and CPython raises there and runs the handler, once (the list shows one entry).
    for backend in ("eager", "cpu"):
        dt.reset()
        run_differential(break_inside_a_handler, jitted_copy(break_inside_a_handler, backend=backend),
                         lambda i: Call(rand_tensor((3,)), []), 2, seed_base=10, exact=True)
        s = stats()
        assert s["graphs"] >= 1 and s["fallbacks"] == 0, s


def cause_made_before_the_raise(x):
    # CPython's test_raise.test_instance_cause: the cause is one object on the stack and in a
    # local when the segment hands the raise to CPython.
    cause = KeyError()
    try:
        raise IndexError from cause
    except IndexError as e:
        return x, e.__cause__ is cause, cause


def test_an_exception_made_in_the_trace_is_one_object_wherever_it_is_held():
    for backend in ("eager", "cpu"):
        dt.reset()
        run_differential(cause_made_before_the_raise, jitted_copy(cause_made_before_the_raise, backend=backend),
                         lambda i: Call(rand_tensor((3,))), 2, seed_base=11, exact=True)
