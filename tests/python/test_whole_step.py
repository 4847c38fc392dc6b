"""Whole training steps compiled (issue 22): dt.jit of a function that runs the forward,
loss.backward(), the optimizer's step() and zero_grad() captures all of it in one graph; the
gradients are appended to the graph from the registry's formulas, and parameters, .grad and the
optimizer's state are updated after it as the eager code would have left them.

The reference is the same step run plainly (eager autograd, the optimizer's own eager update) on
a second model with the same seed and data. Both run the same formulas on the same float32
values; they differ where the compiled graph fuses (float64 accumulation inside kernels) and in
Adam's bias corrections, which compiled code computes from the step count as float32 tensors
(PyTorch's capturable rule) instead of Python floats: 1 - 0.999**t carries float32's 2**-24
relative error of 0.999**t, amplified by 1/(1 - 0.999**t) <= 1000 at t = 1, so the step size
may differ by ~6e-5 relative, ~6e-7 absolute per step at lr 1e-2. Losses agree to 1e-4
relative, parameters to 2e-5 absolute over the dozen steps below."""
from collections import defaultdict

import dyntrace as dt
from dyntrace import nn
from jitlib import fresh_copy
from testlib import assert_raises

F = nn.functional
BACKENDS = ("eager", "cpu")


def make_classifier():
    return nn.Sequential(nn.Linear(16, 32), nn.LayerNorm(32), nn.GELU(), nn.Dropout(0.1), nn.Linear(32, 4))


def data(n=4):
    dt.manual_seed(1)
    return [(dt.randn(24, 16), dt.randint(0, 4, (24,))) for _ in range(n)]


def train_step(model, opt, x, y):
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss.detach()


def run(step_fn, make_opt, steps=12, scheduler=None):
    """Losses, the model and the optimizer after `steps` steps of `step_fn` from seed 0."""
    dt.manual_seed(0)
    model = make_classifier()
    opt = make_opt(model.parameters())
    sched = scheduler(opt) if scheduler else None
    losses = []
    batches = data()
    dt.manual_seed(2)  # dropout's draws: the same stream for both runs
    for step in range(steps):
        x, y = batches[step % len(batches)]
        losses.append(step_fn(model, opt, x, y).item())
        if sched is not None:
            sched.step()
    return losses, model, opt


def assert_same_training(plain, compiled, what):
    (losses_a, model_a, opt_a), (losses_b, model_b, opt_b) = plain, compiled
    for a, b in zip(losses_a, losses_b):
        assert abs(a - b) <= 1e-4 * abs(a), (what, losses_a, losses_b)
    for (name, p), q in zip(model_a.named_parameters(), model_b.parameters()):
        assert (p - q).abs().max().item() <= 2e-5, (what, name)
        assert q.grad is not None and (p.grad - q.grad).abs().max().item() <= 2e-5, (what, name)
    state_a = [opt_a.state[p] for p in model_a.parameters()]
    state_b = [opt_b.state[p] for p in model_b.parameters()]
    for sa, sb in zip(state_a, state_b):
        assert sorted(sa) == sorted(sb), (what, sorted(sa), sorted(sb))
        for key in sa:
            assert (sa[key] - sb[key]).abs().max().item() <= 2e-5, (what, key)
    assert losses_a[-1] < losses_a[0], losses_a


def test_adamw_step_compiles_whole_and_matches_plain_steps():
    make_opt = lambda params: dt.optim.AdamW(params, lr=1e-2, weight_decay=0.05)  # noqa: E731
    plain = run(train_step, make_opt)
    for backend in BACKENDS:
        dt.reset()
        compiled = dt.jit(fresh_copy(train_step), backend=backend, fullgraph=True)
        result = run(compiled, make_opt)
        stats = dt.stats()
        assert stats["graph_breaks"] == 0 and stats["fallbacks"] == 0, (backend, stats["break_reasons"])
        # First call: no .grad and no optimizer state yet; from the second on, both exist.
        assert len(dt.graphs(compiled)) == 2, (backend, stats["recompile_reasons"])
        assert_same_training(plain, result, backend)
        assert result[2].state[next(result[1].parameters())]["step"].item() == 12.0


def test_sgd_momentum_with_a_scheduler_keeps_one_graph():
    make_opt = lambda params: dt.optim.SGD(params, lr=0.1, momentum=0.9)  # noqa: E731
    schedule = lambda opt: dt.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.8)  # noqa: E731
    plain = run(train_step, make_opt, steps=8, scheduler=schedule)
    dt.reset()
    compiled = dt.jit(fresh_copy(train_step), backend="cpu", fullgraph=True)
    result = run(compiled, make_opt, steps=8, scheduler=schedule)
    # The learning rate changes every step: a run-time number after its first change, so the
    # second graph (made when .grad, the momentum buffers and the new lr first appear) serves
    # every later step.
    assert len(dt.graphs(compiled)) == 2, dt.stats()["recompile_reasons"]
    assert_same_training(plain, result, "sgd")


def test_loss_returned_after_backward_cannot_backward_again():
    def step(model, opt, x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    x, y = data(1)[0]
    for fn in (step, dt.jit(fresh_copy(step), backend="cpu", fullgraph=True)):
        dt.manual_seed(0)
        model = make_classifier()
        opt = dt.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(2):
            loss = fn(model, opt, x, y)
        assert loss.requires_grad and loss.grad_fn is not None
        assert not loss.detach().requires_grad
        assert_raises(RuntimeError, loss.backward, match="backward through the graph a second time")


def test_gradients_stored_without_a_copy_never_share_storage():
    # A fresh contiguous gradient becomes .grad as it is (no copy); add() hands one gradient
    # (here w, made by the backward) to both operands, and a sum's gradient is a view of the
    # seed: those must still be copies, so that changing one .grad in place (clipping, a second
    # accumulation) leaves the others as they were.
    def step(a, b, c, w):
        a.grad = None
        b.grad = None
        c.grad = None
        loss = ((a + b) * w).sum() + c.sum()
        loss.backward()
        a.grad.mul_(10.0)
        return a.grad.sum() + b.grad.sum() + c.grad.sum()

    w = dt.arange(6, dtype=dt.float32).reshape(2, 3)
    compiled = dt.jit(fresh_copy(step), backend="cpu", fullgraph=True)
    for fn in (step, compiled):
        leaves = [dt.ones(2, 3, requires_grad=True) for _ in range(3)]
        for _ in range(2):
            total = fn(*leaves, w)
        assert total.item() == 10 * 15 + 15 + 6, total.item()
        a, b, c = leaves
        assert a.grad.tolist() == (w * 10).tolist() and b.grad.tolist() == w.tolist()
        assert c.grad.tolist() == [[1.0] * 3] * 2
        assert len({t.data_ptr() for t in (a.grad, b.grad, c.grad, w)}) == 4


def test_a_break_inside_a_step_runs_each_side_and_keeps_gradients():
    def step(model, opt, x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        if loss.item() > 1e6:  # a data-dependent branch: the graph breaks here
            loss = loss * 0.0
        loss.backward()
        opt.step()
        return loss.detach()

    make_opt = lambda params: dt.optim.AdamW(params, lr=1e-2)  # noqa: E731
    plain = run(step, make_opt, steps=6)
    dt.reset()
    result = run(dt.jit(fresh_copy(step), backend="cpu"), make_opt, steps=6)
    assert dt.stats()["graph_breaks"] > 0
    assert_same_training(plain, result, "break")
    dt.manual_seed(0)
    model = make_classifier()
    x, y = data(1)[0]
    line = step.__code__.co_firstlineno + 3
    assert_raises(RuntimeError, dt.jit(fresh_copy(step), backend="cpu", fullgraph=True), model,
                  make_opt(model.parameters()), x, y,
                  match=f"Tensor.item() needs the tensor's values, which are only known at run time at {__file__}:{line}")


def keyed(state, a, b):
    """A dict keyed by tensors, as an optimizer's state is: reads, a miss, setdefault and a store."""
    hits = state[a] * 2
    missing = state.get(b, "absent")
    inside = b in state
    state.setdefault(b, a + 1)
    state[a] = hits
    return hits, missing, inside, state[b]


def test_a_dict_keyed_by_tensors_is_read_and_written_per_key():
    for backend in BACKENDS:
        dt.reset()
        compiled = dt.jit(fresh_copy(keyed), backend=backend, fullgraph=True)
        for _ in range(3):
            a, b = dt.ones(3), dt.arange(3.0)
            ours = {a: dt.full((3,), 5.0)}
            plain_state = {a: dt.full((3,), 5.0)}
            expected = keyed(plain_state, a, b)
            got = compiled(ours, a, b)
            assert got[1:3] == expected[1:3] == ("absent", False), (backend, got)
            assert got[0].tolist() == expected[0].tolist() == [10.0] * 3
            assert list(ours) == [a, b] and ours[b].tolist() == plain_state[b].tolist() == [2.0] * 3, backend
            assert ours[a].tolist() == [10.0] * 3
        # The keys are new tensors each call: the guards ask for `a in state` and `b in state`,
        # not for particular objects, so one graph serves them all.
        assert len(dt.graphs(compiled)) == 1, (backend, dt.stats()["recompile_reasons"])


def test_missing_tensor_keys_raise_or_default_as_cpython():
    def read(state, t):
        return state[t]

    def grow(state, t):
        state[t].append(t * 2)
        return len(state[t])

    t = dt.ones(2)
    assert_raises(KeyError, read, {dt.zeros(1): 1}, t)
    assert_raises(KeyError, dt.jit(fresh_copy(read), backend="eager"), {dt.zeros(1): 1}, t)
    plain, ours = defaultdict(list), defaultdict(list)
    compiled = dt.jit(fresh_copy(grow), backend="eager")
    assert [grow(plain, t) for _ in range(2)] == [compiled(ours, t) for _ in range(2)] == [1, 2]
    assert [v.tolist() for v in ours[t]] == [v.tolist() for v in plain[t]] == [[2.0, 2.0]] * 2


def clipped_step(model, opt, x, y):
    opt.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 0.5)
    opt.step()
    return loss.detach()


def test_a_step_clipping_gradients_compiles_whole():
    # nanoGPT's step: zero_grad(set_to_none=True), backward, clip_grad_norm_ over
    # model.parameters() (a module walk that dedupes by id() in generators), AdamW. One program
    # with fullgraph=True, matching the plain steps.
    make_opt = lambda params: dt.optim.AdamW(params, lr=1e-2, weight_decay=0.05)  # noqa: E731
    plain = run(clipped_step, make_opt)
    dt.reset()
    compiled = dt.jit(fresh_copy(clipped_step), backend="cpu", fullgraph=True)
    result = run(compiled, make_opt)
    stats = dt.stats()
    assert stats["graph_breaks"] == 0 and stats["fallbacks"] == 0, stats["break_reasons"]
    assert len(dt.graphs(compiled)) == 2, stats["recompile_reasons"]
    graph = str(dt.graphs(compiled)[1])
    assert "linalg_vector_norm(" in graph and "clamp(" in graph, graph
    assert_same_training(plain, result, "clipped")
