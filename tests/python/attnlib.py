"""float64 references for attention (numpy), with bounds on a float32 computation's error: the
fused attention kernels' tests (test_attention.py on the CPU, test_cuda_emulated.py on the
emulated device) compare against these."""
import math

import numpy as np

UNIT = {"float32": 2.0 ** -24, "float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}


def attention_reference(q, k, v, scale, out_dtype, keep=None, add=None, causal=False, post=1.0, drop=None,
                        drop_scale=1.0):
    """dropout(softmax(mask(q k^T * scale) * post)) v in float64 from the (rounded) operands, and
    per output element a bound on a float32 computation's error. Dropout, when `drop` (dropout's
    bool keep mask) is given, multiplies a weight by drop_scale where drop is true and by 0
    elsewhere, after the softmax. Error model (u = 2^-24): a score is a dot of
    E products, off by <= (E + 2) u scale sum|q k| (+ u |mask| + u |s| for the add and scale);
    softmax is shift-invariant, so a weight's relative error is <= 2 max_j ds_j plus the
    exponentials, the per-tile rescalings of an online softmax (tiles of 32 keys) and the sum of S
    weights (2u each, S terms), and the output, a sum of S terms p_j v_j, is off by that times
    sum_j p_j |v_j|, plus one rounding into the output dtype (u_out |out|); dropout's product adds
    one rounding (u) to each weight and replaces p_j by p_j drop_j drop_scale in those sums. Rows
    whose every key is masked are NaN, as softmax over -inf gives."""
    q, k, v = (np.asarray(t, dtype=np.float64) for t in (q, k, v))
    u = 2.0 ** -24
    kt = np.swapaxes(k, -1, -2)
    s = q @ kt * scale
    ds = (q.shape[-1] + 2) * u * (np.abs(q) @ np.abs(kt)) * abs(scale)
    if add is not None:
        s = s + add
        ds = ds + u * np.abs(add)
    s, ds = s * post, (ds + u * np.abs(s)) * post
    kept = np.ones(s.shape, bool)
    if keep is not None:
        kept = kept & keep
    if causal:
        kept = kept & np.tril(np.ones(s.shape[-2:], bool))
    s = np.where(kept, s, -np.inf)
    with np.errstate(invalid="ignore"):
        p = np.exp(s - s.max(-1, keepdims=True))
        p = p / p.sum(-1, keepdims=True)
    if drop is not None:
        p = p * np.where(drop, drop_scale, 0.0)
    out = p @ v
    keys = s.shape[-1]
    worst = np.where(kept, ds, 0).max(-1, keepdims=True)
    relative = 2 * worst + (2 * math.ceil(keys / 32) + 2 * keys + 8 + (drop is not None)) * u
    tol = relative * (np.nan_to_num(p) @ np.abs(v)) + UNIT[out_dtype] * np.abs(np.nan_to_num(out)) + 1e-30
    return out, tol


def check_attention(got, want, tol, what):
    got = got.cpu().float().numpy().astype(np.float64)
    nan = np.isnan(want)
    assert got.shape == want.shape, (what, got.shape, want.shape)
    assert (np.isnan(got) == nan).all(), (what, "NaN rows differ")
    err = np.abs(got - want)[~nan]
    assert (err <= tol[~nan]).all(), (what, err.max(), tol[~nan][err.argmax()])
    return err.max() if err.size else 0.0


def attention_grads(q, k, v, d_out, scale, keep=None, add=None, causal=False, drop=None, drop_scale=1.0):
    """(dq, dk, dv, d_add) of sum(d_out * dropout(softmax(mask(q k^T * scale))) v) in float64 (with
    `drop`, dropout's keep mask, as attention_reference), and a bound for each on a float32
    computation's error (u = 2^-24). The weights P are off by a relative rel_p (the forward's
    score error twice, the exponentials and an S-term sum); with D = drop * drop_scale (1 without
    dropout; one more rounding each), dV = (P D)^T dO sums L terms; dP = (dO V^T) D sums Ev terms;
    dS = P (dP - rowsum(dP P)) is off by rel_p and dP's error relative to P (|dP| +
    rowsum(P |dP|)); dQ and dK sum S and L terms of dS with K and Q."""
    q, k, v, d_out = (np.asarray(t, dtype=np.float64) for t in (q, k, v, d_out))
    u = 2.0 ** -24
    L, S, E, Ev = q.shape[-2], k.shape[-2], q.shape[-1], v.shape[-1]
    kt = np.swapaxes(k, -1, -2)
    s = q @ kt * scale
    if add is not None:
        s = s + add
    kept = np.ones(s.shape, bool)
    if keep is not None:
        kept = kept & keep
    if causal:
        kept = kept & np.tril(np.ones((L, S), bool))
    s = np.where(kept, s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p = p / p.sum(-1, keepdims=True)
    t = lambda x: np.swapaxes(x, -1, -2)
    z = np.ones(p.shape) if drop is None else np.where(drop, drop_scale, 0.0)
    dropped = drop is not None
    pz = p * z
    dv = t(pz) @ d_out
    dp = (d_out @ t(v)) * z
    ds = p * (dp - (dp * p).sum(-1, keepdims=True))
    dq, dk = ds @ k * scale, t(ds) @ q * scale
    score_err = (E + 2) * u * np.abs(q) @ np.abs(kt) * abs(scale) + (u * np.abs(add) if add is not None else 0)
    rel_p = 2 * np.where(kept, score_err, 0).max(-1, keepdims=True) + (S + 8 + dropped) * u
    tol_dv = t(rel_p * pz) @ np.abs(d_out) + (L + 2) * u * (t(pz) @ np.abs(d_out))
    abs_dp = (np.abs(d_out) @ np.abs(t(v))) * z
    spread = p * (np.abs(dp) + (p * np.abs(dp)).sum(-1, keepdims=True))
    dp_u = (Ev + dropped) * u
    tol_ds = (rel_p + (Ev + S + 8 + dropped) * u) * spread + p * (dp_u * abs_dp + (p * dp_u * abs_dp).sum(-1, keepdims=True))
    tol_dq = (tol_ds @ np.abs(k) + (S + 2) * u * np.abs(ds) @ np.abs(k)) * abs(scale)
    tol_dk = (t(tol_ds) @ np.abs(q) + (L + 2) * u * t(np.abs(ds)) @ np.abs(q)) * abs(scale)
    return (dq, tol_dq), (dk, tol_dk), (dv, tol_dv), (ds, tol_ds)
