"""Helpers for the cpu backend tests: a function compiled by the cpu backend against the same
function run eagerly (plain CPython calling the eager runtime), on fresh random inputs, with
results compared value by value, dtype, shape and strides."""
import glob
import os
import subprocess
import sys

import dyntrace as dt
from jitlib import fresh_copy, jitted_copy, run_differential, stats
from testlib import assert_close, require_nvrtc

ALL_DTYPES = (dt.bool, dt.int32, dt.int64, dt.float16, dt.float32, dt.float64)
FLOAT_DTYPES = (dt.float16, dt.float32, dt.float64)


def compiled(fn):
    return dt.jit(fresh_copy(fn), backend="cpu")


def kernel_count(fn):
    """How many kernels the cpu backend generated for fn's cache entries."""
    return sum(source.count("_fixed(") for source in dt.kernels(fn))


def compare(got, expected, rtol=None, atol=None, what="result"):
    if isinstance(expected, (tuple, list)):
        assert type(got) is type(expected) and len(got) == len(expected), (what, got, expected)
        for i, (g, e) in enumerate(zip(got, expected)):
            compare(g, e, rtol, atol, "%s[%d]" % (what, i))
        return
    if isinstance(expected, dt.Tensor):
        assert isinstance(got, dt.Tensor), (what, got)
        assert got.dtype == expected.dtype, "%s: dtype %s != %s" % (what, got.dtype, expected.dtype)
        assert got.stride() == expected.stride() or got.numel() <= 1, (
            "%s: strides %s != eager's %s (shape %s)" % (what, got.stride(), expected.stride(), got.shape))
        assert_close(got, expected, rtol=rtol, atol=atol, msg=what)
        return
    assert got == expected, (what, got, expected)


def outcome(fn, args):
    try:
        return fn(*args), None
    except Exception as e:  # noqa: BLE001 - compared with the other side
        return None, e


def check(fn, make_inputs, calls=2, rtol=None, atol=None, kernels=None, min_kernels=1):
    """Runs fn eagerly and compiled on make_inputs(i) for i < calls (fresh inputs each call, and
    make_inputs may change sizes between calls). Returns the compiled function."""
    g = compiled(fn)
    for i in range(calls):
        args = make_inputs(i)
        expected, expected_error = outcome(fn, args)
        got, error = outcome(g, args)
        if expected_error is not None:
            assert error is not None and type(error) is type(expected_error), (
                "eager raised %r, compiled gave %r" % (expected_error, error if error else got))
            continue
        assert error is None, "compiled raised %r" % (error,)
        compare(got, expected, rtol, atol)
    n = kernel_count(g)
    if kernels is not None:
        assert n == kernels, "expected %d fused kernel(s), got %d:\n%s" % (kernels, n, "\n".join(dt.kernels(g)))
    else:
        assert n >= min_kernels, "expected at least %d kernel(s), got %d" % (min_kernels, n)
    return g


def check_traced_and_compiled(fn, make_call, seed_base, rtol=None, atol=None):
    """fn under dt.jit (default backend) against plain CPython on make_call(i) for two calls,
    without a graph break or fallback; then compiled by the cpu backend against eager."""
    dt.reset()
    run_differential(fn, jitted_copy(fn), make_call, 2, seed_base=seed_base)
    s = stats()
    assert s["graph_breaks"] == 0 and s["fallbacks"] == 0, s["break_reasons"]
    return check(fn, lambda i: make_call(i).args, calls=2, rtol=rtol, atol=atol)


def module_dir():
    """The directory holding dyntrace.so, for child interpreters."""
    if getattr(dt, "__file__", None):
        return os.path.dirname(os.path.abspath(dt.__file__))
    for root in (os.environ.get("TEST_SRCDIR", ""), os.environ.get("RUNFILES_DIR", ""), os.getcwd()):
        if root:
            hits = glob.glob(os.path.join(root, "**", "dyntrace.so"), recursive=True)
            if hits:
                return os.path.dirname(hits[0])
    raise AssertionError("dyntrace.so not found for a child interpreter")


def sanitizer_env():
    """Under --config=asan a plain interpreter can only load the instrumented module with the
    ASan runtime preloaded (and CPython's own leaks unreported)."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                if "libasan.so" in line:
                    return {"LD_PRELOAD": line.split()[-1], "ASAN_OPTIONS": "detect_leaks=0"}
    except OSError:
        pass
    return {}


def run_child(code, env_extra):
    """Runs `code` in a fresh interpreter importing the same dyntrace; returns (rc, out, err)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = module_dir()
    env.update(sanitizer_env())
    env.update(env_extra)
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout, p.stderr


def assert_cuda_kernels_compile(child_code):
    """Runs `child_code` (which prints "NVRTC <checked> <failures>" from dt.stats()) with every
    CUDA kernel it makes checked by NVRTC for sm_90: at least one checked, none rejected. Where
    NVRTC is missing, require_nvrtc decides (a loud skip, or a failure where it must exist)."""
    unavailable = dt._nvrtc_unavailable()
    if unavailable:
        require_nvrtc(unavailable)
    rc, out, err = run_child(child_code, {"DYNTRACE_NVRTC_CHECK": "sm_90"})
    assert rc == 0, out + err
    checked, failures = (int(v) for v in out.split("NVRTC")[1].split())
    assert checked > 0 and failures == 0, out + err
