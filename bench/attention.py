"""Causal attention on the CPU: dyntrace's fused loop (scaled_dot_product_attention on float32)
against the same attention as separate eager ops (two GEMMs, a mask, a softmax: what the fused
loop replaces), the cpu backend's compiled form of those ops, numpy, and PyTorch's eager CPU ops,
side by side in one run, for several sequence lengths.

    PYTHONPATH=dist/python3.11 python3 bench/attention.py [--batch 4] [--heads 12] [--head-dim 64]
        [--seqs 128,512,1024] [--rounds 5] [--dropout 0.1]

With --dropout P the weights go through dropout (training): the fused loop takes the keep mask
scaled_dot_product_attention draws, the written-out contenders call F.dropout, every call from
the same seed, so all drop the same weights (numpy and PyTorch, whose generators differ, sit out).

Times are the best of --rounds, measured round-robin (bench/cpu_backend.py's best_times). Every
contender's result is checked against the fused one first. The fused loop keeps O(L + S) memory
per thread; the others materialise the [B, H, L, S] scores (and weights), whose size is printed.
PyTorch is Debian's python3-torch (1.13, which has no scaled_dot_product_attention: its row runs
the same ops written out) where installed; without it its column says why."""
import argparse
import math
import os
import sys

import dyntrace as dt

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cpu_backend import best_times  # noqa: E402 - bench/ is the script's own directory


def written_out(ns, q, k, v, mask, scale):
    return ns.softmax(ns.where(mask, q @ k.transpose(-2, -1) * scale, float("-inf")), -1) @ v


def written_out_dropout(q, k, v, mask, scale, p):
    weights = dt.softmax(dt.where(mask, q @ k.transpose(-2, -1) * scale, float("-inf")), -1)
    return dt.nn.functional.dropout(weights, p) @ v


def seeded(fn):
    """fn, run from seed 0 each call: every contender draws the same dropout masks."""
    def run():
        dt.manual_seed(0)
        return fn()
    return run


def dropout_contenders(q, k, v, mask, scale, p):
    sdpa = dt.nn.functional.scaled_dot_product_attention
    compiled = dt.jit(lambda q, k, v, mask: written_out_dropout(q, k, v, mask, scale, p), backend="cpu")
    fns = {"dyntrace fused (SDPA)": seeded(lambda: sdpa(q, k, v, dropout_p=p, is_causal=True)),
           "dyntrace eager ops": seeded(lambda: written_out_dropout(q, k, v, mask, scale, p)),
           "dyntrace cpu backend": seeded(lambda: compiled(q, k, v, mask))}
    why = "n/a: another generator draws other dropout masks"
    return fns, {"numpy": why, "torch eager ops": why}


def numpy_attention(np, q, k, v, mask, scale):
    s = np.where(mask, q @ np.swapaxes(k, -1, -2) * scale, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


def contenders(q, k, v, mask, scale):
    """{name: callable} and {name: why it is missing}."""
    sdpa = dt.nn.functional.scaled_dot_product_attention
    compiled = dt.jit(lambda q, k, v, mask: written_out(dt, q, k, v, mask, scale), backend="cpu")
    fns = {"dyntrace fused (SDPA)": lambda: sdpa(q, k, v, is_causal=True),
           "dyntrace eager ops": lambda: written_out(dt, q, k, v, mask, scale),
           "dyntrace cpu backend": lambda: compiled(q, k, v, mask)}
    missing = {}
    try:
        import numpy as np
        nq, nk, nv, nmask = (t.numpy() for t in (q, k, v, mask))
        fns["numpy"] = lambda: numpy_attention(np, nq, nk, nv, nmask, scale)
    except ImportError as e:
        missing["numpy"] = "n/a: %s" % e
    try:
        import torch
        tq, tk, tv, tmask = (torch.from_numpy(t.numpy().copy()) for t in (q, k, v, mask))
        fns["torch eager ops"] = lambda: written_out(torch, tq, tk, tv, tmask, scale)
    except Exception as e:  # noqa: BLE001 - reported in the table
        missing["torch eager ops"] = "n/a: %s" % e
    return fns, missing


def as_dyntrace(result):
    """A contender's result (dyntrace, torch or numpy) as a dyntrace tensor, for comparing."""
    if isinstance(result, dt.Tensor):
        return result
    return dt.tensor(result.numpy() if hasattr(result, "detach") else result)  # torch's, else numpy's


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--seqs", default="128,512,1024")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--dropout", type=float, default=0.0)
    args = parser.parse_args()
    print("causal attention, B=%d H=%d E=%d, float32, dropout %g, best of %d rounds, dyntrace on %d threads "
          "(CPU GEMM: %s)" % (args.batch, args.heads, args.head_dim, args.dropout, args.rounds, dt.get_num_threads(),
                               dt._cpu_gemm()))
    for seq in (int(s) for s in args.seqs.split(",")):
        dt.manual_seed(0)
        q, k, v = (dt.randn(args.batch, args.heads, seq, args.head_dim) for _ in range(3))
        mask = dt.arange(seq).reshape(seq, 1) >= dt.arange(seq).reshape(1, seq)
        scale = 1 / math.sqrt(args.head_dim)
        fns, missing = (dropout_contenders(q, k, v, mask, scale, args.dropout) if args.dropout > 0
                        else contenders(q, k, v, mask, scale))
        want = fns["dyntrace fused (SDPA)"]()
        for name, fn in fns.items():
            # float32 dots of E terms and sums of S weights: a few thousand ulps of O(1) outputs
            # at most (times 1 / (1 - p) with dropout); a wrong mask or scale is off by O(1).
            err = (as_dyntrace(fn()).float() - want).abs().amax().item()
            assert err <= 1e-4 / (1 - args.dropout), "%s differs from the fused result by %g" % (name, err)
        best = best_times(fns, args.rounds)
        fused = best["dyntrace fused (SDPA)"]
        scores_mb = args.batch * args.heads * seq * seq * 4 / 2 ** 20
        print("T=%d (the unfused ones hold %.0f MB of scores):" % (seq, scores_mb))
        for name, seconds in best.items():
            print("  %-22s %9.3f ms   fused is %.2fx faster" % (name, seconds * 1e3, seconds / fused))
        for name, why in missing.items():
            print("  %-22s %s" % (name, why))


if __name__ == "__main__":
    main()
