"""Ordinary Python structure inside compiled code (issues 18 and 23): super() in inlined methods
and in objects made by the trace, class-attribute constants, sets, functools.partial, `import`
and `global` inside functions, and `match`. Each function runs plain (an unmarked copy) and under
`dt.jit` on the eager and cpu backends on equal inputs (jitlib.run_differential)."""
import dyntrace as dt
from jitlib import Call, check_compiled, jitted_copy, stats
from testlib import rand_tensor

BACKENDS = ("eager", "cpu")


def T(n=3):
    return rand_tensor((n,), dt.float32, -2.0, 2.0)


def check(fn, factory, whole=True, calls=3):
    return check_compiled(fn, factory, whole=whole, calls=calls, seed_base=23)


# ---------------------------------------------------------------------------------------------
# super() and class attributes.

class Layer:
    scale = 2.0

    def __init__(self, k):
        self.k = k

    def forward(self, x):
        return x * self.k

    @classmethod
    def make(cls, k):
        return k + 1

    @staticmethod
    def shift(x):
        return x - 1


class Residual(Layer):
    offset = 1

    def __init__(self, k, j):
        super().__init__(k)
        self.j = j

    def forward(self, x):
        y = super().forward(x) + super(Residual, self).forward(x) * self.scale
        return Layer.shift(y) + self.offset + super().make(self.j) + super().shift(self.j)


class Plain:
    def __init__(self):
        super().__init__()
        self.v = 1


class Diamond(Residual, Plain):
    def forward(self, x):
        return super().forward(x) * 2


def super_in_objects_made_inside(x):
    r = Residual(2, 3)
    p = Plain()
    return r.forward(x) + p.v + Residual.offset, r


def super_in_argument_objects(x, m):
    return m.forward(x), m.scale, type(m).offset


def test_super_and_class_constants_compile_whole():
    check(super_in_objects_made_inside, lambda i: Call(T()))
    check(super_in_argument_objects, lambda i: Call(T(), Residual(i, 2)))
    check(super_in_argument_objects, lambda i: Call(T(), Diamond(1, i)))


def test_class_constants_are_guarded():
    dt.reset()
    jfn = jitted_copy(super_in_argument_objects)
    m = Residual(1, 2)
    x = T()
    first = jfn(x, m)[0].tolist()
    m.scale = 10.0  # the instance now shadows the class attribute
    assert jfn(x, m)[0].tolist() == super_in_argument_objects(x, m)[0].tolist() != first
    Residual.offset = 5
    try:
        assert jfn(x, m)[0].tolist() == super_in_argument_objects(x, m)[0].tolist()
    finally:
        Residual.offset = 1


def super_without_the_attribute(x, m):
    return super(Residual, m).missing(x)


def test_super_errors_are_cpythons():
    check(super_without_the_attribute, lambda i: Call(T(), Residual(1, 2)), whole=False)


# ---------------------------------------------------------------------------------------------
# Sets: made in the trace, their order CPython's (replayed from their history).

def set_building_and_order(x, n):
    s = {3, 1, 2}
    s.add(9)
    s.add(17)
    s.discard(1)
    s.add(25)  # may reuse the slot the discard left: the order depends on the history
    t = set()
    for k in s:
        t.add(k * 2)
    u = {k for k in range(n)} | {100, 3}
    w = u & s
    names = {"alpha", "b", "c"} | set("xyz")
    y = x * len(s)
    if 3 in s and 4 not in s and "b" in names:
        y = y + 1
    return y, list(s), list(t), list(u), list(w - {2}), sorted(s), list(names), s, t, names


def set_returned_then_extended(n):
    s = {1, 9, 17}
    s.discard(1)
    s |= {33}
    s.update([n, n + 8])
    return s, s.copy(), s.union([41]), frozenset(s), s.pop(), {*s, 57}


def set_methods_and_comparisons(x):
    s = set([4, 5, 6])
    s.remove(5)
    return (x + len(s), s <= {4, 5, 6}, s == {6, 4}, s.isdisjoint([1, 2]), s.issubset(range(10)),
            frozenset({4, 6}) | s, sum(s), max(s), any(s), 6 in frozenset({6, 7}))


def test_sets_compile_whole_in_cpythons_order():
    check(set_building_and_order, lambda i: Call(T(), 5 + i))
    check(set_returned_then_extended, lambda i: Call(i))
    check(set_methods_and_comparisons, lambda i: Call(T()))
    dt.reset()
    jfn = jitted_copy(set_returned_then_extended)
    for n in range(3):
        a, b = jfn(n)[0], set_returned_then_extended(n)[0]
        for k in (2, 10, 18, 26):  # the caller's later adds land where CPython's would
            a.add(k)
            b.add(k)
        assert list(a) == list(b), (list(a), list(b))


def set_changed_while_iterated(x):
    s = {1, 2, 3}
    for k in s:
        if k == 2:
            s.add(10)
        x = x + k
    return x


def set_errors(x, k):
    s = {1, 2}
    s.remove(k)
    return x + len(s)


def set_of_tensors(x):
    s = {x, x + 1}
    return len(s)


def unhashable_member(x):
    return [1] in {1, 2}


def test_set_errors_and_breaks_are_cpythons():
    check(set_changed_while_iterated, lambda i: Call(T()), whole=False)
    check(set_errors, lambda i: Call(T(), 1 + i), whole=False)
    s = check(set_of_tensors, lambda i: Call(T()), whole=False)
    assert any("set of tensors" in r for r in s["break_reasons"] + s["fallback_reasons"]), s
    check(unhashable_member, lambda i: Call(T()), whole=False)


# ---------------------------------------------------------------------------------------------
# functools.partial, import and global inside functions.

import dataclasses  # noqa: E402
import functools  # noqa: E402


def scaled_add(x, y, alpha=1.0, beta=2.0):
    return x * alpha + y * beta


ADD3 = functools.partial(scaled_add, beta=3.0)


def partials(x, y, given):
    add = functools.partial(scaled_add, alpha=0.5)
    bound = functools.partial(add, y)  # a partial of a partial: flattened when it leaves
    return (add(x, y), ADD3(x, y), given(x, y, alpha=2.0), bound(x),
            functools.reduce(add, [x, y, x]), bound)


def test_partials_compile_whole():
    check(partials, lambda i: Call(T(), T(), functools.partial(scaled_add, beta=-1.0 - i)))


STEP = 0
LAST = None


def imports_and_globals(x):
    global STEP, LAST
    import math
    import os.path
    from functools import reduce
    STEP = STEP + 1
    LAST = x * 2
    return LAST + STEP + math.pi, os.path.sep, STEP, reduce(lambda a, b: a + b, [1, 2, 3])


def test_imports_and_global_stores_compile_whole():
    global STEP
    for backend in BACKENDS:
        STEP = 0
        dt.reset()
        jfn = jitted_copy(imports_and_globals, backend=backend, fullgraph=True)
        x = T()
        for n in range(1, 4):
            y, sep, step, total = jfn(x)
            assert STEP == n == step and sep == "/" and total == 6, (STEP, n, step)
            assert LAST.tolist() == (x * 2).tolist()
        s = stats()
        assert s["graph_breaks"] == 0 and s["fallbacks"] == 0, s["break_reasons"]


def import_not_yet_imported(x):
    import this_module_does_not_exist  # noqa: F401
    return x


def test_imports_cpython_must_run_are_left_to_it():
    check(import_not_yet_imported, lambda i: Call(T()), whole=False)


# ---------------------------------------------------------------------------------------------
# match statements.

@dataclasses.dataclass
class Conv:
    channels: int
    kernel: int = 3


def match_shapes(x, spec):
    match spec:
        case [a, b, *rest]:
            return x * a + b + len(rest)
        case {"scale": s, **others}:
            return x * s + len(others)
        case int(n) | float(n):
            return x * n
        case "double":
            return x * 2
        case _:
            return x


def match_classes(x, spec):
    match spec:
        case Conv(channels=1, kernel=k):
            return x + k
        case Conv(c, 5):
            return x - c
        case Conv():
            return x * spec.kernel
    return x


def test_match_statements_compile_whole():
    for specs in ([[2, 3, 4, 5], (1.5, 2), {"scale": 3.0, "bias": 1}], [7, 2.5, "double", "other"],
                  [None, {"bias": 2}, [1]]):
        check(match_shapes, lambda i: Call(T(), specs[i]), calls=len(specs))
    check(match_classes, lambda i: Call(T(), [Conv(1, 7), Conv(4, 5), Conv(4, 3), 3][i]), calls=4)


# ---------------------------------------------------------------------------------------------
# dt.finfo, dt.iinfo, dt.is_floating_point, dt.numel.

EPS64 = dt.finfo(dt.float64)


def dtype_facts(x, i):
    fi = dt.finfo(x.dtype)
    y = x.clamp(min=fi.min, max=fi.max) + fi.eps
    return (y * dt.numel(x) + dt.is_floating_point(x) + dt.iinfo(i.dtype).bits + EPS64.eps,
            dt.is_floating_point(i), dt.numel(i), fi.bits, dt.finfo().resolution)


def test_dtype_facts_compile_whole():
    check(dtype_facts, lambda i: Call(rand_tensor((2, 3 + i), dt.float32, -2.0, 2.0),
                                      dt.ones(4 + i, dtype=(dt.int32, dt.int64, dt.int32)[i])))
    assert dt.finfo(dt.float32).eps == 2.0 ** -23 and dt.finfo(dt.float16).max == 65504.0
    assert dt.iinfo(dt.int32).min == -2 ** 31 and dt.iinfo(dt.int64).max == 2 ** 63 - 1
    assert dt.finfo().dtype == dt.float32 and dt.finfo(dt.float64).bits == 64
    for bad in (lambda: dt.finfo(dt.int32), lambda: dt.iinfo(dt.float32), lambda: dt.numel(3),
                lambda: dt.is_floating_point([1.0])):
        try:
            bad()
        except TypeError:
            continue
        raise AssertionError("no TypeError")


def dtype_fact_errors(x):
    return dt.iinfo(x.dtype).max


def test_dtype_fact_errors_are_cpythons():
    check(dtype_fact_errors, lambda i: Call(T()), whole=False)
