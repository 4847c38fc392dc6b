"""The cpu backend against eager execution and numpy, side by side in one run.

    PYTHONPATH=dist/python3.11 python3 bench/cpu_backend.py [--elements N] [--repeat R]

Five workloads on N float32 elements (16M by default): an 8-op pointwise chain (GELU with a
bias), softmax over rows, layer_norm, sum over rows, and a small MLP forward (matmul + bias +
GELU, twice). For each it prints compiled vs eager, compiled vs numpy (when importable), and the
compiled bytes/s as a fraction of a memcpy of the same bytes. Then the cold (host compiler) and
warm (disk cache) compile times per graph."""
import argparse
import math
import os
import shutil
import tempfile
import time

import dyntrace as dt

try:
    import numpy as np
except ImportError:  # numpy is optional: its column is left out
    np = None


def best_times(fns, rounds):
    """Best time of each function, measured round-robin: every round calls each function once, so
    a burst of load from elsewhere on the machine slows all of them alike instead of skewing one
    ratio."""
    for fn in fns.values():
        fn()  # warm: compile, allocate
    best = {name: math.inf for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def gelu_bias(x, b):
    y = x + b
    return 0.5 * y * (1.0 + dt.tanh(0.7978845608 * (y + 0.044715 * (y * y * y))))


def softmax_rows(x):
    return dt.softmax(x, -1)


def layer_norm(x, w, b):
    return dt.layer_norm(x, (x.shape[-1],), w, b)


def row_sum(x):
    return x.sum(-1)


def mlp(x, w1, b1, w2, b2):
    h = dt.gelu(x @ w1 + b1, approximate="tanh")
    return dt.gelu(h @ w2 + b2, approximate="tanh")


def np_gelu_tanh(y):
    return 0.5 * y * (1.0 + np.tanh(np.float32(0.7978845608) * (y + np.float32(0.044715) * (y * y * y))))


def numpy_versions():
    if np is None:
        return {}

    def np_softmax(x):
        e = np.exp(x - x.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    def np_layer_norm(x, w, b):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + np.float32(1e-5)) * w + b

    return {
        "gelu_bias": lambda x, b: np_gelu_tanh(x + b),
        "softmax": np_softmax,
        "layer_norm": np_layer_norm,
        "row_sum": lambda x: x.sum(-1),
        "mlp": lambda x, w1, b1, w2, b2: np_gelu_tanh(np_gelu_tanh(x @ w1 + b1) @ w2 + b2),
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--elements", type=int, default=16 * 1024 * 1024)
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    cols = 4096 if args.elements >= 4096 * 16 else 256
    rows = max(1, args.elements // cols)
    hidden = 256
    dt.manual_seed(0)
    x = dt.randn(rows, cols)
    w, b = dt.randn(cols), dt.randn(cols)
    xm = dt.randn(max(1, args.elements // hidden), hidden)
    w1, w2 = dt.randn(hidden, hidden) * 0.06, dt.randn(hidden, hidden) * 0.06
    b1, b2 = dt.randn(hidden), dt.randn(hidden)
    n = x.numel()
    four = 4
    workloads = [
        # name, function, inputs, bytes read + written by a perfect kernel
        ("gelu_bias", gelu_bias, (x, b), 2 * n * four),
        ("softmax", softmax_rows, (x,), 2 * n * four),
        ("layer_norm", layer_norm, (x, w, b), 2 * n * four),
        ("row_sum", row_sum, (x,), n * four + rows * four),
        ("mlp", mlp, (xm, w1, b1, w2, b2), 2 * xm.numel() * four),
    ]
    np_fns = numpy_versions()

    # Cold and warm compile times: a fresh cache directory, then the same directory after the
    # in-memory caches are dropped (what a new process sees).
    cache_dir = tempfile.mkdtemp(prefix="dyntrace-bench-")
    os.environ["DYNTRACE_CACHE_DIR"] = cache_dir
    dt._reset_kernel_cache()
    dt.reset()
    small = {"gelu_bias": (dt.randn(8, cols), b), "softmax": (dt.randn(8, cols),),
             "layer_norm": (dt.randn(8, cols), w, b), "row_sum": (dt.randn(8, cols),),
             "mlp": (dt.randn(8, hidden), w1, b1, w2, b2)}
    compile_times = {}
    for phase in ("cold", "warm"):
        dt._reset_kernel_cache()
        dt.reset()
        for name, fn, _, _ in workloads:
            f = dt.jit(lambda *a, _fn=fn: _fn(*a), backend="cpu")
            start = time.perf_counter()
            f(*small[name])
            first = time.perf_counter() - start
            start = time.perf_counter()
            f(*small[name])
            steady = time.perf_counter() - start
            compile_times.setdefault(name, {})[phase] = first - steady
    stats = dt.stats()
    shutil.rmtree(cache_dir, ignore_errors=True)

    print("dyntrace cpu backend: %d float32 elements per workload (%d x %d), best of %d, %d thread(s)" %
          (n, rows, cols, args.repeat, os.cpu_count() or 1))
    header = "%-11s %11s %11s %11s %10s %10s %12s" % ("workload", "eager ms", "compiled ms", "numpy ms",
                                                     "vs eager", "vs numpy", "vs memcpy")
    print(header)
    print("-" * len(header))
    for name, fn, inputs, nbytes in workloads:
        compiled = dt.jit(lambda *a, _fn=fn: _fn(*a), backend="cpu")
        # memcpy of the same bytes: half of them read, half written.
        src = dt.empty(max(1, nbytes // 2 // four))
        contenders = {"eager": lambda: fn(*inputs), "compiled": lambda: compiled(*inputs),
                      "memcpy": lambda: src.clone()}
        if name in np_fns:
            np_inputs = [t.numpy() for t in inputs]
            contenders["numpy"] = lambda: np_fns[name](*np_inputs)
        best = best_times(contenders, args.repeat)
        eager_t, compiled_t, copy_t, np_t = best["eager"], best["compiled"], best["memcpy"], best.get("numpy")
        print("%-11s %11.2f %11.2f %11s %9.2fx %10s %11.2fx" % (
            name, eager_t * 1e3, compiled_t * 1e3, "%.2f" % (np_t * 1e3) if np_t else "-",
            eager_t / compiled_t, "%.2fx" % (np_t / compiled_t) if np_t else "-", copy_t / compiled_t))
    print()
    print("compile time per graph (ms): host compiler (cold) and disk cache (warm)")
    for name, times in compile_times.items():
        print("  %-11s cold %8.1f   warm %6.1f" % (name, times["cold"] * 1e3, times["warm"] * 1e3))
    print("kernel libraries: %d compiled, %d from disk" % (stats["kernels_compiled"], stats["kernels_from_disk"]))


if __name__ == "__main__":
    main()
