"""Automatic dynamic sizes and numbers (issue 17): traces, kernel builds and fallbacks for the call
patterns that used to recompile per value, and the per-call cost of a cached call with dynamic
sizes against a static one, measured side by side in one run.

Kernel builds count what the cpu backend compiled or loaded from its disk cache (a kernel found
in memory is the same kernel reused). Run:
    PYTHONPATH=dist/python3.11 python3 bench/dynamic.py
"""
import math

import dyntrace as dt
from jit_overhead import best_per_call


def reshape_by_batch(x):
    B = x.shape[0]
    return x.reshape(B, -1) * 2 + B


def attention_like(x, w):
    B, T, D = x.shape
    q = (x @ w).view(B, T, 2, D // 2).transpose(1, 2)
    att = ((q @ q.transpose(-2, -1)) * (1.0 / math.sqrt(D // 2))).softmax(-1)
    return (att @ q).transpose(1, 2).reshape(B, T, D)


def sgd_step(p, g, lr, momentum):
    return p - lr * (g + momentum * p)


def scaled_by_int(x, k):
    return x * (k * 2 + 1) - k


def grows(x, history):
    return x * len(history) + sum(history)


def measure(name, fn, calls, **options):
    dt.reset()
    jfn = dt.jit(fn, backend="cpu", **options)
    for args in calls:
        jfn(*args)
    s = dt.stats()
    builds = s["kernels_compiled"] + s["kernels_from_disk"]
    print("%-44s calls %3d  traces %2d  kernel builds %2d  fallbacks %d" %
          (name, len(calls), s["frames_traced"], builds, s["fallbacks"]))


def main():
    dt.manual_seed(0)
    sizes = [1, 2, 3, 5, 8, 13, 21, 34, 55, 89]
    measure("x.shape read, reshape(B, -1), B = 1..89", reshape_by_batch,
            [(dt.randn(b, 3, 4),) for b in sizes])
    measure("same, sizes >= 2, dynamic=True", reshape_by_batch,
            [(dt.randn(b, 3, 4),) for b in sizes[1:]], dynamic=True)
    w = dt.randn(8, 8)
    pairs = [(2, 3), (3, 5), (4, 7), (5, 2), (2, 9), (6, 4), (3, 3), (7, 6)]
    measure("attention-like, 8 (B, T) pairs", attention_like, [(dt.randn(b, t, 8), w) for b, t in pairs])
    p, g = dt.randn(64), dt.randn(64)
    measure("float lr and momentum, 12 values", sgd_step, [(p, g, 0.1 / (i + 1), 0.9 - 0.01 * i) for i in range(12)])
    measure("int argument used arithmetically, 12 values", scaled_by_int, [(p, k) for k in range(3, 15)])
    measure("list argument growing by one per call, 12 calls", grows, [(p, list(range(n))) for n in range(1, 13)])

    x = dt.randn(8, 3, 4)
    dt.reset()
    static = dt.jit(reshape_by_batch, backend="cpu", dynamic=False)
    dynamic = dt.jit(reshape_by_batch, backend="cpu", dynamic=True)
    static(x), dynamic(x)  # traced and compiled before timing
    t_static, t_dynamic = best_per_call(static, (x,), calls=5000), best_per_call(dynamic, (x,), calls=5000)
    print("cached call, dynamic sizes / static sizes: %.2fx" % (t_dynamic / t_static))


if __name__ == "__main__":
    main()
