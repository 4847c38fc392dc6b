"""CUDA tensors: copies, the caching device allocator, eager ops through host mirrors, and the
errors of a missing or failing driver. Without a GPU these run against tests/fake_cuda, a
stand-in driver whose device memory the host cannot dereference (a host read of a device
pointer faults), loaded in a child interpreter through DYNTRACE_LIBCUDA."""
import glob
import os
import textwrap

import dyntrace as dt
from cpulib import module_dir, run_child
from testlib import require_nvrtc, skip


def fake_library(name):
    """A tests/fake_cuda library: in the test's runfiles under Bazel, else beside the module."""
    candidates = []
    for root in (os.environ.get("TEST_SRCDIR", ""), os.environ.get("RUNFILES_DIR", "")):
        if root:
            candidates += glob.glob(os.path.join(root, "*", "tests", "fake_cuda", name))
    candidates.append(os.path.join(module_dir(), "tests", "fake_cuda", name))
    for path in candidates:
        if os.path.exists(path):
            return os.path.abspath(path)
    skip("the fake CUDA library %s (bazel build //tests/fake_cuda:all) was not found" % name)


def fake_driver():
    return fake_library("libfake_cuda.so")


# Children compare with this: BLAS may sum in another order for differently aligned buffers.
CLOSE = """
def close(a, b):
    fa = a.flatten().tolist() if a.ndim else [a.item()]
    fb = b.flatten().tolist() if b.ndim else [b.item()]
    return len(fa) == len(fb) and all(x == y or abs(x - y) <= 1e-5 * (1 + abs(y)) for x, y in zip(fa, fb))
"""


def run_with_fake_driver(body, **env):
    code = "import dyntrace as dt\n" + CLOSE + textwrap.dedent(body)
    extra = {"DYNTRACE_LIBCUDA": fake_driver(), "DYNTRACE_LIBCUBLAS": fake_library("libfake_cublas.so")}
    extra.update(env)
    rc, out, err = run_child(code, extra)
    assert rc == 0, "child failed (rc %d):\n%s\n%s" % (rc, out, err)
    return out


NEEDS_NVRTC = """
unavailable = dt._nvrtc_unavailable()
if unavailable:
    print("SKIP-NVRTC", unavailable)
    raise SystemExit(0)
"""


def run_compiled_with_fake_driver(body, **env):
    """run_with_fake_driver for code that compiles CUDA kernels: without NVRTC the child stops
    at once, and the test skips, or fails where NVRTC is required."""
    out = run_with_fake_driver(NEEDS_NVRTC + textwrap.dedent(body), **env)
    if "SKIP-NVRTC" in out:
        require_nvrtc(out.strip())
    return out


def test_copies_round_trip_every_dtype_and_layout():
    run_with_fake_driver("""
        for dtype in (dt.bool, dt.int32, dt.int64, dt.float16, dt.float32, dt.float64):
            x = (dt.randn(5, 7) * 4).to(dtype)
            for view in (x, x.T, x[1:4, ::2], x.expand(2, 5, 7), x[:, 3]):
                g = view.cuda()
                assert g.is_cuda and g.device == dt.device("cuda:0") and g.dtype == dtype
                assert g.shape == view.shape
                assert g.cpu().tolist() == view.tolist(), (dtype, view.shape)
                assert g.to("cpu").tolist() == view.tolist()
                assert g.tolist() == view.tolist()
        # A large copy goes through the pinned staging buffers in several chunks.
        big = dt.randn(3, 1_500_001)
        assert big.cuda().cpu().tolist() == big.tolist()
        # to(device, dtype) converts too; to() on the same device returns the tensor itself.
        h = dt.arange(6).to("cuda", dt.float64)
        assert h.dtype == dt.float64 and h.cpu().tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
        assert h.to("cuda:0") is h and h.cuda() is h
    """)


def test_eager_ops_on_cuda_tensors_match_the_cpu():
    run_with_fake_driver("""
        dt.manual_seed(3)
        x, y, b = dt.randn(6, 9), dt.randn(6, 9), dt.randn(9)
        w = dt.randn(9, 4)
        gx, gy, gb, gw = x.cuda(), y.cuda(), b.cuda(), w.cuda()
        cases = [
            lambda a, c, d, m: a * c + d,
            lambda a, c, d, m: dt.softmax(a, -1),
            lambda a, c, d, m: dt.layer_norm(a, (9,)),
            lambda a, c, d, m: (a @ m).relu(),
            lambda a, c, d, m: a.sum(dim=0),
            lambda a, c, d, m: dt.where(a > c, a, c).T.contiguous(),
            lambda a, c, d, m: dt.cat([a, c], dim=1)[:, ::3],
            lambda a, c, d, m: (a > 0).sum(),
        ]
        for i, fn in enumerate(cases):
            got, want = fn(gx, gy, gb, gw), fn(x, y, b, w)
            assert got.is_cuda, i
            assert got.dtype == want.dtype and got.shape == want.shape and got.stride() == want.stride(), i
            assert close(got, want), i
        # Views share device memory: writing through one shows in the other.
        v = gx[2]
        v.fill_(0.5) if hasattr(v, "fill_") else v.__setitem__(slice(None), 0.5)
        assert gx[2].tolist() == [0.5] * 9
        gx[0, 1:3] = 9.0
        gx += 1
        x[2] = 0.5
        x[0, 1:3] = 9.0
        x += 1
        assert gx.tolist() == x.tolist()
        assert float(gx.sum()) == float(x.sum()) and gx[0, 1].item() == 10.0
        z = dt.zeros(2, 3, device="cuda")
        assert z.is_cuda and z.tolist() == [[0.0] * 3] * 2
        # Device-to-device copies: same layout in one block, others through the host; clones keep
        # a dense layout's strides.
        d = dt.empty(6, 9, device="cuda")
        d[...] = gx
        assert d.tolist() == gx.tolist()
        d[1:3] = gx.T[:, 3:5].T
        want = x.clone()
        want[1:3] = x.T[:, 3:5].T
        assert d.tolist() == want.tolist()
        t = gx.T.clone()
        assert t.stride() == gx.T.stride() and t.tolist() == x.T.tolist()
        assert gx[:, ::2].clone().tolist() == x[:, ::2].tolist()
        assert "device='cuda:0'" in repr(gx)
    """)


def test_jit_over_cuda_tensors_matches_eager():
    out = run_with_fake_driver("""
        def f(a, b):
            h = dt.tanh(a @ b.T) * 0.5
            if h.sum() > 0:
                return h + 1
            return h - 1
        # The reference is plain CPython on an unmarked copy: dt.jit marks f's own code object.
        import types
        plain = types.FunctionType(f.__code__.replace(), f.__globals__, "plain_f")
        g = dt.jit(f)
        for n in (4, 7):
            a, b = dt.randn(n, 5), dt.randn(n, 5)
            got = g(a.cuda(), b.cuda())
            assert got.is_cuda and close(got, plain(a, b))
        # The cuda backend compiled the graphs with NVRTC; the fake driver refuses to load the
        # module, so they ran eagerly, with the reason recorded. Where NVRTC is installed every
        # failure must be that refusal, after CUBINs were built: an NVRTC rejection fails here.
        reasons = dt.stats()["compile_failures"]
        assert reasons and all("cuda backend could not compile" in r for r in reasons), reasons
        unavailable = dt._nvrtc_unavailable()
        if unavailable:
            assert all("NVRTC" in r for r in reasons), reasons
            print("SKIP-NVRTC", unavailable)
        else:
            assert all("cuModuleLoadData" in r for r in reasons), reasons
            s = dt.stats()
            assert s["cubins_compiled"] + s["cubins_cached"] >= 1 and s["nvrtc_seconds"] >= 0, s
        # CPU inputs after CUDA ones: the device guard fails and the CPU version is traced.
        a = dt.randn(3, 5)
        assert not g(a, a).is_cuda
    """)
    if "SKIP-NVRTC" in out:
        require_nvrtc(out.strip())


def test_matmul_on_cuda_goes_through_cublas_with_every_layout():
    # The fake cuBLAS computes what real cuBLAS would from the arguments dyntrace passes, on the
    # fake device memory; a wrong transpose flag, leading dimension or batch stride shows here.
    run_with_fake_driver("""
        dt.manual_seed(11)
        a, b = dt.randn(4, 3, 5), dt.randn(4, 5, 6)
        w, v = dt.randn(5, 6), dt.randn(5)
        wide = dt.randn(6, 10)
        cases = [
            lambda a, b, w, v, wide: a @ b,                       # batched, contiguous
            lambda a, b, w, v, wide: a @ w,                       # broadcast weight (batch stride 0)
            lambda a, b, w, v, wide: a.transpose(1, 2).transpose(1, 2) @ b.transpose(1, 2).transpose(1, 2),
            lambda a, b, w, v, wide: b.transpose(1, 2) @ a.transpose(1, 2),  # both transposed
            lambda a, b, w, v, wide: a[0] @ v,                    # matrix @ vector
            lambda a, b, w, v, wide: v @ w,                       # vector @ matrix
            lambda a, b, w, v, wide: dt.dot(v, v),
            lambda a, b, w, v, wide: wide[:, ::2].T @ wide[:, 1::2],  # strided columns: copied first
            lambda a, b, w, v, wide: dt.mm(w.T, wide[:, :5].T),
            lambda a, b, w, v, wide: dt.bmm(a, b)[:, 1:],
            lambda a, b, w, v, wide: a[:, :, :0] @ b[:, :0, :],   # k == 0: zeros
        ]
        args = (a, b, w, v, wide)
        gargs = tuple(t.cuda() for t in args)
        for i, fn in enumerate(cases):
            got, want = fn(*gargs), fn(*args)
            assert got.is_cuda, i
            assert got.shape == want.shape and got.dtype == want.dtype, (i, got.shape, want.shape)
            assert close(got, want), (i, got.cpu().tolist(), want.tolist())
        d = dt.randn(7, 3, dtype=dt.float64)
        assert close((d.cuda() @ d.T.cuda()), d @ d.T)
        # float16 operands accumulate in float32 (CUBLAS_COMPUTE_32F), as the CPU loops do; the
        # result is rounded once to float16 (a relative error of 2^-11 either way, so 2e-3).
        h, hw = dt.randn(4, 3, 5).to(dt.float16), dt.randn(5, 6).to(dt.float16)
        got, want = (h.cuda() @ hw.cuda()).cpu().float(), (h @ hw).float()
        assert got.shape == want.shape
        assert all(abs(x - y) <= 2e-3 * (1 + abs(y)) for x, y in zip(got.flatten().tolist(), want.flatten().tolist()))
        # Integer matmul has no cuBLAS kernel: exact, through host mirrors.
        i = dt.arange(12).reshape(3, 4) - 5
        assert (i.cuda() @ i.T.cuda()).tolist() == (i @ i.T).tolist()
        # A missing cuBLAS is a clear error, never a wrong result.
    """)
    rc, out, err = run_child("import dyntrace as dt\nx = dt.randn(2, 2).cuda()\nx @ x",
                             {"DYNTRACE_LIBCUDA": fake_driver(), "DYNTRACE_LIBCUBLAS": "/nonexistent/libcublas.so"})
    assert rc != 0 and "cuBLAS could not be loaded" in err and "/nonexistent" in err, err


def test_cuda_graph_capture_patch_and_replay():
    # FAKE_CUDA_ACCEPT_MODULES makes the fake driver accept modules and record launches without
    # running them (values are garbage and not read): what is checked is the mechanics, against
    # the driver's own counts. The fake fails any allocation or synchronisation during a capture.
    run_with_fake_driver("""
        import ctypes, os
        drv = ctypes.CDLL(os.environ["DYNTRACE_LIBCUDA"])
        count = lambda name: getattr(drv, name)()
        def f(x, b):
            y = dt.tanh(x * 2.0 + b)
            return y / (y.sum(dim=0) + 100.0)  # a column reduction, then a kernel reading it
        def stats():
            s = dt.stats()
            return (s["cuda_graph_captures"], s["cuda_graph_replays"], s["cuda_graph_refusals"])
        g = dt.jit(f, backend="cuda")
        x, b = dt.randn(64, 33).cuda(), dt.randn(33).cuda()
        dt.reset()
        g(x, b)                                   # warm-up: launched directly
        assert stats() == (0, 0, 0), stats()
        direct = count("fakeCudaLaunches")
        assert direct >= 2, direct
        assert dt.stats()["cuda_kernel_launches"] == direct
        g(x, b)                                   # captured, then launched as one graph
        assert stats() == (1, 1, 0), (stats(), dt.stats()["compile_failures"])
        assert count("fakeCudaCaptures") == 1 and count("fakeCudaGraphLaunches") == 1
        assert count("fakeCudaLaunches") == direct, "the capturing call launched kernels directly"
        allocations = count("fakeCudaAllocations")
        for _ in range(20):                       # outputs dropped: same buffers, nothing patched
            g(x, b)
        assert count("fakeCudaAllocations") == allocations
        assert count("fakeCudaGraphLaunches") == 21 and count("fakeCudaLaunches") == direct
        assert dt.stats()["cuda_kernel_launches"] == direct, "replays launch no kernel one by one"
        # Outputs the caller holds are never handed out again: each replay writes a fresh buffer,
        # and the kernel writing it is re-pointed (patched), not copied.
        updates = count("fakeCudaNodeUpdates")
        held = [g(x, b) for _ in range(5)]
        assert len({t.data_ptr() for t in held}) == 5
        assert count("fakeCudaNodeUpdates") > updates
        assert dt.stats()["cuda_graph_patches"] == count("fakeCudaNodeUpdates")
        # New input addresses are patched in too; no new capture.
        x2 = x.clone()
        assert x2.data_ptr() != x.data_ptr()
        before = count("fakeCudaNodeUpdates")
        g(x2, b)
        assert count("fakeCudaNodeUpdates") > before and stats()[0] == 1
        # A new shape set gets its own warm-up and graph.
        y = dt.randn(8, 33).cuda()
        g(y, b); g(y, b); g(y, b)
        assert stats()[0] == 2 and count("fakeCudaCaptures") == 2
        # cuda_graphs=False never captures; a one-kernel program under "auto" is not worth one.
        dt.reset()
        off = dt.jit(f, backend="cuda", cuda_graphs=False)
        one = dt.jit(lambda x: x * 3.0 + 1.0, backend="cuda")
        forced = dt.jit(lambda x: x * 5.0 - 1.0, backend="cuda", cuda_graphs=True)
        for _ in range(3):
            off(x, b); one(x); forced(x)
        assert stats() == (1, 2, 0), stats()
        # Matmul inside a graph: captured with its cuBLAS call, which can't be re-pointed. An input
        # it reads that moves (a new batch) is copied into a buffer the graph owns from then on:
        # one recompile and warm-up, one capture, then replays that patch the copy's source.
        dt.reset()
        w = dt.randn(33, 16).cuda()
        mlp = dt.jit(lambda x, w: dt.relu(x @ w + 1.0) * 2.0, backend="cuda")
        for _ in range(3):
            mlp(x, w)
        assert stats() == (1, 2, 0), stats()
        mlp(x2, w)
        assert stats() == (1, 2, 0), stats()
        for m in [x.clone() for _ in range(4)]:
            mlp(m, w)
        assert stats() == (2, 6, 0), stats()
        # The matmul's own result returned: a copy into a fresh buffer each call, so results the
        # caller holds stay distinct.
        dt.reset()
        gemm = dt.jit(lambda x, w: (x * 2.0) @ w, backend="cuda")
        held = [gemm(x, w) for _ in range(5)]
        assert stats() == (1, 4, 0), stats()
        assert len({t.data_ptr() for t in held}) == 5
        # Random numbers come from the device generator (Philox counters): a captured draw reads
        # its counter base from device memory that the graph itself advances, so replays draw
        # new numbers, with nothing drawn on the host.
        dt.reset()
        noisy = dt.jit(lambda x: dt.relu(x * 2.0) * dt.rand_like(x) + dt.randn(33, device="cuda"), backend="cuda")
        for _ in range(3):
            noisy(x)
        assert stats() == (1, 2, 0), stats()
        assert dt.stats()["cuda_host_ops"] == 0, dt.stats()["cuda_host_ops_by_op"]
        # An operand that moves on every call and can't be staged (the program writes it in
        # place): after 3 recaptures the shape set stops using a graph.
        dt.reset()
        def update(x, w):
            y = dt.relu(x @ w + 1.0)
            x.mul_(0.5)
            return y
        upd = dt.jit(update, backend="cuda")
        for m in [x.clone() for _ in range(6)]:
            upd(m, w)
        assert stats() == (4, 4, 1), stats()
    """, FAKE_CUDA_ACCEPT_MODULES="1")
    # A capture that fails leaves the shape set running without a graph, counted and correct.
    run_with_fake_driver("""
        g = dt.jit(lambda x: dt.tanh(x * 2.0).sum(dim=-1), backend="cuda", cuda_graphs=True)
        x = dt.randn(5, 7).cuda()
        for _ in range(4):
            g(x)
        s = dt.stats()
        assert s["cuda_graph_refusals"] == 1 and s["cuda_graph_captures"] == 0, s
    """, FAKE_CUDA_ACCEPT_MODULES="1", FAKE_CUDA_CAPTURE_FAILS="1")


def test_caching_allocator_reuses_blocks():
    out = run_with_fake_driver("""
        x = dt.randn(256, 256).cuda()
        for _ in range(3):
            y = x * 2.0 + 1.0
            del y
        before = dt.cuda.memory_stats()
        for _ in range(50):
            y = x * 2.0 + 1.0
            del y
        after = dt.cuda.memory_stats()
        assert after["driver_allocations"] == before["driver_allocations"], (before, after)
        assert after["cache_hits"] >= before["cache_hits"] + 50
        dt.cuda.empty_cache()
        assert dt.cuda.memory_stats()["bytes_cached"] == 0
        dt.cuda.synchronize()
        print("ok")
    """)
    assert "ok" in out


def test_device_errors_are_clear():
    run_with_fake_driver("""
        x = dt.randn(3).cuda()
        def raises(kind, fn, *words):
            try:
                fn()
            except kind as e:
                for w in words:
                    assert w in str(e), (w, str(e))
                return
            raise AssertionError("no %s" % kind.__name__)
        raises(RuntimeError, lambda: x + dt.randn(3), "same device", "cuda:0", "cpu")
        raises(TypeError, lambda: x.numpy(), "cpu()")
        raises(ValueError, lambda: dt.randn(2).to("cuda:3"), "cuda:3", "1 CUDA devices")
        raises(ValueError, lambda: dt.randn(2).cuda(5), "cuda:5")
        # Out of device memory is an error naming the size, never a crash.
        raises(RuntimeError, lambda: dt.randn(1000, 1000).cuda(), "CUDA out of memory", "4000000 bytes")
    """, FAKE_CUDA_MEMORY_BYTES="1000000")
    rc, out, err = run_child("import dyntrace as dt\nprint(dt.cuda.is_available())\n"
                             "dt.randn(2).cuda()", {"DYNTRACE_LIBCUDA": "/nonexistent/libcuda.so.1"})
    assert rc != 0 and "False" in out and "CUDA is not available" in err and "/nonexistent" in err, err
    rc, out, err = run_child("import dyntrace as dt\nprint(dt.cuda.is_available())\ndt.zeros(2, device='cuda')",
                             {"DYNTRACE_LIBCUDA": fake_driver(), "FAKE_CUDA_DEVICES": "0"})
    assert rc != 0 and "False" in out and "no CUDA-capable device" in err, err


def test_real_gpu_when_present():
    if not dt.cuda.is_available():
        skip("no CUDA GPU on this machine: the fake-driver tests above cover the runtime; "
             "tests/gpu/ runs on a GPU")
    x = dt.randn(100, 33)
    g = x.cuda()
    assert g.cpu().tolist() == x.tolist()
    assert (g * 2).cpu().tolist() == (x * 2).tolist()


# Ops that draw from the device generator (Philox counters, runtime/random.h).
DEVICE_GENERATED = {"rand", "rand_like", "randn", "randn_like"}

EAGER_OPS_ON_DEVICE = """
    import os
    unavailable = dt._nvrtc_unavailable()
    if unavailable:
        print("SKIP-NVRTC", unavailable)
        raise SystemExit(0)
    drv_launches = lambda: dt.stats()["cuda_kernel_launches"]
    x, y = dt.randn(6, 5).cuda(), dt.randn(6, 5).cuda()
    pos = dt.rand(6, 5).cuda() + 0.5
    m = dt.randn(5, 4).cuda()
    b = x > 0
    i = (x * 3).to(dt.int32)
    dt.reset()
    calls = {
        "unary": lambda: [getattr(dt, n)(pos) for n in ("neg", "abs", "exp", "exp2", "log", "log2", "log1p",
                          "expm1", "sqrt", "rsqrt", "sin", "cos", "tan", "tanh", "sigmoid", "relu", "silu",
                          "erf", "floor", "ceil", "round", "trunc", "sign", "reciprocal", "square")],
        "binary": lambda: [getattr(dt, n)(x, y) for n in ("add", "sub", "mul", "div", "floor_divide", "remainder",
                           "pow", "maximum", "minimum", "atan2", "eq", "ne", "lt", "le", "gt", "ge")],
        "scalars": lambda: (x * 0.5, x * 0.7, 2.0 - x, x ** 2, x > 0.25, i + 1, i * 2),
        "logical": lambda: (dt.logical_not(b), dt.logical_and(b, b), dt.logical_or(b, b), dt.logical_xor(b, b),
                            dt.where(b, x, y), dt.where(b, x, 0.0)),
        "reductions": lambda: (x.sum(), x.sum(1), x.prod(0), x.amax(1), x.amin(), b.any(), b.all(1), x.mean(0),
                               x.var(), x.std(1), dt.logsumexp(x, [1])),
        "composites": lambda: (dt.softmax(x, -1), dt.log_softmax(x, 0), dt.layer_norm(x, (5,)),
                               dt.rms_norm(x, (5,)), dt.gelu(x), dt.gelu(x, approximate="tanh"),
                               dt.clamp(x, -0.5, 0.5), dt.clip(x, max=0.1), dt.masked_fill(x, b, 0.5),
                               x.masked_fill(b, dt.tensor(1.5).cuda()), dt.max(x), x.min(), dt.max(x, y),
                               x.min(y), dt.isnan(x), x.isinf(), dt.isfinite(x), dt.nan_to_num(x),
                               dt.clamp_min(x, 0.1), x.clamp_max(0.2), dt.add(x, y, alpha=2), x.sub(y, alpha=0.5)),
        "views and data": lambda: (x.T.contiguous(), x.T.reshape(30), x.clone(), x.T.clone(), dt.cat([x, y], 1),
                                   dt.stack([x, y]), x.to(dt.float16), i.to(dt.float32), b.to(dt.float64),
                                   x.view(30).flatten(), x.permute(1, 0).contiguous(), x.narrow(1, 1, 2).contiguous(),
                                   x.split(2), x.chunk(3, 1), x[1:, ::2].contiguous()),
        "creation": lambda: (dt.zeros(3, 4, device="cuda"), dt.ones(5, device="cuda", dtype=dt.int64),
                             dt.empty(2, device="cuda"), dt.full((2, 3), 1.5, device="cuda"),
                             dt.zeros_like(x), dt.ones_like(x), dt.full_like(x, 7), dt.empty_like(x),
                             dt.arange(5, device="cuda"), dt.arange(0.5, 3, 0.25, device="cuda"),
                             dt.arange(9, -3, -2, device="cuda", dtype=dt.int8), dt.linspace(0, 5, 5, device="cuda"),
                             dt.linspace(-1, 1, 7, device="cuda", dtype=dt.float64), dt.linspace(3, 4, 1, device="cuda")),
        # Integer division and powers check their divisors (exponents) on the device.
        "integer division": lambda: (i // 3, i % -2, i // (i * 0 + 2), i % (i * 0 - 3), i.to(dt.int64) // i[0],
                                     i.to(dt.uint8) % 5, i.to(dt.int16) // i.to(dt.int16)[:1], i ** 2,
                                     dt.floor_divide(i, 4), dt.remainder(i.T, 7)),
        "unique": lambda: (dt.unique(i), dt.unique(x, return_inverse=True, return_counts=True),
                           dt.unique(i, dim=1, return_counts=True), dt.unique(b, sorted=True, return_inverse=True)),
        "linalg": lambda: (x @ m, dt.mm(x, m), dt.bmm(x.unsqueeze(0), m.unsqueeze(0)), dt.dot(x[0], y[0]),
                           x.T.matmul(y), dt.matmul(x.view(2, 3, 5).transpose(0, 1), m)),
    }
    def setitems():
        z = x.clone()
        z[0] = 1.0
        z[1:3, ::2] = y[1:3, ::2]
        z[:, 0] = y[:, 1]
        z += y
        z.mul_(2)
        z.fill_(0.5)
        z.zero_()
        z.copy_(y)
        z[2:] -= 1
        k = i.clone()
        k //= 2
        k %= 3
        k.floor_divide_(i * 0 + 4)
        return z, k
    calls["setitem and in-place"] = setitems
    for name, call in calls.items():
        before = dt.stats()["cuda_host_ops"]
        call()
        after = dt.stats()["cuda_host_ops"]
        assert after == before, (name, dt.stats()["cuda_host_ops_by_op"])
    for n in DEVICE_GENERATED:
        before, launched = dt.stats()["cuda_host_ops"], drv_launches()
        for dtype in (dt.float32, dt.float64, dt.float16, dt.bfloat16):
            if n.endswith("_like"):
                getattr(dt, n)(x.to(dtype))
            else:
                getattr(dt, n)(3, device="cuda", dtype=dtype)
        assert dt.stats()["cuda_host_ops"] == before, (n, dt.stats()["cuda_host_ops_by_op"])
        assert drv_launches() > launched, n
    print("launches", drv_launches())
"""


def test_eager_ops_stay_on_the_device():
    # Every eager op of the registry on CUDA tensors runs as device kernels (the fake driver
    # records the launches; values are not read) and counts no host op, random draws included.
    # Without NVRTC every op would fall back to the host: the test says so loudly and skips.
    out = run_with_fake_driver("DEVICE_GENERATED = %r\n" % (DEVICE_GENERATED,) + textwrap.dedent(EAGER_OPS_ON_DEVICE),
                               FAKE_CUDA_ACCEPT_MODULES="1")
    if "SKIP-NVRTC" in out:
        require_nvrtc(out.strip())
    launches = int(out.split("launches")[-1])
    assert launches > 100, out
    # Each listed exception must still be a registry op (a renamed op must not keep a stale entry).
    names = set(dt._op_names())
    assert DEVICE_GENERATED <= names, DEVICE_GENERATED - names


ZERO_DIVISORS = """
    i = dt.tensor([[7, -7, 3], [0, 5, -1]], dtype=dt.int32)
    def raised(fn, *args):
        try:
            fn(*args)
        except Exception as e:
            return type(e), str(e)
        return None
    def inplace(a, b):
        a //= b
    ops = (lambda a, b: a // b, lambda a, b: a % b, lambda a, b: dt.floor_divide(a, b), dt.remainder, inplace)
    for divisors in DIVISORS:
        for fn in ops:
            want = raised(fn, i.clone(), divisors(i))
            assert want is not None and want[0] is ZeroDivisionError, want
            got = raised(fn, i.cuda(), divisors(i.cuda()))
            assert got == want, (got, want)
    want = raised(lambda: i ** -1)
    assert want[0] is ValueError and raised(lambda: i.cuda() ** -1) == want, want
"""


def test_integer_division_by_zero_on_cuda_raises_what_the_cpu_raises():
    # A Python number is checked on the host before the kernel; a tensor of divisors is checked
    # by the kernel on the device, which the stand-in does not run (tests/index_kernels_test.cc
    # checks that path, and tests/gpu/gpu_check.py on a GPU); where modules do not load, the
    # host mirror raises, for both.
    run_compiled_with_fake_driver("DIVISORS = [lambda a: 0, lambda a: -0]\n" + textwrap.dedent(ZERO_DIVISORS),
                                  FAKE_CUDA_ACCEPT_MODULES="1")
    run_with_fake_driver("DIVISORS = [lambda a: 0, lambda a: (a[0] * 0 + 1) * (a[0] != 7)]\n" +
                         textwrap.dedent(ZERO_DIVISORS))


def test_eager_ops_fall_back_to_the_host_exactly_when_modules_do_not_load():
    # The plain fake driver refuses modules: the same ops run through host mirrors, with the
    # CPU's results, and are counted.
    run_with_fake_driver("""
        x = dt.randn(4, 6)
        g = x.cuda()
        dt.reset()
        assert close(dt.softmax(g, -1).cpu(), dt.softmax(x, -1))
        assert close((g.T.contiguous() * 2).cpu(), x.T.contiguous() * 2)
        assert close(g.T.reshape(24).cpu(), x.T.reshape(24))
        z = g.clone(); z[1:, ::2] = 0.5
        w = x.clone(); w[1:, ::2] = 0.5
        assert close(z.cpu(), w)
        assert dt.stats()["cuda_host_ops"] > 0, dt.stats()
    """)



# The registry's ops beyond EAGER_OPS_ON_DEVICE and INDEXING_CASES (nn functions, losses, math,
# shapes, creation, random draws), each run on CUDA tensors and on the same CPU tensors.
EVERY_OTHER_OP = """
    import dyntrace.nn.functional as F
    dt.manual_seed(9)
    inputs = dict(x=dt.randn(4, 6), y=dt.randn(4, 6), m=dt.randn(6, 4), sq=dt.randn(4, 4),
                  b=dt.randn(4), img=dt.randn(2, 3, 8, 8), w2=dt.randn(4, 3, 3, 3), sig=dt.randn(2, 3, 10),
                  w1=dt.randn(5, 3, 3), u=dt.randn(3, 4), v=dt.randn(3, 4), target=dt.tensor([1, 0, 5, 2]),
                  probs=dt.softmax(dt.randn(4, 6), -1), chan=dt.rand(3) + 0.5, i=dt.arange(4, dtype=dt.int32))

    def run(x, y, m, sq, b, img, w2, sig, w1, u, v, target, probs, chan, i):
        device = x.device
        mean, var = dt.zeros(3, device=device), dt.ones(3, device=device)
        q = img.reshape(2, 3, 8, 8)
        return {
            "nn": (F.conv2d(img, w2, padding=1), F.conv2d(img, w2, padding="same"), F.conv1d(sig, w1),
                   F.conv1d(sig, w1, padding="same"), F.max_pool2d(img, 2), F.avg_pool2d(img, 2),
                   F.adaptive_avg_pool2d(img, (2, 3)), F.batch_norm(img, mean, var, chan, b[:3], training=True),
                   mean, var, F.group_norm(img, 3), F.pad(img, (1, 2)), F.interpolate(img, scale_factor=2),
                   F.interpolate(img, size=(5, 5), mode="bilinear"), F.linear(x, m.T, b),
                   F.scaled_dot_product_attention(q, q, q, is_causal=True), F.normalize(x), F.glu(x)),
            "activations": (F.elu(x), F.hardswish(x), F.hardtanh(x), F.leaky_relu(x, 0.1), F.mish(x),
                            F.relu6(x * 4), F.softplus(x)),
            "losses": (F.cross_entropy(x, target), F.nll_loss(F.log_softmax(x, 1), target),
                       F.binary_cross_entropy_with_logits(x, probs), F.kl_div(F.log_softmax(x, 1), probs,
                       reduction="batchmean"), F.l1_loss(x, y), F.mse_loss(x, y), F.smooth_l1_loss(x, y)),
            "math": (dt.addmm(sq, x, m), dt.baddbmm(sq[None], x[None], m[None]), dt.allclose(x, x + 1e-9),
                     dt.equal(x, y), dt.isclose(x, y), dt.cross(u, v), dt.linalg.cross(u.T, v.T), dt.diag(x),
                     dt.diag(b), dt.trace(sq), dt.einsum("ij,jk->ik", x, m), dt.hypot(x, y), dt.lerp(x, y, 0.3),
                     dt.addcmul(x, y, x, value=0.5), dt.addcdiv(x, y, y * y + 1), dt.count_nonzero(x > 0, dim=1),
                     dt.diff(x, dim=0, append=y), x.repeat_interleave(2, dim=1), dt.meshgrid(b, b, indexing="xy"),
                     dt.broadcast_tensors(b[:, None], x),
                     dt.logaddexp(x, y), dt.outer(b, b), dt.norm(x), dt.norm(x, "fro"), dt.linalg.norm(x),
                     dt.linalg.norm(x, "fro"), dt.linalg.vector_norm(x, 3)),
            "shapes": (dt.broadcast_to(b, (3, 4)), dt.concat([x, y]), dt.movedim(img, 1, 3), x.select(0, 2),
                       x[None].squeeze(0), dt.swapaxes(x, 0, 1), x.t(), dt.tile(x, (2, 1)), i.type_as(x),
                       dt.unbind(x, 1)),
            "creation": (x.new_zeros(2, 3), x.new_ones(2), x.new_full((2,), 7.0), x.new_empty(3).shape),
        }

    def draw(x, probs):
        device = x.device
        return (dt.rand_like(x), dt.randn_like(x), dt.randint(5, (4,), device=device),
                dt.randint(2, 5, (4,), device=device), dt.randperm(6, device=device), dt.multinomial(probs, 2),
                dt.bernoulli(probs), dt.bernoulli(x, 0.5), dt.normal(x, 0.5), dt.normal(0.0, 1.0, (3,), device=device),
                x.clone().uniform_(1, 2), F.dropout(x, 0.5))

    def same(got, want, what):
        if isinstance(want, dt.Tensor):
            assert got.is_cuda and got.dtype == want.dtype and got.shape == want.shape, what
            assert close(got.cpu(), want), what
        elif isinstance(want, (tuple, list)):
            assert len(got) == len(want), what
            for n, (g, w) in enumerate(zip(got, want)):
                same(g, w, "%s[%d]" % (what, n))
        else:
            assert got == want, what

    want = run(**inputs)
    got = run(**{k: t.cuda() for k, t in inputs.items()})
    for group in want:
        same(got[group], want[group], group)
    # Random draws on CUDA tensors come from the same generator as the CPU's.
    dt.manual_seed(11)
    want = draw(inputs["x"], inputs["probs"])
    dt.manual_seed(11)
    same(draw(inputs["x"].cuda(), inputs["probs"].cuda()), want, "random")
    # Gradients through the activations whose derivative is one fused op (_silu_backward ...).
    def grads(x):
        x = x.clone().requires_grad_()
        (F.gelu(x) + F.silu(x) + dt.sigmoid(x) + dt.tanh(x)).sum().backward()
        return x.grad
    same(grads(inputs["x"].cuda()), grads(inputs["x"]), "activation gradients")
"""


def test_every_other_op_on_cuda_tensors_matches_the_cpu():
    # The plain stand-in driver refuses modules, so these run through host mirrors and compute
    # real values to compare.
    run_with_fake_driver(EVERY_OTHER_OP)

def test_direct_walks_free_intermediates_after_their_last_use():
    # Eight products in a row on the device, run without CUDA graphs: each intermediate goes
    # back to the caching allocator once its reader is queued, so the peak stays at a few
    # buffers (the stream orders a reused block after its last reader).
    run_compiled_with_fake_driver("""
        def chain(x, w):
            for _ in range(8):
                x = x @ w
            return x
        x, w = dt.randn(64, 64).cuda(), dt.randn(64, 64).cuda()
        f = dt.jit(chain, backend="cuda", cuda_graphs=False)
        f(x, w)
        one = 64 * 64 * 4
        dt.cuda.reset_peak_memory_stats()
        held = dt.cuda.memory_allocated()
        y = f(x, w)
        added = dt.cuda.max_memory_allocated() - held
        assert 0 < added <= 3 * one * 1.25, added / one
        del y
        assert dt.cuda.memory_allocated() == held
    """, FAKE_CUDA_ACCEPT_MODULES="1")


def test_dynamic_sizes_reuse_one_program_and_cuda_graphs_stop_at_eight_shape_sets():
    # A batch size read by Python becomes symbolic: one trace and one program for every size;
    # CUDA graphs are captured per concrete shape set, up to 8 per program, and the calls past
    # that run their kernels directly, counted in stats().
    run_compiled_with_fake_driver("""
        def rows(x, w):
            B = x.shape[0]
            return (dt.relu(x @ w) * 2.0 + 1.0).reshape(B, -1).sum(-1) + B
        w = dt.randn(16, 16).cuda()
        f = dt.jit(rows, backend="cuda")
        dt.reset()
        for b in range(2, 14):
            x = dt.randn(b, 16).cuda()
            for _ in range(3):
                f(x, w)
        s = dt.stats()
        assert s["frames_traced"] == 2 and s["compile_failures"] == [], s
        assert s["cuda_host_ops"] == 0, s["cuda_host_ops_by_op"]
        # One capture by the first (static, B = 2) program, then 8 by the dynamic one.
        assert s["cuda_graph_captures"] == 9 and s["cuda_graph_shape_limit"] > 0, s
    """, FAKE_CUDA_ACCEPT_MODULES="1")
# Gathers, scatters, the indexing ops (masks too), sorts and scans run device kernels (runtime/
# cuda_index_kernels.h) where the driver loads modules; where it refuses them (the plain stand-in)
# they run through host mirrors, each call counted (README "CUDA tensors").
INDEXING_THROUGH_THE_HOST = {"_index", "_index_put", "index_put", "index_select", "gather", "scatter",
                             "scatter.value", "scatter_add", "take_along_dim", "embedding", "one_hot", "nonzero",
                             "where.condition", "masked_select", "sort", "argsort", "topk", "cumsum", "cumprod",
                             "max.dim", "min.dim", "tril", "triu", "flip", "roll", "repeat", "eye",
                             "index_add", "index_copy", "scatter_reduce", "kthvalue", "unique", "searchsorted",
                             "bucketize", "cummax", "cummin", "logcumsumexp"}


INDEXING_CASES = """
        dt.manual_seed(5)
        x = dt.randn(4, 6)
        g = x.cuda()
        t, idx = dt.tensor([3, -1, 0]), dt.tensor([[2, 0, 1, 5, 4, 3]])
        gt, gidx = t.cuda(), idx.cuda()
        cases = [
            lambda a, i, j: a[i],
            lambda a, i, j: a[:, [1, -2]],
            lambda a, i, j: a.index_select(1, i % 6),
            lambda a, i, j: dt.gather(a, 1, j.expand(4, 6)),
            lambda a, i, j: dt.scatter_add(a, 1, j, a[:1]),
            lambda a, i, j: dt.take_along_dim(a, j, 1),
            lambda a, i, j: dt.embedding(i, a),
            lambda a, i, j: dt.sort(a, 1, descending=True).values,
            lambda a, i, j: a.argsort(0),
            lambda a, i, j: dt.topk(a, 2).indices,
            lambda a, i, j: dt.cumsum(a, 1),
            lambda a, i, j: a.cumprod(0),
            lambda a, i, j: a.max(1).indices,
            lambda a, i, j: a.min(0).values,
            lambda a, i, j: dt.tril(a, 1),
            lambda a, i, j: a.triu(),
            lambda a, i, j: dt.flip(a, [0]),
            lambda a, i, j: a.roll(2, 1),
            lambda a, i, j: a.repeat(2, 1),
            lambda a, i, j: dt.eye(3, device="cuda") if a.is_cuda else dt.eye(3),
            lambda a, i, j: dt.index_add(a, 0, i % 4, a[:3], alpha=2.0),
            lambda a, i, j: a.index_copy(1, i % 6, a[:, :3]),
            lambda a, i, j: dt.scatter_reduce(a, 1, j, a[:1], "amax", include_self=False),
            lambda a, i, j: dt.kthvalue(a, 2, 1).values,
            lambda a, i, j: dt.searchsorted(dt.sort(a[0]).values, a, right=True),
            lambda a, i, j: dt.bucketize(a, dt.sort(a[1]).values),
            lambda a, i, j: dt.cummax(a, 1).indices,
            lambda a, i, j: a.cummin(0).values,
            lambda a, i, j: dt.logcumsumexp(a, 1),
        ]
        # Sized by their data. The mask is made on the host: a stand-in driver that accepts
        # modules computes nothing.
        pos = lambda a: (x > 0).cuda() if a.is_cuda else x > 0
        data_sized = [lambda a, i, j: a[pos(a)], lambda a, i, j: dt.nonzero(pos(a)),
                      lambda a, i, j: dt.unique(j, return_counts=True)[1], lambda a, i, j: dt.masked_select(a, pos(a)),
                      lambda a, i, j: dt.where(pos(a))[0]]
"""


def test_indexing_ops_fall_back_to_counted_host_mirrors_where_modules_do_not_load():
    run_with_fake_driver(INDEXING_CASES + """
        for n, fn in enumerate(cases + data_sized):
            before = dt.stats()["cuda_host_ops"]
            got, want = fn(g, gt, gidx), fn(x, t, idx)
            assert got.is_cuda and got.shape == want.shape and close(got, want), n
            assert dt.stats()["cuda_host_ops"] > before, n
        w, gw = x.clone(), g.clone()
        w[t] = 2.0
        gw[gt] = 2.0
        w[:, idx[0, :2]] += 1.0
        gw[:, gidx[0, :2]] += 1.0
        assert gw.is_cuda and close(gw.cpu(), w)
        try:
            g[dt.tensor([4]).cuda()]
            raise AssertionError("no IndexError")
        except IndexError as e:
            assert "index 4" in str(e) and "size 4" in str(e)
        names = set(dt.stats()["cuda_host_ops_by_op"])
        assert {"_index", "_index_put", "gather"} <= names, names
    """)
    assert INDEXING_THROUGH_THE_HOST <= set(dt._op_names()), INDEXING_THROUGH_THE_HOST - set(dt._op_names())


# Sized by their data: they count on the device and read the count back (unique its number of
# distinct values).
DATA_SIZED = {"nonzero", "where.condition", "masked_select", "unique"}


def test_indexing_sorting_and_scans_launch_device_kernels_and_count_no_host_op():
    # The stand-in driver loads the NVRTC-built module and records launches (values are not
    # computed: tests/index_kernels_test.cc checks them); only the data-sized ops and boolean
    # masks touch the host.
    out = run_compiled_with_fake_driver(INDEXING_CASES + """
        launches = lambda: dt.stats()["cuda_kernel_launches"]
        host = lambda: dict(dt.stats()["cuda_host_ops_by_op"])
        more = [lambda a, i, j: dt.one_hot(j[0] % 4, 5), lambda a, i, j: a.argmax(), lambda a, i, j: a.argmin(1, True),
                lambda a, i, j: dt.scatter(a, 1, j.expand(2, 6), a), lambda a, i, j: dt.scatter(a, 0, j[:, 1:3], 2.0),
                lambda a, i, j: dt.index_put(a, (i[1:] + 1,), a[0]), lambda a, i, j: a[1:, None, [0, 2]],
                lambda a, i, j: dt.scatter_reduce(a, 1, j, a[:1], "mean"), lambda a, i, j: dt.tril(a.half(), -1),
                lambda a, i, j: dt.sort(a.to(dt.int32), 0).indices, lambda a, i, j: dt.cumsum(a > 0, 1),
                lambda a, i, j: dt.searchsorted(dt.sort(a).values, a, sorter=dt.argsort(a)),
                lambda a, i, j: dt.flip(a.T, [1]), lambda a, i, j: a.repeat(1, 2, 1)]
        for n, fn in enumerate(cases + more):
            before, launched = host(), launches()
            got = fn(g, gt, gidx)
            assert got.is_cuda and got.shape == fn(x, t, idx).shape, n
            assert host() == before, (n, host())
            assert launches() > launched, n
        gw = g.clone()
        before = dt.stats()["cuda_host_ops"]
        gw[gt] = 2.0
        gw[:, gidx[0, :2]] += 1.0
        gw[[0, 1], [1, -1]] = g[0, :2]
        assert dt.stats()["cuda_host_ops"] == before, dt.stats()["cuda_host_ops_by_op"]
        before, launched = dt.stats()["cuda_host_ops"], launches()
        assert dt.unique(gidx, return_counts=True)[1].is_cuda
        assert dt.unique(g, dim=0, return_inverse=True)[1].is_cuda
        assert dt.stats()["cuda_host_ops"] == before and launches() > launched, dt.stats()["cuda_host_ops_by_op"]
        # A program with an index check is captured, its check deferred to before each launch;
        # one with an integer division reads back its check of the divisors, so it runs without a
        # CUDA graph and never tries a capture (the read-back's synchronisation would make it
        # fail: a refusal).
        f = dt.jit(lambda a, i: (a * 2).gather(1, i) + 1, backend="cuda")
        q = dt.jit(lambda i: (i * 2) // (i + 7) + 1, backend="cuda")
        for _ in range(3):
            f(g, gidx.expand(4, 6))
            q(gidx)
        assert dt.stats()["cuda_graph_captures"] == 1 and dt.stats()["cuda_graph_refusals"] == 0, dt.stats()
        assert dt.stats()["cuda_host_ops"] == before, dt.stats()["cuda_host_ops_by_op"]
        # So is a program that sorts: its kernels are captured with the rest.
        h = dt.jit(lambda a: dt.sort(a * 2, 1).values.cumsum(0) + 1, backend="cuda")
        for _ in range(3):
            h(g)
        print("captures", dt.stats()["cuda_graph_captures"])
    """, FAKE_CUDA_ACCEPT_MODULES="1")
    assert "captures 2" in out, out
    assert DATA_SIZED <= set(dt._op_names())


def test_mask_selections_count_on_the_device():
    # x[mask], x[mask] = v, nonzero, where(cond), masked_select: a scan of the mask on the device,
    # its total read back (the result's size), a compaction launch; no host op. unique likewise
    # scans the starts of its sorted runs and reads back their number. In a fresh child
    # the scan's buffer is fresh stand-in memory (zeros: the stand-in runs no kernel), so the
    # count read back is 0 and the results are empty; index_kernels_test checks the values.
    run_compiled_with_fake_driver(INDEXING_CASES + """
        launches = lambda: dt.stats()["cuda_kernel_launches"]
        m = pos(g)
        for n, fn in enumerate(data_sized):
            before, launched = dt.stats()["cuda_host_ops"], launches()
            assert fn(g, gt, gidx).is_cuda, n
            assert dt.stats()["cuda_host_ops"] == before, (n, dt.stats()["cuda_host_ops_by_op"])
            assert launches() > launched, n
        gw = g.clone()
        gw[m] = 1.0
        assert dt.stats()["cuda_host_ops"] == 0, dt.stats()["cuda_host_ops_by_op"]
    """, FAKE_CUDA_ACCEPT_MODULES="1")


def test_gpt2_style_layer_stays_on_the_device_in_one_cuda_graph():
    run_compiled_with_fake_driver("""
        import math
        def layer(x, w_qkv, w_o, w_fc, w_proj, mask):
            B, T, D = x.shape
            H = 4
            h = dt.layer_norm(x, (D,))
            q, k, v = (h @ w_qkv).split(D, dim=-1)
            q = q.view(B, T, H, D // H).transpose(1, 2)
            k = k.view(B, T, H, D // H).transpose(1, 2)
            v = v.view(B, T, H, D // H).transpose(1, 2)
            att = dt.where(mask, (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D // H)), float("-inf"))
            y = (dt.softmax(att, -1) @ v).transpose(1, 2).reshape(B, T, D)
            x = x + y @ w_o
            return x + dt.gelu(dt.layer_norm(x, (D,)) @ w_fc) @ w_proj
        B, T, D = 2, 8, 32
        r = lambda *s: dt.randn(*s).cuda()
        mask = (dt.arange(T).reshape(T, 1) >= dt.arange(T).reshape(1, T)).cuda()
        args = (r(B, T, D), r(D, 3 * D), r(D, D), r(D, 4 * D), r(4 * D, D), mask)
        f = dt.jit(layer, backend="cuda")
        dt.reset()
        for _ in range(5):
            f(*args)
        s = dt.stats()
        assert s["cuda_host_ops"] == 0, s["cuda_host_ops_by_op"]
        assert s["graph_breaks"] == 0 and s["compile_failures"] == [], s
        assert (s["cuda_graph_captures"], s["cuda_graph_replays"], s["cuda_graph_refusals"]) == (1, 4, 0), s
    """, FAKE_CUDA_ACCEPT_MODULES="1")


def test_autograd_on_cuda_tensors_and_device_moves():
    # The same model's gradients on the CPU and on the (stand-in) device; x.cuda() and .cpu()
    # inside the graph (_to_device) send gradients back across devices. float32 BLAS sums of at
    # most 8 terms of O(1) values: 1e-5 relative covers their ordering differences.
    run_with_fake_driver("""
        from dyntrace import nn
        dt.manual_seed(0)
        x = dt.randn(4, 6)
        m = nn.Sequential(nn.Linear(6, 8), nn.LayerNorm(8), nn.GELU(), nn.Linear(8, 3))
        m(x).square().sum().backward()
        expected = [p.grad for p in m.parameters()]
        m.zero_grad()
        m.cuda()
        assert all(p.device.type == "cuda" for p in m.parameters())
        m(x.cuda()).square().sum().backward()
        for p, e in zip(m.parameters(), expected):
            assert p.grad.device.type == "cuda" and close(p.grad.cpu(), e), (p.grad, e)
        w = dt.ones(3, requires_grad=True)
        y = (w.cuda() * 2).cpu().sum()
        y.backward()
        assert w.grad.device.type == "cpu" and w.grad.tolist() == [2.0, 2.0, 2.0]
        """)
    # Where modules load, an eager composite on CUDA is one generated kernel; one without a
    # derivative formula of its own (gelu) is differentiated through its body instead, each call
    # of which runs and records on the device. The stand-in runs no kernel, so only where the
    # gradients land is checked (the values above come from the host path).
    run_compiled_with_fake_driver("""
        from dyntrace import nn
        m = nn.Sequential(nn.Linear(6, 8), nn.LayerNorm(8), nn.GELU(), nn.Linear(8, 3)).cuda()
        m(dt.randn(4, 6).cuda()).square().sum().backward()
        assert all(p.grad is not None and p.grad.is_cuda and p.grad.shape == p.shape for p in m.parameters())
        assert dt.stats()["cuda_host_ops"] == 0, dt.stats()["cuda_host_ops_by_op"]
        """, FAKE_CUDA_ACCEPT_MODULES="1")


def test_tensor_constructor_places_its_data_on_the_requested_device():
    run_with_fake_driver("""
        for data in (1.5, [[1, 2], [3, 4]], [True, False], dt.arange(3.0), dt.arange(3.0).cuda()):
            t = dt.tensor(data, device="cuda")
            assert t.is_cuda, (data, t.device)
            expected = dt.tensor(data.cpu() if isinstance(data, dt.Tensor) else data)
            assert t.dtype == expected.dtype and t.cpu().tolist() == expected.tolist(), (t, expected)
        back = dt.tensor(dt.arange(3.0).cuda(), device="cpu", dtype=dt.int32)
        assert not back.is_cuda and back.dtype == dt.int32 and back.tolist() == [0, 1, 2]
        """)


def test_optimizers_update_cuda_params_by_the_same_rules():
    # CUDA parameters take the optimizers' per-tensor path (the multi-tensor ops take CPU tensors
    # and refuse others); the plain stand-in driver runs those ops through the host, so the values
    # are the CPU's and are compared step by step. Adam's step counts live on the parameter's
    # device (PyTorch's capturable Adam), so its bias corrections are float32 tensors there
    # where the CPU path uses Python floats: relative differences of a few float32 ulps in the
    # update, far inside close()'s 1e-5.
    run_with_fake_driver("""
        for make in (lambda ps: dt.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
                     lambda ps: dt.optim.Adam(ps, lr=0.05, amsgrad=True, weight_decay=0.1),
                     lambda ps: dt.optim.AdamW(ps, lr=0.05)):
            cpu = [dt.randn(3, 2).requires_grad_(), dt.randn(4).requires_grad_()]
            gpu = [p.detach().cuda().requires_grad_() for p in cpu]
            a, b = make(cpu), make(gpu)
            for step in range(3):
                for p, q in zip(cpu, gpu):
                    p.grad = dt.randn(*p.shape)
                    q.grad = p.grad.cuda()
                a.step()
                b.step()
                for p, q in zip(cpu, gpu):
                    assert q.is_cuda and close(q.cpu(), p), (step, q.cpu(), p)
            for state in b.state.values():
                assert all(t.is_cuda for k, t in state.items() if k != "step")
                assert "step" not in state or state["step"].is_cuda
        g = dt.zeros(2).cuda()
        try:
            with dt.no_grad():
                dt._fused_sgd_([g], [g], [], [], 0.1, 0.0, 0.0, 0.0, False, False)
            raise AssertionError("no error")
        except ValueError as e:
            assert "CPU" in str(e), e
    """)


def test_compiled_forward_and_backward_on_cuda_tensors():
    # dt.jit of a loss over CUDA parameters: the cuda backend compiles the forward graph and the
    # backward graph (NVRTC here, the stand-in driver running them), and the gradients equal
    # eager autograd's on the CPU. float32 sums of at most 8 terms: 1e-5 relative.
    run_compiled_with_fake_driver("""
        from dyntrace import nn
        dt.manual_seed(0)
        x = dt.randn(4, 6)
        m = nn.Sequential(nn.Linear(6, 8), nn.LayerNorm(8), nn.GELU(), nn.Linear(8, 3))
        m(x).square().sum().backward()
        expected = [p.grad for p in m.parameters()]
        m.zero_grad()
        m.cuda()
        loss_of = dt.jit(lambda m, x: m(x).square().sum(), backend="cuda")
        loss = loss_of(m, x.cuda())
        assert loss.grad_fn.name() == "CompiledFunctionBackward", loss.grad_fn
        loss.backward()
        s = dt.stats()
        assert s["backward_graphs"] == 1 and s["compiled_backward_runs"] == 1 and s["fallbacks"] == 0, s
        for p, e in zip(m.parameters(), expected):
            assert p.grad.device.type == "cuda" and close(p.grad.cpu(), e), (p.grad, e)
        """)


def test_fills_run_as_device_memsets_for_every_element_size():
    # full/full_like/fill_ on CUDA are driver memsets on the stream (a 64-bit element is two
    # strided 32-bit memsets): no host buffer and no wait, so a capture can hold them. The
    # stand-in driver carries memsets out, so the values are checked exactly.
    run_with_fake_driver("""
        for dtype, value in ((dt.float32, -2.5), (dt.float64, 1e300), (dt.int64, -(2 ** 40) - 3),
                             (dt.int32, 7), (dt.float16, 0.333), (dt.bfloat16, -3.0), (dt.int8, -5),
                             (dt.bool, True), (dt.float32, float("nan"))):
            got = dt.full((3, 5), value, dtype=dtype, device="cuda")
            want = dt.full((3, 5), value, dtype=dtype)
            assert got.is_cuda and got.dtype == want.dtype, (dtype, got)
            same = got.cpu().tolist() == want.tolist() or (value != value and all(
                v != v for row in got.cpu().tolist() for v in row))
            assert same, (dtype, got.cpu().tolist(), want.tolist())
        x = dt.zeros(4, 6).cuda()
        x[:, 1:3].fill_(4.0)  # a strided view: the copy path, same values
        want = dt.zeros(4, 6)
        want[:, 1:3].fill_(4.0)
        assert x.cpu().tolist() == want.tolist()
        assert dt.full_like(x, 9.0).cpu().tolist() == [[9.0] * 6] * 4
        """)


def test_in_place_updates_and_index_checks_are_captured_in_cuda_graphs():
    # In-place writes become kernels (joined to their producers' kernel, or alone), so an
    # optimizer-style update replays as a CUDA graph; a gather's index check runs before each
    # launch instead of refusing the graph (tests/index_kernels_test.cc checks that a deferred
    # check raises). The stand-in runs no kernel: what is checked is the capture, the replays,
    # and that no node runs outside the graph.
    run_compiled_with_fake_driver("""
        def update(p, m, g):
            m.mul_(0.9).add_(g * 0.1)
            p.sub_(m * 0.01)
            p.mul_(0.999)

        p, m, g = dt.randn(33, 5).cuda(), dt.zeros(33, 5).cuda(), dt.randn(33, 5).cuda()
        f = dt.jit(update, backend="cuda", cuda_graphs=True)
        for _ in range(4):
            f(p, m, g)
        s = dt.stats()
        assert (s["cuda_graph_captures"], s["cuda_graph_refusals"]) == (1, 0), s
        assert s["cuda_graph_replays"] == 3 and s["cuda_host_ops"] == 0, s
        dt.reset()
        pick = dt.jit(lambda x, i: dt.gather(x, 1, i) * 2.0 + 1.0, backend="cuda")
        x, i = dt.randn(6, 9).cuda(), dt.tensor([[0, 8], [1, 1], [2, 3], [4, 4], [5, 6], [7, 0]]).cuda()
        for _ in range(4):
            assert pick(x, i).shape == (6, 2)
        s = dt.stats()
        assert (s["cuda_graph_captures"], s["cuda_graph_refusals"]) == (1, 0), s
        assert s["cuda_graph_replays"] == 3, s
        """, FAKE_CUDA_ACCEPT_MODULES="1")


def test_a_whole_training_step_compiles_for_cuda_parameters():
    # dt.jit(step, fullgraph=True) over a CUDA model and AdamW: forward, backward and the update
    # in one program, every op on the device (the Adam step counts live there too). The first
    # trace creates the optimizer's state on the device: graph constants, which shape planning
    # must treat as layouts (running them with meta operands crashed). Values need a GPU.
    run_compiled_with_fake_driver("""
        from dyntrace import nn
        dt.manual_seed(0)
        m = nn.Sequential(nn.Linear(6, 16), nn.LayerNorm(16), nn.GELU(), nn.Dropout(0.1), nn.Linear(16, 3)).cuda()
        opt = dt.optim.AdamW(m.parameters(), lr=1e-3)
        x, y = dt.randn(8, 6).cuda(), dt.tensor([0, 1, 2, 0, 1, 2, 0, 1]).cuda()

        def step(m, opt, x, y):
            opt.zero_grad()
            loss = dt.nn.functional.cross_entropy(m(x), y)
            loss.backward()
            opt.step()
            return loss.detach()

        f = dt.jit(step, backend="cuda", fullgraph=True)
        for _ in range(4):
            assert f(m, opt, x, y).is_cuda
        s = dt.stats()
        assert s["frames_traced"] == 2 and s["graph_breaks"] == 0 and s["fallbacks"] == 0, s
        assert s["cuda_host_ops"] == 0, s["cuda_host_ops_by_op"]
        assert all(st["step"].is_cuda for st in opt.state.values())
        # The whole step replays as one CUDA graph (the gradients cuBLAS computes are returned
        # as copies), also when each step brings a new batch: the batch is copied into the graph.
        # Dropout's draws replay from the device generator's state, advanced by the graph.
        assert (s["cuda_graph_captures"], s["cuda_graph_replays"], s["cuda_graph_refusals"]) == (1, 2, 0), s
        for i in range(6):
            xb, yb = dt.randn(8, 6).cuda(), dt.tensor([i % 3, 1, 2, 0, 1, 2, 0, 1]).cuda()
            before = dt.stats()
            f(m, opt, xb, yb)
            s = dt.stats()
            if i >= 2:
                assert s["cuda_graph_replays"] == before["cuda_graph_replays"] + 1, (i, s)
                assert s["cuda_kernel_launches"] - before["cuda_kernel_launches"] < 5, (i, s)
        assert (s["cuda_graph_captures"], s["cuda_graph_refusals"], s["frames_traced"]) == (2, 0, 2), s

        scale = dt.jit(lambda x: x / dt.tensor(2.0, device="cuda") + 1.0, backend="cuda")
        assert scale(x).shape == (8, 6) and scale(x).is_cuda
        """, FAKE_CUDA_ACCEPT_MODULES="1")


def test_kernels_stay_within_the_launch_abis_operand_limit():
    # A pointwise sum of 40 inputs fuses into one kernel on the CPU; the CUDA launch ABI holds
    # 32 operands, so the CUDA schedule splits it (it used to fail to compile and run eagerly).
    run_compiled_with_fake_driver("""
        xs = [dt.randn(4, 5).cuda() for _ in range(40)]
        def total(*xs):
            acc = xs[0] * 1.5
            for x in xs[1:]:
                acc = acc + x
            return acc
        f = dt.jit(total, backend="cuda")
        for _ in range(3):
            f(*xs)
        s = dt.stats()
        assert not s["compile_failures"], s["compile_failures"]
        assert (s["cuda_graph_captures"], s["cuda_graph_replays"], s["cuda_graph_refusals"]) == (1, 2, 0), s
        # Writes count too: an update of twelve counters writes each one (its result is always
        # stored, though later reads name the written tensor), and the writes no longer end the
        # kernel, so all twelve would join one 0-d kernel of 48 operands.
        steps = [dt.zeros(()).cuda() for _ in range(12)]
        def count(*steps):
            return [1 - 0.9 ** s.add_(1) for s in steps]
        f = dt.jit(count, backend="cuda")
        for _ in range(3):
            f(*steps)
        s = dt.stats()
        assert not s["compile_failures"], s["compile_failures"]
        assert (s["cuda_graph_captures"], s["cuda_graph_replays"], s["cuda_graph_refusals"]) == (2, 4, 0), s
    """, FAKE_CUDA_ACCEPT_MODULES="1")


def test_cpu_tensors_of_no_dims_join_cuda_operands():
    # As in PyTorch, a number held in a CPU tensor may meet CUDA tensors: eager ops copy it to
    # the device (promotion stays a 0-dim tensor's); a traced graph runs that op eagerly.
    run_with_fake_driver("""
        x, s = dt.randn(4, 5), dt.tensor(2.5)
        g = x.cuda()
        assert (g * s).is_cuda and (g * s).cpu().tolist() == (x * s).tolist()
        assert (s + g).cpu().tolist() == (s + x).tolist()
        assert dt.where(g > 0, g, s).cpu().tolist() == dt.where(x > 0, x, s).tolist()
        assert (g * dt.tensor(3)).dtype == dt.float32
        assert (g.half() * s).dtype == dt.float16
        f = dt.jit(lambda x, s: x * s + 1.0, backend="cuda")
        for _ in range(2):
            r = f(g, s)
        assert r.is_cuda and r.cpu().tolist() == (x * s + 1.0).tolist()
        # A CPU tensor with dims still raises, naming both devices.
        try:
            g * dt.ones(5)
            raise AssertionError("no error")
        except RuntimeError as e:
            assert "cuda:0 and cpu" in str(e), e
        # One that requires grad is not copied (its gradient would reach the copy).
        w = dt.tensor(2.0, requires_grad=True)
        try:
            g * w
            raise AssertionError("no error")
        except RuntimeError as e:
            assert "same device" in str(e), e
    """)
