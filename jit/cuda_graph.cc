#include "jit/cuda_graph.h"

#include "absl/strings/str_format.h"
#include "runtime/errors.h"

namespace dt::jit {

absl::StatusOr<CudaGraphMode> ParseCudaGraphMode(absl::string_view text) {
  if (text == "auto") return CudaGraphMode::kAuto;
  if (text == "true") return CudaGraphMode::kOn;
  if (text == "false") return CudaGraphMode::kOff;
  return Error(ErrorKind::kValue, absl::StrFormat("cuda_graphs must be 'auto', True or False, not %s", text));
}

CudaGraphCounters& GlobalCudaGraphCounters() {
  static auto* counters = new CudaGraphCounters();
  return *counters;
}

CudaGraphRecord::~CudaGraphRecord() {
  if (exec != nullptr || graph != nullptr) {
    // A replay still queued uses the executable graph and the buffers this record frees.
    if (!device_->Synchronize().ok()) return;
    const CudaDriver& d = device_->driver();
    if (exec != nullptr) d.cuGraphExecDestroy(exec);
    if (graph != nullptr) d.cuGraphDestroy(graph);
  }
  for (const CudaHeldBlock& b : held_blocks) CudaAllocator::Get().Free(b.device, b.ptr, b.nbytes);
}

std::vector<int64_t> LayoutOf(const Tensor& t) {
  std::vector<int64_t> layout;
  layout.reserve(2 + 2 * t.ndim());
  layout.push_back(static_cast<int64_t>(reinterpret_cast<uintptr_t>(t.data())));
  layout.push_back(static_cast<int64_t>(t.dtype()));
  for (int64_t d = 0; d < t.ndim(); ++d) {
    layout.push_back(t.size(d));
    layout.push_back(t.stride(d));
  }
  return layout;
}

}  // namespace dt::jit
