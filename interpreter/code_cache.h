// interpreter/code_cache.h: what dyntrace remembers about each code object, and its counters.
//
// CodeCaches hang off a code object's co_extra slot: one CodeCache per key (a compiled callable,
// or tracing()/enable() options). A CodeCache holds the options the code is compiled with, and
// one entry per guard set: a compiled graph with its return recipe, or a "fallback"
// entry saying that, for frames passing these guards, the trace stops (so CPython runs the frame
// without re-tracing). Tracing is deterministic given values that pass the guards, which is why a
// failed trace can be cached like a successful one.
#ifndef DYNTRACE_INTERPRETER_CODE_CACHE_H_
#define DYNTRACE_INTERPRETER_CODE_CACHE_H_

#include <Python.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/container/flat_hash_set.h"
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
  // Sizes Python reads and int/float arguments: std::nullopt (automatic: specialised first,
  // run-time values after one change), true (run-time values from the first trace), false
  // (always specialised).
  std::optional<bool> dynamic;
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

// The backward graph of a segment whose inputs require grad (TraceResult::joint), compiled by
// the forward's backend (run op by op when that is a Python callable or compilation failed).
// Shared with the backward nodes made by each run, which may outlive the cache entry.
struct CompiledBackward {
  std::shared_ptr<const JointGraph> joint;
  CompiledGraph compiled;
  std::string backend_used;
};

// One segment, from `start_offset` to a return or a break, for frames passing `guards`: the
// trace plus its compiled graph, or a fallback saying that CPython runs the frame from here.
struct CacheEntry {
  int start_offset = 0;
  guards::GuardSet guards;
  std::optional<std::string> fallback_reason;  // set: the trace could not start here
  trace::TraceResult trace;  // the graph, how the segment exits, the frame state to rebuild (its
                             // guards are `guards` above)
  CompiledGraph compiled;
  std::shared_ptr<const CompiledBackward> backward;  // set when the trace has a joint graph
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

// Which compiled callable (dt.jit) or which tracing()/enable() options entries belong to: a code
// object has entries per key, so several compiled versions of one function coexist.
using CacheKey = uint64_t;

// What the hook does with the frames of the running thread: set while a compiled callable runs
// (its function is `root`) or inside tracing(), and for every thread after enable().
struct ActiveMode {
  const JitOptions* options = nullptr;
  CacheKey key = 0;
  PyCodeObject* root = nullptr;  // a compiled callable's function: traced even without tensor work
  // explain() of a compiled callable: its caches start from what that key learned (the values
  // that became dynamic), so explain shows the symbols the callable traces with now.
  CacheKey learned_from = 0;
};

// Why the hook leaves a frame to CPython without looking at entries (Stats::frames_skipped_by).
// Generator and coroutine frames are not frames dyntrace can run, and excluded frames (module
// bodies, the standard library, installed packages, dyntrace's own code) are outside what it is
// asked to run: both are counted apart from the skips (see FramesSkipped).
enum class SkipReason : uint8_t {
  kNone,
  kExcluded,      // the standard library and installed packages (outside stress mode), dyntrace's own
  kGenerator,     // generators, coroutines, async generators
  kNoTensorWork,  // its first trace met no tensor (outside stress mode and compiled callables)
  kCacheLimit,    // its entries at entry reached cache_limit (outside stress mode)
  kTraceHook,     // sys.settrace (in stress mode also sys.setprofile) is set: checked per frame
};
inline constexpr int kNumSkipReasons = 6;
// "excluded", "generator", "no tensor work", "cache_limit", "sys.settrace/setprofile" ("" for kNone).
const char* SkipReasonName(SkipReason reason);

// A code object's entries under one key.
struct CodeCache {
  PyCodeObject* code = nullptr;  // borrowed: the cache dies with the code
  CacheKey key = 0;
  JitOptions options;
  bool explicit_jit = false;  // the root of a compiled callable (vs. reached under its call)
  SkipReason skip = SkipReason::kNone;  // not kNone: run under CPython without looking at entries
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
  // Sources of numbers that changed between calls (automatic dynamic): traced as run-time
  // numbers from then on.
  absl::flat_hash_set<std::string> dynamic_numbers;
};

// What hangs off a code object's co_extra slot: its caches by key.
struct CodeCaches {
  PyCodeObject* code = nullptr;  // borrowed
  bool excluded = false;   // standard library, installed packages: traced only as a callable's root
  bool generator = false;  // generators and coroutines run under CPython
  // shared_ptr: a frame running segments keeps its cache alive even if the key is dropped.
  std::vector<std::shared_ptr<CodeCache>> by_key;
  // The key whose cache skips this code (0: none known): the hook's fast path for the frames of
  // code without tensor work, which under tracing() is most frames.
  CacheKey skip_key = 0;
  SkipReason skip_reason = SkipReason::kNone;  // why skip_key's cache skips
  // The cache for `mode`, made on first use.
  const std::shared_ptr<CodeCache>& For(const ActiveMode& mode);
  // Null when the code has no entries under `key`.
  CodeCache* Find(CacheKey key) const;
};

struct Stats {
  int64_t frames_seen = 0;    // frames the hook ran as segments (what coverage counts as run)
  int64_t frames_traced = 0;
  int64_t frames_whole_in_cpython = 0;  // of frames_seen: no segment ran (a fallback at entry)
  // Frames left to CPython by reason (kGenerator's and kExcluded's are not skips: see FramesSkipped).
  int64_t frames_skipped_by[kNumSkipReasons] = {};
  int64_t cache_hits = 0;
  int64_t cache_misses = 0;
  int64_t recompiles = 0;
  int64_t entries_evicted = 0;  // stress mode: oldest entries dropped at cache_limit
  int64_t fallbacks = 0;
  int64_t graphs = 0;
  int64_t graph_breaks = 0;
  // graph_breaks by BreakKind (data-dependent, unsupported, raises, limit).
  int64_t break_kinds[4] = {0, 0, 0, 0};
  int64_t escapes = 0;
  int64_t handbacks = 0;
  // Compiled backward graphs (graphs whose inputs require grad), how often a compiled forward
  // recorded its backward node, and what the partitioner saved for backward against saving
  // every value the derivative formulas read (bytes per call, summed over the graphs).
  int64_t backward_graphs = 0;
  int64_t compiled_backward_runs = 0;
  int64_t saved_bytes = 0;
  int64_t save_everything_bytes = 0;
  int64_t recomputed_nodes = 0;
  // Bounded (see reason_log.h): a program can meet the same break on every call.
  ReasonLog recompile_reasons;
  ReasonLog fallback_reasons;
  ReasonLog break_reasons;  // every break met while tracing, segment or fallback
  ReasonLog compile_failures;  // graphs a compiling backend could not compile (run eagerly)
  jit::CacheCounters kernel_baseline;       // kernel cache counters at the last reset()
  jit::NvrtcCheckTotals nvrtc_baseline;     // DYNTRACE_NVRTC_CHECK totals at the last reset()
  // CUDA graph counters at the last reset(): captures, replays, patches, refusals, kernel launches.
  int64_t cuda_graph_baseline[6] = {0, 0, 0, 0, 0, 0};
  int64_t cuda_host_ops_baseline = 0;
  int64_t fused_attention_baseline = 0;
};

// Frames dyntrace could have run but left to CPython (every reason but kGenerator and kExcluded).
int64_t FramesSkipped(const Stats& s);
// frames_seen / (frames_seen + FramesSkipped): the share of the frames dyntrace could run that it
// ran; -1 before any frame.
double Coverage(const Stats& s);

// ---- global state (all under the GIL) ----
extern Stats global_stats;
inline Stats& GlobalStats() { return global_stats; }
inline void CountSkip(SkipReason reason) { ++global_stats.frames_skipped_by[static_cast<int>(reason)]; }
// The caches of `code`, or null.
CodeCaches* FindCaches(PyCodeObject* code);
// A direct-mapped memo of co_extra lookups for the hook's fast path: a load and a compare instead
// of a call per frame. Entries are cleared when their code object dies.
struct RecentCaches {
  static constexpr int kSlots = 512;
  struct Slot {
    PyCodeObject* code = nullptr;
    CodeCaches* caches = nullptr;
  };
  Slot slots[kSlots];
  static int SlotOf(PyCodeObject* code) {
    return static_cast<int>((reinterpret_cast<uintptr_t>(code) >> 6) & (kSlots - 1));
  }
};
extern RecentCaches recent_caches;
inline CodeCaches* FindCachesFast(PyCodeObject* code) {
  const RecentCaches::Slot& slot = recent_caches.slots[RecentCaches::SlotOf(code)];
  return slot.code == code ? slot.caches : nullptr;
}
// The caches of `code`, created (with its exclusion decided) when missing.
CodeCaches* GetOrCreateCaches(PyCodeObject* code);
// Every code object's caches under every key alive now (reports walk them), ordered by file name
// and first line.
std::vector<const CodeCache*> AllCaches();
// Forgets every entry and counter (dyntrace.reset()).
void ResetAll();
// Forgets the entries under `key` (a compiled callable's reset(), or its end).
void ResetKey(CacheKey key);

// Keys: a fresh one per compiled callable (and per explain()), one per distinct options for
// tracing()/enable().
CacheKey NewCacheKey();
CacheKey KeyForOptions(const JitOptions& options);

// Per thread: whether dyntrace itself runs Python code now (InsideDyntrace), and the modes the
// thread entered, innermost last. Initial-exec TLS: the hook reads it for every frame.
struct HookThreadState {
  bool inside_dyntrace = false;
  std::vector<ActiveMode> modes;
};
extern thread_local HookThreadState hook_thread __attribute__((tls_model("initial-exec")));
// enable()'s mode, or null.
const ActiveMode* GlobalMode();
// Modes. The running thread's innermost mode, else enable()'s; null when neither.
inline const ActiveMode* CurrentMode() {
  const HookThreadState& thread = hook_thread;
  return thread.modes.empty() ? GlobalMode() : &thread.modes.back();
}
// Enters a mode on this thread (installing the hook); ExitMode leaves the innermost one (taking
// the hook out when no thread has a mode and enable() is off).
void EnterMode(const ActiveMode& mode);
void ExitMode();
void SetGlobalMode(const JitOptions* options);  // enable(): options; disable(): null
// Whether the frame evaluator is installed now (tests: it is only while something needs it).
bool HookInstalled();

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
bool IsGeneratorLike(PyCodeObject* code);
// Not traced in tracing()/enable() mode: the standard library, installed packages, dyntrace's
// own helpers (stress mode excludes only the latter).
bool Excluded(PyCodeObject* code);
// "qualname (file:line)" for logs and reasons.
std::string CodeName(PyCodeObject* code);
// A compiled callable whose function is a generator or coroutine: the call only makes the
// generator, whose frame runs when it is iterated, under CPython. Recorded as a fallback with
// that reason (eval_hook.cc).
void RecordGeneratorRoot(const ActiveMode& mode);
// The PEP 523 frame evaluator (eval_hook.cc).
PyObject* EvalFrame(PyThreadState* tstate, struct _PyInterpreterFrame* frame, int throwflag);

// Stress mode: enable()'s tracing reaches every frame, the standard library included, and frames
// without tensor work still run through segments. Turned on by DYNTRACE_STRESS=1 at import or
// enable(stress=True); enable(stress=False) and disable() turn it off.
void SetStressMode(bool on);
bool StressMode();
// Whether DYNTRACE_STRESS asked for stress mode when dyntrace was imported: enable() without
// `stress=` keeps it, so a program (or the command) calling enable() does not turn it off.
void SetStressByEnvironment(bool on);
bool StressByEnvironment();

}  // namespace dt::interpreter

#endif  // DYNTRACE_INTERPRETER_CODE_CACHE_H_
