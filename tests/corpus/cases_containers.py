"""Corpus cases: dicts, sets, strings and f-strings, slicing, comprehensions and unpacking
around tensor code."""
import dyntrace as dt
from corpus import Call, I, P, T, case, n_of


# ---------------------------------------------------------------------------------------------
# Dicts.

@case(lambda i: Call(T(n_of(i)), T(n_of(i))))
def dict_of_activations(x, y):
    acts = {"relu": dt.relu, "tanh": dt.tanh, "sigmoid": dt.sigmoid}
    out = {}
    for name, fn in acts.items():
        out[name] = fn(x) * y
    return out


@case(lambda i: Call({"w": T(4, 3), "b": T(3)}, T(2, 4)))
def state_dict_linear(params, x):
    return x @ params["w"] + params["b"]


@case(lambda i: Call(T(n_of(i)), {"lr": 0.1, "momentum": 0.9}))
def merge_configs(x, overrides):
    defaults = {"lr": 1.0, "momentum": 0.0, "decay": 0.5}
    cfg = {**defaults, **overrides}
    return x * cfg["lr"] + cfg["momentum"] - cfg["decay"], cfg


@case(lambda i: Call(T(n_of(i))))
def dict_get_setdefault_pop(x):
    stats = {}
    stats.setdefault("count", 0)
    stats["count"] += 3
    scale = stats.get("scale", 2.0)
    removed = stats.pop("count")
    missing = stats.pop("nothing", None)
    return x * scale + removed, stats, missing


@case(lambda i: Call(T(4, 6)))
def dict_comprehension_of_reductions(x):
    reducers = {"sum": x.sum(1), "mean": x.mean(1), "max": x.amax(1)}
    return {k: v * 2 for k, v in reducers.items() if k != "mean"}


@case(lambda i: Call(T(n_of(i))))
def dict_keys_int_bool_float(x):
    d = {1: "one", True: "true", 1.0: "float"}
    d[2] = x * 2
    return len(d), d[1], [repr(k) for k in d], d[2]


@case(lambda i: Call(T(3), T(3)))
def dict_update_and_in(x, y):
    cache = {"x": x}
    cache.update(y=y, z=x + y)
    cache.update({"x": x * 10})
    hits = [k for k in ("x", "q", "z") if k in cache]
    return cache["x"] + cache["z"], hits, list(cache)


@case(lambda i: Call(T(3), T(3)),
      must_break="raises by design: KeyError escapes")
def dict_missing_key_raises(x, y):
    d = {"x": x, "y": y}
    total = d["x"] + d["y"]
    return total + d["bias"]


@case(lambda i: Call(T(5)))
def dict_del_and_len(x):
    buffers = {"a": x, "b": x + 1, "c": x * 2}
    del buffers["b"]
    return len(buffers), sorted(buffers), sum(buffers.values())


@case(lambda i: Call(T(4)))
def dict_items_sorted_by_value(x):
    scores = {"alpha": 3, "beta": 1, "gamma": 2}
    ranked = sorted(scores.items(), key=lambda kv: kv[1])
    weights = dt.tensor([float(v) for _, v in ranked])
    return (x[:3] * weights).sum(), [k for k, _ in ranked]


@case(lambda i: Call(T(3)))
def dict_zip_and_fromkeys(x):
    names = ["w1", "w2", "w3"]
    d = dict(zip(names, [x, x * 2, x * 3]))
    zeros = dict.fromkeys(names, 0)
    return d["w3"] - d["w1"], zeros


@case(lambda i: Call(T(3)))
def nested_dict_config(x):
    cfg = {"model": {"layers": [{"scale": 2.0}, {"scale": 0.5}]}, "name": "tiny"}
    for layer in cfg["model"]["layers"]:
        x = x * layer["scale"] + 1
    return x, cfg["name"].upper()


@case(lambda i: Call(T(n_of(i))))
def dict_view_operations(x):
    a = {"x": 1, "y": 2, "z": 3}
    b = {"y": 0, "w": 5}
    common = sorted(a.keys() & b.keys())
    only_a = sorted(a.keys() - b.keys())
    return x * len(common), common, only_a, list(a.values())


# ---------------------------------------------------------------------------------------------
# Sets.

@case(lambda i: Call(T(n_of(i))))
def set_membership_dispatch(x):
    pointwise = {"relu", "tanh", "abs"}
    ops = ["relu", "sum", "tanh"]
    for op in ops:
        if op in pointwise:
            x = getattr(x, op)() if op != "relu" else dt.relu(x)
    return x, sorted(pointwise)


@case(lambda i: Call(T(4)))
def set_algebra(x):
    a = {1, 2, 3, 4}
    b = {3, 4, 5}
    u, n, d, s = a | b, a & b, a - b, a ^ b
    return x * len(u) + len(n), sorted(d), sorted(s), 4 in n


@case(lambda i: Call(T(3, 4)))
def set_of_shapes_dedup(x):
    shapes = {x.shape, x.T.shape, x.shape, tuple(x.reshape(-1).shape)}
    return len(shapes), sorted(shapes), x.sum()


@case(lambda i: Call(T(5)))
def set_comprehension_and_add(x):
    seen = {n % 3 for n in range(10)}
    seen.add(7)
    seen.discard(0)
    return x * sum(seen), sorted(seen), frozenset({1, 2}) <= seen


# ---------------------------------------------------------------------------------------------
# Strings and f-strings.

@case(lambda i: Call(T(n_of(i)), "float"))
def fstring_describes_tensor(x, tag):
    s = x.sum()
    msg = f"{tag}: shape={tuple(x.shape)} dtype={x.dtype} n={x.numel()}"
    return s * 2, msg


@case(lambda i: Call(T(n_of(i))),
      must_break="tensor values as Python values: .item() formatted into a string")
def fstring_format_specs(x):
    total = x.abs().sum().item()
    n = x.shape[0]
    return f"{n:04d}|{n:>6}|{n:<4}|{n:x}|{n:b}|{total:.3f}|{'mid':^7}|{n!r}"


@case(lambda i: Call(T(3)),
      must_break="does I/O: print() of .item() values")
def print_progress(x):
    for step in range(3):
        x = x * 0.5
        print(f"step {step}: {x.sum().item():.4f}")
    print("done", "with", 3, "steps", sep="-", end="!\n")
    return x


@case(lambda i: Call(T(4), "layer.weight"))
def string_methods_on_names(x, name):
    prefix, _, leaf = name.rpartition(".")
    parts = name.split(".")
    ok = name.startswith("layer") and leaf.endswith("weight")
    return x * len(parts), prefix.upper(), leaf.replace("weight", "w"), ok, "-".join(parts)


@case(lambda i: Call(T(3), "Hello"))
def string_ops_mix(x, word):
    s = word * 2 + "!" + word.lower()
    idx = s.find("o")
    return x + idx, s, s.count("l"), s[::-1], len(s), s.strip("H!"), "ell" in s


@case(lambda i: Call(T(n_of(i))),
      must_break="raises by design: str.format mixing '{}' and '{0}' raises ValueError")
def percent_and_format(x):
    n = x.shape[0]
    a = "%d items, %.2f mean, %s" % (n, 1.5, "ok")
    b = "{} + {name} = {0}".format(n, name="x")
    c = "{:>5}".format("ab")
    return x * n, a, b, c


@case(lambda i: Call(T(3)))
def str_of_numbers(x):
    vals = [1, 2.5, -3, True, None, 1e20, 0.1 + 0.2]
    return x * 2, [str(v) for v in vals], repr(vals), ascii("é")


@case(lambda i: Call(T(4)))
def join_keys_and_values(x):
    d = {"lr": 0.01, "wd": 1e-4, "steps": 100}
    line = ", ".join(f"{k}={v}" for k, v in d.items())
    return x.mean() * len(line), line


@case(lambda i: Call(T(3), "ß∑🙂"))
def unicode_string_content(x, s):
    t = s + "ü" + "\u00e9\u0301" + "\U0001f600"
    return x * len(t), t, t.upper(), [ord(c) for c in t], t.encode("utf-8")


@case(lambda i: Call(T(3)))
def fstring_nested_and_debug(x):
    width, prec = 10, 3
    v = 3.14159
    n = x.shape[0]
    return f"[{v:{width}.{prec}f}]", f"{n=}", f"{'q' + str(n)!r}", f"{{literal}} {n}"


@case(lambda i: Call(T(3)))
def string_compare_and_sort(x):
    names = ["beta", "Alpha", "gamma", "alpha"]
    return x * 2, sorted(names), sorted(names, key=str.lower), max(names), "b" < "a"


# ---------------------------------------------------------------------------------------------
# Slicing of lists, strings, tuples (and tensors beside them).

@case(lambda i: Call(T(8)))
def list_slicing(x):
    xs = [x * k for k in range(6)]
    head, tail, evens, rev = xs[:2], xs[-2:], xs[::2], xs[::-1]
    return head[1] + tail[0] + evens[-1] + rev[0], len(evens), xs[10:]


@case(lambda i: Call(T(8), "abcdefgh"))
def string_and_tensor_slicing(x, s):
    k = len(s[2:5])
    return x[1:1 + k], x[::3], s[::-2], s[-3:], s[100:], x[-2:]


@case(lambda i: Call(T(6), (1, 2, 3, 4, 5)))
def tuple_slicing(x, dims):
    a, b = dims[:2], dims[2:]
    return x * sum(a) - sum(b), a + b[::-1], dims[1:-1], dims[slice(None, None, 2)]


@case(lambda i: Call(T(6)))
def list_slice_assignment(x):
    xs = [0, 1, 2, 3, 4, 5]
    xs[1:3] = ["a", "b", "c"]
    del xs[::3]
    xs[-1:] = []
    return x * len(xs), xs


@case(lambda i: Call(T(4, 6)))
def tensor_slices_with_python_indices(x):
    rows, cols = x.shape
    half = cols // 2
    left, right = x[:, :half], x[:, half:]
    return left * right, x[rows - 1], x[-1, ::2]


@case(lambda i: Call(T(5)))
def list_methods(x):
    xs = [3, 1, 2]
    xs.append(5)
    xs.extend([0, 4])
    xs.insert(0, 9)
    xs.remove(1)
    last = xs.pop()
    xs.sort(reverse=True)
    return x * last, xs, xs.index(5), xs.count(9), [*reversed(xs)]


# ---------------------------------------------------------------------------------------------
# Comprehensions.

@case(lambda i: Call(T(3, 4)))
def list_comprehension_of_rows(x):
    rows = [x[r] * (r + 1) for r in range(x.shape[0])]
    return dt.stack(rows), [tuple(r.shape) for r in rows]


@case(lambda i: Call(T(4)))
def nested_comprehension_with_filter(x):
    pairs = [(a, b) for a in range(4) for b in range(a) if (a + b) % 2 == 1]
    total = sum(a * b for a, b in pairs)
    return x * total, pairs


@case(lambda i: Call([T(3) for _ in range(4)]))
def comprehension_over_tensor_list(xs):
    squares = [t * t for t in xs]
    norms = [s.sum() for s in squares]
    return dt.stack(norms), sum(squares)


@case(lambda i: Call(T(3)))
def generator_expression_into_builtins(x):
    coeffs = [0.5, -1.0, 2.0, 0.25]
    poly = sum(c * x ** k for k, c in enumerate(coeffs))
    return poly, any(c < 0 for c in coeffs), all(c != 0 for c in coeffs), max(c for c in coeffs)


@case(lambda i: Call(T(4)))
def comprehension_shadowing(x):
    n = 10
    ys = [n * 2 for n in range(3)]
    return x * n, ys


@case(lambda i: Call(T(3)))
def walrus_in_comprehension(x):
    total = 0
    run = [total := total + k for k in range(5)]
    return x * total, run


# ---------------------------------------------------------------------------------------------
# Unpacking: star, nested, dict.

@case(lambda i: Call(T(4, 6)))
def unpack_shape(x):
    rows, cols = x.shape
    first, *rest = x
    return first * rows + cols, len(rest)


@case(lambda i: Call(T(3), T(3), T(3)))
def star_unpacking_middle(a, b, c):
    first, *middle, last = [a, b, c, a + b, b + c]
    return first - last, len(middle), sum(middle)


@case(lambda i: Call(((T(3), T(3)), (1, (2.0, "s")))))
def nested_unpacking(packed):
    (x, y), (n, (scale, tag)) = packed
    return (x + y) * scale * n, tag


@case(lambda i: Call(T(3)))
def swap_and_rotate(x):
    a, b, c = x, x * 2, x * 3
    a, b, c = c, a, b
    return a - b, c


@case(lambda i: Call(T(3), T(3)))
def build_with_stars(x, y):
    xs = [x, y]
    more = [*xs, x + y, *xs[::-1]]
    t = (*range(3), *"ab")
    s = {*"hello", *"world"}
    return sum(more), t, sorted(s)


@case(lambda i: Call(T(3)),
      must_break="raises by design: unpacking 3 values into 2 names raises ValueError")
def unpack_wrong_count_raises(x):
    a, b = x * 2, x * 3
    triple = (a, b, a + b)
    p, q = triple
    return p + q


@case(lambda i: Call(T(4)))
def for_loop_tuple_unpacking(x):
    table = [("add", 1.0), ("mul", 2.0), ("add", -0.5)]
    for op, v in table:
        x = x + v if op == "add" else x * v
    for i, (op, _) in enumerate(table):
        x = x + i
    return x


@case(lambda i: Call(T(n_of(i))))
def enumerate_zip_unpack(x):
    ws = [0.1, 0.2, 0.3]
    bs = [1, 2, 3]
    acc = x * 0
    for k, (w, b) in enumerate(zip(ws, bs), start=1):
        acc = acc + x * w * k + b
    return acc, list(zip(*[(1, "a"), (2, "b")]))
