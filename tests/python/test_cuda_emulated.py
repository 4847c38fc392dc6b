"""dyntrace's CUDA kernels run and checked without a GPU: tests/fake_cuda's stand-in NVRTC builds
every CUDA source dyntrace generates for the host, and the stand-in driver runs those kernels on
the host bytes behind its device memory, each CUDA thread a fiber that waits at __syncthreads and
warp shuffles. So results of the cuda backend (kernels, cuBLAS calls, CUDA-graph replays) are
compared with the CPU here, in a child interpreter with the stand-ins loaded."""
import glob
import os
import subprocess
import sys
import textwrap

from cpulib import module_dir, run_child
from test_cuda_runtime import fake_library


def emulator_env():
    return {"DYNTRACE_LIBCUDA": fake_library("libfake_cuda.so"),
            "DYNTRACE_LIBCUBLAS": fake_library("libfake_cublas.so"),
            "DYNTRACE_LIBNVRTC": fake_library("libfake_nvrtc.so"),
            "FAKE_CUDA_ACCEPT_MODULES": "1"}


def run_emulated(body):
    """Runs `body` in a child with the stand-ins loaded; `fresh_copy` (jitlib) is imported there,
    so the plain reference runs a function dt.jit never marked."""
    prelude = "import sys\nsys.path.insert(0, %r)\nimport dyntrace as dt\nfrom jitlib import fresh_copy\n" % (
        os.path.dirname(os.path.abspath(__file__)))
    rc, out, err = run_child(prelude + textwrap.dedent(body), emulator_env())
    assert rc == 0, "child failed (rc %d):\n%s\n%s" % (rc, out, err)
    return out


def gpu_check_script():
    candidates = []
    for root in (os.environ.get("TEST_SRCDIR", ""), os.environ.get("RUNFILES_DIR", "")):
        if root:
            candidates += glob.glob(os.path.join(root, "*", "tests", "gpu", "gpu_check.py"))
    candidates.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "gpu", "gpu_check.py"))
    for path in candidates:
        if os.path.exists(path):
            return os.path.abspath(path)
    raise AssertionError("tests/gpu/gpu_check.py not found")


def test_gpu_check_correctness_passes_on_the_emulated_device():
    # The GPU machine's own correctness checks: the compiled corpus (reductions, row kernels of
    # every path, attention, cuBLAS epilogues, graph breaks, CUDA-graph replays), eager ops on
    # the device, and the GPT-mini's whole training step as one CUDA graph against eager steps.
    env = dict(os.environ)
    env.update(emulator_env())
    env["PYTHONPATH"] = module_dir()
    p = subprocess.run([sys.executable, gpu_check_script(), "--emulated"], env=env, capture_output=True, text=True,
                       timeout=1500)
    assert p.returncode == 0 and "all correctness checks passed" in p.stdout, p.stdout[-6000:] + p.stderr[-3000:]
    assert "1 CUDA device(s) (emulated on the host)" in p.stdout, p.stdout[:2000]
    # The whole training step did replay as a graph (gpu_training's check), on emulated kernels.
    assert "gpt_mini compiled:" in p.stdout and "0 host ops" in p.stdout, p.stdout[-3000:]


def test_a_kernel_waiting_at_mismatched_barriers_fails_its_launch():
    # Half a warp at __syncthreads, the other half at a shuffle: a real GPU may hang; the
    # emulator fails the launch with CUDA_ERROR_LAUNCH_FAILED and says why on stderr. Threads
    # that finished don't hold a __syncthreads up (as on the GPU): `early_exit` runs.
    code = """
        import ctypes, os
        nvrtc = ctypes.CDLL(os.environ["DYNTRACE_LIBNVRTC"])
        cuda = ctypes.CDLL(os.environ["DYNTRACE_LIBCUDA"])
        source = (b'extern "C" __global__ void diverged() {\\n'
                  b'  if (threadIdx.x < 16) __syncthreads(); else __shfl_xor_sync(0xffffffffu, 1, 1);\\n}\\n'
                  b'extern "C" __global__ void early_exit() { if (threadIdx.x < 16) __syncthreads(); }\\n')
        program = ctypes.c_void_p()
        assert nvrtc.nvrtcCreateProgram(ctypes.byref(program), source, b"t.cu", 0, None, None) == 0
        assert nvrtc.nvrtcCompileProgram(program, 0, None) == 0
        size = ctypes.c_size_t()
        nvrtc.nvrtcGetCUBINSize(program, ctypes.byref(size))
        image = ctypes.create_string_buffer(size.value)
        nvrtc.nvrtcGetCUBIN(program, image)
        assert cuda.cuInit(0) == 0
        module, fn = ctypes.c_void_p(), ctypes.c_void_p()
        assert cuda.cuModuleLoadData(ctypes.byref(module), image) == 0
        args = ctypes.create_string_buffer(4096)  # a zeroed argument struct: no operands
        params = (ctypes.c_void_p * 1)(ctypes.cast(args, ctypes.c_void_p))
        results = {}
        for name in (b"early_exit", b"diverged"):
            assert cuda.cuModuleGetFunction(ctypes.byref(fn), module, name) == 0
            results[name] = cuda.cuLaunchKernel(fn, 2, 1, 1, 64, 1, 1, 0, None, params, None)
        print("RESULTS", results[b"early_exit"], results[b"diverged"])
    """
    rc, out, err = run_child(textwrap.dedent(code), emulator_env())
    assert rc == 0, out + err
    assert "RESULTS 0 719" in out, out + err
    assert "wait at different barriers" in err, err


def test_a_compile_error_reaches_the_user_as_nvrtc_reports_it():
    out = run_emulated("""
        import ctypes, os
        nvrtc = ctypes.CDLL(os.environ["DYNTRACE_LIBNVRTC"])
        program = ctypes.c_void_p()
        nvrtc.nvrtcCreateProgram(ctypes.byref(program), b"__global__ void k() { undeclared(); }", b"bad.cu", 0, None,
                                 None)
        print("RESULT", nvrtc.nvrtcCompileProgram(program, 0, None))
        size = ctypes.c_size_t()
        nvrtc.nvrtcGetProgramLogSize(program, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        nvrtc.nvrtcGetProgramLog(program, log)
        print("LOG", log.value.decode())
    """)
    assert "RESULT 6" in out and "bad.cu" in out and "undeclared" in out, out


def test_index_checks_inside_a_cuda_graph_see_this_calls_values():
    # An index the graph computes (idx + shift) holds stale bytes before a replay: its check is
    # captured into the graph and read after the launch. One the caller passes is checked before
    # the launch, as eager checks before the op. Either way the IndexError is eager's, and the
    # next good call's result is right again.
    out = run_emulated("""
        def computed(table, idx, shift):
            return table[idx + shift] * 2

        def passed(table, idx):
            return table[idx] * 2

        table = dt.randn(10, 3)
        idx = dt.tensor([0, 3, 9, 4])
        f = dt.jit(fresh_copy(computed), backend="cuda")
        g = dt.jit(fresh_copy(passed), backend="cuda")
        gtable, gidx = table.cuda(), idx.cuda()
        for shift in (0, -1, 0, -4, -2, 0):  # warm-up, capture, then replays (valid: -10 .. 0)
            want = computed(table, idx, dt.tensor(shift))
            got = f(gtable, gidx, dt.tensor(shift).cuda())
            assert got.cpu().tolist() == want.tolist(), shift
        bad = dt.tensor(3).cuda()  # 9 + 3 = 12
        try:
            f(gtable, gidx, bad)
            raise SystemExit("no IndexError for a computed index")
        except IndexError as e:
            print("COMPUTED", e)
        assert f(gtable, gidx, dt.tensor(-1).cuda()).cpu().tolist() == computed(table, idx, dt.tensor(-1)).tolist()
        for _ in range(3):
            assert g(gtable, gidx).cpu().tolist() == passed(table, idx).tolist()
        gidx.copy_(dt.tensor([0, 3, 11, 4]).cuda())
        try:
            g(gtable, gidx)
            raise SystemExit("no IndexError for a passed index")
        except IndexError as e:
            print("PASSED", e)
        s = dt.stats()
        print("GRAPHS", s["cuda_graph_captures"], s["cuda_graph_replays"], s["cuda_graph_refusals"])
    """)
    assert "COMPUTED index 12 is out of bounds for dimension 0 with size 10" in out, out
    assert "PASSED index 11 is out of bounds for dimension 0 with size 10" in out, out
    captures, replays, refusals = (int(v) for v in out.split("GRAPHS")[1].split())
    assert captures >= 2 and replays >= 6 and refusals == 0, out


def test_row_kernels_take_every_path_and_match_the_cpu():
    # Each path of a row kernel is its own function (jit/cuda_codegen.h) that the launcher picks:
    # rows of whole aligned vectors (vector), odd or misaligned rows (strided, within its
    # 512-thread launch bound even for a few long rows), rows past the register cache
    # (general), and a few very long rows (split). The stand-in driver refuses a launch beyond a
    # function's __launch_bounds__, so a wrong block size fails here too.
    out = run_emulated("""
        def norm_softmax(x, w, b):
            return dt.softmax(dt.layer_norm(x, (x.shape[-1],), w, b), -1)

        def row_sums(v):
            return v.sum(-1)

        u = 2.0 ** -24  # float32's unit roundoff
        worst = 0.0
        for rows, n, sliced in ((64, 768, False), (3, 4001, False), (64, 769, True), (2, 20000, False),
                                (1, 300000, False), (300, 33, False)):
            x = dt.randn(rows, n + 1 if sliced else n) * 3
            x = x[:, 1:] if sliced else x
            w, b = dt.randn(n), dt.randn(n)
            want = norm_softmax(x, w, b)
            f = dt.jit(fresh_copy(norm_softmax), backend="cuda")
            gx = dt.randn(rows, n + 1).cuda()[:, 1:] if sliced else None
            if sliced:
                gx.copy_(x.cuda())
            got = f(gx if sliced else x.cuda(), w.cuda(), b.cuda()).cpu()
            # Both sides run the same element functions and fold the mean and variance in float64,
            # in different orders: at most the float32 rounding of each of those two flips (a
            # relative 2u each), moving every layer-norm output z by <= 4u|z| and so each softmax
            # output s by <= s * 2 * 4u * max|z| (the shift of z_i less the weighted mean shift).
            z = dt.layer_norm(x, (n,), w, b)
            err = (got - want).abs().amax().item()
            worst = max(worst, err)
            assert err <= 8 * u * z.abs().amax().item() * want.abs().amax().item(), (rows, n, sliced, err)
            # float32 sums folded in float64 on both sides: the orders differ by at most n * 2^-53
            # sum|x|, then each rounds to float32 (u |sum| each).
            total = dt.jit(fresh_copy(row_sums), backend="cuda")(x.cuda()).cpu()
            bound = 2 * u * row_sums(x).abs() + n * 2.0 ** -53 * row_sums(x.abs())
            assert ((total - row_sums(x)).abs() <= bound).all(), (rows, n, sliced)
        print("WORST", worst)
    """)
    assert "WORST" in out, out
