// interpreter/code_cache.h: what dyntrace remembers about each code object, and its counters.
//
// A CodeCache hangs off a code object's co_extra slot. It holds the options the code is compiled
// with, and one entry per guard set: a compiled graph with its return recipe, or a "fallback"
// entry saying that, for frames passing these guards, the trace stops (so CPython runs the frame
// without re-tracing). Tracing is deterministic given values that pass the guards, which is why a
// failed trace can be cached like a successful one.
#ifndef DYNTRACE_INTERPRETER_CODE_CACHE_H_
#define DYNTRACE_INTERPRETER_CODE_CACHE_H_

#include <Python.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "graph/graph.h"
#include "guards/guard_set.h"
#include "interpreter/py_ref.h"
#include "interpreter/reason_log.h"
#include "interpreter/tracer.h"
#include "jit/cpu_executable.h"
#include "jit/cuda_executable.h"
#include "jit/nvrtc_check.h"

namespace dt::interpreter {

struct JitOptions {
  std::string backend = "auto";  // "auto" | "eager" | "cpu"; or a Python callable in backend_callable
  py::PyRef backend_callable;
  bool fullgraph = false;
  int cache_limit = 8;
  std::string cuda_graphs = "auto";
};

// A segment's graph compiled by one backend: run op by op (eager), a Python backend's callable,
// or kernels from the cpu or cuda backend.
struct EagerGraph {};
struct PythonBackendCallable {
  py::PyRef callable;
};
using CompiledGraph = std::variant<EagerGraph, PythonBackendCallable, std::shared_ptr<jit::CpuExecutable>,
                                   std::shared_ptr<jit::CudaExecutable>>;

// One segment, from `start_offset` to a return or a break, for frames passing `guards`: the
// trace plus its compiled graph, or a fallback saying that CPython runs the frame from here.
struct CacheEntry {
  int start_offset = 0;
  guards::GuardSet guards;
  std::optional<std::string> fallback_reason;  // set: the trace could not start here
  trace::TraceResult trace;  // the graph, how the segment exits, the frame state to rebuild (its
                             // guards are `guards` above)
  CompiledGraph compiled;
  std::string backend_used;      // "eager", "cpu", "cuda" or "python" once compiled
  std::string kernel_source;     // the generated translation unit; empty unless cpu/cuda
  double compile_seconds = 0;    // tracing plus code generation and compilation
  bool has_inplace = false;

  bool fallback() const { return fallback_reason.has_value(); }
  const std::shared_ptr<Graph>& graph() const { return trace.graph; }
  const jit::CpuExecutable* cpu() const {
    const auto* cpu = std::get_if<std::shared_ptr<jit::CpuExecutable>>(&compiled);
    return cpu != nullptr ? cpu->get() : nullptr;
  }
};

struct BreakRecord {
  std::string reason;
  std::string file;
  int line = -1;
  std::string instruction;
  int offset = -1;
};

struct CodeCache {
  PyCodeObject* code = nullptr;  // borrowed: the cache dies with the code
  JitOptions options;
  bool explicit_jit = false;  // marked by dyntrace.jit (vs. seen under tracing()/enable())
  bool skip = false;          // run under CPython without looking at entries
  bool excluded = false;      // standard library, generator, ...: never traced in tracing mode
  bool warned = false;
  // Entries per segment start offset (0: the frame's entry). shared_ptr: a running entry stays
  // alive even if reset() clears the cache meanwhile.
  std::map<int, std::vector<std::shared_ptr<CacheEntry>>> segments;
  // Every entry, ordered by start offset.
  std::vector<std::shared_ptr<CacheEntry>> AllEntries() const {
    std::vector<std::shared_ptr<CacheEntry>> all;
    for (const auto& [offset, list] : segments) all.insert(all.end(), list.begin(), list.end());
    return all;
  }
  std::vector<std::string> recompile_reasons;
  std::vector<BreakRecord> breaks;
};

struct Stats {
  int64_t frames_seen = 0;
  int64_t frames_traced = 0;
  int64_t frames_skipped = 0;
  int64_t cache_hits = 0;
  int64_t cache_misses = 0;
  int64_t recompiles = 0;
  int64_t fallbacks = 0;
  int64_t graphs = 0;
  int64_t graph_breaks = 0;
  // graph_breaks by BreakKind (data-dependent, unsupported, raises, limit).
  int64_t break_kinds[4] = {0, 0, 0, 0};
  int64_t escapes = 0;
  int64_t handbacks = 0;
  // Bounded (see reason_log.h): a program can meet the same break on every call.
  ReasonLog recompile_reasons;
  ReasonLog fallback_reasons;
  ReasonLog break_reasons;  // every break met while tracing, segment or fallback
  ReasonLog compile_failures;  // graphs a compiling backend could not compile (run eagerly)
  jit::CacheCounters kernel_baseline;       // kernel cache counters at the last reset()
  jit::NvrtcCheckTotals nvrtc_baseline;     // DYNTRACE_NVRTC_CHECK totals at the last reset()
  // CUDA graph counters at the last reset(): captures, replays, patches, refusals, kernel launches.
  int64_t cuda_graph_baseline[5] = {0, 0, 0, 0, 0};
  int64_t cuda_host_ops_baseline = 0;
};

// ---- global state (all under the GIL) ----
Stats& GlobalStats();
// The cache of `code`, or null.
CodeCache* FindCache(PyCodeObject* code);
// The cache of `code`, created with `options` when missing.
CodeCache* GetOrCreateCache(PyCodeObject* code, const JitOptions& options, bool explicit_jit);
// Every code object's cache alive now (reports walk them), ordered by file name and first line.
std::vector<const CodeCache*> AllCaches();
// Forgets every entry and counter (dyntrace.reset()).
void ResetAll();

// Modes: options for frames not marked by jit, when tracing()/enable() is active.
void PushTracingMode(const JitOptions& options);
void PopTracingMode();
void SetGlobalMode(const JitOptions* options);  // enable(): options; disable(): null
// Makes sure the eval-frame hook is installed.
void InstallHook();

// Collects what each trace produced while set (dyntrace.explain).
struct TraceLog {
  std::vector<std::string> graphs;
  std::vector<std::string> guards;
  std::vector<BreakRecord> breaks;
};
void SetTraceLog(TraceLog* log);

// ---- shared by the hook's files (eval_hook.cc, code_cache.cc, compiled_segment.cc) ----
// Breaks and recompile reasons kept per code object (for explain() and the report).
inline constexpr size_t kMaxRecordsPerCode = 64;
// While alive, dyntrace itself runs Python code (dis, sysconfig, a Python backend): the hook
// runs those frames under CPython.
class InsideDyntrace {
 public:
  InsideDyntrace();
  ~InsideDyntrace();
  InsideDyntrace(const InsideDyntrace&) = delete;
  InsideDyntrace& operator=(const InsideDyntrace&) = delete;
  static bool Active();

 private:
  bool saved_;
};
TraceLog* ActiveTraceLog();
// The options of tracing()/enable() in effect, or null.
const JitOptions* ActiveMode();
bool IsGeneratorLike(PyCodeObject* code);
// Not traced in tracing()/enable() mode: the standard library, installed packages, dyntrace's
// own helpers (stress mode excludes only the latter).
bool Excluded(PyCodeObject* code);
// "qualname (file:line)" for logs and reasons.
std::string CodeName(PyCodeObject* code);
// The PEP 523 frame evaluator (eval_hook.cc).
PyObject* EvalFrame(PyThreadState* tstate, struct _PyInterpreterFrame* frame, int throwflag);

// Stress mode: enable()'s tracing reaches every frame, the standard library included, and frames
// without tensor work still run through segments. Turned on by DYNTRACE_STRESS=1 at import or
// enable(stress=True); enable(stress=False) and disable() turn it off.
void SetStressMode(bool on);
bool StressMode();

}  // namespace dt::interpreter

#endif  // DYNTRACE_INTERPRETER_CODE_CACHE_H_
