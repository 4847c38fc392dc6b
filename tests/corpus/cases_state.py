"""Corpus cases: state the tracer must carry exactly. Aliasing and identity of containers and
objects, Python numbers carried across graph breaks (`.item()`, loop counters), mutation seen
through aliases, deleted locals, chained comparisons and builtins with keys and defaults."""
import math

import dyntrace as dt
from corpus import Call, I, P, T, case, n_of


@case(lambda i: Call(T(3)))
def aliased_lists_mutated(x):
    a = b = []
    a.append(x)
    b.append(x * 2)
    d = {"list": a}
    a.append(x * 3)
    return len(d["list"]), a is b, sum(b)


@case(lambda i: Call(T(3)))
def aliased_object_attribute(x):
    class Box:
        pass
    p = Box()
    q = p
    p.value = x
    q.value = q.value * 2
    holders = [p, q]
    holders[0].value = holders[1].value + 1
    return p.value, p is q, vars(q)


@case(lambda i: Call(T(3), T(3)))
def identity_tests(x, y):
    z = x
    items = [x, y]
    return x is z, x is y, items[0] is x, x is not None, [t is y for t in items], x * 2 is x


@case(lambda i: Call(T(n_of(i))),
      must_break="tensor values as Python values: .item() decides a branch")
def item_sum_carried_across_breaks(x):
    total = 0.0
    for k in range(x.shape[0]):
        total += x[k].item() * 1.5
        if total > 1.0:
            total -= 0.25
    return x * total, total, round(total, 4)


@case(lambda i: Call(T(4)),
      must_break="does I/O: print()")
def counter_across_print_breaks(x):
    n = 0
    acc = 1
    while n < 5:
        print("iteration", n)
        acc = acc * 3 + n
        n += 1
    return x * n, acc, 2 ** acc % 1000


@case(lambda i: Call(T(3)),
      must_break="tensor values as Python values: .item()")
def float_number_program(x):
    lr = 0.1
    for step in range(4):
        g = x.abs().mean().item()
        lr = max(lr * 0.5, 1e-3) + abs(g) / 100
        x = x - lr * x
    return x, lr, math.floor(lr * 1e6)


@case(lambda i: Call(T(3)),
      must_break="tensor values as Python values: .item(); and print()")
def list_mutation_across_break(x):
    history = []
    for k in range(3):
        history.append(x.sum().item())
        print(len(history))
        x = x + 1
    history.sort()
    return x, history


@case(lambda i: Call(T(3)),
      must_break="tensor values as Python values: .item(); and print()")
def dict_mutation_across_break(x):
    seen = {}
    for k in range(3):
        seen[f"step{k}"] = round(x.sum().item(), 3)
        if k == 1:
            print("mid", sorted(seen))
        x = x * 2
    return x, seen


@case(lambda i: Call(T(3)),
      must_break="raises by design: reading a deleted local raises UnboundLocalError")
def deleted_local_raises(x):
    y = x * 2
    del y
    return y  # noqa: F821


@case(lambda i: Call(T(3)),
      must_break="raises by design: UnboundLocalError escapes")
def unbound_local_in_branch(x):
    if x.shape[0] > 10:
        big = x * 2
    return big


@case(lambda i: Call(T(n_of(i))))
def chained_comparisons(x):
    n = x.shape[0]
    return x * (0 < n < 5), 1 < n <= 3, n == 3 == len(x), 2 < n > 4, "a" < "b" < "c"


@case(lambda i: Call([T(3) * k for k in (3, 1, 2)]),
      must_break="tensor values as Python values: max's key calls .item()")
def min_max_with_key_and_default(xs):
    biggest = max(xs, key=lambda t: t.abs().sum().item())
    smallest_len = min(["aa", "b", "ccc"], key=len)
    empty = max([], default=-1)
    return biggest, smallest_len, empty, min(4, 2, 8), max("hello")


@case(lambda i: Call(T(4)))
def sum_with_start_and_bools(x):
    flags = [True, False, True, True]
    return x * sum(flags), sum([0.5, 0.25], 10), sum([[1], [2]], []), True + True, -True


@case(lambda i: Call(T(3)))
def isinstance_and_type_checks(x):
    vals = [x, 1, 1.5, "s", None, True, [x], (x,)]
    kinds = []
    for v in vals:
        if isinstance(v, dt.Tensor):
            kinds.append("tensor")
        elif isinstance(v, bool):
            kinds.append("bool")
        elif isinstance(v, (int, float)):
            kinds.append(type(v).__name__)
        elif type(v) is list:
            kinds.append("list")
        else:
            kinds.append(repr(type(v)))
    return x * len(kinds), kinds


@case(lambda i: Call(T(8)))
def slice_objects_in_variables(x):
    head = slice(0, 3)
    odd = slice(1, None, 2)
    s = "abcdefgh"
    return x[head], x[odd], s[head], s[odd], head.indices(10), [1, 2, 3, 4][odd]


@case(lambda i: Call(T(3)),
      must_break="tensor values as Python values: .tolist()")
def negative_zero_and_copysign(x):
    z = -0.0
    return x * z, math.copysign(1.0, z), str(z), z == 0.0, (x * 0.0).tolist()


@case(lambda i: Call(I(3)),
      must_break="raises by design: int64 tensor + 2 ** 70 raises ValueError")
def int64_tensor_with_huge_python_int(x):
    y = x + 5
    return y + 2 ** 70


@case(lambda i: Call(T(3)))
def format_with_attribute_fields(x):
    class Cfg:
        name = "enc"
        dims = (2, 3)
    return "{0.name}:{0.dims[1]}".format(Cfg()), "{n:>{w}}".format(n="ab", w=5), x * 2


@case(lambda i: Call(T(n_of(i))))
def tensor_methods_with_keywords(x):
    y = x.reshape(1, -1)
    return (y.sum(dim=1, keepdim=True), y.transpose(0, 1), y.mean(dim=-1), y.amax(dim=1),
            x.clamp(min=-0.5, max=0.5), x.to(dtype=dt.float64))


@case(lambda i: Call(T(2, 3)))
def tensor_metadata_in_python(x):
    r, c = x.shape
    info = {"numel": x.numel(), "ndim": x.ndim, "dtype": str(x.dtype), "dim0": x.size(0),
            "shape": list(x.shape), "len": len(x)}
    return x.reshape(c, r), info


@case(lambda i: Call(T(3)),
      must_break="tensor values as Python values: .tolist()")
def tolist_then_python_math(x):
    vals = x.tolist()
    vals.append(1.0)
    mean = sum(vals) / len(vals)
    var = sum((v - mean) ** 2 for v in vals) / len(vals)
    return dt.tensor(vals) - mean, round(var, 6), sorted(vals)[0] == min(vals)


@case(lambda i: Call(T(3)),
      must_break="raises by design: reshape raises three calls deep")
def error_three_calls_deep(x):
    def a(t):
        return b(t * 2)

    def b(t):
        return c(t + 1)

    def c(t):
        return t.reshape(2, 2)
    return a(x)


@case(lambda i: Call(T(4)),
      must_break="does I/O: print()")
def nonlocal_changed_after_break(x):
    scale = 1.0

    def bump(t):
        nonlocal scale
        print("bump", scale)
        scale *= 2
        return t * scale
    y = bump(x)
    z = bump(y)
    return z, scale


@case(lambda i: Call(T(4)),
      must_break="does I/O: print() inside the generator")
def generator_with_break_inside(x):
    def steps(t):
        for k in range(3):
            print("yield", k)
            yield t * k
    out = [s for s in steps(x)]
    return sum(out)


@case(lambda i: Call(T(3)))
def dict_reinsert_order(x):
    d = {"a": 1, "b": 2, "c": 3}
    del d["a"]
    d["a"] = 4
    d["b"] = 5
    d.pop("c")
    d.update(c=6)
    return x * sum(d.values()), list(d.items())


@case(lambda i: Call(T(3)))
def string_building_in_loop(x):
    s = ""
    for k in range(5):
        s += chr(ord("a") + k) * (k % 2 + 1)
        if len(s) > 4:
            s = s.upper()
    return x * len(s), s, s.lower().split("C")


@case(lambda i: Call(T(3)))
def tuple_comparisons_and_sorting(x):
    recs = [(2, "b"), (1, "z"), (2, "a"), (1, "a")]
    recs.sort()
    return x * recs[0][0], recs, (1, 2) < (1, 3), (1, 2, 0) > (1, 2), max(recs)


@case(lambda i: Call(T(5)))
def list_multiply_and_aliasing(x):
    grid = [[0] * 2] * 2
    grid[0][0] = 9
    fresh = [[0] * 2 for _ in range(2)]
    fresh[0][0] = 9
    return x * grid[1][0], grid, fresh


@case(lambda i: Call(T(3), 2))
def int_argument_specialised(x, k):
    out = x
    for _ in range(k):
        out = out * k
    return out, k ** 10, -k // 3


@case(lambda i: Call(T(3), 1.25))
def float_argument_math(x, f):
    return x * f, math.sqrt(f), f.as_integer_ratio(), f.is_integer(), int(f * 4), f"{f:e}"


@case(lambda i: Call(T(4)))
def reversed_enumerate_and_range_math(x):
    r = range(10, 0, -3)
    return x * len(r), list(reversed(r)), r[1], 4 in r, list(enumerate("ab", 5)), r.index(7)


@case(lambda i: Call(T(3)))
def bytes_and_bytearray(x):
    b = b"abc" + bytes([100])
    ba = bytearray(b)
    ba[0] = 65
    return x * len(b), b, bytes(ba), b.hex(), ba.decode()


@case(lambda i: Call(T(3), T(3)))
def in_place_operator_on_alias(x, y):
    z = x
    z += y
    w = y * 1
    w += 1
    return x is z, z, w, y
