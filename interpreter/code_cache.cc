// interpreter/code_cache.cc: the hook's global state: per-code caches, counters, tracing modes,
// stress mode and which code is excluded from tracing.
#include "interpreter/code_cache.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "interpreter/cpython_frame.h"
#include "interpreter/py_str.h"
#include "jit/kernel_cache.h"
#include "runtime/cuda_tensor.h"

namespace dt::interpreter {
namespace {

using py::PyRef;

Stats stats;
absl::flat_hash_set<CodeCache*>* all_caches = new absl::flat_hash_set<CodeCache*>();
std::vector<JitOptions>* tracing_modes = new std::vector<JitOptions>();
JitOptions* global_mode = nullptr;
TraceLog* trace_log = nullptr;
bool hook_installed = false;
thread_local bool inside_dyntrace = false;
std::vector<std::string>* excluded_prefixes = nullptr;
// Stress mode (DYNTRACE_STRESS=1, enable(stress=True)): every frame of every module is traced and
// run through segments, the standard library included, and frames without tensor work keep their
// entries instead of being skipped, so the interpreter's semantics meet code nobody wrote for it.
bool stress_mode = false;

void FreeCodeCache(void* extra) {
  auto* cache = static_cast<CodeCache*>(extra);
  all_caches->erase(cache);
  delete cache;
}

// dyntrace's own Python helpers (the prelude) run inside dyntrace's bookkeeping: never traced.
bool IsDyntraceInternal(PyCodeObject* code) {
  const std::optional<std::string> filename = py::Utf8(code->co_filename);
  if (!filename) return true;
  return absl::StartsWith(*filename, "<dyntrace");
}

}  // namespace

InsideDyntrace::InsideDyntrace() : saved_(inside_dyntrace) { inside_dyntrace = true; }
InsideDyntrace::~InsideDyntrace() { inside_dyntrace = saved_; }
bool InsideDyntrace::Active() { return inside_dyntrace; }

TraceLog* ActiveTraceLog() { return trace_log; }

const JitOptions* ActiveMode() {
  if (!tracing_modes->empty()) return &tracing_modes->back();
  return global_mode;
}

bool IsGeneratorLike(PyCodeObject* code) {
  return (code->co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR)) != 0;
}

bool Excluded(PyCodeObject* code) {
  if (stress_mode) return IsDyntraceInternal(code);
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

Stats& GlobalStats() { return stats; }

CodeCache* FindCache(PyCodeObject* code) {
  cpython::InitCodeExtra(&FreeCodeCache);
  return static_cast<CodeCache*>(cpython::GetCodeExtra(code));
}

namespace {

// Whether entries compiled under `a` serve calls made under `b` (cache_limit only bounds them).
bool SameCompileOptions(const JitOptions& a, const JitOptions& b) {
  return a.backend == b.backend && a.backend_callable.get() == b.backend_callable.get() &&
         a.fullgraph == b.fullgraph && a.cuda_graphs == b.cuda_graphs;
}

}  // namespace

CodeCache* GetOrCreateCache(PyCodeObject* code, const JitOptions& options, bool explicit_jit) {
  cpython::InitCodeExtra(&FreeCodeCache);
  auto* cache = static_cast<CodeCache*>(cpython::GetCodeExtra(code));
  if (cache == nullptr) {
    cache = new CodeCache();
    cache->code = code;
    cpython::SetCodeExtra(code, cache);
    all_caches->insert(cache);
  }
  if (explicit_jit) {
    // dt.jit again with other compile options: the entries compiled under the old ones would
    // otherwise keep serving the frame, so they go (as torch.compile recompiles for another
    // backend). Running entries stay alive through their shared_ptr.
    if (!cache->segments.empty() && !SameCompileOptions(cache->options, options)) {
      cache->segments.clear();
      cache->breaks.clear();
    }
    cache->options = options;
    cache->explicit_jit = true;
    cache->skip = false;
    cache->warned = false;
  } else if (!cache->explicit_jit && cache->segments.empty()) {
    cache->options = options;
  }
  return cache;
}

std::vector<const CodeCache*> AllCaches() {
  std::vector<const CodeCache*> caches(all_caches->begin(), all_caches->end());
  auto key = [](const CodeCache* c) {
    return std::pair(py::Utf8Or(c->code->co_filename), c->code->co_firstlineno);
  };
  std::sort(caches.begin(), caches.end(), [&](const CodeCache* a, const CodeCache* b) { return key(a) < key(b); });
  return caches;
}

void ResetAll() {
  for (CodeCache* cache : *all_caches) {
    cache->segments.clear();
    cache->recompile_reasons.clear();
    cache->breaks.clear();
    cache->warned = false;
    cache->skip = cache->excluded;
  }
  stats = Stats();
  stats.kernel_baseline = jit::KernelCache::Global().counters();
  stats.nvrtc_baseline = jit::NvrtcCheckCounters();
  const jit::CudaGraphCounters& graphs = jit::GlobalCudaGraphCounters();
  stats.cuda_graph_baseline[0] = graphs.captures;
  stats.cuda_graph_baseline[1] = graphs.replays;
  stats.cuda_graph_baseline[2] = graphs.patches;
  stats.cuda_graph_baseline[3] = graphs.refusals;
  stats.cuda_graph_baseline[4] = graphs.kernel_launches;
  stats.cuda_host_ops_baseline = CudaHostOps();
}

void PushTracingMode(const JitOptions& options) {
  InstallHook();
  tracing_modes->push_back(options);
}

namespace {

// With the hook installed CPython stops inlining Python-to-Python calls, which costs call-heavy
// code far more than the hook itself: take it out whenever nothing needs it.
void UninstallHookIfUnused() {
  if (!hook_installed || !tracing_modes->empty() || global_mode != nullptr) return;
  for (CodeCache* cache : *all_caches) {
    if (cache->explicit_jit) return;
  }
  cpython::SetEvalFrame(nullptr);
  hook_installed = false;
}
}  // namespace

void PopTracingMode() {
  if (!tracing_modes->empty()) tracing_modes->pop_back();
  UninstallHookIfUnused();
}

void SetGlobalMode(const JitOptions* options) {
  delete global_mode;
  global_mode = options != nullptr ? new JitOptions(*options) : nullptr;
  if (options != nullptr) InstallHook();
  else UninstallHookIfUnused();
}

void InstallHook() {
  if (hook_installed) return;
  cpython::InitCodeExtra(&FreeCodeCache);
  cpython::SetEvalFrame(&EvalFrame);
  hook_installed = true;
}

void SetTraceLog(TraceLog* log) { trace_log = log; }

void SetStressMode(bool on) {
  stress_mode = on;
  if (!on) return;
  // Code seen before stress mode began may have been excluded as standard library.
  for (CodeCache* cache : *all_caches) {
    if (cache->excluded && !IsGeneratorLike(cache->code) && !IsDyntraceInternal(cache->code)) {
      cache->excluded = false;
      cache->skip = false;
    }
  }
}

bool StressMode() { return stress_mode; }

}  // namespace dt::interpreter
