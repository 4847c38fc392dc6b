// interpreter/code_cache.cc: the hook's global state: per-code caches, counters, tracing modes,
// stress mode and which code is excluded from tracing.
#include "interpreter/code_cache.h"

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "interpreter/cpython_frame.h"
#include "interpreter/py_str.h"
#include "jit/kernel_cache.h"
#include "runtime/cuda_attention.h"
#include "runtime/cuda_index_kernels.h"
#include "runtime/cuda_tensor.h"

namespace dt::interpreter {
namespace {

using py::PyRef;

absl::flat_hash_set<CodeCaches*>* all_caches = new absl::flat_hash_set<CodeCaches*>();
// How many modes all threads have entered and not left: the hook stays while any is active.
int64_t active_modes = 0;
JitOptions* global_options = nullptr;
ActiveMode global_mode;  // enable(); active when global_options is set
CacheKey next_key = 1;
// The code objects with a cache under each key, so ResetKey (every compiled callable's end)
// touches only those.
absl::flat_hash_map<CacheKey, std::vector<CodeCaches*>>* codes_by_key =
    new absl::flat_hash_map<CacheKey, std::vector<CodeCaches*>>();
TraceLog* trace_log = nullptr;
bool hook_installed = false;
std::vector<std::string>* excluded_prefixes = nullptr;
// Stress mode (DYNTRACE_STRESS=1, enable(stress=True)): every frame of every module is traced and
// run through segments, the standard library included, and frames without tensor work keep their
// entries instead of being skipped, so the interpreter's semantics meet code nobody wrote for it.
bool stress_mode = false;
bool stress_by_environment = false;  // DYNTRACE_STRESS at import: enable()'s default

void ForgetCodeForKey(CacheKey key, CodeCaches* caches) {
  auto it = codes_by_key->find(key);
  if (it == codes_by_key->end()) return;
  std::erase(it->second, caches);
  if (it->second.empty()) codes_by_key->erase(it);
}

// CPython calls every slot's free function when a code object dies, set or not: a code object
// with only the decoded-bytecode slot set (bytecode.cc) has a null here.
void FreeCodeCaches(void* extra) {
  if (extra == nullptr) return;
  auto* caches = static_cast<CodeCaches*>(extra);
  RecentCaches::Slot& slot = recent_caches.slots[RecentCaches::SlotOf(caches->code)];
  if (slot.caches == caches) slot = RecentCaches::Slot{};
  for (const auto& cache : caches->by_key) ForgetCodeForKey(cache->key, caches);
  all_caches->erase(caches);
  delete caches;
}

// dyntrace's own Python helpers (the prelude) run inside dyntrace's bookkeeping: never traced.
bool IsDyntraceInternal(PyCodeObject* code) {
  const std::optional<std::string> filename = py::Utf8(code->co_filename);
  if (!filename) return true;
  return absl::StartsWith(*filename, "<dyntrace");
}

}  // namespace

Stats global_stats;
RecentCaches recent_caches;
thread_local HookThreadState hook_thread;

InsideDyntrace::InsideDyntrace() : saved_(hook_thread.inside_dyntrace) { hook_thread.inside_dyntrace = true; }
InsideDyntrace::~InsideDyntrace() { hook_thread.inside_dyntrace = saved_; }
bool InsideDyntrace::Active() { return hook_thread.inside_dyntrace; }

TraceLog* ActiveTraceLog() { return trace_log; }

const ActiveMode* GlobalMode() { return global_options != nullptr ? &global_mode : nullptr; }

bool IsGeneratorLike(PyCodeObject* code) {
  return (code->co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR)) != 0;
}

bool Excluded(PyCodeObject* code) {
  if (stress_mode) return IsDyntraceInternal(code);
  // Module and class bodies (name-based locals, run once): nothing to compile, and under the
  // command they would be what --fullgraph rejects and what --stats counts.
  if ((code->co_flags & CO_OPTIMIZED) == 0) return true;
  if (excluded_prefixes == nullptr) {
    excluded_prefixes = new std::vector<std::string>();
    InsideDyntrace guard;
    PyRef sysconfig = PyRef::Steal(PyImport_ImportModule("sysconfig"));
    PyRef paths = sysconfig ? PyRef::Steal(PyObject_CallMethod(sysconfig.get(), "get_paths", nullptr)) : PyRef();
    if (paths) {
      for (const char* key : {"stdlib", "platstdlib", "purelib", "platlib"}) {
        PyObject* p = PyDict_GetItemString(paths.get(), key);
        if (std::optional<std::string> prefix = py::Utf8(p)) excluded_prefixes->push_back(*prefix);
      }
    }
    PyErr_Clear();
    excluded_prefixes->push_back("/usr/lib/python3/");
    excluded_prefixes->push_back("<frozen");
    excluded_prefixes->push_back("<dyntrace");
  }
  const std::optional<std::string> filename = py::Utf8(code->co_filename);
  if (!filename) return true;
  for (const std::string& prefix : *excluded_prefixes) {
    if (!prefix.empty() && absl::StartsWith(*filename, prefix)) return true;
  }
  return absl::StrContains(*filename, "site-packages") || absl::StrContains(*filename, "dist-packages");
}

std::string CodeName(PyCodeObject* code) {
  return absl::StrFormat("%s (%s:%d)", py::Utf8Or(code->co_qualname),
                         py::Utf8Or(code->co_filename), code->co_firstlineno);
}


const char* SkipReasonName(SkipReason reason) {
  switch (reason) {
    case SkipReason::kNone: return "";
    case SkipReason::kExcluded: return "excluded";
    case SkipReason::kGenerator: return "generator";
    case SkipReason::kNoTensorWork: return "no tensor work";
    case SkipReason::kCacheLimit: return "cache_limit";
    case SkipReason::kTraceHook: return "sys.settrace/setprofile";
  }
  return "";
}

int64_t FramesSkipped(const Stats& s) {
  int64_t skipped = 0;
  for (int r = 0; r < kNumSkipReasons; ++r) {
    if (r != static_cast<int>(SkipReason::kGenerator) && r != static_cast<int>(SkipReason::kExcluded)) {
      skipped += s.frames_skipped_by[r];
    }
  }
  return skipped;
}

double Coverage(const Stats& s) {
  const int64_t runnable = s.frames_seen + FramesSkipped(s);
  return runnable == 0 ? -1 : static_cast<double>(s.frames_seen) / static_cast<double>(runnable);
}

CodeCaches* FindCaches(PyCodeObject* code) {
  cpython::InitCodeExtra(&FreeCodeCaches);
  auto* caches = static_cast<CodeCaches*>(cpython::GetCodeExtra(code));
  if (caches != nullptr) recent_caches.slots[RecentCaches::SlotOf(code)] = {code, caches};
  return caches;
}

CodeCaches* GetOrCreateCaches(PyCodeObject* code) {
  cpython::InitCodeExtra(&FreeCodeCaches);
  if (CodeCaches* found = FindCaches(code)) return found;
  auto* caches = new CodeCaches();
  caches->code = code;
  caches->generator = IsGeneratorLike(code);
  caches->excluded = Excluded(code);
  cpython::SetCodeExtra(code, caches);
  all_caches->insert(caches);
  recent_caches.slots[RecentCaches::SlotOf(code)] = {code, caches};
  return caches;
}

const std::shared_ptr<CodeCache>& CodeCaches::For(const ActiveMode& mode) {
  // The most recent key first: a loop calls the same compiled callable over and over.
  for (auto it = by_key.rbegin(); it != by_key.rend(); ++it) {
    if ((*it)->key == mode.key) return *it;
  }
  auto cache = std::make_shared<CodeCache>();
  cache->code = code;
  cache->key = mode.key;
  cache->options = *mode.options;
  cache->explicit_jit = mode.root == code;
  if (const CodeCache* learned = mode.learned_from != 0 ? Find(mode.learned_from) : nullptr) {
    cache->dynamic_numbers = learned->dynamic_numbers;
  }
  (*codes_by_key)[mode.key].push_back(this);
  by_key.push_back(std::move(cache));
  return by_key.back();
}

CodeCache* CodeCaches::Find(CacheKey key) const {
  for (const auto& cache : by_key) {
    if (cache->key == key) return cache.get();
  }
  return nullptr;
}

std::vector<const CodeCache*> AllCaches() {
  std::vector<const CodeCache*> caches;
  for (const CodeCaches* per_code : *all_caches) {
    for (const auto& cache : per_code->by_key) caches.push_back(cache.get());
  }
  auto order = [](const CodeCache* c) {
    return std::tuple(py::Utf8Or(c->code->co_filename), c->code->co_firstlineno, c->key);
  };
  std::sort(caches.begin(), caches.end(), [&](const CodeCache* a, const CodeCache* b) { return order(a) < order(b); });
  return caches;
}

void ResetKey(CacheKey key) {
  auto it = codes_by_key->find(key);
  if (it == codes_by_key->end()) return;
  for (CodeCaches* per_code : it->second) {
    std::erase_if(per_code->by_key, [&](const std::shared_ptr<CodeCache>& c) { return c->key == key; });
    if (per_code->skip_key == key) per_code->skip_key = 0;
  }
  codes_by_key->erase(it);
}

CacheKey NewCacheKey() { return next_key++; }

CacheKey KeyForOptions(const JitOptions& options) {
  // Options that change what is compiled; cache_limit only bounds the entries.
  static auto* keys = new absl::flat_hash_map<std::string, CacheKey>();
  const std::string text = absl::StrCat(options.backend, "|", options.fullgraph, "|", options.cuda_graphs, "|",
                                        options.dynamic.has_value() ? int{*options.dynamic} : -1, "|",
                                        reinterpret_cast<uintptr_t>(options.backend_callable.get()));
  auto [it, added] = keys->try_emplace(text, 0);
  if (added) it->second = NewCacheKey();
  return it->second;
}

void ResetAll() {
  for (CodeCaches* per_code : *all_caches) {
    per_code->by_key.clear();
    per_code->skip_key = 0;
  }
  codes_by_key->clear();
  global_stats = Stats();
  global_stats.kernel_baseline = jit::KernelCache::Global().counters();
  global_stats.nvrtc_baseline = jit::NvrtcCheckCounters();
  const jit::CudaGraphCounters& graphs = jit::GlobalCudaGraphCounters();
  global_stats.cuda_graph_baseline[0] = graphs.captures;
  global_stats.cuda_graph_baseline[1] = graphs.replays;
  global_stats.cuda_graph_baseline[2] = graphs.patches;
  global_stats.cuda_graph_baseline[3] = graphs.refusals;
  global_stats.cuda_graph_baseline[4] = graphs.kernel_launches + CudaIndexKernelLaunches() + FusedAttentionLaunches();
  global_stats.cuda_graph_baseline[5] = graphs.shape_limit;
  global_stats.cuda_host_ops_baseline = CudaHostOps();
  global_stats.fused_attention_baseline = FusedAttentionRuns();
}

namespace {

void InstallHook() {
  if (hook_installed) return;
  cpython::InitCodeExtra(&FreeCodeCaches);
  cpython::SetEvalFrame(&EvalFrame);
  hook_installed = true;
}

// With the hook installed CPython stops inlining Python-to-Python calls, which costs call-heavy
// code far more than the hook itself: it is taken out whenever nothing needs it.
void UninstallHookIfUnused() {
  if (!hook_installed || active_modes > 0 || global_options != nullptr) return;
  cpython::SetEvalFrame(nullptr);
  hook_installed = false;
}

}  // namespace

bool HookInstalled() { return hook_installed; }

void EnterMode(const ActiveMode& mode) {
  InstallHook();
  hook_thread.modes.push_back(mode);
  ++active_modes;
}

void ExitMode() {
  if (hook_thread.modes.empty()) return;
  hook_thread.modes.pop_back();
  --active_modes;
  UninstallHookIfUnused();
}

void SetGlobalMode(const JitOptions* options) {
  delete global_options;
  global_options = options != nullptr ? new JitOptions(*options) : nullptr;
  if (global_options != nullptr) {
    global_mode = ActiveMode{global_options, KeyForOptions(*global_options), nullptr};
    InstallHook();
  } else {
    UninstallHookIfUnused();
  }
}

void SetTraceLog(TraceLog* log) { trace_log = log; }

void SetStressMode(bool on) {
  if (stress_mode == on) return;
  stress_mode = on;
  // What is excluded depends on the mode: code seen in one is decided again for the other. Stress
  // mode also takes back what was given up (no tensor work, cache_limit).
  for (CodeCaches* per_code : *all_caches) {
    per_code->excluded = Excluded(per_code->code);
    if (!on) continue;
    per_code->skip_key = 0;
    for (const auto& cache : per_code->by_key) cache->skip = SkipReason::kNone;
  }
}

bool StressMode() { return stress_mode; }

void SetStressByEnvironment(bool on) { stress_by_environment = on; }

bool StressByEnvironment() { return stress_by_environment; }

}  // namespace dt::interpreter
