// runtime/nvrtc.h: compiling CUDA C++ to CUBIN with NVRTC, loaded at run time.
//
// libnvrtc is opened with dlopen on first use (never linked, and nvrtc.h is never included), so
// a build without CUDA works and simply reports NVRTC as unavailable. NVRTC needs no GPU and no
// driver: CI compiles every generated kernel to CUBIN on machines that have neither.
//
// The library is searched in $CUDA_HOME/lib64, then /usr/local/cuda/lib64, then by the plain
// sonames libnvrtc.so.13, libnvrtc.so.12 and libnvrtc.so (the loader's own search path).
//
//   if (!dt::ProbeNvrtc().available) return;  // ProbeNvrtc().reason says why
//   absl::StatusOr<std::string> cubin = dt::CompileCudaToCubin(source, "graph0", 90);
//   // cubin->substr(0, 4) == "\x7f" "ELF"
#ifndef DYNTRACE_RUNTIME_NVRTC_H_
#define DYNTRACE_RUNTIME_NVRTC_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dt {

struct NvrtcProbe {
  bool available = false;
  std::string library_path;  // the file that was loaded
  int major = 0, minor = 0;  // nvrtcVersion()
  std::string reason;        // why NVRTC is unavailable; empty when available
};

// Loads libnvrtc once (thread-safe) and reports what was found.
const NvrtcProbe& ProbeNvrtc();

// NVRTC's (major, minor) version; fails with the probe's reason when it can't be loaded.
[[nodiscard]] absl::StatusOr<std::pair<int, int>> NvrtcVersion();

// The options every program is compiled with for `sm_arch` (90 for sm_90): exact results as in
// eager execution (no fast math), C++17, functions device-side unless marked otherwise, no
// warnings.
std::vector<std::string> NvrtcOptions(int sm_arch);

// CUBIN bytes (an ELF image) for `source`, compiled for sm_<sm_arch>. A compile error's status
// carries NVRTC's log; `program_name` names the source in that log.
[[nodiscard]] absl::StatusOr<std::string> CompileCudaToCubin(absl::string_view source,
                                                             absl::string_view program_name,
                                                             int sm_arch);

}  // namespace dt

#endif  // DYNTRACE_RUNTIME_NVRTC_H_
