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


def mask_arguments(rng, np, mask, L, S):
    """scaled_dot_product_attention's keyword arguments for mask kind `mask` ("keep", "keep rows
    empty", "add", "causal", "none") and attnlib's reference arguments for the same mask."""
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
    return kwargs, ref


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
        kwargs, ref = mask_arguments(rng, np, mask, L, S)
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


def dropout_keeps(seed, shape, p):
    """Where F.dropout keeps weights of `shape` drawn right after manual_seed(seed) (dropout of
    ones is nonzero exactly there): the draw scaled_dot_product_attention must make too."""
    dt.manual_seed(seed)
    return (F.dropout(dt.ones(*shape), p) != 0).numpy()


def test_sdpa_dropout_drops_what_dropout_drops_and_stays_fused():
    # dropout_p > 0 is the fused loop with dropout's keep mask, drawn as dropout draws it (the same
    # seed drops the same weights as F.dropout of the written-out weights), scaled by 1 / (1 - p):
    # against float64 numpy with that mask. The weights' shape is the scores' (q k^T with the mask
    # broadcast), not the result's: a value with a batch dim of its own shares one draw.
    require_numpy()
    import numpy as np
    from attnlib import attention_reference, check_attention
    rng = np.random.default_rng(9)
    p = 0.25
    cases = [  # q batch, k batch, v batch, L, S, E, Ev, mask
        ((2, 3), (2, 3), (2, 3), 37, 300, 64, 64, "causal"),
        ((2,), (2,), (2,), 9, 33, 16, 8, "keep"),
        ((1, 2), (1, 2), (1, 2), 20, 40, 32, 32, "add"),
        ((2, 3), (1, 3), (2, 3), 16, 16, 8, 8, "none"),
        ((1,), (1,), (2,), 12, 20, 8, 8, "none"),
    ]
    for i, (qb, kb, vb, L, S, E, Ev, mask) in enumerate(cases):
        q, k, v = make(rng, np, *qb, L, E), make(rng, np, *kb, S, E), make(rng, np, *vb, S, Ev)
        kwargs, ref = mask_arguments(rng, np, mask, L, S)
        scores_batch = np.broadcast_shapes(qb, kb)
        drop = dropout_keeps(100 + i, scores_batch + (L, S), p)
        dt.manual_seed(100 + i)
        before = fused_runs()
        got = F.scaled_dot_product_attention(q, k, v, dropout_p=p, **kwargs)
        assert fused_runs() == before + (1 if expect_fused() else 0), (qb, kb, vb, mask)
        want, tol = attention_reference(q.numpy(), k.numpy(), v.numpy(), 1 / math.sqrt(E), "float32", drop=drop,
                                        drop_scale=1 / (1 - p), **ref)
        check_attention(got, want, tol, (qb, kb, vb, L, S, mask, "dropout"))
        # The unfused ops from the same seed: the same draw, so the same values within both bounds.
        dt.manual_seed(100 + i)
        weights = (q @ k.transpose(-2, -1) / math.sqrt(E))
        if mask == "keep":
            weights = weights.masked_fill(~kwargs["attn_mask"], float("-inf"))
        elif mask == "add":
            weights = weights + kwargs["attn_mask"]
        elif mask == "causal":
            weights = weights.masked_fill(dt.ones(L, S, dtype=dt.bool).triu(1), float("-inf"))
        unfused = F.dropout(weights.softmax(-1), p) @ v
        check_attention(unfused, want, tol, (qb, kb, vb, L, S, mask, "unfused dropout"))


def test_sdpa_dropout_edges():
    # p = 1 drops every weight without drawing (as dropout does); p outside [0, 1] is dropout's
    # error; float64 (which the fused loop does not take) runs the unfused ops with the same draw.
    require_numpy()
    import numpy as np
    from attnlib import attention_reference, check_attention
    rng = np.random.default_rng(10)
    q, k, v = make(rng, np, 2, 5, 8), make(rng, np, 2, 6, 8), make(rng, np, 2, 6, 4)
    assert F.scaled_dot_product_attention(q, k, v, dropout_p=1.0).tolist() == dt.zeros(2, 5, 4).tolist()
    try:
        F.scaled_dot_product_attention(q, k, v, dropout_p=1.5)
        raise AssertionError("dropout_p=1.5 was accepted")
    except ValueError as e:
        assert "dropout probability has to be between 0 and 1, but got 1.5" in str(e), e
    drop = dropout_keeps(4, (2, 5, 6), 0.5)
    dt.manual_seed(4)
    before = fused_runs()
    got = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), dropout_p=0.5)
    assert fused_runs() == before and got.dtype == dt.float64
    want, tol = attention_reference(q.numpy(), k.numpy(), v.numpy(), 8 ** -0.5, "float32", drop=drop, drop_scale=2.0)
    check_attention(got, want, tol, "float64 dropout")


def test_sdpa_dropout_gradients_and_compiled_calls():
    # Under autograd the forward is the fused loop and the backward recomputes the weights and
    # applies the same keep mask (`_fused_attention`'s formula): against float64 numpy. Compiled
    # by the cpu backend, forward only and forward + backward, from the same seed: eager's values.
    require_numpy()
    import numpy as np
    from attnlib import attention_grads
    rng = np.random.default_rng(12)
    p = 0.2
    q, k, v, w = make(rng, np, 2, 2, 33, 16), make(rng, np, 2, 2, 45, 16), make(rng, np, 2, 2, 45, 8), \
        make(rng, np, 2, 2, 33, 8)
    drop = dropout_keeps(21, (2, 2, 33, 45), p)

    def loss(q, k, v, w):
        return (F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True) * w).sum()

    leaves = [t.clone().requires_grad_(True) for t in (q, k, v)]
    dt.manual_seed(21)
    before = fused_runs()
    loss(*leaves, w).backward()
    assert fused_runs() == before + (1 if expect_fused() else 0)
    grads = attention_grads(q.numpy(), k.numpy(), v.numpy(), w.numpy(), 0.25, causal=True, drop=drop,
                            drop_scale=1 / (1 - p))
    for leaf, (want, tol), name in zip(leaves, grads, "qkv"):
        err = abs(leaf.grad.numpy().astype(np.float64) - want)
        assert (err <= tol + 1e-30).all(), (name, err.max())
    eager_grads = [leaf.grad.clone() for leaf in leaves]

    def forward(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)

    dt.manual_seed(22)
    eager = forward(q, k, v)
    compiled = dt.jit(fresh_copy(forward), backend="cpu")
    for _ in range(2):  # the first call traces, the second runs the compiled graph
        dt.manual_seed(22)
        assert compiled(q, k, v).tolist() == eager.tolist()
    jloss = dt.jit(fresh_copy(loss), backend="cpu")
    for _ in range(2):
        for leaf in leaves:
            leaf.grad = None
        dt.manual_seed(21)
        jloss(*leaves, w).backward()
        for leaf, want, name in zip(leaves, eager_grads, "qkv"):
            # The compiled backward's kernels round like eager's ops up to reassociation: within
            # attnlib's bound of the float64 gradient, as eager is.
            err = abs(leaf.grad.numpy().astype(np.float64) - grads["qkv".index(name)][0])
            assert (err <= grads["qkv".index(name)][1] + 1e-30).all(), (name, err.max())
    assert dt.stats()["graph_breaks"] == 0
