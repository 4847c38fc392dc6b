// jit/kernel_cache.h: compiled kernel libraries, kept in memory and on disk.
//
// The key hashes the generated source, the compiler's identity and its flags. On disk an entry
// is `<key>.so` plus `<key>.meta` (its size and content hash) in a per-user directory of mode
// 0700: DYNTRACE_CACHE_DIR, else $XDG_CACHE_HOME/dyntrace, else ~/.cache/dyntrace. Before an
// entry is loaded it is checked: a regular file, owned by this user, writable by nobody else,
// with the recorded size and hash. Anything else (corrupt, truncated, foreign, loose
// permissions) is rebuilt, never loaded. A directory that can't be used safely degrades the
// cache to memory only, with one warning.
#ifndef DYNTRACE_JIT_KERNEL_CACHE_H_
#define DYNTRACE_JIT_KERNEL_CACHE_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"

namespace dt::backend {

// A dlopen'ed library; never closed (kernels may still run from it).
struct LoadedLibrary {
  void* handle = nullptr;
  std::string path;
  void* Symbol(const std::string& name) const;
};

enum class CacheSource : uint8_t { kMemory, kDisk, kCompiled };

struct CacheCounters {
  int64_t compiled = 0;        // built by the host compiler
  int64_t from_disk = 0;       // loaded from a checked disk entry
  int64_t from_memory = 0;     // already loaded in this process
  int64_t rejected = 0;        // disk entries refused (corrupt, foreign, loose permissions)
  double compile_seconds = 0;  // time in the host compiler
};

// A fixed-width hex digest, the same in every process (absl::Hash is seeded per process).
std::string StableHash(const std::string& bytes);

class KernelCache {
 public:
  static KernelCache& Global();

  // The library built from `source`, from memory, disk or a fresh compile.
  absl::StatusOr<std::shared_ptr<LoadedLibrary>> Load(const std::string& source, CacheSource* source_kind);

  CacheCounters counters() const;
  // The directory entries live in, or "" when the cache is memory only.
  std::string directory();
  // The warning about an unusable directory, once; then "".
  std::string TakeWarning();
  // Forgets loaded libraries and the directory choice (tests change DYNTRACE_CACHE_DIR).
  void Reset();

 private:
  void ChooseDirectory();  // REQUIRES: mu_ held
  std::shared_ptr<LoadedLibrary> LoadFromDisk(const std::string& key, std::string* reason);  // REQUIRES: mu_

  mutable std::mutex mu_;
  bool directory_chosen_ = false;
  std::string directory_;
  std::string scratch_;  // where memory-only builds are written before loading
  std::string warning_;
  bool warned_ = false;
  CacheCounters counters_;
  absl::flat_hash_map<std::string, std::shared_ptr<LoadedLibrary>> loaded_;
};

}  // namespace dt::backend

#endif  // DYNTRACE_JIT_KERNEL_CACHE_H_
