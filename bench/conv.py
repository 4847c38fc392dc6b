"""conv2d on the CPU against the GEMM it lowers to, in one run.

    PYTHONPATH=dist/python3.11 python3 bench/conv.py [--batch N] [--repeat R]

A 3x3 convolution (padding 1, stride 1) of a [32, 64, 56, 56] float32 input by a [64, 64, 3, 3]
weight, through dyntrace.nn.functional.conv2d (im2col + OpenBLAS SGEMM per image), beside numpy's
matmul (OpenBLAS) of the equivalent im2col GEMM, [64, 576] @ [576, 32*56*56], on columns built
beforehand (so numpy's time is the GEMM alone). Prints GFLOP/s of both (2 * Cout * C*9 * N*56*56
flops) and their ratio; issue 19 asks for at least 0.5."""
import argparse
import math
import time

import dyntrace as dt
import dyntrace.nn.functional as F

try:
    import numpy as np
except ImportError:  # numpy gives the reference column
    np = None


def best_time(fn, repeat):
    fn()  # warm: allocations, thread pool
    best = math.inf
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    n, c, hw, cout = args.batch, 64, 56, 64
    dt.manual_seed(0)
    x = dt.randn(n, c, hw, hw)
    w = dt.randn(cout, c, 3, 3)
    flops = 2.0 * cout * c * 9 * n * hw * hw
    t_conv = best_time(lambda: F.conv2d(x, w, padding=1), args.repeat)
    print("conv2d %dx%dx%dx%d, 3x3, %d out: %.3f s  %.1f GFLOP/s" % (n, c, hw, hw, cout, t_conv, flops / t_conv / 1e9))
    if np is None:
        print("numpy is not importable: no SGEMM reference")
        return
    a = np.random.default_rng(0).standard_normal((cout, c * 9), dtype=np.float32)
    b = np.random.default_rng(1).standard_normal((c * 9, n * hw * hw), dtype=np.float32)
    t_gemm = best_time(lambda: a @ b, args.repeat)
    print("numpy SGEMM [%d, %d] @ [%d, %d]: %.3f s  %.1f GFLOP/s" % (cout, c * 9, c * 9, n * hw * hw, t_gemm,
                                                                      flops / t_gemm / 1e9))
    print("conv2d / SGEMM GFLOP/s ratio: %.2f" % (t_gemm / t_conv))


if __name__ == "__main__":
    main()
