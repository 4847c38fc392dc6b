#include "jit/cuda_codegen.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "jit/cpp_codegen.h"
#include "jit/cuda_launch_abi.h"
#include "jit/kernel_printer.h"

namespace dt::backend {
namespace {

// Widest access of the vector path: one 16-byte load or store per widest operand.
constexpr int64_t kVectorBytes = 16;
// More lanes than this only lengthens the unrolled body (bool-only kernels).
constexpr int kMaxVectorWidth = 8;
// Warps per block the block reduction's shared exchange is sized for (1024 threads).
constexpr int kMaxWarps = 32;

// How Element() addresses an operand in the code being printed.
enum class Addressing : uint8_t {
  kAnyStride,    // p[j * inner_stride], strides read at run time
  kTraceStride,  // the trace's inner strides (0 or 1) written in: the vector path's ragged end
  kVectorLane,   // lane `l` of the operand's vector register (stride-1 operands)
};

class CudaKernelEmitter : public KernelPrinter {
 public:
  explicit CudaKernelEmitter(const Kernel& k) : KernelPrinter(k) {}

  std::string Emit(CudaKernelInfo* info) {
    info->name = k_.name;
    info->is_row_kernel = k_.is_row_kernel();
    if (info->is_row_kernel) {
      info->num_reductions = static_cast<int>(Reductions().size());
      for (int r : Reductions()) info->static_shared_bytes += kMaxWarps * static_cast<int>(ItemSize(k_.values[r].accumulator_dtype));
      EmitRowKernel();
      info->has_split = Splittable();
      if (info->has_split) {
        EmitSplitPartial();
        EmitSplitFinish();
      }
    } else {
      info->vector_width = VectorWidth();
      EmitPointwiseKernel(info->vector_width);
    }
    return out_;
  }

 private:
  bool FullTensor(int operand) const {
    const KernelOperand& op = k_.operands[operand];
    return op.mapping == Mapping::kFull && op.scalar_slot < 0;
  }

  std::string Element(int operand, const std::string& j) const override {
    const KernelOperand& op = k_.operands[operand];
    if (!FullTensor(operand)) return absl::StrCat("p", operand, "[0]");
    switch (addressing_) {
      case Addressing::kAnyStride:
        return absl::StrCat("p", operand, "[", j, " * is", operand, "]");
      case Addressing::kTraceStride:
        return op.predicted_inner_stride == 0 ? absl::StrCat("p", operand, "[0]")
                                              : absl::StrCat("p", operand, "[", j, "]");
      case Addressing::kVectorLane:
        if (op.predicted_inner_stride == 0) return absl::StrCat("p", operand, "[0]");
        return absl::StrCat(op.is_output ? "out" : "in", operand, ".v[", j, "]");
    }
    return "";
  }

  // Elements per thread on the vector path, or 1 when the trace saw a full-size operand with a
  // general inner stride (or none with stride 1).
  int VectorWidth() const {
    int64_t widest = 0;
    for (size_t i = 0; i < k_.operands.size(); ++i) {
      if (!FullTensor(static_cast<int>(i))) continue;
      const int predicted = k_.operands[i].predicted_inner_stride;
      if (predicted < 0) return 1;
      if (predicted == 1) widest = std::max(widest, ItemSize(k_.operands[i].dtype));
    }
    if (widest == 0) return 1;
    return static_cast<int>(std::min<int64_t>(kMaxVectorWidth, kVectorBytes / widest));
  }

  // A split needs every reduction to read only the row's elements (no pass after another) and
  // the full-size outputs not to need any reduction: then a row's chunks are independent.
  bool Splittable() const {
    for (int root : FullOutputs()) {
      if (DependsOnReduction(root)) return false;
    }
    for (int r : Reductions()) {
      if (DependsOnReduction(k_.values[r].args[0])) return false;
    }
    return true;
  }

  void OpenKernel(const std::string& suffix) {
    absl::StrAppendFormat(&out_, "extern \"C\" __global__ void __launch_bounds__(1024) %s%s(const dt::CudaKernelArgs args) {\n",
                          k_.name, suffix);
    out_ += "  const int64_t n = args.n;\n";
    for (size_t i = 0; i < k_.operands.size(); ++i) {
      if (FullTensor(static_cast<int>(i))) {
        absl::StrAppendFormat(&out_, "  const int64_t is%d = args.inner_strides[%d];\n", i, i);
      }
    }
  }

  // Pointers p<i> to each operand's element 0 of outer row `row`.
  void EmitPointers(const std::string& row, const std::string& indent) {
    absl::StrAppendFormat(&out_, "%sint64_t off[%d];\n", indent, k_.operands.size());
    absl::StrAppendFormat(&out_, "%sdt::RowOffsets(args, %s, off);\n", indent, row);
    for (size_t i = 0; i < k_.operands.size(); ++i) {
      const KernelOperand& op = k_.operands[i];
      const std::string type = absl::StrCat(op.is_output ? "" : "const ", CppType(op.dtype));
      absl::StrAppendFormat(&out_, "%s%s* __restrict__ p%d = reinterpret_cast<%s*>(args.data[%d]) + off[%d];\n",
                            indent, type, i, type, i, i);
    }
  }

  void EmitRowLevelValues(const std::string& indent) {
    for (size_t i = 0; i < k_.values.size(); ++i) {
      if (k_.values[i].row_level) absl::StrAppend(&out_, indent, ValueStatement(static_cast<int>(i), "0"), "\n");
    }
  }

  // One element at inner index `j` of the current row: the full-size outputs' cones and stores.
  void EmitElement(const std::string& j, const std::string& indent) {
    EmitStatements(FullCone(FullOutputs()), j, indent);
    EmitFullStores(j, indent);
  }

  void EmitPointwiseKernel(int width) {
    OpenKernel("");
    out_ += "  const int64_t start = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;\n";
    out_ += "  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;\n";
    if (width > 1) EmitVectorPath(width);
    addressing_ = Addressing::kAnyStride;
    out_ += "  const int64_t total = args.rows * n;\n";
    out_ += "  if (total == 0) return;\n";
    out_ += "  dt::GridWalk walk(start, step, n);\n";
    out_ += "  for (int64_t e = start; e < total; e += step, walk.Advance()) {\n";
    out_ += "    const int64_t row = walk.row;\n    const int64_t j = walk.item;\n";
    EmitPointers("row", "    ");
    EmitRowLevelValues("    ");
    EmitElement("j", "    ");
    out_ += "  }\n}\n\n";
  }

  void EmitVectorPath(int width) {
    std::vector<std::string> checks;
    for (size_t i = 0; i < k_.operands.size(); ++i) {
      if (!FullTensor(static_cast<int>(i))) continue;
      const KernelOperand& op = k_.operands[i];
      if (op.predicted_inner_stride == 0) {
        checks.push_back(absl::StrFormat("is%d == 0", i));
      } else {
        checks.push_back(absl::StrFormat("dt_vector_ready(args, %d, %d, %d)", i, width, width * ItemSize(op.dtype)));
      }
    }
    absl::StrAppendFormat(&out_, "  // Vector path: %d elements per thread, when every full-size operand's layout allows it.\n", width);
    absl::StrAppendFormat(&out_, "  if (%s) {\n", absl::StrJoin(checks, " &&\n      "));
    absl::StrAppendFormat(&out_, "    const int64_t groups_per_row = (n + %d) / %d;\n", width - 1, width);
    out_ += "    const int64_t groups = args.rows * groups_per_row;\n";
    out_ += "    if (groups == 0) return;\n";
    out_ += "    dt::GridWalk walk(start, step, groups_per_row);\n";
    out_ += "    for (int64_t g = start; g < groups; g += step, walk.Advance()) {\n";
    out_ += "      const int64_t row = walk.row;\n";
    absl::StrAppendFormat(&out_, "      const int64_t j0 = walk.item * %d;\n", width);
    EmitPointers("row", "      ");
    EmitRowLevelValues("      ");
    absl::StrAppendFormat(&out_, "      if (j0 + %d <= n) {\n", width);
    std::set<int> loaded;
    for (int i : FullCone(FullOutputs())) {
      const KernelValue& v = k_.values[i];
      if (v.kind == ValueKind::kLoad && FullTensor(v.operand) && k_.operands[v.operand].predicted_inner_stride == 1) {
        loaded.insert(v.operand);
      }
    }
    for (int o : loaded) {
      absl::StrAppendFormat(&out_, "        const DtVec<%s, %d> in%d = *reinterpret_cast<const DtVec<%s, %d>*>(p%d + j0);\n",
                            CppType(k_.operands[o].dtype), width, o, CppType(k_.operands[o].dtype), width, o);
    }
    std::vector<int> stored;
    for (size_t o = 0; o < k_.operands.size(); ++o) {
      const KernelOperand& op = k_.operands[o];
      if (op.is_output && FullTensor(static_cast<int>(o)) && op.predicted_inner_stride == 1) {
        stored.push_back(static_cast<int>(o));
        absl::StrAppendFormat(&out_, "        DtVec<%s, %d> out%d;\n", CppType(op.dtype), width, o);
      }
    }
    out_ += "#pragma unroll\n";
    absl::StrAppendFormat(&out_, "        for (int l = 0; l < %d; ++l) {\n", width);
    addressing_ = Addressing::kVectorLane;
    EmitElement("l", "          ");
    out_ += "        }\n";
    for (int o : stored) {
      absl::StrAppendFormat(&out_, "        *reinterpret_cast<DtVec<%s, %d>*>(p%d + j0) = out%d;\n",
                            CppType(k_.operands[o].dtype), width, o, o);
    }
    out_ += "      } else {\n";
    out_ += "        for (int64_t j = j0; j < n; ++j) {\n";
    addressing_ = Addressing::kTraceStride;
    EmitElement("j", "          ");
    out_ += "        }\n      }\n    }\n    return;\n  }\n";
  }

  void DeclareScratch() {
    for (int r : Reductions()) {
      absl::StrAppendFormat(&out_, "  __shared__ %s scratch%d[%d];\n", CppType(k_.values[r].accumulator_dtype), r, kMaxWarps);
    }
  }

  // Folds reduction `r`'s inputs at j = begin + threadIdx.x, step blockDim.x, below `end` into
  // acc<r>, then combines the block's accumulators into acc<r> in every thread.
  void EmitBlockReduction(int r, const std::string& begin, const std::string& end, const std::string& indent) {
    const ReductionSpelling s = SpellReduction(r);
    absl::StrAppendFormat(&out_, "%s%s acc%d = %s;\n", indent, s.accumulator_type, r, s.identity);
    absl::StrAppendFormat(&out_, "%sfor (int64_t j = %s + threadIdx.x; j < %s; j += blockDim.x) {\n", indent, begin, end);
    EmitStatements(FullCone({k_.values[r].args[0]}), "j", indent + "  ");
    const std::string acc = absl::StrCat("acc", r);
    absl::StrAppendFormat(&out_, "%s  %s = %s;\n%s}\n", indent, acc, s.Combine(acc, s.input), indent);
    EmitBlockCombine(r, s, indent);
  }

  void EmitBlockCombine(int r, const ReductionSpelling& s, const std::string& indent) {
    absl::StrAppendFormat(&out_, "%sacc%d = dt_block_reduce(acc%d, %s, scratch%d, [](%s a, %s b) { return %s; });\n",
                          indent, r, r, s.identity, r, s.accumulator_type, s.accumulator_type, s.Combine("a", "b"));
  }

  void EmitRowOutputs(const std::string& indent) {
    std::vector<std::string> stores;
    for (size_t o = 0; o < k_.operands.size(); ++o) {
      const KernelOperand& op = k_.operands[o];
      if (op.is_output && k_.values[op.source].row_level) stores.push_back(absl::StrFormat("p%d[0] = v%d;", o, op.source));
    }
    if (stores.empty()) return;
    absl::StrAppendFormat(&out_, "%sif (threadIdx.x == 0) {\n", indent);
    for (const std::string& s : stores) absl::StrAppend(&out_, indent, "  ", s, "\n");
    absl::StrAppend(&out_, indent, "}\n");
  }

  void EmitRowKernel() {
    addressing_ = Addressing::kAnyStride;
    OpenKernel("");
    DeclareScratch();
    out_ += "  for (int64_t row = blockIdx.x; row < args.rows; row += gridDim.x) {\n";
    EmitPointers("row", "    ");
    std::vector<bool> defined(k_.values.size(), false);
    for (int r : Reductions()) {
      EmitReadyRowValues(r, defined, "    ");
      EmitBlockReduction(r, "0", "n", "    ");
      absl::StrAppend(&out_, "    ", ReductionResult(r, absl::StrCat("acc", r), "n"), "\n");
      defined[r] = true;
    }
    EmitReadyRowValues(k_.values.size(), defined, "    ");
    if (!FullOutputs().empty()) {
      out_ += "    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {\n";
      EmitElement("j", "      ");
      out_ += "    }\n";
    }
    EmitRowOutputs("    ");
    out_ += "  }\n}\n\n";
  }

  // The partial of reduction ordinal `q` for (row, part) in the workspace.
  static std::string PartialSlot(int q, const std::string& type, const std::string& part) {
    return absl::StrFormat("reinterpret_cast<%s*>(args.workspace + ((%d * args.rows + row) * args.split + %s) * dt::kCudaPartialSlotBytes)[0]",
                           type, q, part);
  }

  void EmitSplitPartial() {
    addressing_ = Addressing::kAnyStride;
    OpenKernel("_split_partial");
    DeclareScratch();
    out_ += "  const int64_t chunk = (n + args.split - 1) / args.split;\n";
    out_ += "  for (int64_t c = blockIdx.x; c < args.rows * args.split; c += gridDim.x) {\n";
    out_ += "    const int64_t row = c / args.split;\n    const int64_t part = c - row * args.split;\n";
    out_ += "    const int64_t begin = part * chunk;\n    const int64_t end = begin + chunk < n ? begin + chunk : n;\n";
    EmitPointers("row", "    ");
    std::vector<bool> defined(k_.values.size(), false);
    const std::vector<int> reductions = Reductions();
    for (size_t q = 0; q < reductions.size(); ++q) {
      const int r = reductions[q];
      EmitReadyRowValues(r, defined, "    ");
      EmitBlockReduction(r, "begin", "end", "    ");
      absl::StrAppendFormat(&out_, "    if (threadIdx.x == 0) %s = acc%d;\n",
                            PartialSlot(static_cast<int>(q), CppType(k_.values[r].accumulator_dtype), "part"), r);
    }
    EmitReadyRowValues(k_.values.size(), defined, "    ");  // those the full-size outputs read
    if (!FullOutputs().empty()) {
      out_ += "    for (int64_t j = begin + threadIdx.x; j < end; j += blockDim.x) {\n";
      EmitElement("j", "      ");
      out_ += "    }\n";
    }
    out_ += "  }\n}\n\n";
  }

  void EmitSplitFinish() {
    addressing_ = Addressing::kAnyStride;
    OpenKernel("_split_finish");
    DeclareScratch();
    out_ += "  for (int64_t row = blockIdx.x; row < args.rows; row += gridDim.x) {\n";
    EmitPointers("row", "    ");
    std::vector<bool> defined(k_.values.size(), false);
    const std::vector<int> reductions = Reductions();
    for (size_t q = 0; q < reductions.size(); ++q) {
      const int r = reductions[q];
      const ReductionSpelling s = SpellReduction(r);
      absl::StrAppendFormat(&out_, "    %s acc%d = %s;\n", s.accumulator_type, r, s.identity);
      const std::string acc = absl::StrCat("acc", r);
      absl::StrAppendFormat(&out_, "    for (int64_t part = threadIdx.x; part < args.split; part += blockDim.x) {\n      %s = %s;\n    }\n",
                            acc, s.Combine(acc, PartialSlot(static_cast<int>(q), s.accumulator_type, "part")));
      EmitBlockCombine(r, s, "    ");
      absl::StrAppend(&out_, "    ", ReductionResult(r, acc, "n"), "\n");
      defined[r] = true;
    }
    EmitReadyRowValues(k_.values.size(), defined, "    ");
    EmitRowOutputs("    ");
    out_ += "  }\n}\n\n";
  }

  Addressing addressing_ = Addressing::kAnyStride;
};

constexpr char kCudaHelpers[] = R"(
// ---- helpers of generated CUDA kernels ----
template <typename T, int N>
struct alignas(sizeof(T) * N) DtVec {
  T v[N];
};

// Whether operand `operand` can be read or written `width` elements at a time from every row's
// element 0 on: unit inner stride, a base aligned to the vector, rows starting on vector bounds.
__device__ __forceinline__ bool dt_vector_ready(const dt::CudaKernelArgs& args, int operand, int64_t width,
                                                int64_t bytes) {
  if (args.inner_strides[operand] != 1) return false;
  if (reinterpret_cast<uint64_t>(args.data[operand]) % bytes != 0) return false;
  for (int64_t d = 0; d < args.outer_rank; ++d) {
    if (args.outer_strides[operand][d] % width != 0) return false;
  }
  return true;
}

template <typename T>
__device__ __forceinline__ T dt_shfl_xor(T v, int mask) {
  return static_cast<T>(__shfl_xor_sync(0xffffffffu, v, mask));
}

// Combines one value per thread of the block; every thread gets the result. REQUIRES: blockDim.x
// a multiple of 32, at most 1024; every thread of the block calls it.
template <typename T, typename Combine>
__device__ __forceinline__ T dt_block_reduce(T v, T identity, T* scratch, Combine combine) {
  for (int mask = 16; mask > 0; mask >>= 1) v = combine(v, dt_shfl_xor(v, mask));
  const int lane = threadIdx.x & 31;
  const int warps = (blockDim.x + 31) >> 5;
  __syncthreads();  // the previous row's readers of `scratch` are done
  if (lane == 0) scratch[threadIdx.x >> 5] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : identity;
  for (int mask = 16; mask > 0; mask >>= 1) v = combine(v, dt_shfl_xor(v, mask));
  return v;
}

)";

}  // namespace

absl::StatusOr<CudaProgram> EmitCuda(const Program& program) {
  CudaProgram out;
  for (const Kernel& k : program.kernels) {
    if (k.operands.size() > static_cast<size_t>(kCudaMaxOperands)) {
      return absl::UnimplementedError(absl::StrFormat("CUDA kernel %s has %d operands; the launch ABI holds %d",
                                                      k.name, k.operands.size(), kCudaMaxOperands));
    }
    const int64_t rank = program.graph.value(k.domain).meta.ndim();
    if (rank > kCudaMaxOuterRank + 1) {
      return absl::UnimplementedError(absl::StrFormat("CUDA kernel %s has a rank-%d domain; the launch ABI holds %d",
                                                      k.name, rank, kCudaMaxOuterRank + 1));
    }
    CudaKernelInfo info;
    out.readable += CudaKernelEmitter(k).Emit(&info);
    out.kernels.push_back(std::move(info));
  }
  out.source = absl::StrCat("// Generated by dyntrace's CUDA backend.\n", KernelPrelude(), CudaLaunchAbiSource(),
                            kCudaHelpers, out.readable);
  return out;
}

}  // namespace dt::backend
