"""Autograd: every differentiable registry op against central finite differences in float64
(dyntrace.autograd.gradcheck; its docstring gives the error model behind the tolerances), with
broadcasting and non-contiguous inputs; the coverage of that table against the registry; and
the PyTorch surface (requires_grad, .grad accumulation, retain_grad, autograd.grad with
create_graph, grad modes, version counters, in-place rules, dt.jit falling back to eager)."""
import random

import dyntrace as dt
from dyntrace.autograd import gradcheck
from testlib import assert_raises

F = dt.nn.functional

F64 = dt.float64


def rnd(*shape, low=None, transposed=False):
    """A float64 leaf that requires grad; `low` keeps values above it (log, sqrt domains);
    `transposed` gives a non-contiguous tensor of `shape`."""
    sizes = tuple(reversed(shape)) if transposed else shape
    x = dt.randn(*sizes, dtype=F64) if sizes else dt.tensor(random.gauss(0.0, 1.0), dtype=F64)
    if low is not None:
        x = x.abs() + low
    if transposed:
        x = x.T
    return x.requires_grad_()


def idx(*values):
    return dt.tensor(list(values), dtype=dt.int64)


def copy_then(fn):
    """In-place ops need a non-leaf target: a copy of the first argument, changed by fn."""
    def run(a, *rest):
        b = a * 1.0
        fn(b, *rest)
        return b
    return run


# registry op -> [(function, input builder)], each checked with gradcheck.
CASES = {
    "neg": [(lambda a: -a, lambda: [rnd(2, 3)])],
    "abs": [(dt.abs, lambda: [rnd(2, 3)])],
    "exp": [(dt.exp, lambda: [rnd(3, transposed=False)]), (dt.exp, lambda: [rnd(2, 3, transposed=True)])],
    "exp2": [(dt.exp2, lambda: [rnd(3)])],
    "log": [(dt.log, lambda: [rnd(2, 3, low=0.5)])],
    "log2": [(dt.log2, lambda: [rnd(3, low=0.5)])],
    "log1p": [(dt.log1p, lambda: [rnd(3, low=0.1)])],
    "expm1": [(dt.expm1, lambda: [rnd(3)])],
    "sqrt": [(dt.sqrt, lambda: [rnd(3, low=0.5)])],
    "rsqrt": [(dt.rsqrt, lambda: [rnd(3, low=0.5)])],
    "sin": [(dt.sin, lambda: [rnd(3)])],
    "cos": [(dt.cos, lambda: [rnd(3)])],
    "tan": [(dt.tan, lambda: [rnd(3).clamp(-1, 1).detach().requires_grad_()])],
    "tanh": [(dt.tanh, lambda: [rnd(3)])],
    "sigmoid": [(dt.sigmoid, lambda: [rnd(3)])],
    "relu": [(dt.relu, lambda: [rnd(2, 3)])],
    "_gelu_erf": [(dt.gelu, lambda: [rnd(4)])],
    "_gelu_tanh": [(lambda a: dt.gelu(a, approximate="tanh"), lambda: [rnd(4)])],
    "silu": [(dt.silu, lambda: [rnd(4)])],
    "erf": [(dt.erf, lambda: [rnd(4)])],
    "reciprocal": [(dt.reciprocal, lambda: [rnd(3, low=0.5)])],
    "square": [(dt.square, lambda: [rnd(3)])],
    "floor": [(dt.floor, lambda: [rnd(3)])],
    "ceil": [(dt.ceil, lambda: [rnd(3)])],
    "round": [(dt.round, lambda: [rnd(3)])],
    "trunc": [(dt.trunc, lambda: [rnd(3)])],
    "sign": [(dt.sign, lambda: [rnd(3)])],
    "floor_divide": [(lambda a, b: a // b, lambda: [rnd(3), rnd(3, low=0.5)])],
    "add": [(lambda a, b: a + b, lambda: [rnd(2, 3), rnd(3)]), (lambda a: a + 2.5, lambda: [rnd(2, 1)])],
    "sub": [(lambda a, b: a - b, lambda: [rnd(2, 1), rnd(1, 3, transposed=True)])],
    "mul": [(lambda a, b: a * b, lambda: [rnd(2, 3), rnd(2, 1)])],
    "div": [(lambda a, b: a / b, lambda: [rnd(2, 3), rnd(3, low=0.5)])],
    "pow": [(lambda a, b: a ** b, lambda: [rnd(2, 3, low=0.5), rnd(3)]), (lambda a: a ** 3, lambda: [rnd(4)])],
    "maximum": [(dt.maximum, lambda: [rnd(2, 3), rnd(3)])],
    "minimum": [(dt.minimum, lambda: [rnd(2, 3), rnd(3)])],
    "atan2": [(dt.atan2, lambda: [rnd(3), rnd(2, 3, low=0.5)])],
    "remainder": [(lambda a, b: a % b, lambda: [rnd(3, low=0.1), rnd(3, low=2.0)])],
    "where": [(lambda a, b: dt.where(a > 0, a, b), lambda: [rnd(2, 3), rnd(3)])],
    "reshape": [(lambda a: a.reshape(3, 2), lambda: [rnd(2, 3)])],
    "view": [(lambda a: a.view(6), lambda: [rnd(2, 3)])],
    "flatten": [(dt.flatten, lambda: [rnd(2, 3, transposed=True)])],
    "squeeze": [(lambda a: a.squeeze(1), lambda: [rnd(2, 1, 3)])],
    "permute": [(lambda a: a.permute(2, 0, 1), lambda: [rnd(2, 1, 3)])],
    "transpose": [(lambda a: a.transpose(0, 1) * dt.arange(2, dtype=F64), lambda: [rnd(2, 3)])],
    "swapaxes": [(lambda a: dt.swapaxes(a, 0, -1), lambda: [rnd(2, 3)])],
    "unsqueeze": [(lambda a: a.unsqueeze(-1), lambda: [rnd(2, 3)])],
    "expand": [(lambda a: a.expand(2, 3, 4) * dt.arange(4, dtype=F64), lambda: [rnd(3, 1)])],
    "broadcast_to": [(lambda a: dt.broadcast_to(a, (2, 3)) * dt.arange(3, dtype=F64), lambda: [rnd(3)])],
    "contiguous": [(lambda a: a.contiguous(), lambda: [rnd(2, 3, transposed=True)])],
    "clone": [(dt.clone, lambda: [rnd(3)])],
    # float32 rounding (2**-24 relative) needs a wide step: the map is the identity, so the
    # quotient's only error is rounding over 2 * 1e-2.
    "_to": [(lambda a: a.float().double(), lambda: [rnd(3)], {"eps": 1e-2, "rtol": 1e-4})],
    "narrow": [(lambda a: dt.narrow(a, 1, 1, 2), lambda: [rnd(2, 4)])],
    "select": [(lambda a: dt.select(a, 0, -1), lambda: [rnd(2, 3)])],
    "_getitem": [(lambda a: a[1:, ::2], lambda: [rnd(3, 4)]), (lambda a: a[None, 0, ..., 1], lambda: [rnd(2, 3, 2)])],
    "_setitem": [(copy_then(lambda b, v: b.__setitem__((0, slice(1, 3)), v)), lambda: [rnd(2, 4), rnd(2)])],
    "cat": [(lambda a, b: dt.cat([a, b], dim=1), lambda: [rnd(2, 1), rnd(2, 3)])],
    "concat": [(lambda a, b: dt.concat([a, b]), lambda: [rnd(1, 2), rnd(2, 2)])],
    "stack": [(lambda a, b: dt.stack([a, b], dim=1), lambda: [rnd(2, 3), rnd(2, 3)])],
    "split": [(lambda a: dt.split(a, 2, dim=1)[1] * 2, lambda: [rnd(2, 5)])],
    "split.sizes": [(lambda a: dt.split(a, [1, 3])[0], lambda: [rnd(4, 2)])],
    "chunk": [(lambda a: dt.chunk(a, 2)[0] + dt.chunk(a, 2)[1], lambda: [rnd(4, 2)])],
    "unbind": [(lambda a: dt.unbind(a, 1)[2], lambda: [rnd(2, 3)])],
    "flip": [(lambda a: dt.flip(a, [0]) * dt.arange(3, dtype=F64), lambda: [rnd(2, 3)])],
    "roll": [(lambda a: dt.roll(a, [1], [1]) * dt.arange(3, dtype=F64), lambda: [rnd(2, 3)])],
    "tril": [(dt.tril, lambda: [rnd(3, 3)])],
    "triu": [(lambda a: dt.triu(a, 1), lambda: [rnd(3, 4)])],
    "repeat": [(lambda a: a.repeat(2, 1, 3) * dt.arange(6, dtype=F64), lambda: [rnd(2, 2)])],
    "copy": [(copy_then(lambda b, v: b.copy_(v)), lambda: [rnd(2, 3), rnd(3)])],
    "fill": [(copy_then(lambda b, v: b.fill_(v)), lambda: [rnd(2, 3), rnd()]) ],
    "zero": [(lambda a: (a * 1.0).zero_() + a, lambda: [rnd(3)])],
    "sum": [(dt.sum, lambda: [rnd(2, 3)]), (lambda a: a.sum(dim=(0, 2), keepdim=True), lambda: [rnd(2, 3, 2)])],
    "mean": [(lambda a: a.mean(1), lambda: [rnd(2, 3, transposed=True)])],
    "prod": [(dt.prod, lambda: [rnd(2, 3)]), (lambda a: a.prod(1), lambda: [rnd(2, 3) * dt.tensor([1.0, 0.0, 1.0], dtype=F64)])],
    "amax": [(lambda a: dt.amax(a, 1), lambda: [rnd(2, 3)])],
    "amin": [(dt.amin, lambda: [rnd(2, 3)])],
    "softmax": [(lambda a: dt.softmax(a, -1) * dt.arange(3, dtype=F64), lambda: [rnd(2, 3)])],
    "log_softmax": [(lambda a: dt.log_softmax(a, 0) * dt.arange(3, dtype=F64), lambda: [rnd(2, 3)])],
    "matmul": [(dt.matmul, lambda: [rnd(2, 3), rnd(3, 2)]), (dt.matmul, lambda: [rnd(3), rnd(2, 3, 2)]),
               (dt.matmul, lambda: [rnd(2, 2, 3), rnd(3)]), (dt.matmul, lambda: [rnd(2, 3), rnd(2, 3, 2)]),
               # operands stored transposed get their gradients computed transposed
               (dt.matmul, lambda: [rnd(4, 3, transposed=True), rnd(3, 2, transposed=True)])],
    "mm": [(dt.mm, lambda: [rnd(2, 3, transposed=True), rnd(3, 2)])],
    "bmm": [(dt.bmm, lambda: [rnd(2, 2, 3), rnd(2, 3, 2)])],
    "dot": [(dt.dot, lambda: [rnd(3), rnd(3)])],
    "gather": [(lambda a: dt.gather(a, 1, dt.tensor([[0, 0], [2, 1]])), lambda: [rnd(2, 3)])],
    "index_select": [(lambda a: dt.index_select(a, 0, idx(1, 1, 0)), lambda: [rnd(2, 3)])],
    "take_along_dim": [(lambda a: dt.take_along_dim(a, dt.tensor([[2], [0]]), 1), lambda: [rnd(2, 3)]),
                       (lambda a: dt.take_along_dim(a, idx(4, 0, 4)), lambda: [rnd(2, 3)])],
    "scatter": [(lambda a, s: dt.scatter(a, 1, dt.tensor([[0, 2]]), s), lambda: [rnd(2, 3), rnd(1, 2)])],
    "scatter.value": [(lambda a: dt.scatter(a, 0, dt.tensor([[1, 0, 1]]), 2.0), lambda: [rnd(2, 3)])],
    "scatter_add": [(lambda a, s: dt.scatter_add(a, 1, dt.tensor([[1, 1]]), s), lambda: [rnd(2, 3), rnd(1, 2)])],
    "_index": [(lambda a: a[idx(1, 0, 1)], lambda: [rnd(2, 3)]), (lambda a: a[a > 0], lambda: [rnd(2, 3)])],
    "_index_put": [(copy_then(lambda b, v: b.__setitem__(idx(2, 0), v)), lambda: [rnd(3, 2), rnd(2)])],
    "index_put": [(lambda a, v: dt.index_put(a, [idx(0, 2)], v, accumulate=True), lambda: [rnd(3, 2), rnd(2, 2)]),
                  (lambda a, v: dt.index_put(a, [idx(1)], v), lambda: [rnd(3, 2), rnd(2)])],
    "embedding": [(lambda w: dt.embedding(dt.tensor([[1, 2], [2, 2]]), w, padding_idx=0), lambda: [rnd(3, 2)])],
    "sort": [(lambda a: dt.sort(a, descending=True), lambda: [rnd(2, 3)])],
    "topk": [(lambda a: dt.topk(a, 2), lambda: [rnd(2, 4)])],
    "cumsum": [(lambda a: dt.cumsum(a, 1), lambda: [rnd(2, 3)])],
    "cummax": [(lambda a: dt.cummax(a, 1), lambda: [rnd(2, 4)]), (lambda a: dt.cummax(a, 0), lambda: [rnd()])],
    "cummin": [(lambda a: dt.cummin(a, -2), lambda: [rnd(4, 2, transposed=True)])],
    "kthvalue": [(lambda a: dt.kthvalue(a, 2, 1), lambda: [rnd(2, 4)]),
                 (lambda a: dt.kthvalue(a, 3, 0, keepdim=True), lambda: [rnd(3, 2)])],
    "logcumsumexp": [(lambda a: dt.logcumsumexp(a, 1), lambda: [rnd(2, 4)])],
    "index_add": [(lambda a, s: dt.index_add(a, 0, idx(2, 0, 2), s, alpha=1.5), lambda: [rnd(3, 2), rnd(3, 2)])],
    "index_copy": [(lambda a, s: dt.index_copy(a, 1, idx(2, 0), s), lambda: [rnd(2, 3), rnd(2, 2)])],
    # Every reduce, with and without the input folded in; a zero among prod's factors (where
    # PyTorch's formula avoids dividing by it); amax/amin on distinct values (no ties to share).
    "scatter_reduce": [
        (lambda a, s, r=r, inc=inc: dt.scatter_reduce(a, 1, dt.tensor([[0, 2, 0, 0]]), s, r, include_self=inc),
         lambda: [rnd(2, 3), rnd(1, 4)])
        for r in ("sum", "prod", "mean", "amax", "amin") for inc in (True, False)] + [
        (lambda a, s: dt.scatter_reduce(a, 0, idx(1, 1, 0), s * dt.tensor([1.0, 0.0, 1.0], dtype=F64), "prod"),
         lambda: [rnd(3), rnd(3)])],
    "cumprod": [(lambda a: dt.cumprod(a, 1), lambda: [rnd(2, 4)]),
                (lambda a: dt.cumprod(a * dt.tensor([1.0, 0.0, 1.0], dtype=F64), 0), lambda: [rnd(3)])],
    "_gelu_erf_backward": [(lambda g, a: dt.autograd.grad(dt.gelu(a), a, g, create_graph=True)[0],
                            lambda: [rnd(3), rnd(3)])],
    "_silu_backward": [(lambda g, a: dt.autograd.grad(dt.silu(a), a, g, create_graph=True)[0],
                        lambda: [rnd(3), rnd(3)])],
    "_sigmoid_backward": [(lambda g, a: dt.autograd.grad(dt.sigmoid(a), a, g, create_graph=True)[0],
                           lambda: [rnd(3), rnd(3)])],
    "_tanh_backward": [(lambda g, a: dt.autograd.grad(dt.tanh(a), a, g, create_graph=True)[0],
                        lambda: [rnd(3), rnd(3)])],
    "masked_select": [(lambda a: dt.masked_select(a, dt.tensor([True, False, True])), lambda: [rnd(2, 3)])],
    # Composites differentiated through their bodies.
    "add.alpha": [(lambda a, b: dt.add(a, b, alpha=2.5), lambda: [rnd(3), rnd(2, 3)])],
    "sub.alpha": [(lambda a, b: dt.sub(a, b, alpha=0.5), lambda: [rnd(3), rnd(3)])],
    "clamp": [(lambda a: dt.clamp(a, -0.5, 0.5), lambda: [rnd(2, 3)])],
    "clip": [(lambda a, lo: dt.clip(a, lo), lambda: [rnd(2, 3), rnd(3)])],
    "clamp_min": [(lambda a: dt.clamp_min(a, 0.1), lambda: [rnd(4)])],
    "clamp_max": [(lambda a: dt.clamp_max(a, 0.1), lambda: [rnd(4)])],
    "gelu": [(lambda a: dt.gelu(a, approximate="none"), lambda: [rnd(3)])],
    "layer_norm": [(lambda a, w, b: dt.layer_norm(a, (3,), w, b) * dt.arange(3, dtype=F64),
                    lambda: [rnd(2, 3), rnd(3), rnd(3)]),
                   (lambda a: dt.layer_norm(a, (2, 2)) * dt.arange(4, dtype=F64).reshape(2, 2),
                    lambda: [rnd(2, 2, 2, transposed=False)])],
    "rms_norm": [(lambda a, w: dt.rms_norm(a, (3,), w) * dt.arange(3, dtype=F64), lambda: [rnd(2, 3), rnd(3)]),
                 (lambda a: dt.rms_norm(a, (3,), eps=1e-3), lambda: [rnd(2, 3)])],
    "logsumexp": [(lambda a: dt.logsumexp(a, [1]), lambda: [rnd(2, 3)])],
    "masked_fill": [(lambda a: dt.masked_fill(a, dt.tensor([True, False, True]), 1.5), lambda: [rnd(2, 3)])],
    "max": [(dt.max, lambda: [rnd(2, 3)])],
    "max.dim": [(lambda a: dt.max(a, 1).values, lambda: [rnd(2, 3)])],
    "max.other": [(dt.max, lambda: [rnd(2, 3), rnd(3)])],
    "min": [(dt.min, lambda: [rnd(2, 3)])],
    "min.dim": [(lambda a: dt.min(a, 0, keepdim=True)[0], lambda: [rnd(2, 3)])],
    "min.other": [(dt.min, lambda: [rnd(2, 3), rnd(2, 1)])],
    "nan_to_num": [(dt.nan_to_num, lambda: [rnd(3)])],
    "std": [(lambda a: dt.std(a, 1), lambda: [rnd(2, 3)])],
    # The issue-19 ops: composites through their bodies, conv and pools through _im2col's formula.
    "_im2col": [(lambda a, w: F.conv2d(a, w, padding=1, stride=2), lambda: [rnd(1, 2, 4, 4), rnd(2, 2, 3, 3)])],
    # _col2im (the input gradient of conv and pools) through a second derivative of conv2d.
    "_col2im": [(lambda a, w: dt.autograd.grad((F.conv2d(a, w, padding=1, stride=2, dilation=(1, 2)) ** 2).sum(), a,
                                               create_graph=True)[0],
                 lambda: [rnd(1, 2, 5, 5), rnd(2, 2, 2, 3)])],
    "conv2d": [(lambda a, w, b: F.conv2d(a, w, b, padding=1, groups=2), lambda: [rnd(1, 2, 3, 3), rnd(2, 1, 2, 2), rnd(2)])],
    "conv2d.padding": [(lambda a, w: F.conv2d(a, w, padding="same"), lambda: [rnd(1, 1, 3, 3), rnd(1, 1, 3, 3)])],
    "conv1d": [(lambda a, w: F.conv1d(a, w, dilation=2), lambda: [rnd(1, 2, 6), rnd(2, 2, 2)])],
    "conv1d.padding": [(lambda a, w: F.conv1d(a, w, padding="valid"), lambda: [rnd(1, 1, 5), rnd(1, 1, 2)])],
    "max_pool2d": [(lambda a: F.max_pool2d(a, 2), lambda: [rnd(1, 1, 4, 4)])],
    "avg_pool2d": [(lambda a: F.avg_pool2d(a, 2, padding=1), lambda: [rnd(1, 1, 3, 3)])],
    "adaptive_avg_pool2d": [(lambda a: F.adaptive_avg_pool2d(a, (2, 1)), lambda: [rnd(1, 1, 4, 3)])],
    "pad": [(lambda a: F.pad(a, (1, 2), mode="reflect"), lambda: [rnd(1, 2, 4)]),
            (lambda a: F.pad(a, (1, 1, 0, 1), value=0.5), lambda: [rnd(2, 3)])],
    "interpolate": [(lambda a: F.interpolate(a, scale_factor=2, mode="bilinear"), lambda: [rnd(1, 1, 2, 2)])],
    "linear": [(F.linear, lambda: [rnd(2, 3), rnd(4, 3), rnd(4)])],
    "cross_entropy": [(lambda a: F.cross_entropy(a, dt.tensor([2, 0]), label_smoothing=0.1), lambda: [rnd(2, 3)]),
                      (lambda a, p: F.cross_entropy(a, p.softmax(-1)), lambda: [rnd(2, 3), rnd(2, 3)])],
    "nll_loss": [(lambda a: F.nll_loss(a, dt.tensor([1, 2]), ignore_index=2), lambda: [rnd(2, 3)])],
    "mse_loss": [(F.mse_loss, lambda: [rnd(2, 3), rnd(2, 3)])],
    "l1_loss": [(F.l1_loss, lambda: [rnd(2, 3), rnd(2, 3)])],
    "smooth_l1_loss": [(lambda a, b: F.smooth_l1_loss(a, b, beta=0.5), lambda: [rnd(4), rnd(4)])],
    "binary_cross_entropy_with_logits": [(F.binary_cross_entropy_with_logits,
                                          lambda: [rnd(2, 3), rnd(2, 3).sigmoid().detach()])],
    "kl_div": [(lambda a, b: F.kl_div(a, b, reduction="batchmean"), lambda: [rnd(2, 3), rnd(2, 3, low=0.1)])],
    "dropout": [(lambda a: F.dropout(a, 0.5, training=False), lambda: [rnd(3)])],
    "scaled_dot_product_attention": [(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                                      lambda: [rnd(1, 3, 2), rnd(1, 3, 2), rnd(1, 3, 2)])],
    # scaled_dot_product_attention without dropout runs through it (its body on the CPU): a
    # bool mask that keeps, a float mask that adds (its gradient too), an explicit scale.
    "_fused_attention": [
        (lambda q, k, v: F.scaled_dot_product_attention(
            q, k, v, attn_mask=dt.tensor([[True, False, True], [False, True, True]]), scale=0.7),
         lambda: [rnd(1, 2, 2), rnd(1, 3, 2), rnd(1, 3, 2)]),
        (lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
         lambda: [rnd(1, 2, 2), rnd(1, 3, 2), rnd(1, 3, 2), rnd(2, 3)]),
        # Dropout's keep mask: reseeded per call, so every evaluation drops the same weights.
        (lambda q, k, v: (dt.manual_seed(5), F.scaled_dot_product_attention(q, k, v, dropout_p=0.4,
                                                                             is_causal=True))[1],
         lambda: [rnd(2, 3, 2), rnd(2, 3, 2), rnd(2, 3, 3)])],
    "softplus": [(F.softplus, lambda: [rnd(4)])],
    "elu": [(F.elu, lambda: [rnd(4)])],
    "leaky_relu": [(lambda a: F.leaky_relu(a, 0.1), lambda: [rnd(4)])],
    "hardswish": [(F.hardswish, lambda: [rnd(4)])],
    "hardtanh": [(F.hardtanh, lambda: [rnd(4)])],
    "relu6": [(lambda a: F.relu6(a * 4), lambda: [rnd(4)])],
    "relu.inplace": [(lambda a: F.relu(a, inplace=False), lambda: [rnd(4)])],
    "silu.inplace": [(lambda a: F.silu(a, inplace=False), lambda: [rnd(4)])],
    "mish": [(F.mish, lambda: [rnd(4)])],
    "glu": [(F.glu, lambda: [rnd(2, 4)])],
    "normalize": [(F.normalize, lambda: [rnd(2, 3)])],
    "group_norm": [(lambda a, w, b: F.group_norm(a, 2, w, b), lambda: [rnd(1, 4, 2), rnd(4), rnd(4)])],
    "batch_norm": [(lambda a, w, b: F.batch_norm(a, None, None, w, b, training=True), lambda: [rnd(3, 2), rnd(2), rnd(2)])],
    "einsum": [(lambda a, b: dt.einsum("ij,jk->ik", a, b), lambda: [rnd(2, 3), rnd(3, 2)])],
    "addmm": [(dt.addmm, lambda: [rnd(2), rnd(2, 3), rnd(3, 2)])],
    "baddbmm": [(dt.baddbmm, lambda: [rnd(1, 2, 2), rnd(1, 2, 3), rnd(1, 3, 2)])],
    "lerp": [(dt.lerp, lambda: [rnd(3), rnd(3), rnd(3)])],
    "meshgrid": [(lambda a, b: dt.meshgrid(a, b, indexing="xy")[0] * dt.meshgrid(a, b)[1].t(),
                  lambda: [rnd(3), rnd(2)])],
    "broadcast_tensors": [(lambda a, b: dt.broadcast_tensors(a, b)[0] * 2 + dt.broadcast_tensors(a, b)[1],
                           lambda: [rnd(2, 1), rnd(3)])],
    "repeat_interleave": [(lambda a: dt.repeat_interleave(a, 2, dim=1), lambda: [rnd(2, 3)]),
                          (lambda a: a.repeat_interleave(3), lambda: [rnd(2, 2)])],
    "diff": [(lambda a, p: dt.diff(a, n=2, dim=0, prepend=p), lambda: [rnd(3, 2), rnd(1, 2)])],
    "addcmul": [(lambda a, b, c: dt.addcmul(a, b, c, value=0.5), lambda: [rnd(2, 3), rnd(3), rnd(2, 3)])],
    "addcdiv": [(lambda a, b, c: dt.addcdiv(a, b, c, value=-2), lambda: [rnd(2, 3), rnd(2, 3), rnd(3, low=0.5)])],
    "hypot": [(dt.hypot, lambda: [rnd(3), rnd(3)])],
    "logaddexp": [(dt.logaddexp, lambda: [rnd(3), rnd(3)])],
    "norm": [(dt.norm, lambda: [rnd(2, 3)])],
    "norm.str": [(lambda a: dt.norm(a, "fro"), lambda: [rnd(2, 3)])],
    "linalg_norm": [(dt.linalg.norm, lambda: [rnd(2, 3)])],
    "linalg_norm.str": [(lambda a: dt.linalg.norm(a, "fro"), lambda: [rnd(2, 3)])],
    "linalg_vector_norm": [(lambda a: dt.linalg.vector_norm(a, 3), lambda: [rnd(4)])],
    "outer": [(dt.outer, lambda: [rnd(2), rnd(3)])],
    "cross": [(lambda a, b: dt.cross(a, b, dim=1), lambda: [rnd(2, 3), rnd(2, 3)])],
    "linalg_cross": [(dt.linalg.cross, lambda: [rnd(2, 3), rnd(2, 3)])],
    "diag": [(dt.diag, lambda: [rnd(3, 3)]), (dt.diag, lambda: [rnd(3)])],
    "trace": [(dt.trace, lambda: [rnd(3, 3)])],
    "movedim": [(lambda a: dt.movedim(a, 0, 1) * dt.arange(2, dtype=F64), lambda: [rnd(2, 3)])],
    "t": [(lambda a: a.t() * dt.arange(2, dtype=F64), lambda: [rnd(2, 3)])],
    "tile": [(lambda a: dt.tile(a, (2, 1)), lambda: [rnd(2, 3)])],
    "type_as": [(lambda a: a.type_as(a), lambda: [rnd(3)])],
    "var": [(dt.var, lambda: [rnd(2, 3)])],
}

# Registry ops with no gradient to check, and why.
NOT_DIFFERENTIABLE = {
    **{name: "a bool result" for name in (
        "all", "any", "eq", "ne", "lt", "le", "gt", "ge", "isnan", "isinf", "isfinite", "logical_and",
        "logical_or", "logical_xor", "logical_not")},
    **{name: "an integer result" for name in (
        "argmax", "argmin", "argsort", "count_nonzero", "nonzero", "one_hot", "where.condition")},
    **{name: "a bool result or a Python-level comparison" for name in ("allclose", "equal", "isclose")},
    **{name: "an integer result: positions in a sorted sequence" for name in ("searchsorted", "bucketize")},
    "unique": "PyTorch has no derivative for it either: its values are picked by equality, not computed",
    **{name: "a random draw, or new values that depend on nothing differentiable" for name in (
        "bernoulli", "bernoulli.p", "multinomial", "normal", "normal.float", "randint", "randint.low", "randperm",
        "uniform", "new_empty", "new_full", "new_ones", "new_zeros", "_batch_norm_update_stats")},
    **{name: "makes a new leaf from sizes or values" for name in (
        "_tensor_constant", "arange", "empty", "empty_like", "eye", "full", "full_like", "linspace", "ones",
        "ones_like", "rand", "rand_like", "randn", "randn_like", "zeros", "zeros_like")},
    **{name: "an optimizer's in-place update, run under no_grad (test_optim.py)" for name in (
        "_fused_sgd_", "_fused_adam_")},
}
# Checked elsewhere: moving between devices needs a CUDA device (test_cuda_runtime's stand-in).
CHECKED_ON_DEVICE = {"_to_device"}


def test_every_differentiable_op_passes_gradcheck():
    random.seed(0)
    dt.manual_seed(0)
    failures = []
    for name, cases in CASES.items():
        for fn, make, *options in cases:
            try:
                gradcheck(fn, tuple(make()), **(options[0] if options else {}))
            except Exception as e:  # noqa: BLE001 - every failure is listed together
                failures.append(f"{name}: {type(e).__name__}: {e}")
    assert not failures, "\n".join(failures)


def test_gradcheck_covers_every_registry_op():
    how = dt._autograd_ops()
    covered = set(CASES) | set(NOT_DIFFERENTIABLE) | CHECKED_ON_DEVICE
    missing = sorted(set(how) - covered)
    assert not missing, f"registry ops without a gradcheck case or a reason: {missing}"
    undifferentiated = sorted(n for n in CASES if how.get(n) == "none")
    assert not undifferentiated, f"ops in the gradcheck table autograd does not differentiate: {undifferentiated}"
    stale = sorted(covered - set(how))
    assert not stale, f"table entries for ops the registry does not have: {stale}"


def test_gradcheck_catches_a_wrong_gradient():
    x = rnd(3)
    # A function whose forward is x but whose gradient is cut: gradcheck must see the difference.
    assert_raises(AssertionError, lambda: gradcheck(lambda a: a.detach() * 1.0 + a * 0.0 + a * 0.0 + a.detach(), (x,)))


def test_embedding_padding_row_gets_no_gradient():
    # PyTorch's rule: the padding row is read like any other, but never trained.
    w = rnd(3, 2)
    dt.embedding(dt.tensor([0, 1, 0]), w, padding_idx=0).sum().backward()
    assert w.grad.tolist() == [[0.0, 0.0], [1.0, 1.0], [0.0, 0.0]]


def test_backward_accumulates_into_leaf_grad_and_reduces_broadcasts():
    x = dt.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = dt.tensor([[0.5]], requires_grad=True)
    assert x.is_leaf and x.grad is None and x.grad_fn is None
    y = (x * x + b).sum()
    assert not y.is_leaf and y.grad_fn.name() == "SumBackward0"
    y.backward()
    assert x.grad.tolist() == [2.0, 4.0, 6.0] and b.grad.tolist() == [[3.0]]
    (x * 3).sum().backward()
    assert x.grad.tolist() == [5.0, 7.0, 9.0]  # accumulated, as PyTorch
    x.grad = None
    assert x.grad is None


def test_gradient_of_a_transposed_operand_has_the_operands_layout():
    # nn.Linear multiplies by w.T: PyTorch's w.grad has w's strides (no transposing copy into
    # .grad), and so has dyntrace's, for either operand. Each value is a float32 sum of 4 or 5
    # products, against the same sum in Python floats: within 8 ulp of the sum of magnitudes.
    def product(p, q, pt=False, qt=False):  # Python-float (p or pᵀ) @ (q or qᵀ) of nested lists
        p = [list(r) for r in zip(*p)] if pt else p
        q = [list(r) for r in zip(*q)] if qt else q
        return [[[u * v for u, v in zip(row, col)] for col in zip(*q)] for row in p]

    def check(got, terms):
        for got_row, term_row in zip(got.tolist(), terms):
            for value, ts in zip(got_row, term_row):
                assert abs(value - sum(ts)) <= 8 * 2.0 ** -24 * sum(abs(t) for t in ts), (value, ts)

    x = dt.randn(4, 3, requires_grad=True)
    w = dt.randn(5, 3, requires_grad=True)
    g = dt.randn(4, 5)
    (x @ w.T).backward(g)
    assert w.grad.stride() == (3, 1) and x.grad.stride() == (3, 1), (w.grad.stride(), x.grad.stride())
    check(w.grad, product(g.tolist(), x.tolist(), pt=True))  # gᵀ x
    check(x.grad, product(g.tolist(), w.tolist()))           # g w
    a = dt.randn(5, 4, requires_grad=True)  # a.T @ b: the left operand stored transposed
    b = dt.randn(5, 2)
    h = dt.randn(4, 2)
    (a.T @ b).backward(h)
    assert a.grad.stride() == (4, 1), a.grad.stride()
    check(a.grad, product(b.tolist(), h.tolist(), qt=True))  # b hᵀ


def test_requires_grad_rules():
    assert dt.ones(2, requires_grad=True).requires_grad
    assert dt.zeros(2, 3).requires_grad is False
    assert_raises(RuntimeError, lambda: dt.ones(2, dtype=dt.int64, requires_grad=True))
    y = dt.ones(2, requires_grad=True) * 2
    assert_raises(RuntimeError, lambda: setattr(y, "requires_grad", False))
    assert repr(y).endswith("grad_fn=<MulBackward0>)")
    assert repr(dt.ones(1, requires_grad=True)).endswith("requires_grad=True)")
    assert_raises(RuntimeError, lambda: dt.ones(3).sum().backward())
    assert_raises(RuntimeError, lambda: (dt.ones(3, requires_grad=True) * 2).backward())  # not a scalar


def test_detach_and_retain_grad():
    x = dt.ones(3, requires_grad=True)
    h = x * 2
    h.retain_grad()
    d = h.detach()
    assert not d.requires_grad and d.grad_fn is None
    (h * h).sum().backward()
    assert h.grad.tolist() == [4.0, 4.0, 4.0] and x.grad.tolist() == [8.0, 8.0, 8.0]


def test_autograd_grad_with_create_graph_gives_second_derivatives():
    x = dt.tensor([0.3, -1.2, 2.0], dtype=F64, requires_grad=True)
    (dy,) = dt.autograd.grad((x ** 3).sum(), x, create_graph=True)
    assert [round(v, 12) for v in dy.tolist()] == [round(3 * v * v, 12) for v in x.tolist()]
    (d2,) = dt.autograd.grad(dy.sum(), x)
    assert [round(v, 12) for v in d2.tolist()] == [round(6 * v, 12) for v in x.tolist()]
    assert x.grad is None  # grad() leaves .grad alone
    w = dt.ones(2, requires_grad=True)
    assert_raises(RuntimeError, lambda: dt.autograd.grad((x * 2).sum(), [x, w]))
    assert dt.autograd.grad((x * 2).sum(), [x, w], allow_unused=True)[1] is None


def test_backward_twice_needs_retain_graph():
    x = dt.ones(2, requires_grad=True)
    y = (x.exp() * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    assert_raises(RuntimeError, y.backward)


def test_grad_modes():
    x = dt.ones(2, requires_grad=True)
    with dt.no_grad():
        assert not (x * 2).requires_grad
        with dt.enable_grad():
            assert (x * 2).requires_grad
    with dt.set_grad_enabled(False):
        assert not dt.is_grad_enabled()
    assert dt.is_grad_enabled()
    with dt.inference_mode():
        assert not (x + 1).requires_grad

    @dt.no_grad()
    def scaled(t):
        return t * 3

    assert not scaled(x).requires_grad and dt.is_grad_enabled()


def test_inplace_rules_and_version_counter():
    x = dt.ones(3, requires_grad=True)
    assert_raises(RuntimeError, lambda: x.add_(1))  # a leaf that requires grad
    with dt.no_grad():
        x.mul_(2)  # allowed: how optimizers update parameters
    assert x._version == 1
    y = x.exp()
    y.add_(1)  # y is saved by exp's backward: changing it must make backward refuse
    assert_raises(RuntimeError, lambda: y.sum().backward())
    z = x * 1.0
    z.mul_(x)  # in place on a non-leaf: history rebased, old values kept for backward
    z.sum().backward()
    assert x.grad.tolist() == [4.0, 4.0, 4.0]  # d(x*x)/dx at x = 2
    v = x * 1.0
    view = v[1:]
    view.add_(1)  # through a view: v's history is rebased (test_inplace_through_views below)
    assert v.grad_fn.name() == "CopySlices" and view._version == v._version


def test_setitem_records_both_sides():
    x = dt.tensor([1.0, 2.0, 3.0], requires_grad=True)
    w = dt.tensor([10.0], requires_grad=True)
    buf = dt.zeros(3)
    buf[1:2] = w * x[0]
    (buf * dt.tensor([1.0, 5.0, 1.0])).sum().backward()
    assert w.grad.tolist() == [5.0] and x.grad.tolist() == [50.0, 0.0, 0.0]


def test_jit_runs_autograd_eagerly_and_compiles_without_it():
    def loss(a, w):
        return (a @ w).relu().sum()

    compiled = dt.jit(backend="eager")(lambda a, w: loss(a, w))
    a = dt.randn(4, 5)
    w = dt.randn(5, 3, requires_grad=True)
    out = compiled(a, w)
    out.backward()
    expected = w.grad.tolist()
    w.grad = None
    loss(a, w).backward()
    assert w.grad.tolist() == expected and out.requires_grad
    with dt.no_grad():
        assert not compiled(a, w).requires_grad
        assert compiled(a, w).tolist() == loss(a, w).tolist()


def close(got, want, tol=1e-12):
    """Float64 lists equal up to a few roundings of values of order one."""
    return len(got) == len(want) and all(abs(g - w) <= tol * (1 + abs(w)) for g, w in zip(got, want))


def test_backward_with_inputs_accumulates_only_into_them():
    # d/dx sum(tanh(x w) x) = tanh(x w) + x w (1 - tanh(x w)^2), written out with math.
    import math
    x, w = rnd(4), rnd(4)
    xs, ws = x.tolist(), w.tolist()
    want = [math.tanh(a * b) + a * b * (1 - math.tanh(a * b) ** 2) for a, b in zip(xs, ws)]
    out = ((x * w).tanh() * x).sum()
    out.backward(inputs=[x], retain_graph=True)
    assert w.grad is None and close(x.grad.tolist(), want)
    out.backward(inputs=x)  # a single tensor, and accumulation as in PyTorch
    assert w.grad is None and close(x.grad.tolist(), [2 * v for v in want])
    # The same numbers as the full backward's, which fills every leaf.
    x2, w2 = x.detach().requires_grad_(), w.detach().requires_grad_()
    ((x2 * w2).tanh() * x2).sum().backward()
    assert close(x2.grad.tolist(), want) and w2.grad is not None


def test_backward_with_inputs_fills_non_leaves_and_matches_finite_differences():
    # PyTorch's test_backward_with_nonleaf_inputs: out = h^2 + y h + y^2 with h = x * 1.
    x, y, z = rnd(2, 2), rnd(2, 2), rnd(2, 2)
    h = x * 1
    out = h ** 2 + y * h + y ** 2
    out.backward(dt.ones(2, 2, dtype=F64), inputs=[x, y, h])
    xs, ys = x.reshape(-1).tolist(), y.reshape(-1).tolist()
    assert close(x.grad.reshape(-1).tolist(), [2 * a + b for a, b in zip(xs, ys)])
    assert close(y.grad.reshape(-1).tolist(), [a + 2 * b for a, b in zip(xs, ys)])
    assert close(h.grad.reshape(-1).tolist(), [2 * a + b for a, b in zip(xs, ys)])
    # An input backward does not reach keeps grad None (backward has no allow_unused).
    (h * y).sum().backward(inputs=[z])
    assert z.grad is None
    # Central differences in float64 (error model in gradcheck's docstring) for a composite.
    a = rnd(3, 2)
    b = rnd(2, 3, transposed=True)
    fn = lambda a, b: (a @ b).sigmoid().sum()  # noqa: E731
    fn(a, b).backward(inputs=[b])
    assert a.grad is None
    (want,) = dt.autograd.grad(fn(a, b), b)
    assert close(b.grad.reshape(-1).tolist(), want.reshape(-1).tolist())
    gradcheck(lambda b: fn(a.detach(), b), [b.detach().clone().requires_grad_()])


def test_backward_inputs_rules_and_autograd_backward():
    x = dt.ones(3, requires_grad=True)
    k = dt.ones(3)
    assert_raises(RuntimeError, lambda: (x * 2).sum().backward(inputs=[]))
    assert_raises(RuntimeError, lambda: (x * 2).sum().backward(inputs=[k]))  # does not require grad
    assert_raises(TypeError, lambda: (x * 2).sum().backward(inputs=[1.0]))
    h = x * 3
    h.retain_grad()  # a node backward runs: its retained grad is filled as in PyTorch
    (h * h).sum().backward(inputs=[x, x])  # listed twice, accumulated once
    assert x.grad.tolist() == [18.0] * 3 and h.grad.tolist() == [6.0] * 3
    w = dt.ones(3, requires_grad=True)
    x.grad = None
    dt.autograd.backward([(x * w).sum()], inputs=[w])
    assert x.grad is None and w.grad.tolist() == [1.0] * 3
    dt.autograd.backward(x * w, grad_tensors=dt.tensor([1.0, 2.0, 3.0]), inputs=(x,))
    assert x.grad.tolist() == [1.0, 2.0, 3.0]
    assert_raises(RuntimeError, lambda: dt.autograd.backward((x * w).sum(), inputs=[]))
    # create_graph: the accumulated grad keeps its history, so it differentiates again.
    x.grad = None
    (x ** 3).sum().backward(inputs=[x], create_graph=True)
    (d2,) = dt.autograd.grad(x.grad.sum(), x)
    assert d2.tolist() == [6.0] * 3


def through_view(make):
    """fn(x, z) computing y = 2x, changing it in place through views as `make(y, z)` says, and
    returning y's (and the views') values."""
    def fn(x, z):
        y = x * 2
        out = make(y, z)  # a tuple of views to return too, or the in-place op's own result
        return (y,) + (out if isinstance(out, tuple) else ())
    return fn


def chunk_inplace(y, z):
    a, b = y.chunk(2, 0)
    a.mul_(z[0])
    return (b,)


def view_of_view(y, z):
    row = y[1]
    row[1:].mul_(z)
    return (row,)


def test_inplace_through_views_passes_gradcheck():
    # PyTorch's CopySlices: the base's history becomes "the view's elements from the in-place
    # result, the rest from the old base"; views read afterwards take their grad_fn afresh.
    x, z = rnd(3, 3), rnd(2)
    cases = {
        "select then mul_": lambda y, z: y[:, 0].mul_(3),
        "narrow then add_": lambda y, z: y.narrow(1, 1, 2)[0].add_(z),
        "transposed setitem": lambda y, z: y.t()[0].__setitem__(slice(1, 3), z * z),
        "base changed after the view": lambda y, z: (y[1:], y.mul_(z[0]))[:1],
        "view of a view": view_of_view,
        "chunk output": chunk_inplace,
        "reading the view's old values": lambda y, z: y[:, 1].mul_(y[:, 2].exp()),
        "copy_ through unsqueeze": lambda y, z: y.unsqueeze(0)[0, 1:, 0].copy_(z.tanh()),
    }
    for name, make in cases.items():
        fn = through_view(make)
        try:
            gradcheck(fn, [x, z])
            gradcheck(fn, [rnd(3, 3, transposed=True), z])
        except Exception as e:  # noqa: BLE001 - name the case
            raise AssertionError(f"{name}: {e}") from e


def test_inplace_through_views_second_derivatives():
    # create_graph through CopySlices: the gradient of the gradient, against finite differences
    # of the gradient written with autograd.grad.
    def grad_of(x, z):
        y = x * x
        y[0].mul_(z)
        (g,) = dt.autograd.grad((y * y).sum(), x, create_graph=True)
        return g
    gradcheck(grad_of, [rnd(2, 2), rnd(2)])


def test_inplace_through_views_refusals_and_values():
    x = dt.ones(2, 3, requires_grad=True)
    # A view of a leaf that requires grad: PyTorch's error.
    assert_raises(RuntimeError, lambda: x[0].mul_(2), match="a view of a leaf Variable")
    # Part of a tensor autograd does not follow, given a value that requires grad: the base
    # would change without a history, so it is refused (writing into the whole tensor is not).
    buf = dt.zeros(2, 3)
    assert_raises(RuntimeError, lambda: buf[1].add_(x[0]), match="does not require grad")
    buf[1] = x[0] * 2
    buf.sum().backward()
    assert x.grad.tolist() == [[2.0] * 3, [0.0] * 3]
    # Values as PyTorch has them; the view's grad_fn is taken afresh from y's new history.
    y = x * 2
    col = y[:, 0]
    col.mul_(3)
    assert y.tolist() == [[6.0, 2.0, 2.0], [6.0, 2.0, 2.0]] and col.tolist() == [6.0, 6.0]
    assert y.grad_fn.name() == "CopySlices" and col.grad_fn.name() == "GetitemBackward0"
    y.sum().backward(inputs=[x])
    assert x.grad.tolist() == [[8.0, 4.0, 4.0], [6.0, 2.0, 2.0]]  # accumulated onto buf's
