#include "jit/cpp_codegen.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstring>
#include <set>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace dt::jit {
namespace {

// How an operand's elements are declared in memory: bool as uint8_t. GCC (12) vectorises no loop
// that loads a C++ bool, nor some that store one beside floats (relu's output and its mask for
// backward ran one element at a time); the bytes are the same 0 and 1, and conversions to and
// from bool in the loop body are compares and zero-extensions that vectorise.
const char* MemoryType(DType dtype) { return dtype == DType::kBool ? "uint8_t" : CppType(dtype); }

// Below this many elements a kernel runs on one thread: waking the pool costs more.
constexpr int64_t kParallelThreshold = 1 << 16;
// Elements of a row a pointwise tile covers, so long rows still spread over threads.
constexpr int64_t kTileSize = 8192;
// Independent accumulators in a reduction loop: lets the compiler vectorise ordered combiners.
constexpr int kLanes = 16;
// Pointwise kernels writing at least this many bytes stream their contiguous outputs past the
// cache: the outputs could not stay cached for a later kernel anyway.
constexpr int64_t kStreamBytes = 8 << 20;
// Elements computed into a local buffer per streamed store sequence.
constexpr int kStreamChunk = 64;
// Before each element loop: no iteration reads what another writes (the __restrict promise of
// EmitPointers, which GCC drops for pointers declared inside the row loop). Without it GCC checks
// each load/store pair at run time, and past 10 pairs (--param vect-max-version-for-alias-checks)
// gives up: a kernel with two GELU outputs ran scalar, 12x slower per element than one with one.
constexpr char kNoLoopCarriedAliasing[] = "#pragma GCC ivdep\n";

class KernelEmitter : public KernelPrinter {
 public:
  KernelEmitter(const Kernel& k, bool fixed) : KernelPrinter(k), fixed_(fixed) {}

  std::string Emit() {
    const int m = static_cast<int>(k_.operands.size());
    absl::StrAppendFormat(&out_,
                          "extern \"C\" void %s_%s(int64_t outer_rank, const int64_t* outer_sizes, "
                          "int64_t n, char* const* data, const int64_t* strides) {\n",
                          k_.name, fixed_ ? "fixed" : "any");
    out_ += "  int64_t rows = 1;\n  for (int64_t d = 0; d < outer_rank; ++d) rows *= outer_sizes[d];\n";
    out_ += "  const int64_t stride_count = outer_rank + 1;\n";
    for (int i = 0; i < m; ++i) {
      if (!UsesFixedStride(i)) {
        absl::StrAppendFormat(&out_, "  const int64_t is%d = strides[%d * stride_count + outer_rank];\n", i, i);
      }
    }
    if (k_.is_row_kernel()) {
      EmitRowKernel();
    } else {
      EmitPointwiseKernel();
    }
    out_ += "}\n\n";
    return out_;
  }

 private:
  bool UsesFixedStride(int operand) const {
    return fixed_ && k_.operands[operand].predicted_inner_stride >= 0;
  }

  std::string Element(int operand, const std::string& j) const override {
    const KernelOperand& op = k_.operands[operand];
    if (op.mapping != Mapping::kFull || op.scalar_slot >= 0) return absl::StrCat("p", operand, "[0]");
    if (UsesFixedStride(operand)) {
      return op.predicted_inner_stride == 0 ? absl::StrCat("p", operand, "[0]")
                                            : absl::StrCat("p", operand, "[", j, "]");
    }
    return absl::StrCat("p", operand, "[", j, " * is", operand, "]");
  }

  void EmitPointers(const std::string& row, const std::string& indent) {
    const int m = static_cast<int>(k_.operands.size());
    absl::StrAppendFormat(&out_, "%sint64_t off[%d];\n", indent, m);
    absl::StrAppendFormat(&out_, "%sdt_row_offsets(%s, outer_rank, outer_sizes, strides, %d, off);\n",
                          indent, row, m);
    // A fused in-place write (KernelOperand::write_into) stores through the same memory one of
    // the loads reads, at the same element: each element is loaded before its own store in one
    // iteration and never read again (the schedule admits only element-for-element reads of the
    // written tensor), so reordering across distinct elements, which __restrict permits, cannot
    // observe the overlap.
    for (int i = 0; i < m; ++i) {
      const KernelOperand& op = k_.operands[i];
      absl::StrAppendFormat(&out_, "%s%s%s* __restrict p%d = reinterpret_cast<%s%s*>(data[%d]) + off[%d];\n",
                            indent, op.is_output ? "" : "const ", MemoryType(op.dtype), i,
                            op.is_output ? "" : "const ", MemoryType(op.dtype), i, i);
    }
  }

  // Full-level values the `roots` need; a value already in its row buffer is read back from it.
  std::vector<int> FullCone(const std::vector<int>& roots) const {
    return KernelPrinter::FullCone(roots, cached_ready_);
  }

  void EmitCone(const std::vector<int>& cone, const std::string& j, const std::string& indent) {
    for (int i : cone) {
      if (cached_ready_.count(i)) {
        absl::StrAppendFormat(&out_, "%sconst %s v%d = row_buffer%d[%s];\n", indent, CppType(k_.values[i].dtype), i, i, j);
      } else {
        absl::StrAppend(&out_, indent, ValueStatement(i, j), "\n");
        if (cached_.count(i)) absl::StrAppendFormat(&out_, "%srow_buffer%d[%s] = v%d;\n", indent, i, j, i);
      }
    }
  }

  // Outputs the fixed variant may write with streaming (cache-bypassing) stores: contiguous
  // full-level outputs. Streaming saves the read-for-ownership a normal store of a line that
  // is not cached costs, a third of a large pointwise kernel's memory traffic.
  std::vector<int> StreamableOutputs() const {
    std::vector<int> outs;
    if (!fixed_ || !ColumnReductions().empty()) return outs;
    for (size_t o = 0; o < k_.operands.size(); ++o) {
      const KernelOperand& op = k_.operands[o];
      if (!op.is_output || k_.values[op.source].row_level || stored_in_fill_.count(static_cast<int>(o))) continue;
      if (op.predicted_inner_stride != 1) return {};
      outs.push_back(static_cast<int>(o));
    }
    return outs;
  }

  // The full-level outputs the last pass stores: all but those the first fill stored.
  std::vector<int> PendingFullOutputs() const {
    std::vector<int> roots;
    for (size_t o = 0; o < k_.operands.size(); ++o) {
      const KernelOperand& op = k_.operands[o];
      if (op.is_output && !k_.values[op.source].row_level && !IsColumnOutput(op) &&
          !stored_in_fill_.count(static_cast<int>(o))) {
        roots.push_back(op.source);
      }
    }
    return roots;
  }

  // The values the last pass computes: pending outputs and the column reductions' inputs.
  std::vector<int> LastPassRoots() const {
    std::vector<int> roots = PendingFullOutputs();
    for (int c : ColumnReductions()) {
      if (!columns_in_fill_.count(c)) roots.push_back(k_.values[c].args[0]);
    }
    return roots;
  }

  void EmitColumnFolds(const std::set<int>& columns, const std::string& j, const std::string& indent) {
    for (int c : columns) {
      const ReductionSpelling s = SpellReduction(c);
      const std::string lane = absl::StrFormat("column%d[%s]", c, j);
      absl::StrAppendFormat(&out_, "%s%s = %s;\n", indent, lane, s.Combine(lane, s.input));
    }
  }

  void EmitPointwiseBody(const std::string& j, const std::string& indent) {
    EmitCone(FullCone(LastPassRoots()), j, indent);
    EmitFullStores(j, indent, stored_in_fill_);
    std::set<int> last_pass_columns;
    for (int c : ColumnReductions()) {
      if (!columns_in_fill_.count(c)) last_pass_columns.insert(c);
    }
    EmitColumnFolds(last_pass_columns, j, indent);
  }

  // The tile's elements from `j` on, in chunks computed into a local buffer and then streamed
  // to memory; left at the first element it did not cover.
  void EmitStreamedChunks(const std::vector<int>& outs) {
    const int first = outs[0];
    const char* first_type = MemoryType(k_.operands[first].dtype);
    out_ += "#if defined(DT_CAN_STREAM)\n";
    out_ += "    if (stream) {\n";
    absl::StrAppendFormat(&out_,
                          "      const int64_t head = (int64_t((32 - (reinterpret_cast<uintptr_t>(p%d + j) & 31)) & 31)) / int64_t(sizeof(%s));\n",
                          first, first_type);
    out_ += "      const int64_t head_end = j + head < j1 ? j + head : j1;\n";
    out_ += "      for (; j < head_end; ++j) {\n";
    EmitPointwiseBody("j", "        ");
    out_ += "      }\n";
    std::string aligned = "true";
    for (int o : outs) absl::StrAppendFormat(&aligned, " && (reinterpret_cast<uintptr_t>(p%d + j) & 31) == 0", o);
    absl::StrAppendFormat(&out_, "      if (%s) {\n", aligned);
    absl::StrAppendFormat(&out_, "        for (; j + %d <= j1; j += %d) {\n", kStreamChunk, kStreamChunk);
    for (int o : outs) {
      absl::StrAppendFormat(&out_, "          alignas(32) %s chunk%d[%d];\n", MemoryType(k_.operands[o].dtype), o, kStreamChunk);
    }
    absl::StrAppendFormat(&out_, "          for (int64_t l = 0; l < %d; ++l) {\n", kStreamChunk);
    out_ += "            const int64_t jl = j + l;\n";
    EmitCone(FullCone(PendingFullOutputs()), "jl", "            ");
    for (int o : outs) {
      absl::StrAppendFormat(&out_, "            chunk%d[l] = v%d;\n", o, k_.operands[o].source);
    }
    out_ += "          }\n";
    for (int o : outs) absl::StrAppendFormat(&out_, "          dt_stream_store(p%d + j, chunk%d, sizeof(chunk%d));\n", o, o, o);
    out_ += "        }\n      }\n    }\n";
    out_ += "#endif\n";
  }

  void EmitPointwiseKernel() {
    const std::vector<int> streamed = StreamableOutputs();
    absl::StrAppendFormat(&out_, "  const int64_t tile = %d;\n", kTileSize);
    out_ += "  const int64_t tiles_per_row = n > tile ? (n + tile - 1) / tile : 1;\n";
    out_ += "  const int64_t tiles = rows * tiles_per_row;\n";
    EmitStreamDecision(streamed);
    out_ += "  auto region = [&]() {\n";
    out_ += "#pragma omp for schedule(static) nowait\n";
    out_ += "  for (int64_t t = 0; t < tiles; ++t) {\n";
    out_ += "    const int64_t row = t / tiles_per_row;\n";
    out_ += "    const int64_t j0 = (t - row * tiles_per_row) * tile;\n";
    out_ += "    const int64_t j1 = j0 + tile < n ? j0 + tile : n;\n";
    EmitPointers("row", "    ");
    for (size_t i = 0; i < k_.values.size(); ++i) {
      if (k_.values[i].row_level) absl::StrAppend(&out_, "    ", ValueStatement(static_cast<int>(i), "0"), "\n");
    }
    out_ += "    int64_t j = j0;\n";
    if (!streamed.empty()) EmitStreamedChunks(streamed);
    out_ += kNoLoopCarriedAliasing;
    out_ += "    for (; j < j1; ++j) {\n";
    EmitPointwiseBody("j", "      ");
    out_ += "    }\n  }\n";
    EmitStreamFence(streamed);
    EmitParallelRegionEnd();
  }

  // Closes the `region` lambda that EmitPointwiseKernel / EmitRowKernel opened and runs it: on
  // the OpenMP team when the domain is large, else on the caller's thread without entering
  // libgomp at all (an `omp parallel if (false)` still costs about a microsecond of team set-up
  // and futex calls, more than a small kernel's work).
  void EmitParallelRegionEnd() {
    out_ += "  };\n";
    absl::StrAppendFormat(&out_, "  if (rows * n >= %d) {\n#pragma omp parallel\n    region();\n  } else {\n    region();\n  }\n",
                          kParallelThreshold);
    for (int c : ColumnReductions()) absl::StrAppendFormat(&out_, "  __builtin_free(column_slots%d);\n", c);
  }

  void EmitStreamDecision(const std::vector<int>& streamed) {
    if (streamed.empty()) return;
    std::string bytes = "0";
    for (int o : streamed) absl::StrAppendFormat(&bytes, " + int64_t(sizeof(%s))", MemoryType(k_.operands[o].dtype));
    absl::StrAppendFormat(&out_, "  const bool stream = rows * n * (%s) >= %d;\n", bytes, kStreamBytes);
  }

  // Streaming stores are weakly ordered: each thread fences its own before the threads join.
  void EmitStreamFence(const std::vector<int>& streamed) {
    if (streamed.empty()) return;
    out_ += "#if defined(DT_CAN_STREAM)\n  if (stream) __builtin_ia32_sfence();\n#endif\n";
  }

  // Max/min over a floating row: one pass folding order keys (integer max, which vectorises) and
  // noting NaN; a row that holds NaN is folded again with the float combiner, so which NaN wins
  // is exactly eager's.
  void EmitOrderKeyReduction(int r, const ReductionSpelling& s, const std::vector<int>& cone) {
    const std::string acc = absl::StrFormat("acc%d", r);
    absl::StrAppendFormat(&out_, "    %s key%d = dt::scalar::order_key(%s(%s));\n", s.order_key_type, r,
                          s.accumulator_type, s.identity);
    absl::StrAppendFormat(&out_, "    int has_nan%d = 0;\n", r);
    out_ += kNoLoopCarriedAliasing;
    out_ += "    for (int64_t j = 0; j < n; ++j) {\n";
    EmitCone(cone, "j", "      ");
    absl::StrAppendFormat(&out_, "      const %s x%d = %s;\n", s.accumulator_type, r, s.input);
    absl::StrAppendFormat(&out_, "      key%d = %s(key%d, dt::scalar::order_key(x%d));\n", r, s.order_key_combiner, r, r);
    absl::StrAppendFormat(&out_, "      has_nan%d |= x%d != x%d;\n", r, r, r);
    out_ += "    }\n";
    absl::StrAppendFormat(&out_, "    %s %s = dt::scalar::from_order_key(key%d);\n", s.accumulator_type, acc, r);
    absl::StrAppendFormat(&out_, "    if (has_nan%d) {\n", r);
    absl::StrAppendFormat(&out_, "      %s = %s;\n", acc, s.identity);
    out_ += "      for (int64_t j = 0; j < n; ++j) {\n";
    EmitCone(cone, "j", "        ");
    absl::StrAppendFormat(&out_, "        %s = %s;\n", acc, s.Combine(acc, s.input));
    out_ += "      }\n    }\n";
    absl::StrAppend(&out_, "    ", ReductionResult(r, acc, "n"), "\n");
  }

  void EmitReduction(int r) {
    const ReductionSpelling s = SpellReduction(r);
    const std::vector<int> cone = FullCone({k_.values[r].args[0]});
    if (!s.order_key_combiner.empty()) {
      EmitOrderKeyReduction(r, s, cone);
      return;
    }
    // A float64 input folds into a float64 accumulator in eager's order, one chain: lanes would
    // round differently, and nothing wider hides it (a float sum in double rounds back to float).
    const int lanes = k_.values[k_.values[r].args[0]].dtype == DType::kFloat64 ? 1 : kLanes;
    absl::StrAppendFormat(&out_, "    %s acc%d[%d];\n", s.accumulator_type, r, lanes);
    absl::StrAppendFormat(&out_, "    for (int l = 0; l < %d; ++l) acc%d[l] = %s;\n", lanes, r, s.identity);
    absl::StrAppendFormat(&out_, "    int64_t j%d = 0;\n", r);
    absl::StrAppendFormat(&out_, "    for (; j%d + %d <= n; j%d += %d) {\n", r, lanes, r, lanes);
    out_ += kNoLoopCarriedAliasing;
    absl::StrAppendFormat(&out_, "      for (int l = 0; l < %d; ++l) {\n", lanes);
    absl::StrAppendFormat(&out_, "        const int64_t j = j%d + l;\n", r);
    EmitCone(cone, "j", "        ");
    const std::string lane = absl::StrFormat("acc%d[l]", r);
    absl::StrAppendFormat(&out_, "        %s = %s;\n", lane, s.Combine(lane, s.input));
    out_ += "      }\n    }\n";
    absl::StrAppendFormat(&out_, "    for (int64_t j = j%d; j < n; ++j) {\n", r);
    EmitCone(cone, "j", "      ");
    const std::string first = absl::StrFormat("acc%d[0]", r);
    absl::StrAppendFormat(&out_, "      %s = %s;\n", first, s.Combine(first, s.input));
    out_ += "    }\n";
    absl::StrAppendFormat(&out_, "    for (int l = 1; l < %d; ++l) %s = %s;\n", lanes, first, s.Combine(first, lane));
    absl::StrAppend(&out_, "    ", ReductionResult(r, first, "n"), "\n");
  }

  // A reduction's input that a later pass reads again (softmax's exp(x - max), read by the sum
  // and by the division) is kept in a per-thread row buffer instead of being recomputed.
  void ChooseCachedValues() {
    const std::vector<int> reduces = Reductions();
    for (size_t s = 0; s < reduces.size(); ++s) {
      const int input = k_.values[reduces[s]].args[0];
      if (k_.values[input].row_level || k_.values[input].kind == ValueKind::kLoad) continue;
      std::vector<int> later_roots = FullOutputs();
      for (int c : ColumnReductions()) later_roots.push_back(k_.values[c].args[0]);
      for (size_t t = s + 1; t < reduces.size(); ++t) later_roots.push_back(k_.values[reduces[t]].args[0]);
      const std::vector<int> later = FullCone(later_roots);
      if (std::find(later.begin(), later.end(), input) != later.end()) cached_.insert(input);
    }
  }

  // Contiguous inputs the fixed variant reads along whole rows: the next row's are worth
  // prefetching while this row computes.
  std::vector<int> PrefetchableInputs() const {
    std::vector<int> inputs;
    if (!fixed_) return inputs;
    for (size_t o = 0; o < k_.operands.size(); ++o) {
      const KernelOperand& op = k_.operands[o];
      if (!op.is_output && op.scalar_slot < 0 && op.mapping == Mapping::kFull && op.predicted_inner_stride == 1) {
        inputs.push_back(static_cast<int>(o));
      }
    }
    return inputs;
  }

  // Computes cached value `value` over the row into its row buffer, in a loop of its own: kept
  // out of the reduction's loop, the value's arithmetic vectorises without the accumulator's
  // conversions interleaved (softmax's exp then sums in double), which made GCC spill and
  // blend. The first such loop of a row is the kernel's compute-heavy pass: it prefetches the
  // next row's contiguous inputs, whose first pass (a max) would otherwise wait on memory, and
  // stores the outputs no reduction feeds (OutputsStoredInFill).
  void EmitRowBufferFill(const std::vector<int>& values, bool first_of_row) {
    const int value = values[0];  // names the loop's counter
    const std::vector<int> prefetched = first_of_row ? PrefetchableInputs() : std::vector<int>();
    const std::set<int> stored = first_of_row ? stored_in_fill_ : std::set<int>();
    const std::set<int> folded = first_of_row ? columns_in_fill_ : std::set<int>();
    std::vector<int> roots = values;
    for (int o : stored) roots.push_back(k_.operands[o].source);
    for (int c : folded) roots.push_back(k_.values[c].args[0]);
    const std::vector<int> cone = FullCone(roots);
    if (!prefetched.empty()) {
      absl::StrAppendFormat(&out_, "    int64_t next_off[%d];\n", k_.operands.size());
      absl::StrAppendFormat(&out_, "    dt_row_offsets(row + 1 < rows ? row + 1 : row, outer_rank, outer_sizes, strides, %d, next_off);\n",
                            k_.operands.size());
    }
    absl::StrAppendFormat(&out_, "    int64_t fill%d = 0;\n", value);
    absl::StrAppendFormat(&out_, "    for (; fill%d + %d <= n; fill%d += %d) {\n", value, kLanes, value, kLanes);
    for (int o : prefetched) {
      absl::StrAppendFormat(&out_, "      __builtin_prefetch(reinterpret_cast<const %s*>(data[%d]) + next_off[%d] + fill%d);\n",
                            MemoryType(k_.operands[o].dtype), o, o, value);
    }
    out_ += kNoLoopCarriedAliasing;
    // A constant trip count from 0 (not `j < fill + 16`): GCC then keeps the 16 lanes in one vector.
    absl::StrAppendFormat(&out_, "      for (int l = 0; l < %d; ++l) {\n        const int64_t j = fill%d + l;\n", kLanes, value);
    EmitCone(cone, "j", "        ");
    EmitStores(stored, "j", "        ");
    EmitColumnFolds(folded, "j", "        ");
    out_ += "      }\n    }\n";
    absl::StrAppendFormat(&out_, "    for (int64_t j = fill%d; j < n; ++j) {\n", value);
    EmitCone(cone, "j", "      ");
    EmitStores(stored, "j", "      ");
    EmitColumnFolds(folded, "j", "      ");
    out_ += "    }\n";
    for (int i : cone) {
      if (cached_.count(i)) cached_ready_.insert(i);
    }
  }

  // The cached values reduction `r`'s input needs whose row buffers the row has not filled yet.
  std::vector<int> UnfilledCachedValues(int r) const {
    std::vector<int> unfilled;
    for (int i : FullCone({k_.values[r].args[0]})) {
      if (cached_.count(i) && !cached_ready_.count(i)) unfilled.push_back(i);
    }
    return unfilled;
  }

  void EmitStores(const std::set<int>& outputs, const std::string& j, const std::string& indent) {
    for (int o : outputs) {
      absl::StrAppendFormat(&out_, "%s%s = v%d;\n", indent, Element(o, j), k_.operands[o].source);
    }
  }

  // Whether full-level value `v` can be computed in the row's first fill loop: no reduction
  // feeds it, and the row-level values it reads are defined before that loop (those below the
  // first filled reduction, which need no reduction, are).
  bool ComputableInFirstFill(int v, int first_fill) const {
    if (DependsOnReduction(v)) return false;
    for (int u : KernelPrinter::FullCone({v})) {
      for (int a : k_.values[u].args) {
        if (k_.values[a].row_level && a >= first_fill) return false;
      }
    }
    return true;
  }

  int FirstFilledReduction() const {
    for (int r : Reductions()) {
      if (!UnfilledCachedValues(r).empty()) return r;
    }
    return -1;
  }

  // Column reductions whose input the first fill can compute: they fold there, where the
  // input is computed anyway (a layer norm's gelu_backward), not in the last pass.
  std::set<int> ColumnsFoldedInFill() const {
    std::set<int> columns;
    const int first_fill = FirstFilledReduction();
    if (first_fill < 0) return columns;
    for (int c : ColumnReductions()) {
      if (ComputableInFirstFill(k_.values[c].args[0], first_fill)) columns.insert(c);
    }
    return columns;
  }

  // The full-level outputs no reduction feeds, when the row has a fill loop: that loop stores
  // them as it computes them. In a layer norm's backward the fill computes gelu_backward for
  // the reductions; a last pass storing it would compute it again. Empty without a fill (no
  // cached reduction input).
  std::set<int> OutputsStoredInFill() const {
    std::set<int> outs;
    const int first_fill = FirstFilledReduction();
    if (first_fill < 0) return outs;
    for (size_t o = 0; o < k_.operands.size(); ++o) {
      const KernelOperand& op = k_.operands[o];
      if (!op.is_output || k_.values[op.source].row_level || IsColumnOutput(op)) continue;
      if (ComputableInFirstFill(op.source, first_fill)) outs.insert(static_cast<int>(o));
    }
    return outs;
  }

  void EmitRowKernel() {
    ChooseCachedValues();
    stored_in_fill_ = OutputsStoredInFill();
    columns_in_fill_ = ColumnsFoldedInFill();
    const std::vector<int> streamed = StreamableOutputs();
    EmitStreamDecision(streamed);
    EmitColumnPartialSlots();
    out_ += "  auto region = [&]() {\n";
    EmitColumnAccumulators();
    for (int i : cached_) {
      absl::StrAppendFormat(&out_, "  %s* row_buffer%d = static_cast<%s*>(__builtin_malloc(sizeof(%s) * (n > 0 ? n : 1)));\n",
                            CppType(k_.values[i].dtype), i, CppType(k_.values[i].dtype), CppType(k_.values[i].dtype));
    }
    out_ += "#pragma omp for schedule(static)\n";
    out_ += "  for (int64_t row = 0; row < rows; ++row) {\n";
    EmitPointers("row", "    ");
    std::vector<bool> emitted(k_.values.size(), false);
    cached_ready_.clear();
    bool prefetched = false;
    for (size_t r = 0; r < k_.values.size(); ++r) {
      if (k_.values[r].kind != ValueKind::kReduce) continue;
      EmitReadyRowValues(r, emitted, "    ");
      // Filled before the reduction's loop, also when the reduction only reads a cached value
      // through others (mean(g * x) beside a later mean(g)): computing the value in the
      // reduction's loop too would compute it twice.
      const std::vector<int> unfilled = UnfilledCachedValues(static_cast<int>(r));
      if (!unfilled.empty()) {
        EmitRowBufferFill(unfilled, /*first_of_row=*/!prefetched);
        prefetched = true;
      }
      EmitReduction(static_cast<int>(r));
      emitted[r] = true;
    }
    EmitReadyRowValues(k_.values.size(), emitted, "    ");
    if (!LastPassRoots().empty()) {
      // Its own scope: the reductions above named their counters j<value>.
      out_ += "    {\n    int64_t j = 0;\n    const int64_t j1 = n;\n";
      if (!streamed.empty()) EmitStreamedChunks(streamed);
      out_ += kNoLoopCarriedAliasing;
      out_ += "    for (; j < j1; ++j) {\n";
      EmitPointwiseBody("j", "      ");
      out_ += "    }\n    }\n";
    }
    for (size_t o = 0; o < k_.operands.size(); ++o) {
      const KernelOperand& op = k_.operands[o];
      if (op.is_output && k_.values[op.source].row_level) {
        absl::StrAppendFormat(&out_, "    p%d[0] = v%d;\n", o, op.source);
      }
    }
    out_ += "  }\n";
    EmitStreamFence(streamed);
    EmitColumnCombine();
    for (int i : cached_) absl::StrAppendFormat(&out_, "  __builtin_free(row_buffer%d);\n", i);
    EmitParallelRegionEnd();
  }

  // Column reductions (kernel_ir.h kColumnReduce) fold rows into one accumulator per inner
  // position and thread; after the row loop one thread folds the threads' accumulators in
  // thread order (each thread's rows are a contiguous run, in order: on one thread the sums
  // are eager's, row by row in the wide accumulator) and stores the results. Slots shared by
  // the team: one accumulator pointer per thread.
  void EmitColumnPartialSlots() {
    for (int c : ColumnReductions()) {
      absl::StrAppendFormat(&out_, "  %s** column_slots%d = static_cast<%s**>(__builtin_malloc(sizeof(void*) * omp_get_max_threads()));\n",
                            CppType(k_.values[c].accumulator_dtype), c, CppType(k_.values[c].accumulator_dtype));
    }
  }

  void EmitColumnAccumulators() {
    for (int c : ColumnReductions()) {
      const ReductionSpelling s = SpellReduction(c);
      absl::StrAppendFormat(&out_, "  %s* column%d = static_cast<%s*>(__builtin_malloc(sizeof(%s) * (n > 0 ? n : 1)));\n",
                            s.accumulator_type, c, s.accumulator_type, s.accumulator_type);
      absl::StrAppendFormat(&out_, "  for (int64_t j = 0; j < n; ++j) column%d[j] = %s;\n", c, s.identity);
      absl::StrAppendFormat(&out_, "  column_slots%d[omp_get_thread_num()] = column%d;\n", c, c);
    }
  }

  void EmitColumnCombine() {
    const std::vector<int> columns = ColumnReductions();
    if (columns.empty()) return;
    // The row loop's implicit barrier has passed: every thread's accumulators are complete.
    out_ += "#pragma omp single\n  {\n";
    out_ += "  const int threads = omp_get_num_threads();\n";
    for (int c : columns) {
      const ReductionSpelling s = SpellReduction(c);
      int o = 0;
      while (!(k_.operands[o].is_output && k_.operands[o].source == c)) ++o;
      const std::string index = !UsesFixedStride(o) ? absl::StrFormat("j * is%d", o)
                                : k_.operands[o].predicted_inner_stride == 0 ? "0" : "j";
      absl::StrAppendFormat(&out_, "  for (int64_t j = 0; j < n; ++j) {\n    %s acc%d = column_slots%d[0][j];\n",
                            s.accumulator_type, c, c);
      absl::StrAppendFormat(&out_, "    for (int t = 1; t < threads; ++t) acc%d = %s;\n", c,
                            s.Combine(absl::StrFormat("acc%d", c), absl::StrFormat("column_slots%d[t][j]", c)));
      absl::StrAppend(&out_, "    ", ReductionResult(c, absl::StrFormat("acc%d", c), "rows"), "\n");
      absl::StrAppendFormat(&out_, "    reinterpret_cast<%s*>(data[%d])[%s] = v%d;\n  }\n", MemoryType(k_.operands[o].dtype), o,
                            index, c);
    }
    // Its implicit barrier keeps every accumulator alive until the fold is done.
    out_ += "  }\n";
    for (int c : columns) absl::StrAppendFormat(&out_, "  __builtin_free(column%d);\n", c);
  }

  bool fixed_;
  std::set<int> cached_;        // values kept in row buffers
  std::set<int> cached_ready_;  // ... whose buffer is filled for the current row
  std::set<int> stored_in_fill_;  // output operands the row's first fill loop stores
  std::set<int> columns_in_fill_;  // column reductions the row's first fill loop folds
};

constexpr char kGeneratedHelpers[] = R"(
#if defined(_OPENMP)
#include <omp.h>
#else
static inline int omp_get_thread_num() { return 0; }
static inline int omp_get_num_threads() { return 1; }
static inline int omp_get_max_threads() { return 1; }
#endif
#if defined(__AVX__)
#define DT_CAN_STREAM 1
typedef long long dt_stream_vector __attribute__((vector_size(32)));
// Copies `bytes` (a multiple of 32) to 32-byte-aligned `dst` with non-temporal stores.
static inline void dt_stream_store(void* dst, const void* src, int64_t bytes) {
  for (int64_t b = 0; b < bytes; b += 32) {
    dt_stream_vector v;
    __builtin_memcpy(&v, static_cast<const char*>(src) + b, 32);
    __builtin_ia32_movntdq256(reinterpret_cast<dt_stream_vector*>(static_cast<char*>(dst) + b), v);
  }
}
#endif

// Element offsets of each operand at the start of outer row `row`.
static inline void dt_row_offsets(int64_t row, int64_t rank, const int64_t* sizes,
                                  const int64_t* strides, int operands, int64_t* offsets) {
  for (int k = 0; k < operands; ++k) offsets[k] = 0;
  for (int64_t d = rank - 1; d >= 0; --d) {
    const int64_t i = row % sizes[d];
    row /= sizes[d];
    for (int k = 0; k < operands; ++k) offsets[k] += i * strides[k * (rank + 1) + d];
  }
}

)";

}  // namespace

CppProgram EmitCpp(const Program& program) {
  CppProgram out;
  const std::string header = absl::StrCat(
      "// Generated by dyntrace's CPU backend.\n#define DT_GENERATED_KERNEL 1\n#include <cstdint>\n"
      "#include <type_traits>\n",
      KernelPrelude(), kGeneratedHelpers);
  absl::flat_hash_map<std::string, std::string> entry_with_code;
  // By the kernel whose code is emitted: the name of its entry points and its unit.
  absl::flat_hash_map<std::string, std::pair<std::string, int>> placement;
  int shared_unit = -1;  // the small kernels' unit, once there is one
  for (const Kernel& k : program.kernels) {
    std::string text = KernelEmitter(k, true).Emit() + KernelEmitter(k, false).Emit();
    // The same code as an earlier kernel (an optimizer's update of each parameter of one shape):
    // that kernel's functions serve, and the compiler parses the code once.
    auto [entry, added] = entry_with_code.try_emplace(WithoutKernelName(text, k.name), k.name);
    if (added) {
      // A kernel's own unit names its functions after no graph (kOwnUnitEntry), so that its text,
      // and so its cache key, is the same in every graph that has the kernel.
      const bool own = text.size() >= kOwnUnitBytes;
      if (own || shared_unit < 0) {
        out.units.push_back(header);
        if (!own) shared_unit = static_cast<int>(out.units.size()) - 1;
      }
      const int unit = own ? static_cast<int>(out.units.size()) - 1 : shared_unit;
      out.units[unit] += own ? RenamedKernel(text, k.name, kOwnUnitEntry) : text;
      placement[k.name] = {own ? kOwnUnitEntry : k.name, unit};
    }
    const auto& [symbol, unit] = placement[entry->second];
    out.entry_of_kernel.push_back(symbol);
    out.unit_of_kernel.push_back(unit);
    out.readable += added ? text : absl::StrFormat("// %s: the code of %s\n", k.name, entry->second);
  }
  return out;
}

}  // namespace dt::jit
