"""dt.jit returns a compiled callable with torch.compile's semantics (issue 18): the function
stays plain, versions with different options coexist, models compile per instance, inspection
accepts either form, reset() clears one callable or all. References are plain CPython on
unmarked functions."""
import dataclasses

import dyntrace as dt
from jitlib import Call, fresh_copy, jitted_copy, run_differential, stats
from testlib import assert_close, assert_raises, rand_tensor, seed


def _affine(x, w, b):
    return dt.tanh(x @ w + b)


class Model:
    """A model the way people write them: weights as attributes, forward and __call__."""

    def __init__(self, d_in, d_out):
        self.w = rand_tensor((d_in, d_out))
        self.b = rand_tensor((d_out,))
        self.scale = 0.5

    def forward(self, x):
        return dt.relu(x @ self.w + self.b) * self.scale

    def __call__(self, x):
        return self.forward(x)


class ForwardOnly:
    def __init__(self):
        self.w = rand_tensor((4, 4))

    def forward(self, x):
        return x @ self.w


def reference_forward(model, x):
    return dt.relu(x @ model.w + model.b) * model.scale


def test_plain_function_keeps_running_plain_while_a_compiled_version_exists():
    dt.reset()
    seed(18001)
    f = fresh_copy(_affine)
    jf = dt.jit(f)
    x, w, b = rand_tensor((5, 4)), rand_tensor((4, 3)), rand_tensor((3,))
    assert_close(jf(x, w, b), _affine(x, w, b))
    traced = dt.stats()["frames_traced"]
    seen = dt.stats()["frames_seen"]
    for _ in range(3):
        assert_close(f(x, w, b), _affine(x, w, b))
    assert dt.stats()["frames_traced"] == traced and dt.stats()["frames_seen"] == seen
    assert not dt._hook_installed()
    # The compiled version is used again, from its cache.
    hits = dt.stats()["cache_hits"]
    jf(x, w, b)
    assert dt.stats()["cache_hits"] == hits + 1


def test_model_compiles_through_call_and_reads_weights_at_call_time():
    dt.reset()
    seed(18002)
    model = Model(6, 3)
    compiled = dt.jit(model)
    x = rand_tensor((4, 6))
    assert_close(compiled(x), reference_forward(model, x))
    # Weights updated in place or rebound to a new tensor of the same kind: no recompile, and
    # the new values are used (they are graph inputs, not constants).
    model.w.mul_(2.0)
    assert_close(compiled(x), reference_forward(model, x))
    model.b = rand_tensor((3,))
    assert_close(compiled(x), reference_forward(model, x))
    assert dt.stats()["recompiles"] == 0, dt.stats()["recompile_reasons"]
    # A Python attribute the trace read is guarded: changing it recompiles with that reason.
    model.scale = 2.0
    assert_close(compiled(x), reference_forward(model, x))
    reasons = dt.stats()["recompile_reasons"]
    assert len(reasons) == 1 and "scale" in reasons[0], reasons


def test_a_compiled_model_reads_the_models_attributes_live():
    # `model = dt.jit(model)` as with torch.compile: what the compiled callable lacks is the
    # model's, read live (train/eval, parameters, state_dict, submodules), so the training script
    # goes on calling model.eval() and model.parameters() on it; a function keeps its own.
    dt.reset()
    model = dt.nn.Sequential(dt.nn.Linear(4, 3), dt.nn.Dropout(0.5))
    compiled = dt.jit(model, backend="cpu")
    x = rand_tensor((2, 4))
    assert compiled.training and [id(p) for p in compiled.parameters()] == [id(p) for p in model.parameters()]
    compiled.eval()
    assert not model.training and not compiled.training and not model[1].training
    assert compiled(x).tolist() == model(x).tolist()  # eval: dropout is the identity
    assert sorted(compiled.state_dict()) == sorted(model.state_dict())
    compiled.train()
    assert model.training and compiled.training
    assert_raises(AttributeError, lambda: compiled.no_such_attribute)
    jf = dt.jit(fresh_copy(_affine))
    assert jf.__name__ == "_affine"
    assert_raises(AttributeError, lambda: jf.__code__)


def test_bound_forward_compiles_for_that_instance_only():
    dt.reset()
    seed(18003)
    a, other = Model(4, 4), Model(4, 4)
    fwd = dt.jit(a.forward)
    x = rand_tensor((2, 4))
    assert_close(fwd(x), reference_forward(a, x))
    traced = dt.stats()["frames_traced"]
    assert_close(other.forward(x), reference_forward(other, x))  # plain: not under the callable
    assert_close(a.forward(x), reference_forward(a, x))          # the method itself stays plain
    assert dt.stats()["frames_traced"] == traced
    only = dt.jit(ForwardOnly())  # no __call__: its forward is what the callable calls
    m = only.__wrapped__
    assert_close(only(x), x @ m.w)


def test_decorated_method_binds_like_a_function():
    dt.reset()
    seed(18004)

    class Layer:
        def __init__(self):
            self.w = rand_tensor((3, 3))

        @dt.jit
        def forward(self, x):
            return dt.sigmoid(x @ self.w)

    layer = Layer()
    x = rand_tensor((2, 3))
    assert isinstance(Layer.__dict__["forward"], dt.CompiledFunction)
    assert_close(layer.forward(x), dt.sigmoid(x @ layer.w))
    assert dt.stats()["graphs"] == 1


def test_inspection_accepts_the_callable_or_the_function_and_explain_leaves_entries_alone():
    dt.reset()
    seed(18005)
    f = fresh_copy(_affine)
    j1, j2 = dt.jit(f, backend="eager"), dt.jit(f, backend="cpu")
    x, w, b = rand_tensor((3, 4)), rand_tensor((4, 2)), rand_tensor((2,))
    j1(x, w, b)
    j2(x, w, b)
    assert len(dt.guards(j1)) == len(dt.graphs(j2)) == 1
    assert len(dt.guards(f)) == len(dt.graphs(f)) == 2  # every compiled version of f
    assert dt.kernels(j1) == [] and len(dt.kernels(j2)) == 1
    before = dt.guards(j1)
    e1 = dt.explain(j1, x, w, b)
    e2 = dt.explain(j1, x, w, b)
    assert len(e1.graphs) == len(e2.graphs) == 1 and e1.graphs == e2.graphs
    assert dt.guards(j1) == before  # explain traced into a cache of its own
    hits = dt.stats()["cache_hits"]
    j1(x, w, b)
    assert dt.stats()["cache_hits"] == hits + 1


def test_reset_of_one_callable_leaves_the_others():
    dt.reset()
    seed(18006)
    f = fresh_copy(_affine)
    j1, j2 = dt.jit(f), dt.jit(f)
    x, w, b = rand_tensor((3, 4)), rand_tensor((4, 2)), rand_tensor((2,))
    j1(x, w, b)
    j2(x, w, b)
    j1.reset()
    assert dt.guards(j1) == [] and len(dt.guards(j2)) == 1
    dt.reset(j2)
    assert dt.guards(j2) == []
    j1(x, w, b)
    assert len(dt.guards(j1)) == 1
    dt.reset()
    assert dt.guards(j1) == [] and dt.guards(f) == []
    assert_raises(TypeError, dt.reset, f, match="dyntrace.jit")


def test_jit_rejects_what_has_no_python_code():
    assert_raises(TypeError, dt.jit, len, match="Python function")
    assert_raises(TypeError, dt.jit, 3, match="Python function")
    assert_raises(TypeError, dt.jit, Model, match="Python function")  # a class, not an instance


def test_dropped_callables_free_their_entries():
    dt.reset()
    seed(18007)
    f = fresh_copy(_affine)
    x, w, b = rand_tensor((3, 4)), rand_tensor((4, 2)), rand_tensor((2,))
    for _ in range(50):
        dt.jit(f, backend="eager")(x, w, b)
    assert dt.guards(f) == [], len(dt.guards(f))


# ---------------------------------------------------------------------------------------------
# Attribute stores on the caller's objects are recorded and replayed after the graph (issue 18):
# the frame compiles whole, later reads in the trace see the stored value, and the objects end
# up exactly as plain CPython leaves them.

class State:
    def __init__(self):
        self.h = dt.zeros(3)
        self.steps = 0


def _state_step(s, x):
    s.h = s.h * 0.5 + x
    s.total = s.h.sum()     # a new attribute
    return s.h + s.total    # reads see the stores made above


def _state_step_with_break(s, x, log):
    s.h = s.h * 2.0 + x
    log.append(s.h.sum().item())  # a break after the store: the escape sees the new value
    s.h = s.h - 1.0
    return s.h


class Slotted:
    __slots__ = ("h",)

    def __init__(self):
        self.h = dt.zeros(3)


class Guarded:
    def __init__(self):
        self._h = dt.zeros(3)

    @property
    def h(self):
        return self._h

    @h.setter
    def h(self, value):
        self._h = value * 1.0


def _assert_same_state(a, b):
    assert a.__dict__.keys() == b.__dict__.keys(), (a.__dict__.keys(), b.__dict__.keys())
    for k in a.__dict__:
        va, vb = a.__dict__[k], b.__dict__[k]
        if isinstance(va, dt.Tensor):
            assert va.tolist() == vb.tolist(), k
        else:
            assert va == vb, k


def test_attribute_stores_compile_whole_and_replay_in_order():
    dt.reset()
    seed(18101)
    plain = fresh_copy(_state_step)
    compiled = dt.jit(_state_step)
    s_plain, s_jit = State(), State()
    for _ in range(3):
        x = rand_tensor((3,))
        assert compiled(s_jit, x).tolist() == plain(s_plain, x).tolist()
        _assert_same_state(s_plain, s_jit)
    s = dt.stats()
    assert s["graph_breaks"] == 0 and s["fallbacks"] == 0 and s["graphs"] == 1, s["break_reasons"]


def test_attribute_store_before_a_break_is_visible_to_the_escape():
    dt.reset()
    seed(18102)
    plain = fresh_copy(_state_step_with_break)
    compiled = dt.jit(_state_step_with_break)
    s_plain, s_jit = State(), State()
    log_plain, log_jit = [], []
    for _ in range(2):
        x = rand_tensor((3,))
        assert compiled(s_jit, x, log_jit).tolist() == plain(s_plain, x, log_plain).tolist()
        assert log_jit == log_plain
        _assert_same_state(s_plain, s_jit)
    assert dt.stats()["fallbacks"] == 0


def test_stores_that_could_run_user_code_run_under_cpython():
    dt.reset()
    seed(18103)
    for cls in (Slotted, Guarded):
        plain = fresh_copy(_state_step_with_break)
        compiled = dt.jit(_state_step_with_break)
        a, b = cls(), cls()
        x = rand_tensor((3,))
        assert compiled(a, x, []).tolist() == plain(b, x, []).tolist()
        assert a.h.tolist() == b.h.tolist()
    reasons = " ".join(dt.stats()["break_reasons"])
    assert "descriptor" in reasons, reasons


def _store_through_two_names(a, b, x):
    a.h = x * 2
    return b.h + 1  # b may be a: then it must see the store


def test_a_stored_object_reached_two_ways_is_not_guessed():
    dt.reset()
    seed(18104)
    plain = fresh_copy(_store_through_two_names)
    compiled = dt.jit(_store_through_two_names)
    x = rand_tensor((3,))
    for same in (True, False, True):
        s1, s2 = State(), State()
        t1, t2 = State(), State()
        got = compiled(s1, s1 if same else s2, x)
        want = plain(t1, t1 if same else t2, x)
        assert got.tolist() == want.tolist(), same
        _assert_same_state(s1, t1)


class Box:
    pass


def _store_shared_list_then_break(b, x):
    items = []
    b.items = items             # the stored value is also a local at the break below
    items.append(x + 1)
    print("", end="")           # a break: the frame state and the store share the list
    return b.items[0] * 2, b.items is items


def test_a_stored_value_shared_with_the_frame_state_stays_one_object():
    dt.reset()
    seed(18105)
    plain = fresh_copy(_store_shared_list_then_break)
    compiled = dt.jit(_store_shared_list_then_break)
    for _ in range(2):
        x = rand_tensor((3,))
        b1, b2 = Box(), Box()
        (got, same_got), (want, same_want) = compiled(b1, x), plain(b2, x)
        assert got.tolist() == want.tolist() and same_got is same_want is True
        assert b1.items[0].tolist() == b2.items[0].tolist()


# ---------------------------------------------------------------------------------------------
# Generators consumed inside the trace run straight through (issue 18): sum() of a generator
# expression, list() of a generator, a for loop over one. Bodies with effects the consumer could
# observe (mutations, in-place ops, prints) stay with CPython.

def _gen_double(xs):
    for x in xs:
        yield x * 2


def _consume_generators(x, ys):
    a = sum(t.sin() for t in ys)
    b = list(_gen_double(ys))
    c = [v for v in _gen_double([x, x + 1])]
    total = 0
    for v in _gen_double(ys):
        total = total + v
    return a + b[0] + c[1] + total + x


def _gen_with_effect(xs, log):
    for x in xs:
        log.append(len(log))  # interleaves with the consumer's appends
        yield x


def _consume_effectful(x, ys):
    log = []
    out = []
    for v in _gen_with_effect(ys, log):
        log.append("consumer")
        out.append(v + x)
    return out[0] + out[-1], log


def _gen_printing(xs):
    for x in xs:
        print("yield")
        yield x


def _consume_printing(x, ys):
    return sum(_gen_printing(ys)) + x


def test_generators_consumed_in_the_trace_compile_whole():
    dt.reset()
    seed(18201)
    plain = fresh_copy(_consume_generators)
    compiled = dt.jit(_consume_generators)
    for n in (3, 5):
        x = rand_tensor((4,))
        ys = [rand_tensor((4,)) for _ in range(n)]
        assert_close(compiled(x, ys), plain(x, ys))
    s = dt.stats()
    assert s["graph_breaks"] == 0 and s["fallbacks"] == 0, s["break_reasons"]


def test_generators_with_effects_or_breaks_keep_cpythons_order():
    import contextlib
    import io
    dt.reset()
    seed(18202)
    x = rand_tensor((2,))
    ys = [rand_tensor((2,)) for _ in range(3)]
    got, log_got = dt.jit(_consume_effectful)(x, ys)
    want, log_want = fresh_copy(_consume_effectful)(x, ys)
    assert_close(got, want)
    assert log_got == log_want, (log_got, log_want)
    out_got, out_want = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out_got):
        got = dt.jit(_consume_printing)(x, ys)
    with contextlib.redirect_stdout(out_want):
        want = fresh_copy(_consume_printing)(x, ys)
    assert_close(got, want)
    assert out_got.getvalue() == out_want.getvalue() == "yield\n" * 3
    reasons = " ".join(dt.stats()["break_reasons"])
    assert "generator" in reasons or "print" in reasons, reasons


# ---------------------------------------------------------------------------------------------
# Objects made inside compiled code: a plain class or a dataclass called in the trace is built
# with its attributes where it leaves (returned, stored, in a frame state), without a break.

@dataclasses.dataclass
class ModelOutput:
    logits: object
    loss: object = None
    extras: tuple = ()


@dataclasses.dataclass(frozen=True)
class FrozenOutput:
    value: object


class Point2:
    def __init__(self, x, y):
        self.x = x
        self.y = y

    def norm2(self):
        return self.x * self.x + self.y * self.y


class Node2:
    pass


class WithSlots:
    __slots__ = ("v",)

    def __init__(self, v):
        self.v = v


class InitReturns:
    def __init__(self, v):
        self.v = v
        return 1


def builds_objects(a, b):
    p = Point2(a, b * 2)
    out = ModelOutput(p.norm2(), loss=(a - b).sum())
    n = Node2()
    n.me = n
    n.point = p
    return out, p, n, isinstance(out, ModelOutput), out.loss is not None


def builds_unusual_objects(a):
    return WithSlots(a + 1).v


@dataclasses.dataclass
class WithFactory:
    width: int
    tags: list = dataclasses.field(default_factory=list)
    scale: float = 0.5


def builds_frozen_and_factory_dataclasses(a):
    out = FrozenOutput(a * 2)
    cfg = WithFactory(3)
    cfg.tags.append("seen")
    return out, out.value * cfg.scale, cfg, cfg.tags


def assigns_to_a_frozen_dataclass(a):
    out = FrozenOutput(a * 2)
    out.value = a
    return out


def init_returns_a_value(a):
    return InitReturns(a)


def test_objects_made_in_the_trace_compile_whole():
    for backend in ("eager", "cpu"):
        dt.reset()
        jfn = jitted_copy(builds_objects, backend=backend)
        run_differential(builds_objects, jfn, lambda i: Call(rand_tensor((3,)), rand_tensor((3,))), 3, seed_base=41)
        s = stats()
        assert s["graph_breaks"] == 0 and s["fallbacks"] == 0, s["break_reasons"]
        out = jfn(dt.ones(2), dt.ones(2))
        assert type(out[0]) is ModelOutput and type(out[1]) is Point2 and out[2].me is out[2]
        assert out[2].point is out[1] and out[0] is not jfn(dt.ones(2), dt.ones(2))[0]


def test_frozen_dataclasses_and_default_factories_compile_whole():
    # A frozen dataclass's __init__ sets its fields through object.__setattr__; a
    # default_factory's sentinel default and factory are read through the class's __init__.
    for backend in ("eager", "cpu"):
        dt.reset()
        jfn = jitted_copy(builds_frozen_and_factory_dataclasses, backend=backend, fullgraph=True)
        run_differential(builds_frozen_and_factory_dataclasses, jfn, lambda i: Call(rand_tensor((3,))), 3,
                         seed_base=44, exact=True)
        assert stats()["graph_breaks"] == 0 and stats()["graphs"] == 1, stats()
        out, _, cfg, tags = jfn(rand_tensor((3,)))
        assert cfg.tags is tags and tags == ["seen"]
        # What left the trace is a frozen instance like CPython's.
        assert_raises(dataclasses.FrozenInstanceError, setattr, out, "value", 1, match="cannot assign to field 'value'")
        # Assigning to a field inside the function raises as in CPython (CPython runs that part).
        run_differential(assigns_to_a_frozen_dataclass, jitted_copy(assigns_to_a_frozen_dataclass, backend=backend),
                         lambda i: Call(rand_tensor((3,))), 2, seed_base=45)


def test_objects_the_trace_cannot_make_run_in_cpython_with_its_results():
    # A slotted class has no __dict__, an __init__ that returns a value raises TypeError:
    # CPython runs those.
    for backend in ("eager", "cpu"):
        dt.reset()
        run_differential(builds_unusual_objects, jitted_copy(builds_unusual_objects, backend=backend),
                         lambda i: Call(rand_tensor((3,))), 2, seed_base=42)
        run_differential(init_returns_a_value, jitted_copy(init_returns_a_value, backend=backend),
                         lambda i: Call(rand_tensor((3,))), 2, seed_base=43)


def _scaled_until_large(x, xs):
    for a in xs:
        x = x * a
        if x.sum().item() > 100:
            x = x / 2
    return x


def test_guards_of_resumed_segments_name_values_as_the_code_does():
    # A segment that starts inside a loop finds the loop's iterator and the item it just made on
    # the value stack; its guards say `iter(xs)` and `x.sum().item()`, not stack slots or
    # dyntrace's class names.
    f = dt.jit(_scaled_until_large)
    x, xs = rand_tensor((3,)), [1.0, 2.0, 3.0]
    assert_close(f(x, xs), fresh_copy(_scaled_until_large)(x, xs))
    text = "\n".join(dt.guards(f))
    assert "type(iter(xs)) is dyntrace.loop_iterator" in text, text
    assert "type(next(iter(xs))) is float" in text, text
    assert "type(x.sum().item()) is float" in text, text
    assert "S[" not in text and "_Resume" not in text, text
