"""Ordinary Python structure inside compiled code (issues 18 and 23): super() in inlined methods
and in objects made by the trace, class-attribute constants, sets, functools.partial, `import`
and `global` inside functions, and `match`. Each function runs plain (an unmarked copy) and under
`dt.jit` on the eager and cpu backends on equal inputs (jitlib.run_differential)."""
import dyntrace as dt
from jitlib import Call, jitted_copy, run_differential, stats
from testlib import rand_tensor

BACKENDS = ("eager", "cpu")


def T(n=3):
    return rand_tensor((n,), dt.float32, -2.0, 2.0)


def check(fn, factory, whole=True, calls=3):
    """fn under jit matches plain Python on each backend; `whole`: with no graph break, also
    with fullgraph=True. Returns the last run's stats."""
    for backend in BACKENDS:
        for fullgraph in ((False, True) if whole else (False,)):
            dt.reset()
            jfn = jitted_copy(fn, backend=backend, fullgraph=fullgraph)
            run_differential(fn, jfn, factory, calls, seed_base=23)
            s = stats()
            if whole:
                assert s["graph_breaks"] == 0 and s["fallbacks"] == 0, (fn.__name__, backend,
                                                                         s["break_reasons"])
    return s


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
