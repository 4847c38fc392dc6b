"""Everyday Python that compiles whole (issue 23): changes to the caller's lists and dicts
replayed after the graph, the guard that keeps them unaliased, builtins and functional tools on
traced values, and errors raised inside these constructs exactly as CPython raises them, with
`fullgraph=True` too. Each function runs plain (an unmarked copy) and under `dt.jit` on the
eager and cpu backends on equal inputs (jitlib.run_differential)."""
import functools
import itertools
import operator

import dyntrace as dt
from jitlib import Call, capture, fresh_copy, jitted_copy, run_differential, stats
from testlib import rand_tensor

BACKENDS = ("eager", "cpu")


def T(n=3):
    return rand_tensor((n,), dt.float32, -2.0, 2.0)


def check_whole(fn, factory, calls=3):
    """fn under jit matches plain Python on each backend, with no graph break, also with
    fullgraph=True."""
    for backend in BACKENDS:
        for fullgraph in (False, True):
            dt.reset()
            jfn = jitted_copy(fn, backend=backend, fullgraph=fullgraph)
            run_differential(fn, jfn, factory, calls, seed_base=23)
            s = stats()
            assert s["graph_breaks"] == 0 and s["fallbacks"] == 0, (fn.__name__, backend,
                                                                     s["break_reasons"])


# ---------------------------------------------------------------------------------------------
# 1. The caller's lists and dicts.

def grow_history(history, cache, x):
    history.append(x * 2)
    history.insert(0, x.exp())
    history[1:2] = [x, x + 1]
    del history[-1]
    cache["last"] = history[0]
    old = cache.pop("old")
    cache.setdefault("n", 0)
    return old + history[1]


def test_caller_list_and_dict_changes_are_replayed():
    check_whole(grow_history, lambda i: Call([T()], {"old": T(), "keep": 1}, T()))


def reinsert(d, x):
    w = d.pop("w")
    d["w"] = w * x
    d["b"] = d["b"] + 1
    return x


def test_dict_key_order_after_pop_and_insert_is_cpythons():
    for backend in BACKENDS:
        dt.reset()
        jfn = jitted_copy(reinsert, backend=backend)
        plain, jit = {"w": T(), "b": T(), "c": 3}, {"w": T(), "b": T(), "c": 3}
        reinsert(plain, T())
        jfn(jit, T())
        assert list(plain) == list(jit) == ["b", "c", "w"], (list(plain), list(jit))


def append_then_len(a, b, x):
    a.append(x)
    return len(b)


def test_a_changed_list_passed_twice_is_traced_again():
    dt.reset()
    jfn = jitted_copy(append_then_len)
    x = T()
    assert jfn([1], [1], x) == 1
    shared = [1]
    assert jfn(shared, shared, x) == 2 and len(shared) == 2
    reasons = " ".join(stats()["recompile_reasons"])
    assert "L['a'] is L['b']" in reasons, reasons
    assert any("L['a'] is not L['b']" in g for g in dt.guards(jfn)), dt.guards(jfn)


class Pair:
    pass


def swap(o):
    o.a, o.b = o.b, o.a
    return o


def test_attribute_swap_reads_values_before_any_store():
    dt.reset()
    o = Pair()
    a, b = Pair(), Pair()
    o.a, o.b = a, b
    jitted_copy(swap)(o)
    assert o.a is b and o.b is a


LOG = []


def log_twice(x):
    LOG.append(x * 2)
    y = x.exp()
    LOG.append(len(LOG))
    return y


def test_a_global_list_changed_twice_compiles_whole():
    for backend in BACKENDS:
        dt.reset()
        del LOG[:]
        jfn = jitted_copy(log_twice, backend=backend, fullgraph=True)
        x = T()
        jfn(x)
        assert len(LOG) == 2 and LOG[1] == 1, LOG
        assert stats()["graph_breaks"] == 0, stats()["break_reasons"]


# ---------------------------------------------------------------------------------------------
# 2. Builtins, functools, itertools and operator on traced values.

def functional_mix(xs, y):
    doubled = list(map(lambda t: t * 2, xs))
    kept = list(filter(None, [1, 0, 2]))
    ranked = sorted(xs, key=lambda t: t.shape[0], reverse=True)
    total = functools.reduce(operator.add, doubled)
    chained = list(itertools.chain(xs, [y]))
    sliced = list(itertools.islice(chained, 1, None, 2))
    running = list(itertools.accumulate(xs))
    pairs = [a * b for a, b in itertools.product(xs[:1], [y, y])]
    zipped = [a + b for a, b in zip(xs, xs, strict=True)]
    facts = (type(y) is dt.Tensor, y.__class__ is dt.Tensor, callable(y), dt.is_tensor(y),
             y.__len__())
    return total, kept, ranked, sliced, running, pairs, zipped, facts, (y,) + (), [y] * 2


def test_builtins_and_functional_tools_compile_whole():
    check_whole(functional_mix, lambda i: Call([T(3), T(3)], T(3)))


# ---------------------------------------------------------------------------------------------
# 3. Errors inside these constructs: CPython's own, also with fullgraph=True.

def pop_empty(xs):
    xs.pop()
    return xs.pop()


def pop_missing(d):
    return d.pop("missing")


def zip_unequal(xs):
    return [a for a, _ in zip(xs, [1], strict=True)]


def key_raises(xs):
    return sorted(xs, key=lambda t: t.no_such_attribute)


def reduce_empty(xs):
    return functools.reduce(operator.add, xs)


def del_out_of_range(xs):
    del xs[5]
    return xs


def test_errors_inside_these_constructs_are_cpythons():
    cases = ((pop_empty, lambda: [T()]), (pop_missing, lambda: {"a": T()}),
             (zip_unequal, lambda: [T(), T()]), (key_raises, lambda: [T(), T()]),
             (reduce_empty, lambda: []), (del_out_of_range, lambda: [T()]))
    for fn, make in cases:
        _, expected, _ = capture(fresh_copy(fn), Call(make()))
        assert expected is not None, fn.__name__
        for fullgraph in (False, True):
            dt.reset()
            _, actual, _ = capture(jitted_copy(fn, fullgraph=fullgraph), Call(make()))
            assert type(actual) is type(expected) and str(actual) == str(expected), (
                fn.__name__, fullgraph, actual, expected)


# ---------------------------------------------------------------------------------------------
# 4. Iterating a dict of the caller: its keys' order is guarded.

def scale_all(d, x):
    out = {k: v * x for k, v in d.items()}
    return out, [k for k in d], sorted(d)


def test_caller_dict_iteration_guards_key_order():
    check_whole(scale_all, lambda i: Call({"w": T(), "b": T()}, T()))
    dt.reset()
    jfn = jitted_copy(scale_all)
    x = T()
    for d in ({"w": x, "b": x}, {"b": x, "w": x}):
        assert jfn(d, x)[1] == list(d)
    assert any("tuple(L['d']) ==" in r for r in stats()["recompile_reasons"]), stats()["recompile_reasons"]


# ---------------------------------------------------------------------------------------------
# 5. str.format with fields the trace resolves: attributes, items, nested specs, numbering.

class _Encoder:
    name = "enc"
    dims = (2, 3)


def format_fields(x, n):
    e = _Encoder()
    return ("{0.name}:{0.dims[1]}".format(e), "{n:>{w}}".format(n="ab", w=5), "{}-{}".format(n, n + 1),
            "{:.2f}|{!r}|{k[a]}|{!a}".format(1.5, "s", "é", k={"a": 7}), x * n)


def format_returns_a_lone_field_itself(x, e):
    # CPython's test_format.test_optimisations: "{0}".format(s) is s (here s = e.name).
    return x, "{0.name}".format(e), "{}{.name}".format("", e), "{0.name}{1}".format(e, "")


def format_mixed_numbering(x):
    return "{0}{}".format(1, 2), x


def format_index_out_of_range(x):
    return "{2}".format(1), x


def format_missing_name(x):
    return "{a}".format(b=1), x


def test_str_format_fields_compile_whole_and_raise_as_cpython():
    check_whole(format_fields, lambda i: Call(T(), i + 2))
    check_whole(format_returns_a_lone_field_itself, lambda i: Call(T(), _Encoder()))
    e = _Encoder()
    e.name = "".join(["en", "coder"])  # a str object of its own
    for backend in BACKENDS:
        dt.reset()
        _, lone, empty_first, not_last = jitted_copy(format_returns_a_lone_field_itself, backend=backend)(T(), e)
        assert lone is e.name and empty_first is e.name and not_last is not e.name and not_last == e.name
    for fn in (format_mixed_numbering, format_index_out_of_range, format_missing_name):
        _, expected, _ = capture(fresh_copy(fn), Call(T()))
        dt.reset()
        _, actual, _ = capture(jitted_copy(fn, fullgraph=True), Call(T()))
        assert type(actual) is type(expected) and str(actual) == str(expected), (fn.__name__, actual, expected)


# ---------------------------------------------------------------------------------------------
# 6. An iterator from reversed() that user code holds, across a graph break: made again as
#    reversed() of the same list, moved on past what the segment took.

def reversed_held_across_a_break(x, xs):
    r = reversed(xs)
    first = next(r)
    print("between segments")  # I/O: a graph break with `r` alive
    return x * first, list(r), type(r).__name__


def reversed_loop_with_a_break_inside(x, xs):
    r = reversed(xs)
    for t in r:
        x = x * t
        if x.sum().item() > 100:
            x = x / 2
    return x, list(r)


def test_reversed_iterators_cross_graph_breaks():
    for fn in (reversed_held_across_a_break, reversed_loop_with_a_break_inside):
        for backend in BACKENDS:
            dt.reset()
            run_differential(fn, jitted_copy(fn, backend=backend), lambda i: Call(T(), [1.0, 2.0, 3.0 + i]), 2,
                             seed_base=29)
            s = stats()
            assert s["fallbacks"] == 0 and s["graphs"] >= 1, (fn.__name__, s)  # was: the whole frame in CPython


def zip_takes_only_what_it_pairs(x, xs):
    it = iter(xs)
    pairs = list(zip(range(2), it))  # zip stops at range's end: one item of `it` stays unread
    return [x * v for _, v in pairs], list(it)


def enumerate_shares_its_iterator(x, xs):
    it = iter(xs)
    e = enumerate(it, 10)
    first = next(e)
    skipped = next(it)  # advances the iterator enumerate() reads from
    return x * first[1], skipped, list(e)


def test_zip_and_enumerate_read_iterators_lazily():
    # Both once drained their iterator arguments at the call, so list(it) after the zip came back
    # empty (regrtest test_heapq's test_iterable_args).
    check_whole(zip_takes_only_what_it_pairs, lambda i: Call(T(), [1.0, 2.0, 3.0 + i, 4.0]))
    check_whole(enumerate_shares_its_iterator, lambda i: Call(T(), [1.0, 2.0, 3.0 + i, 4.0]))


class _Countdown:
    """An iterator object of the program's own: __iter__ returns self, __next__ gives the items."""

    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return self

    def __next__(self):
        if self.n == 0:
            raise StopIteration
        self.n -= 1
        return self.n


def list_of_an_iterator_object(x, n):
    return [x * v for v in list(_Countdown(n))], list(enumerate(_Countdown(n), 5))


def test_an_object_whose_iter_returns_itself_runs_as_cpython():
    # list() of it recursed in the tracer until the stack overflowed (regrtest test_enumerate).
    for backend in BACKENDS:
        dt.reset()
        run_differential(list_of_an_iterator_object, jitted_copy(list_of_an_iterator_object, backend=backend),
                         lambda i: Call(T(), 2 + i), 2, seed_base=31)


def set_methods_with_one_sequence_argument(x, methods, words):
    # regrtest test_compare: {"ne", "eq"}.isdisjoint(a_meth + b_meth) asked isdisjoint("ne") of
    # a one-tuple (PyObject_CallMethod spread it), so the branch went the wrong way.
    names = {"ne", "eq"}
    flags = (names.isdisjoint(methods), names.issubset(methods + ("ne", "eq")), names.issuperset(words),
             names.isdisjoint(("ne",)), {"a", "b"}.isdisjoint("ab"))
    return x * 2 if not names.isdisjoint(methods) else x * 3, flags


def test_set_methods_take_a_tuple_as_one_argument():
    check_whole(set_methods_with_one_sequence_argument,
                lambda i: Call(T(), (("ne",), ("lt", "eq"), ())[i], ["eq"] if i else ["ne", "eq"]))


def _module_class_made_in_a_function(scale):
    # A model class defined inside a function (a notebook cell, a test, a factory): its forward
    # closes over the function's variables.
    class Scaler(dt.nn.Module):
        def forward(self, x):
            return x * scale + 1

    def set_scale(value):
        nonlocal scale
        scale = value

    return Scaler(), set_scale


def test_methods_closing_over_their_functions_variables_compile_whole():
    def step(model, x):
        return model(x) * 2

    compiled = dt.jit(fresh_copy(step), fullgraph=True)
    x = rand_tensor((5,))
    model, set_scale = _module_class_made_in_a_function(3.0)
    dt.reset()
    assert compiled(model, x).tolist() == step(model, x).tolist()
    # The cell is read through the class's function, and guarded: a new value retraces.
    set_scale(-0.5)
    assert compiled(model, x).tolist() == step(model, x).tolist()
    other, _ = _module_class_made_in_a_function(7.0)  # another class, another function object
    assert compiled(other, x).tolist() == step(other, x).tolist()
    s = stats()
    assert s["graph_breaks"] == 0 and s["fallbacks"] == 0, s["break_reasons"]


# ---------------------------------------------------------------------------------------------
# What PyTorch's module walks do (named_parameters() dedupes by id() in a generator whose own
# `seen` set it fills): id() of the caller's objects, isinstance() of an iterator, generators
# that fill containers of their own.

class Knob:
    def __init__(self, scale):
        self.scale = scale


def sum_distinct_scales(knobs, x):
    seen, total = set(), 0.0
    for k in knobs:
        if id(k) not in seen:
            seen.add(id(k))
            total += k.scale
    return x * total


def test_id_of_the_callers_objects_is_folded_under_an_identity_guard():
    a, b, c = Knob(2.0), Knob(3.0), Knob(7.0)
    check_whole(sum_distinct_scales, lambda i: ([a, b, a], T()))
    # Another object where the trace saw `a` again: the identity guard fails and the call traces
    # anew (the old graph would give x * 5).
    dt.reset()
    jfn = jitted_copy(sum_distinct_scales, backend="cpu", fullgraph=True)
    x = T()
    for knobs in ([a, b, a], [a, b, c], [a, b, a]):
        assert jfn(knobs, x).tolist() == sum_distinct_scales(knobs, x).tolist(), [k.scale for k in knobs]
    assert stats()["recompiles"] >= 1


def id_of_a_new_object(x):
    k = Knob(1.0)
    return x * (1.0 if id(k) > 0 else 2.0)


def test_id_of_an_object_the_trace_made_breaks_with_its_reason():
    dt.reset()
    run_differential(id_of_a_new_object, jitted_copy(id_of_a_new_object, backend="cpu"), lambda i: T(), 2,
                     seed_base=31)
    reasons = " ".join(stats()["break_reasons"])
    assert "id() of" in reasons, reasons


def _own_walk(keys):
    seen, found = set(), []
    for k in keys:
        if k not in seen:
            seen.add(k)
            found.append(k)
    yield from found


def _hands_out_then_fills():
    box = []
    yield box
    box.append(1)  # after the consumer saw it empty


def generator_kinds(x, keys):
    walked = sum(_own_walk(keys))
    seen_empty = [len(b) for b in _hands_out_then_fills()]
    gen = (k * 2 for k in keys)
    plain = x if isinstance(gen, (dt.Tensor, list)) else x + 1
    return plain * walked + sum(gen) + seen_empty[0]


def test_generators_filling_their_own_containers_and_isinstance_of_iterators():
    # _own_walk fills a set and a list of its own: nothing the consumer sees changes, so it runs
    # in the trace; _hands_out_then_fills changes a list it yielded, so its timing matters and
    # CPython runs it (the consumer saw the list empty). isinstance() of a generator is False for
    # classes no iterator belongs to.
    for backend in BACKENDS:
        dt.reset()
        jfn = jitted_copy(generator_kinds, backend=backend)
        run_differential(generator_kinds, jfn, lambda i: (T(), [1, 2, 2, 3 + i]), 2, seed_base=37)
        reasons = stats()["break_reasons"]
        walked_line = ":%d " % (generator_kinds.__code__.co_firstlineno + 1)
        assert any("generator whose body mutates state" in r for r in reasons), reasons
        assert not any(walked_line in r for r in reasons), reasons
