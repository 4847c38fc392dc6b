#include "runtime/nvrtc.h"

#include <dlfcn.h>

#include <cstdlib>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace dt {
namespace {

// NVRTC's C API, declared here from its documented signatures (nvrtc.h is not a build input).
using NvrtcResult = int;
using NvrtcProgram = struct NvrtcProgramOpaque*;
constexpr NvrtcResult kNvrtcSuccess = 0;

using CreateProgramFn = NvrtcResult (*)(NvrtcProgram*, const char* src, const char* name, int num_headers,
                                        const char* const* headers, const char* const* include_names);
using CompileProgramFn = NvrtcResult (*)(NvrtcProgram, int num_options, const char* const* options);
using GetSizeFn = NvrtcResult (*)(NvrtcProgram, size_t*);
using GetBytesFn = NvrtcResult (*)(NvrtcProgram, char*);
using DestroyProgramFn = NvrtcResult (*)(NvrtcProgram*);
using VersionFn = NvrtcResult (*)(int* major, int* minor);
using GetErrorStringFn = const char* (*)(NvrtcResult);

struct NvrtcApi {
  NvrtcProbe probe;
  CreateProgramFn create_program = nullptr;
  CompileProgramFn compile_program = nullptr;
  GetSizeFn get_cubin_size = nullptr;
  GetBytesFn get_cubin = nullptr;
  GetSizeFn get_log_size = nullptr;
  GetBytesFn get_log = nullptr;
  DestroyProgramFn destroy_program = nullptr;
  VersionFn version = nullptr;
  GetErrorStringFn error_string = nullptr;
};

std::vector<std::string> CandidatePaths() {
  std::vector<std::string> paths;
  // DYNTRACE_LIBNVRTC names the library to use (tests: tests/fake_cuda's stand-in, which builds
  // kernels for the host so that the stand-in driver can run them).
  if (const char* path = std::getenv("DYNTRACE_LIBNVRTC"); path != nullptr && *path != '\0') return {path};
  if (const char* home = std::getenv("CUDA_HOME"); home != nullptr && *home != '\0') {
    paths.push_back(absl::StrCat(home, "/lib64/libnvrtc.so"));
  }
  paths.push_back("/usr/local/cuda/lib64/libnvrtc.so");
  for (const char* soname : {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}) paths.push_back(soname);
  return paths;
}

template <typename Fn>
bool Resolve(void* lib, const char* name, Fn* fn, std::vector<std::string>* missing) {
  *fn = reinterpret_cast<Fn>(::dlsym(lib, name));
  if (*fn == nullptr) missing->push_back(name);
  return *fn != nullptr;
}

const NvrtcApi& Api() {
  static const NvrtcApi* api = [] {
    auto* a = new NvrtcApi();
    void* lib = nullptr;
    std::vector<std::string> failures;
    for (const std::string& path : CandidatePaths()) {
      lib = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (lib != nullptr) {
        a->probe.library_path = path;
        break;
      }
      const char* error = ::dlerror();
      failures.push_back(error != nullptr ? error : path);
    }
    if (lib == nullptr) {
      a->probe.reason = absl::StrCat("CUDA's NVRTC library (libnvrtc) was not found: ",
                                     absl::StrJoin(failures, "; "));
      return a;
    }
    std::vector<std::string> missing;
    Resolve(lib, "nvrtcCreateProgram", &a->create_program, &missing);
    Resolve(lib, "nvrtcCompileProgram", &a->compile_program, &missing);
    Resolve(lib, "nvrtcGetCUBINSize", &a->get_cubin_size, &missing);
    Resolve(lib, "nvrtcGetCUBIN", &a->get_cubin, &missing);
    Resolve(lib, "nvrtcGetProgramLogSize", &a->get_log_size, &missing);
    Resolve(lib, "nvrtcGetProgramLog", &a->get_log, &missing);
    Resolve(lib, "nvrtcDestroyProgram", &a->destroy_program, &missing);
    Resolve(lib, "nvrtcVersion", &a->version, &missing);
    Resolve(lib, "nvrtcGetErrorString", &a->error_string, &missing);
    if (!missing.empty()) {
      a->probe.reason = absl::StrFormat("%s lacks %s (NVRTC older than CUDA 11.1?)", a->probe.library_path,
                                        absl::StrJoin(missing, ", "));
      return a;
    }
    if (a->version(&a->probe.major, &a->probe.minor) != kNvrtcSuccess) {
      a->probe.reason = absl::StrCat(a->probe.library_path, ": nvrtcVersion failed");
      return a;
    }
    a->probe.available = true;
    return a;  // the library stays loaded for the process's lifetime
  }();
  return *api;
}

absl::Status NvrtcError(const NvrtcApi& api, NvrtcResult result, absl::string_view where) {
  return absl::InternalError(absl::StrFormat("NVRTC: %s failed: %s", where, api.error_string(result)));
}

// Destroys the program on every path out of CompileCudaToCubin.
struct ProgramDeleter {
  const NvrtcApi* api;
  void operator()(NvrtcProgram* program) const {
    if (*program != nullptr) api->destroy_program(program);
    delete program;
  }
};

}  // namespace

const NvrtcProbe& ProbeNvrtc() { return Api().probe; }

absl::StatusOr<std::pair<int, int>> NvrtcVersion() {
  const NvrtcProbe& probe = ProbeNvrtc();
  if (!probe.available) return absl::UnavailableError(probe.reason);
  return std::make_pair(probe.major, probe.minor);
}

std::vector<std::string> NvrtcOptions(int sm_arch) {
  // -w: generated kernels declare strides some variants don't read; a failure's log should show
  // the errors, not pages of unused-variable warnings.
  return {absl::StrCat("--gpu-architecture=sm_", sm_arch), "-std=c++17", "-default-device", "-w"};
}

absl::StatusOr<std::string> CompileCudaToCubin(absl::string_view source, absl::string_view program_name,
                                               int sm_arch) {
  const NvrtcApi& api = Api();
  if (!api.probe.available) return absl::UnavailableError(api.probe.reason);
  const std::string source_text(source);
  const std::string name(program_name);
  std::unique_ptr<NvrtcProgram, ProgramDeleter> program(new NvrtcProgram(nullptr), ProgramDeleter{&api});
  if (NvrtcResult r = api.create_program(program.get(), source_text.c_str(), name.c_str(), 0, nullptr, nullptr);
      r != kNvrtcSuccess) {
    return NvrtcError(api, r, "nvrtcCreateProgram");
  }
  const std::vector<std::string> options = NvrtcOptions(sm_arch);
  std::vector<const char*> option_ptrs;
  for (const std::string& o : options) option_ptrs.push_back(o.c_str());
  const NvrtcResult compiled =
      api.compile_program(*program, static_cast<int>(option_ptrs.size()), option_ptrs.data());
  if (compiled != kNvrtcSuccess) {
    std::string log;
    size_t log_size = 0;
    if (api.get_log_size(*program, &log_size) == kNvrtcSuccess && log_size > 1) {
      log.resize(log_size);
      if (api.get_log(*program, log.data()) != kNvrtcSuccess) log.clear();
      while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
    }
    return absl::InvalidArgumentError(absl::StrFormat("NVRTC could not compile %s for sm_%d (%s):\n%s", name,
                                                      sm_arch, api.error_string(compiled), log));
  }
  size_t size = 0;
  if (NvrtcResult r = api.get_cubin_size(*program, &size); r != kNvrtcSuccess) {
    return NvrtcError(api, r, "nvrtcGetCUBINSize");
  }
  std::string cubin(size, '\0');
  if (NvrtcResult r = api.get_cubin(*program, cubin.data()); r != kNvrtcSuccess) {
    return NvrtcError(api, r, "nvrtcGetCUBIN");
  }
  return cubin;
}

}  // namespace dt
