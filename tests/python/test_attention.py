"""Fused attention on the CPU (runtime/cpu_attention.h): scaled_dot_product_attention on float32
CPU tensors, eagerly and under autograd, against float64 numpy with the error bound
tests/python/attnlib.py derives; what the fused loop does not take runs the unfused ops; the cpu
backend keeps attention written out op by op exact. The CUDA kernel is checked on the emulated
device (test_cuda_emulated.py)."""
import math

import dyntrace as dt
import dyntrace.nn.functional as F
from jitlib import fresh_copy
from testlib import require_numpy


def fused_runs():
    return dt.stats()["fused_attention_runs"]


def expect_fused():
    """Whether float32 attention on this CPU takes the fused loop (dyntrace's AVX-512 GEMM)."""
    return dt._cpu_gemm() == "avx512"


def make(rng, np, *shape):
    return dt.tensor(rng.standard_normal(shape).astype(np.float32))


def test_sdpa_on_the_cpu_matches_float64_for_every_mask_kind():
    # Every mask kind, causal or not, more keys than one tile (256), a head dim of 128, rows whose
    # every key is masked (NaN, as softmax gives), broadcast and strided operands.
    require_numpy()
    import numpy as np
    from attnlib import attention_reference, check_attention
    rng = np.random.default_rng(5)
    cases = [  # batch, L, S, E, Ev, mask, strided
        ((2, 3), 37, 300, 64, 64, "keep", False),
        ((1, 2), 130, 130, 128, 100, "causal", False),
        ((2,), 9, 33, 16, 8, "add", False),
        ((), 70, 520, 32, 32, "keep rows empty", False),
        ((2, 3), 20, 20, 24, 24, "causal", True),
        ((1, 4), 65, 40, 80, 97, "none", False),
    ]
    for batch, L, S, E, Ev, mask, strided in cases:
        if strided:  # heads split from [B, T, H, E] by a transpose
            q, k, v = (make(rng, np, batch[0], n, batch[1], w).transpose(1, 2) for n, w in ((L, E), (S, E), (S, Ev)))
        else:
            q, k, v = make(rng, np, *batch, L, E), make(rng, np, *batch, S, E), make(rng, np, *batch, S, Ev)
        if len(batch) == 2 and batch[0] == 2 and not strided:
            k = k[:1].expand(*k.shape)  # a broadcast batch dim
        kwargs, ref = {}, {}
        if mask.startswith("keep"):
            keep = rng.random((L, S)) > 0.3
            if mask == "keep rows empty":
                keep[::4] = False
            kwargs["attn_mask"], ref["keep"] = dt.tensor(keep), keep
        elif mask == "add":
            add = make(rng, np, L, S)
            kwargs["attn_mask"], ref["add"] = add, add.numpy()
        elif mask == "causal":
            kwargs["is_causal"], ref["causal"] = True, True
        before = fused_runs()
        got = F.scaled_dot_product_attention(q, k, v, **kwargs)
        assert fused_runs() == before + (1 if expect_fused() else 0), (batch, L, S, mask)
        want, tol = attention_reference(q.numpy(), k.numpy(), v.numpy(), 1 / math.sqrt(E), "float32", **ref)
        check_attention(got, want, tol, (batch, L, S, E, Ev, mask, strided))


def test_what_the_fused_loop_does_not_take_gives_the_unfused_values():
    # float64 and a head dim over 128 run the unfused ops; so does float16 on the CPU.
    require_numpy()
    import numpy as np
    from attnlib import attention_reference, check_attention
    rng = np.random.default_rng(6)
    for dtype, E in ((dt.float64, 16), (dt.float32, 160)):
        q, k, v = (make(rng, np, 2, 7, E).to(dtype) for _ in range(3))
        before = fused_runs()
        got = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        assert fused_runs() == before and got.dtype == dtype
        want, tol = attention_reference(q.double().numpy(), k.double().numpy(), v.double().numpy(), E ** -0.5,
                                        "float32", causal=True)
        check_attention(got, want, tol, (dtype, E))


def attention_written_out(q, k, v, mask):
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
    return dt.softmax(dt.where(mask, att, float("-inf")), -1) @ v


def attention_added_mask(q, k, v, mask):
    return dt.softmax((q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1]) + mask, dim=-1) @ v


def test_the_cpu_backend_keeps_written_out_attention_exact():
    # The cpu backend leaves attention written out op by op to its own kernels, which compute
    # exactly what the eager ops do (the fused loop rounds differently); the cuda backend fuses it.
    require_numpy()
    import numpy as np
    rng = np.random.default_rng(7)
    q, k, v = make(rng, np, 2, 3, 40, 16), make(rng, np, 2, 3, 300, 16), make(rng, np, 2, 3, 300, 8)
    keep = dt.tensor(rng.random((40, 300)) > 0.25)
    for fn, mask in ((attention_written_out, keep), (attention_added_mask, make(rng, np, 40, 300))):
        compiled = dt.jit(fresh_copy(fn), backend="cpu")
        before = fused_runs()
        got = compiled(q, k, v, mask)
        assert fused_runs() == before and dt.stats()["graph_breaks"] == 0, fn.__name__
        assert got.tolist() == fn(q, k, v, mask).tolist(), fn.__name__


def test_attention_gradients_through_the_fused_loop():
    # Under autograd the forward is the fused loop and the backward recomputes the weights
    # (`_fused_attention`'s formula): against float64 numpy gradients with attnlib's bound.
    require_numpy()
    import numpy as np
    from attnlib import attention_grads
    rng = np.random.default_rng(8)
    q, k, v, w = make(rng, np, 2, 2, 33, 16), make(rng, np, 2, 2, 45, 16), make(rng, np, 2, 2, 45, 8), \
        make(rng, np, 2, 2, 33, 8)
    leaves = [t.clone().requires_grad_(True) for t in (q, k, v)]
    before = fused_runs()
    (F.scaled_dot_product_attention(*leaves, is_causal=True) * w).sum().backward()
    assert fused_runs() == before + (1 if expect_fused() else 0)
    grads = attention_grads(q.numpy(), k.numpy(), v.numpy(), w.numpy(), 0.25, causal=True)
    for leaf, (want, tol), name in zip(leaves, grads, "qkv"):
        err = abs(leaf.grad.numpy().astype(np.float64) - want)
        assert (err <= tol + 1e-30).all(), (name, err.max())
