#include "jit/kernel_cache.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "jit/host_compiler.h"
#include "runtime/nvrtc.h"
#include "runtime/errors.h"
#include "runtime/log.h"

namespace dt::jit {
namespace {

constexpr char kMetaMagic[] = "dyntrace-kernel 1";

uint64_t Fnv1a(const std::string& bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

// A second, independent 64-bit hash: splitmix64 finalisation over 8-byte words.
uint64_t MixHash(const std::string& bytes) {
  auto mix = [](uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  uint64_t h = 0x9e3779b97f4a7c15ull ^ bytes.size();
  for (size_t i = 0; i < bytes.size(); i += 8) {
    uint64_t word = 0;
    std::memcpy(&word, bytes.data() + i, std::min<size_t>(8, bytes.size() - i));
    h = mix(h ^ word) + 0x9e3779b97f4a7c15ull;
  }
  return mix(h);
}

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::stringstream buffer;
  buffer << in.rdbuf();
  *out = buffer.str();
  return true;
}

bool WriteFile(const std::string& path, const std::string& bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      ::close(fd);
      return false;
    }
    written += static_cast<size_t>(n);
  }
  return ::close(fd) == 0;
}

// Why `path` may not be trusted, or "" when it may: it must be a regular file (not a link), owned
// by this user and writable by no one else.
std::string Untrusted(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return absl::StrCat("missing (", std::strerror(errno), ")");
  if (!S_ISREG(st.st_mode)) return "not a regular file";
  if (st.st_uid != ::geteuid()) return absl::StrFormat("owned by uid %d, not this user", st.st_uid);
  if ((st.st_mode & 022) != 0) return absl::StrFormat("writable by group or others (mode %o)", st.st_mode & 0777);
  return "";
}

std::string DefaultDirectory() {
  if (const char* dir = std::getenv("DYNTRACE_CACHE_DIR"); dir != nullptr && *dir != '\0') return dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
    return absl::StrCat(xdg, "/dyntrace");
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return absl::StrCat(home, "/.cache/dyntrace");
  }
  return "";
}

// Creates `dir` (mode 0700) and its missing parents.
bool MakeDirectories(const std::string& dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) == 0) return S_ISDIR(st.st_mode);
  const size_t slash = dir.find_last_of('/');
  if (slash != std::string::npos && slash > 0 && !MakeDirectories(dir.substr(0, slash))) return false;
  return ::mkdir(dir.c_str(), 0700) == 0 || errno == EEXIST;
}

std::atomic<int64_t> build_counter{0};

}  // namespace

void* LoadedLibrary::Symbol(const std::string& name) const { return ::dlsym(handle, name.c_str()); }

std::string StableHash(const std::string& bytes) {
  return absl::StrFormat("%016x%016x", Fnv1a(bytes), MixHash(bytes));
}

KernelCache& KernelCache::Global() {
  static KernelCache* cache = new KernelCache();
  return *cache;
}

void KernelCache::ChooseDirectory() {
  if (directory_chosen_) return;
  directory_chosen_ = true;
  directory_.clear();
  const std::string dir = DefaultDirectory();
  std::string problem;
  if (dir.empty()) {
    problem = "no DYNTRACE_CACHE_DIR, XDG_CACHE_HOME or HOME";
  } else if (!MakeDirectories(dir)) {
    problem = absl::StrFormat("%s can't be created (%s)", dir, std::strerror(errno));
  } else {
    struct stat st;
    if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      problem = absl::StrFormat("%s is not a directory", dir);
    } else if (st.st_uid != ::geteuid()) {
      problem = absl::StrFormat("%s is owned by uid %d, not this user", dir, st.st_uid);
    } else if ((st.st_mode & 022) != 0) {
      problem = absl::StrFormat("%s is writable by group or others (mode %o)", dir, st.st_mode & 0777);
    } else if (::access(dir.c_str(), W_OK | X_OK) != 0) {
      problem = absl::StrFormat("%s is not writable", dir);
    } else {
      directory_ = dir;
    }
  }
  if (!problem.empty()) {
    warning_ = absl::StrCat("dyntrace kernel cache: ", problem, "; compiled kernels are kept in memory only");
  }
}

std::string KernelCache::ReadVerifiedEntry(const std::string& key, const std::string& extension,
                                           std::string* bytes, std::string* reason) {
  const std::string artifact = absl::StrCat(directory_, "/", key, ".", extension);
  const std::string meta = absl::StrCat(directory_, "/", key, ".meta");
  struct stat st;
  if (::lstat(artifact.c_str(), &st) != 0 && ::lstat(meta.c_str(), &st) != 0) return "";  // a miss
  for (const std::string& path : {artifact, meta}) {
    if (std::string why = Untrusted(path); !why.empty()) {
      *reason = absl::StrCat(path, ": ", why);
      return "";
    }
  }
  std::string meta_text;
  if (!ReadFile(meta, &meta_text) || !ReadFile(artifact, bytes)) {
    *reason = absl::StrCat(key, ": unreadable");
    return "";
  }
  std::vector<std::string> lines = absl::StrSplit(meta_text, '\n', absl::SkipEmpty());
  int64_t size = -1;
  if (lines.size() != 3 || lines[0] != kMetaMagic || !absl::SimpleAtoi(lines[1], &size) ||
      size != static_cast<int64_t>(bytes->size()) || lines[2] != StableHash(*bytes)) {
    *reason = absl::StrCat(artifact, ": size or content hash differs from its .meta (corrupt or truncated)");
    return "";
  }
  return artifact;
}

std::string KernelCache::PrivateStem(const std::string& key, std::string* error) {
  std::string dir = directory_;
  if (dir.empty()) {
    if (scratch_.empty()) {
      const char* tmp = std::getenv("TMPDIR");
      std::string pattern = absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/dyntrace-XXXXXX");
      if (::mkdtemp(pattern.data()) == nullptr) {
        *error = absl::StrCat("can't create a scratch directory: ", std::strerror(errno));
        return "";
      }
      scratch_ = pattern;
    }
    dir = scratch_;
  }
  return absl::StrFormat("%s/%s.tmp.%d.%d", dir, key, ::getpid(), build_counter++);
}

std::string KernelCache::Publish(const std::string& key, const std::string& extension, const std::string& built,
                                 const std::string& stem) {
  ::chmod(built.c_str(), 0600);
  if (directory_.empty()) return built;
  std::string bytes;
  const std::string artifact = absl::StrCat(directory_, "/", key, ".", extension);
  const std::string meta = absl::StrCat(directory_, "/", key, ".meta");
  const std::string meta_tmp = stem + ".meta";
  if (ReadFile(built, &bytes) &&
      WriteFile(meta_tmp, absl::StrFormat("%s\n%d\n%s\n", kMetaMagic, bytes.size(), StableHash(bytes))) &&
      ::rename(built.c_str(), artifact.c_str()) == 0 && ::rename(meta_tmp.c_str(), meta.c_str()) == 0) {
    return artifact;
  }
  ::unlink(meta_tmp.c_str());
  return built;
}

void KernelCache::NoteRejected(const std::string& reason) {
  if (reason.empty()) return;
  ++counters_.rejected;
  if (log::Enabled(log::Kind::kKernels)) log::Write(log::Kind::kKernels, absl::StrCat("cache entry refused, rebuilding: ", reason));
}

std::shared_ptr<LoadedLibrary> KernelCache::FindLibrary(const std::string& key, CacheSource* source_kind) {
  if (auto it = loaded_.find(key); it != loaded_.end()) {
    ++counters_.from_memory;
    *source_kind = CacheSource::kMemory;
    return it->second;
  }
  if (directory_.empty()) return nullptr;
  std::string reason, bytes;
  if (std::string path = ReadVerifiedEntry(key, "so", &bytes, &reason); !path.empty()) {
    if (void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      auto lib = std::make_shared<LoadedLibrary>();
      lib->handle = handle;
      lib->path = path;
      ++counters_.from_disk;
      *source_kind = CacheSource::kDisk;
      loaded_[key] = lib;
      return lib;
    }
    const char* error = ::dlerror();
    reason = absl::StrCat(path, ": dlopen failed: ", error != nullptr ? error : "?");
  }
  NoteRejected(reason);
  return nullptr;
}

absl::StatusOr<std::shared_ptr<LoadedLibrary>> KernelCache::PublishLibrary(const std::string& key,
                                                                           const std::string& stem) {
  if (auto it = loaded_.find(key); it != loaded_.end()) {  // another thread built it meanwhile
    ::unlink((stem + ".so").c_str());
    return it->second;
  }
  const std::string final_path = Publish(key, "so", stem + ".so", stem);
  void* handle = ::dlopen(final_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (directory_.empty()) ::unlink(final_path.c_str());  // loaded: the file is no longer needed
  if (handle == nullptr) {
    const char* error = ::dlerror();
    return absl::InternalError(absl::StrCat("dlopen of a fresh kernel library failed: ", error != nullptr ? error : "?"));
  }
  auto lib = std::make_shared<LoadedLibrary>();
  lib->handle = handle;
  lib->path = final_path;
  loaded_[key] = lib;
  ++counters_.compiled;
  return lib;
}

namespace {

// Runs compile(i) for each i in `misses` on up to one thread per core: a graph's translation
// units are independent, so they compile side by side.
void CompileEachInParallel(const std::vector<size_t>& misses, const std::function<void(size_t)>& compile) {
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t m = next++; m < misses.size(); m = next++) compile(misses[m]);
  };
  const size_t threads = std::min<size_t>(misses.size(), NvrtcThreads());
  std::vector<std::thread> helpers;
  for (size_t t = 1; t < threads; ++t) helpers.emplace_back(work);
  work();
  for (std::thread& t : helpers) t.join();
}

// Builds sources[i] into <stems[i]>.so for each i in `misses`, one host-compiler process per
// thread. Writes each source beside its library (under a private name, so readers never see a
// half-written file) and removes it after.
void CompileLibrariesInParallel(const HostCompiler& compiler, const std::vector<std::string>& sources,
                                const std::vector<size_t>& misses, const std::vector<std::string>& stems,
                                std::vector<absl::Status>& results) {
  CompileEachInParallel(misses, [&](size_t i) {
    const std::string cpp = stems[i] + ".cpp";
    if (!WriteFile(cpp, sources[i])) {
      results[i] = absl::UnavailableError(absl::StrFormat("can't write %s: %s", cpp, std::strerror(errno)));
      return;
    }
    results[i] = CompileSharedLibrary(compiler, cpp, stems[i] + ".so");
    ::unlink(cpp.c_str());
  });
}

}  // namespace

absl::StatusOr<std::vector<std::shared_ptr<LoadedLibrary>>> KernelCache::LoadLibraries(
    const std::vector<std::string>& sources, CacheSource* source_kind) {
  absl::StatusOr<HostCompiler> compiler = FindHostCompiler();
  if (!compiler.ok()) return compiler.status();
  std::vector<std::string> keys, stems(sources.size());
  std::vector<std::shared_ptr<LoadedLibrary>> libraries(sources.size());
  std::vector<size_t> misses;
  *source_kind = CacheSource::kMemory;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ChooseDirectory();
    for (size_t i = 0; i < sources.size(); ++i) {
      keys.push_back(StableHash(absl::StrCat(sources[i], "\n", compiler->identity)));
      CacheSource found = CacheSource::kMemory;
      libraries[i] = FindLibrary(keys[i], &found);
      if (found == CacheSource::kDisk) *source_kind = CacheSource::kDisk;
      if (libraries[i] != nullptr) continue;
      std::string stem_error;
      stems[i] = PrivateStem(keys[i], &stem_error);
      if (stems[i].empty()) return absl::UnavailableError(stem_error);
      misses.push_back(i);
    }
  }
  if (misses.empty()) return libraries;
  // The host compiler runs without the lock: other threads may use the cache meanwhile.
  std::vector<absl::Status> compiled(sources.size());
  const auto start = std::chrono::steady_clock::now();
  CompileLibrariesInParallel(*compiler, sources, misses, stems, compiled);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::lock_guard<std::mutex> lock(mu_);
  counters_.compile_seconds += seconds;
  absl::Status first_failure;  // the units that did compile are kept: they are good entries
  for (size_t i : misses) {
    if (!compiled[i].ok()) {
      ::unlink((stems[i] + ".so").c_str());
      if (first_failure.ok()) first_failure = compiled[i];
      continue;
    }
    absl::StatusOr<std::shared_ptr<LoadedLibrary>> published = PublishLibrary(keys[i], stems[i]);
    if (!published.ok()) {
      if (first_failure.ok()) first_failure = published.status();
      continue;
    }
    libraries[i] = *std::move(published);
  }
  if (!first_failure.ok()) return first_failure;
  *source_kind = CacheSource::kCompiled;
  return libraries;
}

std::string KernelCache::CubinKey(const std::string& source, int sm_arch, std::pair<int, int> nvrtc_version) {
  return StableHash(absl::StrFormat("%s\nnvrtc %d.%d\n%s", source, nvrtc_version.first, nvrtc_version.second,
                                    absl::StrJoin(NvrtcOptions(sm_arch), " ")));
}

std::shared_ptr<const std::string> KernelCache::FindCubin(const std::string& key, CacheSource* source_kind) {
  if (auto it = cubins_.find(key); it != cubins_.end()) {
    ++counters_.cubins_from_memory;
    *source_kind = CacheSource::kMemory;
    return it->second;
  }
  if (directory_.empty()) return nullptr;
  std::string reason, bytes;
  if (ReadVerifiedEntry(key, "cubin", &bytes, &reason).empty()) {
    NoteRejected(reason);
    return nullptr;
  }
  auto cubin = std::make_shared<const std::string>(std::move(bytes));
  ++counters_.cubins_from_disk;
  *source_kind = CacheSource::kDisk;
  cubins_[key] = cubin;
  return cubin;
}

std::shared_ptr<const std::string> KernelCache::StoreCubin(const std::string& key, std::string bytes) {
  auto cubin = std::make_shared<const std::string>(std::move(bytes));
  if (!directory_.empty()) {
    std::string stem_error;
    const std::string stem = PrivateStem(key, &stem_error);
    const std::string built = stem + ".cubin";
    // A CUBIN that can't be stored is still good for this process.
    if (!stem.empty() && (!WriteFile(built, *cubin) || Publish(key, "cubin", built, stem) == built)) {
      ::unlink(built.c_str());
    }
  }
  cubins_[key] = cubin;
  ++counters_.cubins_compiled;
  return cubin;
}

absl::StatusOr<std::shared_ptr<const std::string>> KernelCache::LoadCubin(const std::string& source,
                                                                          const std::string& program_name,
                                                                          int sm_arch, CacheSource* source_kind) {
  DT_ASSIGN_OR_RETURN(std::vector<std::shared_ptr<const std::string>> cubins,
                      LoadCubins({source}, program_name, sm_arch, source_kind));
  return cubins[0];
}

int NvrtcThreads() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

namespace {

// Compiles sources[i] for each i in `misses` into results[i], one NVRTC program per thread.
void CompileInParallel(const std::vector<std::string>& sources, const std::vector<size_t>& misses,
                       const std::string& program_name, int sm_arch,
                       std::vector<absl::StatusOr<std::string>>& results) {
  CompileEachInParallel(misses, [&](size_t i) {
    results[i] = CompileCudaToCubin(sources[i], absl::StrCat(program_name, "_", i), sm_arch);
  });
}

}  // namespace

absl::StatusOr<std::vector<std::shared_ptr<const std::string>>> KernelCache::LoadCubins(
    const std::vector<std::string>& sources, const std::string& program_name, int sm_arch, CacheSource* source_kind) {
  const absl::StatusOr<std::pair<int, int>> version = NvrtcVersion();
  if (!version.ok()) return version.status();
  std::vector<std::string> keys;
  std::vector<std::shared_ptr<const std::string>> cubins(sources.size());
  std::vector<size_t> misses;
  *source_kind = CacheSource::kMemory;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ChooseDirectory();
    for (size_t i = 0; i < sources.size(); ++i) {
      keys.push_back(CubinKey(sources[i], sm_arch, *version));
      CacheSource found = CacheSource::kMemory;
      cubins[i] = FindCubin(keys[i], &found);
      if (cubins[i] == nullptr) misses.push_back(i);
      if (found == CacheSource::kDisk) *source_kind = CacheSource::kDisk;
    }
  }
  if (misses.empty()) return cubins;
  // NVRTC runs without the lock: other threads may use the cache meanwhile.
  std::vector<absl::StatusOr<std::string>> compiled(sources.size(), std::string());
  const auto start = std::chrono::steady_clock::now();
  CompileInParallel(sources, misses, program_name, sm_arch, compiled);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::lock_guard<std::mutex> lock(mu_);
  counters_.nvrtc_seconds += seconds;
  for (size_t i : misses) {
    if (!compiled[i].ok()) return compiled[i].status();
    cubins[i] = StoreCubin(keys[i], *std::move(compiled[i]));
  }
  *source_kind = CacheSource::kCompiled;
  return cubins;
}

CacheCounters KernelCache::counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counters_;
}

std::string KernelCache::directory() {
  std::lock_guard<std::mutex> lock(mu_);
  ChooseDirectory();
  return directory_;
}

std::string KernelCache::TakeWarning() {
  std::lock_guard<std::mutex> lock(mu_);
  if (warned_ || warning_.empty()) return "";
  warned_ = true;
  return warning_;
}

void KernelCache::Reset() {
  std::lock_guard<std::mutex> lock(mu_);
  directory_chosen_ = false;
  warned_ = false;
  warning_.clear();
  loaded_.clear();
  cubins_.clear();
  (void)FindHostCompiler(/*refresh=*/true);
}

}  // namespace dt::jit
