#include "jit/nvrtc_check.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "jit/cuda_codegen.h"
#include "jit/kernel_cache.h"
#include "runtime/log.h"
#include "runtime/nvrtc.h"

namespace dt::jit {
namespace {

constexpr char kVariable[] = "DYNTRACE_NVRTC_CHECK";

std::mutex totals_mu;
NvrtcCheckTotals totals;

void Count(int64_t NvrtcCheckTotals::*field) {
  std::lock_guard<std::mutex> lock(totals_mu);
  ++(totals.*field);
}

}  // namespace

absl::Status CheckCudaCompiles(const Program& program, absl::string_view name) {
  const char* value = std::getenv(kVariable);
  if (value == nullptr || *value == '\0' || program.kernels.empty()) return absl::OkStatus();
  int arch = 0;
  const absl::string_view spec(value);
  if (!absl::StartsWith(spec, "sm_") || !absl::SimpleAtoi(spec.substr(3), &arch) || arch <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(kVariable, "=", spec, ": expected an architecture like sm_90"));
  }
  if (const NvrtcProbe& probe = ProbeNvrtc(); !probe.available) {
    std::lock_guard<std::mutex> lock(totals_mu);
    if (totals.unavailable.empty()) {
      totals.unavailable = probe.reason;
      std::fprintf(stderr, "dyntrace: %s=%s is set but %s; generated CUDA kernels are not checked\n", kVariable,
                   value, probe.reason.c_str());
    }
    return absl::OkStatus();
  }
  absl::StatusOr<CudaProgram> cuda = EmitCudaFor(program.graph, NvrtcThreads());
  if (!cuda.ok()) {
    Count(&NvrtcCheckTotals::skipped);
    if (log::Enabled(log::Kind::kKernels)) {
      log::Write(log::Kind::kKernels, absl::StrCat(name, ": not checked with NVRTC: ", cuda.status().message()));
    }
    return absl::OkStatus();
  }
  CacheSource source_kind;
  absl::StatusOr<std::vector<std::shared_ptr<const std::string>>> cubin =
      KernelCache::Global().LoadCubins(cuda->sources, std::string(name), arch, &source_kind);
  if (!cubin.ok()) {
    Count(&NvrtcCheckTotals::failures);
    return absl::InternalError(absl::StrCat(kVariable, ": the CUDA kernels of ", name, " do not compile: ",
                                            cubin.status().message()));
  }
  Count(&NvrtcCheckTotals::checked);
  return absl::OkStatus();
}

NvrtcCheckTotals NvrtcCheckCounters() {
  std::lock_guard<std::mutex> lock(totals_mu);
  return totals;
}

}  // namespace dt::jit
