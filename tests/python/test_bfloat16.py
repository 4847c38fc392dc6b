"""bfloat16: rounding from float32 against a reference written here (exact rationals, ties to
even), arithmetic, unary ops, reductions and matmul against float32 results under the error model
of one bf16 rounding, PyTorch's promotion table (from torch itself where it imports, else the 1.13
table written here), dt.jit on the eager and cpu backends bit for bit, DLPack, finfo, the CUDA
stand-in driver and NVRTC compiles of bf16 kernels."""
import math
import random
import struct
from fractions import Fraction

import dyntrace as dt
from jitlib import check_compiled
from testlib import assert_raises, np, require_numpy, skip

NAMES = ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64")
# torch.promote_types(bfloat16, name) in PyTorch 1.13, in NAMES order.
BF16_ROW = ("bfloat16",) * 6 + ("float32", "bfloat16", "float32", "float64")
REL = 2.0 ** -8  # one bf16 rounding: half an ulp of an 8-bit significand


def f32_bits(v):
    return struct.unpack("<I", struct.pack("<f", v))[0]


def f32_from_bits(b):
    return struct.unpack("<f", struct.pack("<I", b))[0]


def ref_bf16_bits(v):
    """bf16 bits of float32 `v`: the nearer of the two bf16 neighbours of its magnitude, ties to
    the even one; past the largest finite value the upper neighbour is 2^128, i.e. inf."""
    b = f32_bits(v)
    sign, mag = b & 0x80000000, b & 0x7fffffff
    if mag > 0x7f800000:
        return None  # NaN: checked separately
    down = mag >> 16
    if mag & 0xffff == 0:
        return (sign >> 16) | down
    def value(h):
        return Fraction(2) ** 128 if h == 0x7f80 else Fraction(f32_from_bits(h << 16))
    exact = Fraction(f32_from_bits(mag))
    lo, hi = value(down), value(down + 1)
    pick = down if exact - lo < hi - exact or (exact - lo == hi - exact and down % 2 == 0) else down + 1
    return (sign >> 16) | pick


def ref_round(v):
    """float32 value `v` rounded to bf16, as a Python float."""
    if math.isnan(v):
        return v
    return f32_from_bits(ref_bf16_bits(v) << 16)


def bf16_bits_of(t):
    """The bf16 bits of each element, read through the exact widening to float32."""
    return [f32_bits(v) >> 16 for v in t.float().flatten().tolist()]


SPECIALS = [0.0, -0.0, 1.0, -1.0, float("inf"), float("-inf"), 3.3895313892515355e+38, 3.4028234663852886e+38,
            -3.4028234663852886e+38, 1.1754943508222875e-38, 1e-45, -1e-45, 1e-40, 9.183549615799121e-41,
            f32_from_bits(0x3f808000), f32_from_bits(0x3f818000), f32_from_bits(0x3f808001),
            f32_from_bits(0x3f80ffff), f32_from_bits(0x7f7f8000), f32_from_bits(0x7f7f7fff), 65504.0, 0.1, 1e10]


def test_float32_to_bfloat16_rounds_to_nearest_even():
    rng = random.Random(7)
    patterns = [rng.getrandbits(32) for _ in range(4000)]
    values = SPECIALS + [f32_from_bits(b) for b in patterns if (b & 0x7fffffff) <= 0x7f800000]
    x = dt.tensor(values, dtype=dt.float32)
    got = bf16_bits_of(x.to(dt.bfloat16))
    assert x.to(dt.bfloat16).dtype == dt.bfloat16 and x.bfloat16().dtype == dt.bfloat16
    for v, g in zip(values, got):
        assert g == ref_bf16_bits(v), (v, hex(g), hex(ref_bf16_bits(v)))
    # float64 -> bf16 goes through float32, as PyTorch's does.
    assert dt.tensor([1.00390625], dtype=dt.float64).bfloat16().tolist() == [1.0]


def test_nan_stays_nan():
    nans = [f32_from_bits(b) for b in (0x7fc00000, 0xffc00000, 0x7f800001, 0x7fffffff, 0x7f80ffff)]
    y = dt.tensor(nans, dtype=dt.float32).bfloat16()
    assert all(math.isnan(v) for v in y.float().tolist()), y.float().tolist()
    assert dt.isnan(y).tolist() == [True] * len(nans)
    assert all(math.isnan(v) for v in dt.tensor([float("nan")]).bfloat16().float().tolist())


def test_names_repr_and_casts():
    x = dt.tensor([1.5, -2.25, 3.0]).to(dt.bfloat16)
    assert repr(dt.bfloat16) == "dyntrace.bfloat16" and "dtype=dyntrace.bfloat16" in repr(x)
    assert x.element_size() == 2 and x.is_floating_point()
    assert x.tolist() == [1.5, -2.25, 3.0] and x.to(dt.int32).tolist() == [1, -2, 3]
    assert dt.tensor([1, 2], dtype=dt.int8).bfloat16().tolist() == [1.0, 2.0]
    assert dt.zeros(2, dtype=dt.bfloat16).dtype == dt.bfloat16
    assert dt.tensor([257.0], dtype=dt.bfloat16).tolist() == [256.0]  # 9 significant bits: ties to even
    assert dt.tensor([-0.0]).bfloat16().tolist()[0] == 0 and math.copysign(1, dt.tensor([-0.0]).bfloat16().item()) < 0
    assert dt.nan_to_num(dt.tensor([float("inf")], dtype=dt.bfloat16)).tolist() == [3.3895313892515355e+38]


def test_finfo():
    f = dt.finfo(dt.bfloat16)
    assert f.bits == 16 and f.eps == 0.0078125 and f.max == 3.3895313892515355e+38
    assert f.tiny == 1.1754943508222875e-38 and f.resolution == 0.01


def promoted(a, b):
    x = dt.zeros(2, dtype=getattr(dt, a))
    y = dt.zeros(2, dtype=getattr(dt, b))
    return str(dt.maximum(x, y).dtype).split(".")[-1]


def test_promotion_table():
    for name, want in zip(NAMES, BF16_ROW):
        assert promoted("bfloat16", name) == want, (name, promoted("bfloat16", name))
        assert promoted(name, "bfloat16") == want, name


def test_promotion_matches_torch_when_it_imports():
    try:
        import torch
    except ImportError:
        skip("torch is not importable: the table written from PyTorch 1.13 was checked instead")
    for a in NAMES:
        for b in NAMES:
            want = str(torch.promote_types(getattr(torch, a), getattr(torch, b))).split(".")[-1]
            assert promoted(a, b) == want, (a, b, promoted(a, b), want)


def test_numbers_and_zero_dim_tensors():
    x = dt.ones(3, dtype=dt.bfloat16)
    assert (x + 1.5).dtype == dt.bfloat16 and (x * 2).dtype == dt.bfloat16 and (x + True).dtype == dt.bfloat16
    assert (x + dt.tensor(1.0)).dtype == dt.bfloat16  # a zero-dim float32 does not widen
    assert (x + dt.ones(3)).dtype == dt.float32 and (x + dt.ones(3, dtype=dt.float16)).dtype == dt.float32
    assert (dt.ones(3, dtype=dt.int64) + dt.tensor(1.0, dtype=dt.bfloat16)).dtype == dt.bfloat16
    assert (dt.arange(3) / dt.tensor(2.0, dtype=dt.bfloat16)).dtype == dt.bfloat16


def rand_bf16(shape, seed, low=-3.0, high=3.0):
    dt.manual_seed(seed)
    return (dt.rand(*shape) * (high - low) + low).to(dt.bfloat16)


def assert_one_rounding(got, want32, what):
    """got (bf16) is want32 (float32 results) rounded once: within 2^-8 relative, and exactly the
    reference rounding."""
    assert got.dtype == dt.bfloat16, (what, got.dtype)
    g, w = got.float().flatten().tolist(), want32.flatten().tolist()
    for a, b in zip(g, w):
        if math.isnan(b):
            assert math.isnan(a), what
            continue
        assert abs(a - b) <= REL * abs(b) or (math.isinf(a) and abs(b) > 3.38e38), (what, a, b)
        assert a == ref_round(b), (what, a, b, ref_round(b))


def test_pointwise_computes_in_float32_and_rounds_once():
    x, y = rand_bf16((5, 33), 1), rand_bf16((5, 33), 2, 0.5, 4.0)
    fx, fy = x.float(), y.float()
    for name, op in (("add", lambda p, q: p + q), ("sub", lambda p, q: p - q), ("mul", lambda p, q: p * q),
                     ("div", lambda p, q: p / q), ("max", dt.maximum), ("scalar", lambda p, q: p * 1.5)):
        assert_one_rounding(op(x, y), op(fx, fy), name)
    for name, op in (("exp", dt.exp), ("tanh", dt.tanh), ("neg", lambda p: -p), ("abs", abs),
                     ("sigmoid", dt.sigmoid)):
        assert_one_rounding(op(x), op(fx), name)
    assert_one_rounding(dt.sqrt(y), dt.sqrt(fy), "sqrt")


def test_reductions_accumulate_wide_and_round_once():
    x = rand_bf16((7, 300), 3, 0.0, 2.0)
    exact = [sum(row) for row in x.double().tolist()]
    for got, want in zip(x.sum(1).float().tolist(), exact):
        assert abs(got - want) <= REL * abs(want), (got, want)
    assert x.sum(1).dtype == dt.bfloat16 and x.mean().dtype == dt.bfloat16
    total = sum(exact)
    assert abs(x.sum().item() - total) <= REL * total
    # mean may round the sum and then the quotient: two roundings.
    assert abs(x.mean().item() - total / x.numel()) <= 2 * REL * total / x.numel()
    assert x.amax(1).tolist() == [max(r) for r in x.float().tolist()]
    assert x.amin(0).tolist() == [min(c) for c in zip(*x.float().tolist())]


def test_matmul():
    a, b = rand_bf16((6, 40), 4), rand_bf16((40, 5), 5)
    got = (a @ b)
    assert got.dtype == dt.bfloat16
    ad, bd = a.double().tolist(), b.double().tolist()
    for i, row in enumerate(got.float().tolist()):
        for j, v in enumerate(row):
            terms = [ad[i][p] * bd[p][j] for p in range(40)]
            exact = sum(terms)
            # float32 accumulation of 40 terms, then one bf16 rounding.
            assert abs(v - exact) <= REL * abs(exact) + 40 * 2.0 ** -24 * sum(map(abs, terms)), (i, j, v, exact)


def mixed(a, b, c):
    return ((a + b) * 3 - c, (a * b).sum(1), a.float() / 4 + b, dt.maximum(a, c).exp(), a.amax(0),
            dt.softmax(a, -1), (a > 0).to(dt.bfloat16) * 0.3, a + c.to(dt.float16))


def factory(i):
    return rand_bf16((3, 8 + i), 10 + i), rand_bf16((3, 8 + i), 20 + i), rand_bf16((8 + i,), 30 + i)


def test_compiled_matches_eager_bit_for_bit():
    check_compiled(mixed, factory)
    for backend in ("eager", "cpu"):
        dt.reset()
        g = dt.jit(mixed, backend=backend)
        for i in range(3):
            args = factory(i)
            for got, want in zip(g(*args), mixed(*args)):
                assert got.dtype == want.dtype, (backend, got.dtype, want.dtype)
                assert got.float().tolist() == want.float().tolist(), backend
    sources = dt.kernels(g)
    assert any("dt::BFloat16" in s for s in sources), sources


def test_dlpack_round_trip_and_numpy_refusal():
    x = dt.tensor([1.5, -2.0, 3.25], dtype=dt.bfloat16)
    y = dt.from_dlpack(x)
    assert y.dtype == dt.bfloat16 and y.data_ptr() == x.data_ptr() and y.tolist() == [1.5, -2.0, 3.25]
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        t = torch.from_dlpack(x)
        assert t.dtype == torch.bfloat16 and t.tolist() == [1.5, -2.0, 3.25]
        back = dt.from_dlpack(torch.tensor([0.5, 7.0], dtype=torch.bfloat16))
        assert back.dtype == dt.bfloat16 and back.tolist() == [0.5, 7.0]
    require_numpy()
    assert_raises(TypeError, x.numpy, match=("BFloat16",))


def test_cuda_stand_in_driver_kernels():
    from test_cuda_runtime import run_compiled_with_fake_driver
    run_compiled_with_fake_driver("""
        x, y = (dt.randn(5, 7) * 4).to(dt.bfloat16), dt.randn(5, 7).to(dt.bfloat16)
        assert (x.cuda() * y.cuda() + 1).cpu().tolist() == (x * y + 1).tolist()
        assert x.cuda().sum(1).cpu().tolist() == x.sum(1).tolist()
    """)


def test_cuda_stand_in_driver_copies_and_cublas():
    from test_cuda_runtime import run_with_fake_driver
    run_with_fake_driver("""
        x = (dt.randn(5, 7) * 4).to(dt.bfloat16)
        for view in (x, x.T, x[1:4, ::2]):
            g = view.cuda()
            assert g.dtype == dt.bfloat16 and g.cpu().tolist() == view.tolist()
        # bf16 operands multiply with float32 compute (CUDA_R_16BF, CUBLAS_COMPUTE_32F) and round
        # once to bf16: a relative error of 2^-8 either way, so 2^-7.
        h, hw = dt.randn(4, 3, 5).to(dt.bfloat16), dt.randn(5, 6).to(dt.bfloat16)
        got, want = (h.cuda() @ hw.cuda()).cpu().float(), (h @ hw).float()
        assert got.shape == want.shape
        assert all(abs(a - b) <= 2.0 ** -7 * (1 + abs(b)) for a, b in zip(got.flatten().tolist(), want.flatten().tolist()))
    """)


NVRTC_CHILD = """
import dyntrace as dt
def f(a, b):
    return (a + b) * 3 - a / b, a.amax(0), (a < b).sum(), a.to(dt.float32) / 4, -b, (a * b).sum(1), a.exp()
g = dt.jit(f, backend="cpu")
a = dt.randn(3, 70).to(dt.bfloat16)
b = (dt.rand(3, 70) + 1).to(dt.bfloat16)
g(a, b)
sources = dt.kernels(g, target="cuda")
assert any("dt::BFloat16" in s for s in sources), sources
s = dt.stats()
print("NVRTC", s["nvrtc_checked"], s["nvrtc_failures"])
"""


def test_cuda_kernels_for_bfloat16_compile_with_nvrtc():
    from cpulib import assert_cuda_kernels_compile
    assert_cuda_kernels_compile(NVRTC_CHILD)
