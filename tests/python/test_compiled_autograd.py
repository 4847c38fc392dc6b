"""Compiled autograd (issue 22): a dt.jit function whose inputs require grad compiles into a
forward graph and a backward graph built from the registry's derivative formulas, split by the
min-cut partitioner; its outputs get one CompiledFunctionBackward node.

References are independent of the compiled backward: central finite differences in float64
(dyntrace.autograd.gradcheck, whose docstring gives the error model), and eager autograd on an
unmarked copy of the function. Compiled and eager backward run the same formulas in the same
order on the same float32 values except where the compiled graph decomposes a composite, so
their float32 gradients agree to a few ulps of the values summed: the tolerance below is
n * 2**-24 relative for the n-term sums in these small graphs."""
import dyntrace as dt
from dyntrace import nn
from dyntrace.autograd import gradcheck
from jitlib import fresh_copy
from testlib import assert_raises

F = nn.functional
F64 = dt.float64
BACKENDS = ("eager", "cpu")


def leaf(*shape, dtype=dt.float32, scale=1.0):
    return (dt.randn(*shape, dtype=dtype) * scale).requires_grad_()


def counts():
    s = dt.stats()
    return {k: s[k] for k in ("graphs", "fallbacks", "graph_breaks", "backward_graphs", "compiled_backward_runs")}


def mlp_loss(x, w1, b1, w2, b2, y):
    h = F.gelu(F.layer_norm(x @ w1 + b1, (w1.shape[1],)))
    return F.cross_entropy(h @ w2 + b2, y)


def attention(q, k, v):
    scores = (q @ k.transpose(-2, -1)) * (q.shape[-1] ** -0.5)
    return dt.softmax(scores, -1) @ v


def gathers_and_lists(x, w, idx):
    rows = x.gather(1, idx) * w
    return dt.cat([rows, rows.sin()], 1).sum(0), dt.stack([x.mean(1), x.amax(1)])


def pointwise_chain(x, w):
    return ((x * w).tanh() * 2 + 1).exp().sigmoid().sum()


def silu_gate(x, w):
    return (F.silu(x * w) * x).sum()


CASES = [
    ("mlp", mlp_loss, lambda d: (leaf(4, 6, dtype=d), leaf(6, 8, dtype=d, scale=0.3), leaf(8, dtype=d),
                                 leaf(8, 3, dtype=d, scale=0.3), leaf(3, dtype=d), dt.tensor([0, 2, 1, 2]))),
    ("attention", attention, lambda d: (leaf(2, 3, 4, dtype=d), leaf(2, 3, 4, dtype=d), leaf(2, 3, 4, dtype=d))),
    ("gathers", gathers_and_lists, lambda d: (leaf(3, 5, dtype=d), leaf(1, 2, dtype=d),
                                              dt.tensor([[0, 4], [1, 1], [3, 2]]))),
    ("pointwise", pointwise_chain, lambda d: (leaf(5, 4, dtype=d), leaf(4, dtype=d))),
    ("silu", silu_gate, lambda d: (leaf(5, 4, dtype=d), leaf(4, dtype=d))),
]


def test_gradients_match_finite_differences_on_every_backend():
    for name, fn, make in CASES:
        for backend in BACKENDS:
            dt.reset()
            dt.manual_seed(3)
            jfn = dt.jit(fresh_copy(fn), backend=backend)
            gradcheck(jfn, make(F64))
            assert dt.stats()["backward_graphs"] >= 1, (name, backend, dt.stats()["fallback_reasons"])


def test_gradients_match_eager_autograd_and_compile_whole():
    for name, fn, make in CASES:
        for backend in BACKENDS:
            dt.reset()
            dt.manual_seed(5)
            inputs = make(dt.float32)
            plain_out = fn(*inputs)
            plain_out = plain_out if isinstance(plain_out, tuple) else (plain_out,)
            sum(o.sum() for o in plain_out).backward()
            expected = [t.grad.clone() if t.grad is not None else None for t in inputs if isinstance(t, dt.Tensor)]
            for t in inputs:
                t.grad = None
            jfn = dt.jit(fresh_copy(fn), backend=backend)
            out = jfn(*inputs)
            out = out if isinstance(out, tuple) else (out,)
            for o in out:
                assert o.grad_fn is not None and o.grad_fn.name() == "CompiledFunctionBackward", (name, o.grad_fn)
            sum(o.sum() for o in out).backward()
            for t, e in zip([t for t in inputs if isinstance(t, dt.Tensor)], expected):
                if e is None:
                    assert t.grad is None, name
                    continue
                tol = 64 * 2.0 ** -24 * (float(e.abs().max()) + 1.0)
                assert float((t.grad - e).abs().max()) <= tol, (name, backend, t.grad, e)
            c = counts()
            assert c["graphs"] == 1 and c["fallbacks"] == 0 and c["graph_breaks"] == 0, (name, backend, c)
            assert c["backward_graphs"] == 1 and c["compiled_backward_runs"] == 1, (name, backend, c)


def cheap_chain(x, w):
    return ((x * w - 1).relu() * 2 + x).square().sum()


def test_partitioner_recomputes_cheap_pointwise_chains_and_keeps_gradients():
    dt.reset()
    dt.manual_seed(7)
    x, w = leaf(64, 32), leaf(32)
    jfn = dt.jit(fresh_copy(cheap_chain), backend="cpu")
    jfn(x, w).backward()
    s = dt.stats()
    # Saving every value the formulas read keeps the chain's intermediates (64 x 32 float32
    # each: relu's output, square's input); recomputing them from x and w (free: the caller's
    # tensors) saves none.
    assert s["save_everything_bytes"] >= 2 * 64 * 32 * 4, s["save_everything_bytes"]
    assert s["saved_bytes"] == 0 and s["recomputed_nodes"] > 0, (s["saved_bytes"], s["recomputed_nodes"])
    got = [x.grad.clone(), w.grad.clone()]
    x.grad = w.grad = None
    cheap_chain(x, w).backward()
    for g, e in zip(got, [x.grad, w.grad]):
        assert float((g - e).abs().max()) <= 64 * 2.0 ** -24 * (float(e.abs().max()) + 1.0)


def exp_of_product(x, w, v):
    return ((x @ w).exp() * v).sum()


def gelu_of_product(x, w, v):
    return (F.gelu(x @ w) @ v).sum()  # v's gradient reads gelu's result


def test_partitioner_recomputes_transcendentals_only_from_values_backward_has():
    # A transcendental's result (kCostlyElement) is recomputed only when its operands are
    # there anyway: gelu's backward reads its input (x @ w, saved) and v's gradient reads its
    # result, which is recomputed from that input rather than kept too; exp's backward reads
    # only its result, so keeping that beats keeping the product it would be recomputed from.
    # Both against eager autograd on the same leaves.
    for fn, v_shape, formulas_read in ((exp_of_product, (64, 48), 1), (gelu_of_product, (48, 5), 2)):
        dt.reset()
        dt.manual_seed(11)
        x, w, v = leaf(64, 32), leaf(32, 48, scale=0.2), leaf(*v_shape)
        jfn = dt.jit(fresh_copy(fn), backend="cpu")
        jfn(x, w, v).backward()
        s = dt.stats()
        one_tensor = 64 * 48 * 4  # float32 [64, 48]: exp's result, or gelu's input
        assert s["saved_bytes"] == one_tensor, (fn.__name__, s["saved_bytes"], s["save_everything_bytes"])
        assert s["save_everything_bytes"] == formulas_read * one_tensor, s["save_everything_bytes"]
        got = [t.grad.clone() for t in (x, w, v)]
        x.grad = w.grad = v.grad = None
        fn(x, w, v).backward()
        for g, e in zip(got, [x.grad, w.grad, v.grad]):
            # sums of at most 64 float32 products: within 64 ulp of the largest gradient.
            assert float((g - e).abs().max()) <= 64 * 2.0 ** -24 * float(e.abs().max()), fn.__name__


def residual_square(x, w, b):
    z = x @ w + b      # backward reads z (square's formula); saving z or x @ w costs the same
    return z.square().sum()


def test_partitioner_takes_the_tied_cut_that_recomputes_least():
    # Saving the product or the sum made from it (with b, a caller's tensor, free) are minimum
    # cuts of equal bytes: the one nearest backward saves z itself and recomputes nothing.
    dt.reset()
    dt.manual_seed(5)
    x, w, b = leaf(64, 32), leaf(32, 48), leaf(48)
    jfn = dt.jit(fresh_copy(residual_square), backend="cpu")
    jfn(x, w, b).backward()
    s = dt.stats()
    assert s["saved_bytes"] == 64 * 48 * 4 and s["recomputed_nodes"] == 0, (s["saved_bytes"], s["recomputed_nodes"])
    got = [t.grad.clone() for t in (x, w, b)]
    x.grad = w.grad = b.grad = None
    residual_square(x, w, b).backward()
    for g, e in zip(got, [x.grad, w.grad, b.grad]):
        # sums of at most 64 products of float32 values: within 64 ulp of the largest gradient.
        assert float((g - e).abs().max()) <= 64 * 2.0 ** -24 * float(e.abs().max())


def attention(q, k, v):
    return (F.scaled_dot_product_attention(q, k, v, is_causal=True) * v).sum()


def test_attention_backward_recomputes_the_weights():
    # scaled_dot_product_attention without dropout is `_fused_attention`, which declares its own
    # formula (flash attention's): the forward graph is that one node and keeps q, k and v for
    # backward, never the [L, S] weights, which the backward recomputes (the exp of the scores)
    # and differentiates with softmax's formula, y (g - sum(g y)).
    dt.reset()
    dt.manual_seed(3)
    q, k, v = leaf(2, 3, 16, 8), leaf(2, 3, 16, 8), leaf(2, 3, 16, 8)
    jfn = dt.jit(fresh_copy(attention), backend="cpu")
    jfn(q, k, v).backward()
    backward = str(dt.graphs(jfn, backward=True)[0])
    forward = str(dt.graphs(jfn)[0])
    assert "_fused_attention(" in forward and "softmax(" not in forward, forward
    assert "exp(" in backward and "matmul(" in backward, backward
    # q, k, v and the result (read by `* v`): 4 tensors of 2 * 3 * 16 * 8 float32; the weights
    # (2 * 3 * 16 * 16) are not among them.
    assert dt.stats()["saved_bytes"] <= 4 * 2 * 3 * 16 * 8 * 4, dt.stats()["saved_bytes"]
    got = [t.grad.clone() for t in (q, k, v)]
    q.grad = k.grad = v.grad = None
    attention(q, k, v).backward()
    for g, e in zip(got, [q.grad, k.grad, v.grad]):
        # sums of at most 16 products per row, twice through matmuls: within 64 ulp of the largest.
        assert float((g - e).abs().max()) <= 64 * 2.0 ** -24 * float(e.abs().max())


def deep_tanh(x, ws):
    for w in ws:
        x = (x @ w).tanh()
    return x.sum()


def test_backward_frees_saved_values_as_it_consumes_them():
    # Eight layers save eight activations; backward makes eight weight gradients. Handed to the
    # backward graph, each activation is freed after its last reader, so the gradients take
    # their place: the pass adds about two buffers to what was allocated when it started. With
    # retain_graph=True the node must keep them all, and the gradients come on top.
    one = 256 * 256 * 4
    dt.manual_seed(4)
    x = dt.randn(256, 256) * 0.1
    ws = [leaf(256, 256, scale=0.05) for _ in range(8)]
    jfn = dt.jit(fresh_copy(deep_tanh), backend="cpu")
    peaks = {}
    for retain in (True, False):
        for w in ws:
            w.grad = None
        loss = jfn(x, ws)
        dt.reset_peak_memory_stats()
        held = dt.memory_allocated()
        loss.backward(retain_graph=retain)
        peaks[retain] = (dt.max_memory_allocated() - held) / one
        del loss
    assert peaks[True] >= 8 and peaks[False] <= 3, peaks
    expected = [w.grad.clone() for w in ws]
    for w in ws:
        w.grad = None
    deep_tanh(x, ws).backward()
    for g, e in zip(expected, [w.grad for w in ws]):
        # sums of 256 float32 products per element, through eight layers: within 8 * 256 ulp.
        assert float((g - e).abs().max()) <= 8 * 256 * 2.0 ** -24 * float(e.abs().max())


def test_reductions_and_matmuls_are_saved_not_recomputed():
    dt.reset()
    dt.manual_seed(9)
    x, w = leaf(16, 8), leaf(8, 8)

    def f(x, w):
        h = x @ w             # a matmul: saved when backward needs it
        return (h.tanh() * h.sum(1, keepdim=True)).sum()
    jfn = dt.jit(fresh_copy(f), backend="eager")
    jfn(x, w).backward()
    s = dt.stats()
    assert 0 < s["saved_bytes"] <= s["save_everything_bytes"], (s["saved_bytes"], s["save_everything_bytes"])
    graph = str(dt.graphs(jfn)[0])
    assert "matmul" in graph


def make_classifier():
    return nn.Sequential(nn.Linear(16, 32), nn.LayerNorm(32), nn.GELU(), nn.Linear(32, 32), nn.LayerNorm(32),
                         nn.GELU(), nn.Linear(32, 4))


def test_mlp_training_losses_equal_eager_with_dropout():
    def loss_fn(model, x, y):
        return F.cross_entropy(F.dropout(model(x), 0.1, training=True), y)

    dt.manual_seed(1)
    data = [(dt.randn(24, 16), dt.randint(0, 4, (24,))) for _ in range(4)]
    for backend in BACKENDS:
        losses = {}
        for mode in ("plain", "jit"):
            dt.reset()
            dt.manual_seed(0)
            model = make_classifier()
            opt = dt.optim.AdamW(model.parameters(), lr=1e-2)
            fn = dt.jit(fresh_copy(loss_fn), backend=backend) if mode == "jit" else loss_fn
            losses[mode] = []
            for step in range(12):
                x, y = data[step % len(data)]
                opt.zero_grad()
                loss = fn(model, x, y)
                loss.backward()
                opt.step()
                losses[mode].append(loss.item())
            if mode == "jit":
                c = counts()
                assert c["graphs"] == 1 and c["graph_breaks"] == 0 and c["fallbacks"] == 0, (backend, c)
                assert c["compiled_backward_runs"] == 12, (backend, c)
        # Same formulas on the same values; the compiled graph decomposes composites, so the
        # losses drift by float32 rounding only (the bar: 2e-3 relative).
        for a, b in zip(losses["plain"], losses["jit"]):
            assert abs(a - b) <= 1e-4 * abs(a), (backend, losses)
        assert losses["plain"][-1] < losses["plain"][0], losses["plain"]


def test_backward_twice_needs_retain_graph_and_saved_values_are_version_checked():
    def f(x, w):
        return ((x @ w).tanh() * x.sum()).sum()
    for backend in BACKENDS:
        dt.reset()
        x, w = leaf(3, 4), leaf(4, 2)
        jfn = dt.jit(fresh_copy(f), backend=backend)
        loss = jfn(x, w)
        loss.backward(retain_graph=True)
        first = w.grad.clone()
        loss.backward()
        assert float((w.grad - 2 * first).abs().max()) <= 1e-5 * (float(first.abs().max()) + 1)
        assert_raises(RuntimeError, loss.backward, match=("backward through the graph a second time",))
        y = dt.randn(3, 4)
        loss = jfn(y, w)
        with dt.no_grad():
            y.mul_(2)  # a value the backward graph reads, changed after the forward ran
        assert_raises(RuntimeError, loss.backward, match=("modified by an inplace operation",))


def test_create_graph_through_a_compiled_function_raises_clearly():
    dt.reset()
    x = leaf(3)
    jfn = dt.jit(fresh_copy(lambda x: (x * x).sum()), backend="eager")
    loss = jfn(x)
    assert_raises(NotImplementedError, dt.autograd.grad, loss, [x], create_graph=True,
                  match=("create_graph=True through a compiled function",))


def test_graph_break_and_grad_mode_change_compile_each_side():
    def with_print(x, w):
        h = (x * w).sin()
        print("between")
        return (h * h).sum()

    def with_no_grad(x, w):
        h = (x * w).sin()
        with dt.no_grad():
            scale = h.abs().amax() + 1
        return (h * scale).sum()

    for fn in (with_print, with_no_grad):
        for backend in BACKENDS:
            dt.reset()
            dt.manual_seed(11)
            x, w = leaf(4, 3), leaf(3)
            fn(x, w).backward()
            expected = [x.grad.clone(), w.grad.clone()]
            x.grad = w.grad = None
            jfn = dt.jit(fresh_copy(fn), backend=backend)
            jfn(x, w).backward()
            for g, e in zip([x.grad, w.grad], expected):
                assert float((g - e).abs().max()) <= 64 * 2.0 ** -24 * (float(e.abs().max()) + 1.0), fn.__name__
            assert dt.stats()["backward_graphs"] >= 1, (fn.__name__, dt.stats()["fallback_reasons"])


def test_new_sizes_recompile_and_inputs_without_grad_do_not_split():
    def f(x, w):
        return (x @ w).relu().sum()
    dt.reset()
    jfn = dt.jit(fresh_copy(f), backend="eager")
    w = leaf(4, 2)
    jfn(dt.randn(3, 4), w).backward()
    jfn(dt.randn(5, 4), w).backward()   # the backward graph is built for the traced sizes
    s = dt.stats()
    assert s["backward_graphs"] >= 2 and s["compiled_backward_runs"] == 2, s
    with dt.no_grad():
        out = jfn(dt.randn(3, 4), w)
    assert out.grad_fn is None and not out.requires_grad
    assert dt.stats()["compiled_backward_runs"] == 2


def test_fullgraph_forward_with_inputs_requiring_grad():
    dt.reset()
    jfn = dt.jit(fresh_copy(mlp_loss), backend="cpu", fullgraph=True)
    inputs = CASES[0][2](dt.float32)
    jfn(*inputs).backward()
    assert all(t.grad is not None for t in inputs[:5])


def test_parameters_entering_traces_keep_their_flag():
    # Tensors that require grad enter traces now; nn.Parameter's isinstance reads the tensor's
    # parameter flag through its metaclass, which a traced value's stand-in does not carry (it
    # answered False, and building nn.Linear under dt.enable() raised TypeError).
    def is_param(v):
        return isinstance(v, nn.Parameter), isinstance(v, (dt.Tensor, int))

    dt.reset()
    p = nn.Parameter(dt.zeros(2))
    plain = fresh_copy(is_param)(p)
    assert plain == (True, True)
    assert dt.jit(fresh_copy(is_param))(p) == plain
    dt.enable()
    try:
        layer = nn.Linear(3, 4)
    finally:
        dt.disable()
    assert isinstance(layer.weight, nn.Parameter) and layer.weight.requires_grad


class Sampler(dt.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = dt.nn.Linear(4, 6)

    @dt.no_grad()
    def generate(self, x, steps):
        for _ in range(steps):
            logits = self.proj(x)
            top, _ = dt.topk(logits, 2)
            logits[logits < top[:, [-1]]] = float("-inf")  # an in-place write no backward could take
            x = x + dt.softmax(logits, -1)[:, :4]
        return x


def first_read_inside_no_grad(model, x):
    with dt.no_grad():
        y = model.proj(x)
    return (model.proj.weight * 2).sum() + y.sum()  # the weight again, with grad mode on


def test_parameters_read_inside_no_grad_are_not_followed_by_autograd():
    # A @no_grad method of a model whose parameters require grad (a language model's generate):
    # the parameters enter the trace with grad mode off, so no backward is built for them and
    # the in-place masking compiles whole. A parameter first read inside no_grad and used again
    # after it with grad mode on is a break there, and its gradient stays right.
    dt.manual_seed(4)
    model = Sampler()
    x = dt.randn(3, 4)
    want = fresh_copy(Sampler.generate.__wrapped__)(model, x, 3)
    dt.reset()
    got = dt.jit(model.generate, backend="cpu")(x, 3)
    assert (got - want).abs().max().item() <= 1e-6 and not got.requires_grad
    s = dt.stats()
    assert s["graph_breaks"] == 0 and s["fallbacks"] == 0, s["break_reasons"]
    dt.reset()
    loss = dt.jit(fresh_copy(first_read_inside_no_grad), backend="cpu")(model, x)
    loss.backward()
    assert model.proj.weight.grad.tolist() == dt.full((6, 4), 2.0).tolist()
    reasons = " ".join(dt.stats()["break_reasons"])
    assert "first read while grad mode was off" in reasons, reasons


def test_in_place_changes_to_followed_values_are_functionalised():
    # `out += shortcut` (a ResNet block's residual add) on a value autograd follows: eagerly the
    # add is recorded as out's new history, so both operands get gradients; compiled, the add is
    # traced out of place with `out` rebound to its result, so the joint graph holds no write
    # and the whole step (or the loss alone) compiles.
    def step(x, w, s):
        out = x * w
        out += s
        out *= 2.0
        loss = dt.relu(out).square().sum()
        loss.backward()
        return loss.detach()

    def reference(x, w, s):  # the same arithmetic, out of place
        return dt.relu((x * w + s) * 2.0).square().sum()

    dt.manual_seed(41)
    x = dt.randn(5, 3)
    w, s = leaf(3), leaf(5, 3)
    ref = reference(x, w, s)
    ref.backward()
    expected = (w.grad.tolist(), s.grad.tolist())
    for backend in BACKENDS:
        for fullgraph in (False, True):
            w.grad, s.grad = None, None
            fn = dt.jit(fresh_copy(step), backend=backend, fullgraph=fullgraph)
            before = counts()
            loss = fn(x, w, s)
            grew = {k: counts()[k] - before[k] for k in before}
            assert grew["graph_breaks"] == 0 and grew["fallbacks"] == 0, (backend, dt.stats()["break_reasons"])
            # Same ops in the same order as the reference: equal, not merely close.
            assert loss.item() == ref.item() and (w.grad.tolist(), s.grad.tolist()) == expected, backend
    w.grad, s.grad = None, None
    step(x, w, s)  # eagerly: `+=` records autograd (it once wrote in place without a history)
    assert (w.grad.tolist(), s.grad.tolist()) == expected


def test_in_place_change_of_a_saved_value_raises_as_eagerly():
    # relu saves its output for backward; changing it in place makes backward raise eagerly, so
    # the compiled function must not compute a gradient instead: it leaves that write to eager
    # code, which raises the same error.
    def step(a, b, w):
        h = dt.relu(a * w)
        h += b
        h.square().sum().backward()

    dt.manual_seed(42)
    a, b, w = dt.randn(4, 3), dt.randn(4, 3), leaf(3)
    eager = assert_raises(RuntimeError, step, a, b, w, match="modified by an inplace operation")
    for backend in BACKENDS:
        compiled = assert_raises(RuntimeError, dt.jit(fresh_copy(step), backend=backend), a, b, w,
                                 match="modified by an inplace operation")
        assert str(compiled) == str(eager)


def test_gradients_through_several_subscripts_of_one_tensor():
    # An RNN reads its projected inputs step by step (p[0], p[1], ...): each subscript's gradient
    # is written into zeros of p's shape, and the zeros tensors look alike. They must stay apart:
    # merged, every write landed in one buffer and the sum of the four counted it four times.
    # Reference: d/dw sum_t (t + 1) * (x @ w)[t] = x^T c with c[t] = t + 1, in plain Python.
    def step(x, w):
        p = x @ w
        total = p[0] * 1.0
        for t in range(1, 4):
            total = total + p[t] * (t + 1.0)
        loss = total.sum()
        loss.backward()
        return loss.detach()

    dt.manual_seed(43)
    x = dt.randn(4, 3)
    rows = x.tolist()
    expected = [[sum((t + 1.0) * rows[t][i] for t in range(4))] * 2 for i in range(3)]
    for backend in BACKENDS:
        w = leaf(3, 2)
        dt.jit(fresh_copy(step), backend=backend, fullgraph=True)(x, w)
        got = w.grad.tolist()
        # Each entry sums 4 products in float32: within 4 * 2^-24 of the largest partial sum.
        assert all(abs(a - b) <= 4 * 2 ** -24 * 40 for r, e in zip(got, expected) for a, b in zip(r, e)), (backend, got)
