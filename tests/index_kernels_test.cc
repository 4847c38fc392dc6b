// The index, sort and scan kernels (runtime/index_kernels.cuh) checked without a GPU.
//
// The kernel source is compiled here by the host compiler (tests/index_kernels_shim.h) and a
// runner executes each launch as loops over blocks and threads on host memory. With that runner
// installed, CPU tensors take the ops' device paths (graph/ops_*.cc -> runtime/
// cuda_index_kernels.cc -> these kernels), so every op is compared with its own CPU eager
// result on the same random inputs: ties, NaN, empty dims, negative, duplicate and out-of-range
// indices, non-contiguous and broadcast operands. Small blocks and a capped grid make every
// kernel's grid-stride loop take several turns.
//
// Also: the whole kernel source compiles with NVRTC for every dtype (skipped without NVRTC).
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/op_registry.h"
#include "graph/pointwise.h"
#include "gtest/gtest.h"
#include "runtime/advanced_indexing.h"
#include "runtime/copy.h"
#include "runtime/cuda_index_kernels.h"
#include "runtime/nvrtc.h"
#include "runtime/random.h"
#include "tests/index_kernels_shim.h"

namespace dt {
namespace {

using KernelFn = void (*)(const IxArgs&);

template <typename T>
KernelFn TypedKernel(absl::string_view name) {
#define DT_IX_MATCH(kernel) \
  if (name == #kernel) return &ix::kernel<T>;
  DT_IX_TYPED_KERNELS(DT_IX_MATCH)
#undef DT_IX_MATCH
  return nullptr;
}

KernelFn UntypedKernel(absl::string_view name) {
#define DT_IX_MATCH(kernel) \
  if (name == #kernel) return &ix::kernel;
  DT_IX_UNTYPED_KERNELS(DT_IX_MATCH)
#undef DT_IX_MATCH
  return nullptr;
}

// Runs launches as loops: 3 threads per block, at most 4 blocks.
class HostRunner final : public IndexKernelRunner {
 public:
  absl::Status Launch(absl::string_view name, DType dtype, const IxArgs& args) override {
    KernelFn fn = UntypedKernel(name);
    if (fn == nullptr) fn = DT_DISPATCH_ALL(dtype, [&] { return TypedKernel<scalar_t>(name); });
    if (fn == nullptr) return absl::InternalError(absl::StrCat("no kernel ", name));
    ++launches;
    constexpr unsigned kThreads = 3, kMaxBlocks = 4;
    const int64_t wanted = (args.numel + kThreads - 1) / kThreads;
    const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(std::max<int64_t>(wanted, 1), kMaxBlocks));
    blockDim.x = kThreads;
    gridDim.x = blocks;
    for (unsigned b = 0; b < blocks; ++b) {
      for (unsigned t = 0; t < kThreads; ++t) {
        blockIdx.x = b;
        threadIdx.x = t;
        fn(args);
      }
    }
    return absl::OkStatus();
  }
  absl::Status Memset(void* device, unsigned char value, size_t bytes) override {
    std::memset(device, value, bytes);
    return absl::OkStatus();
  }
  absl::Status Read(void* host, const void* device, size_t bytes) override {
    std::memcpy(host, device, bytes);
    return absl::OkStatus();
  }
  int64_t launches = 0;
};

// Installs the runner for one scope.
class Emulated {
 public:
  explicit Emulated(HostRunner* runner) { SetHostIndexKernelRunnerForTesting(runner); }
  ~Emulated() { SetHostIndexKernelRunnerForTesting(nullptr); }
};

// ---- inputs ----

// Integer-valued elements in [low, high] (sums and means of them are exact in every order), a
// share of them NaN for floating dtypes.
Tensor Random(const Dims& sizes, DType dtype, std::mt19937& rng, int low = -3, int high = 3, double nans = 0.0) {
  Tensor t = Tensor::Empty(sizes, DType::kFloat64, Device::Cpu());
  std::uniform_int_distribution<int> value(low, high);
  std::uniform_real_distribution<double> chance(0.0, 1.0);
  for (int64_t i = 0; i < t.numel(); ++i) {
    t.data_as<double>()[i] = chance(rng) < nans ? std::nan("") : value(rng);
  }
  return CastTo(t, dtype);
}

// Real-valued floats (for scans, whose sums round).
Tensor RandomReal(const Dims& sizes, DType dtype, std::mt19937& rng) {
  Tensor t = Tensor::Empty(sizes, DType::kFloat64, Device::Cpu());
  std::normal_distribution<double> value(0.0, 1.5);
  for (int64_t i = 0; i < t.numel(); ++i) t.data_as<double>()[i] = value(rng);
  return CastTo(t, dtype);
}

Tensor Ints(const std::vector<int64_t>& values, const Dims& sizes, DType dtype = DType::kInt64) {
  Tensor t = Tensor::Empty(sizes, DType::kInt64, Device::Cpu());
  std::memcpy(t.data(), values.data(), values.size() * sizeof(int64_t));
  return CastTo(t, dtype);
}

Tensor Transposed(const Tensor& t) {  // the same values, column-major
  return t.AsStrided({t.size(1), t.size(0)}, {t.stride(1), t.stride(0)}, t.offset());
}

std::vector<double> Values(const Tensor& t) {
  const Tensor d = Contiguous(CastTo(t, DType::kFloat64));
  return std::vector<double>(d.data_as<double>(), d.data_as<double>() + d.numel());
}

// ---- comparing a device path with the CPU path ----

absl::StatusOr<OpResult> CallFull(absl::string_view name, std::vector<ArgValue> args) {
  const OpDef* op = OpRegistry::Get().Find(name);
  if (op == nullptr) return absl::InternalError(absl::StrCat("no op ", name));
  for (size_t i = args.size(); i < op->schema.params.size(); ++i) args.push_back(*op->schema.params[i].default_value);
  return CallOp(*op, OpArgs(std::move(args)));
}

// Element i of `got` may differ from `want` by tolerance[i] (empty: exact; NaN equals NaN).
void ExpectClose(const Tensor& got, const Tensor& want, const std::vector<double>& tolerance, const std::string& what) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  const std::vector<double> g = Values(got), w = Values(want);
  for (size_t i = 0; i < g.size(); ++i) {
    const double allowed = tolerance.empty() ? 0.0 : tolerance[i];
    const bool same = g[i] == w[i] || (std::isnan(g[i]) && std::isnan(w[i])) || std::abs(g[i] - w[i]) <= allowed;
    ASSERT_TRUE(same) << what << ": element " << i << " is " << g[i] << ", the CPU gives " << w[i];
  }
}

// Runs op(args) on the CPU and through the kernels; both must fail alike or give equal results.
void Compare(HostRunner& runner, absl::string_view name, std::vector<ArgValue> args, const std::string& what,
             std::vector<double> tolerance = {}) {
  absl::StatusOr<OpResult> want = CallFull(name, args);
  const int64_t before = runner.launches;
  absl::StatusOr<OpResult> got;
  {
    Emulated on(&runner);
    got = CallFull(name, args);
  }
  const std::string label = absl::StrCat(name, " ", what);
  ASSERT_EQ(got.ok(), want.ok()) << label << ": " << got.status() << " vs " << want.status();
  if (!want.ok()) {
    EXPECT_EQ(got.status().message(), want.status().message()) << label;
    return;
  }
  bool empty = true;
  for (const Tensor& t : *want) empty = empty && t.numel() == 0;
  if (!empty) EXPECT_GT(runner.launches, before) << label << " launched no kernel";
  ASSERT_EQ(got->size(), want->size()) << label;
  for (size_t i = 0; i < want->size(); ++i) ExpectClose((*got)[i], (*want)[i], tolerance, label);
}

class IndexKernelsTest : public ::testing::Test {
 protected:
  HostRunner runner;
  std::mt19937 rng{19};
};

TEST_F(IndexKernelsTest, GatherSelectTakeAndEmbeddingMatchTheCpu) {
  for (DType dtype : {DType::kFloat32, DType::kInt64, DType::kFloat16, DType::kBool, DType::kInt8}) {
    const Tensor x = Random({5, 7}, dtype, rng, -3, 3, 0.1);
    const Tensor index = Random({4, 7}, DType::kInt64, rng, 0, 4);
    Compare(runner, "gather", {x, Scalar::Int(0), index}, "dim 0");
    Compare(runner, "gather", {Transposed(x), Scalar::Int(1), Random({7, 3}, DType::kInt64, rng, 0, 4)}, "transposed");
    Compare(runner, "gather", {x, Scalar::Int(1), Random({5, 0}, DType::kInt64, rng, 0, 6)}, "empty index");
    Compare(runner, "index_select", {x, Scalar::Int(1), Ints({6, -1, 0, 6, -7}, {5})}, "negative, repeated");
    Compare(runner, "index_select", {x, Scalar::Int(0), Ints({2, 0}, {2}, DType::kInt32)}, "int32 index");
    Compare(runner, "take_along_dim", {x, Random({5, 2}, DType::kInt64, rng, -7, 6), Scalar::Int(1)}, "negative");
    Compare(runner, "take_along_dim", {x, Random({1, 7}, DType::kInt64, rng, 0, 4), Scalar::Int(0)}, "broadcast");
    Compare(runner, "embedding", {Random({2, 3}, DType::kInt64, rng, 0, 4), x}, "2-d indices");
  }
}

TEST_F(IndexKernelsTest, OutOfRangeIndicesRaiseTheCpuErrorAndWriteNothing) {
  const Tensor x = Random({4, 6}, DType::kFloat32, rng);
  Compare(runner, "gather", {x, Scalar::Int(1), Ints({0, 6, 1, -1}, {1, 4})}, "6 of 6");
  Compare(runner, "gather", {x, Scalar::Int(0), Ints({-1}, {1, 1})}, "negative");
  Compare(runner, "index_select", {x, Scalar::Int(0), Ints({1, -5, 9}, {3})}, "-5 of 4");
  Compare(runner, "embedding", {Ints({1, 4}, {2}), x}, "row 4 of 4");
  Compare(runner, "scatter_add", {x, Scalar::Int(1), Ints({2, 7}, {1, 2}), x}, "7 of 6");
  Compare(runner, "index_add", {x, Scalar::Int(0), Ints({0, 4}, {2}), x.AsStrided({2, 6}, {6, 1}, 0)}, "4 of 4");
  Compare(runner, "index_copy", {x, Scalar::Int(1), Ints({-1}, {1}), x.AsStrided({4, 1}, {6, 1}, 0)}, "negative");
  Compare(runner, "searchsorted", {Ints({0, 1, 2}, {3}), Ints({1}, {1}), Scalar::Bool(false), Scalar::Bool(false),
                                   ArgValue(), Ints({0, 3, 1}, {3})}, "sorter 3 of 3");
  // In place: an out-of-range index leaves the target as it was.
  Tensor target = Clone(x);
  {
    Emulated on(&runner);
    const std::vector<IndexItem> items{IndexItem{.kind = IndexItem::Kind::kTensor, .index = 0}};
    absl::Status s = IndexPut(target, items, {Ints({1, 3, 4}, {3})}, Random({3, 6}, DType::kFloat32, rng), false);
    EXPECT_EQ(s.message(), "index 4 is out of bounds for dimension 0 with size 4");
  }
  ExpectClose(target, x, {}, "target after a refused write");
}

// Inside a CUDA-graph capture the check of an index the caller passes is recorded, the kernel
// runs (skipping the bad index), and the recorded check, run before a launch, raises the error
// the op would have raised, reading the index memory as it is then.
TEST_F(IndexKernelsTest, DeferredChecksOfTheCallersIndicesRunBeforeALaunch) {
  const Tensor x = Random({4, 6}, DType::kFloat32, rng);
  const Tensor index = Ints({0, 6, 1, -1}, {1, 4});
  absl::StatusOr<OpResult> eager = CallFull("gather", {x, Scalar::Int(1), index});
  ASSERT_FALSE(eager.ok());
  Emulated on(&runner);
  GraphIndexChecks checks;
  checks.caller_storage.insert(index.storage().get());
  {
    DeferredIndexChecks deferred(&checks);
    absl::StatusOr<OpResult> deferred_run = CallFull("gather", {x, Scalar::Int(1), index});
    ASSERT_TRUE(deferred_run.ok()) << deferred_run.status();
  }
  ASSERT_EQ(checks.before_launch.size(), 1u);
  EXPECT_TRUE(checks.in_graph.empty());
  EXPECT_EQ(checks.before_launch[0]().message(), eager.status().message());
  // Fixed in place (a new batch copied into the captured buffer): the same check now passes.
  index.data_as<int64_t>()[1] = 5;
  index.data_as<int64_t>()[3] = 2;
  EXPECT_TRUE(checks.before_launch[0]().ok());
  // Outside any scope nothing is deferred.
  EXPECT_TRUE(CallFull("gather", {x, Scalar::Int(1), index}).ok());
}

// An index the graph computes is checked by kernels captured with the graph, into a slot that
// ReadInGraphIndexChecks reads after the launch: eager's error, then clear slots again.
TEST_F(IndexKernelsTest, InGraphChecksReportTheFirstBadIndexAfterTheLaunch) {
  const Tensor x = Random({4, 6}, DType::kFloat32, rng);
  const Tensor index = Ints({0, 6, 1, -7, 9}, {1, 5});
  absl::StatusOr<OpResult> eager = CallFull("gather", {x, Scalar::Int(1), index});
  ASSERT_FALSE(eager.ok());
  EXPECT_EQ(eager.status().message(), "index 6 is out of bounds for dimension 1 with size 6");
  Emulated on(&runner);
  GraphIndexChecks checks;
  checks.slots = Tensor::Empty({GraphIndexChecks::kMaxInGraph, 2}, DType::kInt64, Device::Cpu());
  std::memset(checks.slots.data(), 0xff, GraphIndexChecks::kMaxInGraph * 2 * sizeof(int64_t));
  const int64_t launches_before = runner.launches;
  {
    DeferredIndexChecks deferred(&checks);
    ASSERT_TRUE(CallFull("gather", {x, Scalar::Int(1), index}).ok());
  }
  EXPECT_TRUE(checks.before_launch.empty());
  ASSERT_EQ(checks.in_graph.size(), 1u);
  EXPECT_EQ(runner.launches - launches_before, 3);  // find, read the value, the gather itself
  EXPECT_EQ(ReadInGraphIndexChecks(checks).message(), eager.status().message());
  for (int64_t i = 0; i < 2 * GraphIndexChecks::kMaxInGraph; ++i) EXPECT_EQ(checks.slots.data_as<int64_t>()[i], -1);
  EXPECT_TRUE(ReadInGraphIndexChecks(checks).ok());
}

TEST_F(IndexKernelsTest, AdvancedIndexingReadsAndWritesMatchTheCpu) {
  const Tensor x = Random({4, 5, 6}, DType::kFloat64, rng, -3, 3, 0.1);
  const Tensor i = Ints({3, -1, 0, 3}, {2, 2}), j = Ints({5, 0}, {2}, DType::kInt32);
  using K = IndexItem::Kind;
  const IndexItem t0{.kind = K::kTensor, .index = 0}, t1{.kind = K::kTensor, .index = 1}, all{.kind = K::kSlice};
  const IndexItem list{.kind = K::kIntList, .values = {1, -2, 1}}, step{.kind = K::kSlice, .start = 1, .step = 2};
  const IndexItem mask{.kind = K::kTensor, .index = 2}, t3{.kind = K::kTensor, .index = 3};
  const Tensor bools = CastTo(Ints({1, 0, 0, 1, 0}, {5}), DType::kBool);  // two True, as j has two
  const std::vector<std::pair<std::vector<IndexItem>, std::string>> cases = {
      {{t0}, "x[i]"}, {{all, step, t1}, "x[:, 1::2, j] (B last)"}, {{t0, all, t1}, "x[i, :, j] (B first)"},
      {{all, list}, "x[:, [1, -2, 1]]"}, {{t3, mask}, "x[k, mask]"}, {{all, mask, t1}, "x[:, mask, j]"}};
  for (const auto& [items, what] : cases) {
    const std::vector<Tensor> tensors{i, j, bools, Ints({3, -4}, {2})};
    absl::StatusOr<Tensor> want = IndexGather(x, items, tensors);
    ASSERT_TRUE(want.ok()) << what << want.status();
    absl::StatusOr<Tensor> got;
    {
      Emulated on(&runner);
      got = IndexGather(x, items, tensors);
    }
    ASSERT_TRUE(got.ok()) << what << got.status();
    ExpectClose(*got, *want, {}, "read " + what);
    for (bool accumulate : {false, true}) {
      const Tensor values = Random({1, want->size(want->ndim() - 1)}, DType::kFloat64, rng);  // broadcast
      Tensor on_cpu = Clone(x), on_device = Clone(x);
      ASSERT_TRUE(IndexPut(on_cpu, items, tensors, values, accumulate).ok());
      {
        Emulated on(&runner);
        ASSERT_TRUE(IndexPut(on_device, items, tensors, values, accumulate).ok());
      }
      ExpectClose(on_device, on_cpu, {}, absl::StrCat("write ", what, accumulate ? " +=" : " ="));
    }
  }
}

TEST_F(IndexKernelsTest, ScattersWithDuplicatesMatchTheCpuForEveryFold) {
  for (DType dtype : {DType::kFloat32, DType::kInt64, DType::kFloat16, DType::kInt16}) {
    const Tensor x = Random({4, 6}, dtype, rng, -3, 3, 0.05);
    const Tensor index = Random({3, 6}, DType::kInt64, rng, 0, 3);  // many duplicates along dim 0
    const Tensor src = Random({3, 7}, dtype, rng, -2, 2, 0.05);     // larger than the index
    const std::string d(DTypeName(dtype));
    Compare(runner, "scatter", {x, Scalar::Int(0), index, src}, d);
    Compare(runner, "scatter.value", {x, Scalar::Int(1), Random({4, 2}, DType::kInt64, rng, 0, 5), Scalar::Int(2)}, d);
    Compare(runner, "scatter_add", {Transposed(Random({6, 4}, dtype, rng)), Scalar::Int(0), index, src}, d);
    for (const char* fold : {"sum", "prod", "mean", "amax", "amin"}) {
      for (bool self : {true, false}) {
        Compare(runner, "scatter_reduce", {x, Scalar::Int(0), index, src, std::string(fold), Scalar::Bool(self)},
                absl::StrCat(d, " ", fold, self ? " with self" : " without self"));
      }
    }
    const Tensor rows = Random({5, 6}, dtype, rng);
    Compare(runner, "index_add", {x, Scalar::Int(0), Ints({3, 0, 3, 1, 3}, {5}), rows, Scalar::Int(2)}, d);
    Compare(runner, "index_copy", {x, Scalar::Int(0), Ints({2, 0, 2, 1, 2}, {5}), rows}, d + " last wins");
    Compare(runner, "index_copy", {x, Scalar::Int(1), Ints({4}, {}), Random({4}, dtype, rng)}, d + " 0-d index");
  }
  Compare(runner, "index_add", {Random({3, 4}, DType::kFloat64, rng), Scalar::Int(1), Ints({1, 1, 0}, {3}),
                                Random({3, 3}, DType::kFloat64, rng), Scalar::Float(0.5)}, "alpha 0.5");
}

TEST_F(IndexKernelsTest, OneHotMatchesTheCpuAndItsErrors) {
  Compare(runner, "one_hot", {Ints({0, 3, 1, 3, 2, 0}, {2, 3}), Scalar::Int(5)}, "5 classes");
  Compare(runner, "one_hot", {Ints({0, 3, 1}, {3}), Scalar::Int(-1)}, "inferred");
  Compare(runner, "one_hot", {Ints({1, -2, -3}, {3}), Scalar::Int(4)}, "negative");
  Compare(runner, "one_hot", {Ints({1, 7, 5}, {3}), Scalar::Int(4)}, "too large");
  Compare(runner, "one_hot", {Ints({}, {0}), Scalar::Int(-1)}, "empty, inferred");
}

TEST_F(IndexKernelsTest, SortsAreStableAndOrderNanAsTheCpu) {
  for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kInt32, DType::kBool, DType::kBFloat16}) {
    const std::string d(DTypeName(dtype));
    for (const Dims& sizes : {Dims{6, 13}, Dims{3, 1}, Dims{2, 0}, Dims{17}}) {
      const Tensor x = Random(sizes, dtype, rng, -2, 2, 0.2);  // ties and NaN
      for (bool descending : {false, true}) {
        Compare(runner, "sort", {x, Scalar::Int(-1), Scalar::Bool(descending)}, d);
        Compare(runner, "argsort", {x, Scalar::Int(0), Scalar::Bool(descending)}, d + " dim 0");
      }
      const int64_t n = sizes.back();
      Compare(runner, "topk", {x, Scalar::Int(std::min<int64_t>(3, n)), Scalar::Int(-1), Scalar::Bool(true)}, d);
      Compare(runner, "topk", {x, Scalar::Int(std::min<int64_t>(2, n)), Scalar::Int(-1), Scalar::Bool(false)}, d);
      if (n > 0) Compare(runner, "kthvalue", {x, Scalar::Int((n + 1) / 2), Scalar::Int(-1), Scalar::Bool(true)}, d);
    }
    Compare(runner, "sort", {Transposed(Random({9, 4}, dtype, rng, -2, 2, 0.2)), Scalar::Int(1)}, d + " transposed");
  }
}

// Hillis-Steele sums of n terms in double, rounded once into the result: element i may differ
// from the sequential sum by about ceil(log2 n) * eps(double) * sum of |x| up to i, plus half an
// ulp of the result's dtype where the two land on either side of a rounding boundary.
std::vector<double> ScanTolerance(const Tensor& x, double result_eps) {
  const std::vector<double> v = Values(x);
  const int64_t n = x.size(1);
  const double steps = std::ceil(std::log2(std::max<int64_t>(n, 2)));
  std::vector<double> tolerance(v.size());
  for (int64_t r = 0; r < x.size(0); ++r) {
    double prefix = 0, magnitude = 0;
    for (int64_t i = 0; i < n; ++i) {
      prefix += v[r * n + i];
      magnitude += std::abs(v[r * n + i]);
      tolerance[r * n + i] = steps * std::numeric_limits<double>::epsilon() * magnitude + result_eps * std::abs(prefix);
    }
  }
  return tolerance;
}

TEST_F(IndexKernelsTest, ScansMatchTheCpuWithinTheirRounding) {
  for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
    const Tensor x = RandomReal({3, 37}, dtype, rng);
    const double eps = dtype == DType::kFloat32 ? std::numeric_limits<float>::epsilon() : 0.0;
    Compare(runner, "cumsum", {x, Scalar::Int(1)}, std::string(DTypeName(dtype)), ScanTolerance(x, eps));
    // Products and log-sum-exps of the same terms: relative error of the same order per step.
    Compare(runner, "logcumsumexp", {x, Scalar::Int(1)}, "", ScanTolerance(x, 4 * eps + 1e-13));
    const Tensor small = RandomReal({2, 9}, dtype, rng);
    std::vector<double> relative;
    absl::StatusOr<OpResult> want = CallFull("cumprod", {small, Scalar::Int(1)});
    for (double w : Values((*want)[0])) relative.push_back((4 * eps + 1e-14) * std::abs(w));
    Compare(runner, "cumprod", {small, Scalar::Int(1)}, "", relative);
  }
  for (DType dtype : {DType::kInt32, DType::kInt64, DType::kBool, DType::kUInt8}) {
    const Tensor x = Random({4, 11}, dtype, rng, 0, 3);
    Compare(runner, "cumsum", {x, Scalar::Int(1)}, std::string(DTypeName(dtype)));
    Compare(runner, "cumprod", {Transposed(x), Scalar::Int(0)}, std::string(DTypeName(dtype)));
  }
  Compare(runner, "cumsum", {Random({4, 5}, DType::kInt32, rng), Scalar::Int(0), DType::kFloat64}, "dtype=");
  Compare(runner, "cumsum", {Random({0, 5}, DType::kFloat32, rng), Scalar::Int(1)}, "empty");
}

TEST_F(IndexKernelsTest, CumulativeAndArgExtremesFollowTheCpuTiesAndNan) {
  for (DType dtype : {DType::kFloat32, DType::kInt64, DType::kFloat16, DType::kBool}) {
    const std::string d(DTypeName(dtype));
    const Tensor x = Random({5, 19}, dtype, rng, -2, 2, 0.15);
    for (const char* op : {"cummax", "cummin"}) {
      Compare(runner, op, {x, Scalar::Int(1)}, d);
      Compare(runner, op, {x, Scalar::Int(0)}, d + " dim 0");
    }
    for (const char* op : {"argmax", "argmin"}) {
      Compare(runner, op, {x, Scalar::Int(1)}, d);
      Compare(runner, op, {Transposed(x), Scalar::Int(0), Scalar::Bool(true)}, d + " keepdim");
      Compare(runner, op, {x, ArgValue()}, d + " all");
    }
    Compare(runner, "max.dim", {x, Scalar::Int(1)}, d);
    Compare(runner, "min.dim", {x, Scalar::Int(0), Scalar::Bool(true)}, d);
  }
  Compare(runner, "argmax", {Random({0, 3}, DType::kFloat32, rng), ArgValue()}, "empty");
}

TEST_F(IndexKernelsTest, SearchesMatchTheCpu) {
  const Tensor sorted = Ints({-2, 0, 0, 1, 3, 3, 3, 8}, {8});
  const Tensor values = Random({3, 5}, DType::kFloat32, rng, -4, 9, 0.1);
  for (bool right : {false, true}) {
    Compare(runner, "searchsorted", {sorted, values, Scalar::Bool(false), Scalar::Bool(right)}, "1-d");
    Compare(runner, "searchsorted", {sorted, values, Scalar::Bool(true), Scalar::Bool(right)}, "int32 out");
    Compare(runner, "bucketize", {values, sorted, Scalar::Bool(false), Scalar::Bool(right)}, "");
    Compare(runner, "searchsorted", {sorted, Scalar::Int(3), Scalar::Bool(false), Scalar::Bool(right)}, "number");
  }
  const Tensor rows = Random({3, 6}, DType::kFloat64, rng, -3, 3);
  const Tensor order = (*CallFull("argsort", {rows, Scalar::Int(1)}))[0];
  Compare(runner, "searchsorted", {rows, values.AsStrided({3, 4}, {5, 1}, 0), Scalar::Bool(false),
                                   Scalar::Bool(false), std::string("right"), order}, "2-d with sorter");
}

TEST_F(IndexKernelsTest, BandsRemapsAndIm2colMatchTheCpu) {
  for (DType dtype : {DType::kFloat32, DType::kInt8, DType::kFloat64}) {
    const Tensor x = Random({2, 4, 5}, dtype, rng);
    for (int64_t diagonal : {-1, 0, 2}) {
      Compare(runner, "tril", {x, Scalar::Int(diagonal)}, "");
      Compare(runner, "triu", {x.AsStrided({2, 5, 4}, {20, 1, 5}, 0), Scalar::Int(diagonal)}, "transposed");
    }
    Compare(runner, "eye", {Scalar::Int(3), Scalar::Int(5), dtype, Device::Cpu()}, "3x5");
    Compare(runner, "flip", {x, Dims{0, 2}}, "");
    Compare(runner, "roll", {x, Dims{2, -7}, Dims{1, 2}}, "");
    Compare(runner, "roll", {x, Dims{3}, ArgValue()}, "flattened");
    Compare(runner, "repeat", {Transposed(x.AsStrided({4, 5}, {5, 1}, 0)), Dims{2, 1, 3}}, "new dim");
  }
  Compare(runner, "eye", {Scalar::Int(0), ArgValue(), DType::kFloat32, Device::Cpu()}, "empty");
  const Tensor image = RandomReal({2, 3, 7, 6}, DType::kFloat32, rng);
  // kernel, dilation, padding, stride, output size, pad value; the last pads more after than before.
  Compare(runner, "_im2col", {image, Dims{3, 2}, Dims{1, 2}, Dims{1, 0}, Dims{2, 1}, Dims{4, 4}, Scalar::Float(0.0)},
          "padded");
  Compare(runner, "_im2col", {image, Dims{2, 2}, Dims{1, 1}, Dims{0, 0}, Dims{2, 2}, Dims{3, 3}, Scalar::Float(0.0)},
          "pooling windows");
  Compare(runner, "_im2col", {image, Dims{2, 2}, Dims{1, 1}, Dims{0, 1}, Dims{1, 1}, Dims{6, 7}, Scalar::Float(-1.0 / 0.0)},
          "same padding, -inf");
  // _col2im (the adjoint) with the same geometries: columns [N, C*kh*kw, OH*OW] back onto [H, W].
  const Tensor columns = RandomReal({2, 3 * 3 * 2, 4 * 4}, DType::kFloat32, rng);
  Compare(runner, "_col2im", {columns, Dims{7, 6}, Dims{3, 2}, Dims{1, 2}, Dims{1, 0}, Dims{2, 1}, Dims{4, 4}},
          "padded, dilated, strided");
  const Tensor windows = RandomReal({2, 3 * 2 * 2, 3 * 3}, DType::kFloat64, rng);
  Compare(runner, "_col2im", {windows, Dims{7, 6}, Dims{2, 2}, Dims{1, 1}, Dims{0, 0}, Dims{2, 2}, Dims{3, 3}},
          "pooling windows");
  const Tensor same = RandomReal({2, 3 * 2 * 2, 6 * 7}, DType::kFloat32, rng);
  Compare(runner, "_col2im", {same.AsStrided({2, 12, 42}, {504, 1, 12}, 0), Dims{7, 6}, Dims{2, 2},
                              Dims{1, 1}, Dims{0, 1}, Dims{1, 1}, Dims{6, 7}},
          "same padding, transposed columns");
}

TEST_F(IndexKernelsTest, MaskSelectionsCountOnTheDeviceAsTheCpu) {
  for (DType dtype : {DType::kFloat32, DType::kBool, DType::kInt64}) {
    const std::string d(DTypeName(dtype));
    const Tensor x = Random({4, 7}, dtype, rng, -1, 1, 0.1);  // zeros, and NaN (nonzero)
    Compare(runner, "nonzero", {x}, d);
    Compare(runner, "nonzero", {Transposed(x)}, d + " transposed");
    Compare(runner, "nonzero", {Random({}, dtype, rng, 1, 1)}, d + " 0-d");
    Compare(runner, "nonzero", {Random({3, 0}, dtype, rng)}, d + " empty");
    Compare(runner, "nonzero", {Random({5}, dtype, rng, 0, 0)}, d + " none set");
    Compare(runner, "where.condition", {x}, d);
    const Tensor mask = CastTo(Random({1, 7}, DType::kInt64, rng, 0, 1), DType::kBool);
    Compare(runner, "masked_select", {x, mask}, d + " broadcast mask");
  }
}

TEST_F(IndexKernelsTest, UniqueGroupsAsTheCpuWithNanAndDuplicates) {
  const std::vector<DType> dtypes = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16, DType::kBool,
                                     DType::kUInt8,   DType::kInt8,    DType::kInt16,   DType::kInt32,    DType::kInt64};
  for (DType dtype : dtypes) {
    const std::string d(DTypeName(dtype));
    // Odd sizes and more positions than the runner's grid: every kernel's loop takes several turns.
    for (const Dims& sizes : {Dims{}, Dims{0}, Dims{1}, Dims{29}, Dims{5, 7}, Dims{3, 0}, Dims{130}}) {
      const Tensor x = Random(sizes, dtype, rng, -3, 3, 0.2);  // duplicates, negatives, NaN
      for (bool inverse : {false, true}) {
        Compare(runner, "unique", {x, Scalar::Bool(true), Scalar::Bool(inverse), Scalar::Bool(!inverse), ArgValue()},
                absl::StrCat(d, " ", DimsToString(sizes)));
      }
    }
    const Tensor m = Random({6, 4}, dtype, rng, -1, 1, 0.1);  // repeated rows and columns
    for (int64_t dim : {0, 1, -1}) {
      Compare(runner, "unique", {m, Scalar::Bool(true), Scalar::Bool(true), Scalar::Bool(true), Scalar::Int(dim)},
              absl::StrCat(d, " dim ", dim));
    }
    Compare(runner, "unique", {Transposed(m), Scalar::Bool(true), Scalar::Bool(true), Scalar::Bool(true), ArgValue()},
            d + " transposed");
    Compare(runner, "unique", {Random({0, 3}, dtype, rng), Scalar::Bool(true), Scalar::Bool(true), Scalar::Bool(true),
                               Scalar::Int(0)}, d + " no rows");
  }
  // 0.0 and -0.0 are one value, kept as its first occurrence: the same bits as on the CPU.
  Tensor zeros = CastTo(Ints({0, 1, 0, 2}, {4}), DType::kFloat64);
  zeros.data_as<double>()[0] = -0.0;
  Compare(runner, "unique", {zeros, Scalar::Bool(true), Scalar::Bool(false), Scalar::Bool(true), ArgValue()}, "-0.0");
  Emulated on(&runner);
  absl::StatusOr<OpResult> got = CallFull("unique", {zeros});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(std::signbit((*got)[0].data_as<double>()[0])) << "unique kept 0.0, the CPU keeps -0.0 (first)";
}

// Runs op(args) on the CPU and through the kernels; the results' bytes must be equal.
void CompareBits(HostRunner& runner, absl::string_view name, std::vector<ArgValue> args, const std::string& what) {
  absl::StatusOr<OpResult> want = CallFull(name, args);
  absl::StatusOr<OpResult> got;
  {
    Emulated on(&runner);
    got = CallFull(name, args);
  }
  const std::string label = absl::StrCat(name, " ", what);
  ASSERT_TRUE(want.ok() && got.ok()) << label << ": " << got.status() << " vs " << want.status();
  const Tensor g = Contiguous((*got)[0]), w = Contiguous((*want)[0]);
  ASSERT_EQ(g.sizes(), w.sizes()) << label;
  ASSERT_EQ(g.dtype(), w.dtype()) << label;
  ASSERT_EQ(std::memcmp(g.data(), w.data(), w.numel() * w.itemsize()), 0)
      << label << ": " << absl::StrJoin(Values(g), ",") << " vs " << absl::StrJoin(Values(w), ",");
}

TEST_F(IndexKernelsTest, RangesEqualTheCpuBitForBit) {
  const std::vector<DType> dtypes = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16, DType::kInt64,
                                     DType::kInt32,   DType::kInt16,   DType::kInt8,    DType::kUInt8,    DType::kBool};
  const int64_t launches = runner.launches;
  for (DType dtype : dtypes) {
    const std::string d(DTypeName(dtype));
    const ArgValue none, cpu = Device::Cpu();
    CompareBits(runner, "arange", {Scalar::Int(37), none, Scalar::Int(1), dtype, cpu}, d + " 37");
    CompareBits(runner, "arange", {Scalar::Int(5), Scalar::Int(-40), Scalar::Int(-3), dtype, cpu}, d + " down");
    CompareBits(runner, "arange", {Scalar::Int(0), none, Scalar::Int(1), dtype, cpu}, d + " empty");
    // Steps that round: each element is start + i * step rounded twice, never fused.
    CompareBits(runner, "arange", {Scalar::Float(-1.3), Scalar::Float(2.9), Scalar::Float(0.1), dtype, cpu},
                d + " by 0.1");
    CompareBits(runner, "arange", {Scalar::Float(0.7), Scalar::Float(40.0), Scalar::Float(1.7), dtype, cpu},
                d + " by 1.7");
    for (int64_t steps : {0, 1, 2, 7, 50}) {
      CompareBits(runner, "linspace", {Scalar::Float(-1.1), Scalar::Float(3.7), Scalar::Int(steps), dtype, cpu},
                  absl::StrCat(d, " ", steps, " steps"));
      CompareBits(runner, "linspace", {Scalar::Int(10), Scalar::Int(-3), Scalar::Int(steps), dtype, cpu},
                  absl::StrCat(d, " ", steps, " steps down"));
      // Past int8's and uint8's ranges: wraps, as a conversion through int64 does.
      CompareBits(runner, "linspace", {Scalar::Float(-300.5), Scalar::Float(0.25), Scalar::Int(steps), dtype, cpu},
                  absl::StrCat(d, " ", steps, " steps out of range"));
    }
  }
  EXPECT_GT(runner.launches, launches) << "the ranges never ran the kernel";
}

// ---- random numbers ----

// Philox4x32-10 written from the paper's definition, apart from the kernels' version.
std::array<uint32_t, 4> ReferencePhilox(std::array<uint32_t, 4> c, std::array<uint32_t, 2> k) {
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = 0xD2511F53ull * c[0], p1 = 0xCD9E8D57ull * c[2];
    c = {static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k[0], static_cast<uint32_t>(p1),
         static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k[1], static_cast<uint32_t>(p0)};
    k = {k[0] + 0x9E3779B9u, k[1] + 0xBB67AE85u};
  }
  return c;
}

// Word `word` (from 0, four per counter) of the stream under `seed` from counter `first` on.
uint32_t ReferenceWord(uint64_t seed, uint64_t first, uint64_t word) {
  const uint64_t counter = first + word / 4;
  return ReferencePhilox({static_cast<uint32_t>(counter), static_cast<uint32_t>(counter >> 32), 0, 0},
                         {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)})[word % 4];
}

// What element i of a draw holds, in double, by the mapping index_kernels.cuh documents.
double ReferenceRandom(DType dtype, bool normal, uint64_t seed, uint64_t first, int64_t i, double* radius = nullptr) {
  const bool wide = dtype == DType::kFloat64;
  const uint64_t words = (normal ? 2 : 1) * (wide ? 2 : 1), at = static_cast<uint64_t>(i) * words;
  auto unit = [&](uint64_t w) {
    if (wide) {
      const uint64_t bits = (static_cast<uint64_t>(ReferenceWord(seed, first, w) >> 5) << 26) |
                            (ReferenceWord(seed, first, w + 1) >> 6);
      return std::ldexp(static_cast<double>(bits), -53);
    }
    const int kept = normal ? 24 : dtype == DType::kBFloat16 ? 8 : dtype == DType::kFloat16 ? 11 : 24;
    return std::ldexp(static_cast<double>(ReferenceWord(seed, first, w) >> (32 - kept)), -kept);
  };
  if (!normal) return unit(at);
  const uint64_t second = at + (wide ? 2 : 1);
  const double r = std::sqrt(-2.0 * std::log(1.0 - unit(at)));
  if (radius != nullptr) *radius = r;
  return r * std::cos(2.0 * M_PI * unit(second));
}

TEST(RandomKernels, PhiloxGivesThePapersKnownAnswers) {
  EXPECT_EQ(ReferencePhilox({0, 0, 0, 0}, {0, 0}), (std::array<uint32_t, 4>{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(ReferencePhilox({~0u, ~0u, ~0u, ~0u}, {~0u, ~0u}),
            (std::array<uint32_t, 4>{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(ReferencePhilox({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
            (std::array<uint32_t, 4>{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
  for (uint64_t counter : {0ull, 1ull, 0x123456789abcull}) {
    for (uint64_t seed : {0ull, 42ull, 0xfedcba9876543210ull}) {
      const ix::IxPhiloxWords got = ix::Philox(counter, seed);
      const std::array<uint32_t, 4> want = ReferencePhilox(
          {static_cast<uint32_t>(counter), static_cast<uint32_t>(counter >> 32), 0, 0},
          {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
      for (int i = 0; i < 4; ++i) EXPECT_EQ(got.w[i], want[i]) << counter << " " << seed << " " << i;
    }
  }
}

TEST_F(IndexKernelsTest, RandomDrawsAreTheGeneratorsCountersInEveryDtype) {
  Emulated on(&runner);
  ManualSeed(7);
  uint64_t first = 0;
  for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16}) {
    for (bool normal : {false, true}) {
      const int64_t n = 1001;  // not a multiple of the four words a counter gives
      const Tensor t = Tensor::Empty({n}, dtype, Device::Cpu());
      ASSERT_TRUE(RandomOnDevice(t, normal).ok());
      const std::vector<double> got = Values(t);
      // Uniforms are exact in every dtype. A normal is r cos(2 pi u): the angle rounds by about
      // 2 pi ulp/2 and cos, log and sqrt err by a few ulp, so |error| <= 16 ulp * r in the
      // compute type (float, or double for float64); half and bfloat16 then round z once more.
      const double compute_ulp = dtype == DType::kFloat64 ? 0x1p-52 : 0x1p-23;
      const double stored_ulp = dtype == DType::kFloat16 ? 0x1p-10 : dtype == DType::kBFloat16 ? 0x1p-7 : 0.0;
      for (int64_t i = 0; i < n; ++i) {
        double r = 0;
        const double want = ReferenceRandom(dtype, normal, 7, first, i, &r);
        const double tolerance = 16 * compute_ulp * r + stored_ulp / 2 * std::abs(want);
        if (!normal) {
          ASSERT_EQ(got[i], want) << DTypeName(dtype) << " element " << i;
          ASSERT_TRUE(got[i] >= 0.0 && got[i] < 1.0);
        } else {
          ASSERT_NEAR(got[i], want, tolerance) << DTypeName(dtype) << " element " << i;
        }
      }
      first += RandomCounters(n, dtype, normal);
    }
  }
  // The next draw starts where these stopped.
  EXPECT_EQ(ReservePhiloxCounters(0).first, first);
}

TEST_F(IndexKernelsTest, RandomDrawsHaveTheirDistributionsMoments) {
  Emulated on(&runner);
  ManualSeed(11);
  const int64_t n = 200000;
  for (bool normal : {false, true}) {
    const Tensor t = Tensor::Empty({n}, DType::kFloat32, Device::Cpu());
    ASSERT_TRUE(RandomOnDevice(t, normal).ok());
    double sum = 0, squares = 0;
    for (double v : Values(t)) {
      sum += v;
      squares += v * v;
    }
    const double mean = sum / n, variance = squares / n - mean * mean;
    // Within 5 standard errors: the mean's sd is sqrt(var / n), the variance's about
    // sqrt((kurtosis - 1) var^2 / n) (uniform: kurtosis 9/5 of variance 1/12; normal: 3 of 1).
    const double want_mean = normal ? 0.0 : 0.5, want_var = normal ? 1.0 : 1.0 / 12;
    const double kurtosis = normal ? 3.0 : 1.8;
    EXPECT_NEAR(mean, want_mean, 5 * std::sqrt(want_var / n)) << normal;
    EXPECT_NEAR(variance, want_var, 5 * std::sqrt((kurtosis - 1) * want_var * want_var / n)) << normal;
  }
}

TEST_F(IndexKernelsTest, CapturedDrawsReadTheirStateAndAdvanceIt) {
  Emulated on(&runner);
  ManualSeed(3);
  const uint64_t reserved = ReservePhiloxCounters(0).first;
  const Tensor state = Tensor::Empty({2}, DType::kInt64, Device::Cpu());
  const uint64_t seed = 99, base = 1000;
  state.data_as<int64_t>()[0] = seed;
  state.data_as<int64_t>()[1] = base;
  const Tensor a = Tensor::Empty({10}, DType::kFloat32, Device::Cpu());
  const Tensor b = Tensor::Empty({7}, DType::kFloat64, Device::Cpu());
  uint64_t counters = 0;
  {
    CapturedRandomDraws draws(state);
    ASSERT_TRUE(RandomOnDevice(a, false).ok());
    ASSERT_TRUE(RandomOnDevice(b, true).ok());
    counters = draws.counters();
    ASSERT_TRUE(draws.Advance().ok());
  }
  EXPECT_EQ(counters, RandomCounters(10, DType::kFloat32, false) + RandomCounters(7, DType::kFloat64, true));
  EXPECT_EQ(static_cast<uint64_t>(state.data_as<int64_t>()[1]), base + counters) << "Advance moves the base on";
  EXPECT_EQ(ReservePhiloxCounters(0).first, reserved) << "captured draws reserve nothing from the generator";
  const std::vector<double> got_a = Values(a), got_b = Values(b);
  for (int64_t i = 0; i < 10; ++i) EXPECT_EQ(got_a[i], ReferenceRandom(DType::kFloat32, false, seed, base, i)) << i;
  const uint64_t after_a = base + RandomCounters(10, DType::kFloat32, false);
  for (int64_t i = 0; i < 7; ++i) {
    EXPECT_NEAR(got_b[i], ReferenceRandom(DType::kFloat64, true, seed, after_a, i), 1e-12) << i;
  }
}

TEST_F(IndexKernelsTest, IntegerDivisionFloorsAndRaisesAsTheCpu) {
  for (DType dtype : {DType::kInt64, DType::kInt32, DType::kInt16, DType::kInt8, DType::kUInt8}) {
    const std::string d(DTypeName(dtype));
    const int low = dtype == DType::kUInt8 ? 0 : -9;
    const Tensor x = Random({6, 13}, dtype, rng, low, 9);
    // Divisors of both signs (broadcast along dim 0), none zero.
    const Tensor y = low < 0 ? Ints({-4, 3, -1, 2, 1, -2, 4, -3, 1, 2, -1, 3, -4}, {1, 13}, dtype)
                             : Ints({4, 3, 1, 2, 1, 2, 4, 3, 1, 2, 1, 3, 4}, {1, 13}, dtype);
    const Tensor with_zero = Ints({4, 3, 0, 2}, {4}, dtype);
    for (const char* op : {"floor_divide", "remainder"}) {
      Compare(runner, op, {x, y}, d);
      Compare(runner, op, {Transposed(x), Scalar::Int(low < 0 ? -4 : 4)}, d + " by a number");
      Compare(runner, op, {x, Ints({7}, {}, dtype)}, d + " by a 0-d tensor");
      Compare(runner, op, {Random({0, 3}, dtype, rng), Scalar::Int(2)}, d + " empty");
      Compare(runner, op, {Ints({-8, 9, 5, -1}, {4}, dtype), with_zero}, d + " a zero divisor");
      Compare(runner, op, {x, Scalar::Int(0)}, d + " by the number 0");
    }
    Compare(runner, "pow", {x, Random({1, 13}, dtype, rng, 0, 3)}, d);
    if (low < 0) Compare(runner, "pow", {Ints({2, 3, 1, 2}, {4}, dtype), Ints({3, 0, -1, 2}, {4}, dtype)}, d + " -1");
  }
  Compare(runner, "floor_divide", {Ints({7, -7}, {2}, DType::kInt32), Ints({2}, {1})}, "int32 by int64");
  // In place: a refused division leaves the target as it was; an accepted one writes it.
  const OpDef& floor_divide = *OpRegistry::Get().Find("floor_divide");
  const Tensor x = Random({4, 5}, DType::kInt64, rng);
  Tensor target = Clone(x);
  {
    Emulated on(&runner);
    absl::StatusOr<Tensor> r = RunPointwise(floor_divide, OpArgs({target, Ints({2, 0, 1, 1, 1}, {5})}), &target);
    EXPECT_EQ(r.status().message(), "floor_divide: integer division by zero");
  }
  ExpectClose(target, x, {}, "target after a refused division");
  absl::StatusOr<OpResult> want = CallFull("floor_divide", {x, Scalar::Int(-2)});
  {
    Emulated on(&runner);
    ASSERT_TRUE(RunPointwise(floor_divide, OpArgs({target, Scalar::Int(-2)}), &target).ok());
  }
  ExpectClose(target, (*want)[0], {}, "target after x //= -2");
}

// ---- the same source through NVRTC ----

TEST(IndexKernelSourceTest, CompilesWithNvrtcForEveryDtype) {
  if (!ProbeNvrtc().available) GTEST_SKIP() << "CUDA's NVRTC was not found: " << ProbeNvrtc().reason;
  for (DType dtype : kAllDTypes) {
    absl::StatusOr<std::string> cubin =
        CompileCudaToCubin(IndexKernelSource(dtype), absl::StrCat("index_kernels_", DTypeName(dtype)), 90);
    ASSERT_TRUE(cubin.ok()) << DTypeName(dtype) << ": " << cubin.status();
    EXPECT_EQ(cubin->substr(0, 4), "\x7f" "ELF") << DTypeName(dtype);
  }
}

}  // namespace
}  // namespace dt
