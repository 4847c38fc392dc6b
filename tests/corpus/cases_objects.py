"""Corpus cases: objects. Dataclasses and plain classes (attribute reads and stores, methods,
properties, class attributes, inheritance, dunder methods), generators (consumed in the frame and
passed around) and `with` blocks (contextlib and classes)."""
import contextlib
import dataclasses
import itertools
from typing import NamedTuple

import dyntrace as dt
from corpus import Call, P, T, case, n_of


# ---------------------------------------------------------------------------------------------
# Dataclasses.

@dataclasses.dataclass
class LayerConfig:
    width: int
    dropout: float = 0.0
    name: str = "layer"
    tags: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class Point:
    x: float
    y: float

    def norm2(self):
        return self.x * self.x + self.y * self.y


@case(lambda i: Call(T(2, 4), LayerConfig(4, 0.1, "fc")))
def dataclass_config_read(x, cfg):
    y = x[:, :cfg.width] * (1.0 - cfg.dropout)
    return y, f"{cfg.name}:{cfg.width}", cfg


@case(lambda i: Call(T(3)))
def dataclass_built_inside(x):
    cfg = LayerConfig(width=3, name="inner")
    cfg.tags.append("built")
    cfg.dropout = 0.5
    return x * cfg.dropout, cfg, dataclasses.asdict(cfg)


@case(lambda i: Call(T(3), LayerConfig(3)))
def dataclass_argument_mutated(x, cfg):
    cfg.width = cfg.width * 2
    cfg.tags.append("seen")
    return x * cfg.width


@case(lambda i: Call(T(3)),
      must_break="raises by design: FrozenInstanceError escapes")
def frozen_dataclass_assignment_raises(x):
    p = Point(1.0, 2.0)
    y = x * p.norm2()
    p.x = 3.0
    return y


@case(lambda i: Call(T(3)))
def dataclass_equality_and_replace(x):
    a = Point(1.0, 2.0)
    b = dataclasses.replace(a, y=3.0)
    return x * b.y, a == Point(1.0, 2.0), a == b, repr(b), hash(a) == hash(Point(1.0, 2.0))


class Pair(NamedTuple):
    left: dt.Tensor
    right: dt.Tensor


@case(lambda i: Call(T(3), T(3)))
def namedtuple_fields(x, y):
    p = Pair(x, y)
    q = p._replace(right=y * 2)
    left, right = q
    return left + right, p.left is x, len(q), Pair._fields


# ---------------------------------------------------------------------------------------------
# Plain classes: modules as users write them.

class Linear:
    def __init__(self, w, b):
        self.w = w
        self.b = b
        self.calls = 0

    def __call__(self, x):
        self.calls += 1
        return x @ self.w + self.b

    @property
    def out_features(self):
        return self.w.shape[1]


class MLP:
    def __init__(self, layers, act=dt.relu):
        self.layers = layers
        self.act = act

    def forward(self, x):
        for k, layer in enumerate(self.layers):
            x = layer(x)
            if k < len(self.layers) - 1:
                x = self.act(x)
        return x


def make_mlp(i):
    return MLP([Linear(T(4, 8), T(8)), Linear(T(8, 3), T(3))])


@case(lambda i: Call(make_mlp(i), T(2, 4)))
def module_forward_and_counters(model, x):
    y = model.forward(x)
    return y, [layer.calls for layer in model.layers], model.layers[-1].out_features


@case(lambda i: Call(Linear(T(3, 3), T(3)), T(2, 3)))
def attribute_store_on_argument(layer, x):
    layer.last_input = x
    layer.b = layer.b * 0
    return layer(x), layer.calls


class Counter:
    count = 0  # a class attribute shared by all instances

    def __init__(self):
        Counter.count += 1
        self.id = Counter.count


@case(lambda i: Call(T(3)))
def class_attribute_updates(x):
    Counter.count = 0
    a, b = Counter(), Counter()
    return x * b.id, a.id, Counter.count


class Temperature:
    def __init__(self, celsius):
        self._c = celsius

    @property
    def fahrenheit(self):
        return self._c * 9 / 5 + 32

    @fahrenheit.setter
    def fahrenheit(self, value):
        self._c = (value - 32) * 5 / 9


@case(lambda i: Call(T(n_of(i))))
def property_getter_and_setter(x):
    t = Temperature(x)
    f = t.fahrenheit
    t.fahrenheit = f + 18
    return f, t._c


class Base:
    scale = 1.0

    def transform(self, x):
        return x * self.scale

    def __repr__(self):
        return f"{type(self).__name__}(scale={self.scale})"


class Doubler(Base):
    scale = 2.0

    def transform(self, x):
        return super().transform(x) + 1


@case(lambda i: Call(T(3)))
def inheritance_and_super(x):
    objs = [Base(), Doubler()]
    return [o.transform(x) for o in objs], [repr(o) for o in objs], isinstance(objs[1], Base)


class Vec:
    def __init__(self, data):
        self.data = data

    def __add__(self, other):
        return Vec(self.data + other.data)

    def __mul__(self, k):
        return Vec(self.data * k)

    def __len__(self):
        return self.data.shape[0]

    def __getitem__(self, i):
        return self.data[i]

    def __eq__(self, other):
        return isinstance(other, Vec) and bool((self.data == other.data).all())


@case(lambda i: Call(T(4), T(4)),
      must_break="tensor values as Python values: Vec.__eq__ takes bool() of a tensor")
def dunder_methods(x, y):
    a, b = Vec(x), Vec(y)
    c = a + b * 2
    return c.data, len(c), c[1], a == Vec(x), a == 3


class Accum:
    __slots__ = ("total", "n")

    def __init__(self):
        self.total = 0.0
        self.n = 0


@case(lambda i: Call(T(n_of(i))),
      must_break="tensor values as Python values: .tolist()")
def slots_object(x):
    acc = Accum()
    for v in x.tolist():
        acc.total += v
        acc.n += 1
    return x - acc.total / acc.n, acc.n


@case(lambda i: Call(T(3)),
      must_break="raises by design: AttributeError escapes")
def missing_attribute_raises(x):
    layer = Linear(dt.ones(3, 3), dt.zeros(3))
    return layer(x) + layer.bias


@case(lambda i: Call(T(3)))
def getattr_setattr_hasattr(x):
    layer = Linear(dt.ones(3, 3), dt.zeros(3))
    setattr(layer, "scale", 0.5)
    has = hasattr(layer, "scale"), hasattr(layer, "nope")
    return layer(x) * getattr(layer, "scale"), getattr(layer, "nope", "default"), has


class Registry:
    def __init__(self):
        self.items = {}

    def register(self, name):
        def deco(fn):
            self.items[name] = fn
            return fn
        return deco


@case(lambda i: Call(T(3)))
def decorator_registry(x):
    reg = Registry()

    @reg.register("double")
    def double(t):
        return t * 2

    @reg.register("square")
    def square(t):
        return t * t

    return {k: f(x) for k, f in reg.items.items()}


class Shape:
    @staticmethod
    def numel(shape):
        n = 1
        for s in shape:
            n *= s
        return n

    @classmethod
    def describe(cls, t):
        return f"{cls.__name__}{tuple(t.shape)}={cls.numel(t.shape)}"


@case(lambda i: Call(T(2, n_of(i))))
def staticmethod_and_classmethod(x):
    return x.reshape(Shape.numel(x.shape)), Shape.describe(x)


# ---------------------------------------------------------------------------------------------
# Generators.

def batches(x, size):
    for start in range(0, x.shape[0], size):
        yield x[start:start + size]


@case(lambda i: Call(T(7, 2)))
def generator_consumed_in_frame(x):
    sums = [b.sum(0) for b in batches(x, 3)]
    return dt.stack(sums), len(sums)


def running_mean(values):
    total, n = 0.0, 0
    for v in values:
        total = total + v
        n += 1
        yield total / n


@case(lambda i: Call([T(3) for _ in range(4)]))
def generator_chain(xs):
    means = list(running_mean(t * 2 for t in xs))
    return means[-1], len(means)


@case(lambda i: Call(T(5)))
def generator_returned_to_caller(x):
    def scaled(t):
        for k in range(3):
            yield t * k
    return scaled(x)


@case(lambda i: Call(T(3)))
def generator_passed_to_function(x):
    def consume(gen):
        first = next(gen)
        rest = list(gen)
        return first, rest
    return consume(x * k for k in range(4))


@case(lambda i: Call(T(4)))
def generator_send_and_return(x):
    def acc():
        total = yield 0
        while True:
            v = yield total
            if v is None:
                return total
            total = total + v
    g = acc()
    next(g)
    g.send(x)
    g.send(x * 2)
    try:
        g.send(None)
    except StopIteration as stop:
        return stop.value


@case(lambda i: Call(T(3)))
def yield_from_and_itertools(x):
    def inner(t):
        yield t
        yield t + 1

    def outer(t):
        yield from inner(t)
        yield from inner(t * 10)
    out = list(outer(x))
    pairs = list(itertools.pairwise(range(4)))
    return out, pairs, list(itertools.islice(itertools.count(5), 3))


@case(lambda i: Call(T(3)))
def generator_raising_inside(x):
    def gen(t):
        yield t
        raise ValueError(f"bad batch of size {t.shape[0]}")
    out = []
    try:
        for v in gen(x):
            out.append(v * 2)
    except ValueError as e:
        return out, str(e)


@case(lambda i: Call(T(6)),
      must_break="tensor values as Python values: .tolist()")
def zip_enumerate_over_generators(x):
    evens = (k for k in range(10) if k % 2 == 0)
    total = x * 0
    for idx, (k, v) in enumerate(zip(evens, x.tolist())):
        total = total + k * v + idx
    return total


# ---------------------------------------------------------------------------------------------
# with: contextlib and classes.

class Timer:
    def __init__(self, log):
        self.log = log

    def __enter__(self):
        self.log.append("enter")
        return self

    def __exit__(self, exc_type, exc, tb):
        self.log.append("exit:" + (exc_type.__name__ if exc_type else "ok"))
        return False


@case(lambda i: Call(T(4)))
def with_class_context(x):
    log = []
    with Timer(log) as t:
        y = dt.softmax(x, -1)
        log.append(type(t).__name__)
    return y, log


@contextlib.contextmanager
def scaled_mode(state, factor):
    old = state["scale"]
    state["scale"] = factor
    try:
        yield state
    finally:
        state["scale"] = old


@case(lambda i: Call(T(3)))
def with_contextmanager_restores(x):
    state = {"scale": 1.0}
    with scaled_mode(state, 3.0) as s:
        y = x * s["scale"]
    return y, state


@case(lambda i: Call(T(3)))
def with_exception_propagates(x):
    log = []
    try:
        with Timer(log):
            y = x * 2
            raise KeyError("inside")
    except KeyError as e:
        return y, log, repr(e)


class Suppress:
    def __enter__(self):
        return None

    def __exit__(self, exc_type, exc, tb):
        return exc_type is ZeroDivisionError


@case(lambda i: Call(T(3)),
      must_break="raises by design: 1 // 0, [1, 2][5] raise (suppressed by __exit__)")
def with_suppressing_exit(x):
    y = x
    with Suppress():
        y = x * 2
        y = y / (1 // 0)
    with contextlib.suppress(IndexError):
        y = y + [1, 2][5]
    return y


@case(lambda i: Call(T(3)))
def with_nested_and_exitstack(x):
    log = []
    with contextlib.ExitStack() as stack:
        for k in range(3):
            stack.callback(log.append, k)
        with Timer(log), Timer(log):
            y = x + 1
    return y, log


@case(lambda i: Call(T(3)))
def with_inside_loop_with_break(x):
    log = []
    for k in range(5):
        with Timer(log):
            x = x * 1.5
            if k == 2:
                break
    return x, log


@case(lambda i: Call(T(3)))
def with_returns_from_inside(x):
    log = []

    def inner(t):
        with Timer(log):
            return t * 4
    return inner(x), log


@case(lambda i: Call(T(3)),
      must_break="does I/O: print() into redirect_stdout(StringIO)")
def with_redirect_stdout(x):
    import io
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        print("hidden", x.shape)
    print("shown", len(buf.getvalue()))
    return x * 2, buf.getvalue()
