#include "jit/cuda_codegen.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "jit/cpp_codegen.h"
#include "jit/cuda_launch_abi.h"
#include "runtime/errors.h"
#include "jit/kernel_printer.h"

namespace dt::jit {
namespace {

// Widest access of the vector paths: 16-byte loads and stores.
constexpr int64_t kVectorBytes = 16;
// Bytes of the widest operand each thread of a pointwise kernel's vector path handles per
// iteration: two 16-byte accesses, so that twice the loads are in flight per thread.
constexpr int64_t kPointwiseThreadBytes = 32;
// More lanes than this only lengthens the unrolled body (bool-only kernels).
constexpr int kMaxVectorWidth = 16;
// Warps per block the block reduction's shared exchange is sized for (1024 threads).
constexpr int kMaxWarps = 32;
// Register bytes per thread for a row kernel's cached operands: 16 registers, so that the
// 64 registers __launch_bounds__(1024) allows keep room for the rest of the kernel.
constexpr int kRowCacheBytes = 64;
// Element slots per thread on the cached row path when no operand is cached (nothing is held
// across passes; the slots only batch the loads).
constexpr int kUncachedRowSlots = 16;
// The most element slots per thread on the cached row path.
constexpr int kMaxRowSlots = 32;

// How Element() addresses an operand in the code being printed.
enum class Addressing : uint8_t {
  kAnyStride,    // p[j * inner_stride], strides read at run time
  kTraceStride,  // the trace's inner strides (0 or 1) written in: the vector path's ragged end
  kVectorLane,   // lane `l` of the operand's vector register (stride-1 operands)
  kRowSlotVector,  // cached row path, vector variant: slot k's vector (cached, loaded or stored)
  kRowSlotScalar,  // cached row path, scalar variant: slot k's register, or p[j * stride]
};

class CudaKernelEmitter : public KernelPrinter {
 public:
  explicit CudaKernelEmitter(const Kernel& k) : KernelPrinter(k) {}

  // The kernel's functions, in order: (name, code).
  std::vector<std::pair<std::string, std::string>> Emit(CudaKernelInfo* info) {
    EmitAll(info);
    std::vector<std::pair<std::string, std::string>> functions;
    for (size_t i = 0; i < function_starts_.size(); ++i) {
      const size_t end = i + 1 < function_starts_.size() ? function_starts_[i + 1].second : out_.size();
      functions.emplace_back(function_starts_[i].first, out_.substr(function_starts_[i].second, end - function_starts_[i].second));
      info->functions.push_back(function_starts_[i].first);
    }
    return functions;
  }

 private:
  void EmitAll(CudaKernelInfo* info) {
    info->name = k_.name;
    info->is_row_kernel = k_.is_row_kernel();
    if (info->is_row_kernel) {
      info->num_reductions = static_cast<int>(Reductions().size());
      for (int r : Reductions()) info->static_shared_bytes += kMaxWarps * static_cast<int>(ItemSize(k_.values[r].accumulator_dtype));
      info->vector_width = VectorWidth(kVectorBytes);
      info->row_slots = RowSlots(info->vector_width);
      if (info->vector_width > 1) info->vector_checks = HostVectorChecks(info->vector_width);
      EmitRowKernel(info->vector_width, info->row_slots);
      info->has_split = Splittable();
      if (info->has_split) {
        EmitSplitPartial();
        EmitSplitFinish();
      }
    } else {
      info->vector_width = VectorWidth(kPointwiseThreadBytes);
      if (info->vector_width > 1) info->vector_checks = HostVectorChecks(info->vector_width);
      EmitPointwiseKernel(info->vector_width);
    }
  }

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
      case Addressing::kRowSlotVector:
        if (op.predicted_inner_stride == 0) return absl::StrCat("p", operand, "[0]");
        if (cached_.count(operand)) return absl::StrCat("c", operand, "[k * ", row_vector_width_, " + l]");
        return absl::StrCat(op.is_output ? "out" : "in", operand, ".v[l]");
      case Addressing::kRowSlotScalar:
        if (cached_.count(operand)) return absl::StrCat("c", operand, "[k]");
        return absl::StrCat("p", operand, "[", j, " * is", operand, "]");
    }
    return "";
  }

  // Elements per thread on the vector path, or 1 when the trace saw a full-size operand with a
  // general inner stride (or none with stride 1).
  int VectorWidth(int64_t thread_bytes) const {
    int64_t widest = 0;
    for (size_t i = 0; i < k_.operands.size(); ++i) {
      if (!FullTensor(static_cast<int>(i))) continue;
      const int predicted = k_.operands[i].predicted_inner_stride;
      if (predicted < 0) return 1;
      if (predicted == 1) widest = std::max(widest, ItemSize(k_.operands[i].dtype));
    }
    if (widest == 0) return 1;
    return static_cast<int>(std::min<int64_t>(kMaxVectorWidth, thread_bytes / widest));
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

  // `max_block`: the most threads the launcher gives the function (its __launch_bounds__, which
  // caps its registers at 65536 / max_block).
  void OpenKernel(const std::string& suffix, int max_block = 1024) {
    function_starts_.emplace_back(absl::StrCat(k_.name, suffix), out_.size());
    absl::StrAppendFormat(&out_, "extern \"C\" __global__ void __launch_bounds__(%d) %s%s(const dt::CudaKernelArgs args) {\n",
                          max_block, k_.name, suffix);
    out_ += "  const int64_t n = args.n;\n";
    for (size_t i = 0; i < k_.operands.size(); ++i) {
      if (FullTensor(static_cast<int>(i))) {
        absl::StrAppendFormat(&out_, "  const int64_t is%d = args.inner_strides[%d];\n", i, i);
      }
    }
  }

  // Whether operand `i` is one side of a fused in-place write (the store, or the load of the
  // tensor it stores into). Such a pair points at the same memory, so neither is __restrict__:
  // a const __restrict__ load may go through the non-coherent read-only cache.
  bool InPlacePair(int i) const {
    const KernelOperand& op = k_.operands[i];
    if (op.is_output) return op.write_into >= 0;
    for (const KernelOperand& other : k_.operands) {
      if (other.is_output && other.write_into >= 0 && other.write_into == op.value) return true;
    }
    return false;
  }

  // Pointers p<i> to each operand's element 0 of outer row `row`.
  void EmitPointers(const std::string& row, const std::string& indent) {
    absl::StrAppendFormat(&out_, "%sint64_t off[%d];\n", indent, k_.operands.size());
    absl::StrAppendFormat(&out_, "%sdt::RowOffsets(args, %s, off);\n", indent, row);
    for (size_t i = 0; i < k_.operands.size(); ++i) {
      const KernelOperand& op = k_.operands[i];
      const std::string type = absl::StrCat(op.is_output ? "" : "const ", CppType(op.dtype));
      absl::StrAppendFormat(&out_, "%s%s*%s p%d = reinterpret_cast<%s*>(args.data[%d]) + off[%d];\n", indent,
                            type, InPlacePair(static_cast<int>(i)) ? "" : " __restrict__", i, type, i, i);
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

  // A pointwise function's opening: this thread's first index and the grid's stride.
  void OpenGridStrideKernel(const std::string& suffix) {
    OpenKernel(suffix);
    out_ += "  const int64_t start = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;\n";
    out_ += "  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;\n";
  }

  // `k`: the general grid-stride loop; with `width` > 1 also `k_vector`, `width` elements per
  // thread, which the launcher picks when every full-size operand's layout allows it.
  void EmitPointwiseKernel(int width) {
    if (width > 1) {
      OpenGridStrideKernel("_vector");
      EmitVectorPath(width);
      out_ += "}\n\n";
    }
    OpenGridStrideKernel("");
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

  // The vector path's body: every full-size operand unit-stride (or broadcast) and aligned, as
  // CudaKernelInfo::vector_checks states for the launcher.
  void EmitVectorPath(int width) {
    absl::StrAppendFormat(&out_, "  // %d elements per thread.\n  {\n", width);
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

  // Full-size input operands that more than one pass over the row reads (a reduction's inputs,
  // the outputs' cone): the cached row path loads them once into registers. Broadcast ones
  // (trace stride 0) are one element and stay in memory.
  std::set<int> MultiPassOperands() const {
    std::map<int, int> reads;
    for (const std::vector<int>& roots : PassRoots()) {
      std::set<int> in_pass;
      for (int i : FullCone(roots)) {
        const KernelValue& v = k_.values[i];
        if (v.kind == ValueKind::kLoad && FullTensor(v.operand) && k_.operands[v.operand].predicted_inner_stride != 0) {
          in_pass.insert(v.operand);
        }
      }
      for (int o : in_pass) ++reads[o];
    }
    std::set<int> multi;
    for (const auto& [operand, count] : reads) {
      if (count > 1) multi.insert(operand);
    }
    return multi;
  }

  // The values each pass over the row computes at every element: each reduction's input, in
  // order, then the full-size outputs (when there are any).
  std::vector<std::vector<int>> PassRoots() const {
    std::vector<std::vector<int>> roots;
    for (int r : Reductions()) roots.push_back({k_.values[r].args[0]});
    if (!FullOutputs().empty()) roots.push_back(FullOutputs());
    return roots;
  }

  // Elements each thread holds on the cached row path: the multi-pass operands fit in
  // kRowCacheBytes of registers; a multiple of the vector width.
  int RowSlots(int width) const {
    int64_t bytes = 0;
    for (int o : MultiPassOperands()) bytes += ItemSize(k_.operands[o].dtype);
    int64_t slots = bytes == 0 ? kUncachedRowSlots : kRowCacheBytes / bytes;
    slots = std::min<int64_t>(kMaxRowSlots, slots) / width * width;
    return static_cast<int>(std::max<int64_t>(width, slots));
  }

  // Rows of at most `slots` * blockDim.x elements: each thread loads its slots of the multi-pass
  // operands once, and every pass (each reduction, then the outputs) reads the registers:
  // `k_vector` 16 bytes at a time (every operand aligned, rows of whole vectors), `k_cached`
  // element by element at any stride. Longer rows take `k`, which reads memory in each pass.
  // The launcher picks one (cuda_launch.h), so each function is short and compiles on its own:
  // NVRTC's time follows the length of the code, and one function holding all three paths
  // took most of a transformer layer's compile (1.0 s for a layer norm).
  void EmitRowKernel(int width, int slots) {
    cached_ = MultiPassOperands();
    row_vector_width_ = width;
    if (width > 1) EmitRowPath(RowPath::kVector, width, slots);
    EmitRowPath(RowPath::kCached, width, slots);
    cached_.clear();
    EmitRowPath(RowPath::kUncached, width, slots);
    addressing_ = Addressing::kAnyStride;
  }

  enum class RowPath { kVector, kCached, kUncached };

  void EmitRowPath(RowPath path, int width, int slots) {
    addressing_ = Addressing::kAnyStride;
    // The strided cached path holds its slots, 64-bit strides and pointers at once: at 64
    // registers (1024 threads) it spilled; it is launched with at most kStridedRowBlockBound.
    if (path == RowPath::kCached) {
      OpenKernel("_cached", kStridedRowBlockBound);
    } else {
      OpenKernel(path == RowPath::kVector ? "_vector" : "");
    }
    DeclareScratch();
    out_ += "  for (int64_t row = blockIdx.x; row < args.rows; row += gridDim.x) {\n";
    EmitPointers("row", "    ");
    const PassReuse reuse = path == RowPath::kUncached ? NoReuse() : PlanPassReuse(slots);
    if (path != RowPath::kUncached) EmitCachedLoads(path, width, slots, reuse);
    std::vector<bool> defined(k_.values.size(), false);
    const std::vector<int> reductions = Reductions();
    for (size_t q = 0; q < reductions.size(); ++q) {
      const int r = reductions[q];
      EmitReadyRowValues(r, defined, "    ");
      const ReductionSpelling s = SpellReduction(r);
      absl::StrAppendFormat(&out_, "    %s acc%d = %s;\n", s.accumulator_type, r, s.identity);
      const std::string acc = absl::StrCat("acc", r);
      EmitPass(path, width, slots, reuse, q, absl::StrCat(acc, " = ", s.Combine(acc, s.input), ";"), false);
      EmitBlockCombine(r, s, "    ");
      absl::StrAppend(&out_, "    ", ReductionResult(r, acc, "n"), "\n");
      defined[r] = true;
    }
    EmitReadyRowValues(k_.values.size(), defined, "    ");
    if (!FullOutputs().empty()) EmitPass(path, width, slots, reuse, reductions.size(), "", true);
    EmitRowOutputs("    ");
    out_ += "  }\n}\n\n";
  }

  // What the host checks before choosing `k_vector`, operand by operand (VectorPathReady).
  std::vector<CudaVectorCheck> HostVectorChecks(int width) const {
    std::vector<CudaVectorCheck> checks;
    for (size_t i = 0; i < k_.operands.size(); ++i) {
      if (!FullTensor(static_cast<int>(i))) continue;
      const int64_t item = ItemSize(k_.operands[i].dtype);
      const int64_t access = std::min<int64_t>(kVectorBytes, width * item);
      checks.push_back(CudaVectorCheck{static_cast<int>(i), access / item, access,
                                       k_.operands[i].predicted_inner_stride == 0});
    }
    return checks;
  }

  // Which full-size values a pass of the cached path takes from registers another pass filled:
  // a pass needing a pointwise value an earlier pass computed (softmax's exp, which its sum
  // folds and its outputs divide) reads it back instead of computing it again, when the
  // registers, with the cached operands', stay within twice kRowCacheBytes per thread.
  struct PassReuse {
    std::vector<std::vector<int>> roots;       // per pass: the reductions' inputs, then the outputs
    std::vector<std::set<int>> reads;          // per pass: values read from s<i>[slot]
    std::vector<std::set<int>> writes;         // per pass: values stored to s<i>[slot]
    std::set<int> stored;                      // every value with an s<i> array
  };

  // The uncached path's passes: each computes its whole cone from memory.
  PassReuse NoReuse() const {
    PassReuse plan;
    plan.roots = PassRoots();
    plan.reads.resize(plan.roots.size());
    plan.writes.resize(plan.roots.size());
    return plan;
  }

  PassReuse PlanPassReuse(int slots) const {
    PassReuse plan;
    plan.roots = PassRoots();
    int64_t bytes = 0;
    for (int o : cached_) bytes += ItemSize(k_.operands[o].dtype);
    std::map<int, size_t> first_pass;  // value -> the pass that computes it
    for (size_t p = 0; p < plan.roots.size(); ++p) {
      const std::vector<int> full = FullCone(plan.roots[p]);
      std::set<int> known;
      for (int i : full) {
        if (first_pass.count(i) && k_.values[i].kind == ValueKind::kPointwise) known.insert(i);
      }
      std::set<int> reads;
      for (int c : known) {
        bool needed = std::find(plan.roots[p].begin(), plan.roots[p].end(), c) != plan.roots[p].end();
        for (int i : full) {
          if (known.count(i)) continue;
          for (int a : k_.values[i].args) needed = needed || a == c;
        }
        if (!needed) continue;
        if (!plan.stored.count(c)) {
          const int64_t item = ItemSize(k_.values[c].dtype);
          if ((bytes + item) * slots > 2 * kRowCacheBytes) continue;
          bytes += item;
          plan.stored.insert(c);
        }
        reads.insert(c);
      }
      for (int i : FullCone(plan.roots[p], reads)) first_pass.emplace(i, p);
      plan.reads.push_back(std::move(reads));
    }
    plan.writes.resize(plan.roots.size());
    for (int c : plan.stored) plan.writes[first_pass[c]].insert(c);
    return plan;
  }

  // A cached path's registers: each multi-pass operand's slots (filled here, a vector at a time
  // on the vector path) and the values a pass keeps for later ones.
  void EmitCachedLoads(RowPath path, int width, int slots, const PassReuse& reuse) {
    for (int o : cached_) {
      absl::StrAppendFormat(&out_, "    %s c%d[%d];\n", CppType(k_.operands[o].dtype), o, slots);
    }
    for (int c : reuse.stored) {
      absl::StrAppendFormat(&out_, "    %s s%d[%d];\n", CppType(k_.values[c].dtype), c, slots);
    }
    if (cached_.empty()) return;
    if (path == RowPath::kVector) {
      absl::StrAppendFormat(&out_, "    #pragma unroll\n    for (int k = 0; k < %d; ++k) {\n", slots / width);
      for (int o : cached_) {
        const char* type = CppType(k_.operands[o].dtype);
        absl::StrAppendFormat(&out_, "      const DtVec<%s, %d> v%d = dt_load_whole_vec<%s, %d>(p%d, %s, n);\n", type,
                              width, o, type, width, o, SlotStart(width));
        absl::StrAppendFormat(&out_, "      #pragma unroll\n      for (int l = 0; l < %d; ++l) c%d[k * %d + l] = v%d.v[l];\n",
                              width, o, width, o);
      }
      out_ += "    }\n";
      return;
    }
    absl::StrAppendFormat(&out_, "    #pragma unroll\n    for (int k = 0; k < %d; ++k) {\n", slots);
    absl::StrAppendFormat(&out_, "      const int64_t j = %s;\n", SlotStart(1));
    for (int o : cached_) {
      absl::StrAppendFormat(&out_, "      c%d[k] = j < n ? p%d[j * is%d] : %s();\n", o, o, o, CppType(k_.operands[o].dtype));
    }
    out_ += "    }\n";
  }

  // Pass `pass` over the row's elements on `path`: `fold` (a reduction's combine) or, with
  // `stores`, the full-size outputs at each element.
  void EmitPass(RowPath path, int width, int slots, const PassReuse& reuse, size_t pass, const std::string& fold,
                bool stores) {
    if (path == RowPath::kVector) {
      addressing_ = Addressing::kRowSlotVector;
      EmitSlotLoop(width, slots / width, reuse, pass, fold, stores, "    ");
      return;
    }
    if (path == RowPath::kCached) {
      addressing_ = Addressing::kRowSlotScalar;
      EmitSlotLoop(1, slots, reuse, pass, fold, stores, "    ");
      return;
    }
    addressing_ = Addressing::kAnyStride;
    out_ += "    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {\n";
    EmitStatements(FullCone(reuse.roots[pass]), "j", "      ");
    if (!fold.empty()) absl::StrAppend(&out_, "      ", fold, "\n");
    if (stores) EmitFullStores("j", "      ");
    out_ += "    }\n";
  }

  static std::string SlotStart(int width) {
    if (width == 1) return "k * static_cast<int64_t>(blockDim.x) + threadIdx.x";
    return absl::StrFormat("(k * static_cast<int64_t>(blockDim.x) + threadIdx.x) * %d", width);
  }

  // Pass `pass`'s statements at one element: values reuse.reads[pass] from their registers,
  // the rest computed; then the values the pass keeps for later ones.
  void EmitPassStatements(const PassReuse& reuse, size_t pass, const std::string& slot, const std::string& indent) {
    const std::set<int>& reads = reuse.reads[pass];
    for (int i : FullCone(reuse.roots[pass], reads)) {
      if (reads.count(i)) {
        absl::StrAppendFormat(&out_, "%sconst %s v%d = s%d[%s];\n", indent, CppType(k_.values[i].dtype), i, i, slot);
      } else {
        absl::StrAppend(&out_, indent, ValueStatement(i, "j"), "\n");
      }
    }
    for (int c : reuse.writes[pass]) absl::StrAppendFormat(&out_, "%ss%d[%s] = v%d;\n", indent, c, slot, c);
  }

  // One pass over a thread's slots: the pass's statements at each element below n, then `fold`
  // (a reduction's combine) or, with `stores`, the full-size outputs.
  void EmitSlotLoop(int width, int per_thread, const PassReuse& reuse, size_t pass, const std::string& fold, bool stores,
                    const std::string& indent) {
    const std::vector<int> cone = FullCone(reuse.roots[pass], reuse.reads[pass]);
    const std::string in = indent + "  ";
    absl::StrAppendFormat(&out_, "%s#pragma unroll\n%sfor (int k = 0; k < %d; ++k) {\n", indent, indent, per_thread);
    if (width == 1) {
      absl::StrAppendFormat(&out_, "%sconst int64_t j = %s;\n%sif (j < n) {\n", in, SlotStart(1), in);
      EmitPassStatements(reuse, pass, "k", in + "  ");
      if (!fold.empty()) absl::StrAppend(&out_, in, "  ", fold, "\n");
      if (stores) EmitFullStores("j", in + "  ");
      absl::StrAppendFormat(&out_, "%s}\n%s}\n", in, indent);
      return;
    }
    // The row is whole vectors: a slot is all inside the row or all past its end.
    absl::StrAppendFormat(&out_, "%sconst int64_t j0 = %s;\n%sif (j0 < n) {\n", in, SlotStart(width), in);
    const std::string body = in + "  ";
    std::set<int> loaded;
    for (int i : cone) {
      const KernelValue& v = k_.values[i];
      if (v.kind == ValueKind::kLoad && FullTensor(v.operand) && k_.operands[v.operand].predicted_inner_stride != 0 &&
          !cached_.count(v.operand)) {
        loaded.insert(v.operand);
      }
    }
    for (int o : loaded) {
      const char* type = CppType(k_.operands[o].dtype);
      absl::StrAppendFormat(&out_, "%sconst DtVec<%s, %d> in%d = *reinterpret_cast<const DtVec<%s, %d>*>(p%d + j0);\n",
                            body, type, width, o, type, width, o);
    }
    std::vector<int> stored;
    if (stores) {
      for (size_t o = 0; o < k_.operands.size(); ++o) {
        const KernelOperand& op = k_.operands[o];
        if (op.is_output && FullTensor(static_cast<int>(o)) && op.predicted_inner_stride != 0) {
          stored.push_back(static_cast<int>(o));
          absl::StrAppendFormat(&out_, "%sDtVec<%s, %d> out%d;\n", body, CppType(op.dtype), width, o);
        }
      }
    }
    const std::string slot = absl::StrCat("k * ", width, " + l");
    absl::StrAppendFormat(&out_, "%s#pragma unroll\n%sfor (int l = 0; l < %d; ++l) {\n", body, body, width);
    absl::StrAppendFormat(&out_, "%s  const int64_t j = j0 + l;\n", body);
    EmitPassStatements(reuse, pass, slot, body + "  ");
    if (!fold.empty()) absl::StrAppend(&out_, body, "  ", fold, "\n");
    if (stores) EmitFullStores("j", body + "  ");
    absl::StrAppendFormat(&out_, "%s}\n", body);
    for (int o : stored) {
      const char* type = CppType(k_.operands[o].dtype);
      absl::StrAppendFormat(&out_, "%s*reinterpret_cast<DtVec<%s, %d>*>(p%d + j0) = out%d;\n", body, type, width, o, o);
    }
    absl::StrAppendFormat(&out_, "%s}\n%s}\n", in, indent);
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
  std::set<int> cached_;  // the cached row path's register-held operands
  int row_vector_width_ = 1;  // elements per slot on a row kernel's vector path
  std::vector<std::pair<std::string, size_t>> function_starts_;  // each function's name and offset in out_
};

constexpr char kCudaHelpers[] = R"(
// ---- helpers of generated CUDA kernels ----
// N elements, aligned to their size up to 16 bytes: a wider one is read and written as several
// 16-byte accesses.
template <typename T, int N>
struct alignas(sizeof(T) * N < 16 ? sizeof(T) * N : 16) DtVec {
  T v[N];
};

// Elements j0 .. j0 + N - 1 of a unit-stride row whose length is a multiple of N: the vector,
// or T()s when it starts past the row's end. REQUIRES: p + j0 aligned to the vector.
template <typename T, int N>
__device__ __forceinline__ DtVec<T, N> dt_load_whole_vec(const T* p, int64_t j0, int64_t n) {
  if (j0 < n) return *reinterpret_cast<const DtVec<T, N>*>(p + j0);
  return DtVec<T, N>{};
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

// What every translation unit starts with: the pasted runtime headers and the CUDA helpers.
const std::string& UnitHeader() {
  static const std::string* header = new std::string(absl::StrCat(
      "// Generated by dyntrace's CUDA backend.\n", KernelPrelude(), CudaLaunchAbiSource(), kCudaHelpers));
  return *header;
}

// Spreads kernel functions over units, longest first onto the least loaded (text length stands
// in for NVRTC's time), in as many units as `max_units` and kMinUnitKernelBytes allow.
std::vector<int> AssignUnits(const std::vector<std::string>& texts, int max_units) {
  size_t total = 0;
  for (const std::string& t : texts) total += t.size();
  const size_t by_size = std::max<size_t>(1, total / kMinUnitKernelBytes);
  const size_t units = std::min({static_cast<size_t>(std::max(1, max_units)), by_size, std::max<size_t>(1, texts.size())});
  std::vector<size_t> order(texts.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return texts[a].size() > texts[b].size(); });
  std::vector<size_t> load(units, 0);
  std::vector<int> unit_of(texts.size(), 0);
  for (size_t i : order) {
    const size_t u = std::min_element(load.begin(), load.end()) - load.begin();
    unit_of[i] = static_cast<int>(u);
    load[u] += texts[i].size();
  }
  return unit_of;
}

}  // namespace

absl::StatusOr<CudaProgram> EmitCuda(const Program& program, int max_units) {
  CudaProgram out;
  std::vector<std::pair<std::string, std::string>> functions;  // the distinct kernels' functions
  absl::flat_hash_map<std::string, size_t> first_with_code;
  for (const Kernel& k : program.kernels) {
    for (const KernelValue& v : k.values) {
      if (v.kind == ValueKind::kColumnReduce) {
        return absl::UnimplementedError(absl::StrFormat("CUDA kernel %s folds rows into columns (a CPU schedule)", k.name));
      }
    }
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
    const std::vector<std::pair<std::string, std::string>> kernel_functions = CudaKernelEmitter(k).Emit(&info);
    std::string text;
    for (const auto& [name, code] : kernel_functions) text += code;
    // A kernel whose code another one already has (an optimizer's update of each parameter of
    // one shape) launches that one's functions: NVRTC's time follows the text it parses.
    auto [first, added] = first_with_code.try_emplace(WithoutKernelName(text, k.name), out.kernels.size());
    if (!added) {
      out.readable += absl::StrFormat("// %s: the code of %s\n", k.name, out.kernels[first->second].name);
      out.kernels.push_back(out.kernels[first->second]);
      continue;
    }
    out.readable += text;
    functions.insert(functions.end(), kernel_functions.begin(), kernel_functions.end());
    out.kernels.push_back(std::move(info));
  }
  std::vector<std::string> texts;
  for (const auto& [name, code] : functions) texts.push_back(code);
  const std::vector<int> unit_of_text = AssignUnits(texts, max_units);
  const int units = unit_of_text.empty() ? 0 : *std::max_element(unit_of_text.begin(), unit_of_text.end()) + 1;
  out.sources.assign(units, UnitHeader());
  for (size_t i = 0; i < functions.size(); ++i) {
    out.sources[unit_of_text[i]] += functions[i].second;
    out.unit_of_function[functions[i].first] = unit_of_text[i];
  }
  return out;
}

ScheduleOptions CudaScheduleOptions(std::optional<Device> device) {
  return ScheduleOptions{.fuse_in_place_writes = true,
                         .in_place_writes_alone = true,
                         .max_operands = kCudaMaxOperands,
                         .fuse_attention = true,
                         .device = device};
}

absl::StatusOr<CudaProgram> EmitCudaFor(const Graph& graph, int max_units) {
  DT_ASSIGN_OR_RETURN(Program program, Schedule(graph, CudaScheduleOptions()));
  return EmitCuda(program, max_units);
}

}  // namespace dt::jit
