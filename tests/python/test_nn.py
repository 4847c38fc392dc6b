"""dyntrace.nn: the module protocol (registration by assignment, traversal, state_dict round
trips and errors, train/eval, to/zero_grad/apply), each layer's forward against a plain-Python
reference and its default initialisation's range, containers, and a module under dt.jit
(compiled under no_grad, eager while autograd follows its parameters)."""
import math

import dyntrace as dt
from dyntrace import nn
from testlib import assert_raises


def rows(t):
    return t.tolist()


def close(a, b, tol):
    fa, fb = _flat(a), _flat(b)
    return len(fa) == len(fb) and all(abs(x - y) <= tol * (1 + abs(y)) for x, y in zip(fa, fb))


def _flat(v):
    if isinstance(v, dt.Tensor):
        v = v.tolist()
    if isinstance(v, list):
        out = []
        for item in v:
            out.extend(_flat(item))
        return out
    return [v]


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 3)
        self.norm = nn.LayerNorm(3)
        self.register_buffer("scale", dt.full((3,), 2.0))
        self.register_buffer("cache", dt.zeros(1), persistent=False)
        self.plain = dt.ones(2)  # a tensor attribute, neither parameter nor buffer

    def forward(self, x):
        return self.norm(self.proj(x)) * self.scale


def test_registration_and_traversal():
    b = Block()
    assert [n for n, _ in b.named_parameters()] == ["proj.weight", "proj.bias", "norm.weight", "norm.bias"]
    assert [n for n, _ in b.named_buffers()] == ["scale", "cache"]
    assert [n for n, _ in b.named_children()] == ["proj", "norm"]
    assert [type(m).__name__ for m in b.modules()] == ["Block", "Linear", "LayerNorm"]
    assert all(p.requires_grad and p.is_leaf for p in b.parameters())
    assert isinstance(b.proj.weight, nn.Parameter) and not isinstance(b.plain, nn.Parameter)
    assert_raises(TypeError, lambda: setattr(b.proj, "weight", dt.ones(3, 4)))
    b.proj.bias = None
    assert [n for n, _ in b.named_parameters()] == ["proj.weight", "norm.weight", "norm.bias"]
    shared = nn.Linear(2, 2)
    seq = nn.Sequential(shared, nn.ReLU(), shared)
    assert len(list(seq.parameters())) == 2  # a shared module counts once


def test_state_dict_round_trip_and_errors():
    a, b = Block(), Block()
    sd = a.state_dict()
    # PyTorch's order: own parameters, own (persistent) buffers, then each child's.
    assert list(sd) == ["scale", "proj.weight", "proj.bias", "norm.weight", "norm.bias"]
    assert not sd["proj.weight"].requires_grad
    weight = b.proj.weight
    assert b.load_state_dict(sd) == ([], [])
    assert b.proj.weight is weight and rows(weight) == rows(a.proj.weight)  # copied in, same object
    x = dt.randn(5, 4)
    assert rows(a(x)) == rows(b(x))
    bad = dict(sd)
    bad["proj.weight"] = dt.zeros(2, 2)
    assert_raises(RuntimeError, lambda: b.load_state_dict(bad))
    del bad["proj.weight"]
    bad["extra"] = dt.zeros(1)
    assert_raises(RuntimeError, lambda: b.load_state_dict(bad))
    missing, unexpected = b.load_state_dict(bad, strict=False)
    assert missing == ["proj.weight"] and unexpected == ["extra"]


def test_modes_zero_grad_apply_and_conversions():
    b = Block()
    assert b.training and b.norm.training
    b.eval()
    assert not b.training and not b.proj.training
    b.train()
    b(dt.randn(2, 4)).sum().backward()
    assert b.proj.weight.grad is not None
    b.zero_grad()
    assert all(p.grad is None for p in b.parameters())
    seen = []
    b.apply(lambda m: seen.append(type(m).__name__))
    assert seen == ["Linear", "LayerNorm", "Block"]
    weight = b.proj.weight
    b.double()
    assert b.proj.weight is weight and weight.dtype == dt.float64 and weight.requires_grad
    assert b.scale.dtype == dt.float64


def test_linear_matches_its_formula_and_default_init_range():
    dt.manual_seed(1)
    layer = nn.Linear(50, 7)
    bound = 1 / math.sqrt(50)  # kaiming_uniform_(a=sqrt(5)) gives U(-1/sqrt(fan_in), 1/sqrt(fan_in))
    assert all(-bound <= v <= bound for v in _flat(layer.weight)) and max(map(abs, _flat(layer.weight))) > 0.8 * bound
    x = dt.randn(3, 50)
    w, b = rows(layer.weight), rows(layer.bias)
    expected = [[sum(xi * wi for xi, wi in zip(row, w[o])) + b[o] for o in range(7)] for row in rows(x)]
    # float32 dot products of 50 terms: error below 50 * 2**-24 * sum|x w| <= 1e-5 here.
    assert close(layer(x), expected, 1e-5)


def test_embedding_layernorm_rmsnorm_activations():
    emb = nn.Embedding(5, 3, padding_idx=1)
    assert rows(emb.weight)[1] == [0.0, 0.0, 0.0]
    idx = dt.tensor([[4, 1], [0, 4]])
    assert rows(emb(idx)) == [[rows(emb.weight)[4], rows(emb.weight)[1]], [rows(emb.weight)[0], rows(emb.weight)[4]]]
    x = dt.randn(2, 6)
    mean = [sum(r) / 6 for r in rows(x)]
    var = [sum((v - m) ** 2 for v in r) / 6 for r, m in zip(rows(x), mean)]
    ln = [[(v - m) / math.sqrt(s + 1e-5) for v in r] for r, m, s in zip(rows(x), mean, var)]
    assert close(nn.LayerNorm(6)(x), ln, 1e-5)
    rms = [[v / math.sqrt(sum(u * u for u in r) / 6 + 1e-6) for v in r] for r in rows(x)]
    assert close(nn.RMSNorm(6, eps=1e-6)(x), rms, 1e-5)
    assert rows(nn.ReLU()(x)) == [[max(v, 0.0) for v in r] for r in rows(x)]
    assert close(nn.Tanh()(x), [[math.tanh(v) for v in r] for r in rows(x)], 1e-6)
    assert close(nn.SiLU()(x), [[v / (1 + math.exp(-v)) for v in r] for r in rows(x)], 1e-6)
    assert close(nn.GELU()(x), [[0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in r] for r in rows(x)], 1e-6)
    assert rows(nn.Identity(3, k=1)(x)) == rows(x)


def test_containers():
    seq = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    assert len(seq) == 3 and isinstance(seq[-1], nn.Linear) and len(seq[:2]) == 2
    x = dt.randn(5, 3)
    assert rows(seq(x)) == rows(seq[2](seq[1](seq[0](x))))
    ml = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
    ml.append(nn.Tanh())
    ml.insert(0, nn.Identity())
    assert [type(m).__name__ for m in ml] == ["Identity", "Linear", "Linear", "Linear", "Tanh"]
    assert len(list(ml.parameters())) == 6
    md = nn.ModuleDict({"a": nn.Linear(2, 2), "b": nn.ReLU()})
    assert list(md.keys()) == ["a", "b"] and "a" in md and len(list(md.parameters())) == 2
    assert_raises(IndexError, lambda: seq[3])


def test_init_functions():
    dt.manual_seed(3)
    w = dt.empty(200, 100)
    nn.init.xavier_uniform_(w)
    bound = math.sqrt(6 / 300)
    assert all(-bound <= v <= bound for v in _flat(w))
    nn.init.trunc_normal_(w, std=0.02, a=-0.04, b=0.04)
    values = _flat(w)
    assert all(-0.04 <= v <= 0.04 for v in values)
    std = math.sqrt(sum(v * v for v in values) / len(values))
    # 20000 draws of a normal truncated at 2 sigma: std 0.0176; its sampling error is ~1%.
    assert 0.0165 < std < 0.0187
    nn.init.zeros_(w)
    assert set(values := _flat(w)) == {0.0}
    nn.init.kaiming_normal_(w, nonlinearity="relu")
    std = math.sqrt(sum(v * v for v in _flat(w)) / 20000)
    assert abs(std - math.sqrt(2 / 100)) < 0.05 * math.sqrt(2 / 100)


def test_module_under_jit():
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 4))
    run = dt.jit(backend="eager")(lambda m, x: m(x))
    x = dt.randn(3, 8)
    expected = rows(model(x))
    before = dt.stats()["graphs"]
    with dt.no_grad():
        assert close(run(model, x), expected, 1e-6)
    assert dt.stats()["graphs"] > before  # compiled: no tensor needed autograd
    out = run(model, x)  # parameters require grad: runs eagerly, gradients flow
    assert out.requires_grad
    out.sum().backward()
    assert model[0].weight.grad is not None


def test_clip_grad_norm_scales_gradients_as_pytorch():
    # The joint norm of the per-tensor norms (2, 1 and inf), the factor min(1, max / (norm +
    # 1e-6)), the gradients scaled in place and the norm returned before clipping, against a
    # plain-Python computation from .tolist(); tied parameters count once.
    dt.manual_seed(3)
    layer = nn.Linear(4, 3)
    (layer(dt.randn(5, 4)) ** 2).sum().backward()
    params = list(layer.parameters())
    flat = [v for p in params for v in _flat(p.grad)]
    for norm_type, max_norm in ((2.0, 0.5), (1.0, 0.5), (float("inf"), 0.1), (2.0, 1e6)):
        before = [p.grad.clone() for p in params]
        if norm_type == float("inf"):
            want = max(abs(v) for v in flat)
        else:
            want = sum(abs(v) ** norm_type for v in flat) ** (1 / norm_type)
        total = nn.utils.clip_grad_norm_(layer.parameters(), max_norm, norm_type=norm_type)
        assert isinstance(total, dt.Tensor) and abs(total.item() - want) <= 1e-5 * want, (norm_type, total, want)
        factor = min(1.0, max_norm / (want + 1e-6))
        for p, b in zip(params, before):
            assert close(p.grad, [x * factor for x in _flat(b)], 1e-5), (norm_type, max_norm)
            p.grad.copy_(b)  # the next case starts from the same gradients
    # A single tensor, no gradients at all, and the deprecated spelling.
    w = dt.tensor([3.0, 4.0], requires_grad=True)
    (w * w).sum().backward()  # grad = [6, 8], norm 10
    assert abs(nn.utils.clip_grad_norm(w, 5.0).item() - 10.0) < 1e-5 and close(w.grad, [3.0, 4.0], 1e-5)
    assert nn.utils.clip_grad_norm_([dt.zeros(2, requires_grad=True)], 1.0).item() == 0.0
    # A non-finite norm: an error when asked for, else the gradients scale by it (PyTorch's rule).
    w.grad = dt.tensor([float("inf"), 1.0])
    assert_raises(RuntimeError, nn.utils.clip_grad_norm_, w, 1.0, error_if_nonfinite=True,
                  match="is non-finite, so it cannot be clipped")


def test_clip_grad_value_and_parameters_to_vector():
    w = dt.tensor([[1.0, -2.0], [0.5, 3.0]], requires_grad=True)
    b = dt.tensor([-0.25], requires_grad=True)
    ((w * dt.tensor([[2.0, -3.0], [0.1, 4.0]])).sum() + b.sum() * 5).backward()
    nn.utils.clip_grad_value_([w, b], 1.5)
    assert rows(w.grad) == [[1.5, -1.5], [0.10000000149011612, 1.5]] and rows(b.grad) == [1.5]
    assert rows(nn.utils.parameters_to_vector([w, b])) == [1.0, -2.0, 0.5, 3.0, -0.25]


def test_deepcopy_of_modules_state_dicts_and_tensors():
    # copy.deepcopy(model) (EMA and target networks, keeping the best model): parameters copied
    # as parameters, independent of the originals, requires_grad, .grad and buffers kept; a
    # tensor shared inside the original stays shared in the copy; a non-leaf raises PyTorch's error.
    import copy
    model = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2))
    model[0].weight.grad = dt.full((2, 3), 0.5)
    model.tied = model[0].weight  # the same tensor reached twice
    twin = copy.deepcopy(model)
    assert [n for n, _ in twin.named_parameters()] == [n for n, _ in model.named_parameters()]
    assert [n for n, _ in twin.named_buffers()] == [n for n, _ in model.named_buffers()]
    for (name, a), (_, b) in zip(model.state_dict().items(), twin.state_dict().items()):
        assert a.tolist() == b.tolist() and a.data_ptr() != b.data_ptr(), name
    w = twin[0].weight
    assert isinstance(w, nn.Parameter) and w.requires_grad and w.grad.tolist() == [[0.5] * 3] * 2
    assert twin.tied is w and twin[1].num_batches_tracked.dtype == dt.int64
    with dt.no_grad():
        w.add_(1.0)
    assert model[0].weight.tolist() != w.tolist()
    saved = copy.deepcopy(model.state_dict())
    assert list(saved) == list(model.state_dict()) and saved["0.bias"].tolist() == model[0].bias.tolist()
    x = dt.ones(2, requires_grad=True)
    assert_raises(RuntimeError, copy.deepcopy, x * 2, match="graph leaves")
    assert copy.deepcopy(x).requires_grad and copy.deepcopy(x) is not x
