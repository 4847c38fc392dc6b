"""Corpus cases (issue 23): everyday constructs the tracer follows without a graph break since
issue 23 (names of classes and functions, setattr/getattr/hasattr, next/iter, properties,
list.index/count, unbound methods of builtin types, `is`, repr of objects, sorted tuples), each
where a value the trace decided from changes between calls: a class or function renamed, an
attribute added to a class, two arguments that are one object, a property replaced."""
import collections
import itertools

import dyntrace as dt
from corpus import Call, T, case

VARY = 3  # calls per case: the first traces, the others change what it decided from


class Named:
    pass


def renamed_class(i):
    Named.__name__ = ("Named", "Renamed", "Renamed")[i]
    Named.__qualname__ = ("Named", "Named", "Outer.Named")[i]
    return Call(T(3), Named)


@case(renamed_class, calls=VARY)
def class_renamed_between_calls(x, cls):
    return (x * len(cls.__name__), cls.__name__, cls.__qualname__, type(x).__name__, int.__name__,
            type(cls()).__name__)


def helper(t):
    return t * 2


def renamed_function(i):
    helper.__name__ = ("helper", "renamed", "renamed")[i]
    helper.__qualname__ = ("helper", "helper", "X.helper")[i]
    return Call(T(3), helper)


@case(renamed_function, calls=VARY)
def function_renamed_between_calls(x, fn):
    def inner(t):
        return t + 1
    return fn(x), fn.__name__, fn.__qualname__, (lambda t: t).__name__, inner.__qualname__


class Holder:
    pass


def holder_gaining_attributes(i):
    if i == 1:
        Holder.extra = 5
    elif hasattr(Holder, "extra"):
        del Holder.extra
    h = Holder()
    if i == 2:
        h.mine = 1.5
    return Call(T(3), h)


@case(holder_gaining_attributes, calls=VARY)
def hasattr_when_a_class_gains_an_attribute(x, h):
    return (x * getattr(h, "mine", 1.0), hasattr(h, "extra"), getattr(h, "extra", -1),
            hasattr(h, "mine"), hasattr(Holder(), "mine"))


@case(lambda i: Call(T(3), Holder()))
def setattr_on_made_and_caller_objects(x, h):
    b = Holder()
    setattr(b, "w", x * 2)
    setattr(b, "w", b.w + 1)
    setattr(h, "seen", 3)
    h.seen = getattr(h, "seen") + 1
    return getattr(b, "w"), hasattr(b, "w"), b.w is getattr(b, "w"), h.seen


def alias_or_not(i):
    t = T(3)
    return Call(t, t) if i == 1 else Call(t, T(3))


@case(alias_or_not, calls=VARY)
def is_between_tensor_arguments(x, y):
    z = x * 2
    return (x is y, z is x, z is z, x.float() is x, (x + 1) is (x + 1), [t is y for t in (x, y)],
            x.add_(1) is x, z)


class Node:
    pass


def nodes(i):
    a = Node()
    return Call(T(3), a, a if i == 1 else Node())


@case(nodes, calls=VARY)
def is_between_objects_and_containers(x, a, b):
    c = Node()
    d = {}
    xs = [x]
    pair = (1, 2)
    return (x * 2, a is b, c is a, c is c, [] is [], a is not True, xs is [x], d is d,
            pair is True, x is False)


class Celsius:
    def __init__(self, c):
        self._c = c

    @property
    def fahrenheit(self):
        return self._c * 1.8 + 32

    @fahrenheit.setter
    def fahrenheit(self, f):
        self._c = (f - 32) / 1.8


def kelvin_v1(self):
    return self._c + 273.15


def kelvin_v2(self):
    return self._c + 273.0


def celsius(i):
    Celsius.kelvin = property(kelvin_v2 if i == 1 else kelvin_v1)
    return Call(T(3), Celsius(T(3)))


@case(celsius, calls=VARY)
def properties_replaced_between_calls(x, c):
    made = Celsius(x)
    f = made.fahrenheit
    made.fahrenheit = f + 18
    c.fahrenheit = 50.0
    return f, made._c, made.kelvin, c.kelvin, c._c


@case(lambda i: Call(T(3)))
def next_and_iter_builtins(x):
    it = iter((1, 2, 3))
    first = next(it)
    rest = list(it)
    gen = (x * k for k in range(3))
    g0 = next(gen)
    d = {"a": 1, "b": 2}
    keys = iter(d.keys())
    items = d.items()
    return (x * first, rest, g0, list(gen), next(keys), next(it, "done"), next(iter(()), None),
            next(keys), next(keys, 0), next(iter(items)), next(iter(items)), next(zip(rest, "ab")))


@case(lambda i: Call(T(3)))
def builtin_methods_as_values(x):
    names = ["b", "A", "c"]
    counts = dict.fromkeys(names, 0)
    counts["A"] += 1
    return (x * len(counts), sorted(names, key=str.lower), list(map(str.upper, names)), counts,
            dict.fromkeys(("p", "q")), names.index("c"), (1, 2, 1).count(1), [0, 1, 0].count(0),
            len.__name__, str.lower.__qualname__, dt.Tensor.__name__)


class Point:
    def __init__(self, x, y):
        self.x, self.y = x, y

    def __repr__(self):
        return f"{type(self).__name__}({self.x}, {self.y})"


class Labelled(Point):
    def __str__(self):
        return "label " + repr(self)


@case(lambda i: Call(T(3)))
def repr_and_str_of_objects(x):
    p, q = Point(1, 2), Labelled(3, 4)
    return x * 2, repr(p), str(p), repr(q), str(q), f"{q!r}|{q}|{p!s}"


@case(lambda i: Call(T(3)))
def sorted_tuples_with_tensor_payloads(x):
    table = {"scale": lambda t: t * 2, "add": lambda t: t + 1, "neg": lambda t: -t}
    pairs = sorted([("b", x), ("a", x * 2), ("c", x + 1)])
    return [f(x) for _, f in sorted(table.items())], [k for k, _ in pairs], pairs[0][1]


@case(lambda i: Call(T(3)))
def iterators_used_up_by_list_and_tuple(x):
    r = reversed([1, 2])
    z = zip("ab", (x, x * 2))
    view = {"k": 1, "j": 2}.keys()
    return list(r), list(r), tuple(z), list(z), list(view), sorted(view), list(view), x


class Registry:
    total = 0
    scale = 1.0

    def __init__(self):
        Registry.total += 1
        self.id = Registry.total


class SubRegistry(Registry):
    pass


@case(lambda i: Call(T(3), Registry.__new__(Registry)), calls=VARY)
def class_attribute_stores_seen_by_instances_and_subclasses(x, r):
    Registry.total = 10
    a, b = Registry(), SubRegistry()
    SubRegistry.scale = 3.0
    r.scale = 0.5  # the instance's own attribute shadows the class's
    type(a).scale = 2.0
    b.total = -1  # an instance attribute over a class attribute the trace stored
    return (x * a.scale, b.id, b.scale, a.scale, r.scale, Registry.total, SubRegistry.total, a.id,
            b.total, a.total)


Span = collections.namedtuple("Span", "lo hi")


@case(lambda i: Call(T(3), T(3)))
def namedtuples_made_changed_and_returned(x, y):
    s = Span(x, hi=y)
    t = s._replace(hi=y * 2)
    lo, hi = t
    return (s, t, lo + hi, s.lo is x, len(t), type(t) is Span, isinstance(t, tuple), tuple(t), s[1],
            t._asdict(), Span._fields, s + (1,), x.max(0), x.max(0).values)


@case(lambda i: Call(T(3)))
def bytes_of_constants(x):
    b = b"ab" + bytes([99, 100]) + bytes(range(101, 103)) + bytes("é", "utf-8")
    return x * len(b), b, bytes(2), b.hex(), bytes((1, 2)) == b"\x01\x02"


def keyed_dicts(i):
    # Int keys that collide in a set's table (multiples of 8), so the result's order is the
    # table's; the caller's dict has str keys (the guards read them).
    ka = ((8, 16, 24, 32, 1), (64, 8, 128, 40, 3, 5, 72), (0, 8))[i]
    kb = ((16, 0, 8, 48), (8, 128, 3, 256, 9), (8,))[i]
    names = {k: None for k in (("x", "y"), ("y", "z", "w", "v", "u", "t"), ("q",))[i]}
    return Call(T(3), ka, kb, names)


@case(keyed_dicts, calls=VARY)
def dict_key_views_with_changing_keys(x, ka, kb, names):
    a, b = dict.fromkeys(ka), dict.fromkeys(kb)
    both, either, only_a = a.keys() & b.keys(), a.keys() | b.keys(), a.keys() - b.keys()
    without = a.keys() - {16, 3}
    local = {24: 1, 8: 2, 0: 3}.keys() - a.keys()
    both.add(40)
    either.discard(8)
    words = names.keys() | {"y": 1, "s": 2}.keys()
    return (x * len(both), list(both), list(either), list(only_a), list(without), list(local),
            sorted(b.keys() & a.keys()), list(words), list(names.keys() - {"y"}))


@case(alias_or_not, calls=VARY)
def tensors_as_keys_of_a_local_dict(x, y):
    z = x + 1
    d = {x: "x", z: "z"}
    d[y] = "y"  # the same key as x when y is x
    names = [d[t] for t in (x, y, z)]
    order = [k is x for k in d]
    return (names, order, len(d), y in d, (x * 1) in d, d.get(z * 1, "none"), list(d.values()),
            [k * 2 for k in d])


def delegated_tuples(i):
    return Call(T(3), ((1, 2), (5, 6), (0, 3))[i])


@case(delegated_tuples, calls=VARY)
def yield_from_generators_lists_and_their_return_values(x, extra):
    def inner(t, n):
        for k in range(n):
            yield t * k
        return n * 10

    def outer(t):
        got = yield from inner(t, t.shape[0])
        yield got
        yield from extra
        yield from (t + k for k in extra)
        got = yield from inner(t, 0)
        yield got
        yield from {"a": 1, "b": 2}.keys()
        yield from itertools.pairwise(extra + (7,))
    return list(outer(x)), [v for v in outer(x * 2) if not isinstance(v, dt.Tensor)]


@case(lambda i: Call(T(3), (1.0, 2.5, -1.0)[i]), calls=VARY)
def class_statement_with_constant_attributes(x, scale):
    class Box:
        kind = "box"
        dims = (2, 3)
    p = Box()
    q = p
    p.value = x * scale
    q.value = q.value + Box.dims[1]
    other = Box()
    other.value = x
    return (p.value, p is q, other.value, p.kind, type(p).__name__, type(p).__qualname__,
            isinstance(q, Box), type(other) is Box, Box.dims, hasattr(p, "missing"))
