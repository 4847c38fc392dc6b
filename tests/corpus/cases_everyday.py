"""Corpus cases (issue 23): everyday Python that compiles whole. Changes to the caller's lists
and dicts, map/filter/zip(strict=)/sorted(key=), functools.reduce, itertools, type facts of
tensors, and the errors CPython raises inside these constructs."""
import functools
import itertools
import operator

import dyntrace as dt
from corpus import Call, T, case, n_of


# ---------------------------------------------------------------------------------------------
# Changes to the caller's lists and dicts, replayed on the real objects after the graph.

@case(lambda i: Call([T(n_of(i))], T(n_of(i))))
def caller_list_append_extend(history, x):
    history.append(x * 2)
    history.extend([x + 1, x - 1])
    history += [x.exp()]
    return len(history)


@case(lambda i: Call([T(3), T(3), T(3)], T(3)))
def caller_list_pop_insert_setitem(xs, x):
    last = xs.pop()
    xs.insert(0, last * x)
    xs[1] = xs[1] + x
    first = xs.pop(0)
    return first + xs[-1]


@case(lambda i: Call({"a": T(n_of(i)), "b": T(n_of(i))}, T(n_of(i))))
def caller_dict_update_pop(state, x):
    state["c"] = state["a"] * x
    removed = state.pop("a")
    state.update(d=x.sum(), e=1)
    state.setdefault("f", 2.0)
    return removed + state["c"]


@case(lambda i: Call({"w": T(3), "b": T(3)}, T(3)))
def caller_dict_reorders_like_cpython(state, x):
    w = state.pop("w")
    state["w"] = w * x
    return list(state)


class Recorder:
    def __init__(self):
        self.seen = []
        self.count = {"calls": 0}


@case(lambda i: Call(Recorder(), T(n_of(i))))
def self_history_append(rec, x):
    h = x.tanh()
    rec.seen.append(h)
    rec.count["calls"] += 1
    return h * rec.count["calls"]


@case(lambda i: Call([T(4), T(4)], T(4)))
def caller_list_comprehension_then_append(xs, x):
    ys = [v * x for v in xs]
    xs.append(sum(ys))
    return ys


@case(lambda i: Call([1, 2], [1, 2], T(3)), calls=2)
def two_lists_one_changed(a, b, x):
    a.append(3)
    return x * len(b)


@case(lambda i: Call(T(3)), calls=3)
def same_list_passed_twice(x):
    shared = [x]

    def grow(a, b):
        a.append(x * 2)
        return len(b)
    return grow(shared, shared)


# ---------------------------------------------------------------------------------------------
# Builtins and functional tools on traced values.

@case(lambda i: Call([T(n_of(i)) for _ in range(3)]))
def map_filter_over_tensors(xs):
    ys = list(map(lambda t: t * 2, xs))
    big = list(filter(lambda t: t.ndim == 1, ys))
    return sum(big), len(big)


@case(lambda i: Call(T(4), T(4)))
def map_two_iterables_and_operator(x, y):
    return list(map(operator.mul, [x, y], [y, x]))


@case(lambda i: Call([T(3), T(3)], [1.0, 2.0]))
def zip_strict_equal(xs, ws):
    return sum(w * t for t, w in zip(xs, ws, strict=True))


@case(lambda i: Call([T(3), T(3)], [1.0, 2.0, 3.0]),
      must_break="raises by design: zip(strict=True) raises ValueError")
def zip_strict_unequal_raises(xs, ws):
    return [w * t for t, w in zip(xs, ws, strict=True)]


@case(lambda i: Call({"b": T(3), "a": T(3), "c": T(3)}))
def sorted_key_and_join(d):
    names = sorted(d, key=lambda k: -ord(k))
    return "_".join(sorted(d)), [d[k] for k in names]


@case(lambda i: Call([T(2), T(4), T(3)]))
def sorted_by_size(xs):
    return sorted(xs, key=lambda t: t.shape[0], reverse=True)


@case(lambda i: Call([T(2), T(2)]),
      must_break="raises by design: the key raises AttributeError")
def sorted_key_raises(xs):
    return sorted(xs, key=lambda t: t.nope)


@case(lambda i: Call([T(n_of(i)) for _ in range(4)]))
def functools_reduce_sum(xs):
    total = functools.reduce(operator.add, xs)
    prod = functools.reduce(lambda a, b: a * b, xs, 1.0)
    return total, prod


@case(lambda i: Call([]),
      must_break="raises by design: reduce() of an empty list raises TypeError")
def functools_reduce_empty_raises(xs):
    return functools.reduce(operator.add, xs)


@case(lambda i: Call([T(3), T(3)], [T(3)]))
def itertools_chain_islice_repeat(a, b):
    out = list(itertools.chain(a, b))
    head = list(itertools.islice(out, 2))
    reps = list(itertools.repeat(out[0], 2))
    return head + reps


@case(lambda i: Call([T(3), T(3), T(3)]))
def itertools_accumulate_product(xs):
    running = list(itertools.accumulate(xs))
    pairs = [a * b for a, b in itertools.product(xs[:2], xs[1:])]
    return running, pairs


@case(lambda i: Call(T(n_of(i)), [1, 2]))
def type_facts_of_tensors(x, xs):
    facts = (type(x) is dt.Tensor, x.__class__ is dt.Tensor, isinstance(x, dt.Tensor),
             callable(x), callable(dt.exp), dt.is_tensor(x), dt.is_tensor(xs),
             type(xs) is list, x.__len__())
    return facts, x + 1


@case(lambda i: Call([T(3), T(3)]))
def enumerate_start_keyword(xs):
    return [t * k for k, t in enumerate(xs, start=2)]


@case(lambda i: Call([T(3), T(3)]),
      must_break="raises by design: pop from an empty list raises IndexError")
def list_pop_empty_raises(xs):
    xs.pop()
    xs.pop()
    return xs.pop()


@case(lambda i: Call({"a": T(3)}),
      must_break="raises by design: dict.pop raises KeyError")
def dict_pop_missing_raises(d):
    d.pop("a")
    return d.pop("b")


# ---------------------------------------------------------------------------------------------
# Slices, del, sequences holding tensors.

@case(lambda i: Call([T(3) for _ in range(5)], T(3)))
def caller_list_slice_assign_and_del(xs, x):
    xs[1:3] = [x, x * 2, x * 3]
    del xs[0]
    del xs[::2]
    xs[::-1] = list(xs)
    return len(xs), xs[0] + xs[-1]


@case(lambda i: Call({"a": T(3), "b": T(3)}, T(3)))
def caller_dict_del(d, x):
    del d["a"]
    d["z"] = x
    return d["b"] * x


@case(lambda i: Call([T(3)]),
      must_break="raises by design: del xs[3] raises IndexError")
def del_missing_index_raises(xs):
    del xs[3]
    return xs


@case(lambda i: Call(T(3), T(3)))
def tuples_and_lists_of_tensors_concat(a, b):
    t = (a, b) + ()
    u = t + (a * 2,)
    rep = [a] * 3
    return len(u), sum(rep) + u[-1], (b,) * 2


@case(lambda i: Call([T(4) for _ in range(3)], T(4)))
def operator_functions_as_values(xs, y):
    prod = functools.reduce(operator.mul, xs)
    pairs = list(map(operator.add, xs, [y, y, y]))
    flags = [operator.lt(len(xs), 5), operator.getitem(xs, 0) is xs[0]]
    return prod, pairs, flags


# ---------------------------------------------------------------------------------------------
# Iterators user code holds: a loop takes items from the iterator itself.

@case(lambda i: Call([T(3) for _ in range(4)]))
def held_iterator_consumed_by_loop(xs):
    r = reversed(xs)
    for t in r:
        first = t * 2
        break
    z = zip(xs, xs)
    pairs = [a + b for a, b in z]
    return first, len(list(r)), len(list(z)), pairs


@case(lambda i: Call(T(4)))
def join_of_generator_expression(x):
    d = {"lr": 0.01, "wd": 1e-4}
    line = ", ".join(f"{k}={v}" for k, v in sorted(d.items()))
    return x * len(line), line


@case(lambda i: Call([3, 1, 2], T(3)))
def caller_list_sort_and_remove(order, x):
    order.sort()
    order.remove(2)
    names = ["b", "a", "c"]
    names.sort(key=lambda s: -ord(s), reverse=True)
    return x * order[-1], names, ascii("é"), format(2.5, ".2f")


@case(lambda i: Call([1, 2], T(3)),
      must_break="raises by design: list.remove raises ValueError")
def list_remove_missing_raises(xs, x):
    xs.remove(5)
    return x
