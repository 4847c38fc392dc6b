"""dyntrace's checks that need a real GPU, in one run: correctness of the cuda backend, bandwidth,
CUDA-graph replay and, where PyTorch works, torch.compile side by side.

    python3 tests/gpu/gpu_check.py [--log FILE] [--quick] [--time-limit S]   # with a CUDA GPU
    python3 tests/gpu/gpu_check.py --cpu-dry-run               # anywhere: the same logic, cpu backend

1. Correctness: a corpus of functions compiled with dt.jit(fn, backend="cuda") on CUDA tensors
   against the same function run eagerly on the CPU tensors, on fresh random inputs, with a
   tolerance scaled by dtype (and by the reduction length where one sums); then dt.stats() must
   show compiled kernels and no compile_failures.
2. Bandwidth: compiled bytes/s as a fraction of a device-to-device copy of the same bytes.
3. A chain of 25 dependent full reductions on 1024 elements (one kernel since dependent small
   reductions fuse), and CUDA-graph replay: the same chain on 2^17 elements, about 50 launches,
   cuda_graphs=True vs False.
4. Training (gpu_training.py): a GPT-mini's whole training step compiled as one program against
   the same steps run eagerly (losses within 1e-3), timed, with its peak memory.
5. torch.compile (default and mode="reduce-overhead") on the same workloads, in a child process
   (its frame hook and dyntrace's cannot share an interpreter); any failure is "n/a: reason".

Exit status: 0 all correctness checks passed, 1 some failed, 2 no GPU (the reason is printed).
--cpu-dry-run runs the corpus and the timing code with backend="cpu" on small CPU tensors and
skips what needs CUDA (copy bandwidth, torch), so the script's logic is tested without a GPU.
--emulated runs the correctness checks (1, eager ops on the device, and 4's losses and replay
count) and the timing code (its figures meaningless) on small tensors with the cuda backend, where tests/fake_cuda's stand-ins build dyntrace's CUDA kernels for the host and run
them (tests/python/test_cuda_emulated.py sets that up): the device code's results, without a GPU."""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback

import gpu_training  # beside this file: the training rows (imports no tensor module itself)

_HERE = os.path.dirname(os.path.abspath(__file__))
_TESTS_PYTHON = os.path.join(os.path.dirname(_HERE), "python")

EXIT_OK, EXIT_FAILED, EXIT_NO_GPU = 0, 1, 2

# The bandwidth and replay workloads, written once as source so that the dyntrace and the torch
# versions are the same code: NS names the tensor module (dt or torch).
WORKLOAD_SOURCE = '''
def gelu_bias(x, b):
    y = x + b
    return 0.5 * y * (1.0 + NS.tanh(0.7978845608 * (y + 0.044715 * (y * y * y))))

def softmax_rows(x):
    return NS.softmax(x, -1)

def layer_norm_rows(x, w, b):
    return LAYER_NORM(x, (x.shape[-1],), w, b)

def gpt2_layer(x, ln1_w, ln1_b, w_qkv, b_qkv, w_o, b_o, ln2_w, ln2_b, w_fc, b_fc, w_proj, b_proj, mask):
    """One GPT-2 block as people write it: pre-norm, fused QKV, causal attention, GELU MLP."""
    B, T, D = x.shape
    H = 12
    hd = D // H
    h = LAYER_NORM(x, (D,), ln1_w, ln1_b)
    q, k, v = (h @ w_qkv + b_qkv).split(D, dim=-1)
    q = q.view(B, T, H, hd).transpose(1, 2)
    k = k.view(B, T, H, hd).transpose(1, 2)
    v = v.view(B, T, H, hd).transpose(1, 2)
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
    att = NS.softmax(NS.where(mask[:T, :T], att, float("-inf")), -1)
    y = (att @ v).transpose(1, 2).reshape(B, T, D)
    x = x + (y @ w_o + b_o)
    h = GELU(LAYER_NORM(x, (D,), ln2_w, ln2_b) @ w_fc + b_fc)
    return x + (h @ w_proj + b_proj)

def gpt2_params(B, T, D, randn, ones, mask, dtype):
    r = lambda *s: (randn(*s) * 0.02).to(dtype)
    return (randn(B, T, D).to(dtype), ones(D).to(dtype), r(D), r(D, 3 * D), r(3 * D), r(D, D), r(D),
            ones(D).to(dtype), r(D), r(D, 4 * D), r(4 * D), r(4 * D, D), r(D), mask)

def make_chain(steps):
    """steps full reductions, each feeding the next step: fusion cannot merge them."""
    def chain(x):
        for _ in range(steps):
            s = (x * x).mean()
            x = x * (s + 1e-3).rsqrt() + 0.01
        return x
    return chain
'''


def workloads(ns, layer_norm, gelu):
    scope = {"NS": ns, "LAYER_NORM": layer_norm, "GELU": gelu, "math": math}
    exec(compile(WORKLOAD_SOURCE, "<gpu_check workloads>", "exec"), scope)  # noqa: S102 - our own text
    return scope


# ---------------------------------------------------------------------------------------------
# The torch child: `gpu_check.py --torch-child SPEC_JSON`, one JSON object per line on stdout.

def torch_child(spec):
    def emit(**row):
        print(json.dumps(row), flush=True)

    try:
        import torch
    except Exception as e:  # noqa: BLE001 - reported, never a crash
        emit(error="no torch: %s" % first_line(e))
        return 0
    if not torch.cuda.is_available():
        emit(error="torch.cuda.is_available() is False")
        return 0
    torch.backends.cuda.matmul.allow_tf32 = False  # float32 GEMMs as dyntrace runs them
    torch.backends.cudnn.allow_tf32 = False
    w = workloads(torch, torch.nn.functional.layer_norm, torch.nn.functional.gelu)
    dev = "cuda"
    n, rows, small = spec["elements"], spec["rows"], spec["small"]
    cols = n // rows
    x = torch.randn(rows, cols, device=dev)
    bias = torch.randn(cols, device=dev)
    lw, lb = torch.randn(cols, device=dev), torch.randn(cols, device=dev)
    s = torch.randn(small, device=dev)
    cases = {
        "gelu_bias": (w["gelu_bias"], (x, bias)),
        "softmax": (w["softmax_rows"], (x,)),
        "layer_norm": (w["layer_norm_rows"], (x, lw, lb)),
        "replay": (w["make_chain"](spec["steps"]), (s,)),
    }
    deadline = time.monotonic() + spec["budget_s"]
    B, T, D = spec["gpt2"]
    mask = torch.ones(T, T, device=dev).tril().bool()
    for dtype, label in ((torch.float32, "gpt2_f32"), (torch.float16, "gpt2_f16"), (torch.bfloat16, "gpt2_bf16")):
        gargs = w["gpt2_params"](B, T, D, lambda *s: torch.randn(*s, device=dev),
                                 lambda *s: torch.ones(*s, device=dev), mask, dtype)
        for mode in ("eager", "default", "reduce-overhead"):
            if time.monotonic() > deadline:
                emit(workload=label, mode=mode, error="time budget for torch spent")
                continue
            try:
                fn = w["gpt2_layer"]
                start = time.perf_counter()
                if mode != "eager":
                    fn = torch.compile(fn) if mode == "default" else torch.compile(fn, mode=mode)
                fn(*gargs)
                torch.cuda.synchronize()
                first = time.perf_counter() - start
                seconds = time_per_call(fn, gargs, spec["iters"], torch.cuda.synchronize)
                emit(workload=label, mode=mode, ms=seconds * 1e3, first_call_s=first)
            except Exception as e:  # noqa: BLE001 - n/a in the table
                emit(workload=label, mode=mode, error=first_line(e))
    g = spec["gemm"]
    a, b = (torch.randn(g, g, device=dev, dtype=torch.bfloat16) for _ in range(2))
    seconds = time_per_call(torch.matmul, (a, b), max(2, spec["iters"] // 5), torch.cuda.synchronize)
    emit(workload="gemm_bf16", mode="eager", ms=seconds * 1e3)
    q, k, v = attention_inputs(torch, spec["attention"], dev, torch.bfloat16)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    seconds = time_per_call(lambda q, k, v: sdpa(q, k, v, is_causal=True), (q, k, v), spec["iters"],
                            torch.cuda.synchronize)
    emit(workload="attention_bf16", mode="eager", ms=seconds * 1e3)
    for mode in ("default", "reduce-overhead"):
        for name, (fn, args) in cases.items():
            if time.monotonic() > deadline:
                emit(workload=name, mode=mode, error="time budget for torch spent")
                continue
            try:
                compiled = torch.compile(fn) if mode == "default" else torch.compile(fn, mode=mode)
                seconds = time_per_call(compiled, args, spec["iters"], torch.cuda.synchronize)
                emit(workload=name, mode=mode, ms=seconds * 1e3)
            except Exception as e:  # noqa: BLE001 - missing Triton etc.: n/a in the table
                emit(workload=name, mode=mode, error=first_line(e))
    gpu_training.torch_training(torch, spec, emit, deadline)
    return 0


def first_line(e):
    text = ("%s: %s" % (type(e).__name__, e)).strip()
    return text.splitlines()[0][:300] if text else type(e).__name__


def time_per_call(fn, args, iters, sync, warmup=3, repeats=3):
    """Seconds per call: warm-up calls, then the best of `repeats` runs of `iters` calls, each
    between two synchronisations."""
    for _ in range(warmup):
        fn(*args)
    sync()
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(iters):
            fn(*args)
        sync()
        best = min(best, (time.perf_counter() - start) / iters)
    return best


def attention_inputs(lib, shape, device, dtype):
    """q, k, v of shape (B, H, T, E) from `lib` (dyntrace or torch)."""
    B, H, T, E = shape
    return tuple(lib.randn(B, H, T, E, device=device).to(dtype) for _ in range(3))


if __name__ == "__main__" and len(sys.argv) == 3 and sys.argv[1] == "--torch-child":
    sys.exit(torch_child(json.loads(sys.argv[2])))

# ---------------------------------------------------------------------------------------------
# Everything below imports dyntrace (and the test helpers beside the Python tests).

sys.path.insert(0, _TESTS_PYTHON)
import dyntrace as dt  # noqa: E402
from jitlib import fresh_copy  # noqa: E402 - found through the path set just above

FLOATS = (dt.float16, dt.float32, dt.float64)


FLOAT32_UNIT_ROUNDOFF = 2.0 ** -24


def summed_tol(n, sigma=1.0, mean=False):
    """(rtol, atol) for float32 sums of n terms computed in two different orders (the device's
    and the CPU's), from the error model of a sum of zero-mean terms of size sigma: each partial
    sum is ~sqrt(k)*sigma, so the rounding errors add up to ~u*n*sigma/sqrt(2), and for terms of
    one sign (sums of squares, softmax denominators) the relative error is ~u*sqrt(n). A factor of
    4 covers both orders and the tail. mean=True: the sum is divided by n."""
    u = FLOAT32_UNIT_ROUNDOFF
    atol = 4 * u * n * sigma
    return 4 * u * math.sqrt(n), atol / n if mean else atol


def tolerance(dtype, float32_tol=None):
    """(rtol, atol) for a result of `dtype`: exact for ints and bools. float32_tol replaces the
    float32 default for results that sum many elements (the device sums in another order)."""
    if dtype == dt.float16:
        return 1e-2, 1e-2
    if dtype == dt.float32:
        return float32_tol or (1e-5, 1e-6)
    if dtype == dt.float64:
        return 1e-10, 1e-12
    return 0.0, 0.0


class Case:
    """fn(*make(i)) for call i < calls: compiled on the device vs eager on the CPU. tol: (rtol,
    atol) for float32 results, where summation order matters."""

    def __init__(self, name, fn, make, calls=2, tol=None, kernels=True, one_entry=False):
        self.name, self.fn, self.make, self.calls = name, fn, make, calls
        self.tol, self.kernels, self.one_entry = tol, kernels, one_entry


def corpus(full):
    """The correctness corpus; `full` picks GPU-sized inputs, else small ones (the dry run)."""
    big = (1 << 20) + 3 if full else 4099
    long_row = 1 << 20 if full else 5000
    r, rn = dt.rand, dt.randn
    has_rms = hasattr(dt, "rms_norm")

    def rng(lo, hi, *shape, dtype=dt.float32):
        return (r(*shape, dtype=dt.float64) * (hi - lo) + lo).to(dtype)

    def ints(lo, hi, *shape, dtype=dt.int32):
        return rng(lo, hi, *shape).floor().to(dtype)

    cases = [
        Case("pointwise gelu+bias chain [7,1000]+[1000]",
             lambda x, b: 0.5 * (x + b) * (1.0 + dt.tanh(0.79788456 * ((x + b) + 0.044715 * (x + b) ** 3))),
             lambda i: (rn(7, 1000 + i), rn(1000 + i))),
        Case("broadcast [4,1,7]*[5,1]+[7]", lambda a, b, c: (a * b + c).sigmoid(),
             lambda i: (rn(4, 1, 7), rn(5, 1), rn(7))),
        Case("transposed input x.T*2+y", lambda x, y: (x.T * 2.0 + y).exp2(),
             lambda i: (rn(33, 17 + i), rn(17 + i, 33))),
        Case("strided slices x[:, ::2] - x[:, 1::2]", lambda x: x[:, ::2].exp() - x[:, 1::2].abs().sqrt(),
             lambda i: (rn(9, 62),)),
        Case("size 1 and 0-d", lambda x, s: (x * s).relu() + s, lambda i: (rn(1), rn(()))),
        Case("odd size 1<<20+3 chain", lambda x, y: (x.sigmoid() * y).tanh() - (x * 0.5).erf(),
             lambda i: (rn(big + i), rn(big + i))),
        Case("permute + expand views", lambda x, v: x.permute(2, 0, 1) * v.expand(5, 3, 4) - 1.0,
             lambda i: (rn(3, 4, 5), rn(3, 1))),
    ]
    for dtype in FLOATS:
        cases.append(Case("float chain %s" % dtype,
                          lambda x, y: (x * y - y.abs()).clamp(-1.5, 1.5) / (x.abs() + 1),
                          lambda i, d=dtype: (rn(31, 65).to(d), rn(65).to(d))))
    cases += [
        Case("int32 ops", lambda a, b: (a * 3 - b).abs() + dt.maximum(a, b) - dt.minimum(a, b).square(),
             lambda i: (ints(-50, 50, 17, 33), ints(-50, 50, 33))),
        Case("int64 with float", lambda a, x: a * 0.5 + x, lambda i: (ints(-9, 9, 8, 13, dtype=dt.int64), rn(13))),
        Case("bool logic and where",
             lambda x, y: dt.where(dt.logical_xor(x > 0, y < 0) | ~(x > y), x, y * 2),
             lambda i: (rn(7, 300), rn(7, 300))),
        Case("comparisons to bool", lambda x, y: dt.logical_and(x >= y, x != 0) | (y == 0),
             lambda i: (ints(-3, 3, 5, 129), ints(-3, 3, 129))),
        Case("sum over dims", lambda x: (x.sum(0), x.sum(-1, keepdim=True)),
             lambda i: (rn(37, 1000 + i),), tol=summed_tol(1001)),
        Case("mean over two dims", lambda x: (x * 2).mean((1, 2)), lambda i: (rn(5, 6, 7 + i),), tol=summed_tol(6 * 8, sigma=2, mean=True)),
        Case("amax/amin", lambda x: (x.amax(1), x.amin(0), (x * x).amax(-1, keepdim=True)),
             lambda i: (rn(19, 257 + i),)),
        Case("prod over rows", lambda x: x.prod(-1), lambda i: (rng(0.5, 1.5, 64, 7),)),
        Case("argmax/argmin", lambda x: (x.argmax(-1), x.argmin(0), (x - 1).abs().argmax()),
             lambda i: (rn(23, 999),)),
        Case("full reductions", lambda x: ((x * x).sum(), x.mean(), x.abs().amax()),
             lambda i: (rn(big),), tol=summed_tol(big)),
        Case("long rows (split path) [2,1<<20]", lambda x: (x.sum(-1), x.exp().amax(-1)),
             lambda i: (rn(2, long_row),), tol=summed_tol(long_row)),
        Case("int and bool reductions", lambda a, x: (a.sum(-1), (x > 0).any(0), (x > -3).all(-1), (x > 0).sum()),
             lambda i: (ints(-100, 100, 11, 77), rn(11, 77))),
        # var/std and reductions over non-adjacent dims stay eager inside the compiled graph.
        Case("var/std, mean over dims (0, 2) (eager nodes)", lambda x: (x.var(-1), x.std(0), x.mean((0, 2))),
             lambda i: (rn(13, 501, 3),), tol=summed_tol(501 * 3), kernels=False),
        Case("softmax/log_softmax rows", lambda x: (dt.softmax(x, -1), dt.log_softmax(x * 3, -1)),
             lambda i: (rn(33, 1000 + i),), tol=(2e-5, 1e-5)),
        Case("softmax float16", lambda x: dt.softmax(x, -1), lambda i: (rn(8, 513).to(dt.float16),)),
        Case("layer_norm with affine", lambda x, w, b: dt.layer_norm(x, (x.shape[-1],), w, b),
             lambda i: (rn(20, 768), rn(768), rn(768)), tol=(2e-5, 2e-5)),
        Case("logsumexp", lambda x: x.logsumexp(-1), lambda i: (rn(6, 4097),), tol=(2e-5, 1e-5)),
        # The row kernels' paths: more rows than blocks (grid-stride rows), a strided row (the
        # cached path's scalar variant), float64 (two lanes a vector), rows longer than the
        # register cache (the general path), a sliced input.
        Case("softmax, 20000 short rows", lambda x: dt.softmax(x * 0.5, -1), lambda i: (rn(20000, 40 + i),),
             tol=(2e-5, 1e-6)),
        Case("softmax over a transposed input", lambda x: dt.softmax(x.T, -1), lambda i: (rn(300 + i, 50),),
             tol=(2e-5, 1e-6)),
        Case("layer_norm float64", lambda x, w: dt.layer_norm(x, (x.shape[-1],), w),
             lambda i: (rn(64, 1000 + i).to(dt.float64), rn(1000 + i).to(dt.float64))),
        Case("log_softmax, rows longer than the cache", lambda x: dt.log_softmax(x, -1),
             lambda i: (rn(4, 20000 + i),), tol=(2e-5, 2e-5)),
        Case("layer_norm of a column slice", lambda x: dt.layer_norm(x[:, ::2], (x.shape[-1] // 2,)),
             lambda i: (rn(40, 514),), tol=(2e-5, 2e-5)),
        Case("matmul + bias + GELU (cuBLAS)", lambda x, w, b: dt.gelu(x @ w + b, approximate="tanh"),
             lambda i: (rn(64 + i, 256), rn(256, 96), rn(96)), tol=summed_tol(256)),
        Case("batched matmul", lambda a, b: a @ b, lambda i: (rn(4, 33, 17), rn(4, 17, 9)),
             tol=summed_tol(17), kernels=False),
        Case("batched matmul broadcast weight + relu", lambda a, w: (a @ w).relu() * 2,
             lambda i: (rn(3, 10, 64), rn(64, 5)), tol=summed_tol(64, sigma=2)),
        Case("graph break on a tensor test", _branchy, lambda i: (rn(50, 40) * (1 if i % 2 else -1) + 0.1 * i,),
             calls=4),
        Case("data-dependent while loop", _halve_until_small, lambda i: (rn(100) * (4 + 10 * i),), calls=3),
        Case("changing batch sizes, one compile",
             lambda x, w: dt.layer_norm(x * 2.0 + 1.0, (x.shape[-1],)) * w,
             lambda i: (rn((2, 3, 64, 257, 1000)[i], 96), rn(96)), calls=5, tol=(2e-5, 2e-5), one_entry=True),
    ]
    if has_rms:
        cases.append(Case("rms_norm", lambda x, w: dt.rms_norm(x, (x.shape[-1],), w),
                          lambda i: (rn(16, 1024), rn(1024)), tol=(2e-5, 2e-5)))
    # A whole GPT-2 block. Its GEMMs sum up to 4*D float32 products in another order than the
    # CPU's BLAS: the error bound n*u*sum|a*b| (u = 6e-8, n <= 768 here, |terms| ~ 1 after the
    # layer norms) is about 5e-5 of the values, so 1e-3 relative and absolute leaves a margin.
    gpt = workloads(dt, dt.layer_norm, dt.gelu)
    B, T, D = (2, 64, 192) if full else (1, 8, 96)
    mask = dt.arange(T).reshape(T, 1) >= dt.arange(T).reshape(1, T)
    cases.append(Case("gpt2 layer [%d,%d,%d] (attention, MLP, layer norms)" % (B, T, D), gpt["gpt2_layer"],
                      lambda i: gpt["gpt2_params"](B, T, D, rn, dt.ones, mask, dt.float32), tol=(1e-3, 1e-3)))
    return cases


# Eager ops on CUDA tensors (jit/cuda_eager_ops.h): each runs as device kernels, checked against
# the same op on the CPU. Written once, called with the CPU and the CUDA tensors of `t`.
def eager_op_results(t):
    x, y, pos, m, b, i = t["x"], t["y"], t["pos"], t["m"], t["b"], t["i"]
    out = {}
    for n in ("neg", "abs", "exp", "exp2", "log", "log2", "log1p", "expm1", "sqrt", "rsqrt", "sin", "cos", "tan",
              "tanh", "sigmoid", "relu", "silu", "erf", "floor", "ceil", "round", "trunc", "sign", "reciprocal",
              "square"):
        out[n] = getattr(dt, n)(pos)
    for n in ("add", "sub", "mul", "div", "remainder", "pow", "maximum", "minimum", "atan2", "eq", "lt", "ge"):
        out[n] = getattr(dt, n)(x, pos)
    out["scalars"] = (x * 0.5, x * 0.7, 2.0 - x, x ** 2, x > 0.25, i + 1, i * 2)
    out["logical"] = (dt.logical_and(b, x < 1), dt.where(b, x, y), dt.where(b, x, 0.0))
    out["reductions"] = (x.sum(), x.sum(1), x.amax(1), x.amin(), b.any(), b.all(1), x.mean(0), x.var(), x.std(1),
                         dt.logsumexp(x, [1]), pos.prod(1))
    out["composites"] = (dt.softmax(x, -1), dt.log_softmax(x, 0), dt.layer_norm(x, (x.shape[-1],)),
                         dt.rms_norm(x, (x.shape[-1],)), dt.gelu(x), dt.clamp(x, -0.5, 0.5))
    out["copies"] = (x.T.contiguous(), x.T.reshape(-1), x.T.clone(), dt.cat([x, y], 1), dt.stack([x, y]),
                     x.to(dt.float16), x.to(dt.float64), i.to(dt.float32), b.to(dt.int64), x[1:, ::2].contiguous(),
                     x.T.to(dt.int32), dt.zeros_like(x), dt.full_like(x, 7), dt.ones_like(i))
    z = x.clone()
    z[0] = 1.0
    z[1:3, ::2] = y[1:3, ::2]
    z[:, 0] = y[:, 1]
    z += y
    z.mul_(2)
    z[2:] -= 1
    h = x.to(dt.float16)
    h += 1  # in place in float16
    out["setitem and in-place"] = (z, h)
    out["linalg"] = (x @ m, x.T.matmul(y), dt.matmul(x[:x.shape[0] // 2 * 2].reshape(2, -1, x.shape[1]).transpose(0, 1), m))
    out.update(index_op_results(t))
    out.update(data_op_results(t))
    return out


# unique, arange/linspace and integer floor division, remainder and pow run hand-written kernels
# too (runtime/cuda_index_kernels.h), computing each element as the CPU does: all exact. The
# ranges round start + i * step twice, never fused, so they equal the CPU's bit for bit.
def data_op_results(t):
    x, i, dup = t["x"], t["i"], t["dup"]
    dev = x.device
    nan = x.masked_fill(x > 1.5, float("nan"))  # each NaN is a value of its own
    d = i + (i == 0).to(dt.int32)  # divisors of both signs, none zero
    ranges = (dt.arange(x.shape[1], device=dev), dt.arange(-1.3, 7.9, 0.1, device=dev),
              dt.arange(0.5, 900.0, 1.7, device=dev, dtype=dt.float64), dt.arange(5, -100, -3, device=dev, dtype=dt.int32),
              dt.arange(0, 2, 0.01, device=dev, dtype=dt.float16), dt.linspace(-1.1, 3.7, x.shape[0], device=dev),
              dt.linspace(0, 1, 1001, device=dev, dtype=dt.float64), dt.linspace(10, -3, 7, device=dev, dtype=dt.int64),
              dt.linspace(2, 5, 1, device=dev), dt.linspace(-7.3, 1e3, 4097, device=dev, dtype=dt.bfloat16),
              # past the dtype's range: wraps through int64 on both (CUDA alone would saturate)
              dt.linspace(-300.5, 0.25, 33, device=dev, dtype=dt.uint8), dt.linspace(-300, 300, 9, device=dev, dtype=dt.int8))
    uniques = (dt.unique(dup), dt.unique(i, return_inverse=True, return_counts=True), dt.unique(nan, return_counts=True),
               dt.unique((x * 2).floor().T, return_inverse=True), dt.unique(x.to(dt.float16)),
               dt.unique((i % 3)[:, :5], dim=0, return_inverse=True, return_counts=True),
               dt.unique((i % 2)[:6].T, dim=1, return_counts=True))
    division = (i // d, i % d, i // -7, i % 7, i.T // d.T, (i.to(dt.int64) * 1000003) // d.to(dt.int64),
                i.to(dt.int8) // 3, i.to(dt.int16) % -5, (i % 4) ** 3, i ** (d.abs() % 3))
    return {"data exact": ranges + uniques + division}


def zero_division_failures(t):
    """Failure lines unless an integer zero divisor on CUDA raises the CPU's exception type."""
    failures = []
    for name, fn in (("floor_divide", lambda a, z: a // z), ("remainder", lambda a, z: a % z)):
        raised = []
        for a in (t["i"], t["i"].cuda()):
            z = dt.zeros_like(a[0]) + (dt.arange(a.shape[1], device=a.device) != 3).to(dt.int32)  # one zero
            try:
                fn(a, z)
                raised.append(None)
            except Exception as e:
                raised.append(type(e).__name__)
        if raised[0] is None or raised[1] != raised[0]:
            failures.append("%s by zero raised %s on the CPU, %s on CUDA" % (name, raised[0], raised[1]))
    return failures


# The hand-written index, sort and scan kernels (runtime/cuda_index_kernels.h). Index tensors come
# from the CPU: `rp`/`cp` pick rows/columns, negative ones included,
# `dup` repeats rows (scatters with duplicates), `idx` has x's shape with row values.
def index_op_results(t):
    x, pos, rp, cp, dup, idx, oh = t["x"], t["pos"], t["rp"], t["cp"], t["dup"], t["idx"], t["oh"]
    row = dt.sort(x[0]).values
    z = x.clone()
    z[rp] = 2.0
    z[:, cp[:3]] = x[:, :3]
    exact = (x[rp], x[:, cp], x[rp[:4], cp[:4]], x.index_select(1, cp), dt.gather(x, 0, idx),
             dt.take_along_dim(x, idx, 0), dt.embedding(dup, x), dt.sort(x, 1), dt.sort(x.T, 1, descending=True),
             x.argsort(0), dt.topk(x, 5), dt.kthvalue(x, 3, 1), x.argmax(1), x.argmin(0), x.argmax(), x.max(1),
             dt.cummax(x, 1), dt.cummin(x, 0), dt.tril(x, 1), dt.triu(x, -2), dt.flip(x, [0, 1]), x.roll(3, 1),
             x.repeat(2, 1, 3), dt.searchsorted(row, x), dt.bucketize(x, row, right=True), dt.one_hot(oh, 7),
             dt.scatter(x, 0, dup.unsqueeze(1).expand(-1, 4), x[:dup.shape[0], :4]), z,
             x.index_copy(0, dup, x[:dup.shape[0]]), dt.scatter_reduce(x, 0, idx, pos, "amax"),
             dt.scatter_reduce(x, 0, idx, pos, "amin", include_self=False), dt.sort(x.to(dt.int32), 1).values,
             dt.eye(5, 7, device=x.device), x.to(dt.float16).sort(1).indices, x[x > 0.5], dt.nonzero(x < -1),
             dt.masked_select(x, pos > 1.2), dt.where(x > 1)[1])
    w = x.clone()
    w[rp] += 1.0
    w[x < -1] = 0.25
    sums = (dt.scatter_add(x, 0, idx, pos), x.index_add(0, dup, x[:dup.shape[0]], alpha=0.5), w,
            dt.scatter_reduce(x, 0, idx, pos, "mean"), dt.scatter_reduce(x, 0, idx, pos, "sum", include_self=False))
    scans = (dt.cumsum(x, 1), dt.cumsum(x.T, 1), dt.logcumsumexp(x, 0), dt.cumprod(pos[:, :9], 1),
             dt.cumsum((x > 0), 1))
    return {"index exact": exact, "index sums": sums, "index scans": scans}


def run_eager_on_device(mode, log):
    """Failure lines: eager ops on CUDA tensors against the CPU, and host ops they caused."""
    if mode.dry:
        log("  skipped in --cpu-dry-run")
        return []
    failures = []
    for rows, cols in ((37, 65), (256, 1031)):
        cpu = {"x": dt.randn(rows, cols), "y": dt.randn(rows, cols), "pos": dt.rand(rows, cols) + 0.5,
               "m": dt.randn(cols, 19)}
        cpu["b"], cpu["i"] = cpu["x"] > 0, (cpu["x"] * 10).to(dt.int32)
        pick = lambda n, low, high: (dt.rand(n) * (high - low) + low).floor().to(dt.int64)
        cpu["rp"], cpu["cp"], cpu["dup"] = pick(9, -rows, rows), pick(11, -cols, cols), pick(rows // 2, 0, rows)
        cpu["idx"], cpu["oh"] = (dt.rand(rows, cols) * rows).floor().to(dt.int64), pick(13, 0, 7)
        want = eager_op_results(cpu)
        before = dt.stats()["cuda_host_ops"]
        got = eager_op_results({k: v.cuda() for k, v in cpu.items()})
        host = dt.stats()["cuda_host_ops"] - before
        if host:
            failures.append("eager ops [%d,%d] ran %d ops through the host: %s"
                            % (rows, cols, host, dt.stats()["cuda_host_ops_by_op"]))
        for name in want:
            # Sums of n = cols float32 terms in another order (reductions, rows, GEMMs; terms up
            # to x*x, so sigma ~2): summed_tol's model. Pointwise math: libm and CUDA's functions
            # are each within 2 ulp, so 8 ulp (1e-6) relative.
            tol = summed_tol(cols, sigma=2) if name in ("reductions", "composites", "linalg") else (1e-6, 1e-6)
            # Index kernels move elements exactly; scatters sum at most `rows` terms in the
            # order the atomics take them; scans add in double and round once (a near-tie may
            # round the other way; the products and log-sum-exps compound 1 ulp per step).
            tol = {"index exact": (0.0, 0.0), "data exact": (0.0, 0.0), "index sums": summed_tol(rows, sigma=2),
                   "index scans": (4e-7 * 9, 1e-6)}.get(name, tol)
            for k, (g, w) in enumerate(zip(flatten_results(got[name]), flatten_results(want[name]))):
                bad = compare(g, w, lambda d: tolerance(d, tol))
                if bad is not None:
                    failures.append("eager %s #%d on [%d,%d]: %s (max abs error %g)" % (name, k, rows, cols, bad[0], bad[1]))
        failures += zero_division_failures(cpu)
        log("  eager ops on [%d,%d]: %d groups compared, %d host ops" % (rows, cols, len(want), host))
    for line in failures:
        log("  FAIL  " + line)
    return failures


def _branchy(x):
    y = x / (x.abs() + 1)
    if x.sum() > 0:
        y = y * -1
    return y + x.mean()


def _halve_until_small(x):
    while x.abs().amax() > 1:
        x = x * 0.5
    return x.exp()


def flatten_results(value):
    if isinstance(value, (tuple, list)):
        out = []
        for v in value:
            out += flatten_results(v)
        return out
    return [value]


def compare(got, want, dtype_tol):
    """None if got (any device) matches want (CPU), else (message, max abs error)."""
    if not isinstance(want, dt.Tensor):
        return None if got == want else ("value %r != %r" % (got, want), math.inf)
    if not isinstance(got, dt.Tensor):
        return "a %s instead of a Tensor" % type(got).__name__, math.inf
    if got.dtype != want.dtype or tuple(got.shape) != tuple(want.shape):
        return "got %s%s, expected %s%s" % (got.dtype, list(got.shape), want.dtype, list(want.shape)), math.inf
    rtol, atol = dtype_tol(want.dtype)
    g, e = got.cpu().to(dt.float64), want.to(dt.float64)
    same = (g == e) | ((g != g) & (e != e))  # equal (infinities too) or both NaN
    diff = dt.where(same, 0.0, (g - e).abs())
    bad = dt.logical_not(same | (diff <= atol + rtol * e.abs()))
    max_err = diff.amax().item() if diff.numel() else 0.0
    n_bad = bad.sum().item()
    if n_bad:
        return "%d/%d elements outside rtol=%g atol=%g" % (n_bad, bad.numel(), rtol, atol), max_err
    return None


def check_graph_replay(mode, log):
    """CUDA-graph replay, every result held until the end: each replay must write its own
    buffers (re-pointed kernel nodes), never an earlier result's. Pointwise + reductions on
    fresh inputs at new addresses each call; and a matmul (cuBLAS inside the graph) whose input
    keeps its address while its contents change between calls."""
    def pointwise(x, w, b):
        h = dt.tanh(x * w + b)
        return h / (h.sum(0) + 100.0), h.amax(-1)

    def mlp(x, w, b):
        return dt.relu(x @ w + b) * 2.0, (x * 2.0).sum(-1)

    failures = []
    dt.manual_seed(7)
    for name, fn, shapes in (("pointwise, new input addresses", pointwise, ((37, 48), (48,), (48,))),
                             ("matmul, input rewritten in place", mlp, ((37, 48), (48, 40), (40,)))):
        before = dt.stats()
        jfn = dt.jit(fresh_copy(fn), backend=mode.backend, cuda_graphs=True)
        w, b = dt.randn(*shapes[1]), dt.randn(*shapes[2])
        dw, db = mode.to_device(w), mode.to_device(b)
        fixed_x = mode.to_device(dt.zeros(*shapes[0]))
        held = []
        for _ in range(6):
            x = dt.randn(*shapes[0])
            if fn is mlp:
                fixed_x[...] = mode.to_device(x)
                held.append((x, jfn(fixed_x, dw, db)))
            else:
                held.append((x, jfn(mode.to_device(x), dw, db)))
        try:
            for i, (x, got) in enumerate(held):
                for k, (g, want) in enumerate(zip(got, fn(x, w, b))):
                    bad = compare(g, want, lambda d: tolerance(d, (1e-4, 1e-5)))
                    if bad is not None:
                        raise AssertionError("call %d, result %d: %s; max abs error %g" % (i, k, bad[0], bad[1]))
            after = dt.stats()
            delta = {k: after["cuda_graph_" + k] - before["cuda_graph_" + k]
                     for k in ("captures", "replays", "patches", "refusals")}
            # Call 1 runs directly, call 2 captures and launches, calls 3-6 replay.
            if mode.full and (delta["captures"] != 1 or delta["replays"] != 5 or delta["refusals"]):
                raise AssertionError("expected 1 capture and 5 graph launches, got %s" % delta)
            log("  ok    %-45s %s" % ("CUDA graph replay, " + name, delta))
        except Exception as e:  # noqa: BLE001 - listed like the corpus's failures
            line = "CUDA graph replay, %s: %s" % (name, first_line(e))
            log("  FAIL  " + line)
            failures.append(line)
    return failures


def kernel_count(fn, target):
    return sum(source.count('extern "C" __global__') if target == "cuda" else source.count("_fixed(")
               for source in dt.kernels(fn, target=target))


def shapes_of(args):
    return ", ".join("%s%s" % (a.dtype, list(a.shape)) if isinstance(a, dt.Tensor) else repr(a) for a in args)


def run_correctness(mode, log):
    """Runs the corpus; returns the list of failure lines."""
    failures = []
    dt.manual_seed(20260601)
    for case in corpus(mode.full):
        jfn = dt.jit(fresh_copy(case.fn), backend=mode.backend)
        worst = 0.0
        try:
            for i in range(case.calls):
                args = case.make(i)
                want = case.fn(*args)
                got = jfn(*[mode.to_device(a) for a in args])
                for k, (g, w) in enumerate(zip(flatten_results(got), flatten_results(want))):
                    bad = compare(g, w, lambda d: tolerance(d, case.tol))
                    if bad is not None:
                        raise AssertionError("call %d, result %d: %s; max abs error %g; inputs %s"
                                             % (i, k, bad[0], bad[1], shapes_of(args)))
                    if isinstance(w, dt.Tensor) and w.numel():
                        worst = max(worst, (g.cpu().to(dt.float64) - w.to(dt.float64)).abs().amax().item())
            n = kernel_count(jfn, mode.kernel_target)
            if case.kernels and n == 0:
                raise AssertionError("no compiled kernels: the graphs ran eagerly")
            entries = len(dt.guards(jfn))
            if case.one_entry and entries != 1:
                raise AssertionError("%d cache entries for %d batch sizes (expected one compile)"
                                     % (entries, case.calls))
            log("  ok    %-45s kernels %3d  max abs err %.3g" % (case.name, n, worst))
        except Exception as e:  # noqa: BLE001 - every failure is listed, the run goes on
            line = "%s: %s" % (case.name, first_line(e))
            failures.append(line)
            log("  FAIL  " + line)
            log(traceback.format_exc().rstrip())
    failures += check_graph_replay(mode, log)
    stats = dt.stats()
    # Host-compiled libraries (cpu backend) or NVRTC CUBINs (cuda backend), built or cached.
    compiled = sum(stats.get(k, 0) for k in ("kernels_compiled", "kernels_cached", "cubins_compiled", "cubins_cached"))
    log("  stats: kernels_compiled %d, kernels_cached %d, cubins_compiled %d, cubins_cached %d, nvrtc_seconds %.2f, "
        "compile_seconds %.2f, graphs %d, graph_breaks %d"
        % (stats["kernels_compiled"], stats["kernels_cached"], stats.get("cubins_compiled", 0),
           stats.get("cubins_cached", 0), stats.get("nvrtc_seconds", 0.0), stats["compile_seconds"], stats["graphs"],
           stats["graph_breaks"]))
    if stats["compile_failures"]:
        for reason in stats["compile_failures"]:
            failures.append("compile failure: %s" % reason.splitlines()[0][:300])
            log("  FAIL  compile failure: %s" % reason)
    if compiled == 0:
        failures.append("dt.stats() shows no compiled kernels")
    return failures


# ---------------------------------------------------------------------------------------------
# Timing.

class Mode:
    def __init__(self, dry, quick, emulated=False):
        self.dry = dry
        self.emulated = emulated  # CUDA through tests/fake_cuda's stand-ins: kernels run on the host
        small = dry or emulated
        self.full = not small
        self.device = "cpu" if dry else "cuda"
        self.backend = "cpu" if dry else "cuda"
        self.kernel_target = "cpu" if dry else "cuda"
        self.iters = 2 if small else (10 if quick else 50)
        self.elements = (1 << 14) if small else (1 << 24)
        self.rows = 64 if small else 4096
        self.small = 1024
        self.replay_elements = 1 << 17  # above the scheduler's small whole-fold: a launch per reduction
        self.gpt2 = (2, 16, 96) if small else (4, 128, 768)  # (B, T, D): GPT-2 small's width on the GPU
        self.gemm = 128 if small else 8192  # the bfloat16 GEMM's side
        self.attention = (1, 2, 64, 64) if small else (4, 12, 1024, 64)  # causal bf16 (B, H, T, E)

    def to_device(self, value):
        return value.to(self.device) if isinstance(value, dt.Tensor) else value

    def sync(self):
        if not self.dry:
            dt.cuda.synchronize()


def copy_timer(mode, nbytes_elems):
    """(seconds per copy of nbytes_elems float32 elements, how it was timed) or (None, why)."""
    if mode.dry:
        return None, "skipped in --cpu-dry-run"
    src = dt.randn(nbytes_elems).cuda()
    dst = dt.empty(nbytes_elems, device="cuda")
    # Between dense CUDA tensors of one layout, assignment is one cuMemcpyDtoDAsync.
    def copy(d, s):
        d[...] = s
    return time_per_call(copy, (dst, src), mode.iters, mode.sync), "dst[...] = src (cuMemcpyDtoDAsync)"


def launches_per_call(mode, fn, args):
    """Kernels one call of fn launches one at a time (dt.stats()['cuda_kernel_launches']), or, in
    the dry run, where no kernel runs on a GPU, the kernel functions its CUDA source holds."""
    if mode.dry:
        return kernel_count(fn, "cuda")
    before = dt.stats()["cuda_kernel_launches"]
    fn(*args)
    return dt.stats()["cuda_kernel_launches"] - before


def chain_with_about_50_launches(mode, w, log):
    """make_chain(steps) with steps chosen so that one call launches about 50 kernels on this
    build (cuda_graphs=False); returns (steps, launches per call)."""
    steps = CHAIN_STEPS
    for _ in range(3):
        fn = dt.jit(fresh_copy(w["make_chain"](steps)), backend=mode.backend, cuda_graphs=False)
        x = mode.to_device(dt.randn(mode.replay_elements))
        fn(x)  # compiles
        n = launches_per_call(mode, fn, (x,))
        if 45 <= n <= 55 or n == 0:
            break
        steps = max(1, round(steps * 50 / n))
    log("  replay function: %d steps -> %d kernel launches per call without a graph" % (steps, n))
    return steps, n


GPT2_ROWS = ("gpt2_f32", "gpt2_f16", "gpt2_bf16")
CHAIN_STEPS = 25  # the chain row's dependent reductions (torch.compile runs the same function)


def gpt2_inputs(mode, w, dtype):
    B, T, D = mode.gpt2
    mask = (dt.arange(T).reshape(T, 1) >= dt.arange(T).reshape(1, T))
    return w["gpt2_params"](B, T, D, dt.randn, dt.ones, mask, dtype)


def time_gpt2(mode, w, log):
    """The GPT-2 layer compiled for the device: first call (trace + compile), per-call time, and
    what stayed on the device. Its correctness is a corpus case."""
    rows = {}
    for dtype, name in ((dt.float32, "gpt2_f32"), (dt.float16, "gpt2_f16"), (dt.bfloat16, "gpt2_bf16")):
        args = [mode.to_device(a) for a in gpt2_inputs(mode, w, dtype)]
        fn = dt.jit(fresh_copy(w["gpt2_layer"]), backend=mode.backend)
        host_before = dt.stats().get("cuda_host_ops", 0)
        fused_before = dt.stats().get("fused_attention_runs", 0)
        start = time.perf_counter()
        fn(*args)
        mode.sync()
        first = time.perf_counter() - start
        if not mode.dry and dt.stats().get("fused_attention_runs", 0) == fused_before:
            raise AssertionError("%s: the layer's attention did not run the fused kernel" % name)
        seconds = time_per_call(fn, args, mode.iters, mode.sync)
        stats = dt.stats()
        host_ops = stats.get("cuda_host_ops", 0) - host_before
        rows[name] = {"ms": seconds * 1e3, "first_s": first}
        log("  %s: %.3f ms per call, first call (trace + compile) %.2f s, kernels %d, host ops %d, "
            "graph captures so far %d" % (name, seconds * 1e3, first, kernel_count(fn, mode.kernel_target), host_ops,
                                          stats.get("cuda_graph_captures", 0)))
        if host_ops and not mode.dry:
            raise AssertionError("%s ran %d ops through the host: %s" % (name, host_ops, stats["cuda_host_ops_by_op"]))
    return rows


def time_bf16_gemm(mode, log):
    """A bfloat16 mode.gemm-cubed product through dyntrace's matmul: ms and TFLOP/s."""
    g = mode.gemm
    a, b = (dt.randn(g, g).to(dt.bfloat16).to(mode.device) for _ in range(2))
    seconds = time_per_call(dt.matmul, (a, b), max(2, mode.iters // 5), mode.sync)
    row = {"ms": seconds * 1e3, "tflops": 2.0 * g ** 3 / seconds / 1e12}
    log("  gemm_bf16 %d^3: %.3f ms, %.1f TFLOP/s" % (g, row["ms"], row["tflops"]))
    return row


def time_attention(mode, log):
    """Causal bfloat16 attention of mode.attention's shape: the fused kernel (scaled_dot_product_
    attention) against the same attention as separate eager ops (two GEMMs, mask, softmax)."""
    q, k, v = attention_inputs(dt, mode.attention, mode.device, dt.bfloat16)
    T, scale = mode.attention[2], mode.attention[3] ** -0.5
    mask = (dt.arange(T).reshape(T, 1) >= dt.arange(T).reshape(1, T)).to(mode.device)
    sdpa = dt.nn.functional.scaled_dot_product_attention

    def unfused(q, k, v):
        return dt.softmax(dt.where(mask, q @ k.transpose(-2, -1) * scale, float("-inf")), -1) @ v

    before = dt.stats().get("fused_attention_runs", 0)
    fused_s = time_per_call(lambda q, k, v: sdpa(q, k, v, is_causal=True), (q, k, v), mode.iters, mode.sync)
    if not mode.dry and dt.stats().get("fused_attention_runs", 0) == before:
        raise AssertionError("scaled_dot_product_attention did not run the fused kernel")
    unfused_s = time_per_call(unfused, (q, k, v), mode.iters, mode.sync)
    row = {"ms": fused_s * 1e3, "unfused_ms": unfused_s * 1e3}
    log("  attention_bf16 %s causal: fused %.3f ms, unfused ops %.3f ms" % (mode.attention, row["ms"],
                                                                          row["unfused_ms"]))
    return row


def cold_layer_compile(mode, log):
    """The GPT-2 layer's first call (trace, compile, NVRTC, first launch) in a fresh process with
    an empty kernel cache: {"first_s", "nvrtc_s"}, or {"error"}."""
    if mode.dry:
        return {"error": "n/a: --cpu-dry-run"}
    env = dict(os.environ)
    env["DYNTRACE_CACHE_DIR"] = tempfile.mkdtemp(prefix="gpu_check_cold_")
    cmd = [sys.executable, os.path.abspath(__file__), "--cold-layer-child", json.dumps({"gpt2": list(mode.gpt2)})]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
        row = json.loads(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 else {
            "error": "child exited %d: %s" % (p.returncode, (p.stderr.strip().splitlines() or ["?"])[-1][:200])}
    except (subprocess.TimeoutExpired, ValueError, IndexError) as e:
        row = {"error": first_line(e)}
    finally:
        shutil.rmtree(env["DYNTRACE_CACHE_DIR"], ignore_errors=True)
    if "error" in row:
        log("  cold compile of gpt2_f32: %s" % row["error"])
    else:
        log("  cold compile of gpt2_f32 (empty kernel cache, fresh process): first call %.2f s, NVRTC waited %.2f s"
            % (row["first_s"], row["nvrtc_s"]))
    return row


def cold_layer_child(spec):
    """In the child: the GPT-2 layer's first call, printed as one JSON line."""
    mode = Mode(False, True)
    mode.gpt2 = tuple(spec["gpt2"])
    w = workloads(dt, dt.layer_norm, dt.gelu)
    args = [mode.to_device(a) for a in gpt2_inputs(mode, w, dt.float32)]
    mode.sync()
    fn = dt.jit(w["gpt2_layer"], backend="cuda")
    start = time.perf_counter()
    fn(*args)
    mode.sync()
    first = time.perf_counter() - start
    print(json.dumps({"first_s": first, "nvrtc_s": dt.stats().get("nvrtc_seconds", 0.0)}), flush=True)
    return 0


def run_timings(mode, log):
    """Returns (rows, info): rows[name] = dict of dyntrace timings; info = (steps, launches)."""
    w = workloads(dt, dt.layer_norm, dt.gelu)
    n, rows = mode.elements, mode.rows
    cols = n // rows
    x = dt.randn(rows, cols).to(mode.device)
    bias, lw, lb = (dt.randn(cols).to(mode.device) for _ in range(3))
    elem = 4
    table = {}
    copy_s, copy_how = copy_timer(mode, n)
    log("  copy reference: %s" % (copy_how if copy_s is None else "%s, %.3f ms for %d MB each way"
                                  % (copy_how, copy_s * 1e3, n * elem >> 20)))
    for name, fn_name, args in (("gelu_bias", "gelu_bias", (x, bias)),
                                ("softmax", "softmax_rows", (x,)),
                                ("layer_norm", "layer_norm_rows", (x, lw, lb))):
        fn = dt.jit(fresh_copy(w[fn_name]), backend=mode.backend)
        seconds = time_per_call(fn, args, mode.iters, mode.sync)
        moved = 2 * n * elem  # read x once, write the result once (bias/weights are negligible)
        row = {"ms": seconds * 1e3, "gbps": moved / seconds / 1e9}
        if copy_s is not None:
            # The copy moves n elements in and n out: the same bytes as `moved`.
            row["vs_copy"] = copy_s / seconds
        table[name] = row
        log("  %-10s %.3f ms, %.1f GB/s%s" % (name, row["ms"], row["gbps"],
                                                ", %.2f of copy" % row["vs_copy"] if "vs_copy" in row else ""))
    table.update(time_gpt2(mode, w, log))
    table["gemm_bf16"] = time_bf16_gemm(mode, log)
    table["attention_bf16"] = time_attention(mode, log)
    table["cold"] = cold_layer_compile(mode, log)
    steps, launches = chain_with_about_50_launches(mode, w, log)
    big = dt.randn(mode.replay_elements).to(mode.device)
    per_call = {}
    for graphs in (False, True):
        fn = dt.jit(fresh_copy(w["make_chain"](steps)), backend=mode.backend, cuda_graphs=graphs)
        per_call[graphs] = time_per_call(fn, (big,), mode.iters * 4, mode.sync)
    small = dt.randn(mode.small).to(mode.device)
    chain = dt.jit(fresh_copy(w["make_chain"](CHAIN_STEPS)), backend=mode.backend)
    chain_s = time_per_call(chain, (small,), mode.iters * 4, mode.sync)
    chain_launches = launches_per_call(mode, dt.jit(fresh_copy(w["make_chain"](CHAIN_STEPS)), backend=mode.backend,
                                                    cuda_graphs=False), (small,))
    table["replay"] = {"ms": chain_s * 1e3, "launches": chain_launches, "ratio": per_call[True] / per_call[False],
                       "replay_launches": launches}
    log("  chain of %d reductions on %d elements: %.3f ms, %d launch(es) without a graph"
        % (CHAIN_STEPS, mode.small, chain_s * 1e3, chain_launches))
    log("  replay: %.3f ms with cuda_graphs=True, %.3f ms with cuda_graphs=False (%d launches), ratio %.2f"
        % (per_call[True] * 1e3, per_call[False] * 1e3, launches, table["replay"]["ratio"]))
    stats = dt.stats()
    keys = [k for k in ("cuda_graph_captures", "cuda_graph_replays", "cuda_graph_patches", "cuda_kernel_launches")
            if k in stats]
    log("  " + (", ".join("%s %s" % (k, stats[k]) for k in keys) if keys else
                "dt.stats() has no cuda_graph_* keys in this build"))
    return table, (CHAIN_STEPS, launches)


def run_torch(mode, steps, budget_s, log):
    """({(workload, mode): ms or 'n/a: reason'}, {mode: the training row}) from the torch child."""
    names = ("gelu_bias", "softmax", "layer_norm", "replay")
    modes = ("default", "reduce-overhead")
    result = {(w, m): None for w in names for m in modes}
    for name in GPT2_ROWS:
        for m in ("eager",) + modes:
            result[(name, m)] = None
    result[("gemm_bf16", "eager")] = None
    result[("attention_bf16", "eager")] = None
    training = {}
    if mode.dry:
        return {k: "n/a: --cpu-dry-run" for k in result}, {m: {"error": "--cpu-dry-run"} for m in ("eager", "reduce-overhead")}
    if budget_s < 10:
        return {k: "n/a: no time left (--time-limit)" for k in result}, training
    spec = {"elements": mode.elements, "rows": mode.rows, "small": mode.small, "steps": steps,
            "iters": mode.iters, "budget_s": max(10, budget_s - 20), "gpt2": list(mode.gpt2), "gemm": mode.gemm,
            "attention": list(mode.attention)}
    cmd = [sys.executable, os.path.abspath(__file__), "--torch-child", json.dumps(spec)]
    env = dict(os.environ)
    if "GPU_CHECK_TORCH_LD_LIBRARY_PATH" in env:  # set by run_gpu_checks.sh: the caller's own
        env["LD_LIBRARY_PATH"] = env["GPU_CHECK_TORCH_LD_LIBRARY_PATH"]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=budget_s, env=env)
        out, why = p.stdout, None if p.returncode == 0 else "torch child exited %d" % p.returncode
        if p.stderr.strip():
            log("  torch child stderr (last lines):\n    " + "\n    ".join(p.stderr.strip().splitlines()[-8:]))
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        why = "timed out after %d s" % budget_s
    for line in out.splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if "error" in row and "workload" not in row:
            return {k: "n/a: " + row["error"] for k in result}, {}
        if row.get("workload") == "gpt_mini_step":
            training[row["mode"]] = row
            continue
        key = (row.get("workload"), row.get("mode"))
        if key in result:
            result[key] = row["ms"] if "ms" in row else "n/a: " + row["error"]
            if "first_call_s" in row:
                result[key + ("first_call_s",)] = row["first_call_s"]
                log("  torch %s %s: first call (compile) %.2f s, %.3f ms per call"
                    % (key[0], key[1], row["first_call_s"], row["ms"]))
    for k, v in result.items():
        if v is None:
            result[k] = "n/a: " + (why or "no result")
    return result, training


def table_lines(table, torch_ms, launches):
    head = ("workload", "dyntrace ms", "vs copy / replay", "torch.compile ms", "dt/torch",
            "reduce-overhead ms", "dt/torch")
    lines = [head]
    for name in GPT2_ROWS:
        row = table.get(name)
        if row is None:
            continue
        eager = torch_ms[(name, "eager")]
        cells = [name, "%.3f" % row["ms"],
                 "torch eager %s" % (("%.3f ms" % eager) if not isinstance(eager, str) else eager[:30])]
        for m in ("default", "reduce-overhead"):
            t = torch_ms[(name, m)]
            cells += [t[:48], "-"] if isinstance(t, str) else ["%.3f" % t, "%.2f" % (row["ms"] / t)]
        lines.append(tuple(cells))
    for name in ("gelu_bias", "softmax", "layer_norm", "replay"):
        row = table[name]
        label = name if name != "replay" else "chain of %d reductions (%d launch(es))" % (CHAIN_STEPS, row["launches"])
        if name == "replay":
            rel = "graphs %.2fx of %d launches" % (row["ratio"], row["replay_launches"])
        else:
            rel = "%.2f of copy" % row["vs_copy"] if "vs_copy" in row else "n/a"
        cells = [label, "%.3f" % row["ms"], rel]
        for m in ("default", "reduce-overhead"):
            t = torch_ms[(name, m)]
            if isinstance(t, str):
                cells += [t[:48], "-"]
            else:
                cells += ["%.3f" % t, "%.2f" % (row["ms"] / t)]
        lines.append(tuple(cells))
    gemm, torch_gemm = table.get("gemm_bf16"), torch_ms.get(("gemm_bf16", "eager"))
    if gemm is not None:
        rate = ("%.2f of torch's rate (goal >= 0.80)" % (torch_gemm / gemm["ms"])
                if isinstance(torch_gemm, float) else str(torch_gemm)[:40])
        lines.append(("gemm_bf16", "%.3f" % gemm["ms"], "%.1f TFLOP/s" % gemm["tflops"],
                      "torch matmul %s" % (("%.3f" % torch_gemm) if isinstance(torch_gemm, float) else "-"), rate,
                      "", ""))
    att, torch_att = table.get("attention_bf16"), torch_ms.get(("attention_bf16", "eager"))
    if att is not None:
        versus = ("%.2fx torch's" % (att["ms"] / torch_att)) if isinstance(torch_att, float) else str(torch_att)[:40]
        lines.append(("attention_bf16 causal", "%.3f" % att["ms"], "%.2fx unfused ops" % (att["ms"] / att["unfused_ms"]),
                      "torch SDPA %s" % (("%.3f" % torch_att) if isinstance(torch_att, float) else "-"), versus,
                      "", ""))
    cold, torch_cold = table.get("cold"), torch_ms.get(("gpt2_f32", "default", "first_call_s"))
    if cold is not None and "error" not in cold:
        versus = ("%.2fx torch.compile's %.1f s (goal <= 0.5x)" % (cold["first_s"] / torch_cold, torch_cold)
                  if isinstance(torch_cold, float) else "torch.compile n/a")
        lines.append(("gpt2_f32 cold compile", "%.2f s" % cold["first_s"], "NVRTC %.2f s (goal <= 1 s)" % cold["nvrtc_s"],
                      versus, "", "", ""))
    widths = [max(len(r[i]) for r in lines) for i in range(len(head))]
    return ["  ".join(c.ljust(wd) for c, wd in zip(r, widths)).rstrip() for r in lines]


# ---------------------------------------------------------------------------------------------

def no_gpu_reason():
    """None when a CUDA device works, else one line saying why not."""
    try:
        if dt.cuda.is_available():
            dt.zeros(1, device="cuda")
            return None
        dt.zeros(1, device="cuda")
        return "dt.cuda.is_available() is False"
    except Exception as e:  # noqa: BLE001 - the reason is the message
        return first_line(e)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu-dry-run", action="store_true",
                        help="run the corpus and timing code with backend='cpu' on small CPU tensors")
    parser.add_argument("--emulated", action="store_true",
                        help="only the correctness checks, on small tensors, for CUDA through tests/fake_cuda's "
                             "stand-in driver, cuBLAS and NVRTC (kernels built for and run on the host)")
    parser.add_argument("--quick", action="store_true", help="fewer timing iterations")
    parser.add_argument("--log", help="also write everything to this file")
    parser.add_argument("--torch-budget", type=float, default=200.0,
                        help="seconds the torch.compile child may take (default 200)")
    parser.add_argument("--time-limit", type=float,
                        help="seconds this whole run may take: the torch child gets what is left of them, so "
                             "the table is printed in time")
    args = parser.parse_args(argv)
    launched = time.monotonic()
    log_file = open(args.log, "a") if args.log else None

    def log(text):
        print(text, flush=True)
        if log_file:
            log_file.write(text + "\n")
            log_file.flush()

    mode = Mode(args.cpu_dry_run, args.quick, args.emulated)
    if not mode.dry:
        reason = no_gpu_reason()
        if reason is not None:
            log("gpu_check: no GPU: %s" % reason)
            return EXIT_NO_GPU
    log("gpu_check: dyntrace %s, Python %s, %s" % (
        os.path.dirname(os.path.abspath(dt.__file__)) if getattr(dt, "__file__", None) else "(built in)",
        sys.version.split()[0], "cpu dry run" if mode.dry else "%d CUDA device(s)%s" % (
            dt.cuda.device_count(), " (emulated on the host)" if mode.emulated else "")))
    start = time.monotonic()
    log("correctness (compiled on %s vs eager on the CPU):" % mode.device)
    failures = run_correctness(mode, log)
    log("eager ops on the device vs the CPU:")
    failures += run_eager_on_device(mode, log)
    log("correctness: %d failure(s) in %.1f s" % (len(failures), time.monotonic() - start))
    if mode.emulated:
        # The timing code runs too, so that the GPU machine's minutes never find it broken; its
        # figures time the host's emulation and mean nothing.
        log("timings (emulated: the figures time the stand-in, not a GPU):")
        try:
            run_timings(mode, log)
        except Exception as e:  # noqa: BLE001 - listed like the corpus's failures
            failures.append("timings: %s" % first_line(e))
            log("  FAIL  timings: %s\n%s" % (first_line(e), traceback.format_exc().rstrip()))
        log("training:")
        failures += gpu_training.run_training(mode, log, fresh_copy)[0]
        for line in failures:
            log("FAILED: %s" % line)
        log("gpu_check --emulated: %s (timings are not measured on the stand-in)"
            % ("%d failure(s)" % len(failures) if failures else "all correctness checks passed"))
        return EXIT_FAILED if failures else EXIT_OK
    log("timings:")
    try:
        table, (steps, launches) = run_timings(mode, log)
        log("training:")
        training_failures, training_row = gpu_training.run_training(mode, log, fresh_copy)
        failures += training_failures
        torch_budget = args.torch_budget
        if args.time_limit is not None:
            # What is left, less a margin for printing and the child's start-up and exit.
            torch_budget = min(torch_budget, args.time_limit - (time.monotonic() - launched) - 15)
        torch_ms, torch_training = run_torch(mode, steps, torch_budget, log)
        log("")
        for line in table_lines(table, torch_ms, launches):
            log(line)
        for line in gpu_training.training_lines(training_row, torch_training):
            log(line)
    except Exception as e:  # noqa: BLE001 - a timing crash is a failure, the report still comes
        failures.append("timings: %s" % first_line(e))
        log("  FAIL  timings: %s\n%s" % (first_line(e), traceback.format_exc().rstrip()))
    log("")
    for line in failures:
        log("FAILED: %s" % line)
    log("gpu_check: %s (%.1f s)" % ("%d failure(s)" % len(failures) if failures else "all correctness checks passed",
                                    time.monotonic() - start))
    return EXIT_FAILED if failures else EXIT_OK


if __name__ == "__main__" and len(sys.argv) == 3 and sys.argv[1] == "--cold-layer-child":
    sys.exit(cold_layer_child(json.loads(sys.argv[2])))
if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
