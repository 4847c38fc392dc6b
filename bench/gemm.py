"""float32 matmul on the CPU: dyntrace's AVX-512 kernel, dyntrace on OpenBLAS, numpy and Debian's
PyTorch, side by side in one run.

    PYTHONPATH=dist/python3.11 python3 bench/gemm.py [--threads 1] [--repeat 30]

dyntrace sends float32 products to its own AVX-512 GEMM where the CPU has AVX-512
(runtime/sgemm_avx512.h); DYNTRACE_CPU_GEMM=openblas sends them to OpenBLAS, as before. That
choice is made once per process, so the OpenBLAS column comes from a child process run with it,
on the same shapes and thread count. numpy and PyTorch use their own BLAS (Debian's OpenBLAS).
Shapes: the MLP training step's products (bench/training.py: batch 128, 64 -> 256 -> 256 -> 10,
forward x @ W^T, backward dY @ W and dY^T @ X), a GPT-2 layer's (B*T = 512 rows, D = 768) and
square ones. numpy's and PyTorch's OpenBLAS get the same thread count. Prints the best time of each, GFLOP/s, and dyntrace's speed against each other."""
import argparse
import ctypes
import json
import os
import subprocess
import sys

import dyntrace as dt
from conv import best_time  # bench/ is the script's own directory

try:
    import numpy as np
except ImportError:
    np = None
try:
    import torch
except ImportError:
    torch = None

# (rows, inner, cols, which operand is stored transposed): out = a @ b with a [rows, inner].
SHAPES = [
    (128, 64, 256, "b"), (128, 256, 256, "b"), (128, 256, 10, "b"),
    (128, 256, 256, ""), (256, 128, 256, "a"), (256, 128, 64, "a"),
    (512, 768, 2304, "b"), (512, 768, 3072, "b"), (512, 3072, 768, "b"),
    (512, 512, 512, ""), (1024, 1024, 1024, ""),
]


def operands(module, rows, inner, cols, transposed):
    """a [rows, inner] and b [inner, cols], either one a transposed view of a contiguous tensor."""
    a = module.randn(inner, rows).t() if "a" in transposed else module.randn(rows, inner)
    b = module.randn(cols, inner).t() if "b" in transposed else module.randn(inner, cols)
    return a, b


def module_times(module, repeat):
    """dyntrace's or PyTorch's matmul on each shape."""
    times = []
    for rows, inner, cols, transposed in SHAPES:
        a, b = operands(module, rows, inner, cols, transposed)
        times.append(best_time(lambda: module.matmul(a, b), repeat))
    return times


def numpy_times(repeat):
    rng = np.random.default_rng(0)
    times = []
    for rows, inner, cols, transposed in SHAPES:
        a = rng.standard_normal((inner, rows), dtype=np.float32).T if "a" in transposed else \
            rng.standard_normal((rows, inner), dtype=np.float32)
        b = rng.standard_normal((cols, inner), dtype=np.float32).T if "b" in transposed else \
            rng.standard_normal((inner, cols), dtype=np.float32)
        times.append(best_time(lambda: a @ b, repeat))
    return times


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    dt.set_num_threads(args.threads)
    try:  # numpy's and PyTorch's OpenBLAS (one library in the process) would otherwise use every core
        ctypes.CDLL("libopenblas.so.0").openblas_set_num_threads(args.threads)
    except (OSError, AttributeError) as e:
        print(f"could not set OpenBLAS's threads ({e}): numpy's and PyTorch's columns may use more cores")
    if args.child:
        print(json.dumps(module_times(dt, args.repeat)))
        return
    env = dict(os.environ, DYNTRACE_CPU_GEMM="openblas")
    child = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", "--threads", str(args.threads),
                            "--repeat", str(args.repeat)], env=env, capture_output=True, text=True, check=True)
    openblas = json.loads(child.stdout.strip().splitlines()[-1])
    ours = module_times(dt, args.repeat)
    others = {}
    if np is not None:
        others["numpy"] = numpy_times(args.repeat)
    if torch is not None:
        torch.set_num_threads(args.threads)
        others["torch"] = module_times(torch, args.repeat)
    print(f"float32 matmul, {args.threads} thread(s), best of {args.repeat}; GFLOP/s and dyntrace's speedup"
          f" (dyntrace's float32 GEMM here: {dt._cpu_gemm()})")
    header = f"{'shape':>22}  {'dyntrace':>9}  {'dt/OpenBLAS':>17}" + "".join(f"  {name:>15}" for name in others)
    print(header)
    for i, (rows, inner, cols, transposed) in enumerate(SHAPES):
        flops = 2.0 * rows * inner * cols
        label = f"{rows}x{inner}x{cols}{' ' + transposed + chr(0x1d40) if transposed else ''}"
        line = f"{label:>22}  {flops / ours[i] / 1e9:9.1f}  {flops / openblas[i] / 1e9:8.1f} ({openblas[i] / ours[i]:4.2f}x)"
        for name, times in others.items():
            line += f"  {flops / times[i] / 1e9:6.1f} ({times[i] / ours[i]:4.2f}x)"
        print(line)


if __name__ == "__main__":
    main()
