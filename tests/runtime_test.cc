// Unit tests of the C++ runtime and op registry, against independent references: the compiler's
// own _Float16, <cmath>, closed-form sums, and hand-derived PyTorch promotion results.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <random>

#include "gtest/gtest.h"
#include "graph/op_registry.h"
#include "runtime/allocator.h"
#include "runtime/copy.h"
#include "runtime/dtype.h"
#include "runtime/half.h"
#include "runtime/mersenne_twister.h"
#include "runtime/random.h"
#include "runtime/scalar_math.h"
#include "runtime/tensor.h"

namespace dt {
namespace {

Tensor FromVector(const std::vector<float>& v, Dims shape) {
  Tensor t = Tensor::Empty(shape, DType::kFloat32, Device::Cpu());
  std::copy(v.begin(), v.end(), t.data_as<float>());
  return t;
}

std::vector<double> ToVector(const Tensor& t) {
  Tensor c = Contiguous(CastTo(t, DType::kFloat64));
  return std::vector<double>(c.data_as<double>(), c.data_as<double>() + c.numel());
}

// The block generator is std::mt19937_64 word for word: across seeds (0 and a full-width one),
// and across reads of every length that straddles the 312-word state in different places.
TEST(MersenneTwister64, DrawsStdMt19937_64sSequence) {
  for (uint64_t seed : {uint64_t{0}, uint64_t{0x5eed}, uint64_t{0xFEDCBA9876543210}}) {
    std::mt19937_64 reference(seed);
    MersenneTwister64 blocks(seed);
    uint64_t words[1000];
    int64_t drawn = 0;
    for (int64_t count : {1, 311, 2, 312, 313, 1000, 0, 7, 624}) {
      blocks.Fill(words, count);
      for (int64_t i = 0; i < count; ++i) ASSERT_EQ(words[i], reference()) << "seed " << seed << " word " << drawn + i;
      drawn += count;
    }
    blocks.Seed(seed + 1);
    reference.seed(seed + 1);
    for (int i = 0; i < 700; ++i) ASSERT_EQ(blocks.Next(), reference()) << "reseeded, word " << i;
  }
}

// rand() keeps the numbers a seed always gave: 53 bits of each std::mt19937_64 word, rounded to
// the tensor's dtype; randn() the Box-Muller pair of two consecutive words.
TEST(Random, SamplesFollowTheSeededSequence) {
  ManualSeed(42);
  Tensor u = Tensor::Empty({700}, DType::kFloat32, Device::Cpu());
  FillUniform(u);
  Tensor z = Tensor::Empty({300}, DType::kFloat64, Device::Cpu());
  FillNormal(z);
  std::mt19937_64 reference(42);
  for (int64_t i = 0; i < u.numel(); ++i) {
    const double want = static_cast<double>(reference() >> 11) * 0x1.0p-53;
    ASSERT_EQ(u.data_as<float>()[i], static_cast<float>(want)) << i;
  }
  for (int64_t i = 0; i < z.numel(); ++i) {
    const double u1 = 1.0 - static_cast<double>(reference() >> 11) * 0x1.0p-53;
    const double u2 = static_cast<double>(reference() >> 11) * 0x1.0p-53;
    ASSERT_EQ(z.data_as<double>()[i], std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2)) << i;
  }
}

TEST(Half, EveryBitPatternRoundTrips) {
  for (uint32_t bits = 0; bits < 65536; ++bits) {
    const float f = Half::ToFloat(static_cast<uint16_t>(bits));
    if (std::isnan(f)) continue;
    EXPECT_EQ(Half::FromFloat(f), bits) << bits;
  }
}

TEST(Half, RoundsLikeTheCompiler) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> mag(-20.0f, 20.0f);
  for (int i = 0; i < 200000; ++i) {
    const float f = std::ldexp(1.0f + (rng() % 1000) / 1000.0f, static_cast<int>(mag(rng))) *
                    (rng() % 2 ? 1.0f : -1.0f);
    const _Float16 reference = static_cast<_Float16>(f);
    uint16_t ref_bits;
    std::memcpy(&ref_bits, &reference, 2);
    EXPECT_EQ(Half::FromFloat(f), ref_bits) << f;
  }
}

// Distance in float32 units in the last place between `got` and the exact `reference`.
double UlpError(float got, double reference) {
  const float rounded = static_cast<float>(reference);
  const double ulp = std::nextafter(std::fabs(rounded), INFINITY) - std::fabs(rounded);
  return std::fabs(static_cast<double>(got) - reference) / ulp;
}

// Every 61st float32 bit pattern (about 70 million values, both signs, all exponents).
template <typename Fn>
double WorstUlpOverFloats(float (*approx)(float), Fn exact, float* worst_at) {
  double worst = 0;
  for (uint64_t bits = 0; bits <= 0xffffffffull; bits += 61) {
    float x;
    const uint32_t b = static_cast<uint32_t>(bits);
    std::memcpy(&x, &b, 4);
    const float got = approx(x);
    const double reference = exact(static_cast<double>(x));
    if (std::isnan(x)) {
      EXPECT_TRUE(std::isnan(got)) << x;
      continue;
    }
    if (std::isinf(reference) || std::fabs(reference) > 3.4e38) {
      EXPECT_EQ(got, static_cast<float>(reference)) << x;
      continue;
    }
    const double err = UlpError(got, reference);
    if (err > worst) {
      worst = err;
      *worst_at = x;
    }
  }
  return worst;
}

TEST(ScalarMath, VectorisableExpTanhAndErfStayAccurate) {
  float at = 0;
  const double exp_error = WorstUlpOverFloats(dt::scalar::exp_f32, [](double x) { return std::exp(x); }, &at);
  EXPECT_LE(exp_error, 2.0) << "exp_f32 at " << at;
  const double tanh_error = WorstUlpOverFloats(dt::scalar::tanh_f32, [](double x) { return std::tanh(x); }, &at);
  EXPECT_LE(tanh_error, 6.5) << "tanh_f32 at " << at;
  EXPECT_EQ(dt::scalar::tanh_f32(INFINITY), 1.0f);
  EXPECT_EQ(dt::scalar::tanh_f32(-INFINITY), -1.0f);
  EXPECT_TRUE(std::signbit(dt::scalar::tanh_f32(-0.0f)));
  const double erf_error = WorstUlpOverFloats(dt::scalar::erf_f32, [](double x) { return std::erf(x); }, &at);
  EXPECT_LE(erf_error, 2.5) << "erf_f32 at " << at;
  EXPECT_EQ(dt::scalar::erf_f32(INFINITY), 1.0f);
  EXPECT_EQ(dt::scalar::erf_f32(-INFINITY), -1.0f);
  EXPECT_TRUE(std::signbit(dt::scalar::erf_f32(-0.0f)));
  std::printf("worst errors over every 61st float: exp %.2f ulp, tanh %.2f ulp, erf %.2f ulp\n", exp_error,
              tanh_error, erf_error);
}

// gelu_backward's float path shares one exponential between the normal density and erf. Error
// model, absolute (units of 2^-24, half an ulp of 1): Phi = (1 + erf) / 2 carries erf's 2.5 ulp
// of a value below 1 halved (1.25) plus the rounding of 1 + erf (0.5); x phi(x) <= 0.25 carries
// exp's 2 ulp and three roundings, 5 ulp of a value below 0.25 (1.25); the final sum rounds a
// value below 1.13 (1): 4 in all.
TEST(ScalarMath, GeluBackwardStaysWithinItsErrorModel) {
  const double bound = 4 * std::ldexp(1.0, -24);
  double worst = 0;
  float worst_at = 0;
  for (uint64_t bits = 0; bits <= 0xffffffffull; bits += 61) {
    float x;
    const uint32_t b = static_cast<uint32_t>(bits);
    std::memcpy(&x, &b, 4);
    // NaN stays NaN; at infinities x phi(x) is inf * 0, NaN as in the generic formula.
    if (std::isnan(x) || std::isinf(x)) {
      EXPECT_TRUE(std::isnan(dt::scalar::gelu_backward(1.0f, x))) << x;
      continue;
    }
    const double xd = x;
    const double exact = xd * xd > 1e4 ? (xd > 0 ? 1.0 : 0.0)
                                       : 0.5 * (1 + std::erf(xd / std::sqrt(2.0))) +
                                             xd * std::exp(-0.5 * xd * xd) / std::sqrt(2 * M_PI);
    const double err = std::fabs(dt::scalar::gelu_backward(1.0f, x) - exact);
    if (std::isnan(err) || err > worst) {
      worst = err;
      worst_at = x;
    }
  }
  EXPECT_LE(worst, bound) << "gelu_backward at " << worst_at;
  std::printf("gelu_backward: worst absolute error %.3g over every 61st float (bound %.3g)\n", worst, bound);
}

TEST(Promotion, FollowsPyTorch) {
  EXPECT_EQ(PromoteTypes(DType::kInt32, DType::kInt64), DType::kInt64);
  EXPECT_EQ(PromoteTypes(DType::kInt64, DType::kFloat16), DType::kFloat16);
  EXPECT_EQ(PromoteTypes(DType::kBool, DType::kInt32), DType::kInt32);
  EXPECT_EQ(PromoteTypes(DType::kFloat16, DType::kFloat32), DType::kFloat32);
  auto result = [](std::vector<std::pair<DType, bool>> tensors, std::vector<DType> numbers) {
    ResultTypeState s;
    for (auto [d, zero_dim] : tensors) s.AddTensor(d, zero_dim);
    for (DType n : numbers) s.AddWrappedNumber(n);
    return s.Result();
  };
  // int32 tensor * 2.5 -> default float; float16 tensor + 1.0 stays float16.
  EXPECT_EQ(result({{DType::kInt32, false}}, {DType::kFloat64}), DType::kFloat32);
  EXPECT_EQ(result({{DType::kFloat16, false}}, {DType::kFloat64}), DType::kFloat16);
  EXPECT_EQ(result({{DType::kInt32, false}}, {DType::kInt64}), DType::kInt32);
  EXPECT_EQ(result({{DType::kBool, false}}, {DType::kInt64}), DType::kInt64);
  // A 0-d float64 tensor does not widen a float32 tensor, but does lift an int tensor.
  EXPECT_EQ(result({{DType::kFloat32, false}, {DType::kFloat64, true}}, {}), DType::kFloat32);
  EXPECT_EQ(result({{DType::kInt32, false}, {DType::kFloat64, true}}, {}), DType::kFloat64);
  EXPECT_TRUE(CanCast(DType::kInt32, DType::kFloat32));
  EXPECT_FALSE(CanCast(DType::kFloat32, DType::kInt64));
  EXPECT_FALSE(CanCast(DType::kInt64, DType::kBool));
}

TEST(Shapes, BroadcastAndViews) {
  EXPECT_EQ(*BroadcastShapes({3, 1}, {1, 4}), (Dims{3, 4}));
  EXPECT_EQ(*BroadcastShapes({5}, {2, 1, 5}), (Dims{2, 1, 5}));
  auto bad = BroadcastShapes({3}, {4});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("[3]"), absl::string_view::npos);
  EXPECT_NE(bad.status().message().find("[4]"), absl::string_view::npos);
  // A transposed [3, 4] (strides 1, 3) cannot be viewed as [12] but can split its dims.
  EXPECT_FALSE(ViewStrides({4, 3}, {1, 4}, {12}).has_value());
  EXPECT_EQ(*ViewStrides({4, 3}, {3, 1}, {2, 2, 3}), (Dims{6, 3, 1}));
  EXPECT_EQ(*InferReshape({-1, 4}, 12, {12}), (Dims{3, 4}));
  EXPECT_FALSE(InferReshape({5, -1}, 12, {12}).ok());
  EXPECT_EQ(*NormalizeDim(-1, 3), 2);
  EXPECT_FALSE(NormalizeDim(3, 3).ok());
}

TEST(Allocator, AlignsAndReusesBlocks) {
  HostAllocator& a = HostAllocator::Get();
  void* p = a.Allocate(1000);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kHostAlignment, 0u);
  a.Free(p, 1000);
  const int64_t hits = a.Stats().cache_hits;
  void* q = a.Allocate(1000);
  EXPECT_EQ(q, p);
  EXPECT_EQ(a.Stats().cache_hits, hits + 1);
  a.Free(q, 1000);
}

TEST(Registry, EveryOpIsWellFormed) {
  const OpRegistry& r = OpRegistry::Get();
  EXPECT_GT(r.ops().size(), 90u);
  for (const auto& op : r.ops()) {
    EXPECT_NE(op->eager, nullptr) << op->name();
    if (op->kind == OpKind::kPointwise) {
      EXPECT_FALSE(op->pointwise.scalar_fn.empty()) << op->name();
      EXPECT_NE(op->pointwise.loops[static_cast<int>(DType::kFloat32)], nullptr) << op->name();
      EXPECT_NE(op->pointwise.loops[static_cast<int>(DType::kFloat16)], nullptr) << op->name();
    }
    EXPECT_EQ(r.Find(op->name()), op.get());
  }
}

// Each unary float op against <cmath>, on odd-sized random inputs and a transposed view.
TEST(Eager, UnaryOpsMatchCmath) {
  const std::map<std::string, std::function<double(double)>> reference = {
      {"exp", [](double x) { return std::exp(x); }},
      {"log1p", [](double x) { return std::log1p(std::abs(x)); }},
      {"sin", [](double x) { return std::sin(x); }},
      {"tanh", [](double x) { return std::tanh(x); }},
      {"sigmoid", [](double x) { return 1 / (1 + std::exp(-x)); }},
      {"silu", [](double x) { return x / (1 + std::exp(-x)); }},
      {"erf", [](double x) { return std::erf(x); }},
      {"_gelu_erf", [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }},
      {"round", [](double x) { return std::nearbyint(x * 3) ; }},
      {"relu", [](double x) { return x > 0 ? x : 0; }},
      {"square", [](double x) { return x * x; }},
  };
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-4, 4);
  std::vector<float> values(7 * 13);
  for (float& v : values) v = dist(rng);
  for (const auto& [name, fn] : reference) {
    Tensor base = FromVector(values, {7, 13});
    Tensor input = base.AsStrided({13, 7}, {1, 13}, 0);  // transposed view
    if (name == "log1p") input = *Call("abs", {input});
    if (name == "round") input = *Call("mul", {input, Scalar::Int(3)});
    auto out = Call(name, {input});
    ASSERT_TRUE(out.ok()) << name << ": " << out.status();
    EXPECT_EQ(out->sizes(), (Dims{13, 7}));
    const std::vector<double> got = ToVector(*out);
    for (int64_t i = 0; i < 13; ++i) {
      for (int64_t j = 0; j < 7; ++j) {
        const double x = values[j * 13 + i];
        const double want = name == "round" ? std::nearbyint(static_cast<float>(x * 3)) : fn(x);
        EXPECT_NEAR(got[i * 7 + j], want, 1e-5 * (1 + std::abs(want))) << name << " at " << x;
      }
    }
  }
}

TEST(Eager, ReductionsMatchClosedForms) {
  const int64_t n = 1001;
  auto t = Call("arange", {Scalar::Int(n), None{}, Scalar::Int(1), DType::kFloat64, None{}});
  ASSERT_TRUE(t.ok());
  auto s = Call("sum", {*t});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(ToVector(*s)[0], n * (n - 1) / 2.0);
  auto grid = Call("reshape", {t->AsStrided({1000}, {1}, 1), Dims{10, 100}});
  ASSERT_TRUE(grid.ok());
  auto cols = Call("sum", {*grid, Dims{0}});  // sums down columns: 10 rows of i*100+j+1
  ASSERT_TRUE(cols.ok());
  const auto c = ToVector(*cols);
  for (int j = 0; j < 100; ++j) EXPECT_EQ(c[j], 10 * (j + 1) + 100 * 45) << j;
  auto mx = Call("amax", {*grid, Dims{1}});
  ASSERT_TRUE(mx.ok());
  EXPECT_EQ(ToVector(*mx)[3], 400);
  auto am = Call("argmax", {*grid, Scalar::Int(1)});
  ASSERT_TRUE(am.ok());
  EXPECT_EQ(am->dtype(), DType::kInt64);
  EXPECT_EQ(ToVector(*am)[9], 99);
}

TEST(Eager, CopyConvertsAndBroadcasts) {
  Tensor src = FromVector({1.7f, -2.5f, 0.0f}, {3});
  Tensor dst = Tensor::Empty({2, 3}, DType::kInt32, Device::Cpu());
  ASSERT_TRUE(CopyInto(dst, src).ok());
  EXPECT_EQ(ToVector(dst), (std::vector<double>{1, -2, 0, 1, -2, 0}));
  Tensor b = CastTo(src, DType::kBool);
  EXPECT_EQ(ToVector(b), (std::vector<double>{1, 1, 0}));
  // Writing into an expanded view is refused instead of racing.
  Tensor expanded = src.AsStrided({2, 3}, {0, 1}, 0);
  EXPECT_FALSE(CopyInto(expanded, dst).ok());
}

TEST(Eager, IntegerDivisionByZeroIsAnError) {
  Tensor a = CastTo(FromVector({1, 2}, {2}), DType::kInt64);
  Tensor z = CastTo(FromVector({1, 0}, {2}), DType::kInt64);
  auto r = Call("floor_divide", {a, z});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("division by zero"), absl::string_view::npos);
}

TEST(Eager, MetaTensorsInferShapesWithoutData) {
  Tensor a = Tensor::Empty({4, 1, 3}, DType::kFloat16, Device::Meta());
  Tensor b = Tensor::Empty({5, 1}, DType::kFloat32, Device::Meta());
  auto c = Call("add", {a, b});
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->is_meta());
  EXPECT_EQ(c->sizes(), (Dims{4, 5, 3}));
  EXPECT_EQ(c->dtype(), DType::kFloat32);
  auto s = Call("softmax", {*c, Scalar::Int(-1)});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->sizes(), (Dims{4, 5, 3}));
}

}  // namespace
}  // namespace dt
