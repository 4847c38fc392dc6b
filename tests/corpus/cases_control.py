"""Corpus cases: control flow. try/except/finally inside loops, exceptions raised from traced
code (compared by type and message), `match` (class, mapping, sequence patterns, guards), loops
with break/continue/else, and branches on tensor values."""
import dataclasses

import dyntrace as dt
from corpus import Call, I, P, T, case, n_of


# ---------------------------------------------------------------------------------------------
# try / except / finally in loops.

@case(lambda i: Call(T(n_of(i))))
def try_except_in_loop(x):
    results = []
    for k in range(-2, 3):
        try:
            results.append(x * (10 // k))
        except ZeroDivisionError:
            results.append(x * 0)
    return dt.stack(results)


@case(lambda i: Call(T(3)))
def try_finally_counts_in_loop(x):
    attempts = 0
    for k in range(4):
        try:
            if k == 2:
                continue
            x = x + k
        finally:
            attempts += 1
    return x, attempts


@case(lambda i: Call(T(3)))
def try_else_finally_order(x):
    log = []
    for k in range(3):
        try:
            y = x * k
            if k == 1:
                raise ValueError(k)
        except ValueError as e:
            log.append(f"except {e}")
        else:
            log.append("else")
        finally:
            log.append("finally")
    return y, log


@case(lambda i: Call(T(4)))
def retry_until_success(x):
    def flaky(t, attempt):
        if attempt < 2:
            raise RuntimeError(f"attempt {attempt} failed")
        return t * 2
    errors = []
    for attempt in range(5):
        try:
            out = flaky(x, attempt)
            break
        except RuntimeError as e:
            errors.append(str(e))
    return out, errors


@case(lambda i: Call(T(3)))
def exception_chaining(x):
    try:
        try:
            {}["missing"]
        except KeyError as e:
            raise ValueError("lookup failed") from e
    except ValueError as e:
        return x * 2, str(e), type(e.__cause__).__name__, e.__cause__.args


@case(lambda i: Call(T(3)))
def finally_overrides_return(x):
    def f(t):
        try:
            return t * 2
        finally:
            t.add_(1)
    y = f(x)
    return y, x


@case(lambda i: Call(T(3)))
def except_tuple_and_reraise(x):
    caught = []
    for bad in ([], {}, None):
        try:
            try:
                bad[0]
            except (IndexError, KeyError) as e:
                caught.append(type(e).__name__)
                raise
        except Exception as e:  # noqa: BLE001 - the point
            caught.append("outer " + type(e).__name__)
    return x * len(caught), caught


@case(lambda i: Call(T(3)))
def custom_exception_class(x):
    class ShapeMismatch(Exception):
        def __init__(self, a, b):
            super().__init__(f"{a} vs {b}")
            self.a, self.b = a, b
    try:
        raise ShapeMismatch(tuple(x.shape), (4,))
    except ShapeMismatch as e:
        return x, str(e), e.a, e.b


@case(lambda i: Call(T(3), T(4)),
      must_break="raises by design: x + y raises dyntrace's ShapeError (caught)")
def dyntrace_shape_error_caught(x, y):
    try:
        z = x + y
    except dt.ShapeError as e:
        z = x * 0
        msg = str(e), isinstance(e, ValueError), isinstance(e, RuntimeError)
    return z, msg


@case(lambda i: Call(T(3), T(4)),
      must_break="raises by design: x + y raises dyntrace's ShapeError")
def dyntrace_shape_error_raised(x, y):
    z = x * 2
    return z + y


@case(lambda i: Call(T(2, 3)),
      must_break="raises by design: x[5] raises IndexError")
def index_error_from_tensor(x):
    return x[5]


@case(lambda i: Call(T(3)),
      must_break="raises by design: int('not a number') raises ValueError")
def value_error_from_python(x):
    n = int("12")
    return x * n, int("not a number")


@case(lambda i: Call(T(3)),
      must_break="raises by design: the assert fails (AssertionError escapes)")
def assert_statement_fails(x):
    y = x * 2
    assert y.shape == (4,), f"bad shape {y.shape}"
    return y


@case(lambda i: Call(T(3)),
      must_break="raises by design: TypeError escapes")
def raise_type_error_with_message(x):
    if x.dtype != dt.float64:
        raise TypeError(f"expected float64, got {x.dtype}")
    return x


@case(lambda i: Call(T(3)),
      must_break="raises by design: RuntimeError escapes")
def exception_group_like_collection(x):
    errors = []
    for name in ("a", "b", "c"):
        try:
            if name != "b":
                raise LookupError(name)
        except LookupError as e:
            errors.append(e.args[0])
    if errors:
        raise RuntimeError("failed: " + ",".join(errors))
    return x


@case(lambda i: Call(T(4)))
def stop_iteration_by_hand(x):
    it = iter([1, 2])
    out = []
    while True:
        try:
            out.append(x * next(it))
        except StopIteration:
            break
    return out


# ---------------------------------------------------------------------------------------------
# match.

@dataclasses.dataclass
class Conv:
    kernel: int
    stride: int = 1


@dataclasses.dataclass
class Pool:
    size: int


def apply_layer(x, layer):
    match layer:
        case Conv(kernel=1):
            return x * 1.0
        case Conv(kernel=k, stride=s) if s > 1:
            return x[::s] * k
        case Conv(kernel=k):
            return x * k
        case Pool(size=n):
            return x.reshape(-1, n).amax(1)
        case _:
            raise ValueError(f"unknown layer {layer!r}")


@case(lambda i: Call(T(12)))
def match_class_patterns(x):
    layers = [Conv(1), Conv(3, 2), Conv(2), Pool(2)]
    return [apply_layer(x, layer) for layer in layers]


@case(lambda i: Call(T(4)),
      must_break="raises by design: no case matches: ValueError escapes")
def match_class_no_case_raises(x):
    return apply_layer(x, "relu")


def run_command(x, cmd):
    match cmd:
        case {"op": "scale", "by": float(v) | int(v)}:
            return x * v
        case {"op": "clip", "lo": lo, **rest}:
            return dt.clamp(x, lo, rest.get("hi", 1.0))
        case {"op": str(name)}:
            return f"unknown op {name}"
        case _:
            return None


@case(lambda i: Call(T(n_of(i))))
def match_mapping_patterns(x):
    cmds = [{"op": "scale", "by": 2}, {"op": "clip", "lo": -0.5}, {"op": "clip", "lo": 0.0, "hi": 0.5},
            {"op": "gelu"}, {"cmd": 1}, {"op": "scale", "by": "x"}]
    return [run_command(x, c) for c in cmds]


def shape_kind(shape):
    match shape:
        case ():
            return "scalar"
        case (n,):
            return f"vector[{n}]"
        case (1, *rest):
            return f"batch1 {rest}"
        case (r, c) if r == c:
            return f"square {r}"
        case (r, c):
            return f"matrix {r}x{c}"
        case [_, _, *more]:
            return f"rank {2 + len(more)}"


@case(lambda i: Call([T(), T(3), T(1, 4, 2), T(3, 3), T(2, 5), T(2, 2, 2, 2)]))
def match_sequence_patterns(xs):
    return [shape_kind(tuple(t.shape)) for t in xs], [shape_kind(t.shape) for t in xs[:2]]


@case(lambda i: Call(T(3), ["relu", 2, 0.5, ("pow", 2), None, True]))
def match_literals_and_types(x, steps):
    for step in steps:
        match step:
            case "relu":
                x = dt.relu(x)
            case True:
                x = x + 100
            case int(k):
                x = x + k
            case float(f):
                x = x * f
            case ("pow", p):
                x = x ** p
            case None:
                x = x - 1
    return x


@case(lambda i: Call(T(4)))
def match_or_and_as_patterns(x):
    out = []
    for v in (0, 1, 2, 3, "a", [1, 2]):
        match v:
            case 0 | 1 as small:
                out.append(("small", small))
            case int() as n if n % 2 == 0:
                out.append(("even", n))
            case str() | list() as other:
                out.append(("other", repr(other)))
            case _:
                out.append(("rest", v))
    return x * len(out), out


@case(lambda i: Call(T(3)))
def match_on_tensor_attributes(x):
    match (x.dtype, x.ndim):
        case (dt.float32, 1):
            return x * 2, "f32 vector"
        case (dt.float64, _):
            return x, "f64"
        case _:
            return x, "other"


# ---------------------------------------------------------------------------------------------
# Loops: break/continue/else, while, and branches on tensor values.

@case(lambda i: Call(T(n_of(i))),
      must_break="tensor values as Python values: .tolist() decides the loop")
def for_else_search(x):
    vals = x.tolist()
    for k, v in enumerate(vals):
        if v > 1.5:
            found = k
            break
    else:
        found = -1
    return x * found, found


@case(lambda i: Call(P(4)),
      must_break="tensor values as Python values: the truth of x.amax() > 0.1 ends the loop")
def while_on_tensor_condition(x):
    steps = 0
    while x.amax() > 0.1:
        x = x * 0.5
        steps += 1
    return x, steps


@case(lambda i: Call(T(5)),
      must_break="tensor values as Python values: .item() decides a branch")
def branch_on_item(x):
    s = x.sum().item()
    if s > 0:
        label = "pos"
        y = x - s
    else:
        label = "neg"
        y = x + s
    return y, label, round(s, 3)


@case(lambda i: Call(T(4, 3)),
      must_break="tensor values as Python values: the truth of row.sum() < 0")
def loop_over_tensor_rows_with_continue(x):
    total = dt.zeros(3)
    skipped = 0
    for row in x:
        if row.sum() < 0:
            skipped += 1
            continue
        total = total + row
    return total, skipped


@case(lambda i: Call(T(4)))
def nested_loops_with_early_return(x):
    for a in range(3):
        for b in range(3):
            if a * b == 2:
                return x * (a + b), (a, b)
            x = x + 0.1
    return x, None


@case(lambda i: Call(T(3)))
def ternary_chains_and_boolean_ops(x):
    n = x.shape[0]
    kind = "one" if n == 1 else "few" if n < 5 else "many"
    flag = (n > 2 and "big") or "small"
    empty = [] or None
    return x * (n if kind == "few" else 0), kind, flag, empty, not n, n and 7


@case(lambda i: Call(T(6)))
def in_place_updates_on_input(x):
    x[0] = 5.0
    x[1:3] += 1.0
    x.mul_(2)
    return x.sum()


@case(lambda i: Call([T(3), T(3)], {"k": T(3)}))
def mutate_list_and_dict_arguments(xs, d):
    xs.append(xs[0] + xs[1])
    xs[0] = xs[0] * 0
    d["new"] = d["k"] * 2
    del d["k"]
    return len(xs), sorted(d)


@case(lambda i: Call(T(3)),
      must_break="does I/O: print()")
def print_tensor_and_objects(x):
    print(x * 2)
    print([1, "a", None], {"k": 1.5}, (x.shape,))
    print(f"{x.sum().item():.2f}", end="|")
    print()
    return x
