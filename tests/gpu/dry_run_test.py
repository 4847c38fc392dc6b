"""tests/gpu/gpu_check.py without a GPU: --cpu-dry-run runs its whole correctness corpus and its
timing code with the cpu backend and must pass; a plain run where CUDA cannot load must exit 2
with a one-line reason, quickly.

    python3 tests/gpu/dry_run_test.py path/to/gpu_check.py path/to/dyntrace.so"""
import os
import subprocess
import sys
import tempfile
import time


def run(script, module_dir, cache, *args, **env_extra):
    env = dict(os.environ, PYTHONPATH=module_dir, DYNTRACE_CACHE_DIR=cache, **env_extra)
    start = time.monotonic()
    p = subprocess.run([sys.executable, script, *args], env=env, capture_output=True, text=True, timeout=480)
    return p.returncode, p.stdout + p.stderr, time.monotonic() - start


def main(script, module):
    module_dir = os.path.dirname(os.path.abspath(module))
    with tempfile.TemporaryDirectory(dir=os.environ.get("TEST_TMPDIR")) as tmp:
        cache = os.path.join(tmp, "cache")
        rc, out, seconds = run(script, module_dir, cache, DYNTRACE_LIBCUDA="/nonexistent/libcuda.so.1")
        lines = out.strip().splitlines()
        assert rc == 2 and len(lines) == 1 and lines[0].startswith("gpu_check: no GPU: "), (rc, out)
        assert "/nonexistent/libcuda.so.1" in out and seconds < 30, (seconds, out)
        rc, out, seconds = run(script, module_dir, cache, "--cpu-dry-run", "--log", os.path.join(tmp, "log"))
        print(out)
        assert rc == 0, "gpu_check --cpu-dry-run failed (rc %d)" % rc
        for expected in ("all correctness checks passed", "workload ", "chain of 25 reductions (", "graphs ", "gelu_bias", "layer_norm",
                         "gpt_mini losses:", "gpt_mini training step"):
            assert expected in out, expected
        assert out.count("  ok    ") >= 25, "fewer than 25 corpus functions ran"
        with open(os.path.join(tmp, "log")) as f:
            assert f.read().strip() == out.strip(), "--log must hold what was printed"
    print("dry_run_test: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
