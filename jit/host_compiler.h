// jit/host_compiler.h: builds a generated translation unit into a shared library with the
// machine's C++ compiler (`CXX`, else `c++`).
#ifndef DYNTRACE_JIT_HOST_COMPILER_H_
#define DYNTRACE_JIT_HOST_COMPILER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace dt::jit {

struct HostCompiler {
  std::string path;                // resolved executable
  std::vector<std::string> flags;  // -O3 -march=native -fopenmp ...
  // What the cache key hashes: the resolved path with its size and modification time (a
  // compiler upgrade changes them) and the flags.
  std::string identity;
};

// The compiler named by CXX (else c++), found on PATH. Looked up once per process unless
// `refresh` (tests change CXX).
[[nodiscard]] absl::StatusOr<HostCompiler> FindHostCompiler(bool refresh = false);

// Compiles `source_path` into the shared library `output_path`. The error says what the
// compiler printed.
[[nodiscard]] absl::Status CompileSharedLibrary(const HostCompiler& compiler,
                                                const std::string& source_path,
                                                const std::string& output_path);

}  // namespace dt::jit

#endif  // DYNTRACE_JIT_HOST_COMPILER_H_
