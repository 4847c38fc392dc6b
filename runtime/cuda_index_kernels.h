// runtime/cuda_index_kernels.h: device primitives for indexing, gather/scatter, sorts, scans,
// arg reductions, searches, unique, ranges and the integer ops that check their operands on
// CUDA tensors.
//
// The eager definitions of those ops (graph/ops_indexing.cc, ops_sorting.cc, ops_search.cc,
// ops_data.cc, ops_creation.cc, ops_pointwise.cc ...) see CUDA operands themselves (they are
// kCudaNative) and call these, as matmul calls cuBLAS. The kernels (runtime/index_kernels.cuh) are hand-written CUDA C++,
// compiled by NVRTC once per process for each element type a program uses (the CUBIN kept in
// memory, and on disk through the compiler hook jit/ installs), loaded once per device and
// launched on the device's stream. Each launch is independent per-thread work, so a sort is a
// bitonic network of log^2 n launches and a scan log n Hillis-Steele steps.
//
// Indices are checked on the device: FindValueOutside records the first bad position in a
// device word that the host reads back (one small synchronous copy, not a mirror), and the op
// raises the CPU path's error before any element moves (integer division's zero divisors
// likewise, before its result is returned). Kernels skip bad indices anyway, so
// nothing is ever read or written out of bounds.
//
//   if (!IndexKernelsRun(x)) return CallOpThroughHost(op, args, x.device());  // no NVRTC, or
//                                                                            // a refusing driver
//   DT_RETURN_IF_ERROR(GatherOnDevice(out, DomainOperand{x, strides}, {term}));
//
// Tests run the same kernels on host memory: tests/index_kernels_test.cc compiles
// runtime/index_kernels.cuh with the host compiler and installs a runner for CPU tensors
// (SetHostIndexKernelRunnerForTesting), so the CPU eager definitions take their device path.
#ifndef DYNTRACE_RUNTIME_CUDA_INDEX_KERNELS_H_
#define DYNTRACE_RUNTIME_CUDA_INDEX_KERNELS_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "runtime/index_kernel_abi.h"
#include "runtime/scalar.h"
#include "runtime/tensor.h"

namespace dt {

// Whether ops on `t` run these kernels: `t` is on a CUDA device whose driver loaded the module
// for t's dtype (compiled on first use), or on the CPU while a test runner is installed.
// False for meta tensors, and where NVRTC is missing or the driver refuses modules.
bool IndexKernelsRun(const Tensor& t);
// The same for results of `dtype` made on `device` (creation ops, which have no input).
bool IndexKernelsRun(Device device, DType dtype);

// An operand walked over a launch domain: `tensor`'s first element (its offset applied),
// stepped by `strides` (elements, one per domain dim).
struct DomainOperand {
  Tensor tensor;
  Dims strides;
};

// An index tensor over the domain: its value v (plus `size` when negative and wrap_negative)
// moves the read operand (gathers) or the written one (scatters) by v * gain elements.
struct DomainIndex {
  DomainOperand values;
  int64_t size = 0;
  bool wrap_negative = false;
  int64_t gain = 0;
};

// Along a domain dim, the read operand's position i becomes ((i * sign + shift) mod modulus).
using DomainRemap = IxRemap;

// The first value of `index` (int32 or int64, any layout), in row-major order, outside
// [low, high); nullopt when all are inside. One launch and one small read-back.
[[nodiscard]] absl::StatusOr<std::optional<int64_t>> FindValueOutside(const Tensor& index, int64_t low,
                                                                      int64_t high);

// IndexError as the CPU path raises it (runtime/advanced_indexing.h's CheckedIndex) for the
// first value of `index` outside [0, size) ([-size, size) with wrap_negative); OK otherwise.
// While a DeferredIndexChecks is alive on this thread, the check is recorded there instead.
[[nodiscard]] absl::Status CheckIndicesOnDevice(const Tensor& index, int64_t size, int64_t dim, bool wrap_negative);

// The index checks of one CUDA-graph capture. A capture can't read a check's result back, so
// inside a DeferredIndexChecks scope CheckIndicesOnDevice records the check, and the op goes on
// to launch its kernel, which skips bad indices (nothing is read or written out of bounds):
// - an index tensor in `caller_storage` (the caller's inputs, which hold this call's values
//   before a launch) gets a check the executable runs before each launch: a bad index raises
//   before the graph runs, as it raised before the op ran;
// - one the graph itself computes or copies in (arange positions, a staged batch) holds stale
//   bytes before a launch, so its check is a kernel captured into the graph, writing the first
//   bad position and its value into slot k of `slots`; ReadInGraphIndexChecks, after each
//   launch, raises the IndexError then (the launch's writes have happened).
struct GraphIndexChecks {
  static constexpr int kMaxInGraph = 64;
  struct InGraph {
    int64_t size = 0, dim = 0;
    bool wrap_negative = false;
  };
  absl::flat_hash_set<const Storage*> caller_storage;
  Tensor slots;  // int64 [kMaxInGraph, 2] on the device: {position + 1, value}, all bits set when clear
  std::vector<std::function<absl::Status()>> before_launch;
  std::vector<InGraph> in_graph;  // what slot k checks
};

// While alive (one per thread at a time), CheckIndicesOnDevice records into `checks`.
class DeferredIndexChecks {
 public:
  explicit DeferredIndexChecks(GraphIndexChecks* checks);
  ~DeferredIndexChecks();
  DeferredIndexChecks(const DeferredIndexChecks&) = delete;
  DeferredIndexChecks& operator=(const DeferredIndexChecks&) = delete;

 private:
  friend absl::Status CheckIndicesOnDevice(const Tensor&, int64_t, int64_t, bool);
  GraphIndexChecks* checks_;
  DeferredIndexChecks* previous_;
};

// After a launch of the graph `checks` was captured with: the IndexError of the first in-graph
// check that found a bad index (all slots cleared again), else OK. One small synchronous read.
[[nodiscard]] absl::Status ReadInGraphIndexChecks(const GraphIndexChecks& checks);

// Fills contiguous floating `out` with uniform [0, 1) or standard normal numbers from the device
// generator (runtime/random.h), or, inside a CapturedRandomDraws scope, from the captured state.
[[nodiscard]] absl::Status RandomOnDevice(const Tensor& out, bool normal);
// The Philox counters a draw of `numel` elements of `dtype` uses (index_kernels.cuh's random).
uint64_t RandomCounters(int64_t numel, DType dtype, bool normal);

// A CUDA graph replays its launches' arguments, so a draw captured as is would repeat its numbers
// on every replay. Inside this scope (one per thread at a time) RandomOnDevice reserves no
// counters: each draw reads its seed and counter base from `state` (device memory holding two
// uint64: seed, base) plus the counters the scope's earlier draws used. Before each launch of the
// graph the capturing executable reserves counters() from the generator and makes `state` hold
// that reservation; Advance(), captured last, moves `state`'s base on by counters() on the
// device, so consecutive launches need no upload.
class CapturedRandomDraws {
 public:
  explicit CapturedRandomDraws(const Tensor& state);
  ~CapturedRandomDraws();
  CapturedRandomDraws(const CapturedRandomDraws&) = delete;
  CapturedRandomDraws& operator=(const CapturedRandomDraws&) = delete;
  uint64_t counters() const { return counters_; }
  // Launches the kernel that adds counters() to the state's base (nothing when no draw ran).
  [[nodiscard]] absl::Status Advance();

 private:
  friend absl::Status RandomOnDevice(const Tensor&, bool);
  Tensor state_;
  uint64_t counters_ = 0;
  CapturedRandomDraws* previous_;
};

// out (its sizes are the domain) = src at its indexed, remapped addresses. REQUIRES: indices
// checked (out-of-range ones are skipped, leaving their elements unwritten); remaps empty or
// one per domain dim.
[[nodiscard]] absl::Status GatherOnDevice(const Tensor& out, const DomainOperand& src,
                                          absl::Span<const DomainIndex> indices,
                                          absl::Span<const DomainRemap> remaps = {});

enum class DeviceFold : uint8_t { kAssign, kSum, kProd, kMean, kMax, kMin };

// For every position of `domain`: dst at its indexed address folded with src (sum: times
// alpha). kAssign keeps the write of the last position, as a loop in order would. Without
// include_self, every destination a fold reaches starts from that fold's first value. Sums of
// floats land in the order the device's atomics take them.
[[nodiscard]] absl::Status ScatterOnDevice(const Dims& domain, const DomainOperand& dst, const DomainOperand& src,
                                           absl::Span<const DomainIndex> indices, DeviceFold fold,
                                           bool include_self = true, double alpha = 1.0);

// out (its last two dims rows and columns) = src where low <= column - row <= high, else 0.
[[nodiscard]] absl::Status BandOnDevice(const Tensor& out, const DomainOperand& src, int64_t low, int64_t high);

// Row kernels: `rows` is a contiguous [outer, n] tensor; results are contiguous too.

// The first `keep` of each row in stable sorted order (NaN largest) and their positions:
// `values` [outer, keep] of rows' dtype, `positions` [outer, keep] int64.
[[nodiscard]] absl::Status SortRowsOnDevice(const Tensor& rows, bool descending, const Tensor& values,
                                            const Tensor& positions);

enum class DeviceScan : uint8_t { kSum, kProd, kLogSumExp };
// Running sums, products or log-sum-exps of each row, accumulated in double (floating rows)
// or int64 and rounded into `out` ([outer, n]: rows' dtype when floating, else int64).
[[nodiscard]] absl::Status ScanRowsOnDevice(const Tensor& rows, DeviceScan scan, const Tensor& out);

// cummax / cummin of each row: running extremes and where they were (ties and NaN as PyTorch).
[[nodiscard]] absl::Status CumExtremeRowsOnDevice(const Tensor& rows, bool is_max, const Tensor& values,
                                                  const Tensor& positions);

// argmax / argmin of each row into `positions` ([outer] int64): the first extreme, NaN first.
// REQUIRES: n > 0.
[[nodiscard]] absl::Status ArgExtremeRowsOnDevice(const Tensor& rows, bool is_max, const Tensor& positions);

// For each of `values` (contiguous, `per_row` of them per row of `sequence` [rows, n]), the
// position it goes in its row (read through `sorter`'s rows when given; checked by the
// caller): PyTorch's searchsorted bounds. `out` is int32 or int64, shaped like values.
[[nodiscard]] absl::Status SearchSortedOnDevice(const Tensor& sequence, const Tensor* sorter, const Tensor& values,
                                                int64_t per_row, bool right, const Tensor& out);

// Index kernels launched on CUDA devices so far (stats()["cuda_kernel_launches"] adds them).
int64_t CudaIndexKernelLaunches();

// The positions of `input`'s nonzero elements, [count, ndim] int64 in row-major order (the CPU's
// NonzeroPositions): running counts of the flags (a scan), the total read back (one small
// synchronous copy: it sizes the result), then one compaction launch.
[[nodiscard]] absl::StatusOr<Tensor> NonzeroOnDevice(const Tensor& input);

// unique's groups of equal rows of `rows` ([n, width] contiguous; width > 0 when n > 0), in
// sorted order (NaN largest; no NaN equals anything), as graph/ops_sorting.cc's GroupRows makes
// them on the CPU, as int64 tensors on rows' device: `firsts` [groups] the first row of each
// group, `group_of` [n] each row's group, `sizes` [groups] their sizes. Rows are sorted by a
// bitonic network over their positions, run starts flagged and scanned, and the number of
// groups read back (one small synchronous copy: it sizes the results).
struct RowGroups {
  Tensor firsts, group_of, sizes;
};
[[nodiscard]] absl::StatusOr<RowGroups> GroupRowsOnDevice(const Tensor& rows);

// arange and linspace into contiguous 1-d `out`, each element computed as the CPU computes it
// (graph/ops_creation.cc), so the values are equal bit for bit: arange start + i * step (int64
// for integer dtypes, else double), linspace from both ends with `step` = (end - start) / (n - 1).
[[nodiscard]] absl::Status ArangeOnDevice(const Tensor& out, Scalar start, Scalar step);
[[nodiscard]] absl::Status LinspaceOnDevice(const Tensor& out, double start, double end, double step);

// Integer floor_divide, remainder (Python's rounding) and pow: out (its sizes the domain) = x op
// y, both of out's dtype and addressed by their (broadcast) strides. False when some divisor is
// zero (or exponent negative): the kernel records it in a device word read back here, and the
// caller raises the CPU path's error; out's elements are then unspecified.
enum class DeviceIntegerOp : uint8_t { kFloorDivide, kRemainder, kPower };
[[nodiscard]] absl::StatusOr<bool> IntegerOpOnDevice(DeviceIntegerOp op, const Tensor& out, const DomainOperand& x,
                                                     const DomainOperand& y);

// NVRTC through a cache: jit/ installs the kernel cache's (memory, then disk); without one each
// process compiles its modules once with runtime/nvrtc.h.
using CubinCompiler = absl::StatusOr<std::string> (*)(const std::string& source, const std::string& name,
                                                     int sm_arch);
void SetIndexKernelCompiler(CubinCompiler compiler);
// Compiles one of the runtime's hand-written modules (these kernels', runtime/cuda_attention.h's)
// through the installed compiler.
[[nodiscard]] absl::StatusOr<std::string> CompileRuntimeModule(const std::string& source, const std::string& name,
                                                               int sm_arch);

// The module's CUDA source for element type `dtype` (what NVRTC compiles; tests compile each).
std::string IndexKernelSource(DType dtype);

// ---- internal ----

// Kernel source pasted at build time (runtime:index_kernel_module_cc); IndexKernelSource
// prefixes the element type.
const char* IndexKernelModuleText();

// ---- for tests ----

// Runs kernels where the CUDA driver would; a test's runner executes them on host memory.
class IndexKernelRunner {
 public:
  virtual ~IndexKernelRunner() = default;
  // Kernel `name` (runtime/index_kernel_abi.h's lists), typed ones for `dtype`.
  [[nodiscard]] virtual absl::Status Launch(absl::string_view name, DType dtype, const IxArgs& args) = 0;
  [[nodiscard]] virtual absl::Status Memset(void* device, unsigned char value, size_t bytes) = 0;
  [[nodiscard]] virtual absl::Status Read(void* host, const void* device, size_t bytes) = 0;
};
// While set (not null), CPU tensors run these kernels through `runner` (IndexKernelsRun is true
// for them). Not thread-safe against ops running at the same time.
void SetHostIndexKernelRunnerForTesting(IndexKernelRunner* runner);

}  // namespace dt

#endif  // DYNTRACE_RUNTIME_CUDA_INDEX_KERNELS_H_
