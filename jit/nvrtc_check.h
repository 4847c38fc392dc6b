// jit/nvrtc_check.h: DYNTRACE_NVRTC_CHECK, compiling every CPU-backend graph for CUDA as well.
//
// With DYNTRACE_NVRTC_CHECK=sm_90 in the environment, every graph CpuExecutable::Build compiles
// is also printed as CUDA (jit/cuda_codegen.h) and compiled by NVRTC to a CUBIN for that
// architecture, through the kernel cache. A compile failure fails the Build with NVRTC's log, so
// test suites that expect compiled results notice; this is how CI checks the CUDA generator on
// machines without a GPU. When NVRTC can't be loaded the check is skipped: one line on stderr
// says so, and the totals carry the reason.
//
//   setenv("DYNTRACE_NVRTC_CHECK", "sm_90", 1);
//   ... build graphs ...
//   NvrtcCheckTotals t = NvrtcCheckCounters();  // t.checked > 0, t.failures == 0
#ifndef DYNTRACE_JIT_NVRTC_CHECK_H_
#define DYNTRACE_JIT_NVRTC_CHECK_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "jit/kernel_ir.h"

namespace dt::jit {

// Process-lifetime totals (dyntrace.stats() reports them since the last reset()).
struct NvrtcCheckTotals {
  int64_t checked = 0;   // graphs whose CUDA translation unit compiled to a CUBIN
  int64_t failures = 0;  // graphs NVRTC rejected
  int64_t skipped = 0;   // graphs beyond the CUDA launch ABI's limits (the CUDA backend runs them eagerly)
  std::string unavailable;  // why NVRTC could not be used; empty when it could (or was never asked)
};

// Does nothing unless DYNTRACE_NVRTC_CHECK is set. Fails when NVRTC rejects the program's CUDA
// translation unit, or when the variable is not of the form sm_<digits>.
[[nodiscard]] absl::Status CheckCudaCompiles(const Program& program, absl::string_view name);

NvrtcCheckTotals NvrtcCheckCounters();

}  // namespace dt::jit

#endif  // DYNTRACE_JIT_NVRTC_CHECK_H_
