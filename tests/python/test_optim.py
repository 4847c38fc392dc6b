"""dyntrace.optim and dyntrace.optim.lr_scheduler.

Each optimizer is checked step by step against its update rule written out below in plain
Python on lists of floats (an independent reference), over the option combinations that change
the rule, on both paths (the multi-tensor registry op, and the per-tensor path CUDA tensors
take, forced with foreach=False); param groups, state_dict round trips, the multi-tensor ops'
contracts (version counters, errors, traces breaking before them). Schedulers' lr sequences are
checked against their closed forms. Where PyTorch is importable (Debian's python3), the same
steps and schedules are compared with torch.optim; elsewhere those tests skip loudly.
"""
import itertools
import math
import random

import dyntrace as dt
from dyntrace import optim
from dyntrace.optim import lr_scheduler
from testlib import assert_raises, skip

try:
    import torch
except ImportError:  # CPython 3.12 here has no torch
    torch = None

F64 = dt.float64


# ---- references: the rules on lists of floats ----------------------------------------------

def ref_sgd(p, g, buf, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, maximize=False):
    """One SGD step; returns (p, buf) (buf None until momentum makes one)."""
    d = [-x for x in g] if maximize else list(g)
    if weight_decay:
        d = [x + weight_decay * w for x, w in zip(d, p)]
    if momentum:
        buf = list(d) if buf is None else [momentum * b + (1 - dampening) * x for b, x in zip(buf, d)]
        d = [x + momentum * b for x, b in zip(d, buf)] if nesterov else list(buf)
    return [w - lr * x for w, x in zip(p, d)], buf


def ref_adam(p, g, st, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False, maximize=False,
             decoupled=False):
    """One Adam (decoupled: AdamW) step; `st` holds step, m, v, vmax and is updated."""
    b1, b2 = betas
    st["step"] += 1
    t = st["step"]
    d = [-x for x in g] if maximize else list(g)
    if weight_decay:
        if decoupled:
            p = [w * (1 - lr * weight_decay) for w in p]
        else:
            d = [x + weight_decay * w for x, w in zip(d, p)]
    st["m"] = [m + (1 - b1) * (x - m) for m, x in zip(st["m"], d)]
    st["v"] = [b2 * v + (1 - b2) * x * x for v, x in zip(st["v"], d)]
    v = st["v"]
    if amsgrad:
        st["vmax"] = [max(a, b) for a, b in zip(st["vmax"], st["v"])]
        v = st["vmax"]
    step_size = lr / (1 - b1 ** t)
    root = math.sqrt(1 - b2 ** t)
    return [w - step_size * (m / (math.sqrt(s) / root + eps)) for w, m, s in zip(p, st["m"], v)]


def close(got, want, rel=1e-10, abs_=1e-12):
    return len(got) == len(want) and all(abs(a - b) <= abs_ + rel * abs(b) for a, b in zip(got, want))


def grads_for(step, n, seed):
    rng = random.Random(seed * 1000 + step)
    return [rng.uniform(-1.0, 1.0) for _ in range(n)]


def sgd_options():
    for momentum, dampening, nesterov, wd, maximize in itertools.product(
            (0.0, 0.9), (0.0, 0.3), (False, True), (0.0, 0.1), (False, True)):
        if nesterov and (momentum == 0 or dampening != 0):
            continue
        yield dict(momentum=momentum, dampening=dampening, nesterov=nesterov, weight_decay=wd, maximize=maximize)


def adam_options():
    for amsgrad, wd, maximize in itertools.product((False, True), (0.0, 0.05), (False, True)):
        yield dict(amsgrad=amsgrad, weight_decay=wd, maximize=maximize, betas=(0.8, 0.95), eps=1e-6)


def run_against_reference(make_opt, reference_step, dtype=F64, steps=5, rel=1e-10):
    """Two params (a matrix and a vector), `steps` steps with fresh gradients; checks every
    parameter after every step against reference_step(p, g, state) on lists of floats."""
    start = [[0.5, -1.5, 2.0, 0.25, -0.75, 1.0], [0.3, -0.2, 0.1]]
    params = [dt.tensor(start[0], dtype=dtype).view(2, 3).requires_grad_(), dt.tensor(start[1], dtype=dtype)]
    params[1].requires_grad_()
    opt = make_opt(params)
    ref = [[float(x) for x in p.detach().reshape(-1).tolist()] for p in params]
    ref_state = [{} for _ in params]
    for step in range(steps):
        for i, p in enumerate(params):
            g = grads_for(step, p.numel(), i)
            p.grad = dt.tensor(g, dtype=dtype).view(*p.shape)
            g = [float(x) for x in p.grad.reshape(-1).tolist()]  # the values as stored (float16/32 rounding)
            ref[i] = reference_step(ref[i], g, ref_state[i])
        opt.step()
        for i, p in enumerate(params):
            got = p.detach().reshape(-1).tolist()
            assert close(got, ref[i], rel=rel, abs_=rel), (step, i, got, ref[i])
    return opt, params


def sgd_reference(lr, options):
    def step(p, g, st):
        p, st["buf"] = ref_sgd(p, g, st.get("buf"), lr, **options)
        return p
    return step


def adam_reference(lr, options, decoupled):
    def step(p, g, st):
        if not st:
            st.update(step=0, m=[0.0] * len(p), v=[0.0] * len(p), vmax=[0.0] * len(p))
        return ref_adam(p, g, st, lr, decoupled=decoupled, **options)
    return step


# ---- the optimizers against the references ---------------------------------------------------

def test_sgd_matches_its_rule_for_every_option_combination_on_both_paths():
    for options, foreach in itertools.product(list(sgd_options()), (None, False)):
        try:
            run_against_reference(lambda ps: optim.SGD(ps, lr=0.1, foreach=foreach, **options),
                                  sgd_reference(0.1, options))
        except AssertionError as e:
            raise AssertionError(f"SGD {options} foreach={foreach}: {e}") from None


def test_adam_and_adamw_match_their_rules_for_every_option_combination_on_both_paths():
    for cls, options, foreach in itertools.product((optim.Adam, optim.AdamW), list(adam_options()), (None, False)):
        try:
            run_against_reference(lambda ps: cls(ps, lr=0.05, foreach=foreach, **options),
                                  adam_reference(0.05, options, cls is optim.AdamW))
        except AssertionError as e:
            raise AssertionError(f"{cls.__name__} {options} foreach={foreach}: {e}") from None


def test_float32_and_float16_params_update_in_their_own_dtype():
    # The arithmetic is float for both (half is read and rounded back per element, as PyTorch's
    # CPU kernels do); the float64 reference agrees to each dtype's precision.
    for dtype, rel in ((dt.float32, 1e-5), (dt.float16, 2e-2)):
        options = dict(momentum=0.9, nesterov=True, weight_decay=0.1)
        _, params = run_against_reference(lambda ps: optim.SGD(ps, lr=0.1, **options), sgd_reference(0.1, options),
                                          dtype=dtype, rel=rel)
        assert all(p.dtype == dtype for p in params)
        options = dict(amsgrad=True, weight_decay=0.05)
        run_against_reference(lambda ps: optim.AdamW(ps, lr=0.05, **options), adam_reference(0.05, options, True),
                              dtype=dtype, rel=rel, steps=3)


def test_adamw_decays_the_parameter_but_adam_adds_decay_to_the_gradient():
    # With a zero gradient Adam still moves (the decay term is its gradient); AdamW only shrinks.
    for cls in (optim.Adam, optim.AdamW):
        p = dt.tensor([2.0], dtype=F64, requires_grad=True)
        opt = cls([p], lr=0.1, weight_decay=0.5)
        p.grad = dt.zeros(1, dtype=F64)
        opt.step()
        got = p.item()
        # Adam's first step moves each element by lr against the sign of its gradient (here 0.5 * 2).
        want = 2.0 * (1 - 0.1 * 0.5) if cls is optim.AdamW else 2.0 - 0.1
        assert abs(got - want) < 1e-6, (cls.__name__, got, want)


def test_param_groups_use_their_own_options_and_the_defaults():
    a = dt.tensor([1.0, 2.0], dtype=F64, requires_grad=True)
    b = dt.tensor([3.0], dtype=F64, requires_grad=True)
    opt = optim.SGD([{"params": [a]}, {"params": b, "lr": 0.5, "momentum": 0.9}], lr=0.1)
    assert opt.param_groups[0]["lr"] == 0.1 and opt.param_groups[0]["momentum"] == 0
    assert opt.param_groups[1]["lr"] == 0.5 and opt.param_groups[1]["params"] == [b]
    for _ in range(2):
        a.grad = dt.tensor([1.0, -1.0], dtype=F64)
        b.grad = dt.tensor([2.0], dtype=F64)
        opt.step()
    assert close(a.tolist(), [1.0 - 0.2, 2.0 + 0.2])
    assert close(b.tolist(), [3.0 - 0.5 * 2.0 - 0.5 * (0.9 * 2.0 + 2.0)])
    assert "momentum_buffer" not in opt.state.get(a, {}) and "momentum_buffer" in opt.state[b]
    c = dt.tensor([0.0], requires_grad=True)
    opt.add_param_group({"params": [c], "lr": 1.0})
    assert opt.param_groups[2]["momentum"] == 0 and opt.param_groups[2]["lr"] == 1.0
    assert_raises(ValueError, lambda: opt.add_param_group({"params": [a]}), match="more than one")
    assert_raises(ValueError, lambda: optim.SGD([], lr=0.1), match="empty parameter list")
    assert_raises(TypeError, lambda: optim.SGD(a, lr=0.1), match="iterable")
    assert_raises(ValueError, lambda: optim.SGD([a], lr=0.1, nesterov=True), match="Nesterov")
    assert_raises(ValueError, lambda: optim.Adam([a], betas=(1.0, 0.9)), match="beta")


def test_params_without_grad_are_skipped_and_zero_grad_sets_none_or_zeros():
    a = dt.tensor([1.0], requires_grad=True)
    b = dt.tensor([1.0], requires_grad=True)
    opt = optim.Adam([a, b], lr=0.1)
    a.grad = dt.tensor([1.0])
    opt.step()
    assert a.item() < 1.0 and b.item() == 1.0 and b not in opt.state
    assert opt.state[a]["step"].item() == 1.0 and opt.state[a]["step"].dtype == dt.float32
    opt.zero_grad(set_to_none=False)
    assert a.grad.tolist() == [0.0] and b.grad is None
    opt.zero_grad()
    assert a.grad is None


def test_step_with_a_closure_returns_its_loss_with_grad_enabled():
    w = dt.tensor([1.0, -2.0], requires_grad=True)
    opt = optim.SGD([w], lr=0.25)

    def closure():
        opt.zero_grad()
        loss = (w * w).sum()
        loss.backward()
        return loss

    with dt.no_grad():
        loss = opt.step(closure)
    assert loss.item() == 5.0 and close(w.tolist(), [0.5, -1.0])


# ---- state_dict --------------------------------------------------------------------------------

def test_state_dict_has_pytorchs_layout_and_round_trips():
    def make(cls, **kw):
        ps = [dt.tensor([0.5, -1.0], dtype=F64, requires_grad=True), dt.tensor([2.0], dtype=F64, requires_grad=True)]
        return ps, cls([{"params": ps[:1]}, {"params": ps[1:], "lr": 0.01}], lr=0.1, **kw)

    def steps(ps, opt, seeds):
        for s in seeds:
            for i, p in enumerate(ps):
                p.grad = dt.tensor(grads_for(s, p.numel(), i), dtype=F64)
            opt.step()

    for cls, kw in ((optim.SGD, dict(momentum=0.9)), (optim.Adam, dict(amsgrad=True)), (optim.AdamW, {})):
        ps, opt = make(cls, **kw)
        steps(ps, opt, range(3))
        sd = opt.state_dict()
        assert sorted(sd) == ["param_groups", "state"]
        assert [g["params"] for g in sd["param_groups"]] == [[0], [1]] and sd["param_groups"][1]["lr"] == 0.01
        assert sorted(sd["state"]) == [0, 1]
        if cls is not optim.SGD:
            assert sd["state"][0]["step"].item() == 3.0
        ps2, opt2 = make(cls, **kw)
        for p, q in zip(ps2, ps):
            with dt.no_grad():
                p.copy_(q)
        opt2.load_state_dict(sd)
        assert opt2.param_groups[1]["lr"] == 0.01 and opt2.param_groups[0]["params"] == ps2[:1]
        # The loaded state is a copy: stepping the first optimizer does not change it.
        steps(ps, opt, range(3, 5))
        steps(ps2, opt2, range(3, 5))
        for p, q in zip(ps, ps2):
            assert p.tolist() == q.tolist(), (cls.__name__, p.tolist(), q.tolist())
    _, opt = make(optim.SGD)
    assert_raises(ValueError, lambda: opt.load_state_dict({"state": {}, "param_groups": [{"params": [0]}]}),
                  match="number of parameter groups")


# ---- the multi-tensor ops ----------------------------------------------------------------------

def test_one_multi_tensor_op_per_group_updates_every_param():
    # The op itself, called as dyntrace.optim calls it: all params of a group in one call.
    ps = [dt.tensor([1.0, 2.0]), dt.tensor([[3.0]])]
    gs = [dt.tensor([1.0, 1.0]), dt.tensor([[2.0]])]
    bufs = [dt.empty_like(p) for p in ps]
    assert dt._fused_sgd_(ps, gs, bufs, [0, 1], 0.5, 0.9, 0.0, 0.0, False, False) == ()
    assert ps[0].tolist() == [0.5, 1.5] and ps[1].tolist() == [[2.0]] and bufs[1].tolist() == [[2.0]]
    steps = [dt.tensor(0.0), dt.tensor(4.0)]
    ms, vs = [dt.zeros_like(p) for p in ps], [dt.zeros_like(p) for p in ps]
    dt._fused_adam_(ps, gs, ms, vs, [], steps, 0.1, 0.9, 0.999, 0.0, 1e-8, False, False, False)
    assert [s.item() for s in steps] == [1.0, 5.0]  # each param counts its own steps


def test_multi_tensor_ops_bump_versions_and_refuse_what_they_cannot_update():
    p = dt.tensor([1.0, 2.0], requires_grad=True)
    y = (p * p).sum()  # saves p for backward
    opt = optim.SGD([p], lr=0.1)
    p.grad = dt.tensor([1.0, 1.0])
    opt.step()
    assert_raises(RuntimeError, y.backward, match="modified by an inplace operation")
    q = dt.tensor([1.0], requires_grad=True)
    # With grad mode on, arguments that require grad are refused: the ops are not differentiable.
    assert_raises(RuntimeError, lambda: dt._fused_sgd_([q], [dt.ones(1)], [], [], 0.1, 0.0, 0.0, 0.0, False, False),
                  match="no_grad")
    a, b = dt.zeros(2), dt.zeros(3)
    assert_raises(ValueError, lambda: dt._fused_sgd_([a], [b], [], [], 0.1, 0.0, 0.0, 0.0, False, False),
                  match=["grads[0]", "[2]", "[3]"])
    assert_raises(ValueError, lambda: dt._fused_sgd_([a], [dt.zeros(4)[::2]], [], [], 0.1, 0.0, 0.0, 0.0, False,
                                                     False), match="not contiguous")
    assert_raises(ValueError, lambda: dt._fused_sgd_([a, dt.zeros(2, dtype=F64)], [a, a], [], [], 0.1, 0.0, 0.0, 0.0,
                                                     False, False), match="params[1]")
    assert_raises(TypeError, lambda: dt._fused_sgd_([dt.zeros(2, dtype=dt.int32)], [dt.zeros(2, dtype=dt.int32)], [],
                                                    [], 0.1, 0.0, 0.0, 0.0, False, False), match="floating")
    assert_raises(ValueError, lambda: dt._fused_adam_([a], [a], [a], [a], [], [], 0.1, 0.9, 0.9, 0.0, 1e-8, False,
                                                      False, False), match="state_steps")


def test_mixed_layouts_take_the_per_tensor_path():
    # A transposed (non-contiguous) parameter cannot go through the multi-tensor op; the group
    # still updates, by the same rule.
    base = dt.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=F64)
    p = base.T.detach().requires_grad_()
    assert not p.is_contiguous()
    opt = optim.Adam([p], lr=0.1)
    p.grad = dt.ones(2, 2, dtype=F64)
    opt.step()
    assert close(p.reshape(-1).tolist(), [1.0 - 0.1, 3.0 - 0.1, 2.0 - 0.1, 4.0 - 0.1], rel=1e-6)


def test_a_traced_function_breaks_before_an_update_and_runs_it_eagerly():
    def step(ps, gs, lr):
        y = ps[0] * 2
        dt._fused_sgd_(ps, gs, [], [], lr, 0.0, 0.0, 0.0, False, False)
        return y + ps[0]

    f = dt.jit(step, backend="eager")
    p = dt.tensor([1.0, 2.0])
    out = f([p], [dt.tensor([1.0, 1.0])], 0.5)
    assert p.tolist() == [0.5, 1.5] and out.tolist() == [2.5, 5.5], (p.tolist(), out.tolist())
    report = str(dt.explain(step, [dt.tensor([1.0])], [dt.tensor([1.0])], 0.5))
    assert "_fused_sgd_ writes its arguments in place; it runs eagerly" in report, report


# ---- schedulers --------------------------------------------------------------------------------

def lrs(scheduler, opt, n):
    out = [opt.param_groups[0]["lr"]]
    for _ in range(n):
        opt.step()
        scheduler.step()
        out.append(scheduler.get_last_lr()[0])
        assert out[-1] == opt.param_groups[0]["lr"]
    return out


def fresh_opt(lr=0.1):
    return optim.SGD([dt.tensor([1.0], requires_grad=True)], lr=lr)


def all_close(got, want):
    return len(got) == len(want) and all(abs(a - b) <= 1e-12 + 1e-9 * abs(b) for a, b in zip(got, want))


def test_schedulers_follow_their_closed_forms():
    n = 25
    opt = fresh_opt()
    got = lrs(lr_scheduler.StepLR(opt, step_size=4, gamma=0.5), opt, n)
    assert all_close(got, [0.1 * 0.5 ** (e // 4) for e in range(n + 1)]), got
    opt = fresh_opt()
    got = lrs(lr_scheduler.CosineAnnealingLR(opt, T_max=10, eta_min=0.01), opt, n)
    assert all_close(got, [0.01 + 0.09 * (1 + math.cos(math.pi * e / 10)) / 2 for e in range(n + 1)]), got
    opt = fresh_opt()
    got = lrs(lr_scheduler.LambdaLR(opt, lambda e: 1.0 / (1 + e)), opt, n)
    assert all_close(got, [0.1 / (1 + e) for e in range(n + 1)]), got
    opt = fresh_opt()
    got = lrs(lr_scheduler.LinearLR(opt, start_factor=0.25, end_factor=1.0, total_iters=8), opt, n)
    assert all_close(got, [0.1 * (0.25 + 0.75 * min(e, 8) / 8) for e in range(n + 1)]), got


def test_sequential_lr_warms_up_then_anneals():
    opt = fresh_opt()
    warm = lr_scheduler.LinearLR(opt, start_factor=0.1, total_iters=5)
    cos = lr_scheduler.CosineAnnealingLR(opt, T_max=10)
    seq = lr_scheduler.SequentialLR(opt, [warm, cos], milestones=[5])
    got = lrs(seq, opt, 15)
    want = [0.1 * (0.1 + 0.9 * e / 5) for e in range(5)] + [0.1 * (1 + math.cos(math.pi * e / 10)) / 2
                                                             for e in range(11)]
    assert all_close(got, want), got
    assert_raises(ValueError, lambda: lr_scheduler.SequentialLR(opt, [warm, cos], milestones=[]), match="milestone")


def test_scheduler_state_dict_round_trips_and_param_groups_get_their_own_lrs():
    opt = optim.SGD([{"params": [dt.tensor([1.0], requires_grad=True)]},
                     {"params": [dt.tensor([1.0], requires_grad=True)], "lr": 1.0}], lr=0.1)
    s = lr_scheduler.StepLR(opt, step_size=2, gamma=0.1)
    for _ in range(3):
        opt.step()
        s.step()
    assert all_close(s.get_last_lr(), [0.01, 0.1])
    state = s.state_dict()
    assert state["last_epoch"] == 3 and state["base_lrs"] == [0.1, 1.0] and "optimizer" not in state
    opt2 = optim.SGD([dt.tensor([1.0], requires_grad=True)], lr=0.1)
    s2 = lr_scheduler.StepLR(opt2, step_size=99)
    s2.load_state_dict(state)
    assert s2.last_epoch == 3 and s2.step_size == 2
    seq_opt = fresh_opt()
    seq = lr_scheduler.SequentialLR(seq_opt, [lr_scheduler.LinearLR(seq_opt, 0.5, total_iters=2),
                                              lr_scheduler.StepLR(seq_opt, 1, 0.5)], [2])
    sd = seq.state_dict()
    assert len(sd["_schedulers"]) == 2 and "optimizer" not in sd["_schedulers"][0]
    seq.load_state_dict(sd)
    lam = lr_scheduler.LambdaLR(fresh_opt(), lambda e: 1.0)
    assert lam.state_dict()["lr_lambdas"] == [None]
    assert_raises(KeyError, lambda: lr_scheduler.StepLR(fresh_opt(), 2, last_epoch=3), match="initial_lr")


# ---- PyTorch, where importable ----------------------------------------------------------------

def require_torch():
    if torch is None:
        skip("PyTorch is not importable in this interpreter (Debian's python3 has python3-torch); the "
             "comparison with torch.optim did not run")


def _compare_with_torch(make_ours, make_theirs, steps=6):
    start = [[0.5, -1.5, 2.0, 0.25, -0.75, 1.0], [0.3, -0.2, 0.1]]
    ours = [dt.tensor(v, dtype=F64, requires_grad=True) for v in start]
    theirs = [torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in start]
    a, b = make_ours(ours), make_theirs(theirs)
    for step in range(steps):
        for i in range(2):
            g = grads_for(step, len(start[i]), i)
            ours[i].grad = dt.tensor(g, dtype=F64)
            theirs[i].grad = torch.tensor(g, dtype=torch.float64)
        a.step()
        b.step()
        for i in range(2):
            assert close(ours[i].tolist(), theirs[i].tolist(), rel=1e-9), (step, ours[i].tolist(), theirs[i].tolist())


def test_optimizers_match_torch_optim():
    require_torch()
    for options in sgd_options():
        _compare_with_torch(lambda ps: optim.SGD(ps, lr=0.1, **options), lambda ps: torch.optim.SGD(ps, lr=0.1,
                                                                                                    **options))
    for options in adam_options():
        for ours, theirs in ((optim.Adam, torch.optim.Adam), (optim.AdamW, torch.optim.AdamW)):
            _compare_with_torch(lambda ps: ours(ps, lr=0.05, **options), lambda ps: theirs(ps, lr=0.05, **options))


def test_schedulers_match_torch():
    require_torch()

    def pair(make):
        p = dt.tensor([1.0], requires_grad=True)
        q = torch.tensor([1.0], requires_grad=True)
        o1, o2 = optim.SGD([p], lr=0.1), torch.optim.SGD([q], lr=0.1)
        return o1, make(lr_scheduler, o1), o2, make(torch.optim.lr_scheduler, o2)

    makers = [
        lambda m, o: m.StepLR(o, 3, 0.5),
        lambda m, o: m.CosineAnnealingLR(o, 7, 0.001),
        lambda m, o: m.LambdaLR(o, lambda e: 0.9 ** e),
        lambda m, o: m.LinearLR(o, 0.2, 0.9, 6),
        lambda m, o: m.SequentialLR(o, [m.LinearLR(o, 0.1, total_iters=4), m.StepLR(o, 2, 0.5)], [4]),
    ]
    for k, make in enumerate(makers):
        o1, s1, o2, s2 = pair(make)
        got, want = [s1.get_last_lr()[0]], [s2.get_last_lr()[0]]
        for _ in range(20):
            o1.step()
            o2.step()
            s1.step()
            s2.step()
            got.append(s1.get_last_lr()[0])
            want.append(s2.get_last_lr()[0])
        assert all_close(got, want), (k, got, want)
