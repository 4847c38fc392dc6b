// interpreter/tracer_internal.h: the tracer's state and its parts, shared by the files that
// implement it (not part of the tracer's interface: that is tracer.h).
//
// The tracer is split along its seams:
//   trace_values.cc      values read from the frame (Wrap), Python numbers, conversions to Python
//   trace_operators.cc   graph emission, shapes, truth, operators, subscripts, iteration
//   trace_attributes.cc  attribute reads
//   trace_calls.cc       calls: ops, tensor and container methods, inlining user functions
//   trace_builtins.cc    calls of builtins
//   trace_handlers_*.cc  one handler per instruction, by family (locals, operators, containers,
//                        control flow, calls); trace_loop.cc runs them
//   trace_reconstruct.cc rebuilding Python values and frame state from the trace's values
//   tracer.cc            a trace from start to result, and graph breaks
#ifndef DYNTRACE_INTERPRETER_TRACER_INTERNAL_H_
#define DYNTRACE_INTERPRETER_TRACER_INTERNAL_H_

#include <Python.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/autocast.h"
#include "graph/graph.h"
#include "graph/op_registry.h"
#include "guards/guard_set.h"
#include "interpreter/break_reason.h"
#include "interpreter/bytecode.h"
#include "interpreter/py_ref.h"
#include "interpreter/py_types.h"
#include "interpreter/symbolic.h"
#include "interpreter/tracer.h"

namespace dt::interpreter::trace {

using guards::LeafGuard;
using guards::Provenance;
using guards::SourceRef;

bool IsDyntraceFunction(PyObject* fn, std::string_view name);
using interpreter::DataDependent;
using interpreter::Decode;
using interpreter::DecodedCode;
using interpreter::Instr;
using interpreter::LimitReached;
using interpreter::Op;
using interpreter::Raises;
using interpreter::Unsupported;
using py::PyRef;

// Python values the trace may fold: immutable, with no user code in their operations.
bool IsPureConstType(PyObject* obj);
std::string ShortRepr(PyObject* obj);
std::string Describe(const Sym& s);
bool IsNumber(const Sym& s);
// A str the trace needs as text (a name, a keyword, an operator). One UTF-8 cannot encode (a lone
// surrogate) stops the trace, so CPython runs the instruction and raises what it would raise.
absl::StatusOr<std::string> Text(PyObject* obj);
// A global or attribute name, looked up through C strings (PyDict_GetItemString): one holding a
// NUL (only a code.replace()d co_names can) would find another name, so it stops the trace.
absl::StatusOr<std::string> NameText(PyObject* obj);
// A key of a call's **kwargs: CPython raises TypeError for a non-str key when it makes the call.
absl::StatusOr<std::string> KeywordName(PyObject* key);

using Kwargs = std::vector<std::pair<std::string, Sym>>;

// `module.name` of an imported module (borrowed: the module keeps it); null when there is none.
PyObject* ModuleAttr(const char* module, const char* name);
PyObject* PartialType();  // functools.partial
bool IsObjectSetattr(PyObject* fn);  // object.__setattr__ (the wrapper descriptor)
// An exception class whose instances the trace can make and read: its metaclass is type and no
// Python class on its MRO defines how instances are made, printed, compared or read.
bool PlainExceptionClass(PyObject* cls);
// An exception object the traced code made (`ValueError(k)`): a constant that never leaves the
// trace, read only through str/repr/format/type/isinstance and `.args`.
bool IsTraceException(const Sym& s);
// The builtins that only read an exception the trace made (str, repr, ascii, format, type,
// isinstance, bool): called on it at trace time like on any constant.
bool ReadsExceptionOnly(PyObject* fn, PyObject* builtins);
// contextlib.contextmanager's wrapper (`helper`, defined in contextlib), whose one closure cell
// holds the generator function.
bool IsContextManagerHelper(PyObject* fn);
// The exact type of a value the trace knows it of (guarded, or made by the trace); null otherwise.
PyTypeObject* KnownTypeOf(const Sym& x);

struct TFrame {
  PyCodeObject* code;
  std::shared_ptr<const DecodedCode> decoded;
  std::vector<Sym> locals;
  // Root frame only: whether local i still holds the caller's argument (until stored/deleted).
  std::vector<bool> argument_live;
  std::vector<Sym> stack;
  PyObject* globals;           // borrowed
  SourceRef globals_source;    // null: the root frame's globals (G[...])
  PyObject* function = nullptr;  // borrowed; the function object when known
  SourceRef function_source;
  Sym function_sym;            // kFunction made by MAKE_FUNCTION (closure from Syms)
  PyRef kw_names;
  int kw_names_offset = -1;
  int depth = 0;
  bool is_root = false;
  const TFrame* caller = nullptr;  // the frame that inlined this one (null for the root)
  int pc = 0;                  // index into decoded->instrs
  // Set by a RETURN instruction's handler.
  bool returned = false;
  Sym result;
  // A generator's body run straight through for a consumer in the trace: what it yields.
  bool generator = false;
  std::vector<Sym> yields;
  // A contextlib.contextmanager generator, run in step with its with block (trace_contextmanager.cc):
  // it stops at each YIELD_VALUE (`suspended`), and RunFrame continues it from there (`resume`).
  bool suspend_at_yield = false;
  bool suspended = false;
  bool resume = false;

  Sym Pop() {
    Sym s = std::move(stack.back());
    stack.pop_back();
    return s;
  }
  // Stops the trace (never reads below the stack) when fewer than n values are on it.
  absl::Status Need(size_t n, const Instr& in) const;
  absl::Status JumpTo(int offset, int skip = 0);
};

class Tracer {
 public:
  explicit Tracer(const FrameToTrace& frame) : frame_(frame), graph_(std::make_shared<Graph>()) {}

  std::variant<TraceResult, TraceFailure> Run();

 private:
  // ---- state ----
  const FrameToTrace& frame_;
  std::shared_ptr<Graph> graph_;
  guards::GuardSet guards_;
  bool touched_tensors_ = false;
  int instructions_run_ = 0;
  TFrame* current_ = nullptr;
  absl::flat_hash_map<std::string, Sym> inputs_by_source_;
  // Objects of the caller, by identity: one Sym per object, so an attribute stored through one
  // name is seen through another; `sources` counts the ways the trace reached it.
  struct SeenObject {
    Sym sym;
    int sources = 0;
  };
  absl::flat_hash_map<PyObject*, SeenObject> objects_;
  std::vector<Sym> stored_objects_;  // objects with attribute stores, in first-store order
  // Lists, dicts and plain objects of the caller as Wrap read them (one Sym per way the trace
  // reached one), and the lists and dicts the trace changed, with the journal's size at their
  // first change (a break that rolls that change back forgets them).
  struct CallerValue {
    PyObject* object;  // borrowed: the frame keeps it alive while the trace runs
    Sym sym;
  };
  std::vector<CallerValue> caller_values_;
  // The caller's lists and dicts by source ("G['LOG']"): read again through the same source, a
  // container is the same Sym, changes included.
  absl::flat_hash_map<std::string, Sym> containers_by_source_;
  struct ChangedContainer {
    Sym sym;
    size_t journal_at;
  };
  std::vector<ChangedContainer> changed_containers_;
  // Tensors used as dict keys, each with the placeholder object that stands for it among a dict's
  // keys (a tensor hashes and compares by identity as a key, as a plain object does). One entry
  // per tensor object: DictKey tells them apart by KnownIdentity (guarded for the caller's).
  std::vector<std::pair<Sym, PyRef>> tensor_keys_;
  // Classes `class` statements made at trace time (BuildClass). CPython makes a new class on
  // every call, so neither such a class nor an instance of it may leave the trace.
  std::vector<PyRef> trace_classes_;
  // The device each tensor value lives on when the graph runs. Tracing runs every op on meta
  // tensors, so a meta tensor cannot say; inputs' devices are guarded, and an op's results live
  // where its operands (or a creation op's device argument) say.
  absl::flat_hash_map<ValueId, Device> value_device_;
  // Graph inputs autograd follows (they require grad and grad mode is on): the graph is split
  // into forward and backward graphs when the trace ends (SplitForAutograd).
  absl::flat_hash_set<ValueId> grad_inputs_;
  // Values autograd follows: grad_inputs_, and results of ops on them while grad mode is on
  // (what backward() inside the trace differentiates, trace_autograd.cc).
  absl::flat_hash_set<ValueId> grad_values_;
  // Graph inputs that require grad but entered while the traced grad mode was off (a parameter
  // first read inside `with no_grad():` or a @no_grad function): autograd does not follow them,
  // so an op reading one with the mode on again is a break (NoteGradResults).
  absl::flat_hash_set<ValueId> untracked_grad_inputs_;
  // The real tensor behind each tensor input (.grad reads the real one's).
  absl::flat_hash_map<ValueId, PyRef> input_objects_;
  // Set once backward() was traced: the graph's node count before its nodes (a rollback to
  // before that point forgets it). The graph is then not split at the end.
  std::optional<size_t> backward_at_node_;
  ValueId backward_first_value_ = 0;
  // Leaf inputs whose .grad the trace follows, one Sym per real tensor (GradSlot).
  absl::flat_hash_map<PyObject*, Sym> grad_slots_;
  std::vector<Sym> grad_slot_order_;  // values from here on were made by or after backward()
  std::vector<SourceRef> input_sources_;
  // Python wrappers handed to op binding, and the Syms they stand for.
  std::vector<PyRef> wrappers_;
  absl::flat_hash_map<PyObject*, Sym> sym_of_wrapper_;
  int return_offset_ = -1;
  bool return_pushes_value_ = true;
  // The root frame's state at the start of the instruction being traced: a break rolls back to it.
  struct RootSnapshot {
    bool valid = false;
    int pc = 0;
    std::vector<Sym> stack;
    std::vector<Sym> locals;
    std::vector<bool> argument_live;
    PyRef kw_names;
    int kw_names_offset = -1;
    size_t num_nodes = 0;
    size_t journal_size = 0;
    size_t num_guards = 0;
    std::optional<bool> grad_mode;
    bool grad_mode_changed = false;
    size_t handled_exceptions = 0;  // inside an except or finally block: a break cannot resume there
    std::optional<AutocastStates> autocast;
    bool autocast_changed = false;
  };
  // The grad mode as the traced code has left it: unset until the trace reads or sets it (then
  // the mode at entry is guarded); `changed` when the segment must set it on the way out.
  std::optional<bool> grad_mode_;
  bool grad_mode_changed_ = false;
  // The autocast states the trace runs under: unset until an op with an autocast policy is
  // called or the traced code reads or sets them (then the states at entry are guarded;
  // trace_autocast.cc); `changed` when the segment must set them on the way out.
  std::optional<AutocastStates> autocast_;
  bool autocast_changed_ = false;
  RootSnapshot snapshot_;
  // Exceptions the traced code raises and may catch itself (trace_exceptions.cc): the one on its
  // way up the traced frames (`raising_`, with the serial its Raises status carries), and the
  // ones being handled (PUSH_EXC_INFO .. POP_EXCEPT), innermost last.
  Sym raising_;
  uint64_t raising_serial_ = 0;
  std::vector<Sym> handled_exceptions_;
  // The root state where the exception now being handled was raised (an instruction of the root
  // frame, or the call it is inside): a graph break inside the handler breaks there instead, and
  // CPython raises it for real and runs the handler itself.
  std::optional<RootSnapshot> before_handling_;
  // Every exception object the trace made, to its Sym (its __cause__ and __context__ are read
  // back as the Syms they are).
  absl::flat_hash_map<PyObject*, Sym> trace_exceptions_;
  // Containers, iterators and cells are mutated in place; a break rolls them back to their state
  // at the start of the breaking instruction (an inlined call may have changed them).
  struct Undo {
    Sym sym;
    std::vector<Sym> items;
    std::vector<PyRef> keys;
    size_t position, consumed;  // iterators
    SymKind kind;               // a kRunSeq materialised into a kList (trace_run_sequence.cc)
    ValueId value;
    Tensor meta;  // a tensor rebound by a functionalised in-place op
  };
  std::vector<Undo> journal_;
  // Runtime Python numbers (see ScalarInstr): the program, each slot's trace-time value, and the
  // input slots each slot depends on (specialising a slot guards those inputs' values).
  std::vector<ScalarInstr> scalar_program_;
  std::vector<PyRef> slot_samples_;
  std::vector<std::vector<int>> slot_inputs_;
  absl::StatusOr<Sym> NumberSlot(ScalarInstr instr, PyRef sample, std::vector<int> deps);
  absl::StatusOr<Sym> Specialize(const Sym& number);
  absl::StatusOr<Sym> NumberOp(const std::string& op, bool compare, const Sym& a, const Sym& b);
  void Mutating(const Sym& sym) {
    journal_.push_back(Undo{sym, sym->items, sym->keys, sym->position, sym->consumed, sym->kind, sym->value, sym->meta});
  }
  // Before changing a list or dict: journals it and, for one of the caller's, records the change
  // to replay after the graph (trace_mutations.cc). Stops the trace when the caller's object was
  // reached two ways (one Sym would go stale).
  absl::Status MutatingContainer(const Sym& container);
  // Wrap's note of a list, dict or plain object of the caller it read.
  absl::Status NoteCallerValue(PyObject* obj, const Sym& sym);
  PyObject* CallerObject(const Sym& sym) const;  // borrowed; null when not the caller's
  bool PrivateToGeneratorRun(const Sym& sym, uint64_t first_serial, const std::vector<Sym>& out) const;
  absl::StatusOr<std::vector<ContainerStore>> ContainerStores(std::vector<ValueId>& outputs);
  // Guards that each changed container, and each object with attribute stores, is reached by no
  // other source the trace read (a later call passing the other guards could alias them).
  void GuardChangedUnaliased();
  void ForgetRolledBackChanges();
  // Before iterating a dict: for one of the caller's, a guard on its keys' order (the trace's
  // order is the order the dict had when the trace read it).
  absl::Status GuardKeyOrder(const Sym& dict);
  // Built once per distinct Sym when the frame state is rebuilt at a break. Keyed by the Sym
  // itself, which keeps it alive: a temporary (a shape materialised into a tuple) freed while
  // keyed by its address let the next temporary at that address hit its entry.
  absl::flat_hash_map<Sym, int> memo_;
  int num_memo_ = 0;
  // Where the trace stopped.
  std::string fail_file_;
  int fail_line_ = -1, fail_offset_ = -1;
  std::string fail_instruction_;

  static constexpr int kMaxDepth = 24;  // fib(15) recurses 16 deep
  // Containers read from the frame are unpacked item by item (each item guarded) only while small
  // and shallow; larger or deeper ones (a 10,000-item list, a list that contains itself) are
  // opaque objects whose use breaks the graph, so guards stay cheap and Wrap always ends.
  static constexpr Py_ssize_t kMaxUnpackedItems = 256;
  static constexpr int kMaxUnpackedDepth = 4;
  int wrap_depth_ = 0;
  // Counts one level of values Wrap unpacks (containers, partials, bound methods), so a value
  // that contains itself (a partial of itself) ends as an opaque break, not a recursion.
  struct WrapDepthScope {
    int& depth;
    explicit WrapDepthScope(int& d) : depth(d) { ++depth; }
    ~WrapDepthScope() { --depth; }
  };
  static constexpr int kMaxInstructions = 50000;

  // ---- helpers ----
  const Instr& Current() const { return current_->decoded->instrs[current_->pc]; }
  Provenance Here() const {
    if (current_ == nullptr) return {};
    const Instr& in = Current();
    return Provenance{in.line, in.offset,
                      in.argrepr.empty() ? in.opname : absl::StrCat(in.opname, " ", in.argrepr)};
  }
  SourceLocation HereLocation() const {
    Provenance p = Here();
    return SourceLocation{p.line, p.offset, p.instruction};
  }

  absl::StatusOr<Sym> Wrap(PyObject* obj, SourceRef source);
  absl::StatusOr<Sym> WrapSegmentState(PyObject* obj, const SourceRef& source);
  absl::StatusOr<Sym> WrapIteratorOrCell(PyObject* obj, const SourceRef& source);
  absl::StatusOr<Sym> WrapContainer(PyObject* obj, const SourceRef& source);
  // A caller's list or tuple whose length is a run-time value (trace_run_sequence.cc).
  bool LengthIsDynamic(PyObject* obj, const SourceRef& source) const;
  absl::StatusOr<Sym> WrapRunSequence(PyObject* obj, const SourceRef& source);
  absl::Status Materialise(const Sym& s);
  absl::Status MaterialiseAll(const std::vector<Sym>& values);
  absl::Status MaterialiseOperands(TFrame& f, const Instr& in);
  int SequenceSlot(const Sym& s);
  absl::StatusOr<Sym> RunSequenceLength(const Sym& s);
  absl::StatusOr<Sym> RunSequenceFold(PyObject* fn, const Sym& s);
  absl::StatusOr<Sym> CallOnRunSequence(PyObject* fn, const std::vector<Sym>& args, const Kwargs& kwargs);
  absl::Status AppendToRunSequence(const Sym& s, const Sym& value);
  absl::Status MaterialiseCallArguments(const Sym& callable, const std::vector<Sym>& args, const Kwargs& kwargs);
  void SpecializeSequence(int slot);
  // kSequence slots whose items a fold (sum/min/max) read: specialising them guards the items.
  absl::flat_hash_set<int> sequence_values_read_;
  absl::StatusOr<Sym> WrapBoundMethod(PyObject* method, const SourceRef& source);
  absl::StatusOr<Sym> TensorInput(PyObject* obj, SourceRef source);
  absl::StatusOr<Sym> LoadGlobal(TFrame& f, const std::string& name);
  absl::StatusOr<Sym> LoadLocal(TFrame& f, int index);
  // When the trace relies on a local of the segment's start state being unbound (a cell made
  // empty, 3.12's LOAD_FAST_AND_CLEAR pushing NULL), a guard says it still is.
  void GuardStillUnbound(TFrame& f, int index);
  absl::StatusOr<Sym> GetAttr(const Sym& obj, const std::string& name);
  absl::StatusOr<Sym> TensorAttr(const Sym& obj, const std::string& name);
  absl::StatusOr<Sym> ContainerAttr(const Sym& obj, const std::string& name);
  absl::StatusOr<Sym> ObjectAttr(const Sym& obj, const std::string& name);
  absl::StatusOr<Sym> ClassAttr(const Sym& obj, PyObject* own, const std::string& name);
  absl::StatusOr<Sym> ConstAttr(const Sym& obj, const std::string& name);
  // `__name__` / `__qualname__` of a class or function (guarded); null for other attributes.
  absl::StatusOr<Sym> NameAttr(const Sym& obj, const std::string& name);
  absl::StatusOr<Sym> PropertyFunction(const Sym& obj, PyObject* descriptor, const std::string& name, bool setter);
  absl::StatusOr<Sym> CallSym(const Sym& callable, std::vector<Sym> args,
                              Kwargs kwargs);
  absl::StatusOr<Sym> CallTensorMethod(const Sym& self, const std::string& name,
                                       const std::vector<Sym>& args,
                                       const Kwargs& kwargs);
  absl::StatusOr<Sym> CallContainerMethod(const Sym& self, const std::string& name, const std::vector<Sym>& args,
                                          const Kwargs& kwargs);
  absl::StatusOr<Sym> CallDictMethod(const Sym& self, const std::string& name, const std::vector<Sym>& args,
                                     const Kwargs& kwargs);
  absl::StatusOr<Sym> CallListMethod(const Sym& self, const std::string& name, const std::vector<Sym>& args);
  absl::Status UpdateDict(SymValue& dict, const Sym& source);
  absl::StatusOr<Sym> CallBuiltin(PyObject* fn, const std::vector<Sym>& args, const Kwargs& kwargs);
  absl::StatusOr<Sym> CallTensorConstructor(PyObject* fn, const std::vector<Sym>& args, const Kwargs& kwargs);
  absl::StatusOr<Sym> CallFollowedBuiltin(PyObject* fn, const std::vector<Sym>& args, const Kwargs& kwargs);
  absl::StatusOr<Sym> BuiltinLen(const Sym& a);
  absl::StatusOr<Sym> BuiltinId(const Sym& a);
  absl::StatusOr<Sym> BuiltinIsinstance(const Sym& value, const Sym& classes);
  absl::StatusOr<Sym> BuiltinZip(const std::vector<Sym>& args, bool enumerate, bool strict = false);
  absl::StatusOr<Sym> BuiltinGetattr(const std::vector<Sym>& args, bool has);
  absl::StatusOr<Sym> SortedByFirstItems(PyObject* sorted_fn, const Sym& iterable);
  absl::StatusOr<Sym> ObjectText(const Sym& obj, bool repr);  // repr()/str() of a plain object
  absl::StatusOr<Sym> BuiltinTypeFacts(PyObject* fn, const std::vector<Sym>& args);
  // trace_functional.cc: map, filter, sorted(key=), functools.reduce, itertools.
  absl::StatusOr<std::vector<Sym>> Consume(const Sym& iterable);  // an iterator's items are used up
  absl::StatusOr<Sym> CallWithoutEffects(const Sym& fn, std::vector<Sym> args);
  absl::StatusOr<Sym> BuiltinMap(const std::vector<Sym>& args);
  absl::StatusOr<Sym> BuiltinFilter(const std::vector<Sym>& args);
  absl::StatusOr<Sym> SortedWithKey(const std::vector<Sym>& args, const Kwargs& kwargs);
  absl::StatusOr<Sym> FunctoolsReduce(const std::vector<Sym>& args);
  absl::StatusOr<Sym> ListSort(const Sym& list, const std::vector<Sym>& args, const Kwargs& kwargs);
  absl::StatusOr<Sym> ListRemove(const Sym& list, const std::vector<Sym>& args);
  // Null: `fn` is none of those it follows.
  absl::StatusOr<Sym> CallItertools(PyObject* fn, const std::vector<Sym>& args, const Kwargs& kwargs);
  absl::StatusOr<Sym> CallOperatorFunction(PyObject* fn, const std::vector<Sym>& args, const Kwargs& kwargs);
  absl::StatusOr<Sym> CallPureOnNumbers(PyObject* fn, const std::vector<Sym>& args);
  absl::StatusOr<Sym> FoldPureCall(PyObject* fn, const std::vector<Sym>& args, const Kwargs& kwargs);
  void NoteOrigins(const Sym& arg, PyObject* value, absl::flat_hash_map<PyObject*, Sym>& origin);
  absl::StatusOr<PyRef> ConstKeywords(const Kwargs& kwargs);
  absl::StatusOr<Sym> CallOpFunction(PyObject* fn, const Sym& bound_self, const std::vector<Sym>& args,
                                     const Kwargs& kwargs);
  absl::StatusOr<Sym> Inline(const Sym& function, std::vector<Sym> args, Kwargs kwargs);
  absl::Status PrepareFrame(const Sym& function, std::vector<Sym> args, Kwargs kwargs, TFrame& f);
  absl::StatusOr<Sym> ConstructObject(PyTypeObject* cls, const SourceRef& cls_source, std::vector<Sym> args,
                                      Kwargs kwargs);
  absl::StatusOr<Sym> ConstructNamedTuple(PyTypeObject* cls, const SourceRef& cls_source, const std::vector<Sym>& args,
                                          const Kwargs& kwargs);
  // A constant class attribute read through an instance (`self.scale` where the class says
  // `scale = 2`): guarded on the class, and on the instance not shadowing it.
  absl::StatusOr<Sym> ClassConstantOf(const Sym& obj, PyObject* value, const std::string& name);
  absl::StatusOr<Sym> ClassMethodOf(const Sym& obj, PyObject* function, const std::string& name);
  Sym TypeOfObject(const Sym& obj);
  absl::StatusOr<Sym> RunGenerator(TFrame& f);
  absl::Status BindArguments(TFrame& f, std::vector<Sym> args, Kwargs kwargs);
  absl::Status BindDefaults(TFrame& f, const Sym& function, PyObject* defaults, PyObject* kwdefaults);
  absl::StatusOr<Sym> RunFrame(TFrame& f);
  absl::Status Step(TFrame& f, const Instr& in);
  void CheckStackEffect(const TFrame& f, const Instr& in, size_t depth_before, int pc_before) const;
  // ---- instruction handlers (trace_handlers_*.cc), one per instruction or group ----
  // locals, globals, cells, attributes
  absl::Status DoLoadFast(TFrame& f, const Instr& in);
  absl::Status DoLoadFastAndClear(TFrame& f, const Instr& in);
  absl::Status DoStoreFast(TFrame& f, const Instr& in);
  absl::Status DoDeleteFast(TFrame& f, const Instr& in);
  absl::Status DoLoadGlobal(TFrame& f, const Instr& in);
  absl::Status DoMakeCell(TFrame& f, const Instr& in);
  absl::Status DoCopyFreeVars(TFrame& f, const Instr& in);
  absl::Status DoLoadDeref(TFrame& f, const Instr& in);
  absl::Status DoStoreDeref(TFrame& f, const Instr& in);
  absl::Status DoLoadAttr(TFrame& f, const Instr& in);
  absl::Status DoStoreAttr(TFrame& f, const Instr& in);
  // `through_object_setattr`: object.__setattr__(target, name, value), which skips the class's
  // own __setattr__ (a frozen dataclass's __init__).
  absl::Status StoreAttr(const Sym& target, PyObject* name_obj, const Sym& value, bool through_object_setattr = false);
  absl::StatusOr<Sym> ObjectSetattr(const std::vector<Sym>& args, const Kwargs& kwargs);
  absl::StatusOr<Sym> LazyZip(const std::vector<Sym>& args, bool enumerate, bool strict);
  absl::StatusOr<Sym> NextZipItem(const Sym& it);
  // trace_exceptions.cc
  absl::StatusOr<Sym> MakeException(PyObject* cls, const std::vector<Sym>& args, const Kwargs& kwargs);
  absl::Status Throw(const Sym& exception);
  // The error CPython raises at this instruction, which a handler in the trace may catch: the
  // Python error an operation on constants just raised (PythonError), or `cls(arg)` the trace
  // found itself (a missing dict key, an index out of range). Where it cannot be made, a plain
  // Raises(`why`): CPython runs the instruction.
  absl::Status PythonError(absl::string_view why);
  absl::Status RaiseNew(PyObject* cls, PyObject* arg, absl::string_view why);
  absl::Status ThrowNew(PyObject* cls, PyObject* args, absl::string_view why);
  // The exception `status` is carrying up the traced frames, taken off its way (null: none).
  Sym TakeRaising(const absl::Status& status);
  absl::StatusOr<bool> CatchInFrame(TFrame& f, const Instr& in, const absl::Status& status);
  absl::Status DoRaiseVarargs(TFrame& f, const Instr& in);
  absl::Status DoReraise(TFrame& f, const Instr& in);
  absl::Status DoPushExcInfo(TFrame& f, const Instr& in);
  absl::Status DoCheckExcMatch(TFrame& f, const Instr& in);
  absl::Status DoPopExcept(TFrame& f, const Instr& in);
  // Class attribute stores (`Counter.count = 0`, trace_attributes.cc): one Sym per class object
  // (obj the class, source where it was first stored through, keys/items the names and values
  // stored), replayed after the graph like an object's.
  absl::flat_hash_map<PyObject*, Sym> class_stores_;
  absl::Status StoreClassAttr(const Sym& cls, PyObject* name_obj, const Sym& value);
  // The value the trace stored for `name` on `type` or a class of its MRO, where the lookup finds
  // it before any class's own attribute; null when the lookup finds none of the trace's stores.
  // `reader` is the source the class (or the instance's type) was read through: a guard says it
  // is still the class the store went to.
  absl::StatusOr<Sym> PendingClassAttr(PyTypeObject* type, const std::string& name, const SourceRef& reader);
  absl::StatusOr<std::vector<AttrStore>> AttrStores(std::vector<ValueId>& outputs);
  // operators
  absl::Status DoBinaryOp(TFrame& f, const Instr& in);
  absl::Status DoUnary(TFrame& f, const Instr& in);
  absl::Status DoUnaryNot(TFrame& f, const Instr& in);
  absl::Status DoCallIntrinsic1(TFrame& f, const Instr& in);
  absl::Status DoCompareOp(TFrame& f, const Instr& in);
  absl::Status DoIsOp(TFrame& f, const Instr& in);
  absl::StatusOr<std::optional<bool>> KnownIdentity(const Sym& a, const Sym& b);
  absl::Status DoContainsOp(TFrame& f, const Instr& in);
  // The key a dict holds for `s`: its constant, or for a tensor its placeholder (tensor_keys_).
  absl::StatusOr<PyRef> DictKey(const Sym& s);
  // What a dict's key reads back as: the tensor a placeholder stands for, or the constant.
  Sym KeySym(const PyRef& key);
  bool IsTensorKey(PyObject* key) const;
  absl::StatusOr<bool> Contains(const Sym& container, const Sym& item);
  absl::Status DoFormatValue(TFrame& f, const Instr& in);
  absl::StatusOr<Sym> Format(Sym value, int conversion, const Sym& spec);
  // trace_str_format.cc: `"{0.name}:{w:>{n}}".format(...)` field by field.
  absl::StatusOr<Sym> StrFormat(PyObject* format, const std::vector<Sym>& args, const Kwargs& kwargs, int depth = 0);
  absl::StatusOr<Sym> FormatField(PyObject* field_name, const std::vector<Sym>& args, const Kwargs& kwargs,
                                  size_t& next_auto);
  absl::Status DoBuildString(TFrame& f, const Instr& in);
  // containers
  absl::Status DoBuildSequence(TFrame& f, const Instr& in);
  absl::Status DoBuildMap(TFrame& f, const Instr& in);
  absl::Status DoBuildConstKeyMap(TFrame& f, const Instr& in);
  absl::Status DoListAppendOrExtend(TFrame& f, const Instr& in);
  absl::Status DoDictUpdate(TFrame& f, const Instr& in);
  absl::Status DoMapAdd(TFrame& f, const Instr& in);
  absl::Status DoListToTuple(TFrame& f, const Instr& in);
  absl::Status DoBuildSlice(TFrame& f, const Instr& in);
  absl::Status DoBinarySubscr(TFrame& f, const Instr& in);
  absl::Status DoBinarySlice(TFrame& f, const Instr& in);
  absl::Status DoStoreSubscr(TFrame& f, const Instr& in);
  absl::Status StoreIntoTensor(const Sym& tensor, const Sym& index, const Sym& value);
  absl::Status DoDeleteSubscr(TFrame& f, const Instr& in);
  // trace_sequence_edits.cc
  absl::Status AssignListSlice(const Sym& list, PyObject* slice, const Sym& value);
  absl::Status DeleteItem(const Sym& container, const Sym& index);
  absl::Status DoUnpackSequence(TFrame& f, const Instr& in);
  absl::Status DoUnpackEx(TFrame& f, const Instr& in);
  // control flow
  absl::Status DoPopJumpIf(TFrame& f, const Instr& in);
  absl::Status DoPopJumpIfNone(TFrame& f, const Instr& in);
  absl::Status DoJumpIfOrPop(TFrame& f, const Instr& in);
  absl::Status DoGetIter(TFrame& f, const Instr& in);
  // Whether a local (or cell) of `f` or a frame that inlined it, or a stack slot other than the
  // top of `f`'s, holds `s`: an iterator user code can still reach.
  static bool HeldByFrames(const Sym& s, const TFrame& f);
  absl::Status DoForIter(TFrame& f, const Instr& in);
  absl::StatusOr<Sym> NextLiveItem(const Sym& it);
  absl::StatusOr<Sym> IteratorOf(const Sym& iterable, bool loop_iterator);
  absl::StatusOr<Sym> NextItem(const Sym& it);
  absl::Status DoReturn(TFrame& f, const Instr& in);
  absl::Status DoYieldValue(TFrame& f, const Instr& in);
  absl::Status DoGetYieldFromIter(TFrame& f, const Instr& in);
  absl::Status DoSend(TFrame& f, const Instr& in);
  absl::Status DoEndSend(TFrame& f, const Instr& in);
  absl::Status DoLoadBuildClass(TFrame& f, const Instr& in);
  // __build_class__(body, name) of a class statement whose body only stores constants.
  absl::StatusOr<Sym> BuildClass(const std::vector<Sym>& args, const Kwargs& kwargs);
  bool IsTraceClass(PyObject* obj) const;
  // with blocks (trace_with.cc)
  absl::Status DoBeforeWith(TFrame& f, const Instr& in);
  // A context manager implemented in C that the tracer follows: what its __enter__ returns and
  // what its __exit__(None, None, None) does, in the trace.
  struct ContextManagerRule {
    absl::StatusOr<Sym> (Tracer::*enter)(const Sym& manager);
    absl::StatusOr<Sym> (Tracer::*exit)(const Sym& manager);
  };
  static const absl::flat_hash_map<PyTypeObject*, ContextManagerRule>& KnownContextManagers();
  absl::StatusOr<Sym> CallKnownExit(const Sym& method, const std::vector<Sym>& args);
  absl::StatusOr<SourceRef> ModuleGlobalsSource(PyObject* globals);
  // Grad mode (trace_grad_mode.cc): dt.is_grad_enabled() and dt._set_grad_enabled() in a trace.
  bool TracedGradMode();
  absl::StatusOr<Sym> CallGradModeBuiltin(PyObject* fn, const std::vector<Sym>& args, const Kwargs& kwargs);
  // Autocast (trace_autocast.cc): the casts a call of `op` from the traced code gets, emitted
  // ahead of it into `metas` and `args`.
  const AutocastStates& TracedAutocast();
  absl::Status AutocastArguments(const OpDef& op, std::vector<ArgValue>& metas, std::vector<GraphArg>& args);
  // dyntrace._autocast_state / _set_autocast (what dyntrace.autocast's __enter__ and __exit__
  // call) in a trace; null when `fn` is neither.
  absl::StatusOr<Sym> CallAutocastBuiltin(PyObject* fn, const std::vector<Sym>& args, const Kwargs& kwargs);
  // import and global stores (trace_imports.cc)
  absl::Status DoImportName(TFrame& f, const Instr& in);
  absl::Status DoImportFrom(TFrame& f, const Instr& in);
  absl::Status DoStoreGlobal(TFrame& f, const Instr& in);
  Sym StoredGlobal(const TFrame& f, const std::string& name) const;
  absl::Status AppendGlobalStores(std::vector<AttrStore>& stores, std::vector<ValueId>& outputs);
  // The root module's globals the trace stored (`global` names): keys are names, items values.
  Sym global_stores_ = MakeSym(SymKind::kDict);
  // match statements (trace_match.cc)
  absl::StatusOr<bool> HasTypeFlag(const Sym& s, unsigned long flag);
  absl::Status DoMatchKind(TFrame& f, const Instr& in);
  absl::Status DoGetLen(TFrame& f, const Instr& in);
  absl::Status DoMatchKeys(TFrame& f, const Instr& in);
  absl::StatusOr<std::vector<PyRef>> MatchClassNames(const Sym& cls, int count, PyObject* keywords, bool& self);
  absl::Status DoMatchClass(TFrame& f, const Instr& in);
  // contextlib.contextmanager (trace_contextmanager.cc)
  absl::StatusOr<Sym> MakeGeneratorManager(const Sym& helper, std::vector<Sym> args, Kwargs kwargs);
  absl::StatusOr<Sym> EnterGeneratorManager(const Sym& manager);
  absl::StatusOr<Sym> ExitGeneratorManager(const Sym& manager, const std::vector<Sym>& args);
  absl::StatusOr<Sym> RunToYield(TFrame& f);
  // The generator frames of entered contextmanager managers (SymValue::position indexes them).
  std::vector<std::unique_ptr<TFrame>> manager_frames_;
  // functools.partial (trace_partial.cc)
  absl::StatusOr<Sym> MakePartial(const std::vector<Sym>& args, const Kwargs& kwargs);
  absl::StatusOr<Sym> WrapPartial(PyObject* obj, const SourceRef& source);
  absl::StatusOr<Sym> CallPartial(const Sym& p, std::vector<Sym> args, Kwargs kwargs);
  absl::StatusOr<OutputSpec> PartialOutput(const Sym& p, OutputSpec out, std::vector<ValueId>& outputs);
  // sets (trace_sets.cc)
  absl::StatusOr<PyRef> SetValue(const Sym& set);  // a new set replayed from its history
  absl::StatusOr<PyRef> SetElement(const Sym& item);
  absl::StatusOr<PyRef> SetOperandValue(const Sym& s);
  absl::Status AppendSetStep(const Sym& set, PyRef step);
  absl::StatusOr<Sym> NewSet(const std::vector<Sym>& items);
  absl::Status UpdateSet(const Sym& set, const Sym& iterable);
  absl::StatusOr<Sym> BuiltinSet(const std::vector<Sym>& args, const Kwargs& kwargs);
  absl::StatusOr<Sym> BuiltinFrozenset(const std::vector<Sym>& args, const Kwargs& kwargs);
  absl::Status DoBuildSet(TFrame& f, const Instr& in);
  absl::Status DoSetAddOrUpdate(TFrame& f, const Instr& in);
  absl::StatusOr<std::vector<Sym>> SetItems(const Sym& set);
  absl::Status CheckSetUnchanged(const Sym& it);
  absl::StatusOr<bool> SetContains(const Sym& set, const Sym& item);
  absl::StatusOr<Sym> CallSetMethod(const Sym& self, const std::string& name, const std::vector<Sym>& args,
                                    const Kwargs& kwargs);
  absl::StatusOr<Sym> SetCompare(int op, const Sym& a, const Sym& b);
  absl::StatusOr<Sym> SetBinaryOp(const std::string& nb_name, const Sym& a, const Sym& b);
  absl::StatusOr<Sym> KeysViewBinaryOp(const std::string& nb_name, const Sym& a, const Sym& b);
  // super() (trace_super.cc)
  absl::StatusOr<Sym> MakeSuper(const std::vector<Sym>& args, const Kwargs& kwargs);
  absl::StatusOr<Sym> ZeroArgumentSuper();
  absl::StatusOr<Sym> SuperOf(const Sym& cls, const Sym& self);
  absl::StatusOr<Sym> SuperAttr(const Sym& super, const std::string& name);
  absl::Status DoLoadSuperAttr(TFrame& f, const Instr& in);
  absl::StatusOr<Sym> CallBoundSlot(const Sym& method, const std::vector<Sym>& args, const Kwargs& kwargs);
  // calls
  absl::Status DoKwNames(TFrame& f, const Instr& in);
  absl::Status DoCall(TFrame& f, const Instr& in);
  absl::Status DoCallFunctionEx(TFrame& f, const Instr& in);
  absl::StatusOr<Kwargs> KeywordArguments(const Sym& kw);
  absl::Status DoMakeFunction(TFrame& f, const Instr& in);

  absl::StatusOr<Device> DeviceOf(const Sym& tensor) const;
  absl::StatusOr<Device> ResultDevice(const OpDef& op, const std::vector<ArgValue>& args,
                                      const std::vector<GraphArg>& graph_args) const;
  absl::StatusOr<std::vector<Sym>> Emit(const OpDef* op, std::vector<ArgValue> meta_args,
                                        std::vector<GraphArg> graph_args, bool inplace);
  absl::StatusOr<Sym> EmitNamed(absl::string_view name, const std::vector<Sym>& operands,
                                bool inplace = false);
  absl::StatusOr<PyObject*> ToPython(const Sym& s);  // borrowed (kept alive by wrappers_)
  absl::StatusOr<PyRef> ConstValue(const Sym& s);    // a fully constant Sym as a Python object
  absl::StatusOr<bool> Truth(const Sym& s);
  bool FromDynamicArguments(const Sym& number) const;
  absl::StatusOr<bool> GuardRelation(const Sym& number);
  absl::StatusOr<Sym> BinaryOp(const std::string& nb_name, const Sym& a, const Sym& b);
  absl::StatusOr<Sym> Compare(const std::string& op, const Sym& a, const Sym& b);
  absl::StatusOr<Sym> Subscript(const Sym& container, const Sym& index);
  // The graph values and metas of a parsed subscript's index tensors.
  struct IndexTensors {
    std::vector<Tensor> metas;
    std::vector<ValueId> ids;
  };
  absl::StatusOr<IndexTensors> IndexTensorsOf(const py::ParsedIndex& parsed);
  absl::StatusOr<std::vector<Sym>> Iterate(const Sym& s);
  // A user object whose class defines __iter__ in Python (nn.ModuleList): that __iter__ runs in
  // the trace, and what it returns is iterated.
  absl::StatusOr<std::vector<Sym>> IterateObject(const Sym& s);
  absl::StatusOr<Sym> MaterializeShape(const Sym& shape);
  absl::Status GuardSizes(const Sym& tensor, std::optional<int64_t> dim);
  // Size `dim` of `tensor` as Python reads it: a constant (its exact value guarded), or a
  // run-time number when that size is dynamic (only `>= 2` guarded).
  absl::StatusOr<Sym> SizeOf(const Sym& tensor, int64_t dim);
  absl::StatusOr<Sym> NumelOf(const Sym& tensor);
  absl::StatusOr<GraphArg> NumberArgument(const Param& param, PyObject* from, const ArgValue& value,
                                          const absl::flat_hash_map<PyObject*, Sym>& traced);
  // Set while an op call's arguments are converted: ToPython gives a run-time int a TracedInt,
  // recorded here.
  absl::flat_hash_map<PyObject*, Sym>* traced_ints_ = nullptr;
  struct TracedIntScope {
    TracedIntScope(Tracer& t, absl::flat_hash_map<PyObject*, Sym>& ints) : tracer(t) { t.traced_ints_ = &ints; }
    ~TracedIntScope() { tracer.traced_ints_ = nullptr; }
    Tracer& tracer;
  };
  // A tensor index as Python objects (run-time ints as TracedInts in `traced`), and its encoded
  // form as a graph argument: a DimsRef where run-time ints are slice bounds or int indices.
  absl::StatusOr<PyObject*> IndexKey(const Sym& index, absl::flat_hash_map<PyObject*, Sym>& traced);
  absl::StatusOr<GraphArg> IndexArgument(PyObject* key, const Dims& encoded,
                                         const absl::flat_hash_map<PyObject*, Sym>& traced);
  bool IsDynamicSize(const Sym& tensor, int64_t dim) const;
  // Size `dim` of graph value `v` in terms of the inputs' sizes, following each producer's
  // shape rule (trace_shapes.cc); null where a rule is missing.
  absl::StatusOr<Sym> SymbolicSize(ValueId v, int64_t dim);
  absl::StatusOr<Sym> BroadcastSize(const std::vector<std::pair<ValueId, int64_t>>& operands, int64_t size);
  absl::StatusOr<Sym> PointwiseSize(const Node& node, ValueId v, int64_t dim);
  absl::StatusOr<Sym> ReducedSize(const Node& node, int64_t dim);
  absl::StatusOr<Sym> ReshapedSize(const Node& node, int64_t dim);
  absl::StatusOr<Sym> MatmulSize(const Node& node, ValueId v, int64_t dim);
  std::vector<Sym> slot_syms_;  // the kNumber of each number-program slot
  void NameScalars();
  // dt.mark_dynamic / mark_static bits of the frame's tensor at `source` (0 when none).
  std::pair<uint64_t, uint64_t> MarksOf(const guards::Source& source) const;
  std::string constraint_error_;
  absl::flat_hash_map<std::pair<const SymValue*, int64_t>, Sym> size_numbers_;
  std::vector<Sym> size_number_tensors_;
  absl::StatusOr<OutputSpec> ToOutput(const Sym& s, std::vector<ValueId>& outputs);
  absl::StatusOr<OutputSpec> ChildOutput(const Sym& parent, const Sym& c, std::vector<ValueId>& outputs);
  OutputSpec TensorOutput(const Sym& s, std::vector<ValueId>& outputs);
  absl::StatusOr<OutputSpec> CallableOutput(const Sym& s, OutputSpec out, std::vector<ValueId>& outputs);
  absl::StatusOr<OutputSpec> ExceptionOutput(const Sym& s, OutputSpec out);
  absl::StatusOr<OutputSpec> ReversedOutput(const Sym& s, OutputSpec out, std::vector<ValueId>& outputs);
  absl::StatusOr<Sym> ExceptionAttr(const Sym& exception, const std::string& name);
  absl::StatusOr<OutputSpec> IteratorOutput(const Sym& s, OutputSpec out, std::vector<ValueId>& outputs);
  absl::StatusOr<OutputSpec> ContainerOutput(const Sym& s, OutputSpec out, std::vector<ValueId>& outputs);
  // The trace as a failure: what was traced up to `status` is discarded.
  TraceFailure Fail(const absl::Status& status) const;
  // Splits the finished graph into forward and backward graphs when inputs require grad
  // (trace_autograd.cc); an error says why it cannot be (the frame then runs eagerly).
  absl::Status SplitForAutograd(TraceResult& r);
  // backward() and .grad inside a trace (trace_autograd.cc): a whole training step as one graph.
  // A composite op without a derivative formula, run where autograd follows an operand, is
  // recorded as its body (EmitBody), so that backward() in the same trace can differentiate it.
  absl::StatusOr<Sym> StaticMethodOf(const Sym& obj, PyObject* descriptor, const std::string& name);
  // A dict of the caller keyed by tensors (trace_keyed_dict.cc).
  bool IsKeyedCallerDict(const Sym& s) const;
  absl::StatusOr<PyObject*> KeyedDictKey(const Sym& key);
  absl::StatusOr<std::optional<Sym>> KeyedLookup(const Sym& dict, const Sym& key);
  absl::Status KeyedStore(const Sym& dict, const Sym& key, const Sym& value);
  absl::StatusOr<Sym> KeyedSubscript(const Sym& dict, const Sym& key);
  absl::StatusOr<Sym> CallKeyedDictMethod(const Sym& dict, const std::string& name, const std::vector<Sym>& args,
                                          const Kwargs& kwargs);
  absl::Status AppendKeyedStores(std::vector<AttrStore>& stores, std::vector<ValueId>& outputs);
  std::vector<Sym> keyed_dicts_;  // those with keyed_writes
  bool CanDetach(const Sym& tensor) const;
  absl::StatusOr<Sym> Detach(const Sym& tensor);
  // An in-place op on `target` (x.add_(y), x += y): written in place, or, when autograd follows
  // `target`, computed out of place with `target` rebound to the result (functionalised).
  absl::StatusOr<Sym> EmitInPlace(const OpDef* op, std::vector<ArgValue> metas, std::vector<GraphArg> graph_args,
                                  const Sym& target);
  bool Functionalizes(const Sym& target) const;
  bool AutogradSaves(ValueId v) const;
  bool ReadsGradValue(const std::vector<GraphArg>& args) const;
  bool ExpandsForAutograd(const OpDef& op, const std::vector<GraphArg>& args);
  absl::StatusOr<std::optional<std::vector<Sym>>> EmitBody(const OpDef& op, const OpArgs& args,
                                                           const std::vector<GraphArg>& graph_args, Device device);
  absl::Status NoteGradResults(const OpDef& op, const std::vector<GraphArg>& args, const std::vector<Sym>& results,
                               bool inplace);
  absl::StatusOr<Sym> GradSlot(const Sym& tensor, absl::string_view what);
  void GuardGradSlotsDistinct();
  absl::StatusOr<Sym> GradOf(const Sym& tensor);
  // Whether `gradient`, one of a backward's `gradients`, may become a .grad without a copy: it is
  // contiguous, its storage was made by the backward's own nodes, and no other gradient shares it.
  bool OwnsItsStorage(ValueId gradient, const std::vector<std::optional<ValueId>>& gradients) const;
  absl::Status StoreGrad(const Sym& tensor, const Sym& value);
  absl::StatusOr<Sym> TraceBackward(const Sym& root, const std::vector<Sym>& args, const Kwargs& kwargs);
  absl::StatusOr<PyObject*> LeafInputObject(const Sym& tensor, absl::string_view what);
  // The trace up to the instruction that stopped it, and what happens there (tracer.cc).
  std::variant<TraceResult, TraceFailure> Break(TFrame& root, const interpreter::BreakReason& reason);
  void RollBackToSnapshot();
  SegmentExit ExitAt(const TFrame& root, const Instr& in) const;
  absl::Status WrapStartStack(TFrame& root);
  absl::Status BuildFrameState(TFrame& root, TraceResult& r, std::vector<ValueId>& outputs);
  absl::StatusOr<bool> RebuildMethodCall(const Sym& slot, const Sym& next, TraceResult& r,
                                         std::vector<ValueId>& outputs);
};

}  // namespace dt::interpreter::trace

#endif  // DYNTRACE_INTERPRETER_TRACER_INTERNAL_H_
