"""dyntrace.kernels(fn, target="cuda"): the CUDA C++ the CUDA generator prints for the graphs the
cpu backend compiled, inspected without a GPU. The kernels are the same kernel IR the cpu backend
printed as C++: one __global__ function per kernel (plus the split pair for long reductions), the
by-value launch ABI struct, a vector path for contiguous pointwise kernels and shuffle reductions
for row kernels. Under DYNTRACE_NVRTC_CHECK (tests/nvrtc_corpus_test) each is also compiled."""
import dyntrace as dt
from cpulib import check
from testlib import assert_raises, noncontig, rand_tensor, seed


def _pointwise(x, y):
    return (x * 2.0 + y).exp()


def _softmax_rows(x):
    return x.softmax(-1)


def _full_sum(x):
    return (x * x).sum()


def _layer_norm_like(x):
    mean = x.mean(-1, keepdim=True)
    centred = x - mean
    var = (centred * centred).mean(-1, keepdim=True)
    return centred * (var + 1e-5).rsqrt()


def _cuda_sources(fn):
    sources = dt.kernels(fn, target="cuda")
    assert sources, "no compiled entries"
    return sources


def test_pointwise_kernel_has_vector_and_general_paths():
    seed(7001)
    g = check(_pointwise, lambda i: (rand_tensor((5, 64 + i)), rand_tensor((64 + i,))))
    (source,) = _cuda_sources(g)
    # One CUDA kernel per C++ kernel, each as two functions: the vector path and the general one.
    assert source.count('extern "C" __global__') == 2 * dt.kernels(g)[0].count("_fixed("), source
    assert "(const dt::CudaKernelArgs args)" in source, source
    name = source.split("void __launch_bounds__(1024) ")[1].split("(")[0].replace("_vector", "")
    assert "void __launch_bounds__(1024) %s_vector(" % name in source and "DtVec<float, 8>" in source, source
    assert "dt::scalar::exp_(" in source, source  # through the op registry, as the C++ is
    assert "e += step" in source, "a grid-stride general path:\n" + source


def test_broadcast_operand_keeps_the_vector_path_noncontiguous_has_none():
    seed(7002)
    g = check(_pointwise, lambda i: (rand_tensor((4, 32)), rand_tensor((1, 32))))
    assert "_vector(" in _cuda_sources(g)[0]
    seed(7003)
    g = check(_pointwise, lambda i: (noncontig((6, 32), kind="strided"), rand_tensor((32,))))
    assert "_vector(" not in _cuda_sources(g)[0], "a general inner stride rules the vector path out"


def test_row_kernels_reduce_with_warp_shuffles_per_block():
    seed(7004)
    g = check(_softmax_rows, lambda i: (rand_tensor((6, 300 + i)),))
    (source,) = _cuda_sources(g)
    # The max, then the sum, in each of three functions the launcher chooses between (cached
    # with vector loads, cached with strided loads, and the general one for rows longer than
    # the cache): each compiles on its own.
    name = source.split("void __launch_bounds__(1024) ")[1].split("(")[0].replace("_vector", "")
    # (The strided cached function is launched with at most 512 threads, so it may use 128
    # registers where 64 made it spill.)
    for suffix, bound in (("_vector", 1024), ("_cached", 512), ("", 1024)):
        assert "void __launch_bounds__(%d) %s%s(const dt::CudaKernelArgs args)" % (bound, name, suffix) in source, source
    assert source.count("dt_block_reduce(") == 6 and source.count("dt::RowOffsets(") == 3, source
    assert "vector_rows" not in source and "cached_rows" not in source, "the host chooses the path:\n" + source
    # The cached paths read the input once, before the max's pass; the sum and the outputs
    # read the registers. The vector path takes rows of whole vectors only, so a slot is inside
    # the row or past its end: one unguarded spelling of each pass.
    assert source.count("dt_load_whole_vec<float, 4>(p0,") == 1, source
    assert source.count("c0[k] = j < n ? p0[j * is0]") == 1, source
    assert source.count("= c0[k * 4 + l];") == 2 and source.count("= c0[k];") == 2, source
    assert "if (j0 < n) {" in source and "j0 + 4 <= n" not in source, source
    # The outputs read the exps the sum's pass kept in registers (cached paths) instead of
    # computing them again; the general path computes them in both passes.
    assert source.count("dt::scalar::exp_(") == 4, source
    assert source.count("const float v8 = s8[") == 2, source
    assert "row += gridDim.x" in source, source
    assert "_split_partial" not in source, "softmax's sum reads its max: no split"
    assert "double acc" in source, "float32 sums accumulate in float64, as on the cpu:\n" + source


def test_layer_norm_passes_reread_the_row():
    seed(7005)
    g = check(_layer_norm_like, lambda i: (rand_tensor((3, 257)),), rtol=1e-4, atol=1e-5)
    source = "\n".join(_cuda_sources(g))
    assert "dt_block_reduce(" in source and "row_buffer" not in source, source


def test_full_reduction_gets_a_split_pair():
    seed(7006)
    g = check(_full_sum, lambda i: (rand_tensor((1000 + i,)),), rtol=1e-5, atol=1e-5)
    (source,) = _cuda_sources(g)
    assert "_split_partial(const dt::CudaKernelArgs args)" in source, source
    assert "_split_finish(const dt::CudaKernelArgs args)" in source, source
    assert "args.workspace" in source, source


def test_half_kernels_compute_in_float():
    seed(7007)
    g = check(_pointwise, lambda i: (rand_tensor((4, 64), dtype=dt.float16), rand_tensor((64,), dtype=dt.float16)),
              rtol=1e-2, atol=1e-2)
    source = _cuda_sources(g)[0]
    assert "dt::Half" in source and "DtVec<dt::Half, 16>" in source, source


def test_kernels_target_is_checked_and_cpu_is_the_default():
    seed(7008)
    g = check(_pointwise, lambda i: (rand_tensor((2, 8)), rand_tensor((8,))))
    assert dt.kernels(g) == dt.kernels(g, target="cpu")
    assert "_fixed(" in dt.kernels(g)[0]
    assert_raises(ValueError, dt.kernels, g, target="tpu", match="target")
    assert dt.kernels(dt.jit(lambda x: x + 1), target="cuda") == []  # never called: no entries


def test_stats_count_nvrtc_checks():
    stats = dt.stats()
    for key in ("nvrtc_checked", "nvrtc_failures", "nvrtc_skipped"):
        assert isinstance(stats[key], int) and stats[key] >= 0, (key, stats[key])
    assert isinstance(stats["nvrtc_unavailable"], str)
