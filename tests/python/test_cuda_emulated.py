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
from testlib import require_numpy
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




# The children's float64 references (tests/python/attnlib.py, beside this file).
ATTENTION_IMPORTS = "import math\nimport numpy as np\nfrom attnlib import attention_reference, attention_grads, check_attention\n"


def test_fused_attention_kernel_matches_float64_on_the_emulated_device():
    # scaled_dot_product_attention on CUDA tensors runs the fused kernel (one launch, counted)
    # for every element type, mask kind, causal or not, head dims that leave partial float4
    # chunks, broadcast and strided operands (heads split from [B, T, H, E] by a transpose), rows
    # whose every key is masked (NaN, as softmax gives), more keys than one tile holds, and each
    # block size the launcher picks.
    require_numpy()  # the reference (a loud skip under pyenv's interpreters, which lack it)
    out = run_emulated(ATTENTION_IMPORTS + textwrap.dedent("""
        F = dt.nn.functional
        rng = np.random.default_rng(7)
        cases = [  # batch dims, L, S, E, Ev, dtype, mask, strided
            ((2, 3), 37, 45, 64, 64, "float32", "keep", False),
            ((1, 2), 70, 70, 128, 128, "float32", "causal", False),
            ((2,), 9, 33, 16, 8, "float16", "add", False),
            ((1, 4), 65, 40, 80, 97, "bfloat16", "none", False),
            ((), 33, 31, 32, 32, "float32", "keep rows empty", False),
            ((2, 3), 20, 20, 24, 24, "float32", "causal", True),
            # Enough blocks for the launcher's larger blocks on the stand-in's 132 SMs: 128 threads
            # (128 rows of one thread each), then 64 (32 rows of two threads).
            ((12, 12), 200, 40, 16, 16, "float32", "keep", False),
            ((3, 4), 700, 40, 64, 64, "float32", "causal", False),
        ]
        for batch, L, S, E, Ev, dtype, mask, strided in cases:
            def make(rows, width):
                if strided:  # [B, T, H, E] -> [B, H, T, E]: batch strides and a row stride of H * E
                    x = rng.standard_normal((batch[0], rows, batch[1], width))
                    return dt.tensor(x.astype(np.float32)).to(getattr(dt, dtype)).cuda().transpose(1, 2)
                return dt.tensor(rng.standard_normal(batch + (rows, width)).astype(np.float32)).to(getattr(dt, dtype)).cuda()
            q, k, v = make(L, E), make(S, E), make(S, Ev)
            if len(batch) == 2 and not strided:
                k = k[:1].expand(*k.shape) if batch[0] == 2 else k  # a broadcast batch dim
            qn, kn, vn = (t.cpu().float().numpy() for t in (q, k, v))
            kwargs, ref = {}, {}
            if mask.startswith("keep"):
                keep = rng.random((L, S)) > 0.3
                if mask == "keep rows empty":
                    keep[::4] = False
                kwargs["attn_mask"], ref["keep"] = dt.tensor(keep).cuda(), keep
            elif mask == "add":
                add = dt.tensor(rng.standard_normal((L, S)).astype(np.float32)).to(getattr(dt, dtype))
                kwargs["attn_mask"], ref["add"] = add.cuda(), add.float().numpy()
            elif mask == "causal":
                kwargs["is_causal"], ref["causal"] = True, True
            before = dt.stats()["fused_attention_runs"]
            got = F.scaled_dot_product_attention(q, k, v, **kwargs)
            assert dt.stats()["fused_attention_runs"] == before + 1, (batch, L, S, E, dtype, mask)
            assert got.dtype == q.dtype and got.is_contiguous()
            want, tol = attention_reference(qn, kn, vn, 1 / math.sqrt(E), dtype, **ref)
            err = check_attention(got, want, tol, (batch, L, S, E, Ev, dtype, mask, strided))
            print("CASE", batch, L, S, E, Ev, dtype, mask, strided, "err %.2e" % err)
        assert dt.stats()["cuda_host_ops"] == 0, dt.stats()["cuda_host_ops_by_op"]
        # What the kernel does not take runs the unfused ops on the device: head dim 160.
        q, k, v = (dt.randn(2, 5, 160).cuda() for _ in range(3))
        before = dt.stats()["fused_attention_runs"]
        got = F.scaled_dot_product_attention(q, k, v)
        assert dt.stats()["fused_attention_runs"] == before
        want, tol = attention_reference(q.cpu().numpy(), k.cpu().numpy(), v.cpu().numpy(), 160 ** -0.5, "float32")
        check_attention(got, want, tol, "head dim 160, unfused")
        # Its gradient flows through the same formula as the kernel's (the weights recomputed).
        q.requires_grad_(True)
        F.scaled_dot_product_attention(q, k, v).sum().backward()
        assert dt.stats()["fused_attention_runs"] == before and q.grad is not None
        print("DONE")
    """))
    assert "DONE" in out and out.count("CASE") == 8, out


def test_attention_written_out_compiles_to_the_fused_kernel():
    # The forms people write (jit/attention_pattern.h) become one fused launch in a cuda graph;
    # chains the kernel must not take (scores returned too, a head dim of 160) stay unfused; and a
    # graph holding the fused kernel replays as a CUDA graph with fresh inputs every call.
    require_numpy()  # the reference (a loud skip under pyenv's interpreters, which lack it)
    out = run_emulated(ATTENTION_IMPORTS + textwrap.dedent("""
        def keep(q, k, v, m):
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
            return dt.softmax(dt.where(m, att, float("-inf")), -1) @ v

        def drop_then_scale(q, k, v, m):
            s = (q @ k.transpose(-2, -1)).masked_fill(m, float("-inf")) / 4.0
            return s.softmax(-1) @ v

        def where_drops(q, k, v, m):
            return dt.softmax(dt.where(m, float("-inf"), q @ k.mT * 0.3), dim=-1) @ v

        def additive(q, k, v, m):
            return dt.softmax((q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1]) + m, dim=-1) @ v

        def unmasked(q, k, v, m):
            return dt.softmax(q @ k.transpose(-1, -2) * 0.5, -1) @ v

        def scores_kept(q, k, v, m):
            s = q @ k.transpose(-2, -1)
            return dt.softmax(s, -1) @ v, s

        rng = np.random.default_rng(3)
        f32 = lambda *s: dt.tensor(rng.standard_normal(s).astype(np.float32))
        q, k, v = f32(2, 3, 40, 16), f32(2, 3, 50, 16), f32(2, 3, 50, 8)
        keep_mask = rng.random((40, 50)) > 0.25
        add_mask = rng.standard_normal((40, 50)).astype(np.float32)
        forms = [  # function, mask tensor, reference arguments, fused launches expected per call
            (keep, dt.tensor(keep_mask), dict(scale=0.25, keep=keep_mask), 1),
            (drop_then_scale, dt.tensor(~keep_mask), dict(scale=1.0, post=0.25, keep=keep_mask), 1),
            (where_drops, dt.tensor(~keep_mask), dict(scale=0.3, keep=keep_mask), 1),
            (additive, dt.tensor(add_mask), dict(scale=0.25, add=add_mask), 1),
            (unmasked, dt.tensor(keep_mask), dict(scale=0.5), 1),
            (scores_kept, dt.tensor(keep_mask), dict(scale=1.0), 0),
        ]
        for fn, m, ref, fused in forms:
            compiled = dt.jit(fresh_copy(fn), backend="cuda")
            dt.reset()
            got = compiled(q.cuda(), k.cuda(), v.cuda(), m.cuda())
            s = dt.stats()
            assert s["fused_attention_runs"] == fused, (fn.__name__, s["fused_attention_runs"])
            assert s["graph_breaks"] == 0 and s["cuda_host_ops"] == 0, (fn.__name__, s)
            if isinstance(got, tuple):
                # Two float32 dots of 16 products, summed in different orders: each within
                # 16u sum|q k| of the exact one.
                bound = 2 * 16 * 2.0 ** -24 * (q.abs() @ k.abs().transpose(-2, -1))
                assert ((got[1].cpu() - q @ k.transpose(-2, -1)).abs() <= bound).all(), fn.__name__
                got = got[0]
            want, tol = attention_reference(q.numpy(), k.numpy(), v.numpy(), out_dtype="float32", **ref)
            print("FORM", fn.__name__, "err %.2e" % check_attention(got, want, tol, fn.__name__))

        # Head dim 160: the kernel does not take it, the chain stays two GEMMs and a softmax.
        wq, wk, wv = f32(1, 6, 160), f32(1, 9, 160), f32(1, 9, 4)
        got = dt.jit(fresh_copy(unmasked), backend="cuda")(wq.cuda(), wk.cuda(), wv.cuda(), None)
        assert dt.stats()["fused_attention_runs"] == 0
        want, tol = attention_reference(wq.numpy(), wk.numpy(), wv.numpy(), 0.5, "float32")
        check_attention(got, want, tol, "head dim 160")

        # A GPT-style block: heads split by view/transpose, the result merged back and projected.
        # Two launches at least, so its calls replay one CUDA graph; fresh inputs every call.
        def block(x, w, mask):
            B, T, D = x.shape
            h = (x @ w).view(B, T, 3, 4, D // 4)
            q, k, v = h[:, :, 0].transpose(1, 2), h[:, :, 1].transpose(1, 2), h[:, :, 2].transpose(1, 2)
            att = dt.softmax(dt.where(mask, q @ k.transpose(-2, -1) * 0.25, float("-inf")), -1)
            return (att @ v).transpose(1, 2).reshape(B, T, D) + x

        compiled = dt.jit(fresh_copy(block), backend="cuda")
        causal = np.tril(np.ones((12, 12), bool))
        dt.reset()
        for call in range(4):
            x, w = f32(2, 12, 64), f32(64, 192) * 0.1
            got = compiled(x.cuda(), w.cuda(), dt.tensor(causal).cuda())
            # The projection as the device computes it (the same cuBLAS call as the graph's), so
            # the bound covers the attention and the residual add's one rounding alone.
            h = (x.cuda() @ w.cuda()).cpu().view(2, 12, 3, 4, 16).numpy().astype(np.float64)
            hq, hk, hv = (np.swapaxes(h[:, :, i], 1, 2) for i in range(3))
            want, tol = attention_reference(hq, hk, hv, 0.25, "float32", keep=causal)
            merged = np.swapaxes(want, 1, 2).reshape(2, 12, 64) + x.numpy()
            merged_tol = np.swapaxes(tol, 1, 2).reshape(2, 12, 64) + 2.0 ** -24 * np.abs(merged)
            check_attention(got, merged, merged_tol, ("block", call))
        s = dt.stats()
        assert s["fused_attention_runs"] >= 2 and s["cuda_graph_replays"] >= 2, s
        assert s["cuda_host_ops"] == 0, s["cuda_host_ops_by_op"]
        print("DONE")
    """))
    assert "DONE" in out and out.count("FORM") == 6, out


def test_attention_dropout_on_the_emulated_device():
    # scaled_dot_product_attention with dropout_p on CUDA tensors: one fused launch that drops
    # what F.dropout drops from the same seed (its Philox draw of the weights' shape) and scales
    # the rest by 1 / (1 - p), for each element type; gradients eager and compiled (the
    # recomputed weights under the same keep mask); and attention written out with F.dropout of
    # the weights, compiled by the cuda backend, is one fused launch too. Against float64 numpy.
    require_numpy()
    out = run_emulated(ATTENTION_IMPORTS + textwrap.dedent("""
        F = dt.nn.functional
        rng = np.random.default_rng(13)
        f32 = lambda *s: dt.tensor(rng.standard_normal(s).astype(np.float32))

        def keeps(seed, shape, p, dtype):
            dt.manual_seed(seed)
            return (F.dropout(dt.ones(*shape, dtype=dtype).cuda(), p) != 0).cpu().numpy()

        p = 0.3
        for seed, (dtype, batch, L, S, E, causal) in enumerate([("float32", (2, 3), 37, 45, 64, True),
                                                               ("float16", (2,), 20, 70, 32, False),
                                                               ("bfloat16", (1, 2), 33, 33, 128, True)]):
            q, k, v = (f32(*batch, n, E).to(getattr(dt, dtype)).cuda() for n in (L, S, S))
            drop = keeps(seed, batch + (L, S), p, getattr(dt, dtype))
            dt.manual_seed(seed)
            before = dt.stats()["fused_attention_runs"]
            got = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=causal)
            assert dt.stats()["fused_attention_runs"] == before + 1, dtype
            qn, kn, vn = (t.cpu().float().numpy() for t in (q, k, v))
            want, tol = attention_reference(qn, kn, vn, 1 / math.sqrt(E), dtype, causal=causal, drop=drop,
                                            drop_scale=1 / (1 - p))
            print("FORWARD", dtype, "err %.2e" % check_attention(got, want, tol, dtype))
        assert dt.stats()["cuda_host_ops"] == 0, dt.stats()["cuda_host_ops_by_op"]

        def loss_of(q, k, v, w):
            return (F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True) * w).sum()

        q, k, v, w = f32(2, 2, 30, 16), f32(2, 2, 30, 16), f32(2, 2, 30, 8), f32(2, 2, 30, 8)
        drop = keeps(40, (2, 2, 30, 30), p, dt.float32)
        grads = attention_grads(q.numpy(), k.numpy(), v.numpy(), w.numpy(), 0.25, causal=True, drop=drop,
                                drop_scale=1 / (1 - p))
        for compiled in (False, True, True):
            fn = dt.jit(fresh_copy(loss_of), backend="cuda") if compiled else loss_of
            leaves = [t.cuda().requires_grad_(True) for t in (q, k, v)]
            dt.manual_seed(40)
            fn(*leaves, w.cuda()).backward()
            for leaf, (want, tol), name in zip(leaves, grads, "qkv"):
                err = np.abs(leaf.grad.cpu().numpy().astype(np.float64) - want)
                assert (err <= tol + 1e-30).all(), (compiled, name, err.max())
            print("GRADS", compiled)

        def written_out(q, k, v):
            att = dt.softmax(q @ k.transpose(-2, -1) * 0.25, -1)
            return F.dropout(att, p) @ v

        def written_by_hand(q, k, v):  # dropout's decomposition, as a user might write it
            att = dt.softmax(q @ k.transpose(-2, -1) * 0.25, -1)
            keep = dt.rand(*att.shape, device=att.device) >= p  # reads att's shape, not its values
            return ((att * keep) * (1 / (1 - p))) @ v

        q, k, v = f32(2, 3, 24, 16).cuda(), f32(2, 3, 40, 16).cuda(), f32(2, 3, 40, 8).cuda()
        drop = keeps(50, (2, 3, 24, 40), p, dt.float32)
        want, tol = attention_reference(*(t.cpu().numpy() for t in (q, k, v)), 0.25, "float32", drop=drop,
                                        drop_scale=1 / (1 - p))
        for fn in (written_out, written_by_hand):
            compiled = dt.jit(fresh_copy(fn), backend="cuda")
            dt.reset()
            for call in range(4):  # the third and fourth calls replay a CUDA graph
                dt.manual_seed(50)
                got = compiled(q, k, v)
                print("WRITTEN", fn.__name__, call, "err %.2e" % check_attention(got, want, tol, (fn.__name__, call)))
            s = dt.stats()
            assert s["fused_attention_runs"] >= 2 and s["graph_breaks"] == 0 and s["cuda_graph_replays"] >= 1, s
            assert s["cuda_host_ops"] == 0, s["cuda_host_ops_by_op"]
        print("DONE")
    """))
    assert "DONE" in out and out.count("FORWARD") == 3 and out.count("GRADS") == 3 and out.count("WRITTEN") == 8, out

def test_dependent_full_reductions_of_a_small_tensor_are_one_kernel():
    # x * rsqrt(mean(x * x)) repeated: each reduction feeds the next step. On a small tensor
    # (at most 2^16 elements, static sizes) the chain is one kernel run by one block; on a larger
    # one every reduction keeps its own (split) launches, which use the whole device.
    out = run_emulated("""
        def chain(x):
            for _ in range(25):
                s = (x * x).mean()
                x = x * (s + 1e-3).rsqrt() + 0.01
            return x

        u = 2.0 ** -24
        for n, most in ((1024, 1), (1 << 16, 1), ((1 << 16) + 1, 60)):
            f = dt.jit(fresh_copy(chain), backend="cuda", cuda_graphs=False)
            x = dt.randn(n)
            f(x.cuda())
            before = dt.stats()["cuda_kernel_launches"]
            got = f(x.cuda()).cpu()
            launches = dt.stats()["cuda_kernel_launches"] - before
            assert (launches == 1) if most == 1 else (launches > 25), (n, launches)
            # Both sides fold each mean in float64, in different orders: its float32 rounding may
            # differ (2u relative), moving that step's scale by <= 2u; 25 steps add up to <= 50u
            # of the values' size, plus each side's own last roundings.
            want = chain(x)
            assert (got - want).abs().amax().item() <= 60 * u * want.abs().amax().item(), n
            print("N", n, launches)
    """)
    assert out.count("N ") == 3, out




def test_attention_gradients_on_the_device_run_the_fused_forward():
    # scaled_dot_product_attention under autograd on CUDA: the forward is the fused kernel, the
    # backward recomputes the weights with the unfused ops (`_fused_attention`'s formula). Eagerly
    # and compiled (the joint graph keeps `_fused_attention` whole), against float64 numpy.
    require_numpy()
    out = run_emulated(ATTENTION_IMPORTS + textwrap.dedent("""
        F = dt.nn.functional
        rng = np.random.default_rng(11)
        f32 = lambda *s: dt.tensor(rng.standard_normal(s).astype(np.float32))

        def loss_of(q, k, v, w, mask=None, causal=False):
            return (F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal) * w).sum()

        cases = [((2, 3), 37, 45, 64, 64, "keep"), ((1, 2), 40, 40, 32, 16, "causal"), ((2, 2), 20, 33, 16, 16, "add")]
        for compiled in (False, True):
            for batch, L, S, E, Ev, mask_kind in cases:
                q, k, v, w = f32(*batch, L, E), f32(*batch, S, E), f32(*batch, S, Ev), f32(*batch, L, Ev)
                leaves = [t.cuda().requires_grad_(True) for t in (q, k, v)]
                kwargs, ref = {}, {}
                if mask_kind == "keep":
                    keep = rng.random((L, S)) > 0.3
                    kwargs["mask"], ref["keep"] = dt.tensor(keep).cuda(), keep
                elif mask_kind == "add":
                    add = f32(L, S)
                    kwargs["mask"] = add.cuda().requires_grad_(True)
                    leaves.append(kwargs["mask"])
                    ref["add"] = add.numpy()
                else:
                    kwargs["causal"], ref["causal"] = True, True
                fn = dt.jit(fresh_copy(loss_of), backend="cuda") if compiled else loss_of
                before = dt.stats()["fused_attention_runs"]
                fn(leaves[0], leaves[1], leaves[2], w.cuda(), **kwargs).backward()
                assert dt.stats()["fused_attention_runs"] > before, (compiled, mask_kind)
                grads = attention_grads(q.numpy(), k.numpy(), v.numpy(), w.numpy(), 1 / math.sqrt(E), **ref)
                for leaf, (want, tol), name in zip(leaves, grads, "qkvm"):
                    if name == "m":  # the additive mask's gradient: dS summed over the batch dims
                        want, tol = want.sum(axis=(0, 1)), tol.sum(axis=(0, 1))
                    got = leaf.grad.cpu().numpy().astype(np.float64)
                    err = np.abs(got - want)
                    assert (err <= tol + 1e-30).all(), (compiled, mask_kind, name, err.max(), tol.flat[err.argmax()])
                print("GRADS", compiled, mask_kind)
        print("DONE")
    """))
    assert "DONE" in out and out.count("GRADS") == 6, out


def test_autocast_on_the_emulated_device():
    # CUDA's lists: linear, matmul and attention in float16 (CUDA's default), softmax, layer_norm,
    # exp/log/pow and the losses in float32; a model's forward compiled by the cuda backend inside
    # the region gives eager's values (the same casts), with no op through host memory.
    out = run_emulated("""
        F = dt.nn.functional
        dt.manual_seed(3)
        model = dt.nn.Sequential(dt.nn.Linear(16, 32), dt.nn.LayerNorm(32), dt.nn.GELU(), dt.nn.Linear(32, 4)).cuda()
        x, y = dt.randn(8, 16).cuda(), dt.randint(0, 4, (8,)).cuda()
        with dt.autocast("cuda"):
            h = model[0](x)
            n = model[1](h)
            p = dt.softmax(h, -1)
            e = h.exp()
            q = (h @ h.T) ** 2
            loss = F.cross_entropy(model(x), y)
        assert (h.dtype, n.dtype, p.dtype, e.dtype, q.dtype, loss.dtype) == (
            dt.float16, dt.float32, dt.float32, dt.float32, dt.float32, dt.float32), (h.dtype, n.dtype, p.dtype)
        want = F.linear(x.half(), model[0].weight.half(), model[0].bias.half())
        assert (h.float() - want.float()).abs().max().item() == 0.0
        loss.backward()
        assert all(p.grad.dtype == dt.float32 for p in model.parameters())
        compiled = dt.jit(lambda m, x, y: F.cross_entropy(m(x), y), backend="cuda")
        # The graph makes the same cuBLAS calls and stores float16 at the same places as the eager
        # ops (each linear's product by cuBLAS, then its bias add; layer_norm, GELU and the loss in
        # float32 under CUDA autocast), and the emulated kernels run the same element functions:
        # the compiled loss is eager's bit for bit.
        with dt.autocast("cuda"):
            for _ in range(3):
                got = compiled(model, x, y)
                eager = F.cross_entropy(model(x), y)
                assert got.item() == eager.item(), (got.item(), eager.item())
        s = dt.stats()
        assert s["graph_breaks"] == 0 and s["cuda_host_ops"] == 0, (s["break_reasons"], s["cuda_host_ops_by_op"])
        print("DONE")
    """)
    assert "DONE" in out, out


def test_convolution_gradients_on_the_emulated_device():
    # conv2d's input gradient is _col2im on the device (a zeroed padded buffer, one strided add
    # per kernel offset, a gather of the interior), max pooling's through the same op: no host
    # op, and the gradients equal the CPU's up to float32 sums taken in another order: n terms of
    # size at most M differ by at most n * 2^-24 * n * M. An input gradient sums C_out * kh * kw
    # = 24 products of O(10) (24 * 2^-24 * 240 < 4e-4); a weight gradient N * OH * OW = 80
    # products of O(30) (80 * 2^-24 * 2400 < 1.2e-2).
    run_emulated("""
        import dyntrace.nn.functional as F
        dt.manual_seed(0)
        x, w = dt.randn(2, 3, 9, 8), dt.randn(4, 3, 3, 2)

        def grads(x, w):
            x, w = x.clone().requires_grad_(), w.clone().requires_grad_()
            y = F.max_pool2d(F.conv2d(x, w, stride=(2, 1), padding=1, dilation=(1, 2)), 2)
            (y * y).sum().backward()
            return x.grad, w.grad

        before = dt.stats()["cuda_host_ops"]
        on_device = grads(x.cuda(), w.cuda())
        assert dt.stats()["cuda_host_ops"] == before, dt.stats()["cuda_host_ops_by_op"]
        for got, want, bound in zip(on_device, grads(x, w), (4e-4, 1.2e-2)):
            got, want = got.cpu().flatten().tolist(), want.flatten().tolist()
            assert max(abs(a - b) for a, b in zip(got, want)) <= bound
    """)
