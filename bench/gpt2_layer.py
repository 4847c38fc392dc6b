"""A GPT-2-small transformer layer on the CPU: dyntrace's cpu backend against eager dyntrace and
PyTorch's eager CPU execution, side by side in one run.

    PYTHONPATH=dist/python3.11 python3 bench/gpt2_layer.py [--batch 4] [--seq 128] [--rounds 10]

The layer is written once (LAYER_SOURCE) and run with `dyntrace` and with `torch` as its tensor
module: pre-norm, fused QKV projection, causal attention over 12 heads, output projection,
GELU MLP, residuals; D = 768 as in GPT-2 small. Times are the best of --rounds, measured
round-robin (each round calls every contender once), so load from elsewhere slows all alike.
Results are checked against each other before timing. PyTorch is Debian's python3-torch where
installed; without it its column says why."""
import argparse
import math
import time

import dyntrace as dt

LAYER_SOURCE = '''
def gpt2_layer(x, ln1_w, ln1_b, w_qkv, b_qkv, w_o, b_o, ln2_w, ln2_b, w_fc, b_fc, w_proj, b_proj, mask):
    B, T, D = x.shape
    H = 12
    hd = D // H
    h = NS.layer_norm(x, (D,), ln1_w, ln1_b)
    q, k, v = (h @ w_qkv + b_qkv).split(D, dim=-1)
    q = q.view(B, T, H, hd).transpose(1, 2)
    k = k.view(B, T, H, hd).transpose(1, 2)
    v = v.view(B, T, H, hd).transpose(1, 2)
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
    att = NS.softmax(NS.where(mask[:T, :T], att, float("-inf")), -1)
    y = (att @ v).transpose(1, 2).reshape(B, T, D)
    x = x + (y @ w_o + b_o)
    h = GELU(NS.layer_norm(x, (D,), ln2_w, ln2_b) @ w_fc + b_fc)
    return x + (h @ w_proj + b_proj)
'''


def layer_for(ns, gelu):
    scope = {"NS": ns, "GELU": gelu, "math": math}
    exec(compile(LAYER_SOURCE, "<gpt2 layer>", "exec"), scope)  # noqa: S102 - our own text
    return scope["gpt2_layer"]


def make_inputs(batch, seq, width=768):
    dt.manual_seed(0)
    r = lambda *s: dt.randn(*s) * 0.02  # noqa: E731
    mask = dt.arange(seq).reshape(seq, 1) >= dt.arange(seq).reshape(1, seq)
    return (dt.randn(batch, seq, width), dt.ones(width), r(width), r(width, 3 * width), r(3 * width),
            r(width, width), r(width), dt.ones(width), r(width), r(width, 4 * width), r(4 * width),
            r(4 * width, width), r(width), mask)


def best_times(fns, rounds):
    for fn in fns.values():
        fn()  # warm: trace, compile, allocate
    best = {name: math.inf for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def torch_contender(inputs):
    """(callable, its inputs) for PyTorch eager, or (None, why not)."""
    try:
        import numpy as np
        import torch
    except Exception as e:  # noqa: BLE001 - reported in the table
        return None, "n/a: %s" % e
    layer = layer_for(torch, torch.nn.functional.gelu)
    args = tuple(torch.from_numpy(np.asarray(t.numpy()).copy()) for t in inputs)
    return (lambda: layer(*args)), args


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    inputs = make_inputs(args.batch, args.seq)
    plain = layer_for(dt, dt.gelu)
    compiled = dt.jit(layer_for(dt, dt.gelu), backend="cpu")
    start = time.perf_counter()
    want = compiled(*inputs)
    first = time.perf_counter() - start
    got = plain(*inputs)
    # GEMMs of up to 3072 float32 terms summed in another order: n*u*sum|a*b| is about 1e-4
    # of the values here.
    err = (want - got).abs().amax().item()
    assert err <= 1e-3 * (1 + got.abs().amax().item()), "compiled and eager differ by %g" % err
    fns = {"dyntrace cpu backend": lambda: compiled(*inputs), "dyntrace eager": lambda: plain(*inputs)}
    torch_fn, torch_args = torch_contender(inputs)
    if torch_fn is not None:
        terr = (dt.from_dlpack(torch_fn().contiguous()) - want).abs().amax().item()
        assert terr <= 1e-3 * (1 + got.abs().amax().item()), "torch and dyntrace differ by %g" % terr
        fns["torch eager"] = torch_fn
    best = best_times(fns, args.rounds)
    ours = best["dyntrace cpu backend"]
    print("GPT-2-small layer, B=%d T=%d D=768, float32, best of %d rounds (first compiled call %.2f s)"
          % (args.batch, args.seq, args.rounds, first))
    for name, seconds in best.items():
        print("  %-22s %8.3f ms   dyntrace cpu backend is %.2fx faster" % (name, seconds * 1e3, seconds / ours))
    if torch_fn is None:
        print("  %-22s %s" % ("torch eager", torch_args))
    stats = dt.stats()
    print("  graphs %d, graph breaks %d, kernels compiled %d (cached %d)"
          % (stats["graphs"], stats["graph_breaks"], stats["kernels_compiled"], stats["kernels_cached"]))


if __name__ == "__main__":
    main()
