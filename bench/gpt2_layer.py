"""A GPT-2-small transformer layer on the CPU: dyntrace's cpu backend against eager dyntrace and
PyTorch's eager CPU execution, side by side in one run.

    PYTHONPATH=dist/python3.11 python3 bench/gpt2_layer.py [--batch 4] [--seq 128] [--rounds 10]

The layer is written once (tests/gpu/gpu_check.py's gpt2_layer) and run with `dyntrace` and with `torch` as its tensor
module: pre-norm, fused QKV projection, causal attention over 12 heads, output projection,
GELU MLP, residuals; D = 768 as in GPT-2 small. Times are the best of --rounds, measured
round-robin (each round calls every contender once), so load from elsewhere slows all alike.
Results are checked against each other before timing. PyTorch is Debian's python3-torch where
installed; without it its column says why."""
import argparse
import os
import sys
import time

import dyntrace as dt

# The layer is gpu_check's (tests/gpu/gpu_check.py), so the CPU and GPU figures time one code.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "gpu"))
from gpu_check import workloads  # noqa: E402 - found through the path set just above
from cpu_backend import best_times  # noqa: E402 - bench/ is the script's own directory


def layer_for(ns, layer_norm, gelu):
    return workloads(ns, layer_norm, gelu)["gpt2_layer"]


def make_inputs(batch, seq, width=768):
    dt.manual_seed(0)
    r = lambda *s: dt.randn(*s) * 0.02  # noqa: E731
    mask = dt.arange(seq).reshape(seq, 1) >= dt.arange(seq).reshape(1, seq)
    return (dt.randn(batch, seq, width), dt.ones(width), r(width), r(width, 3 * width), r(3 * width),
            r(width, width), r(width), dt.ones(width), r(width), r(width, 4 * width), r(4 * width),
            r(4 * width, width), r(width), mask)


def torch_contender(inputs):
    """(callable, its inputs) for PyTorch eager, or (None, why not)."""
    try:
        import numpy as np
        import torch
    except Exception as e:  # noqa: BLE001 - reported in the table
        return None, "n/a: %s" % e
    layer = layer_for(torch, torch.nn.functional.layer_norm, torch.nn.functional.gelu)
    args = tuple(torch.from_numpy(np.asarray(t.numpy()).copy()) for t in inputs)
    # Each side runs with its own default thread count. They share libgomp, whose default
    # importing torch sets to its choice (one thread here, its GEMMs on OpenBLAS's pool of one
    # per core); dyntrace keeps its own count (runtime/parallel.h) and puts torch's back after
    # each compiled call. torch made to run on two OpenMP threads spins against OpenBLAS's pool
    # (2x slower), so it is left at its default.
    def call():
        return layer(*args)
    call.threads = torch.get_num_threads()
    return call, args


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    inputs = make_inputs(args.batch, args.seq)
    plain = layer_for(dt, dt.layer_norm, dt.gelu)
    compiled = dt.jit(layer_for(dt, dt.layer_norm, dt.gelu), backend="cpu")
    start = time.perf_counter()
    want = compiled(*inputs)
    first = time.perf_counter() - start
    got = plain(*inputs)
    # GEMMs of up to 3072 float32 terms summed in another order: n*u*sum|a*b| is about 1e-4
    # of the values here.
    err = (want - got).abs().amax().item()
    assert err <= 1e-3 * (1 + got.abs().amax().item()), "compiled and eager differ by %g" % err
    torch_fn, torch_args = torch_contender(inputs)
    threads = dt.get_num_threads()
    fns = {"dyntrace cpu backend": lambda: compiled(*inputs), "dyntrace eager": lambda: plain(*inputs)}
    if torch_fn is not None:
        terr = (dt.from_dlpack(torch_fn().contiguous()) - want).abs().amax().item()
        assert terr <= 1e-3 * (1 + got.abs().amax().item()), "torch and dyntrace differ by %g" % terr
        fns["torch eager"] = torch_fn
    best = best_times(fns, args.rounds)
    ours = best["dyntrace cpu backend"]
    print("GPT-2-small layer, B=%d T=%d D=768, float32, best of %d rounds (first compiled call %.2f s); "
          "threads: dyntrace %d, torch its default %s" % (args.batch, args.seq, args.rounds, first, threads,
                                                          torch_fn.threads if torch_fn else "-"))
    for name, seconds in best.items():
        print("  %-22s %8.3f ms   dyntrace cpu backend is %.2fx faster" % (name, seconds * 1e3, seconds / ours))
    if torch_fn is None:
        print("  %-22s %s" % ("torch eager", torch_args))
    stats = dt.stats()
    print("  graphs %d, graph breaks %d, kernels compiled %d (cached %d)"
          % (stats["graphs"], stats["graph_breaks"], stats["kernels_compiled"], stats["kernels_cached"]))


if __name__ == "__main__":
    main()
