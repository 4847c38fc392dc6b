// jit/kernel_cache.h: compiled kernels, kept in memory and on disk.
//
// Two kinds of artifact share one cache and one code path: kernel libraries the host compiler
// builds from generated C++ (`.so`, dlopen'ed), and CUBINs NVRTC builds from generated CUDA C++
// (`.cubin`, kept as bytes for the CUDA runtime to load). The key hashes the generated source and
// the compiler's identity and flags (for CUBINs: NVRTC's version, the architecture and the
// options). On disk an entry is `<key>.so` or `<key>.cubin` plus `<key>.meta` (its size and
// content hash) in a per-user directory of mode
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
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"

namespace dt::jit {

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
  int64_t cubins_compiled = 0;     // built by NVRTC
  int64_t cubins_from_disk = 0;
  int64_t cubins_from_memory = 0;
  double nvrtc_seconds = 0;        // time waiting for NVRTC (a graph's units compile in parallel)
};

// The threads LoadCubins and LoadLibraries compile on at most (one per core), and so how many
// translation units a graph's CUDA kernels are worth spreading over (EmitCuda's max_units).
int NvrtcThreads();

// A fixed-width hex digest, the same in every process (absl::Hash is seeded per process).
std::string StableHash(const std::string& bytes);

class KernelCache {
 public:
  static KernelCache& Global();

  // The libraries built from `sources` (a graph's kernel units), each from memory, disk or a
  // fresh compile; the ones not cached compile in parallel, one host-compiler process per core.
  // `source_kind` is the least cached source any of them came from. Fails with the first unit
  // the compiler rejects.
  absl::StatusOr<std::vector<std::shared_ptr<LoadedLibrary>>> LoadLibraries(const std::vector<std::string>& sources,
                                                                            CacheSource* source_kind);

  // The CUBIN NVRTC builds from CUDA `source` for sm_<sm_arch>, from memory, disk or a fresh
  // compile; `program_name` names the source in NVRTC's messages. Fails when NVRTC is
  // unavailable or rejects the source (the status carries its log).
  absl::StatusOr<std::shared_ptr<const std::string>> LoadCubin(const std::string& source,
                                                               const std::string& program_name, int sm_arch,
                                                               CacheSource* source_kind);
  // LoadCubin for several translation units at once (a graph's kernels, one unit each): the
  // ones not cached compile in parallel, one NVRTC program per thread. `source_kind` is the
  // least cached source any of them came from. Fails with the first unit NVRTC rejects.
  absl::StatusOr<std::vector<std::shared_ptr<const std::string>>> LoadCubins(const std::vector<std::string>& sources,
                                                                             const std::string& program_name,
                                                                             int sm_arch, CacheSource* source_kind);

  CacheCounters counters() const;
  // The directory entries live in, or "" when the cache is memory only.
  std::string directory();
  // The warning about an unusable directory, once; then "".
  std::string TakeWarning();
  // Forgets loaded libraries and the directory choice (tests change DYNTRACE_CACHE_DIR).
  void Reset();

 private:
  // All REQUIRE mu_ held.
  void ChooseDirectory();
  // The path of the trusted, intact entry `<key>.<extension>` with its bytes; "" on a miss or
  // when refused (then `reason` says why).
  std::string ReadVerifiedEntry(const std::string& key, const std::string& extension, std::string* bytes,
                                std::string* reason);
  // A fresh private path prefix for building `key` (in the cache or a scratch directory).
  std::string PrivateStem(const std::string& key, std::string* error);
  // Moves `built` into the cache as `<key>.<extension>` with its .meta; returns where the file
  // now is (`built` itself when the cache is memory only or the move failed).
  std::string Publish(const std::string& key, const std::string& extension, const std::string& built,
                      const std::string& stem);
  void NoteRejected(const std::string& reason);
  // The library under `key` from memory or a checked disk entry, else nullptr.
  std::shared_ptr<LoadedLibrary> FindLibrary(const std::string& key, CacheSource* source_kind);
  // Moves the fresh <stem>.so into the cache as `key` and loads it.
  absl::StatusOr<std::shared_ptr<LoadedLibrary>> PublishLibrary(const std::string& key, const std::string& stem);
  static std::string CubinKey(const std::string& source, int sm_arch, std::pair<int, int> nvrtc_version);
  // The CUBIN under `key` from memory or a checked disk entry, else nullptr.
  std::shared_ptr<const std::string> FindCubin(const std::string& key, CacheSource* source_kind);
  // Keeps a fresh CUBIN in memory and, where the cache has a directory, on disk.
  std::shared_ptr<const std::string> StoreCubin(const std::string& key, std::string bytes);

  mutable std::mutex mu_;
  bool directory_chosen_ = false;
  std::string directory_;
  std::string scratch_;  // where memory-only builds are written before loading
  std::string warning_;
  bool warned_ = false;
  CacheCounters counters_;
  absl::flat_hash_map<std::string, std::shared_ptr<LoadedLibrary>> loaded_;
  absl::flat_hash_map<std::string, std::shared_ptr<const std::string>> cubins_;
};

}  // namespace dt::jit

#endif  // DYNTRACE_JIT_KERNEL_CACHE_H_
