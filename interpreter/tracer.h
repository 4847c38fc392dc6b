// interpreter/tracer.h: symbolic execution of one Python frame into a graph plus guards.
//
// The tracer walks the frame's bytecode (decoded with the running interpreter's own `dis`, so
// opcode numbers and jump targets are never hard-coded) with symbolic values. Tensor work becomes
// graph nodes run on meta tensors; Python-level work on constants is folded; calls to user
// functions are inlined. Every property of the frame's values the trace relies on becomes a guard.
// Anything it cannot capture stops the trace with a reason; the caller then runs the frame under
// CPython, so an incomplete trace can never change what the program does.
#ifndef DYNTRACE_INTERPRETER_TRACER_H_
#define DYNTRACE_INTERPRETER_TRACER_H_

#include <Python.h>

#include <memory>
#include <optional>
#include <string>
#include <variant>

#include "absl/container/flat_hash_set.h"
#include "autograd/joint_graph.h"
#include "graph/autocast.h"
#include "graph/graph.h"
#include "guards/guard_set.h"
#include "interpreter/break_reason.h"
#include "interpreter/py_ref.h"

namespace dt::interpreter::trace {

// A class collections.namedtuple made (tuple its direct base, `_fields` and `_make` its own, a
// plain metaclass), whose instances the trace makes as named kTuples.
bool IsNamedTupleClass(PyObject* cls);
// An instance of a named tuple type from a sequence of its items: `tuple.__new__(cls, items)` for a
// namedtuple class (as its `_make` does), `type(items)` for an op's named results (a structseq).
// New reference; null with an exception set on failure.
PyObject* MakeNamedTuple(PyObject* type, PyObject* items);

// How to build the function's return value from graph outputs, constants and frame values.
// Also how to rebuild the frame's locals and stack at a graph break. Values shared by several
// slots (a list two locals refer to, a cell a closure captures) are built once: `memo` names them.
struct OutputSpec {
  enum class Kind : uint8_t {
    kGraphOutput, kConst, kSource, kTuple, kList, kDict,
    kNull,         // an empty slot (unbound local, NULL on the stack)
    kCell,         // a new cell holding children[0] (or empty)
    kFunction,     // a function made by the trace: obj = code; children: defaults, kwdefaults, closure
    kBoundMethod,  // children[0] bound to children[1] (obj: a descriptor, when not a function)
    kIterator,     // an iterator over children
    kLiveIterator,      // an iterator over the list or dict children[0], `index` items in
    kNewObject,         // an instance of the class `obj` (object.__new__) with attributes keys = children
    kAdvancedIterator,  // a copy of the resume iterator children[0] (a source), `index` items on
    kSlice,        // children: start, stop, step
    kMemo,         // the object built for memo slot `index`
    kScalarSlot,   // the runtime Python number in scalar slot `index`
    kSet,          // a new set: py::ReplaySet of the history tuple `obj`
    kAdvance,      // the iterator children[0] after `index` calls of next() (a reversed() iterator)
    kCall,         // obj(children...), the last len(keys) as keywords: a functools.partial, an
                   // exception the trace made and did not raise (a new object each run)
  };
  Kind kind = Kind::kConst;
  int index = -1;  // kGraphOutput: position in graph outputs; kMemo: memo slot
  int memo = -1;   // >= 0: remember the built object in this memo slot
  py::PyRef obj;   // kConst; kFunction: code; kBoundMethod: descriptor or method name
  guards::SourceRef source;
  std::vector<OutputSpec> children;
  std::vector<py::PyRef> keys;  // kDict
  PyObject* globals = nullptr;  // kFunction (borrowed: the frame's globals outlive the cache)
};

// Python-number arithmetic replayed on real numbers each time a segment runs. Numbers carried
// across a graph break (a loop counter, an `.item()` total) are not specialised: slot i is an
// input read from `source`, or an operation on earlier slots and constants, evaluated with
// CPython's own number protocol so the results are exactly Python's.
struct ScalarInstr {
  // kTensorSize: the size `a` of the tensor at `source` (a symbolic size).
  // kSequence: the list or tuple at `source` itself, read only by kCall of len/sum/min/max (a
  // caller's list whose length is a run-time value).
  enum class Kind : uint8_t { kInput, kTensorSize, kBinary, kCompare, kNegate, kCall, kSequence };
  Kind kind = Kind::kInput;
  guards::SourceRef source;  // kInput, kTensorSize, kSequence
  std::string op;            // kBinary: "+", "-", "*", "/", "//", "%", "**"; kCompare: "<", ...
  int a = -1, b = -1;        // operand slots; -1: the operand is const_a / const_b
  py::PyRef const_a, const_b;
  // kCall: a pure builtin (round, abs, min, max, float, int ...) applied to `args`, each a slot
  // (>= 0) or, when -1, the constant at the same position in `arg_consts`.
  py::PyRef function;
  std::vector<int> arg_slots;
  std::vector<py::PyRef> arg_consts;
};

// How a segment ends. A return, or a graph break at `break_offset` after which the frame state
// (TraceResult::locals_state/stack_state) is rebuilt and then:
struct ReturnExit {
  OutputSpec output;          // the return value
  int return_offset = -1;     // the RETURN instruction the frame resumes at
  bool pushes_value = true;   // RETURN_VALUE (result on the stack) vs RETURN_CONST
};
// ... CPython runs the rest of the frame from `resume_offset`.
struct HandBackExit {
  int resume_offset = -1;
};
// ... a conditional jump on a tensor: decided on the real value; the next segment starts at
// `jump_target` or `next_offset`.
struct EscapeJumpExit {
  int break_offset = -1;
  int jump_target = -1;
  int next_offset = -1;
  bool jump_if_true = false;
};
// ... a call the tracer cannot follow: made on real values; the next segment starts after it.
struct EscapeCallExit {
  int break_offset = -1;
  int next_offset = -1;
  int argc = 0;
  py::PyRef kwnames;  // keyword names of the call, or null
};
// ... FOR_ITER on a run-time iterator: advanced for real; the next segment starts in the loop
// body (`next_offset`) or after the loop (`loop_exit_offset`).
struct EscapeForIterExit {
  int break_offset = -1;
  int next_offset = -1;
  int loop_exit_offset = -1;
};
using SegmentExit = std::variant<ReturnExit, HandBackExit, EscapeJumpExit, EscapeCallExit, EscapeForIterExit>;

struct BreakInfo {
  std::string reason;
  std::string file;
  int line = -1;
  int offset = -1;
  std::string instruction;
  interpreter::BreakKind kind = interpreter::BreakKind::kUnsupported;
};

// An attribute store on an object of the caller, made by the traced code: replayed on the real
// object (in program order) after the segment's graph ran, before the segment exits.
struct AttrStore {
  guards::SourceRef object;
  py::PyRef name;
  OutputSpec value;
  bool dict_item = false;  // object is a dict (the globals): object[name] = value, a `global` store
  guards::SourceRef key_source;  // dict_item with a key that is the object found there (a tensor)
};

// A list or dict of the caller that the traced code changed (append, d[k] = v, pop ...): after
// the segment's graph ran, its contents become `contents` (a kList or kDict spec), as CPython's
// in-place changes would have left them. The trace guards that no other name of the caller
// reaches the same object (LeafGuard::NotSame), so a later call cannot alias it unseen.
struct ContainerStore {
  guards::SourceRef container;
  OutputSpec contents;
  // The container keeps its items and `contents` are appended (a list whose length the trace
  // never knew); otherwise `contents` replace them.
  bool append = false;
};

struct TraceResult {
  SegmentExit exit;
  std::vector<AttrStore> attr_stores;
  std::vector<ContainerStore> container_stores;
  // Set when the traced code changed grad mode (`with dt.no_grad():`): the mode to leave behind.
  std::optional<bool> grad_mode_at_exit;
  // Set when the traced code entered or left an autocast region: the states to leave behind.
  std::optional<AutocastStates> autocast_at_exit;
  std::optional<BreakInfo> break_info;  // set unless the segment returns
  // Frame state at a break: one spec per local slot and per stack slot.
  std::vector<OutputSpec> locals_state;
  std::vector<OutputSpec> stack_state;
  int num_memo = 0;
  std::vector<ScalarInstr> scalars;
  std::shared_ptr<Graph> graph;
  // Set when inputs require grad and some output depends on them: `graph` is then its forward
  // graph (the traced outputs, then the values saved for backward), run without recording, and
  // the differentiable outputs get one backward node running `joint->backward`.
  std::shared_ptr<const JointGraph> joint;
  // Set when the trace ran backward() itself: graph outputs (by index) that autograd followed
  // up to it; they leave with a grad_fn whose graph is freed, as eagerly after backward().
  std::vector<int> freed_graph_outputs;
  std::vector<guards::SourceRef> input_sources;  // where each graph input is read from
  guards::GuardSet guards;
  bool touched_tensors = false;
};

struct TraceFailure {
  std::string reason;
  std::string file;
  int line = -1;
  int offset = -1;
  std::string instruction;
  interpreter::BreakKind kind = interpreter::BreakKind::kUnsupported;
  // Set: the code needs a value the user marked dynamic (dt.mark_dynamic); raised as a
  // RuntimeError instead of running the frame uncompiled.
  std::string constraint_error;
  guards::GuardSet guards;  // what the trace had established when it stopped
  bool touched_tensors = false;
};

struct FrameToTrace {
  PyCodeObject* code;
  PyObject* function;
  guards::FrameInputs inputs;  // at entry: the frame; mid-function: the segment's start state
  int start_offset = 0;
  bool fullgraph = false;      // fail at the first break instead of ending a segment there
  // Sources (by text, "L['lr']") of int and float values that changed between calls: read as
  // run-time numbers instead of specialised (automatic dynamic). May be null.
  const absl::flat_hash_set<std::string>* dynamic_numbers = nullptr;
  // dt.jit(dynamic=True): every size Python reads, and every int or float argument, is a
  // run-time value from the first trace on (except sizes 0 and 1, specialised as PyTorch does).
  bool all_dynamic = false;
  // dynamic=None (automatic): a float argument is a run-time value from the first trace on (a
  // learning rate, a temperature), as in recent torch.compile; a float the code needs as a
  // constant (a shape, a range) is specialised where it is needed, with a guard on its value.
  bool float_arguments_dynamic = false;
};

std::variant<TraceResult, TraceFailure> TraceFrame(const FrameToTrace& frame);

// The key of a dynamic length in FrameToTrace::dynamic_numbers: "len(L['history'])".
std::string DynamicLengthKey(const guards::Source& source);
// The key of a dynamic size in FrameToTrace::dynamic_numbers: "L['x'].size(0)".
std::string DynamicSizeKey(const guards::Source& tensor, int64_t dim);

// The number program's operators, with CPython's own number protocol (so results are exactly
// Python's): "+", "-", "*", "/", "//", "%", "**", "<<", ">>", "&", "|", "^" and the
// comparisons "<", "<=", "==", "!=", ">", ">=". A new reference, or null with a Python error set
// when Python raises; null without an error for an operator not in the list.
PyObject* ApplyNumberOp(absl::string_view op, PyObject* x, PyObject* y);
bool IsNumberOp(absl::string_view op);

}  // namespace dt::interpreter::trace

#endif  // DYNTRACE_INTERPRETER_TRACER_H_
