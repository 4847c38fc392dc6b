// jit/cuda_codegen and jit/cuda_launch: the structure of generated CUDA kernels (vector path,
// shuffle reductions, split reductions), that they compile with NVRTC (when installed), and the
// launch rules and argument packing the CUDA runtime relies on, and the kernel cache's parallel
// compilation of a graph's units.
#include "jit/cuda_codegen.h"

#include <stdlib.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "graph/graph.h"
#include "jit/cuda_launch.h"
#include "jit/kernel_cache.h"
#include "jit/schedule.h"
#include "runtime/copy.h"
#include "runtime/nvrtc.h"

namespace dt::jit {
namespace {

Tensor Meta(Dims sizes, DType dtype = DType::kFloat32) {
  Tensor t = Tensor::Empty(sizes, dtype, Device::Cpu());
  return Tensor(Storage::Allocate(0, Device::Meta()), t.sizes(), t.strides(), 0, t.dtype());
}

ValueId Add(Graph& g, const char* op, std::vector<GraphArg> args, std::vector<ArgValue> meta_args) {
  const OpDef* def = OpRegistry::Get().Find(op);
  auto metas = CallOp(*def, OpArgs(std::move(meta_args)));
  EXPECT_TRUE(metas.ok()) << metas.status();
  return g.AddNode(def, std::move(args), *metas, false, {})[0];
}

// exp(x) + y for contiguous float32 x (rows x cols) and y (cols).
Graph PointwiseGraph() {
  Graph g;
  const ValueId x = g.AddInput(Meta({64, 100}), "L['x']");
  const ValueId y = g.AddInput(Meta({100}), "L['y']");
  const ValueId e = Add(g, "exp", {GraphArg::Value(x)}, {g.value(x).meta});
  const ValueId s = Add(g, "add", {GraphArg::Value(e), GraphArg::Value(y)}, {g.value(e).meta, g.value(y).meta});
  g.SetOutputs({s});
  return g;
}

// x.sum(dims) for a float32 x.
Graph SumGraph(Dims sizes, Dims dims) {
  Graph g;
  const ValueId x = g.AddInput(Meta(sizes), "L['x']");
  const ValueId s = Add(g, "sum",
                        {GraphArg::Value(x), GraphArg{ArgValue(dims)}, GraphArg{ArgValue(Scalar::Bool(false))},
                         GraphArg{ArgValue(None{})}},
                        {g.value(x).meta, dims, Scalar::Bool(false), None{}});
  g.SetOutputs({s});
  return g;
}

// softmax(x, -1): two reductions in sequence, the second reading the first.
Graph SoftmaxGraph() {
  Graph g;
  const ValueId x = g.AddInput(Meta({8, 300}), "L['x']");
  const ValueId s = Add(g, "softmax", {GraphArg::Value(x), GraphArg{ArgValue(Scalar::Int(-1))}, GraphArg{ArgValue(None{})}},
                        {g.value(x).meta, Scalar::Int(-1), None{}});
  g.SetOutputs({s});
  return g;
}

CudaProgram Emit(const Graph& graph) {
  auto program = Schedule(graph);
  EXPECT_TRUE(program.ok()) << program.status();
  EXPECT_FALSE(program->kernels.empty());
  auto cuda = EmitCuda(*program);
  EXPECT_TRUE(cuda.ok()) << cuda.status();
  if (ProbeNvrtc().available) {
    EXPECT_EQ(cuda->sources.size(), 1u) << "a small graph is one unit";
    for (const std::string& source : cuda->sources) {
      auto cubin = CompileCudaToCubin(source, "cuda_codegen_test", 90);
      EXPECT_TRUE(cubin.ok()) << cubin.status() << "\n" << cuda->readable;
    }
  } else {
    // Where CI has NVRTC (tools/test.sh sets DYNTRACE_REQUIRE_NVRTC=1) every kernel must compile.
    const char* required = std::getenv("DYNTRACE_REQUIRE_NVRTC");
    EXPECT_FALSE(required != nullptr && std::string(required) == "1")
        << "NVRTC is required but was not found: " << ProbeNvrtc().reason;
  }
  return *cuda;
}

bool Has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(CudaCodegen, ContiguousPointwiseHasAVectorPath) {
  const CudaProgram cuda = Emit(PointwiseGraph());
  ASSERT_EQ(cuda.kernels.size(), 1u);
  const CudaKernelInfo& k = cuda.kernels[0];
  EXPECT_FALSE(k.is_row_kernel);
  EXPECT_EQ(k.vector_width, 8);  // two 16-byte accesses of float per thread
  EXPECT_TRUE(Has(cuda.readable, "extern \"C\" __global__ void __launch_bounds__(1024) " + k.name +
                                     "(const dt::CudaKernelArgs args)")) << cuda.readable;
  EXPECT_EQ(k.functions, (std::vector<std::string>{k.name + "_vector", k.name}));
  ASSERT_EQ(k.vector_checks.size(), 3u);  // the two inputs and the output
  EXPECT_EQ(k.vector_checks[0].elements, 4);  // 16-byte accesses: two per thread's 8 floats
  EXPECT_EQ(k.vector_checks[0].bytes, 16);
  EXPECT_TRUE(Has(cuda.readable, "DtVec<float, 8>")) << cuda.readable;
  EXPECT_TRUE(Has(cuda.readable, "dt::scalar::exp_(")) << cuda.readable;  // through the op registry
  EXPECT_TRUE(Has(cuda.readable, "e += step")) << "a grid-stride general path:\n" << cuda.readable;
  // The pasted headers are in the translation unit, not in the readable part.
  EXPECT_TRUE(Has(cuda.sources[0], "struct CudaKernelArgs"));
  EXPECT_FALSE(Has(cuda.readable, "struct CudaKernelArgs"));
}

TEST(CudaCodegen, RowReductionsShuffleAcrossTheBlock) {
  const CudaProgram cuda = Emit(SoftmaxGraph());
  ASSERT_EQ(cuda.kernels.size(), 1u);
  const CudaKernelInfo& k = cuda.kernels[0];
  EXPECT_TRUE(k.is_row_kernel);
  EXPECT_EQ(k.num_reductions, 2);
  EXPECT_FALSE(k.has_split) << "the sum reads the max: the passes can't be split";
  EXPECT_EQ(k.vector_width, 4);  // the cached path's 16-byte loads
  EXPECT_EQ(k.row_slots, 16);    // 64 register bytes for the one input three passes read
  EXPECT_GT(k.static_shared_bytes, 0);
  EXPECT_TRUE(Has(cuda.sources[0], "__shfl_xor_sync"));
  EXPECT_TRUE(Has(cuda.readable, "dt_block_reduce(")) << cuda.readable;
  EXPECT_TRUE(Has(cuda.readable, "row += gridDim.x")) << cuda.readable;
  EXPECT_FALSE(Has(cuda.readable, "row_buffer")) << "rows are re-read, not buffered";
  // One function per path, the launcher choosing: general, cached (strided), cached (vector).
  EXPECT_EQ(k.functions, (std::vector<std::string>{k.name + "_vector", k.name + "_cached", k.name}));
  for (const std::string& f : k.functions) {
    // The strided cached function is bound to fewer threads, so it may use 128 registers.
    const int bound = f == k.name + "_cached" ? kStridedRowBlockBound : 1024;
    EXPECT_TRUE(Has(cuda.readable, absl::StrCat("void __launch_bounds__(", bound, ") ", f,
                                                "(const dt::CudaKernelArgs args)"))) << f;
  }
  ASSERT_EQ(k.vector_checks.size(), 2u);  // the input and the output, 4 floats (16 bytes) each
  EXPECT_EQ(k.vector_checks[0].elements, 4);
  EXPECT_EQ(k.vector_checks[0].bytes, 16);
  EXPECT_FALSE(k.vector_checks[0].broadcast);
}

// The host's choice of the vector row path: whole vectors per row, unit inner strides (zero for
// an operand the trace saw broadcast), aligned bases and row strides.
TEST(CudaLaunch, VectorRowPathOnlyForAlignedRowsOfWholeVectors) {
  CudaKernelInfo k;
  k.name = "r";
  k.is_row_kernel = true;
  k.vector_width = 4;
  k.row_slots = 16;
  k.vector_checks = {{0, 4, 16, false}, {1, 4, 16, true}, {2, 4, 16, false}};
  CudaKernelArgs args{};
  args.outer_rank = 1;
  args.outer_sizes[0] = args.rows = 10;
  args.n = 768;
  alignas(16) static char memory[64];
  for (int i = 0; i < 3; ++i) {
    args.data[i] = memory;
    args.outer_strides[i][0] = i == 1 ? 0 : 768;
    args.inner_strides[i] = i == 1 ? 0 : 1;
  }
  auto chosen = [&](const CudaKernelArgs& a) {
    CudaLaunchPlan plan = PlanCudaLaunch(k, a.rows, a.n, 132);
    ChooseLaunchPath(k, a, 132, &plan);
    return plan.launches.at(0).function;
  };
  EXPECT_EQ(chosen(args), "r_vector");
  CudaKernelArgs odd = args;
  odd.n = 766;
  EXPECT_EQ(chosen(odd), "r_cached") << "rows that end inside a vector";
  CudaKernelArgs shifted = args;
  shifted.data[2] = memory + 4;
  EXPECT_EQ(chosen(shifted), "r_cached") << "a base 4 bytes past alignment";
  CudaKernelArgs row_stride = args;
  row_stride.outer_strides[0][0] = 770;
  EXPECT_EQ(chosen(row_stride), "r_cached") << "rows 770 floats apart";
  CudaKernelArgs strided = args;
  strided.inner_strides[0] = 2;
  EXPECT_EQ(chosen(strided), "r_cached");
  CudaKernelArgs unbroadcast = args;
  unbroadcast.inner_strides[1] = 1;
  EXPECT_EQ(chosen(unbroadcast), "r_cached") << "the broadcast operand's vector path reads p[0]";
  CudaKernelArgs long_rows = args;
  long_rows.n = 16 * 1024 + 4;
  EXPECT_EQ(chosen(long_rows), "r") << "rows longer than the cache: the general path";
  // The strided cached function is bound to kStridedRowBlockBound threads: a few long odd rows
  // (planned with a thread per vector, 1024 threads) get that many, and rows its slots can't
  // hold then take the general path.
  CudaKernelArgs few_odd = args;
  few_odd.outer_sizes[0] = few_odd.rows = 2;
  few_odd.n = 4001;
  CudaLaunchPlan plan = PlanCudaLaunch(k, few_odd.rows, few_odd.n, 132);
  EXPECT_EQ(plan.launches[0].block, 1024);
  ChooseLaunchPath(k, few_odd, 132, &plan);
  EXPECT_EQ(plan.launches[0].function, "r_cached");
  EXPECT_EQ(plan.launches[0].block, kStridedRowBlockBound);
  few_odd.n = 16 * kStridedRowBlockBound + 1;
  EXPECT_EQ(chosen(few_odd), "r");
  for (int64_t n : {1, 31, 33, 1001, 4001, 8191}) {
    CudaKernelArgs odd = args;
    odd.n = n;
    for (int64_t rows : {1, 7, 100000}) {
      odd.outer_sizes[0] = odd.rows = rows;
      CudaLaunchPlan p = PlanCudaLaunch(k, rows, n, 132);
      ChooseLaunchPath(k, odd, 132, &p);
      ASSERT_EQ(p.launches[0].function, "r_cached") << n << " " << rows;
      EXPECT_LE(p.launches[0].block, kStridedRowBlockBound) << n << " " << rows;
      EXPECT_LE(n, k.row_slots * p.launches[0].block) << "the slots must hold the row: " << n << " " << rows;
      EXPECT_EQ(p.launches[0].block % 32, 0);
    }
  }
}

TEST(CudaCodegen, FullReductionIsSplit) {
  const CudaProgram cuda = Emit(SumGraph({1 << 20}, {0}));
  ASSERT_EQ(cuda.kernels.size(), 1u);
  const CudaKernelInfo& k = cuda.kernels[0];
  EXPECT_TRUE(k.has_split);
  EXPECT_TRUE(Has(cuda.readable, k.name + "_split_partial(")) << cuda.readable;
  EXPECT_TRUE(Has(cuda.readable, k.name + "_split_finish(")) << cuda.readable;

  const CudaLaunchPlan plan = PlanCudaLaunch(k, /*rows=*/1, /*n=*/1 << 20, /*sm_count=*/132);
  ASSERT_EQ(plan.launches.size(), 2u);
  EXPECT_GT(plan.split, 1);
  EXPECT_GT(plan.launches[0].grid, 1) << "a full reduction must not run on one block";
  EXPECT_EQ(plan.launches[0].function, k.name + "_split_partial");
  EXPECT_EQ(plan.launches[1].function, k.name + "_split_finish");
  EXPECT_EQ(plan.workspace_bytes, plan.split * kCudaPartialSlotBytes);
}

// The device-side index helpers, compiled here for the host: RowOffsets against plain
// unravelling, GridWalk against division, over many shapes and grid sizes.
TEST(CudaLaunchAbi, RowOffsetsMatchUnravelledIndices) {
  uint64_t seed = 12345;
  auto next = [&](int64_t bound) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<int64_t>((seed >> 33) % static_cast<uint64_t>(bound));
  };
  for (int trial = 0; trial < 200; ++trial) {
    CudaKernelArgs args{};
    args.outer_rank = next(5);
    args.rows = 1;
    for (int64_t d = 0; d < args.outer_rank; ++d) {
      args.outer_sizes[d] = 1 + next(6);
      args.rows *= args.outer_sizes[d];
      for (int k = 0; k < 3; ++k) args.outer_strides[k][d] = next(2000) - 500;
    }
    for (int64_t row = 0; row < args.rows; ++row) {
      int64_t off[3];
      RowOffsets(args, row, off);
      for (int k = 0; k < 3; ++k) {
        int64_t want = 0, rest = row;
        for (int64_t d = args.outer_rank - 1; d >= 0; --d) {
          want += (rest % args.outer_sizes[d]) * args.outer_strides[k][d];
          rest /= args.outer_sizes[d];
        }
        ASSERT_EQ(off[k], want) << "trial " << trial << " row " << row << " operand " << k;
      }
    }
  }
}

TEST(CudaLaunchAbi, GridWalkMatchesDivision) {
  for (int64_t per_row : {1, 3, 4, 7, 64, 1000}) {
    for (int64_t rows : {1, 2, 5, 33}) {
      for (int64_t step : {1, 2, 5, 64, 999, 4096}) {
        const int64_t total = rows * per_row;
        for (int64_t start = 0; start < std::min<int64_t>(step, total); start += std::max<int64_t>(1, step / 7)) {
          GridWalk walk(start, step, per_row);
          for (int64_t e = start; e < total; e += step, walk.Advance()) {
            ASSERT_EQ(walk.row, e / per_row) << per_row << " " << rows << " " << step << " " << start;
            ASSERT_EQ(walk.item, e % per_row) << per_row << " " << rows << " " << step << " " << start;
          }
        }
      }
    }
  }
}

TEST(CudaLaunch, RowAndPointwiseRules) {
  CudaKernelInfo row;
  row.name = "k";
  row.is_row_kernel = true;
  row.has_split = true;
  row.num_reductions = 1;
  // Many short rows: one block per row (capped, grid-stride), no split, a warp multiple.
  CudaLaunchPlan plan = PlanCudaLaunch(row, 100000, 10, 132);
  ASSERT_EQ(plan.launches.size(), 1u);
  EXPECT_EQ(plan.split, 1);
  EXPECT_EQ(plan.launches[0].block % 32, 0);
  EXPECT_LE(plan.launches[0].grid, 132 * 32);
  EXPECT_TRUE(PlanCudaLaunch(row, 0, 10, 132).launches.empty());

  // The cached path: with rows enough to fill the GPU, the fewest threads whose slots hold the
  // row; with few rows, a thread per vector; past row_slots * kMaxCachedRowBlock the general
  // path's block.
  CudaKernelInfo cached = row;
  cached.has_split = false;
  cached.vector_width = 4;
  cached.row_slots = 16;
  EXPECT_EQ(PlanCudaLaunch(cached, 4096, 4096, 132).launches[0].block, 256);
  EXPECT_EQ(PlanCudaLaunch(cached, 4096, 1000, 132).launches[0].block, 64);
  EXPECT_EQ(PlanCudaLaunch(cached, 8, 4096, 132).launches[0].block, 1024);
  EXPECT_EQ(PlanCudaLaunch(cached, 4096, 16 * 1024, 132).launches[0].block, 1024);
  EXPECT_EQ(PlanCudaLaunch(cached, 4096, 16 * 1024 + 1, 132).launches[0].block, kMaxRowBlock);
  for (int64_t n : {1, 31, 1000, 4097, 16 * 1024}) {
    for (int64_t rows : {1, 100, 100000}) {
      const CudaLaunch& launch = PlanCudaLaunch(cached, rows, n, 132).launches[0];
      EXPECT_LE(n, cached.row_slots * launch.block) << "the kernel must take its cached path: " << n << " " << rows;
      EXPECT_EQ(launch.block % 32, 0);
    }
  }

  CudaKernelInfo pointwise;
  pointwise.name = "p";
  pointwise.vector_width = 4;
  plan = PlanCudaLaunch(pointwise, 3, 1000, 132);
  ASSERT_EQ(plan.launches.size(), 1u);
  EXPECT_EQ(plan.launches[0].function, "p");  // the general path: a thread per element
  EXPECT_EQ(plan.launches[0].grid, (3 * 1000 + kPointwiseBlock - 1) / kPointwiseBlock);
  // Aligned unit-stride operands: the vector path, a thread per 4 elements (ragged rows too).
  pointwise.vector_checks = {{0, 4, 16, false}};
  alignas(16) static char memory[16];
  CudaKernelArgs args{};
  args.outer_rank = 1;
  args.outer_sizes[0] = args.rows = 3;
  args.n = 1000;
  args.data[0] = memory;
  args.outer_strides[0][0] = 1000;
  args.inner_strides[0] = 1;
  ChooseLaunchPath(pointwise, args, 132, &plan);
  EXPECT_EQ(plan.launches[0].function, "p_vector");
  EXPECT_EQ(plan.launches[0].grid, (3 * 250 + kPointwiseBlock - 1) / kPointwiseBlock);
  args.n = args.outer_strides[0][0] = 1001;
  plan = PlanCudaLaunch(pointwise, 3, 1001, 132);
  ChooseLaunchPath(pointwise, args, 132, &plan);
  EXPECT_EQ(plan.launches[0].function, "p") << "rows 1001 floats apart leave rows unaligned";
  EXPECT_TRUE(PlanCudaLaunch(pointwise, 3, 0, 132).launches.empty());
}

TEST(CudaLaunch, PacksGeometryIntoTheAbiStruct) {
  LaunchGeometry geometry;
  geometry.outer_sizes = {3, 4};
  geometry.inner_size = 5;
  // Two operands: a contiguous (3, 4, 5) and a broadcast (5,).
  geometry.strides = {20, 5, 1, 0, 0, 1};
  char a[1], b[1];
  std::vector<char*> data = {a, b};
  CudaLaunchPlan plan;
  std::vector<int64_t> itemsizes = {4, 2};
  auto args = PackCudaArgs(geometry, data, plan, nullptr, itemsizes);
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_EQ(args->itemsizes[0], 4);
  EXPECT_EQ(args->itemsizes[1], 2);
  EXPECT_EQ(args->itemsizes[2], 0);
  EXPECT_EQ(args->outer_rank, 2);
  EXPECT_EQ(args->rows, 12);
  EXPECT_EQ(args->n, 5);
  EXPECT_EQ(args->data[1], b);
  EXPECT_EQ(args->outer_strides[0][0], 20);
  EXPECT_EQ(args->outer_strides[0][1], 5);
  EXPECT_EQ(args->inner_strides[0], 1);
  EXPECT_EQ(args->outer_strides[1][1], 0);
  EXPECT_EQ(args->split, 1);

  geometry.outer_sizes.assign(kCudaMaxOuterRank + 1, 1);
  EXPECT_FALSE(PackCudaArgs(geometry, data, plan, nullptr).ok());
}

// softmax(x * scale) @ w, four times over: four row kernels with GEMMs (extern calls) between
// them, the same code but for the scale when `scaled`, else the same code.
Graph SoftmaxChainGraph(bool scaled = true) {
  Graph g;
  ValueId x = g.AddInput(Meta({8, 300}), "L['x']");
  const ValueId w = g.AddInput(Meta({300, 300}), "L['w']");
  for (int i = 0; i < 4; ++i) {
    if (scaled) {
      x = Add(g, "mul", {GraphArg::Value(x), GraphArg{ArgValue(Scalar::Float(i + 1.5))}},
              {g.value(x).meta, Scalar::Float(i + 1.5)});
    }
    const ValueId s = Add(g, "softmax", {GraphArg::Value(x), GraphArg{ArgValue(Scalar::Int(-1))}, GraphArg{ArgValue(None{})}},
                          {g.value(x).meta, Scalar::Int(-1), None{}});
    x = Add(g, "matmul", {GraphArg::Value(s), GraphArg::Value(w)}, {g.value(s).meta, g.value(w).meta});
  }
  g.SetOutputs({x});
  return g;
}

TEST(CudaCodegen, KernelsWithTheSameCodeAreEmittedOnce) {
  auto program = Schedule(SoftmaxChainGraph(/*scaled=*/false));
  ASSERT_TRUE(program.ok()) << program.status();
  ASSERT_EQ(program->kernels.size(), 4u);
  auto cuda = EmitCuda(*program, 16);
  ASSERT_TRUE(cuda.ok()) << cuda.status();
  ASSERT_EQ(cuda->kernels.size(), 4u);
  // Only the first kernel's functions are defined (one unit each: 16 threads may compile).
  EXPECT_EQ(cuda->unit_of_function.size(), cuda->kernels[0].functions.size());
  EXPECT_EQ(cuda->sources.size(), cuda->kernels[0].functions.size());
  std::string all_sources;
  for (const std::string& source : cuda->sources) all_sources += source;
  const std::string& first = program->kernels[0].name;
  EXPECT_TRUE(Has(all_sources, "void __launch_bounds__(1024) " + first + "("));
  for (size_t k = 1; k < 4; ++k) {
    EXPECT_EQ(cuda->kernels[k].name, first) << k;
    EXPECT_EQ(cuda->kernels[k].functions, cuda->kernels[0].functions) << k;
    EXPECT_FALSE(Has(all_sources, program->kernels[k].name + "(")) << k;
    EXPECT_TRUE(Has(cuda->readable, "// " + program->kernels[k].name + ": the code of " + first)) << k;
  }
  // The scaled chain's kernels differ in a constant: four definitions.
  auto scaled = Schedule(SoftmaxChainGraph());
  ASSERT_TRUE(scaled.ok()) << scaled.status();
  auto distinct = EmitCuda(*scaled, 1);
  ASSERT_TRUE(distinct.ok()) << distinct.status();
  for (size_t k = 0; k < 4; ++k) EXPECT_EQ(distinct->kernels[k].name, scaled->kernels[k].name);
}

TEST(CudaCodegen, KernelsSpreadOverUnitsWhenThereIsEnoughToCompile) {
  auto program = Schedule(SoftmaxChainGraph());
  ASSERT_TRUE(program.ok()) << program.status();
  ASSERT_EQ(program->kernels.size(), 4u);
  auto one = EmitCuda(*program, 1);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->sources.size(), 1u);
  auto spread = EmitCuda(*program, 16);
  ASSERT_TRUE(spread.ok()) << spread.status();
  const size_t text = spread->readable.size();
  size_t function_count = 0;
  for (const CudaKernelInfo& k : spread->kernels) function_count += k.functions.size();
  const size_t expected = std::min<size_t>(function_count, std::max<size_t>(1, text / kMinUnitKernelBytes));
  ASSERT_GE(expected, 2u) << "four row kernels should be worth more than one unit: " << text << " bytes";
  EXPECT_EQ(spread->sources.size(), expected) << text << " bytes of kernels";
  size_t functions = 0;
  for (size_t k = 0; k < 4; ++k) {
    // Each function is defined in its unit and in no other.
    for (const std::string& f : spread->kernels[k].functions) {
      ++functions;
      ASSERT_TRUE(spread->unit_of_function.contains(f)) << f;
      const std::string signature = ") " + f + "(const dt::CudaKernelArgs";
      for (size_t u = 0; u < spread->sources.size(); ++u) {
        EXPECT_EQ(Has(spread->sources[u], signature), static_cast<int>(u) == spread->unit_of_function.at(f)) << f << " " << u;
      }
    }
  }
  EXPECT_EQ(spread->unit_of_function.size(), functions);
  if (ProbeNvrtc().available) {
    for (const std::string& source : spread->sources) {
      auto cubin = CompileCudaToCubin(source, "units", 90);
      EXPECT_TRUE(cubin.ok()) << cubin.status();
    }
  }
}

// A graph's kernels are separate translation units: the cache compiles the missing ones side by
// side, stores each under its own key and hands back the same bytes NVRTC gives one at a time.
TEST(KernelCacheCubins, UnitsCompileInParallelAndAreCachedOneByOne) {
  if (!ProbeNvrtc().available) {
    const char* required = std::getenv("DYNTRACE_REQUIRE_NVRTC");
    if (required != nullptr && std::string(required) == "1") FAIL() << "NVRTC is required: " << ProbeNvrtc().reason;
    GTEST_SKIP() << "CUDA's NVRTC was not found: " << ProbeNvrtc().reason;
  }
  char dir_template[] = "/tmp/dyntrace_cubins_XXXXXX";
  ASSERT_NE(::mkdtemp(dir_template), nullptr);
  ASSERT_EQ(::setenv("DYNTRACE_CACHE_DIR", dir_template, 1), 0);
  KernelCache& cache = KernelCache::Global();
  cache.Reset();
  std::vector<std::string> units;
  for (int i = 0; i < 3; ++i) {
    units.push_back(absl::StrFormat("extern \"C\" __global__ void scale%d(float* x) { x[threadIdx.x] *= %d.0f; }\n",
                                    i, i + 2));
  }
  const CacheCounters before = cache.counters();
  CacheSource source_kind;
  auto cubins = cache.LoadCubins(units, "scales", 90, &source_kind);
  ASSERT_TRUE(cubins.ok()) << cubins.status();
  ASSERT_EQ(cubins->size(), 3u);
  EXPECT_EQ(source_kind, CacheSource::kCompiled);
  EXPECT_EQ(cache.counters().cubins_compiled - before.cubins_compiled, 3);
  for (int i = 0; i < 3; ++i) {
    auto alone = CompileCudaToCubin(units[i], "alone", 90);
    ASSERT_TRUE(alone.ok()) << alone.status();
    EXPECT_EQ(*(*cubins)[i], *alone) << "unit " << i;
    EXPECT_NE((*cubins)[i]->find(absl::StrFormat("scale%d", i)), std::string::npos);
  }
  // One unit changed: only it compiles again; the others come from memory, then from disk.
  units[1] = "extern \"C\" __global__ void scale1(float* x) { x[threadIdx.x] *= 9.0f; }\n";
  auto again = cache.LoadCubins(units, "scales", 90, &source_kind);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(cache.counters().cubins_compiled - before.cubins_compiled, 4);
  EXPECT_EQ((*again)[0], (*cubins)[0]) << "the same object from memory";
  cache.Reset();
  auto from_disk = cache.LoadCubins(units, "scales", 90, &source_kind);
  ASSERT_TRUE(from_disk.ok()) << from_disk.status();
  EXPECT_EQ(source_kind, CacheSource::kDisk);
  EXPECT_EQ(*(*from_disk)[2], *(*cubins)[2]);
  // A unit NVRTC rejects fails the whole load, with NVRTC's log.
  units.push_back("extern \"C\" __global__ void broken(float* x) { x[0] = undeclared_name; }\n");
  auto rejected = cache.LoadCubins(units, "scales", 90, &source_kind);
  ASSERT_FALSE(rejected.ok());
  EXPECT_NE(rejected.status().message().find("undeclared_name"), std::string::npos) << rejected.status();
  ::unsetenv("DYNTRACE_CACHE_DIR");
  cache.Reset();
}

}  // namespace
}  // namespace dt::jit
