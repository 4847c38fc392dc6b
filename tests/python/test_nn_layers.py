"""dyntrace.nn's layers beyond the transformer set: batch and group normalisation (running
statistics, batch counts, eval mode, the modes' errors), pooling, the activation modules,
Flatten/Unflatten, Conv1d, Upsample and the loss modules. Each forward is checked against numpy
in float64 on copies of the inputs, with tolerances from the float32 error of the sums involved
(u = 2^-24 per operation, n terms per sum); the state a module keeps (running statistics,
state_dict keys) against PyTorch's rules written out, and against PyTorch itself where it is
importable. Last, a small ResNet-style CNN (convolutions, BatchNorm2d, ReLU, residual adds,
pooling, CrossEntropyLoss, SGD with momentum) trains with the whole step compiled
(fullgraph=True): one program, the running statistics updated in place, losses and buffers
equal to eager's."""
import math

import dyntrace as dt
from dyntrace import nn
from testlib import assert_close, assert_raises, example_module, np, require_numpy, skip, to_np

F = nn.functional
U = 2.0 ** -24  # float32's unit roundoff

try:
    import torch
except ImportError:  # pyenv's interpreters have no torch
    torch = None


def sum_tol(n):
    """Relative bound on a float32 result built from sums of n terms and a few more roundings."""
    return (n + 8) * U


def batch_stats(a, axes):
    mean = a.mean(axis=axes, keepdims=True)
    var = ((a - mean) ** 2).mean(axis=axes, keepdims=True)
    return mean, var


def test_batchnorm2d_training_forward_and_running_statistics():
    require_numpy()
    dt.manual_seed(0)
    bn = nn.BatchNorm2d(3, momentum=0.2)
    with dt.no_grad():
        bn.weight.copy_(dt.tensor([1.5, -0.5, 2.0]))
        bn.bias.copy_(dt.tensor([0.1, 0.2, -0.3]))
    running_mean, running_var = np.zeros(3), np.ones(3)
    for step in range(3):
        x = dt.randn(4, 3, 5, 5) * (step + 1) + step
        a = to_np(x)
        y = bn(x)
        mean, var = batch_stats(a, (0, 2, 3))
        w = np.array([1.5, -0.5, 2.0]).reshape(1, 3, 1, 1)
        b = np.array([0.1, 0.2, -0.3]).reshape(1, 3, 1, 1)
        expected = (a - mean) / np.sqrt(var + 1e-5) * w + b
        m = 4 * 5 * 5
        assert_close(y, expected, rtol=sum_tol(m), atol=sum_tol(m) * 2.0, msg=f"step {step}")
        # Running statistics: the unbiased variance, blended with momentum, as PyTorch.
        running_mean = 0.8 * running_mean + 0.2 * mean.ravel()
        running_var = 0.8 * running_var + 0.2 * var.ravel() * m / (m - 1)
        assert_close(bn.running_mean, running_mean, rtol=sum_tol(m), atol=sum_tol(m))
        assert_close(bn.running_var, running_var, rtol=sum_tol(m), atol=sum_tol(m))
        assert bn.num_batches_tracked.item() == step + 1 and bn.num_batches_tracked.dtype == dt.int64


def test_batchnorm_eval_uses_running_statistics_and_gradients_flow():
    require_numpy()
    dt.manual_seed(1)
    bn = nn.BatchNorm1d(4)
    bn(dt.randn(8, 4) * 3 + 1)  # one training batch moves the running statistics
    bn.eval()
    x = dt.randn(6, 4, requires_grad=True)
    y = bn(x)
    rm, rv = to_np(bn.running_mean), to_np(bn.running_var)
    assert_close(y, (to_np(x) - rm) / np.sqrt(rv + 1e-5), rtol=sum_tol(1), atol=sum_tol(1))
    assert bn.num_batches_tracked.item() == 1  # eval does not count
    y.sum().backward()
    assert_close(x.grad, np.broadcast_to(1 / np.sqrt(rv + 1e-5), (6, 4)), rtol=sum_tol(1), atol=0)
    assert_close(bn.weight.grad, to_np(y.detach()).sum(axis=0), rtol=sum_tol(6), atol=sum_tol(6) * 4)
    # Training mode with autograd: the statistics update is bookkeeping autograd does not follow.
    bn.train()
    z = bn(dt.randn(5, 4, 3, requires_grad=True))  # (N, C, L) is BatchNorm1d's other form
    z.square().sum().backward()
    assert not bn.running_mean.requires_grad and bn.num_batches_tracked.item() == 2


def test_batchnorm_options_and_errors():
    require_numpy()
    dt.manual_seed(2)
    cumulative = nn.BatchNorm2d(2, momentum=None, affine=False)
    assert cumulative.weight is None and [n for n, _ in cumulative.named_parameters()] == []
    batches = [dt.randn(3, 2, 2, 2) + k for k in range(3)]
    for x in batches:
        cumulative(x)
    means = [batch_stats(to_np(x), (0, 2, 3))[0].ravel() for x in batches]
    # momentum=None: the running mean is the plain average of every batch's mean.
    assert_close(cumulative.running_mean, sum(means) / 3, rtol=sum_tol(24), atol=sum_tol(24))
    untracked = nn.BatchNorm2d(2, track_running_stats=False)
    assert untracked.running_mean is None and untracked.num_batches_tracked is None
    untracked.eval()  # no running statistics: batch statistics even in eval mode
    x = batches[0]
    mean, var = batch_stats(to_np(x), (0, 2, 3))
    assert_close(untracked(x), (to_np(x) - mean) / np.sqrt(var + 1e-5), rtol=sum_tol(24), atol=sum_tol(24))
    assert [k for k in nn.BatchNorm2d(2).state_dict()] == ["weight", "bias", "running_mean", "running_var",
                                                          "num_batches_tracked"]
    assert_raises(ValueError, nn.BatchNorm2d(2), dt.randn(2, 2), match="expected 4D input (got 2D input)")
    assert_raises(ValueError, nn.BatchNorm1d(2), dt.randn(2, 2, 2, 2), match="expected 2D or 3D input (got 4D input)")
    assert_raises(ValueError, nn.BatchNorm3d(2), dt.randn(1, 2, 1, 1, 1), match="more than 1 value per channel")


def test_batchnorm_matches_pytorch_when_importable():
    if torch is None:
        skip("PyTorch is not importable: the rules are checked against numpy above, not against PyTorch")
    dt.manual_seed(3)
    ours = nn.BatchNorm2d(3, momentum=0.3)
    theirs = torch.nn.BatchNorm2d(3, momentum=0.3).double()
    for step in range(3):
        x = dt.randn(2, 3, 4, 4) * 2
        y = ours(x)
        expected = theirs(torch.tensor(x.tolist(), dtype=torch.float64))
        assert_close(y, expected.detach().numpy() if np is not None else expected.tolist(),
                     rtol=sum_tol(32), atol=sum_tol(32) * 4)
    for name in ("running_mean", "running_var"):
        assert_close(getattr(ours, name), getattr(theirs, name).tolist(), rtol=sum_tol(32), atol=sum_tol(32))
    assert ours.num_batches_tracked.item() == int(theirs.num_batches_tracked)


def test_group_norm_and_pooling():
    require_numpy()
    dt.manual_seed(4)
    x = dt.randn(2, 6, 5, 5)
    a = to_np(x)
    gn = nn.GroupNorm(3, 6)
    g = a.reshape(2, 3, -1)
    mean, var = g.mean(axis=2, keepdims=True), g.var(axis=2, keepdims=True)
    assert_close(gn(x), ((g - mean) / np.sqrt(var + 1e-5)).reshape(a.shape), rtol=sum_tol(50), atol=sum_tol(50) * 2)
    assert_raises(ValueError, nn.GroupNorm, 4, 6, match="divisible")
    # 2x2 windows with stride 2 over the first 4x4 of each plane (floor mode drops the 5th row).
    windows = a[:, :, :4, :4].reshape(2, 6, 2, 2, 2, 2)
    assert_close(nn.MaxPool2d(2)(x), windows.max(axis=(3, 5)), rtol=0, atol=0)
    assert_close(nn.AvgPool2d(2)(x), windows.mean(axis=(3, 5)), rtol=sum_tol(4), atol=sum_tol(4))
    assert tuple(nn.MaxPool2d(3, stride=1, padding=1)(x).shape) == (2, 6, 5, 5)
    assert_close(nn.AdaptiveAvgPool2d(1)(x), a.mean(axis=(2, 3), keepdims=True), rtol=sum_tol(25), atol=sum_tol(25))
    # A None entry keeps the input's size along that dim.
    assert_close(nn.AdaptiveAvgPool2d((1, None))(x), a.mean(axis=2, keepdims=True), rtol=sum_tol(5), atol=sum_tol(5))


def test_activation_modules():
    require_numpy()
    dt.manual_seed(5)
    x = dt.randn(4, 6) * 4
    a = to_np(x)
    softplus = np.where(a > 20, a, np.log1p(np.exp(np.minimum(a, 20))))
    cases = [
        (nn.LeakyReLU(0.2), np.where(a > 0, a, 0.2 * a)),
        (nn.ELU(0.5), np.where(a > 0, a, 0.5 * np.expm1(a))),
        (nn.Hardtanh(-2.0, 3.0), np.clip(a, -2.0, 3.0)),
        (nn.ReLU6(), np.clip(a, 0.0, 6.0)),
        (nn.Hardswish(), a * np.clip(a + 3, 0, 6) / 6),
        (nn.Mish(), a * np.tanh(softplus)),
        (nn.Softplus(), softplus),
        (nn.GLU(), a[:, :3] / (1 + np.exp(-a[:, 3:]))),
        (nn.LogSoftmax(1), a - np.log(np.exp(a).sum(axis=1, keepdims=True))),
    ]
    for module, expected in cases:
        # exp, log1p and tanh are within a few ulp; 16 u covers them and the roundings around.
        assert_close(module(x), expected, rtol=16 * U, atol=16 * U, msg=type(module).__name__)


def test_flatten_unflatten_conv1d_upsample():
    require_numpy()
    dt.manual_seed(6)
    x = dt.randn(2, 3, 4, 5)
    assert tuple(nn.Flatten()(x).shape) == (2, 60)
    assert tuple(nn.Flatten(0, 1)(x).shape) == (6, 4, 5)
    assert_close(nn.Unflatten(1, (2, 30))(nn.Flatten()(x)), to_np(x).reshape(2, 2, 30), rtol=0, atol=0)
    assert tuple(nn.Unflatten(-1, (5, 1))(x).shape) == (2, 3, 4, 5, 1)
    conv = nn.Conv1d(3, 4, 3, padding=1)
    assert tuple(conv.weight.shape) == (4, 3, 3) and tuple(conv.bias.shape) == (4,)
    bound = 1 / math.sqrt(3 * 3)
    assert max(abs(v) for v in conv.bias.tolist()) <= bound
    s = dt.randn(2, 3, 7)
    a, w, b = to_np(s), to_np(conv.weight), to_np(conv.bias)
    padded = np.pad(a, ((0, 0), (0, 0), (1, 1)))
    expected = np.stack([np.einsum("nck,ock->no", padded[:, :, i:i + 3], w) for i in range(7)], axis=2)
    expected += b.reshape(1, 4, 1)
    assert_close(conv(s), expected, rtol=sum_tol(9), atol=sum_tol(9) * 4)
    up = nn.Upsample(scale_factor=2)(x)
    assert_close(up, to_np(x).repeat(2, axis=2).repeat(2, axis=3), rtol=0, atol=0)


def test_loss_modules():
    require_numpy()
    dt.manual_seed(7)
    logits = dt.randn(6, 4)
    target = dt.tensor([0, 3, 1, 2, 3, -100])
    a = to_np(logits)
    logp = a - np.log(np.exp(a).sum(axis=1, keepdims=True))
    picked = np.array([-logp[i, t] for i, t in enumerate(target.tolist()[:5])])
    tol = sum_tol(4)
    assert_close(nn.CrossEntropyLoss()(logits, target), picked.mean(), rtol=tol, atol=tol)
    assert_close(nn.CrossEntropyLoss(reduction="sum")(logits, target), picked.sum(), rtol=tol, atol=tol)
    assert_close(nn.NLLLoss(reduction="none")(dt.log_softmax(logits, 1), target)[:5], picked, rtol=tol, atol=tol)
    weight = dt.tensor([1.0, 2.0, 0.5, 1.5])
    w = np.array([1.0, 2.0, 0.5, 1.5])[target.tolist()[:5]]
    weighted = nn.CrossEntropyLoss(weight=weight)
    assert [n for n, _ in weighted.named_buffers()] == ["weight"]
    assert_close(weighted(logits, target), (picked * w).sum() / w.sum(), rtol=tol, atol=tol)
    # Legacy flags map onto reduction as PyTorch maps them.
    assert nn.MSELoss(size_average=False).reduction == "sum" and nn.L1Loss(reduce=False).reduction == "none"
    p, q = dt.randn(3, 5), dt.randn(3, 5)
    d = to_np(p) - to_np(q)
    assert_close(nn.MSELoss()(p, q), (d ** 2).mean(), rtol=sum_tol(15), atol=sum_tol(15))
    assert_close(nn.L1Loss(reduction="sum")(p, q), np.abs(d).sum(), rtol=sum_tol(15), atol=sum_tol(15))
    huber = np.where(np.abs(d) < 0.5, 0.5 * d ** 2 / 0.5, np.abs(d) - 0.25)
    assert_close(nn.SmoothL1Loss(beta=0.5)(p, q), huber.mean(), rtol=sum_tol(15), atol=sum_tol(15))
    labels = (q > 0).to(dt.float32)
    z, t = to_np(p), to_np(labels)
    bce = np.maximum(z, 0) - z * t + np.log1p(np.exp(-np.abs(z)))
    assert_close(nn.BCEWithLogitsLoss()(p, labels), bce.mean(), rtol=sum_tol(15) * 4, atol=sum_tol(15) * 4)
    logq = dt.log_softmax(q, 1)
    kl = np.exp(to_np(logq)) * (to_np(logq) - to_np(p))
    assert_close(nn.KLDivLoss(reduction="sum", log_target=True)(p, logq), kl.sum(), rtol=sum_tol(15) * 4,
                 atol=sum_tol(15) * 4)


# ---- a ResNet-style CNN trained with the whole step compiled --------------------------------

def test_cnn_training_step_compiles_whole():
    # examples/train_cnn.py's model, narrower: convolutions, BatchNorm2d, `out += shortcut`,
    # pooling, CrossEntropyLoss, SGD with momentum. Compiled whole (fullgraph=True) and with only
    # the loss compiled (a forward graph and a backward graph), against eager steps.
    cnn = example_module("train_cnn")
    eager, eager_state = cnn.train(False, 6, widths=(8, 16), batch=8, size=12)
    assert eager[-1] < eager[0] and eager_state["1.num_batches_tracked"].item() == 6
    before = dt.stats()
    compiled, compiled_state = cnn.train(True, 6, widths=(8, 16), batch=8, size=12)
    after = dt.stats()
    grew = {k: after[k] - before[k] for k in ("graph_breaks", "fallbacks", "graphs")}
    assert grew["graph_breaks"] == 0 and grew["fallbacks"] == 0, after["break_reasons"]
    assert grew["graphs"] <= 2, grew  # the first step makes SGD's momentum buffers
    # The cpu backend promises eager's values: the same ops, each sum in the same order (or in
    # float64 partials that round alike). Running statistics included: batch norm writes them
    # in place inside the graph.
    assert compiled == eager, (compiled, eager)
    for name, value in eager_state.items():
        assert compiled_state[name].tolist() == value.tolist(), name
    # Only the loss compiled: its forward and backward graphs, the update eager.
    dt.manual_seed(0)
    batches = [(dt.randn(8, 3, 12, 12), dt.randint(0, 10, (8,))) for _ in range(3)]
    dt.manual_seed(1)
    model = cnn.make_model(dt, (8, 16))
    opt = dt.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    loss_of = dt.jit(lambda x, y: nn.CrossEntropyLoss()(model(x), y), backend="cpu")
    losses = []
    for i in range(6):
        opt.zero_grad(set_to_none=True)
        loss = loss_of(*batches[i % 3])
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses == eager, (losses, eager)
    assert all(model.state_dict()[k].tolist() == v.tolist() for k, v in eager_state.items())


def test_dropout2d_zeroes_whole_channels():
    # Each (sample, channel) plane is kept whole, scaled by 1 / (1 - p), or zeroed; the zeroed
    # fraction over n = 4000 planes is p within 5 standard deviations, 5 sqrt(p (1 - p) / n).
    dt.manual_seed(8)
    p, x = 0.3, dt.rand(40, 100, 3, 3) + 0.5
    y = F.dropout2d(x, p)
    planes = (y == 0).reshape(4000, 9)
    whole = [row.count(True) in (0, 9) for row in planes.tolist()]
    assert all(whole)
    dropped = sum(row[0] for row in planes.tolist()) / 4000
    assert abs(dropped - p) <= 5 * math.sqrt(p * (1 - p) / 4000), dropped
    kept = (y != 0)
    assert_close(y[kept], (x * (1 / (1 - p)))[kept], rtol=2 * U, atol=0)
    layer = nn.Dropout2d(p)
    assert layer.eval()(x) is x and F.dropout2d(x, 0.0) is x and F.dropout2d(x, 1.0).abs().sum().item() == 0
    assert tuple(F.dropout2d(dt.ones(4, 5, 6), 0.5).shape) == (4, 5, 6)  # [C, H, W]
    assert_raises(RuntimeError, F.dropout2d, dt.ones(4, 5), match="3-D or 4-D")
    # Under dt.jit the draw is traced: the same seed gives eager's result.
    layer.train()
    dt.manual_seed(9)
    want = layer(x)
    dt.manual_seed(9)
    got = dt.jit(lambda t: layer(t), backend="cpu")(x)
    assert got.tolist() == want.tolist()
