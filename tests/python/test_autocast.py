"""dyntrace.autocast (torch.amp): which ops run on the region's dtype and which on float32 (the
CPU lists, and CUDA's on the emulated device in test_cuda_emulated.py), gradients reaching float32
parameters as float32, nesting and enabled=False, the decorator form, bad arguments, and compiled
functions called inside a region: the same casts, the region guarded, a region entered inside
compiled code a break. References: the same ops with the casts written by hand."""
import warnings

import dyntrace as dt
from jitlib import fresh_copy
from testlib import assert_raises, rand_tensor

F = dt.nn.functional


def test_cpu_lists_cast_as_pytorchs():
    # Lower precision (bfloat16 by default on the CPU): matmul, @, linear, bmm, conv2d, SDPA;
    # float32: the losses; the rest keeps its input's dtype (softmax stays bfloat16 on the CPU).
    dt.manual_seed(1)
    x, w, b = rand_tensor((4, 8)), rand_tensor((5, 8)), rand_tensor((5,))
    with dt.autocast("cpu"):
        assert dt.is_autocast_enabled("cpu") and dt.get_autocast_dtype("cpu") == dt.bfloat16
        lin = F.linear(x, w, b)
        prod = x @ w.T
        bmm = dt.bmm(x.unsqueeze(0), w.T.unsqueeze(0))
        loss = F.cross_entropy(lin, dt.tensor([0, 1, 2, 3]))
        soft = dt.softmax(lin, -1)
        plain = x + 1
        wide = x.double() @ w.double().T  # float64 is never cast
    assert not dt.is_autocast_enabled("cpu")
    assert (lin.dtype, prod.dtype, bmm.dtype) == (dt.bfloat16,) * 3
    assert (loss.dtype, soft.dtype, plain.dtype, wide.dtype) == (dt.float32, dt.bfloat16, dt.float32, dt.float64)
    want = F.linear(x.to(dt.bfloat16), w.to(dt.bfloat16), b.to(dt.bfloat16))
    assert lin.tolist() == want.tolist()
    assert loss.item() == F.cross_entropy(want.float(), dt.tensor([0, 1, 2, 3])).item()


def test_gradients_reach_float32_parameters_through_the_casts():
    dt.manual_seed(2)
    model = dt.nn.Sequential(dt.nn.Linear(6, 5), dt.nn.GELU(), dt.nn.Linear(5, 3))
    x, y = rand_tensor((8, 6)), dt.tensor([0, 1, 2, 0, 1, 2, 0, 1])
    with dt.autocast("cpu", dtype=dt.bfloat16):
        loss = F.cross_entropy(model(x), y)
    loss.backward()
    got = [p.grad.clone() for p in model.parameters()]
    assert all(p.grad.dtype == dt.float32 for p in model.parameters())
    # The same computation with the casts by hand.
    for p in model.parameters():
        p.grad = None
    lo = dt.bfloat16
    h = F.gelu(F.linear(x.to(lo), model[0].weight.to(lo), model[0].bias.to(lo)))
    out = F.linear(h, model[2].weight.to(lo), model[2].bias.to(lo))
    F.cross_entropy(out.float(), y).backward()
    for g, p in zip(got, model.parameters()):
        assert g.tolist() == p.grad.tolist()


def test_nesting_disabling_and_the_decorator():
    x = rand_tensor((3, 3))
    with dt.autocast("cpu"):
        with dt.autocast("cpu", enabled=False):
            assert (x @ x).dtype == dt.float32 and not dt.is_autocast_enabled("cpu")
        assert (x @ x).dtype == dt.bfloat16
        with dt.amp.autocast("cpu", dtype=dt.float16):
            assert (x @ x).dtype == dt.float16
        assert (x @ x).dtype == dt.bfloat16
    assert (x @ x).dtype == dt.float32 and not dt.is_autocast_enabled()  # CUDA's, never entered

    @dt.autocast("cpu")
    def product(a):
        return a @ a

    assert product(x).dtype == dt.bfloat16 and (x @ x).dtype == dt.float32
    assert_raises(RuntimeError, dt.autocast, "tpu", match="unsupported autocast device_type 'tpu'")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with dt.autocast("cpu", dtype=dt.float64):  # not a lower precision: autocast is off
            assert (x @ x).dtype == dt.float32
    assert any("Disabling autocast" in str(w.message) for w in caught)


def mlp_loss(model, x, y):
    return F.cross_entropy(model(x), y)


def test_compiled_code_inside_a_region_casts_as_eager_and_is_guarded():
    dt.manual_seed(3)
    model = dt.nn.Sequential(dt.nn.Linear(6, 5), dt.nn.GELU(), dt.nn.Linear(5, 3))
    x, y = rand_tensor((8, 6)), dt.tensor([0, 1, 2, 0, 1, 2, 0, 1])
    for backend in ("eager", "cpu"):
        dt.reset()
        compiled = dt.jit(fresh_copy(mlp_loss), backend=backend)
        with dt.autocast("cpu"):
            got = compiled(model, x, y)
            want = mlp_loss(model, x, y)
        assert got.dtype == want.dtype == dt.float32
        # Both backends promise eager's values bit for bit (the cpu backend's kernels round as
        # the eager ops do), casts included.
        assert got.item() == want.item(), (backend, got.item(), want.item())
        graph = str(dt.graphs(compiled)[0])
        assert "_to(" in graph and "bfloat16" in graph, graph
        # Outside the region the guard fails and the call traces without casts.
        assert compiled(model, x, y).item() == mlp_loss(model, x, y).item()
        reasons = dt.stats()["recompile_reasons"]
        assert len(reasons) == 1 and "autocast" in reasons[0], reasons
        s = dt.stats()
        assert s["graph_breaks"] == 0, s["break_reasons"]


def region_inside(x):
    with dt.autocast("cpu"):
        y = x @ x
        inner_enabled = dt.is_autocast_enabled("cpu")
    return y.float() + x, inner_enabled, dt.is_autocast_enabled("cpu")


def region_with_a_break(x):
    with dt.autocast("cpu"):
        y = x @ x
        print("inside the region")  # a graph break: CPython runs it, and the region's __exit__ later
        z = y @ x
    return z.float() + y.float()


def nested_regions(x):
    with dt.autocast("cpu"):
        a = x @ x
        with dt.autocast("cpu", enabled=False):
            b = x @ x
        c = a @ x
    return a.float(), b, c.float()


def test_a_region_entered_inside_compiled_code_compiles_with_eagers_values():
    x = rand_tensor((4, 4))
    for backend in ("eager", "cpu"):
        for fn in (region_inside, nested_regions):
            dt.reset()
            compiled = dt.jit(fresh_copy(fn), backend=backend)
            for _ in range(2):  # traced, then served from the cache
                got, want = compiled(x), fn(x)
                for g, w in zip(got, want):
                    if isinstance(w, dt.Tensor):
                        assert g.dtype == w.dtype and g.tolist() == w.tolist(), (backend, fn.__name__)
                    else:
                        assert g == w, (backend, fn.__name__)
                assert not dt.is_autocast_enabled("cpu")  # the region ended inside the call
            s = dt.stats()
            assert s["graph_breaks"] == 0 and s["graphs"] == 1, (backend, fn.__name__, s["break_reasons"])
            assert "bfloat16" in str(dt.graphs(compiled)[0])
        # A break inside the region: the first segment leaves autocast on, CPython runs the print
        # under it, the segment after the break traces under it and CPython's __exit__ restores.
        dt.reset()
        compiled = dt.jit(fresh_copy(region_with_a_break), backend=backend)
        for _ in range(2):
            assert compiled(x).tolist() == region_with_a_break(x).tolist()
            assert not dt.is_autocast_enabled("cpu")
        assert dt.stats()["graph_breaks"] >= 1


def test_a_training_step_with_an_autocast_region_compiles_whole():
    # nanoGPT's loop as written: the forward under autocast inside the compiled step, backward
    # and the optimizer outside the region. SGD, whose compiled update rounds as its eager one
    # (AdamW's bias corrections differ by float32 roundings compiled, test_whole_step.py, and a
    # bfloat16 forward can turn such a difference into a different rounding), so the runs agree
    # bit for bit.
    def make():
        dt.manual_seed(5)
        model = dt.nn.Sequential(dt.nn.Linear(8, 16), dt.nn.GELU(), dt.nn.Linear(16, 4))
        return model, dt.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def train(compiled):
        model, opt = make()

        def step(x, y):
            with dt.autocast("cpu", dtype=dt.bfloat16):
                loss = dt.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            return loss.detach()

        run = dt.jit(step, backend="cpu", fullgraph=True) if compiled else step
        dt.manual_seed(6)
        batches = [(dt.randn(16, 8), dt.randint(0, 4, (16,))) for _ in range(2)]
        return [run(*batches[i % 2]).item() for i in range(5)], [p.tolist() for p in model.parameters()]

    before = dt.stats()
    compiled = train(True)
    after = dt.stats()
    assert after["graph_breaks"] == before["graph_breaks"], after["break_reasons"]
    assert compiled == train(False)  # losses and parameters bit for bit


def test_grad_scaler_scales_unscales_skips_and_adapts():
    # Against the arithmetic itself: the loss times the scale, gradients divided back, a step
    # skipped (parameters untouched) when a gradient is not finite, the scale halved after it and
    # doubled after growth_interval good steps; disabled, everything passes through.
    w = dt.tensor([1.0, -2.0], requires_grad=True)
    opt = dt.optim.SGD([w], lr=0.1)
    scaler = dt.amp.GradScaler("cpu", init_scale=8.0, growth_interval=2)
    loss = (w * dt.tensor([3.0, 4.0])).sum()
    scaled = scaler.scale(loss)
    assert scaled.item() == 8.0 * loss.item()
    scaled.backward()
    assert w.grad.tolist() == [24.0, 32.0]
    scaler.unscale_(opt)
    assert w.grad.tolist() == [3.0, 4.0]
    assert_raises(RuntimeError, scaler.unscale_, opt, match="already been called")
    scaler.step(opt)
    # SGD's float32 update of values below 2.4: two roundings, within 2 * 2^-24 * 2.4 < 2^-22.
    assert all(abs(a - b) <= 2 ** -22 for a, b in zip(w.tolist(), [1.0 - 0.3, -2.0 - 0.4])), w.tolist()
    scaler.update()
    assert scaler.get_scale() == 8.0  # one good step of two
    before = w.tolist()
    opt.zero_grad()
    scaler.scale((w * float("inf")).sum()).backward()
    scaler.step(opt)  # unscales, finds inf, skips
    assert w.tolist() == before
    scaler.update()
    assert scaler.get_scale() == 4.0
    for _ in range(2):
        opt.zero_grad()
        scaler.scale((w * 2.0).sum()).backward()
        scaler.step(opt)
        scaler.update()
    assert scaler.get_scale() == 8.0  # two good steps: doubled
    restored = dt.amp.GradScaler("cpu")
    restored.load_state_dict(scaler.state_dict())
    assert restored.get_scale() == 8.0
    assert_raises(RuntimeError, dt.amp.GradScaler("cpu").update, match="No inf checks")
    off = dt.amp.GradScaler(enabled=False)
    assert off.scale(loss) is loss and off.get_scale() == 1.0 and off.state_dict() == {}
