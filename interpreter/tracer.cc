#include "interpreter/tracer.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "graph/pointwise.h"
#include "interpreter/py_module.h"
#include "interpreter/py_str.h"
#include "interpreter/py_types.h"
#include "interpreter/sym_dict.h"
#include "interpreter/symbolic.h"
#include "runtime/errors.h"
#include "runtime/indexing.h"
#include "runtime/log.h"

namespace dt::trace {


namespace {

using guards::LeafGuard;
using guards::Provenance;
using guards::SourceRef;
using py::PyRef;

// ---------------------------------------------------------------------------------------------
// Instructions, decoded once per code object with the interpreter's own `dis`.

enum class Op : uint8_t {
  kNop, kPushNull, kPopTop, kCopy, kSwap, kLoadConst, kLoadFast, kLoadFastAndClear, kStoreFast,
  kDeleteFast, kLoadGlobal, kLoadDeref, kLoadClosure, kStoreDeref, kMakeCell, kCopyFreeVars,
  kLoadAttr, kLoadMethod, kBinaryOp, kUnaryNegative, kUnaryNot, kUnaryInvert, kUnaryPositive,
  kCallIntrinsic1, kCompareOp, kIsOp, kContainsOp, kPopJumpIfFalse, kPopJumpIfTrue,
  kPopJumpIfNone, kPopJumpIfNotNone, kJump, kJumpIfFalseOrPop, kJumpIfTrueOrPop, kCall,
  kKwNames, kCallFunctionEx, kBuildTuple, kBuildList, kBuildMap, kBuildConstKeyMap, kListAppend,
  kListExtend, kDictUpdate, kDictMerge, kMapAdd, kListToTuple, kBuildSlice, kBinarySubscr, kStoreSubscr, kBinarySlice,
  kStoreSlice, kUnpackSequence, kUnpackEx, kGetIter, kForIter, kEndFor, kFormatValue,
  kBuildString, kMakeFunction, kReturnValue, kReturnConst, kUnsupported,
};

Op OpFromName(absl::string_view name) {
  static const auto* table = new absl::flat_hash_map<std::string, Op>{
      {"RESUME", Op::kNop}, {"NOP", Op::kNop}, {"PRECALL", Op::kNop}, {"CACHE", Op::kNop},
      {"EXTENDED_ARG", Op::kNop}, {"PUSH_NULL", Op::kPushNull}, {"POP_TOP", Op::kPopTop},
      {"COPY", Op::kCopy}, {"SWAP", Op::kSwap}, {"LOAD_CONST", Op::kLoadConst},
      {"LOAD_FAST", Op::kLoadFast}, {"LOAD_FAST_CHECK", Op::kLoadFast},
      {"LOAD_FAST_AND_CLEAR", Op::kLoadFastAndClear}, {"STORE_FAST", Op::kStoreFast},
      {"DELETE_FAST", Op::kDeleteFast}, {"LOAD_GLOBAL", Op::kLoadGlobal},
      {"LOAD_DEREF", Op::kLoadDeref}, {"LOAD_CLOSURE", Op::kLoadClosure},
      {"STORE_DEREF", Op::kStoreDeref}, {"MAKE_CELL", Op::kMakeCell},
      {"COPY_FREE_VARS", Op::kCopyFreeVars}, {"LOAD_ATTR", Op::kLoadAttr},
      {"LOAD_METHOD", Op::kLoadMethod}, {"BINARY_OP", Op::kBinaryOp},
      {"UNARY_NEGATIVE", Op::kUnaryNegative}, {"UNARY_NOT", Op::kUnaryNot},
      {"UNARY_INVERT", Op::kUnaryInvert}, {"UNARY_POSITIVE", Op::kUnaryPositive},
      {"CALL_INTRINSIC_1", Op::kCallIntrinsic1}, {"COMPARE_OP", Op::kCompareOp},
      {"IS_OP", Op::kIsOp}, {"CONTAINS_OP", Op::kContainsOp},
      {"POP_JUMP_IF_FALSE", Op::kPopJumpIfFalse}, {"POP_JUMP_FORWARD_IF_FALSE", Op::kPopJumpIfFalse},
      {"POP_JUMP_BACKWARD_IF_FALSE", Op::kPopJumpIfFalse}, {"POP_JUMP_IF_TRUE", Op::kPopJumpIfTrue},
      {"POP_JUMP_FORWARD_IF_TRUE", Op::kPopJumpIfTrue}, {"POP_JUMP_BACKWARD_IF_TRUE", Op::kPopJumpIfTrue},
      {"POP_JUMP_IF_NONE", Op::kPopJumpIfNone}, {"POP_JUMP_FORWARD_IF_NONE", Op::kPopJumpIfNone},
      {"POP_JUMP_BACKWARD_IF_NONE", Op::kPopJumpIfNone},
      {"POP_JUMP_IF_NOT_NONE", Op::kPopJumpIfNotNone},
      {"POP_JUMP_FORWARD_IF_NOT_NONE", Op::kPopJumpIfNotNone},
      {"POP_JUMP_BACKWARD_IF_NOT_NONE", Op::kPopJumpIfNotNone},
      {"JUMP_FORWARD", Op::kJump}, {"JUMP_BACKWARD", Op::kJump},
      {"JUMP_BACKWARD_NO_INTERRUPT", Op::kJump}, {"JUMP", Op::kJump},
      {"JUMP_IF_FALSE_OR_POP", Op::kJumpIfFalseOrPop}, {"JUMP_IF_TRUE_OR_POP", Op::kJumpIfTrueOrPop},
      {"CALL", Op::kCall}, {"KW_NAMES", Op::kKwNames}, {"CALL_FUNCTION_EX", Op::kCallFunctionEx},
      {"BUILD_TUPLE", Op::kBuildTuple}, {"BUILD_LIST", Op::kBuildList}, {"BUILD_MAP", Op::kBuildMap},
      {"BUILD_CONST_KEY_MAP", Op::kBuildConstKeyMap}, {"LIST_APPEND", Op::kListAppend},
      {"LIST_EXTEND", Op::kListExtend}, {"DICT_UPDATE", Op::kDictUpdate},
      {"DICT_MERGE", Op::kDictMerge}, {"MAP_ADD", Op::kMapAdd}, {"LIST_TO_TUPLE", Op::kListToTuple},
      {"BUILD_SLICE", Op::kBuildSlice}, {"BINARY_SUBSCR", Op::kBinarySubscr},
      {"STORE_SUBSCR", Op::kStoreSubscr}, {"BINARY_SLICE", Op::kBinarySlice},
      {"STORE_SLICE", Op::kStoreSlice}, {"UNPACK_SEQUENCE", Op::kUnpackSequence},
      {"UNPACK_EX", Op::kUnpackEx}, {"GET_ITER", Op::kGetIter}, {"FOR_ITER", Op::kForIter},
      {"END_FOR", Op::kEndFor}, {"FORMAT_VALUE", Op::kFormatValue},
      {"BUILD_STRING", Op::kBuildString}, {"MAKE_FUNCTION", Op::kMakeFunction},
      {"RETURN_VALUE", Op::kReturnValue}, {"RETURN_CONST", Op::kReturnConst},
  };
  auto it = table->find(std::string(name));
  return it == table->end() ? Op::kUnsupported : it->second;
}

struct Instr {
  Op op;
  std::string opname;
  int arg = 0;
  PyRef argval;
  std::string argrepr;
  int offset = 0;
  int line = -1;
};

struct DecodedCode {
  std::vector<Instr> instrs;
  absl::flat_hash_map<int, int> index_of_offset;
  std::string filename;
  std::vector<std::string> binary_ops;  // dis._nb_ops names by BINARY_OP argument
  // Offsets inside try/except/finally and with bodies (exception-table ranges whose handler
  // starts with PUSH_EXC_INFO): a handler must be able to catch what the body raises, so the
  // trace stops there and CPython runs the region (comprehension cleanup handlers do not count).
  absl::flat_hash_set<int> protected_offsets;
};

// Decoded code, cached per code object: a trace of a loop body decodes each inlined function
// once. The cache holds a weak reference, never the code object itself, so a dropped code object
// is freed (and its co_extra free callback runs); entries whose code died are swept whenever the
// cache has doubled since the last sweep, so it stays within twice the live code objects.
class DecodeCache {
 public:
  std::shared_ptr<const DecodedCode> Find(PyCodeObject* code) const {
    auto it = entries_.find(code);
    // A dead weak reference means another code object now has this address.
    if (it == entries_.end() || !Alive(it->second.code, code)) return nullptr;
    return it->second.decoded;
  }
  void Put(PyCodeObject* code, std::shared_ptr<const DecodedCode> decoded) {
    PyRef ref = PyRef::Steal(PyWeakref_NewRef(reinterpret_cast<PyObject*>(code), nullptr));
    if (!ref) {
      PyErr_Clear();  // not weakly referenceable: not cached
      return;
    }
    entries_[code] = Entry{std::move(ref), std::move(decoded)};
    if (entries_.size() >= 2 * live_after_sweep_) Sweep();
  }

 private:
  struct Entry {
    PyRef code;  // a weak reference
    std::shared_ptr<const DecodedCode> decoded;
  };
  static bool Alive(const PyRef& weak, PyCodeObject* code) {
    return PyWeakref_GetObject(weak.get()) == reinterpret_cast<PyObject*>(code);
  }
  void Sweep() {
    absl::erase_if(entries_, [](const auto& kv) { return !Alive(kv.second.code, kv.first); });
    live_after_sweep_ = std::max<size_t>(entries_.size(), 64);
  }
  absl::flat_hash_map<PyCodeObject*, Entry> entries_;
  size_t live_after_sweep_ = 64;
};

absl::StatusOr<std::shared_ptr<const DecodedCode>> Decode(PyCodeObject* code) {
  static auto* cache = new DecodeCache();
  if (auto hit = cache->Find(code)) return hit;
  PyRef dis = PyRef::Steal(PyImport_ImportModule("dis"));
  if (!dis) {
    PyErr_Clear();
    return Error(ErrorKind::kRuntime, "cannot import dis");
  }
  PyRef instructions = PyRef::Steal(
      PyObject_CallMethod(dis.get(), "get_instructions", "O", reinterpret_cast<PyObject*>(code)));
  PyRef list = instructions ? PyRef::Steal(PySequence_List(instructions.get())) : PyRef();
  if (!list) {
    PyErr_Clear();
    return Error(ErrorKind::kRuntime, "dis.get_instructions failed");
  }
  auto decoded = std::make_shared<DecodedCode>();
  decoded->filename = py::Utf8Or(code->co_filename);
  PyRef nb_ops = PyRef::Steal(PyObject_GetAttrString(dis.get(), "_nb_ops"));
  if (nb_ops) {
    for (Py_ssize_t i = 0; i < PyList_Size(nb_ops.get()); ++i) {
      PyObject* entry = PyList_GetItem(nb_ops.get(), i);
      decoded->binary_ops.push_back(py::Utf8Or(PyTuple_GetItem(entry, 1)));
    }
  } else {
    PyErr_Clear();
  }
  int last_line = code->co_firstlineno;
  for (Py_ssize_t i = 0; i < PyList_Size(list.get()); ++i) {
    PyObject* ins = PyList_GetItem(list.get(), i);
    Instr in;
    PyRef opname = PyRef::Steal(PyObject_GetAttrString(ins, "opname"));
    PyRef arg = PyRef::Steal(PyObject_GetAttrString(ins, "arg"));
    PyRef offset = PyRef::Steal(PyObject_GetAttrString(ins, "offset"));
    PyRef positions = PyRef::Steal(PyObject_GetAttrString(ins, "positions"));
    PyRef argrepr = PyRef::Steal(PyObject_GetAttrString(ins, "argrepr"));
    in.argval = PyRef::Steal(PyObject_GetAttrString(ins, "argval"));
    if (!opname || !arg || !offset || !in.argval || !argrepr) {
      PyErr_Clear();
      return Error(ErrorKind::kRuntime, "unexpected dis.Instruction layout");
    }
    in.opname = py::Utf8Or(opname.get());
    in.op = OpFromName(in.opname);
    in.arg = arg.get() == Py_None ? 0 : static_cast<int>(PyLong_AsLong(arg.get()));
    in.offset = static_cast<int>(PyLong_AsLong(offset.get()));
    in.argrepr = py::Utf8Or(argrepr.get());
    if (positions) {
      PyRef lineno = PyRef::Steal(PyObject_GetAttrString(positions.get(), "lineno"));
      if (lineno && lineno.get() != Py_None) last_line = static_cast<int>(PyLong_AsLong(lineno.get()));
    }
    PyErr_Clear();
    in.line = last_line;
    decoded->index_of_offset[in.offset] = static_cast<int>(decoded->instrs.size());
    decoded->instrs.push_back(std::move(in));
  }
  PyRef table = PyRef::Steal(PyObject_CallMethod(dis.get(), "_parse_exception_table", "O",
                                                 reinterpret_cast<PyObject*>(code)));
  if (!table) {
    PyErr_Clear();  // e.g. user code removed a builtin dis relies on
    return Error(ErrorKind::kRuntime, "dis._parse_exception_table failed");
  }
  for (Py_ssize_t i = 0; i < PyList_Size(table.get()); ++i) {
    PyObject* entry = PyList_GetItem(table.get(), i);
    PyRef start = PyRef::Steal(PyObject_GetAttrString(entry, "start"));
    PyRef end = PyRef::Steal(PyObject_GetAttrString(entry, "end"));
    PyRef target = PyRef::Steal(PyObject_GetAttrString(entry, "target"));
    if (!start || !end || !target) {
      PyErr_Clear();
      return Error(ErrorKind::kRuntime, "unexpected exception-table entry layout");
    }
    auto handler = decoded->index_of_offset.find(static_cast<int>(PyLong_AsLong(target.get())));
    if (handler == decoded->index_of_offset.end() ||
        decoded->instrs[handler->second].opname != "PUSH_EXC_INFO") {
      continue;
    }
    for (long o = PyLong_AsLong(start.get()); o < PyLong_AsLong(end.get()); o += 2) {
      decoded->protected_offsets.insert(static_cast<int>(o));
    }
  }
  cache->Put(code, decoded);
  return std::shared_ptr<const DecodedCode>(decoded);
}

// ---------------------------------------------------------------------------------------------

bool IsPureConstType(PyObject* obj) {
  return obj == Py_None || PyBool_Check(obj) || PyLong_CheckExact(obj) || PyFloat_CheckExact(obj) ||
         PyUnicode_CheckExact(obj) || PyBytes_CheckExact(obj) || PyComplex_CheckExact(obj) ||
         obj == Py_Ellipsis || PySlice_Check(obj) || PyRange_Check(obj) ||
         PyObject_TypeCheck(obj, &py::DTypeType) || PyObject_TypeCheck(obj, &py::DeviceType) ||
         ((PyTuple_CheckExact(obj) || PyList_CheckExact(obj)) && [&] {
           for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(obj); ++i) {
             if (!IsPureConstType(PySequence_Fast_GET_ITEM(obj, i))) return false;
           }
           return true;
         }());
}

std::string ShortRepr(PyObject* obj) {
  PyRef r = PyRef::Steal(PyObject_Repr(obj));
  if (!r) {
    PyErr_Clear();
    return "<?>";
  }
  std::string s = py::Utf8Or(r.get());
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

std::string Describe(const Sym& s) {
  switch (s->kind) {
    case SymKind::kConst: return ShortRepr(s->obj.get());
    case SymKind::kTensor: return absl::StrCat("v", s->value, ":", DescribeMeta(s->meta));
    case SymKind::kTuple: return absl::StrFormat("tuple(%d)", s->items.size());
    case SymKind::kList: return absl::StrFormat("list(%d)", s->items.size());
    case SymKind::kDict: return absl::StrFormat("dict(%d)", s->items.size());
    case SymKind::kNull: return "NULL";
    case SymKind::kIter: return "iter";
    case SymKind::kCell: return "cell";
    case SymKind::kBoundMethod: return "bound method";
    case SymKind::kOpMethod: return "dyntrace op";
    case SymKind::kFunction: return "function";
    case SymKind::kObject: return absl::StrCat("<", Py_TYPE(s->obj.get())->tp_name, ">");
    case SymKind::kSlice: return "slice";
    case SymKind::kShape: return "shape";
    case SymKind::kNumber: return absl::StrCat("number s", s->value, "=", ShortRepr(s->obj.get()));
    case SymKind::kRunIter: return "run-time iterator";
  }
  __builtin_unreachable();
}

// The trace stops: not an error of the user's program, a reason to let CPython run the frame.
absl::Status Unsupported(absl::string_view why) { return absl::UnimplementedError(why); }

// A str the trace needs as text (a name, a keyword, an operator). One UTF-8 cannot encode (a lone
// surrogate) stops the trace, so CPython runs the instruction and raises what it would raise.
absl::StatusOr<std::string> Text(PyObject* obj) {
  std::optional<std::string> text = py::Utf8(obj);
  if (!text) return Unsupported("a string that is not valid UTF-8 text (a lone surrogate?)");
  return *std::move(text);
}

// A global or attribute name, looked up through C strings (PyDict_GetItemString): one holding a
// NUL (only a code.replace()d co_names can) would find another name, so it stops the trace.
absl::StatusOr<std::string> NameText(PyObject* obj) {
  DT_ASSIGN_OR_RETURN(std::string text, Text(obj));
  if (text.find('\0') != std::string::npos) return Unsupported("a name holding a NUL character");
  return text;
}

// A key of a call's **kwargs: CPython raises TypeError for a non-str key when it makes the call.
absl::StatusOr<std::string> KeywordName(PyObject* key) {
  if (!PyUnicode_Check(key)) return Unsupported("the traced code raises: keywords must be strings");
  return Text(key);
}

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
  int pc = 0;                  // index into decoded->instrs
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
  // The device each tensor value lives on when the graph runs. Tracing runs every op on meta
  // tensors, so a meta tensor cannot say; inputs' devices are guarded, and an op's results live
  // where its operands (or a creation op's device argument) say.
  absl::flat_hash_map<ValueId, Device> value_device_;
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
  };
  RootSnapshot snapshot_;
  // Containers, iterators and cells are mutated in place; a break rolls them back to their state
  // at the start of the breaking instruction (an inlined call may have changed them).
  struct Undo {
    Sym sym;
    std::vector<Sym> items;
    std::vector<PyRef> keys;
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
  void Mutating(const Sym& sym) { journal_.push_back(Undo{sym, sym->items, sym->keys}); }
  // Built once per distinct Sym when the frame state is rebuilt at a break.
  absl::flat_hash_map<const SymValue*, int> memo_;
  int num_memo_ = 0;
  // Where the trace stopped.
  std::string fail_file_;
  int fail_line_ = -1, fail_offset_ = -1;
  std::string fail_instruction_;

  static constexpr int kMaxDepth = 12;
  // Containers read from the frame are unpacked item by item (each item guarded) only while small
  // and shallow; larger or deeper ones (a 10,000-item list, a list that contains itself) are
  // opaque objects whose use breaks the graph, so guards stay cheap and Wrap always ends.
  static constexpr Py_ssize_t kMaxUnpackedItems = 256;
  static constexpr int kMaxUnpackedDepth = 4;
  int wrap_depth_ = 0;
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
  absl::StatusOr<Sym> TensorInput(PyObject* obj, SourceRef source);
  absl::StatusOr<Sym> LoadGlobal(TFrame& f, const std::string& name);
  absl::StatusOr<Sym> LoadLocal(TFrame& f, int index);
  // When the trace relies on a local of the segment's start state being unbound (a cell made
  // empty, 3.12's LOAD_FAST_AND_CLEAR pushing NULL), a guard says it still is.
  void GuardStillUnbound(TFrame& f, int index);
  absl::StatusOr<Sym> GetAttr(const Sym& obj, const std::string& name);
  absl::StatusOr<Sym> CallSym(const Sym& callable, std::vector<Sym> args,
                              std::vector<std::pair<std::string, Sym>> kwargs);
  absl::StatusOr<Sym> CallTensorMethod(const Sym& self, const std::string& name,
                                       const std::vector<Sym>& args,
                                       const std::vector<std::pair<std::string, Sym>>& kwargs);
  absl::StatusOr<Sym> CallContainerMethod(const Sym& self, const std::string& name,
                                          const std::vector<Sym>& args,
                                          const std::vector<std::pair<std::string, Sym>>& kwargs);
  absl::StatusOr<Sym> CallBuiltin(PyObject* fn, const std::vector<Sym>& args,
                                  const std::vector<std::pair<std::string, Sym>>& kwargs);
  absl::StatusOr<Sym> CallOpFunction(PyObject* fn, const Sym& bound_self, const std::vector<Sym>& args,
                                     const std::vector<std::pair<std::string, Sym>>& kwargs);
  absl::StatusOr<Sym> Inline(const Sym& function, std::vector<Sym> args,
                             std::vector<std::pair<std::string, Sym>> kwargs);
  absl::StatusOr<Sym> RunFrame(TFrame& f);
  absl::Status Step(TFrame& f, const Instr& in, bool& returned, Sym& result);

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
  absl::StatusOr<Sym> BinaryOp(const std::string& nb_name, const Sym& a, const Sym& b);
  absl::StatusOr<Sym> Compare(const std::string& op, const Sym& a, const Sym& b);
  absl::StatusOr<Sym> Subscript(const Sym& container, const Sym& index);
  absl::StatusOr<std::vector<Sym>> Iterate(const Sym& s);
  absl::StatusOr<Sym> MaterializeShape(const Sym& shape);
  absl::Status GuardSizes(const Sym& tensor, std::optional<int64_t> dim);
  absl::StatusOr<OutputSpec> ToOutput(const Sym& s, std::vector<ValueId>& outputs);
  template <typename Fail>
  std::variant<TraceResult, TraceFailure> Break(TFrame& root, std::string reason, Fail& fail);
};

// ---------------------------------------------------------------------------------------------
// Values from the frame

absl::StatusOr<Sym> Tracer::TensorInput(PyObject* obj, SourceRef source) {
  const std::string key = source->ToString();
  if (auto it = inputs_by_source_.find(key); it != inputs_by_source_.end()) return it->second;
  const Tensor& real = py::Unwrap(obj);
  Tensor meta(Storage::Allocate(0, Device::Meta()), real.sizes(), real.strides(), 0, real.dtype());
  guards_.Add(LeafGuard::TensorMatch(source, real, Here()));
  Sym s = MakeSym(SymKind::kTensor);
  s->value = graph_->AddInput(meta, key);
  s->meta = meta;
  value_device_[s->value] = real.device();  // guarded by TensorMatch just above
  s->source = source;
  inputs_by_source_[key] = s;
  input_sources_.push_back(source);
  touched_tensors_ = true;
  return s;
}

// A local or stack slot of the segment's start state, or an item of a tuple/list held there
// (the (index, value) pairs an enumerate loop carries across a break).
bool InSegmentState(const guards::Source& source) {
  const guards::Source* s = &source;
  while (s->kind == guards::Source::Kind::kItem) s = s->parent.get();
  return s->kind == guards::Source::Kind::kLocal || s->kind == guards::Source::Kind::kStack;
}

absl::StatusOr<Sym> Tracer::NumberSlot(ScalarInstr instr, PyRef sample, std::vector<int> deps) {
  Sym s = MakeSym(SymKind::kNumber);
  s->value = static_cast<ValueId>(scalar_program_.size());
  s->obj = sample;
  scalar_program_.push_back(std::move(instr));
  slot_samples_.push_back(std::move(sample));
  slot_inputs_.push_back(std::move(deps));
  return s;
}

absl::StatusOr<Sym> Tracer::Specialize(const Sym& number) {
  for (int input : slot_inputs_[number->value]) {
    const ScalarInstr& in = scalar_program_[input];
    guards_.Add(LeafGuard::Equals(in.source, slot_samples_[input].get(), Here()));
  }
  return ConstSym(number->obj);
}

bool IsNumber(const Sym& s) {
  return s->kind == SymKind::kNumber ||
         (s->kind == SymKind::kConst && (PyLong_Check(s->obj.get()) || PyFloat_CheckExact(s->obj.get())));
}

absl::StatusOr<Sym> Tracer::NumberOp(const std::string& op, bool compare, const Sym& a, const Sym& b) {
  PyObject* x = a->obj.get();
  PyObject* y = b->obj.get();
  PyObject* r = nullptr;
  if (compare) {
    static const auto* codes = new absl::flat_hash_map<std::string, int>{
        {"<", Py_LT}, {"<=", Py_LE}, {"==", Py_EQ}, {"!=", Py_NE}, {">", Py_GT}, {">=", Py_GE}};
    auto it = codes->find(op);
    if (it == codes->end()) return Unsupported(absl::StrCat("comparison ", op));
    r = PyObject_RichCompare(x, y, it->second);
  } else if (op == "+") r = PyNumber_Add(x, y);
  else if (op == "-") r = PyNumber_Subtract(x, y);
  else if (op == "*") r = PyNumber_Multiply(x, y);
  else if (op == "/") r = PyNumber_TrueDivide(x, y);
  else if (op == "//") r = PyNumber_FloorDivide(x, y);
  else if (op == "%") r = PyNumber_Remainder(x, y);
  else if (op == "**") r = PyNumber_Power(x, y, Py_None);
  else return Unsupported(absl::StrCat("operator ", op, " on a run-time number"));
  if (r == nullptr) {
    PyErr_Clear();
    return Unsupported(absl::StrCat("the traced code raises on ", op));
  }
  ScalarInstr instr;
  instr.kind = compare ? ScalarInstr::Kind::kCompare : ScalarInstr::Kind::kBinary;
  instr.op = op;
  std::vector<int> deps;
  if (a->kind == SymKind::kNumber) {
    instr.a = a->value;
    deps = slot_inputs_[a->value];
  } else {
    instr.const_a = a->obj;
  }
  if (b->kind == SymKind::kNumber) {
    instr.b = b->value;
    deps.insert(deps.end(), slot_inputs_[b->value].begin(), slot_inputs_[b->value].end());
  } else {
    instr.const_b = b->obj;
  }
  return NumberSlot(std::move(instr), PyRef::Steal(r), std::move(deps));
}

absl::StatusOr<Sym> Tracer::Wrap(PyObject* obj, SourceRef source) {
  const Provenance where = Here();
  // Numbers in the state of a mid-function segment (loop counters, .item() results) stay
  // unspecialised: their type is guarded, their value is read each run.
  if (frame_.start_offset > 0 && (PyLong_CheckExact(obj) || PyFloat_CheckExact(obj)) &&
      InSegmentState(*source)) {
    guards_.Add(LeafGuard::Type(source, Py_TYPE(obj), where));
    ScalarInstr input;
    input.kind = ScalarInstr::Kind::kInput;
    input.source = source;
    const int slot = static_cast<int>(scalar_program_.size());
    return NumberSlot(std::move(input), PyRef::Borrow(obj), {slot});
  }
  if (py::IsTensor(obj)) return TensorInput(obj, source);
  if (frame_.start_offset > 0 && source->kind == guards::Source::Kind::kStack && PyIter_Check(obj) &&
      !py::IsTensor(obj)) {
    // A loop's iterator that crossed a break: FOR_ITER advances it at run time (an escape), so
    // each iteration reuses the same segments whatever is left in it.
    guards_.Add(LeafGuard::Type(source, Py_TYPE(obj), where));
    Sym it = MakeSym(SymKind::kRunIter);
    it->obj = PyRef::Borrow(obj);
    it->source = source;
    return it;
  }
  guards::RemainingItems remaining;
  if (guards::ReadRemainingItems(obj, &remaining)) {
    // A loop iterator that crossed a break: its remaining items are this segment's to unroll.
    guards_.Add(LeafGuard::Type(source, Py_TYPE(obj), where));
    const Py_ssize_t n = PyTuple_GET_SIZE(remaining.items) - remaining.start;
    guards_.Add(LeafGuard::Length(source, n, where));
    Sym it = MakeSym(SymKind::kIter);
    it->source = source;
    it->loop_iterator = true;
    for (Py_ssize_t k = 0; k < n; ++k) {
      DT_ASSIGN_OR_RETURN(Sym item, Wrap(PyTuple_GET_ITEM(remaining.items, remaining.start + k),
                                         guards::IterItemSource(source, static_cast<int>(k))));
      it->items.push_back(item);
    }
    return it;
  }
  if (PyCell_Check(obj)) {
    // A cell in the state of a segment that starts mid-function: the same cell object stays in
    // place, its contents are read (and guarded) through it.
    guards_.Add(LeafGuard::Type(source, Py_TYPE(obj), where));
    Sym c = MakeSym(SymKind::kCell);
    c->from_frame = true;
    c->source = source;
    PyObject* contents = PyCell_GET(obj);
    if (contents != nullptr) {
      DT_ASSIGN_OR_RETURN(Sym v, Wrap(contents, guards::CellContentsSource(source)));
      c->items.push_back(v);
    } else {
      c->items.push_back(nullptr);
    }
    return c;
  }
  if (obj == Py_None || PyBool_Check(obj) || obj == Py_Ellipsis || obj == Py_NotImplemented) {
    guards_.Add(LeafGuard::Identity(source, obj, where));
    Sym s = ConstSym(PyRef::Borrow(obj));
    s->source = source;
    return s;
  }
  if (PyLong_CheckExact(obj) || PyFloat_CheckExact(obj) || PyUnicode_CheckExact(obj) ||
      PyBytes_CheckExact(obj)) {
    guards_.Add(LeafGuard::Type(source, Py_TYPE(obj), where));
    guards_.Add(LeafGuard::Equals(source, obj, where));
    Sym s = ConstSym(PyRef::Borrow(obj));
    s->source = source;
    return s;
  }
  const bool unpackable = wrap_depth_ < kMaxUnpackedDepth &&
                          ((PyTuple_CheckExact(obj) && PyTuple_GET_SIZE(obj) <= kMaxUnpackedItems) ||
                           (PyList_CheckExact(obj) && PyList_GET_SIZE(obj) <= kMaxUnpackedItems) ||
                           (PyDict_CheckExact(obj) && PyDict_GET_SIZE(obj) <= kMaxUnpackedItems));
  struct DepthScope {
    int& depth;
    explicit DepthScope(int& d) : depth(d) { ++depth; }
    ~DepthScope() { --depth; }
  } nested(wrap_depth_);
  if (unpackable && (PyTuple_CheckExact(obj) || PyList_CheckExact(obj))) {
    guards_.Add(LeafGuard::Type(source, Py_TYPE(obj), where));
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(obj);
    guards_.Add(LeafGuard::Length(source, n, where));
    Sym s = MakeSym(PyTuple_CheckExact(obj) ? SymKind::kTuple : SymKind::kList);
    s->source = source;
    s->from_frame = true;
    for (Py_ssize_t i = 0; i < n; ++i) {
      DT_ASSIGN_OR_RETURN(Sym item, Wrap(PySequence_Fast_GET_ITEM(obj, i),
                                         guards::ItemSource(source, static_cast<int>(i))));
      s->items.push_back(item);
    }
    return s;
  }
  if (unpackable && PyDict_CheckExact(obj)) {
    guards_.Add(LeafGuard::Type(source, Py_TYPE(obj), where));
    guards_.Add(LeafGuard::Length(source, PyDict_GET_SIZE(obj), where));
    Sym s = MakeSym(SymKind::kDict);
    s->source = source;
    s->from_frame = true;
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(obj, &pos, &key, &value)) {
      if (!PyUnicode_CheckExact(key)) return Unsupported("a dict argument with non-str keys");
      DT_ASSIGN_OR_RETURN(std::string key_text, Text(key));
      DT_ASSIGN_OR_RETURN(Sym item, Wrap(value, guards::DictItemSource(source, key_text)));
      s->keys.push_back(PyRef::Borrow(key));
      s->items.push_back(item);
    }
    return s;
  }
  if (PyFunction_Check(obj)) {
    guards_.Add(LeafGuard::Identity(source, obj, where));
    Sym s = MakeSym(SymKind::kFunction);
    s->obj = PyRef::Borrow(obj);
    s->source = source;
    return s;
  }
  if (py::IsOpFunction(obj)) {
    guards_.Add(LeafGuard::Identity(source, obj, where));
    Sym s = MakeSym(SymKind::kOpMethod);
    s->obj = PyRef::Borrow(obj);
    s->source = source;
    return s;
  }
  if (PyModule_Check(obj) || PyType_Check(obj) || PyCFunction_Check(obj) ||
      PyObject_TypeCheck(obj, &py::DTypeType) || PyObject_TypeCheck(obj, &PyMethodDescr_Type) ||
      PyObject_TypeCheck(obj, &PyWrapperDescr_Type)) {
    guards_.Add(LeafGuard::Identity(source, obj, where));
    Sym s = ConstSym(PyRef::Borrow(obj));
    s->source = source;
    return s;
  }
  // A plain object: its class is fixed by a guard; attributes are read (and guarded) on use.
  guards_.Add(LeafGuard::Type(source, Py_TYPE(obj), where));
  Sym s = MakeSym(SymKind::kObject);
  s->obj = PyRef::Borrow(obj);
  s->source = source;
  return s;
}

void Tracer::GuardStillUnbound(TFrame& f, int index) {
  if (!f.is_root || index >= frame_.inputs.num_locals || !f.argument_live[index] ||
      f.locals[index] != nullptr || frame_.inputs.locals[index] != nullptr) {
    return;
  }
  PyObject* name = PyTuple_GET_ITEM(f.code->co_localsplusnames, index);
  guards_.Add(LeafGuard::Absent(guards::LocalSource(index, py::Utf8Or(name)), Here()));
}

absl::StatusOr<Sym> Tracer::LoadLocal(TFrame& f, int index) {
  if (index < 0 || index >= static_cast<int>(f.locals.size())) return Unsupported("bad local index");
  if (f.locals[index] == nullptr && f.is_root && index < frame_.inputs.num_locals &&
      f.argument_live[index] && frame_.inputs.locals[index] != nullptr) {
    PyObject* name = PyTuple_GET_ITEM(f.code->co_localsplusnames, index);
    DT_ASSIGN_OR_RETURN(f.locals[index],
                        Wrap(frame_.inputs.locals[index],
                             guards::LocalSource(index, py::Utf8Or(name))));
  }
  if (f.locals[index] == nullptr) {
    PyObject* name = PyTuple_GET_ITEM(f.code->co_localsplusnames, index);
    return Unsupported(absl::StrCat("local variable '", py::Utf8Or(name),
                                    "' is read before assignment (the code raises)"));
  }
  return f.locals[index];
}

absl::StatusOr<Sym> Tracer::LoadGlobal(TFrame& f, const std::string& name) {
  PyObject* value = PyDict_GetItemString(f.globals, name.c_str());
  if (value != nullptr) {
    SourceRef src = f.globals_source == nullptr ? guards::GlobalSource(name)
                                                : guards::DictItemSource(f.globals_source, name);
    return Wrap(value, src);
  }
  PyObject* builtins = PyDict_GetItemString(f.globals, "__builtins__");
  if (builtins != nullptr && PyModule_Check(builtins)) builtins = PyModule_GetDict(builtins);
  if (builtins != frame_.inputs.builtins) return Unsupported("a function with different builtins");
  value = PyDict_GetItemString(frame_.inputs.builtins, name.c_str());
  if (value == nullptr) return Unsupported(absl::StrCat("name '", name, "' is not defined (the code raises)"));
  // A global of that name would shadow the builtin: guard its absence through the builtin's
  // identity and the trace being re-made if globals change is out of reach, so guard both.
  // A global of the same name would shadow the builtin: guard that there is none.
  guards_.Add(LeafGuard::Absent(f.globals_source == nullptr ? guards::GlobalSource(name)
                                                            : guards::DictItemSource(f.globals_source, name),
                                Here()));
  return Wrap(value, guards::BuiltinSource(name));
}

// ---------------------------------------------------------------------------------------------
// Graph emission

absl::StatusOr<Device> Tracer::DeviceOf(const Sym& tensor) const {
  auto it = value_device_.find(tensor->value);
  // Every tensor value records its device when made; a missing one must not be guessed.
  if (tensor->kind != SymKind::kTensor || it == value_device_.end()) {
    return Unsupported("the device of a traced value is unknown");
  }
  return it->second;
}

absl::StatusOr<Device> Tracer::ResultDevice(const OpDef& op, const std::vector<ArgValue>& args,
                                            const std::vector<GraphArg>& graph_args) const {
  if (op.kind == OpKind::kCreation) {
    const int device = op.schema.IndexOf("device");
    if (device >= 0 && device < static_cast<int>(args.size()) && std::holds_alternative<Device>(args[device])) {
      return std::get<Device>(args[device]);
    }
  }
  std::optional<Device> found;
  auto note = [&](ValueId v) -> absl::Status {
    auto it = value_device_.find(v);
    if (it == value_device_.end()) return Unsupported("the device of a traced value is unknown");
    if (found && *found != it->second) {
      return Unsupported("the traced code raises: tensors on different devices");
    }
    found = it->second;
    return absl::OkStatus();
  };
  for (const GraphArg& a : graph_args) {
    if (const ValueId* v = std::get_if<ValueId>(&a.content)) DT_RETURN_IF_ERROR(note(*v));
    if (const auto* vs = std::get_if<std::vector<ValueId>>(&a.content)) {
      for (ValueId v : *vs) DT_RETURN_IF_ERROR(note(v));
    }
  }
  return found.value_or(Device::Cpu());  // no tensor operand, no device argument: the CPU
}

absl::StatusOr<std::vector<Sym>> Tracer::Emit(const OpDef* op, std::vector<ArgValue> meta_args,
                                              std::vector<GraphArg> graph_args, bool inplace) {
  DT_ASSIGN_OR_RETURN(const Device device_of_results, ResultDevice(*op, meta_args, graph_args));
  // Made on the meta device at trace time, *_like ops too: rand_like(x, device="cpu") must not
  // draw at trace time.
  CreateOnMeta(*op, meta_args);
  OpArgs args(std::move(meta_args));
  std::vector<Tensor> outs;
  if (inplace && op->kind == OpKind::kPointwise) {
    const Tensor target = args.tensor(0);
    auto r = RunPointwise(*op, args, &target);
    if (!r.ok()) return Unsupported(absl::StrCat("the traced code raises: ", r.status().message()));
    outs.push_back(*r);
  } else {
    auto r = CallOp(*op, args);
    if (!r.ok()) return Unsupported(absl::StrCat("the traced code raises: ", r.status().message()));
    if (inplace && !CanCast(r->at(0).dtype(), args.tensor(0).dtype())) {
      return Unsupported(absl::StrCat("the traced code raises: ", op->name(),
                                      "_: result type can't be cast to the output type"));
    }
    outs = *std::move(r);
  }
  touched_tensors_ = true;
  std::vector<ValueId> ids = graph_->AddNode(op, std::move(graph_args), inplace ? std::vector<Tensor>{args.tensor(0)} : outs,
                                             inplace, HereLocation());
  std::vector<Sym> result;
  for (size_t i = 0; i < ids.size(); ++i) {
    Sym s = MakeSym(SymKind::kTensor);
    s->value = ids[i];
    s->meta = inplace ? args.tensor(0) : outs[i];
    value_device_[s->value] = device_of_results;
    result.push_back(s);
  }
  return result;
}

absl::StatusOr<Sym> Tracer::EmitNamed(absl::string_view name, const std::vector<Sym>& operands,
                                      bool inplace) {
  const OpDef* op = OpRegistry::Get().Find(name);
  if (op == nullptr) return Unsupported(absl::StrCat("no op ", name));
  std::vector<ArgValue> metas;
  std::vector<GraphArg> gargs;
  for (const Sym& s : operands) {
    if (s->kind == SymKind::kTensor) {
      metas.push_back(s->meta);
      gargs.push_back(GraphArg::Value(s->value));
    } else if (s->kind == SymKind::kNumber) {
      auto scalar = py::ToScalar(s->obj.get(), name);
      if (!scalar.ok()) return Unsupported(absl::StrCat(name, " with an unusual number"));
      metas.push_back(*scalar);
      gargs.push_back(GraphArg{ScalarRef{s->value}});
    } else {
      DT_ASSIGN_OR_RETURN(PyRef c, ConstValue(s));
      auto scalar = py::ToScalar(c.get(), name);
      if (!scalar.ok()) return Unsupported(absl::StrCat(name, " with a ", Py_TYPE(c.get())->tp_name, " operand"));
      metas.push_back(*scalar);
      gargs.push_back(GraphArg{ArgValue(*scalar)});
    }
  }
  const auto& params = op->schema.params;
  for (size_t i = operands.size(); i < params.size(); ++i) {
    if (!params[i].default_value) return Unsupported(absl::StrCat(name, ": missing argument"));
    metas.push_back(*params[i].default_value);
    gargs.push_back(GraphArg{*params[i].default_value});
  }
  DT_ASSIGN_OR_RETURN(std::vector<Sym> outs, Emit(op, std::move(metas), std::move(gargs), inplace));
  if (inplace) return operands[0];
  return outs.at(0);
}

absl::StatusOr<PyObject*> Tracer::ToPython(const Sym& s) {
  switch (s->kind) {
    case SymKind::kNumber: {
      DT_ASSIGN_OR_RETURN(Sym c, Specialize(s));
      wrappers_.push_back(c->obj);
      return c->obj.get();
    }
    case SymKind::kConst:
    case SymKind::kOpMethod:
      if (s->kind == SymKind::kOpMethod && !s->items.empty()) break;
      return s->obj.get();
    case SymKind::kTensor: {
      PyRef w = PyRef::Steal(py::Wrap(s->meta));
      if (!w) return Unsupported("cannot wrap a meta tensor");
      sym_of_wrapper_[w.get()] = s;
      wrappers_.push_back(w);
      return w.get();
    }
    case SymKind::kTuple:
    case SymKind::kList: {
      PyRef seq = PyRef::Steal(s->kind == SymKind::kTuple ? PyTuple_New(s->items.size())
                                                          : PyList_New(s->items.size()));
      for (size_t i = 0; i < s->items.size(); ++i) {
        DT_ASSIGN_OR_RETURN(PyObject* item, ToPython(s->items[i]));
        Py_INCREF(item);
        if (s->kind == SymKind::kTuple) PyTuple_SET_ITEM(seq.get(), i, item);
        else PyList_SET_ITEM(seq.get(), i, item);
      }
      wrappers_.push_back(seq);
      return seq.get();
    }
    case SymKind::kShape: {
      DT_ASSIGN_OR_RETURN(Sym t, MaterializeShape(s));
      return ToPython(t);
    }
    case SymKind::kSlice: {
      std::vector<PyObject*> parts;
      for (const Sym& p : s->items) {
        DT_ASSIGN_OR_RETURN(PyObject* o, ToPython(p));
        parts.push_back(o);
      }
      PyRef slice = PyRef::Steal(PySlice_New(parts[0], parts[1], parts[2]));
      wrappers_.push_back(slice);
      return slice.get();
    }
    default:
      break;
  }
  return Unsupported(absl::StrCat("passing a ", Describe(s), " to a dyntrace op"));
}

absl::StatusOr<PyRef> Tracer::ConstValue(const Sym& s) {
  switch (s->kind) {
    case SymKind::kConst: return s->obj;
    case SymKind::kNumber: {
      DT_ASSIGN_OR_RETURN(Sym c, Specialize(s));
      return c->obj;
    }
    case SymKind::kTuple: {
      PyRef t = PyRef::Steal(PyTuple_New(s->items.size()));
      for (size_t i = 0; i < s->items.size(); ++i) {
        DT_ASSIGN_OR_RETURN(PyRef item, ConstValue(s->items[i]));
        PyTuple_SET_ITEM(t.get(), i, item.Release());
      }
      return t;
    }
    case SymKind::kList: {
      PyRef l = PyRef::Steal(PyList_New(s->items.size()));
      for (size_t i = 0; i < s->items.size(); ++i) {
        DT_ASSIGN_OR_RETURN(PyRef item, ConstValue(s->items[i]));
        PyList_SET_ITEM(l.get(), i, item.Release());
      }
      return l;
    }
    case SymKind::kShape: {
      DT_ASSIGN_OR_RETURN(Sym t, MaterializeShape(s));
      return ConstValue(t);
    }
    case SymKind::kSlice: {
      DT_ASSIGN_OR_RETURN(PyRef a, ConstValue(s->items[0]));
      DT_ASSIGN_OR_RETURN(PyRef b, ConstValue(s->items[1]));
      DT_ASSIGN_OR_RETURN(PyRef c, ConstValue(s->items[2]));
      return PyRef::Steal(PySlice_New(a.get(), b.get(), c.get()));
    }
    default:
      return Unsupported(absl::StrCat("using a ", Describe(s), " as a Python value"));
  }
}

// ---------------------------------------------------------------------------------------------
// Shapes: exact sizes are guarded only when Python reads them.

absl::Status Tracer::GuardSizes(const Sym& tensor, std::optional<int64_t> dim) {
  if (tensor->source != nullptr) {
    const Tensor& real = tensor->meta;
    for (int64_t d = 0; d < real.ndim(); ++d) {
      if (dim.has_value() && *dim != d) continue;
      guards_.Add(LeafGuard::TensorSize(tensor->source, d, real.size(d), Here()));
    }
    return absl::OkStatus();
  }
  // An intermediate's sizes follow from the inputs' sizes: guard them all.
  for (ValueId in : graph_->inputs()) {
    const Tensor& meta = graph_->value(in).meta;
    auto it = inputs_by_source_.find(graph_->input_sources()[graph_->value(in).input_index]);
    if (it == inputs_by_source_.end()) continue;
    for (int64_t d = 0; d < meta.ndim(); ++d) {
      guards_.Add(LeafGuard::TensorSize(it->second->source, d, meta.size(d), Here()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Sym> Tracer::MaterializeShape(const Sym& shape) {
  const Sym& t = shape->items[0];
  DT_RETURN_IF_ERROR(GuardSizes(t, std::nullopt));
  Sym tuple = MakeSym(SymKind::kTuple);
  for (int64_t s : t->meta.sizes()) tuple->items.push_back(ConstSym(PyRef::Steal(PyLong_FromLongLong(s))));
  return tuple;
}

// ---------------------------------------------------------------------------------------------

absl::StatusOr<bool> Tracer::Truth(const Sym& s) {
  switch (s->kind) {
    case SymKind::kConst: {
      if (!IsPureConstType(s->obj.get()) && !PyType_Check(s->obj.get()) && !PyCallable_Check(s->obj.get()) &&
          !PyModule_Check(s->obj.get())) {
        return Unsupported(absl::StrCat("truth value of a ", Py_TYPE(s->obj.get())->tp_name));
      }
      const int r = PyObject_IsTrue(s->obj.get());
      if (r < 0) {
        PyErr_Clear();
        return Unsupported("truth value raises");
      }
      return r == 1;
    }
    case SymKind::kTuple:
    case SymKind::kList:
    case SymKind::kDict: return !s->items.empty();
    case SymKind::kShape: return s->items[0]->meta.ndim() > 0;
    case SymKind::kTensor:
      return Unsupported(absl::StrFormat(
          "data-dependent branch: the truth value of tensor v%d (%s) is only known at run time",
          s->value, DescribeMeta(s->meta)));
    case SymKind::kFunction:
    case SymKind::kBoundMethod:
    case SymKind::kOpMethod: return true;
    case SymKind::kNumber:
      return Unsupported(absl::StrFormat(
          "data-dependent branch: the truth value of a Python number (s%d) is only known at run "
          "time", s->value));
    default: return Unsupported(absl::StrCat("truth value of a ", Describe(s)));
  }
}

absl::StatusOr<Sym> Tracer::BinaryOp(const std::string& nb_name, const Sym& a, const Sym& b) {
  // nb_name is the operator as `dis` spells it: "+", "+=", "@", ...
  std::string sym = nb_name;
  const bool inplace = sym.size() >= 2 && sym.back() == '=' && sym != "==";
  if (inplace) sym.pop_back();
  static const auto* ops = new absl::flat_hash_map<std::string, std::string>{
      {"+", "add"}, {"-", "sub"}, {"*", "mul"}, {"/", "div"}, {"//", "floor_divide"},
      {"%", "remainder"}, {"**", "pow"}, {"@", "matmul"}, {"&", "logical_and"},
      {"|", "logical_or"}, {"^", "logical_xor"}};
  if (a->kind == SymKind::kTensor || b->kind == SymKind::kTensor) {
    auto it = ops->find(sym);
    if (it == ops->end()) return Unsupported(absl::StrCat("operator ", sym, " on tensors"));
    if ((sym == "&" || sym == "|" || sym == "^")) {
      for (const Sym& s : {a, b}) {
        if (s->kind == SymKind::kTensor && s->meta.dtype() != DType::kBool) {
          return Unsupported(absl::StrCat("bitwise ", sym, " on non-bool tensors"));
        }
      }
    }
    if (sym == "@" && (a->kind != SymKind::kTensor || b->kind != SymKind::kTensor)) {
      return Unsupported("@ with a non-tensor operand");
    }
    const bool write = inplace && a->kind == SymKind::kTensor && sym != "@";
    return EmitNamed(it->second, {a, b}, write);
  }
  if ((a->kind == SymKind::kNumber || b->kind == SymKind::kNumber) && IsNumber(a) && IsNumber(b)) {
    return NumberOp(sym, /*compare=*/false, a, b);
  }
  // Sequences built by the trace.
  if ((a->kind == SymKind::kTuple || a->kind == SymKind::kList) && a->kind == b->kind && sym == "+") {
    if (inplace && a->kind == SymKind::kList) {
      if (a->from_frame) return Unsupported("mutating a list that belongs to the caller");
      Mutating(a);
      a->items.insert(a->items.end(), b->items.begin(), b->items.end());
      return a;
    }
    Sym s = MakeSym(a->kind);
    s->items = a->items;
    s->items.insert(s->items.end(), b->items.begin(), b->items.end());
    return s;
  }
  if ((a->kind == SymKind::kTuple || a->kind == SymKind::kList) && b->kind == SymKind::kConst &&
      PyLong_CheckExact(b->obj.get()) && sym == "*") {
    int overflow = 0;
    const long long n = std::max(0LL, PyLong_AsLongLongAndOverflow(b->obj.get(), &overflow));
    // Repeats are made item by item: a huge one (CPython's MemoryError / OverflowError, a list
    // of a million) is left to CPython rather than exhausting memory here.
    constexpr long long kMaxRepeatedItems = 4096;
    if (overflow != 0 || (!a->items.empty() && n > kMaxRepeatedItems / static_cast<long long>(a->items.size()))) {
      return Unsupported("repeating a sequence into a very long one");
    }
    std::vector<Sym> repeated;
    for (long long i = 0; i < n; ++i) repeated.insert(repeated.end(), a->items.begin(), a->items.end());
    if (inplace && a->kind == SymKind::kList) {
      // `xs *= n` changes the list itself: every alias sees it.
      if (a->from_frame) return Unsupported("mutating a list that belongs to the caller");
      Mutating(a);
      a->items = std::move(repeated);
      return a;
    }
    Sym s = MakeSym(a->kind);
    s->items = std::move(repeated);
    return s;
  }
  DT_ASSIGN_OR_RETURN(PyRef x, ConstValue(a));
  DT_ASSIGN_OR_RETURN(PyRef y, ConstValue(b));
  if (!IsPureConstType(x.get()) || !IsPureConstType(y.get())) {
    return Unsupported(absl::StrFormat("operator %s on %s and %s", nb_name, Py_TYPE(x.get())->tp_name,
                                       Py_TYPE(y.get())->tp_name));
  }
  PyObject* r = nullptr;
  if (sym == "+") r = PyNumber_Add(x.get(), y.get());
  else if (sym == "-") r = PyNumber_Subtract(x.get(), y.get());
  else if (sym == "*") r = PyNumber_Multiply(x.get(), y.get());
  else if (sym == "/") r = PyNumber_TrueDivide(x.get(), y.get());
  else if (sym == "//") r = PyNumber_FloorDivide(x.get(), y.get());
  else if (sym == "%") r = PyNumber_Remainder(x.get(), y.get());
  else if (sym == "**") r = PyNumber_Power(x.get(), y.get(), Py_None);
  else if (sym == "&") r = PyNumber_And(x.get(), y.get());
  else if (sym == "|") r = PyNumber_Or(x.get(), y.get());
  else if (sym == "^") r = PyNumber_Xor(x.get(), y.get());
  else if (sym == "<<") r = PyNumber_Lshift(x.get(), y.get());
  else if (sym == ">>") r = PyNumber_Rshift(x.get(), y.get());
  else return Unsupported(absl::StrCat("operator ", nb_name));
  if (r == nullptr) {
    PyErr_Clear();
    return Unsupported(absl::StrCat("the traced code raises on ", nb_name));
  }
  return ConstSym(PyRef::Steal(r));
}

absl::StatusOr<Sym> Tracer::Compare(const std::string& op, const Sym& a, const Sym& b) {
  static const auto* names = new absl::flat_hash_map<std::string, std::pair<std::string, int>>{
      {"<", {"lt", Py_LT}}, {"<=", {"le", Py_LE}}, {"==", {"eq", Py_EQ}},
      {"!=", {"ne", Py_NE}}, {">", {"gt", Py_GT}}, {">=", {"ge", Py_GE}}};
  auto it = names->find(op);
  if (it == names->end()) return Unsupported(absl::StrCat("comparison ", op));
  if (a->kind == SymKind::kTensor || b->kind == SymKind::kTensor) {
    for (const Sym& s : {a, b}) {
      if (s->kind == SymKind::kConst && s->obj.get() == Py_None) {
        // tensor == None is False, as in Python for unrelated objects.
        if (op == "==" || op == "!=") return ConstSym(PyRef::Borrow(op == "==" ? Py_False : Py_True));
      }
    }
    return EmitNamed(it->second.first, {a, b});
  }
  if ((a->kind == SymKind::kNumber || b->kind == SymKind::kNumber) && IsNumber(a) && IsNumber(b)) {
    return NumberOp(op, /*compare=*/true, a, b);
  }
  DT_ASSIGN_OR_RETURN(PyRef x, ConstValue(a));
  DT_ASSIGN_OR_RETURN(PyRef y, ConstValue(b));
  if (!IsPureConstType(x.get()) || !IsPureConstType(y.get())) {
    if ((op == "==" || op == "!=") ) {
      const bool same = x.get() == y.get();
      if (same || PyType_Check(x.get()) || PyType_Check(y.get())) {
        return ConstSym(PyRef::Borrow((same == (op == "==")) ? Py_True : Py_False));
      }
    }
    return Unsupported(absl::StrFormat("comparison %s of %s and %s", op, Py_TYPE(x.get())->tp_name,
                                       Py_TYPE(y.get())->tp_name));
  }
  PyObject* r = PyObject_RichCompare(x.get(), y.get(), it->second.second);
  if (r == nullptr) {
    PyErr_Clear();
    return Unsupported(absl::StrCat("the traced code raises on ", op));
  }
  return ConstSym(PyRef::Steal(r));
}

absl::StatusOr<Sym> Tracer::Subscript(const Sym& container, const Sym& index) {
  if (container->kind == SymKind::kTensor) {
    if (index->kind == SymKind::kTensor) return Unsupported("indexing a tensor with a tensor");
    DT_ASSIGN_OR_RETURN(PyObject* key, ToPython(index));
    auto items = py::ParseIndex(key);
    if (!items.ok()) return Unsupported(absl::StrCat("index: ", items.status().message()));
    const OpDef* op = OpRegistry::Get().Find("_getitem");
    const Dims encoded = EncodeIndex(*items);
    DT_ASSIGN_OR_RETURN(std::vector<Sym> outs,
                        Emit(op, {container->meta, encoded},
                             {GraphArg::Value(container->value), GraphArg{ArgValue(encoded)}}, false));
    return outs[0];
  }
  if (container->kind == SymKind::kShape) {
    const Sym& t = container->items[0];
    if (index->kind == SymKind::kConst && PyLong_CheckExact(index->obj.get())) {
      long long i = PyLong_AsLongLong(index->obj.get());
      const int64_t nd = t->meta.ndim();
      if (i < -nd || i >= nd) return Unsupported("the traced code raises: shape index out of range");
      if (i < 0) i += nd;
      DT_RETURN_IF_ERROR(GuardSizes(t, i));
      return ConstSym(PyRef::Steal(PyLong_FromLongLong(t->meta.size(i))));
    }
    DT_ASSIGN_OR_RETURN(Sym tuple, MaterializeShape(container));
    return Subscript(tuple, index);
  }
  if (container->kind == SymKind::kTuple || container->kind == SymKind::kList) {
    DT_ASSIGN_OR_RETURN(PyRef key, ConstValue(index));
    const Py_ssize_t n = static_cast<Py_ssize_t>(container->items.size());
    if (PyLong_Check(key.get())) {
      Py_ssize_t i = PyLong_AsSsize_t(key.get());
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Unsupported("the traced code raises IndexError");
      return container->items[i];
    }
    if (PySlice_Check(key.get())) {
      Py_ssize_t start, stop, step;
      if (PySlice_Unpack(key.get(), &start, &stop, &step) < 0) {
        PyErr_Clear();
        return Unsupported("the traced code raises on a slice");
      }
      const Py_ssize_t len = PySlice_AdjustIndices(n, &start, &stop, step);
      Sym s = MakeSym(container->kind);
      for (Py_ssize_t k = 0, i = start; k < len; ++k, i += step) s->items.push_back(container->items[i]);
      return s;
    }
    return Unsupported("sequence index of an unsupported type");
  }
  if (container->kind == SymKind::kDict) {
    DT_ASSIGN_OR_RETURN(PyRef key, ConstValue(index));
    DT_ASSIGN_OR_RETURN(std::optional<size_t> at, DictFind(*container, key.get()));
    if (!at) return Unsupported("the traced code raises KeyError");
    return container->items[*at];
  }
  DT_ASSIGN_OR_RETURN(PyRef c, ConstValue(container));
  DT_ASSIGN_OR_RETURN(PyRef k, ConstValue(index));
  if (!IsPureConstType(c.get())) return Unsupported(absl::StrCat("indexing a ", Py_TYPE(c.get())->tp_name));
  PyObject* r = PyObject_GetItem(c.get(), k.get());
  if (r == nullptr) {
    PyErr_Clear();
    return Unsupported("the traced code raises on indexing");
  }
  return ConstSym(PyRef::Steal(r));
}

absl::StatusOr<std::vector<Sym>> Tracer::Iterate(const Sym& s) {
  switch (s->kind) {
    case SymKind::kTuple:
    case SymKind::kList:
    case SymKind::kIter: return s->items;
    case SymKind::kDict: {
      std::vector<Sym> keys;
      if (s->from_frame) return Unsupported("iterating over a dict from the caller");
      for (const PyRef& k : s->keys) keys.push_back(ConstSym(k));
      return keys;
    }
    case SymKind::kShape: {
      DT_ASSIGN_OR_RETURN(Sym t, MaterializeShape(s));
      return t->items;
    }
    case SymKind::kTensor: {
      if (s->meta.ndim() == 0) return Unsupported("the traced code raises: iteration over a 0-d tensor");
      DT_RETURN_IF_ERROR(GuardSizes(s, 0));
      std::vector<Sym> rows;
      for (int64_t i = 0; i < s->meta.size(0); ++i) {
        DT_ASSIGN_OR_RETURN(Sym row, Subscript(s, ConstSym(PyRef::Steal(PyLong_FromLongLong(i)))));
        rows.push_back(row);
      }
      return rows;
    }
    case SymKind::kConst: {
      PyObject* obj = s->obj.get();
      if (!(PyRange_Check(obj) || PyTuple_CheckExact(obj) || PyUnicode_CheckExact(obj))) {
        return Unsupported(absl::StrCat("iterating over a ", Py_TYPE(obj)->tp_name));
      }
      PyRef list = PyRef::Steal(PySequence_List(obj));
      if (!list) {
        PyErr_Clear();
        return Unsupported("iteration raises");
      }
      if (PyList_GET_SIZE(list.get()) > 10000) return Unsupported("a loop of more than 10000 iterations");
      std::vector<Sym> items;
      for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list.get()); ++i) {
        items.push_back(ConstSym(PyRef::Borrow(PyList_GET_ITEM(list.get(), i))));
      }
      return items;
    }
    default: return Unsupported(absl::StrCat("iterating over a ", Describe(s)));
  }
}

// ---------------------------------------------------------------------------------------------
// Attributes and calls

absl::StatusOr<Sym> Tracer::GetAttr(const Sym& obj, const std::string& name) {
  if (obj->kind == SymKind::kTensor) {
    const Tensor& m = obj->meta;
    if (name == "shape") {
      Sym s = MakeSym(SymKind::kShape);
      s->items.push_back(obj);
      return s;
    }
    if (name == "dtype") return ConstSym(PyRef::Steal(py::WrapDType(m.dtype())));
    if (name == "device" || name == "is_cuda") {
      DT_ASSIGN_OR_RETURN(const Device device, DeviceOf(obj));
      if (name == "device") return ConstSym(PyRef::Steal(py::WrapDevice(device)));
      return ConstSym(PyRef::Borrow(device.type == DeviceType::kCuda ? Py_True : Py_False));
    }
    if (name == "ndim") return ConstSym(PyRef::Steal(PyLong_FromLongLong(m.ndim())));
    if (name == "T" || name == "mT") {
      Dims perm;
      for (int64_t d = 0; d < m.ndim(); ++d) perm.push_back(d);
      if (name == "T") std::reverse(perm.begin(), perm.end());
      else if (m.ndim() >= 2) std::swap(perm[m.ndim() - 1], perm[m.ndim() - 2]);
      else return Unsupported("the traced code raises: .mT of a tensor with fewer than 2 dims");
      const OpDef* op = OpRegistry::Get().Find("permute");
      DT_ASSIGN_OR_RETURN(std::vector<Sym> outs,
                          Emit(op, {m, perm}, {GraphArg::Value(obj->value), GraphArg{ArgValue(perm)}}, false));
      return outs[0];
    }
    PyObject* attr = PyDict_GetItemString(py::TensorType.tp_dict, name.c_str());
    if (attr == nullptr) return Unsupported(absl::StrCat("the traced code raises: Tensor has no attribute ", name));
    Sym s = MakeSym(py::IsOpFunction(attr) ? SymKind::kOpMethod : SymKind::kBoundMethod);
    s->obj = PyRef::Borrow(attr);
    s->items.push_back(obj);
    return s;
  }
  if (obj->kind == SymKind::kShape) {
    return Unsupported(absl::StrCat("attribute ", name, " of a shape"));
  }
  if ((obj->kind == SymKind::kDict && (name == "get" || name == "items" || name == "keys" || name == "values")) ||
      (obj->kind == SymKind::kList && (name == "append" || name == "extend" || name == "index" || name == "count")) ||
      (obj->kind == SymKind::kTuple && (name == "index" || name == "count"))) {
    Sym s = MakeSym(SymKind::kBoundMethod);
    s->obj = PyRef::Steal(py::FromUtf8(name));
    s->items.push_back(obj);
    return s;
  }
  if (obj->kind == SymKind::kObject || (obj->kind == SymKind::kConst && (PyModule_Check(obj->obj.get()) || PyType_Check(obj->obj.get())))) {
    PyObject* o = obj->obj.get();
    PyObject* own = nullptr;
    if (PyModule_Check(o)) {
      own = PyDict_GetItemString(PyModule_GetDict(o), name.c_str());
    } else if (PyType_Check(o)) {
      // _PyType_Lookup, not tp_dict: 3.12 keeps builtin types' dicts elsewhere (tp_dict is NULL).
      PyRef key = PyRef::Steal(py::FromUtf8(name));
      own = _PyType_Lookup(reinterpret_cast<PyTypeObject*>(o), key.get());
    } else {
      PyObject** dict = _PyObject_GetDictPtr(o);
      if (dict != nullptr && *dict != nullptr) own = PyDict_GetItemString(*dict, name.c_str());
      PyErr_Clear();
      // A data descriptor on the class wins over the instance dict: leave those to Python.
      PyObject* cls_attr = _PyType_Lookup(Py_TYPE(o), PyRef::Steal(py::FromUtf8(name)).get());
      if (cls_attr != nullptr && Py_TYPE(cls_attr)->tp_descr_set != nullptr) {
        return Unsupported(absl::StrCat("attribute '", name, "' is a descriptor (property or slot)"));
      }
      if (own == nullptr && cls_attr != nullptr) {
        if (PyFunction_Check(cls_attr)) {
          Sym s = MakeSym(SymKind::kBoundMethod);
          s->obj = PyRef::Borrow(cls_attr);
          s->items.push_back(obj);
          return s;
        }
        return Unsupported(absl::StrCat("class attribute '", name, "' of ", Py_TYPE(o)->tp_name));
      }
    }
    if (own == nullptr) {
      return Unsupported(absl::StrCat("attribute '", name, "' of ", ShortRepr(o), " (the code raises or reads a class attribute)"));
    }
    if (obj->source == nullptr) return Unsupported(absl::StrCat("attribute of an object without a source"));
    if (PyType_Check(o) && PyFunction_Check(own)) {
      Sym s = MakeSym(SymKind::kFunction);
      s->obj = PyRef::Borrow(own);
      s->source = guards::AttrSource(obj->source, name);
      guards_.Add(LeafGuard::Identity(s->source, own, Here()));
      return s;
    }
    if (PyType_Check(o)) {
      // type.__getattribute__: a data descriptor of the metaclass (__dict__, __doc__, __name__)
      // wins over the class's own attribute, and a descriptor found in the class is bound with
      // __get__(None, cls) (classmethod, staticmethod, property ...).
      PyRef key = PyRef::Steal(py::FromUtf8(name));
      PyObject* meta_attr = _PyType_Lookup(Py_TYPE(o), key.get());
      if (meta_attr != nullptr && Py_TYPE(meta_attr)->tp_descr_set != nullptr) {
        return Unsupported(absl::StrCat("attribute '", name, "' of a class is a descriptor of its metaclass"));
      }
      const bool is_classmethod = Py_IS_TYPE(own, &PyClassMethod_Type);
      if (is_classmethod || Py_IS_TYPE(own, &PyStaticMethod_Type)) {
        PyRef function = PyRef::Steal(PyObject_GetAttrString(own, "__func__"));
        if (function && !is_classmethod && PyCFunction_Check(function.get())) {
          // A builtin as a static method (dyntrace.cuda.is_available): the call decides.
          // The static method's identity fixes the builtin it holds.
          guards_.Add(LeafGuard::Identity(guards::AttrSource(obj->source, name), own, Here()));
          return ConstSym(std::move(function));
        }
        if (!function || !PyFunction_Check(function.get())) {
          PyErr_Clear();
          return Unsupported(absl::StrCat("class attribute '", name, "' wraps a non-function"));
        }
        guards_.Add(LeafGuard::Identity(guards::AttrSource(obj->source, name), own, Here()));
        Sym s = MakeSym(is_classmethod ? SymKind::kBoundMethod : SymKind::kFunction);
        s->obj = function;
        if (is_classmethod) s->items.push_back(obj);
        return s;
      }
      if (Py_TYPE(own)->tp_descr_get != nullptr) {
        return Unsupported(absl::StrCat("class attribute '", name, "' is a descriptor (", Py_TYPE(own)->tp_name, ")"));
      }
    }
    return Wrap(own, guards::AttrSource(obj->source, name));
  }
  if (obj->kind == SymKind::kConst && IsPureConstType(obj->obj.get())) {
    PyObject* r = PyObject_GetAttrString(obj->obj.get(), name.c_str());
    if (r == nullptr) {
      PyErr_Clear();
      return Unsupported("the traced code raises AttributeError");
    }
    return ConstSym(PyRef::Steal(r));
  }
  return Unsupported(absl::StrCat("attribute '", name, "' of a ", Describe(obj)));
}

absl::StatusOr<Sym> Tracer::CallOpFunction(PyObject* fn, const Sym& bound_self,
                                           const std::vector<Sym>& args,
                                           const std::vector<std::pair<std::string, Sym>>& kwargs) {
  std::vector<PyObject*> flat;
  if (bound_self != nullptr) {
    DT_ASSIGN_OR_RETURN(PyObject* s, ToPython(bound_self));
    flat.push_back(s);
  }
  for (const Sym& a : args) {
    DT_ASSIGN_OR_RETURN(PyObject* o, ToPython(a));
    flat.push_back(o);
  }
  PyRef kwnames;
  if (!kwargs.empty()) {
    kwnames = PyRef::Steal(PyTuple_New(kwargs.size()));
    for (size_t i = 0; i < kwargs.size(); ++i) {
      PyTuple_SET_ITEM(kwnames.get(), i, py::FromUtf8(kwargs[i].first));
      DT_ASSIGN_OR_RETURN(PyObject* o, ToPython(kwargs[i].second));
      flat.push_back(o);
    }
  }
  const Py_ssize_t nargs = static_cast<Py_ssize_t>(flat.size() - kwargs.size());
  auto bound = py::BindOpCall(fn, flat.data(), nargs, kwnames.get());
  if (!bound.ok()) return Unsupported(absl::StrCat("the traced code raises: ", bound.status().message()));
  std::vector<ArgValue> metas;
  std::vector<GraphArg> gargs;
  for (size_t i = 0; i < bound->args.size(); ++i) {
    metas.push_back(bound->args[i]);
    PyObject* from = bound->supplied[i];
    if (bound->args.is_tensor(i)) {
      auto it = sym_of_wrapper_.find(from);
      if (it == sym_of_wrapper_.end()) return Unsupported("a tensor argument of unknown origin");
      gargs.push_back(GraphArg::Value(it->second->value));
    } else if (std::holds_alternative<std::vector<Tensor>>(bound->args[i])) {
      std::vector<ValueId> ids;
      PyRef seq = PyRef::Steal(PySequence_Fast(from, ""));
      for (Py_ssize_t k = 0; k < PySequence_Fast_GET_SIZE(seq.get()); ++k) {
        auto it = sym_of_wrapper_.find(PySequence_Fast_GET_ITEM(seq.get(), k));
        if (it == sym_of_wrapper_.end()) return Unsupported("a tensor list of unknown origin");
        ids.push_back(it->second->value);
      }
      gargs.push_back(GraphArg{std::move(ids)});
    } else {
      gargs.push_back(GraphArg{bound->args[i]});
    }
  }
  DT_ASSIGN_OR_RETURN(std::vector<Sym> outs, Emit(bound->op, std::move(metas), std::move(gargs), bound->inplace));
  if (bound->inplace) {
    auto it = sym_of_wrapper_.find(bound->supplied[0]);
    return it->second;  // x.add_(y) returns x itself
  }
  if (bound->op->schema.returns_list) {
    Sym tuple = MakeSym(SymKind::kTuple);
    tuple->items = outs;
    return tuple;
  }
  return outs[0];
}

absl::StatusOr<Sym> Tracer::CallTensorMethod(const Sym& self, const std::string& name,
                                             const std::vector<Sym>& args,
                                             const std::vector<std::pair<std::string, Sym>>& kwargs) {
  const Tensor& m = self->meta;
  auto const_int = [&](const Sym& s) -> std::optional<int64_t> {
    if (s->kind == SymKind::kConst && PyLong_Check(s->obj.get())) return PyLong_AsLongLong(s->obj.get());
    return std::nullopt;
  };
  if (name == "size" && kwargs.empty()) {
    if (args.empty()) {
      Sym s = MakeSym(SymKind::kShape);
      s->items.push_back(self);
      return s;
    }
    auto d = const_int(args[0]);
    if (!d) return Unsupported("size() with a non-constant dim");
    auto nd = NormalizeDim(*d, m.ndim());
    if (!nd.ok()) return Unsupported("the traced code raises: size() dim out of range");
    DT_RETURN_IF_ERROR(GuardSizes(self, *nd));
    return ConstSym(PyRef::Steal(PyLong_FromLongLong(m.size(*nd))));
  }
  if ((name == "dim" || name == "ndimension") && args.empty()) {
    return ConstSym(PyRef::Steal(PyLong_FromLongLong(m.ndim())));
  }
  if (name == "numel" && args.empty()) {
    DT_RETURN_IF_ERROR(GuardSizes(self, std::nullopt));
    return ConstSym(PyRef::Steal(PyLong_FromLongLong(m.numel())));
  }
  if (name == "is_floating_point" && args.empty()) return ConstSym(PyRef::Borrow(IsFloating(m.dtype()) ? Py_True : Py_False));
  if (name == "element_size" && args.empty()) return ConstSym(PyRef::Steal(PyLong_FromLongLong(m.itemsize())));
  if (name == "cpu" && args.empty()) {
    // A CUDA tensor's copy to the host is left to CPython (the graph has no device copies).
    DT_ASSIGN_OR_RETURN(const Device device, DeviceOf(self));
    if (device.is_cpu()) return self;
    return Unsupported("Tensor.cpu() of a CUDA tensor");
  }
  static const auto* casts = new absl::flat_hash_map<std::string, DType>{
      {"float", DType::kFloat32}, {"double", DType::kFloat64}, {"half", DType::kFloat16},
      {"int", DType::kInt32}, {"long", DType::kInt64}, {"bool", DType::kBool}};
  std::optional<DType> target;
  if (auto it = casts->find(name); it != casts->end() && args.empty() && kwargs.empty()) target = it->second;
  if (name == "to") {
    std::vector<Sym> all = args;
    for (const auto& [k, v] : kwargs) {
      if (k != "dtype" && k != "device" && k != "copy") return Unsupported("to() with unusual arguments");
      all.push_back(v);
    }
    for (const Sym& a : all) {
      if (a->kind == SymKind::kTensor) {
        target = a->meta.dtype();
      } else if (a->kind == SymKind::kConst) {
        auto dt = py::ToDType(a->obj.get(), "to()");
        if (dt.ok() && !PyUnicode_Check(a->obj.get())) {
          target = *dt;
          continue;
        }
        auto dev = py::ToDevice(a->obj.get(), "to()");
        if (dev.ok()) {
          DT_ASSIGN_OR_RETURN(const Device device, DeviceOf(self));
          if (*dev == device) continue;  // already there: to() is the identity
        }
        if (a->obj.get() == Py_False) continue;
        return Unsupported("to() to another device or with copy=True");
      }
    }
    if (!target) return self;
  }
  if (target) {
    if (*target == m.dtype()) return self;
    const OpDef* op = OpRegistry::Get().Find("_to");
    DT_ASSIGN_OR_RETURN(std::vector<Sym> outs,
                        Emit(op, {m, *target}, {GraphArg::Value(self->value), GraphArg{ArgValue(*target)}}, false));
    return outs[0];
  }
  return Unsupported(absl::StrCat("Tensor.", name, "() ",
                                  name == "item" || name == "tolist" || name == "numpy"
                                      ? "needs the tensor's values, which are only known at run time"
                                      : "is not supported by the tracer"));
}

absl::StatusOr<Sym> Tracer::CallContainerMethod(const Sym& self, const std::string& name,
                                                const std::vector<Sym>& args,
                                                const std::vector<std::pair<std::string, Sym>>& kwargs) {
  if (!kwargs.empty()) return Unsupported(absl::StrCat(name, "() with keyword arguments"));
  if (self->kind == SymKind::kDict) {
    if (name == "get") {
      if (args.empty() || args.size() > 2) return Unsupported("the traced code raises: dict.get() arguments");
      DT_ASSIGN_OR_RETURN(PyRef key, ConstValue(args[0]));
      DT_ASSIGN_OR_RETURN(std::optional<size_t> at, DictFind(*self, key.get()));
      if (at) return self->items[*at];
      return args.size() == 2 ? args[1] : ConstSym(PyRef::Borrow(Py_None));
    }
    if (self->from_frame) return Unsupported(absl::StrCat("iterating over a dict from the caller (", name, ")"));
    Sym it = MakeSym(SymKind::kIter);
    for (size_t i = 0; i < self->keys.size(); ++i) {
      if (name == "keys") {
        it->items.push_back(ConstSym(self->keys[i]));
      } else if (name == "values") {
        it->items.push_back(self->items[i]);
      } else {
        Sym pair = MakeSym(SymKind::kTuple);
        pair->items = {ConstSym(self->keys[i]), self->items[i]};
        it->items.push_back(pair);
      }
    }
    return it;
  }
  if (name == "append" || name == "extend") {
    if (self->from_frame) return Unsupported("mutating a list that belongs to the caller");
    if (args.size() != 1) return Unsupported("the traced code raises: list method arguments");
    Mutating(self);
    if (name == "append") {
      self->items.push_back(args[0]);
    } else {
      DT_ASSIGN_OR_RETURN(std::vector<Sym> items, Iterate(args[0]));
      self->items.insert(self->items.end(), items.begin(), items.end());
    }
    return ConstSym(PyRef::Borrow(Py_None));
  }
  DT_ASSIGN_OR_RETURN(PyRef seq, ConstValue(self));
  PyRef method = PyRef::Steal(PyObject_GetAttrString(seq.get(), name.c_str()));
  if (!method) {
    PyErr_Clear();
    return Unsupported(absl::StrCat("the traced code raises: no method ", name));
  }
  return CallBuiltin(method.get(), args, kwargs);
}

absl::StatusOr<Sym> Tracer::CallBuiltin(PyObject* fn, const std::vector<Sym>& args,
                                        const std::vector<std::pair<std::string, Sym>>& kwargs) {
  if (PyCFunction_Check(fn) && std::string(reinterpret_cast<PyCFunctionObject*>(fn)->m_ml->ml_name) == "tensor" &&
      PyCFunction_GET_SELF(fn) != nullptr && PyModule_Check(PyCFunction_GET_SELF(fn)) &&
      std::string(PyModule_GetName(PyCFunction_GET_SELF(fn))) == "dyntrace") {
    // dyntrace.tensor(constants): made now, copied into each run by a constant node.
    PyRef tuple = PyRef::Steal(PyTuple_New(args.size()));
    for (size_t i = 0; i < args.size(); ++i) {
      auto c = ConstValue(args[i]);
      if (!c.ok()) return Unsupported(absl::StrCat("dyntrace.tensor() of values only known at run time"));
      PyTuple_SET_ITEM(tuple.get(), i, c->Release());
    }
    PyRef kw = PyRef::Steal(PyDict_New());
    for (const auto& [k, v] : kwargs) {
      DT_ASSIGN_OR_RETURN(PyRef c, ConstValue(v));
      PyDict_SetItemString(kw.get(), k.c_str(), c.get());
    }
    PyRef made = PyRef::Steal(PyObject_Call(fn, tuple.get(), kw.get()));
    if (!made) {
      PyErr_Clear();
      return Unsupported("the traced code raises in dyntrace.tensor()");
    }
    const Tensor& value = py::Unwrap(made.get());
    const OpDef* op = OpRegistry::Get().Find("_tensor_constant");
    Tensor meta(Storage::Allocate(0, Device::Meta()), value.sizes(), value.strides(), 0, value.dtype());
    touched_tensors_ = true;
    std::vector<ValueId> ids = graph_->AddNode(op, {GraphArg{ArgValue(value)}}, {meta}, false, HereLocation());
    Sym s = MakeSym(SymKind::kTensor);
    s->value = ids[0];
    s->meta = meta;
    value_device_[s->value] = value.device();
    return s;
  }
  PyObject* builtins = frame_.inputs.builtins;
  auto is = [&](const char* name) { return fn == PyDict_GetItemString(builtins, name); };
  if (is("len") && args.size() == 1) {
    const Sym& a = args[0];
    switch (a->kind) {
      case SymKind::kTuple: case SymKind::kList: case SymKind::kDict:
        return ConstSym(PyRef::Steal(PyLong_FromSize_t(a->items.size())));
      case SymKind::kShape: return ConstSym(PyRef::Steal(PyLong_FromLongLong(a->items[0]->meta.ndim())));
      case SymKind::kTensor:
        if (a->meta.ndim() == 0) return Unsupported("the traced code raises: len() of a 0-d tensor");
        DT_RETURN_IF_ERROR(GuardSizes(a, 0));
        return ConstSym(PyRef::Steal(PyLong_FromLongLong(a->meta.size(0))));
      default: break;
    }
  }
  if (is("isinstance") && args.size() == 2) {
    DT_ASSIGN_OR_RETURN(PyRef cls, ConstValue(args[1]));
    PyObject* probe = nullptr;
    PyRef holder;
    switch (args[0]->kind) {
      case SymKind::kTensor: {
        DT_ASSIGN_OR_RETURN(probe, ToPython(args[0]));
        break;
      }
      case SymKind::kConst: case SymKind::kObject: case SymKind::kFunction: probe = args[0]->obj.get(); break;
      case SymKind::kTuple: holder = PyRef::Steal(PyTuple_New(0)); probe = holder.get(); break;
      case SymKind::kList: holder = PyRef::Steal(PyList_New(0)); probe = holder.get(); break;
      case SymKind::kDict: holder = PyRef::Steal(PyDict_New()); probe = holder.get(); break;
      default: return Unsupported("isinstance() of an unusual value");
    }
    const int r = PyObject_IsInstance(probe, cls.get());
    if (r < 0) {
      PyErr_Clear();
      return Unsupported("the traced code raises in isinstance()");
    }
    return ConstSym(PyRef::Borrow(r ? Py_True : Py_False));
  }
  if ((is("tuple") || is("list")) && args.size() == 1 && kwargs.empty()) {
    // tuple(t) of an exact tuple is t itself in CPython (`tuple(args) is args`).
    if (is("tuple") && args[0]->kind == SymKind::kTuple) return args[0];
    DT_ASSIGN_OR_RETURN(std::vector<Sym> items, Iterate(args[0]));
    Sym s = MakeSym(is("tuple") ? SymKind::kTuple : SymKind::kList);
    s->items = std::move(items);
    return s;
  }
  if ((is("enumerate") || is("zip")) && kwargs.empty() && !args.empty()) {
    std::vector<std::vector<Sym>> seqs;
    size_t start_index = 0;
    if (is("enumerate")) {
      DT_ASSIGN_OR_RETURN(std::vector<Sym> items, Iterate(args[0]));
      if (args.size() > 1) {
        DT_ASSIGN_OR_RETURN(PyRef st, ConstValue(args[1]));
        start_index = PyLong_AsSize_t(st.get());
      }
      std::vector<Sym> idx;
      for (size_t i = 0; i < items.size(); ++i) idx.push_back(ConstSym(PyRef::Steal(PyLong_FromSize_t(i + start_index))));
      seqs = {idx, items};
    } else {
      for (const Sym& a : args) {
        DT_ASSIGN_OR_RETURN(std::vector<Sym> items, Iterate(a));
        seqs.push_back(items);
      }
    }
    size_t n = seqs[0].size();
    for (const auto& s : seqs) n = std::min(n, s.size());
    Sym it = MakeSym(SymKind::kIter);
    for (size_t i = 0; i < n; ++i) {
      Sym t = MakeSym(SymKind::kTuple);
      for (const auto& s : seqs) t->items.push_back(s[i]);
      it->items.push_back(t);
    }
    return it;
  }
  if (is("reversed") && args.size() == 1) {
    DT_ASSIGN_OR_RETURN(std::vector<Sym> items, Iterate(args[0]));
    Sym it = MakeSym(SymKind::kIter);
    it->items.assign(items.rbegin(), items.rend());
    return it;
  }
  if ((is("abs")) && args.size() == 1 && args[0]->kind == SymKind::kTensor) return EmitNamed("abs", args);
  if ((is("sum")) && args.size() == 1 && (args[0]->kind == SymKind::kTuple || args[0]->kind == SymKind::kList)) {
    if (args[0]->items.empty()) return ConstSym(PyRef::Steal(PyLong_FromLong(0)));
    Sym acc = args[0]->items[0];
    for (size_t i = 1; i < args[0]->items.size(); ++i) {
      DT_ASSIGN_OR_RETURN(acc, BinaryOp("+", acc, args[0]->items[i]));
    }
    return BinaryOp("+", ConstSym(PyRef::Steal(PyLong_FromLong(0))), acc);
  }
  // Pure builtins on constants: call them for real.
  static const char* kPure[] = {"abs", "min", "max", "float", "int", "bool", "str", "round", "len",
                                "range", "tuple", "divmod", "pow", "sum", "repr", "hash", "chr",
                                "ord", "any", "all", "sorted", "slice", "type"};
  bool pure = false;
  for (const char* name : kPure) pure |= is(name);
  if (PyCFunction_Check(fn) && PyCFunction_GET_SELF(fn) != nullptr &&
      !PyModule_Check(PyCFunction_GET_SELF(fn)) && IsPureConstType(PyCFunction_GET_SELF(fn)) &&
      !PyList_Check(PyCFunction_GET_SELF(fn))) {
    pure = true;  // a method of an immutable constant: "abc".startswith, (1, 2).index
  }
  // Facts fixed for the life of the process: called now, the answer a constant of the graph.
  if (py::IsProcessConstantFunction(fn)) pure = true;
  PyObject* module_name = PyCFunction_Check(fn) ? reinterpret_cast<PyCFunctionObject*>(fn)->m_module : nullptr;
  if (module_name != nullptr && PyUnicode_Check(module_name) &&
      PyUnicode_CompareWithASCIIString(module_name, "math") == 0) {
    pure = true;
  }
  if (!pure) {
    return Unsupported(absl::StrCat("call to ", ShortRepr(fn), " is not supported by the tracer"));
  }
  bool any_number = false, numbers_only = kwargs.empty();
  for (const Sym& a : args) {
    any_number |= a->kind == SymKind::kNumber;
    numbers_only &= a->kind == SymKind::kNumber ||
                    (a->kind == SymKind::kConst && IsPureConstType(a->obj.get()));
  }
  if (any_number && numbers_only) {
    // A pure builtin on run-time numbers: replayed each run, not specialised.
    ScalarInstr instr;
    instr.kind = ScalarInstr::Kind::kCall;
    instr.function = PyRef::Borrow(fn);
    std::vector<int> deps;
    PyRef sample_args = PyRef::Steal(PyTuple_New(args.size()));
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i]->kind == SymKind::kNumber) {
        instr.arg_slots.push_back(args[i]->value);
        instr.arg_consts.push_back(PyRef());
        deps.insert(deps.end(), slot_inputs_[args[i]->value].begin(), slot_inputs_[args[i]->value].end());
      } else {
        instr.arg_slots.push_back(-1);
        instr.arg_consts.push_back(args[i]->obj);
      }
      PyTuple_SET_ITEM(sample_args.get(), i, Py_NewRef(args[i]->obj.get()));
    }
    PyObject* sample = PyObject_Call(fn, sample_args.get(), nullptr);
    if (sample == nullptr) {
      PyErr_Clear();
      return Unsupported(absl::StrCat("the traced code raises in ", ShortRepr(fn)));
    }
    if (PyLong_CheckExact(sample) || PyFloat_CheckExact(sample) || PyBool_Check(sample)) {
      return NumberSlot(std::move(instr), PyRef::Steal(sample), std::move(deps));
    }
    Py_DECREF(sample);  // not a number (str(), repr() ...): fold it with specialised arguments
  }
  PyRef tuple = PyRef::Steal(PyTuple_New(args.size()));
  for (size_t i = 0; i < args.size(); ++i) {
    auto c_or = ConstValue(args[i]);
    if (!c_or.ok()) {
      return Unsupported(absl::StrCat("call to ", ShortRepr(fn), " with an argument only known at run time (",
                                      c_or.status().message(), ")"));
    }
    PyRef c = *c_or;
    if (!IsPureConstType(c.get()) && !(is("type") && args.size() == 1)) {
      return Unsupported(absl::StrCat("call to ", ShortRepr(fn), " with a ", Py_TYPE(c.get())->tp_name));
    }
    PyTuple_SET_ITEM(tuple.get(), i, c.Release());
  }
  PyRef kw;
  if (!kwargs.empty()) {
    kw = PyRef::Steal(PyDict_New());
    for (const auto& [k, v] : kwargs) {
      DT_ASSIGN_OR_RETURN(PyRef c, ConstValue(v));
      PyDict_SetItemString(kw.get(), k.c_str(), c.get());
    }
  }
  PyObject* r = PyObject_Call(fn, tuple.get(), kw.get());
  if (r == nullptr) {
    PyErr_Clear();
    return Unsupported(absl::StrCat("the traced code raises in ", ShortRepr(fn)));
  }
  return ConstSym(PyRef::Steal(r));
}

absl::StatusOr<Sym> Tracer::CallSym(const Sym& callable, std::vector<Sym> args,
                                    std::vector<std::pair<std::string, Sym>> kwargs) {
  switch (callable->kind) {
    case SymKind::kOpMethod:
      return CallOpFunction(callable->obj.get(), callable->items.empty() ? nullptr : callable->items[0], args, kwargs);
    case SymKind::kBoundMethod: {
      const Sym& self = callable->items[0];
      if (PyUnicode_Check(callable->obj.get())) {
        DT_ASSIGN_OR_RETURN(std::string method, Text(callable->obj.get()));
        return CallContainerMethod(self, method, args, kwargs);
      }
      if (self->kind == SymKind::kTensor) {
        PyRef name = PyRef::Steal(PyObject_GetAttrString(callable->obj.get(), "__name__"));
        if (!name) {
          PyErr_Clear();
          return Unsupported("an unnamed tensor method");
        }
        DT_ASSIGN_OR_RETURN(std::string method, Text(name.get()));
        return CallTensorMethod(self, method, args, kwargs);
      }
      Sym fn = MakeSym(SymKind::kFunction);
      fn->obj = callable->obj;
      args.insert(args.begin(), self);
      return Inline(fn, std::move(args), std::move(kwargs));
    }
    case SymKind::kFunction: return Inline(callable, std::move(args), std::move(kwargs));
    case SymKind::kObject: {
      PyRef name = PyRef::Steal(PyUnicode_FromString("__call__"));
      PyObject* call = _PyType_Lookup(Py_TYPE(callable->obj.get()), name.get());
      if (call == nullptr || !PyFunction_Check(call)) {
        return Unsupported(absl::StrCat("call to ", ShortRepr(callable->obj.get()), " is not supported by the tracer"));
      }
      Sym fn = MakeSym(SymKind::kFunction);
      fn->obj = PyRef::Borrow(call);
      args.insert(args.begin(), callable);
      return Inline(fn, std::move(args), std::move(kwargs));
    }
    case SymKind::kConst: {
      PyObject* fn = callable->obj.get();
      if (PyType_Check(fn) && !PyType_HasFeature(reinterpret_cast<PyTypeObject*>(fn), Py_TPFLAGS_HEAPTYPE)) {
        return CallBuiltin(fn, args, kwargs);
      }
      if (PyCFunction_Check(fn)) return CallBuiltin(fn, args, kwargs);
      return Unsupported(absl::StrCat("call to ", ShortRepr(fn), " is not supported by the tracer"));
    }
    default:
      return Unsupported(absl::StrCat("calling a ", Describe(callable)));
  }
}

absl::StatusOr<Sym> Tracer::Inline(const Sym& function, std::vector<Sym> args,
                                   std::vector<std::pair<std::string, Sym>> kwargs) {
  if (current_ != nullptr && current_->depth + 1 > kMaxDepth) {
    return Unsupported("calls nested more than 12 deep (recursion?)");
  }
  PyObject* fn = function->obj.get();
  PyCodeObject* code;
  PyObject* defaults = nullptr;
  PyObject* kwdefaults = nullptr;
  PyObject* globals;
  PyObject* fn_object = nullptr;
  if (PyFunction_Check(fn)) {
    fn_object = fn;
    code = reinterpret_cast<PyCodeObject*>(PyFunction_GET_CODE(fn));
    defaults = PyFunction_GET_DEFAULTS(fn);
    kwdefaults = PyFunction_GET_KW_DEFAULTS(fn);
    globals = PyFunction_GET_GLOBALS(fn);
  } else if (PyCode_Check(fn)) {
    code = reinterpret_cast<PyCodeObject*>(fn);
    globals = function->globals;
  } else {
    return Unsupported("calling an unknown function object");
  }
  if (code->co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR | CO_ITERABLE_COROUTINE)) {
    return Unsupported("calling a generator or coroutine function");
  }
  TFrame f;
  f.code = code;
  DT_ASSIGN_OR_RETURN(f.decoded, Decode(code));
  f.locals.assign(code->co_nlocalsplus, nullptr);
  f.globals = globals;
  f.function = fn_object;
  f.function_source = function->source;
  f.function_sym = function;
  f.depth = current_ == nullptr ? 0 : current_->depth + 1;
  if (globals != frame_.inputs.globals) {
    if (function->source == nullptr) return Unsupported("a function from another module without a source");
    f.globals_source = guards::FuncGlobalsSource(function->source);
  } else if (current_ != nullptr) {
    f.globals_source = current_->globals_source;
  }
  // Bind arguments like CPython: positional, then keywords, then defaults.
  const int argcount = code->co_argcount;
  const int kwonly = code->co_kwonlyargcount;
  const bool varargs = code->co_flags & CO_VARARGS;
  const bool varkw = code->co_flags & CO_VARKEYWORDS;
  PyObject* names = code->co_localsplusnames;
  // Parameter names are identifiers; one UTF-8 cannot encode (a code.replace()d name) matches no
  // keyword, so binding fails and CPython makes the call.
  auto name_at = [&](int i) { return py::Utf8Or(PyTuple_GET_ITEM(names, i), "\xff"); };
  for (size_t i = 0; i < args.size() && static_cast<int>(i) < argcount; ++i) f.locals[i] = args[i];
  if (static_cast<int>(args.size()) > argcount) {
    if (!varargs) return Unsupported("the traced code raises: too many positional arguments");
    Sym rest = MakeSym(SymKind::kTuple);
    rest->items.assign(args.begin() + argcount, args.end());
    f.locals[argcount + kwonly] = rest;
  } else if (varargs) {
    f.locals[argcount + kwonly] = MakeSym(SymKind::kTuple);
  }
  Sym extra_kwargs = varkw ? MakeSym(SymKind::kDict) : nullptr;
  for (auto& [k, v] : kwargs) {
    int found = -1;
    for (int i = code->co_posonlyargcount; i < argcount + kwonly; ++i) {
      if (name_at(i) == k) found = i;
    }
    if (found < 0) {
      if (!varkw) return Unsupported(absl::StrCat("the traced code raises: unexpected keyword ", k));
      PyRef key = PyRef::Steal(py::FromUtf8(k));
      if (!key) {
        PyErr_Clear();
        return Unsupported("a keyword name that is not valid UTF-8");
      }
      DT_RETURN_IF_ERROR(DictInsert(*extra_kwargs, std::move(key), v));
      continue;
    }
    if (f.locals[found] != nullptr) return Unsupported("the traced code raises: multiple values for an argument");
    f.locals[found] = v;
  }
  if (varkw) f.locals[argcount + kwonly + (varargs ? 1 : 0)] = extra_kwargs;
  // MAKE_FUNCTION's defaults are a constant tuple or a tuple built by the trace.
  std::vector<Sym> made_defaults;
  if (defaults == nullptr && function->defaults != nullptr) {
    if (function->defaults->kind == SymKind::kConst && PyTuple_Check(function->defaults->obj.get())) {
      PyObject* t = function->defaults->obj.get();
      for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(t); ++i) made_defaults.push_back(ConstSym(PyRef::Borrow(PyTuple_GET_ITEM(t, i))));
    } else {
      made_defaults = function->defaults->items;
    }
  }
  const int ndefaults = defaults != nullptr ? static_cast<int>(PyTuple_GET_SIZE(defaults))
                                            : static_cast<int>(made_defaults.size());
  for (int i = 0; i < argcount; ++i) {
    if (f.locals[i] != nullptr) continue;
    const int d = i - (argcount - ndefaults);
    if (d < 0) return Unsupported(absl::StrCat("the traced code raises: missing argument ", name_at(i)));
    f.locals[i] = defaults != nullptr ? ConstSym(PyRef::Borrow(PyTuple_GET_ITEM(defaults, d)))
                                      : made_defaults[d];
    if (defaults != nullptr && !IsPureConstType(PyTuple_GET_ITEM(defaults, d))) {
      if (function->source == nullptr) return Unsupported("a non-constant default of a local function");
      DT_ASSIGN_OR_RETURN(f.locals[i], Wrap(PyTuple_GET_ITEM(defaults, d),
                                            guards::ItemSource(guards::AttrSource(function->source, "__defaults__"), d)));
    }
  }
  for (int i = argcount; i < argcount + kwonly; ++i) {
    if (f.locals[i] != nullptr) continue;
    PyObject* dv = nullptr;
    if (kwdefaults != nullptr) dv = PyDict_GetItemString(kwdefaults, name_at(i).c_str());
    if (dv != nullptr) {
      f.locals[i] = ConstSym(PyRef::Borrow(dv));
    } else if (function->kwdefaults != nullptr) {
      DT_ASSIGN_OR_RETURN(f.locals[i], Subscript(function->kwdefaults, ConstSym(PyRef::Borrow(PyTuple_GET_ITEM(names, i)))));
    } else {
      return Unsupported(absl::StrCat("the traced code raises: missing keyword argument ", name_at(i)));
    }
  }
  TFrame* saved = current_;
  current_ = &f;
  auto result = RunFrame(f);
  current_ = saved;
  return result;
}

// ---------------------------------------------------------------------------------------------
// The instruction loop

absl::StatusOr<Sym> Tracer::RunFrame(TFrame& f) {
  const auto& instrs = f.decoded->instrs;
  f.pc = 0;
  if (f.is_root && frame_.start_offset > 0) {
    auto it = f.decoded->index_of_offset.find(frame_.start_offset);
    if (it == f.decoded->index_of_offset.end()) return Unsupported("a segment starting at an unknown offset");
    f.pc = it->second;
  }

  if (log::Enabled(log::Kind::kBytecode)) {
    // A header per traced frame (inlined calls indented), so instruction lines can be attributed.
    log::Write(log::Kind::kBytecode,
               absl::StrFormat("%*s%s %s (%s:%d)%s", f.depth * 2, "", f.is_root ? "tracing" : "inlining",
                               py::Utf8Or(f.code->co_qualname), py::Utf8Or(f.code->co_filename),
                               f.code->co_firstlineno,
                               f.pc > 0 ? absl::StrCat(" from offset ", instrs[f.pc].offset) : ""));
  }
  while (f.pc < static_cast<int>(instrs.size())) {
    if (++instructions_run_ > kMaxInstructions) return Unsupported("the trace is too long (50000 instructions)");
    const Instr& in = instrs[f.pc];
    if (log::Enabled(log::Kind::kBytecode)) {
      std::vector<std::string> stack;
      for (const Sym& s : f.stack) stack.push_back(s ? Describe(s) : "?");
      log::Write(log::Kind::kBytecode,
                 absl::StrFormat("%*s%4d %-24s %-20s stack=[%s]", f.depth * 2, "", in.offset, in.opname,
                                 in.argrepr, absl::StrJoin(stack, ", ")));
    }
    bool returned = false;
    Sym result;
    const int before = f.pc;
    if (f.is_root) {
      snapshot_ = RootSnapshot{true, f.pc, f.stack, f.locals, f.argument_live, f.kw_names,
                               f.kw_names_offset, graph_->nodes().size(), journal_.size(),
                               guards_.size()};
    }
    absl::Status s = f.decoded->protected_offsets.contains(in.offset) || in.opname == "BEFORE_WITH" ||
                             in.opname == "BEFORE_ASYNC_WITH"
                         ? Unsupported("a try/except/finally or with block: CPython runs it")
                         : Step(f, in, returned, result);
    if (!s.ok()) {
      if (fail_line_ < 0) {
        fail_file_ = f.decoded->filename;
        fail_line_ = in.line;
        fail_offset_ = in.offset;
        fail_instruction_ = in.argrepr.empty() ? in.opname : absl::StrCat(in.opname, " ", in.argrepr);
      }
      return s;
    }
    if (returned) {
      if (f.is_root) {
        return_offset_ = in.offset;
        return_pushes_value_ = in.op == Op::kReturnValue;
      }
      return result;
    }
    if (f.pc == before) ++f.pc;
  }
  return Unsupported("fell off the end of the code");
}

absl::Status Tracer::Step(TFrame& f, const Instr& in, bool& returned, Sym& result) {
  auto& st = f.stack;
  auto pop = [&]() -> Sym {
    Sym s = st.back();
    st.pop_back();
    return s;
  };
  auto jump_to = [&](int offset, int skip) -> absl::Status {
    auto it = f.decoded->index_of_offset.find(offset);
    if (it == f.decoded->index_of_offset.end()) return Unsupported("jump to an unknown offset");
    f.pc = it->second + skip;
    return absl::OkStatus();
  };
  auto argval_int = [&]() { return static_cast<int>(PyLong_AsLong(in.argval.get())); };
  auto need = [&](size_t n) -> absl::Status {
    if (st.size() < n) return Unsupported(absl::StrCat("stack underflow at ", in.opname));
    return absl::OkStatus();
  };
  switch (in.op) {
    case Op::kNop: return absl::OkStatus();
    case Op::kPushNull: st.push_back(MakeSym(SymKind::kNull)); return absl::OkStatus();
    case Op::kPopTop: DT_RETURN_IF_ERROR(need(1)); pop(); return absl::OkStatus();
    case Op::kCopy: DT_RETURN_IF_ERROR(need(in.arg)); st.push_back(st[st.size() - in.arg]); return absl::OkStatus();
    case Op::kSwap: DT_RETURN_IF_ERROR(need(in.arg)); std::swap(st.back(), st[st.size() - in.arg]); return absl::OkStatus();
    case Op::kLoadConst: st.push_back(ConstSym(in.argval)); return absl::OkStatus();
    case Op::kLoadFast: {
      DT_ASSIGN_OR_RETURN(Sym s, LoadLocal(f, in.arg));
      st.push_back(s);
      return absl::OkStatus();
    }
    case Op::kLoadFastAndClear: {
      if (f.is_root && f.locals[in.arg] == nullptr && f.argument_live[in.arg] &&
          frame_.inputs.locals[in.arg] != nullptr) {
        DT_ASSIGN_OR_RETURN(f.locals[in.arg], LoadLocal(f, in.arg));
      }
      GuardStillUnbound(f, in.arg);
      if (f.is_root) f.argument_live[in.arg] = false;
      Sym s = f.locals[in.arg];
      st.push_back(s != nullptr ? s : MakeSym(SymKind::kNull));
      f.locals[in.arg] = nullptr;
      return absl::OkStatus();
    }
    case Op::kStoreFast: {
      DT_RETURN_IF_ERROR(need(1));
      Sym s = pop();
      f.locals[in.arg] = s->kind == SymKind::kNull ? nullptr : s;
      if (f.is_root) f.argument_live[in.arg] = false;
      return absl::OkStatus();
    }
    case Op::kDeleteFast:
      f.locals[in.arg] = nullptr;
      if (f.is_root) f.argument_live[in.arg] = false;
      return absl::OkStatus();
    case Op::kLoadGlobal: {
      DT_ASSIGN_OR_RETURN(const std::string name, NameText(in.argval.get()));
      DT_ASSIGN_OR_RETURN(Sym g, LoadGlobal(f, name));
      if (in.arg & 1) st.push_back(MakeSym(SymKind::kNull));
      st.push_back(g);
      return absl::OkStatus();
    }
    case Op::kMakeCell: {
      Sym content;
      if (f.is_root && in.arg < frame_.inputs.num_locals && frame_.inputs.locals[in.arg] != nullptr &&
          f.locals[in.arg] == nullptr && f.argument_live[in.arg]) {
        DT_ASSIGN_OR_RETURN(content, LoadLocal(f, in.arg));
      } else {
        GuardStillUnbound(f, in.arg);
        content = f.locals[in.arg];
      }
      Sym cell = MakeSym(SymKind::kCell);
      cell->items.push_back(content);
      f.locals[in.arg] = cell;
      return absl::OkStatus();
    }
    case Op::kCopyFreeVars: {
      const int nfree = in.arg;
      const int first = f.code->co_nlocalsplus - nfree;
      for (int i = 0; i < nfree; ++i) {
        PyObject* name = PyTuple_GET_ITEM(f.code->co_localsplusnames, first + i);
        if (f.function != nullptr) {
          PyObject* closure = PyFunction_GET_CLOSURE(f.function);
          PyObject* cell = PyTuple_GET_ITEM(closure, i);
          Sym c = MakeSym(SymKind::kCell);
          c->from_frame = true;
          if (f.is_root) c->source = guards::FreeCellSource(i, py::Utf8Or(name));
          PyObject* contents = PyCell_GET(cell);
          if (contents != nullptr) {
            SourceRef src = f.is_root ? guards::ClosureSource(i, py::Utf8Or(name))
                                      : (f.function_source ? guards::FuncCellSource(f.function_source, i, py::Utf8Or(name)) : nullptr);
            if (src == nullptr) return Unsupported("a closure of a function without a source");
            DT_ASSIGN_OR_RETURN(Sym v, Wrap(contents, src));
            c->items.push_back(v);
          } else {
            c->items.push_back(nullptr);
          }
          f.locals[first + i] = c;
        } else if (f.function_sym != nullptr && f.function_sym->closure != nullptr) {
          f.locals[first + i] = f.function_sym->closure->items.at(i);
        } else {
          return Unsupported("free variables without a closure");
        }
      }
      return absl::OkStatus();
    }
    case Op::kLoadClosure: {
      DT_ASSIGN_OR_RETURN(Sym cell, LoadLocal(f, in.arg));
      st.push_back(cell);
      return absl::OkStatus();
    }
    case Op::kLoadDeref: {
      Sym cell = f.locals[in.arg];
      if (cell == nullptr || cell->kind != SymKind::kCell) {
        // 3.11 frames may read an argument-cell before MAKE_CELL ran; treat as a plain local.
        DT_ASSIGN_OR_RETURN(Sym v, LoadLocal(f, in.arg));
        if (v->kind != SymKind::kCell) {
          st.push_back(v);
          return absl::OkStatus();
        }
        cell = v;
      }
      if (cell->items.empty() || cell->items[0] == nullptr) {
        return Unsupported("the traced code raises: free variable referenced before assignment");
      }
      st.push_back(cell->items[0]);
      return absl::OkStatus();
    }
    case Op::kStoreDeref: {
      DT_RETURN_IF_ERROR(need(1));
      Sym v = pop();
      Sym cell = f.locals[in.arg];
      if (cell == nullptr || cell->kind != SymKind::kCell) return Unsupported("STORE_DEREF without a cell");
      if (cell->from_frame) return Unsupported("assigning to a nonlocal variable of the caller");
      Mutating(cell);
      cell->items.assign(1, v);
      return absl::OkStatus();
    }
    case Op::kLoadAttr:
    case Op::kLoadMethod: {
      DT_RETURN_IF_ERROR(need(1));
      Sym obj = pop();
      DT_ASSIGN_OR_RETURN(const std::string name, NameText(in.argval.get()));
      DT_ASSIGN_OR_RETURN(Sym attr, GetAttr(obj, name));
      const bool method = in.op == Op::kLoadMethod || (in.opname == "LOAD_ATTR" && PY_VERSION_HEX >= 0x030C0000 && (in.arg & 1));
      if (method) {
        Sym slot = MakeSym(SymKind::kNull);
        slot->method_call_slot = true;
        st.push_back(slot);
      }
      st.push_back(attr);
      return absl::OkStatus();
    }
    case Op::kBinaryOp: {
      DT_RETURN_IF_ERROR(need(2));
      Sym b = pop();
      Sym a = pop();
      std::string name = in.argrepr;
      if (name.empty() && in.arg < static_cast<int>(f.decoded->binary_ops.size())) name = f.decoded->binary_ops[in.arg];
      DT_ASSIGN_OR_RETURN(Sym r, BinaryOp(name, a, b));
      st.push_back(r);
      return absl::OkStatus();
    }
    case Op::kUnaryNegative:
    case Op::kUnaryPositive:
    case Op::kUnaryInvert: {
      DT_RETURN_IF_ERROR(need(1));
      Sym a = pop();
      if (a->kind == SymKind::kTensor) {
        if (in.op == Op::kUnaryPositive) {
          st.push_back(a);
          return absl::OkStatus();
        }
        if (in.op == Op::kUnaryInvert && a->meta.dtype() != DType::kBool) return Unsupported("~ on a non-bool tensor");
        DT_ASSIGN_OR_RETURN(Sym r, EmitNamed(in.op == Op::kUnaryNegative ? "neg" : "logical_not", {a}));
        st.push_back(r);
        return absl::OkStatus();
      }
      if (a->kind == SymKind::kNumber && in.op == Op::kUnaryNegative) {
        DT_ASSIGN_OR_RETURN(Sym r, NumberOp("*", false, a, ConstSym(PyRef::Steal(PyLong_FromLong(-1)))));
        st.push_back(r);
        return absl::OkStatus();
      }
      DT_ASSIGN_OR_RETURN(PyRef c, ConstValue(a));
      if (!IsPureConstType(c.get())) return Unsupported("unary operator on a non-constant");
      PyObject* r = in.op == Op::kUnaryNegative ? PyNumber_Negative(c.get())
                    : in.op == Op::kUnaryPositive ? PyNumber_Positive(c.get()) : PyNumber_Invert(c.get());
      if (r == nullptr) {
        PyErr_Clear();
        return Unsupported("the traced code raises in a unary operator");
      }
      st.push_back(ConstSym(PyRef::Steal(r)));
      return absl::OkStatus();
    }
    case Op::kUnaryNot: {
      DT_RETURN_IF_ERROR(need(1));
      DT_ASSIGN_OR_RETURN(bool t, Truth(pop()));
      st.push_back(ConstSym(PyRef::Borrow(t ? Py_False : Py_True)));
      return absl::OkStatus();
    }
    case Op::kCallIntrinsic1: {
      DT_RETURN_IF_ERROR(need(1));
      if (in.argrepr == "INTRINSIC_LIST_TO_TUPLE") {
        Sym l = pop();
        Sym t = MakeSym(SymKind::kTuple);
        t->items = l->items;
        st.push_back(t);
        return absl::OkStatus();
      }
      if (in.argrepr == "INTRINSIC_UNARY_POSITIVE") {
        Sym a = pop();
        if (a->kind == SymKind::kTensor) {
          st.push_back(a);
          return absl::OkStatus();
        }
        DT_ASSIGN_OR_RETURN(PyRef c, ConstValue(a));
        PyObject* r = PyNumber_Positive(c.get());
        if (r == nullptr) {
          PyErr_Clear();
          return Unsupported("the traced code raises in unary +");
        }
        st.push_back(ConstSym(PyRef::Steal(r)));
        return absl::OkStatus();
      }
      return Unsupported(absl::StrCat("CALL_INTRINSIC_1 ", in.argrepr));
    }
    case Op::kCompareOp: {
      DT_RETURN_IF_ERROR(need(2));
      Sym b = pop();
      Sym a = pop();
      DT_ASSIGN_OR_RETURN(std::string op, Text(in.argval.get()));
      DT_ASSIGN_OR_RETURN(Sym r, Compare(op, a, b));
      st.push_back(r);
      return absl::OkStatus();
    }
    case Op::kIsOp: {
      DT_RETURN_IF_ERROR(need(2));
      Sym b = pop();
      Sym a = pop();
      bool same;
      if (a == b) {
        same = true;
      } else if (a->kind == SymKind::kConst && b->kind == SymKind::kConst) {
        // Numbers, strings and tuples are guarded by value, not identity: whether two equal ones
        // are one object is only known at run time (None, bools, dtypes are singletons).
        auto by_value = [](PyObject* o) {
          return (PyLong_CheckExact(o) || PyFloat_CheckExact(o) || PyUnicode_CheckExact(o) ||
                  PyBytes_CheckExact(o) || PyComplex_CheckExact(o) || PyTuple_CheckExact(o) ||
                  PySlice_Check(o) || PyRange_Check(o));
        };
        if (by_value(a->obj.get()) && by_value(b->obj.get())) {
          return Unsupported("`is` between two values guarded by equality (identity is only known at run time)");
        }
        same = a->obj.get() == b->obj.get();
      } else if ((a->kind == SymKind::kConst && a->obj.get() == Py_None) ||
                 (b->kind == SymKind::kConst && b->obj.get() == Py_None)) {
        same = false;  // the other side is a tensor, container or function: never None
        const Sym& other = a->kind == SymKind::kConst && a->obj.get() == Py_None ? b : a;
        if (other->kind == SymKind::kNull) return Unsupported("`is` on NULL");
      } else if (a->kind == SymKind::kTensor && b->kind == SymKind::kTensor) {
        if (a->value == b->value) same = true;
        else return Unsupported("`is` between two tensors");
      } else {
        return Unsupported("`is` between non-constant values");
      }
      st.push_back(ConstSym(PyRef::Borrow((same != (in.arg == 1)) ? Py_True : Py_False)));
      return absl::OkStatus();
    }
    case Op::kContainsOp: {
      DT_RETURN_IF_ERROR(need(2));
      Sym container = pop();
      Sym item = pop();
      bool found = false;
      if (container->kind == SymKind::kDict) {
        DT_ASSIGN_OR_RETURN(PyRef key, ConstValue(item));
        DT_ASSIGN_OR_RETURN(std::optional<size_t> at, DictFind(*container, key.get()));
        found = at.has_value();
      } else if (container->kind == SymKind::kTuple || container->kind == SymKind::kList) {
        DT_ASSIGN_OR_RETURN(PyRef key, ConstValue(item));
        for (const Sym& s : container->items) {
          DT_ASSIGN_OR_RETURN(PyRef c, ConstValue(s));
          if (!IsPureConstType(c.get()) && c.get() != key.get()) return Unsupported("`in` over non-constant items");
          found |= PyObject_RichCompareBool(c.get(), key.get(), Py_EQ) == 1;
          PyErr_Clear();
        }
      } else {
        DT_ASSIGN_OR_RETURN(PyRef c, ConstValue(container));
        DT_ASSIGN_OR_RETURN(PyRef key, ConstValue(item));
        if (!IsPureConstType(c.get())) return Unsupported("`in` on a non-constant container");
        const int r = PySequence_Contains(c.get(), key.get());
        if (r < 0) {
          PyErr_Clear();
          return Unsupported("the traced code raises in `in`");
        }
        found = r == 1;
      }
      st.push_back(ConstSym(PyRef::Borrow((found != (in.arg == 1)) ? Py_True : Py_False)));
      return absl::OkStatus();
    }
    case Op::kPopJumpIfFalse:
    case Op::kPopJumpIfTrue: {
      DT_RETURN_IF_ERROR(need(1));
      DT_ASSIGN_OR_RETURN(bool t, Truth(pop()));
      if (t == (in.op == Op::kPopJumpIfTrue)) return jump_to(argval_int(), 0);
      return absl::OkStatus();
    }
    case Op::kPopJumpIfNone:
    case Op::kPopJumpIfNotNone: {
      DT_RETURN_IF_ERROR(need(1));
      Sym v = pop();
      if (v->kind == SymKind::kNull) return Unsupported("None test on NULL");
      const bool is_none = v->kind == SymKind::kConst && v->obj.get() == Py_None;
      if (is_none == (in.op == Op::kPopJumpIfNone)) return jump_to(argval_int(), 0);
      return absl::OkStatus();
    }
    case Op::kJumpIfFalseOrPop:
    case Op::kJumpIfTrueOrPop: {
      DT_RETURN_IF_ERROR(need(1));
      DT_ASSIGN_OR_RETURN(bool t, Truth(st.back()));
      if (t == (in.op == Op::kJumpIfTrueOrPop)) return jump_to(argval_int(), 0);
      pop();
      return absl::OkStatus();
    }
    case Op::kJump: return jump_to(argval_int(), 0);
    case Op::kKwNames:
      // The argument indexes co_consts (dis shows the names only in argrepr on 3.11).
      f.kw_names = PyRef::Borrow(PyTuple_GET_ITEM(f.code->co_consts, in.arg));
      f.kw_names_offset = in.offset;
      return absl::OkStatus();
    case Op::kCall: {
      const int argc = in.arg;
      DT_RETURN_IF_ERROR(need(argc + 2));
      std::vector<Sym> all(st.end() - argc, st.end());
      st.resize(st.size() - argc);
      Sym second = pop();
      Sym first = pop();
      Sym callable;
      if (first->kind == SymKind::kNull) {
        callable = second;
      } else {
        callable = first;
        all.insert(all.begin(), second);
      }
      std::vector<std::pair<std::string, Sym>> kwargs;
      if (f.kw_names) {
        const Py_ssize_t nkw = PyTuple_GET_SIZE(f.kw_names.get());
        for (Py_ssize_t i = 0; i < nkw; ++i) {
          DT_ASSIGN_OR_RETURN(std::string name, Text(PyTuple_GET_ITEM(f.kw_names.get(), i)));
          kwargs.emplace_back(std::move(name), all[all.size() - nkw + i]);
        }
        all.resize(all.size() - nkw);
        f.kw_names = PyRef();
      }
      DT_ASSIGN_OR_RETURN(Sym r, CallSym(callable, std::move(all), std::move(kwargs)));
      st.push_back(r);
      return absl::OkStatus();
    }
    case Op::kCallFunctionEx: {
      Sym kw = (in.arg & 1) ? pop() : nullptr;
      Sym args = pop();
      Sym callable = pop();
      if (!st.empty() && st.back()->kind == SymKind::kNull) pop();
      DT_ASSIGN_OR_RETURN(std::vector<Sym> positional, Iterate(args));
      std::vector<std::pair<std::string, Sym>> kwargs;
      if (kw != nullptr) {
        if (kw->kind == SymKind::kConst && PyDict_Check(kw->obj.get())) {
          PyObject *k, *v;
          Py_ssize_t pos = 0;
          while (PyDict_Next(kw->obj.get(), &pos, &k, &v)) {
            DT_ASSIGN_OR_RETURN(std::string name, KeywordName(k));
            kwargs.emplace_back(std::move(name), ConstSym(PyRef::Borrow(v)));
          }
          kw = nullptr;
        } else if (kw->kind != SymKind::kDict) {
          return Unsupported("**kwargs that is not a dict");
        }
      }
      if (kw != nullptr) {
        for (size_t i = 0; i < kw->keys.size(); ++i) {
          DT_ASSIGN_OR_RETURN(std::string name, KeywordName(kw->keys[i].get()));
          kwargs.emplace_back(std::move(name), kw->items[i]);
        }
      }
      DT_ASSIGN_OR_RETURN(Sym r, CallSym(callable, std::move(positional), std::move(kwargs)));
      st.push_back(r);
      return absl::OkStatus();
    }
    case Op::kBuildTuple:
    case Op::kBuildList: {
      DT_RETURN_IF_ERROR(need(in.arg));
      Sym s = MakeSym(in.op == Op::kBuildTuple ? SymKind::kTuple : SymKind::kList);
      s->items.assign(st.end() - in.arg, st.end());
      st.resize(st.size() - in.arg);
      st.push_back(s);
      return absl::OkStatus();
    }
    case Op::kBuildMap: {
      DT_RETURN_IF_ERROR(need(2 * in.arg));
      Sym d = MakeSym(SymKind::kDict);
      for (int i = 0; i < in.arg; ++i) {
        DT_ASSIGN_OR_RETURN(PyRef key, ConstValue(st[st.size() - 2 * in.arg + 2 * i]));
        DT_RETURN_IF_ERROR(DictInsert(*d, std::move(key), st[st.size() - 2 * in.arg + 2 * i + 1]));
      }
      st.resize(st.size() - 2 * in.arg);
      st.push_back(d);
      return absl::OkStatus();
    }
    case Op::kBuildConstKeyMap: {
      DT_RETURN_IF_ERROR(need(in.arg + 1));
      Sym keys = pop();
      DT_ASSIGN_OR_RETURN(PyRef k, ConstValue(keys));
      if (!PyTuple_CheckExact(k.get()) || PyTuple_GET_SIZE(k.get()) != in.arg) {
        return Unsupported("BUILD_CONST_KEY_MAP without a matching key tuple");
      }
      Sym d = MakeSym(SymKind::kDict);
      for (int i = 0; i < in.arg; ++i) {
        DT_RETURN_IF_ERROR(DictInsert(*d, PyRef::Borrow(PyTuple_GET_ITEM(k.get(), i)),
                                      st[st.size() - in.arg + i]));
      }
      st.resize(st.size() - in.arg);
      st.push_back(d);
      return absl::OkStatus();
    }
    case Op::kListAppend:
    case Op::kListExtend: {
      DT_RETURN_IF_ERROR(need(in.arg + 1));
      Sym v = pop();
      Sym list = st[st.size() - in.arg];
      if (list->kind != SymKind::kList || list->from_frame) return Unsupported("appending to a list of the caller");
      Mutating(list);
      if (in.op == Op::kListAppend) {
        list->items.push_back(v);
      } else {
        DT_ASSIGN_OR_RETURN(std::vector<Sym> items, Iterate(v));
        list->items.insert(list->items.end(), items.begin(), items.end());
      }
      return absl::OkStatus();
    }
    case Op::kDictUpdate:
    case Op::kDictMerge: {
      DT_RETURN_IF_ERROR(need(in.arg + 1));
      Sym v = pop();
      Sym d = st[st.size() - in.arg];
      if (d->kind != SymKind::kDict || v->kind != SymKind::kDict || d->from_frame) return Unsupported("dict update");
      Mutating(d);
      for (size_t i = 0; i < v->keys.size(); ++i) {
        // DICT_MERGE builds a call's **kwargs: a repeated key is CPython's TypeError, whose
        // message names the callee; CPython raises it itself when it runs the instruction.
        if (in.op == Op::kDictMerge) {
          DT_ASSIGN_OR_RETURN(std::optional<size_t> at, DictFind(*d, v->keys[i].get()));
          if (at) return Unsupported("the traced code raises: multiple values for a keyword argument");
        }
        DT_RETURN_IF_ERROR(DictInsert(*d, v->keys[i], v->items[i]));
      }
      return absl::OkStatus();
    }
    case Op::kMapAdd: {
      DT_RETURN_IF_ERROR(need(in.arg + 2));
      Sym value = pop();
      Sym key = pop();
      Sym d = st[st.size() - in.arg];
      if (d->kind != SymKind::kDict || d->from_frame) return Unsupported("MAP_ADD into a dict of the caller");
      DT_ASSIGN_OR_RETURN(PyRef k, ConstValue(key));
      Mutating(d);
      return DictInsert(*d, std::move(k), value);
    }
    case Op::kListToTuple: {
      Sym l = pop();
      Sym t = MakeSym(SymKind::kTuple);
      t->items = l->items;
      st.push_back(t);
      return absl::OkStatus();
    }
    case Op::kBuildSlice: {
      DT_RETURN_IF_ERROR(need(in.arg));
      Sym s = MakeSym(SymKind::kSlice);
      Sym step = in.arg == 3 ? pop() : ConstSym(PyRef::Borrow(Py_None));
      Sym stop = pop();
      Sym start = pop();
      s->items = {start, stop, step};
      st.push_back(s);
      return absl::OkStatus();
    }
    case Op::kBinarySubscr: {
      DT_RETURN_IF_ERROR(need(2));
      Sym index = pop();
      Sym container = pop();
      DT_ASSIGN_OR_RETURN(Sym r, Subscript(container, index));
      st.push_back(r);
      return absl::OkStatus();
    }
    case Op::kBinarySlice: {
      DT_RETURN_IF_ERROR(need(3));
      Sym stop = pop();
      Sym start = pop();
      Sym container = pop();
      Sym s = MakeSym(SymKind::kSlice);
      s->items = {start, stop, ConstSym(PyRef::Borrow(Py_None))};
      DT_ASSIGN_OR_RETURN(Sym r, Subscript(container, s));
      st.push_back(r);
      return absl::OkStatus();
    }
    case Op::kStoreSubscr:
    case Op::kStoreSlice: {
      Sym index;
      if (in.op == Op::kStoreSlice) {
        DT_RETURN_IF_ERROR(need(4));
        Sym stop = pop();
        Sym start = pop();
        index = MakeSym(SymKind::kSlice);
        index->items = {start, stop, ConstSym(PyRef::Borrow(Py_None))};
      } else {
        DT_RETURN_IF_ERROR(need(3));
        index = pop();
      }
      Sym container = pop();
      Sym value = pop();
      if (container->kind == SymKind::kTensor) {
        if (index->kind == SymKind::kTensor) return Unsupported("assigning through a tensor index");
        DT_ASSIGN_OR_RETURN(PyObject* key, ToPython(index));
        auto items = py::ParseIndex(key);
        if (!items.ok()) return Unsupported(absl::StrCat("index: ", items.status().message()));
        const Dims encoded = EncodeIndex(*items);
        std::vector<ArgValue> metas = {container->meta, encoded};
        std::vector<GraphArg> gargs = {GraphArg::Value(container->value), GraphArg{ArgValue(encoded)}};
        if (value->kind == SymKind::kTensor) {
          metas.push_back(value->meta);
          gargs.push_back(GraphArg::Value(value->value));
        } else {
          DT_ASSIGN_OR_RETURN(PyRef c, ConstValue(value));
          auto scalar = py::ToScalar(c.get(), "setitem");
          if (!scalar.ok()) return Unsupported("assigning a non-number into a tensor");
          metas.push_back(*scalar);
          gargs.push_back(GraphArg{ArgValue(*scalar)});
        }
        // The meta run checks shapes; the node mutates `container` when the graph runs.
        const OpDef* op = OpRegistry::Get().Find("_setitem");
        auto check = CallOp(*op, OpArgs(metas));
        if (!check.ok()) return Unsupported(absl::StrCat("the traced code raises: ", check.status().message()));
        graph_->AddNode(op, std::move(gargs), {container->meta}, /*inplace=*/true, HereLocation());
        touched_tensors_ = true;
        return absl::OkStatus();
      }
      if ((container->kind == SymKind::kList || container->kind == SymKind::kDict) && !container->from_frame) {
        DT_ASSIGN_OR_RETURN(PyRef key, ConstValue(index));
        Mutating(container);
        if (container->kind == SymKind::kList) {
          if (!PyLong_Check(key.get())) return Unsupported("list slice assignment");
          Py_ssize_t i = PyLong_AsSsize_t(key.get());
          if (i < 0) i += container->items.size();
          if (i < 0 || i >= static_cast<Py_ssize_t>(container->items.size())) return Unsupported("the traced code raises IndexError");
          container->items[i] = value;
        } else {
          DT_RETURN_IF_ERROR(DictInsert(*container, key, value));
        }
        return absl::OkStatus();
      }
      return Unsupported("item assignment into a Python object of the caller");
    }
    case Op::kUnpackSequence: {
      DT_RETURN_IF_ERROR(need(1));
      DT_ASSIGN_OR_RETURN(std::vector<Sym> items, Iterate(pop()));
      if (static_cast<int>(items.size()) != in.arg) return Unsupported("the traced code raises: wrong number of values to unpack");
      for (auto it = items.rbegin(); it != items.rend(); ++it) st.push_back(*it);
      return absl::OkStatus();
    }
    case Op::kUnpackEx: {
      DT_RETURN_IF_ERROR(need(1));
      DT_ASSIGN_OR_RETURN(std::vector<Sym> items, Iterate(pop()));
      const int before = in.arg & 0xff, after = in.arg >> 8;
      if (static_cast<int>(items.size()) < before + after) return Unsupported("the traced code raises: not enough values to unpack");
      Sym rest = MakeSym(SymKind::kList);
      rest->items.assign(items.begin() + before, items.end() - after);
      for (int i = 0; i < after; ++i) st.push_back(items[items.size() - 1 - i]);
      st.push_back(rest);
      for (int i = before - 1; i >= 0; --i) st.push_back(items[i]);
      return absl::OkStatus();
    }
    case Op::kGetIter: {
      DT_RETURN_IF_ERROR(need(1));
      Sym v = pop();
      DT_ASSIGN_OR_RETURN(std::vector<Sym> items, Iterate(v));
      Sym it = MakeSym(SymKind::kIter);
      it->loop_iterator = true;
      it->items = std::move(items);
      st.push_back(it);
      return absl::OkStatus();
    }
    case Op::kForIter: {
      DT_RETURN_IF_ERROR(need(1));
      Sym it = st.back();
      if (it->kind == SymKind::kRunIter) return Unsupported("the next loop item is only known at run time");
      if (it->kind != SymKind::kIter) return Unsupported("FOR_ITER on a non-iterator");
      if (it->items.empty()) {
        pop();
        // 3.12 jumps past the END_FOR its argument names; 3.11 jumps straight to the target.
        const bool skip_end_for = PY_VERSION_HEX >= 0x030C0000;
        return jump_to(argval_int(), skip_end_for ? 1 : 0);
      }
      Sym next = it->items.front();
      Mutating(it);
      it->items.erase(it->items.begin());
      st.push_back(next);
      return absl::OkStatus();
    }
    case Op::kEndFor: DT_RETURN_IF_ERROR(need(2)); pop(); pop(); return absl::OkStatus();
    case Op::kFormatValue: {
      Sym spec = (in.arg & 0x04) ? pop() : nullptr;
      Sym v = pop();
      DT_ASSIGN_OR_RETURN(PyRef c, ConstValue(v));
      if (!IsPureConstType(c.get())) return Unsupported("formatting a non-constant value");
      PyRef converted = c;
      switch (in.arg & 0x03) {
        case 1: converted = PyRef::Steal(PyObject_Str(c.get())); break;
        case 2: converted = PyRef::Steal(PyObject_Repr(c.get())); break;
        case 3: converted = PyRef::Steal(PyObject_ASCII(c.get())); break;
        default: break;
      }
      PyRef spec_obj = spec ? ConstValue(spec).value_or(PyRef()) : PyRef();
      PyRef r = converted ? PyRef::Steal(PyObject_Format(converted.get(), spec_obj.get())) : PyRef();
      if (!r) {
        PyErr_Clear();
        return Unsupported("the traced code raises in an f-string");
      }
      st.push_back(ConstSym(r));
      return absl::OkStatus();
    }
    case Op::kBuildString: {
      DT_RETURN_IF_ERROR(need(in.arg));
      // Joined as Python strings, as CPython does: text need not be valid UTF-8 (a lone
      // surrogate) and may hold NULs.
      PyRef parts = PyRef::Steal(PyTuple_New(in.arg));
      if (!parts) {
        PyErr_Clear();
        return Unsupported("out of memory building a string");
      }
      for (int i = 0; i < in.arg; ++i) {
        DT_ASSIGN_OR_RETURN(PyRef c, ConstValue(st[st.size() - in.arg + i]));
        if (!PyUnicode_CheckExact(c.get())) return Unsupported("BUILD_STRING of a non-string");
        PyTuple_SET_ITEM(parts.get(), i, c.Release());
      }
      PyRef empty = PyRef::Steal(PyUnicode_FromStringAndSize(nullptr, 0));
      PyRef joined = empty ? PyRef::Steal(PyUnicode_Join(empty.get(), parts.get())) : PyRef();
      if (!joined) {
        PyErr_Clear();
        return Unsupported("BUILD_STRING failed");
      }
      st.resize(st.size() - in.arg);
      st.push_back(ConstSym(std::move(joined)));
      return absl::OkStatus();
    }
    case Op::kMakeFunction: {
      // A made function is rebuilt from code, defaults, kw-defaults and closure at a break; its
      // annotations would be lost, so CPython makes functions that have any.
      if (in.arg & 0x04) return Unsupported("MAKE_FUNCTION of a function with annotations");
      Sym code = pop();
      Sym fn = MakeSym(SymKind::kFunction);
      fn->obj = code->obj;
      fn->globals = f.globals;
      fn->source = nullptr;
      if (in.arg & 0x08) fn->closure = pop();
      if (in.arg & 0x02) fn->kwdefaults = pop();
      if (in.arg & 0x01) fn->defaults = pop();
      if (!PyCode_Check(fn->obj.get())) return Unsupported("MAKE_FUNCTION without a code object");
      st.push_back(fn);
      return absl::OkStatus();
    }
    case Op::kReturnValue:
      DT_RETURN_IF_ERROR(need(1));
      result = pop();
      returned = true;
      return absl::OkStatus();
    case Op::kReturnConst:
      result = ConstSym(in.argval);
      returned = true;
      return absl::OkStatus();
    case Op::kUnsupported:
      return Unsupported(absl::StrCat("instruction ", in.opname, " is not supported by the tracer"));
  }
  __builtin_unreachable();
}

// ---------------------------------------------------------------------------------------------

absl::StatusOr<OutputSpec> Tracer::ToOutput(const Sym& s, std::vector<ValueId>& outputs) {
  OutputSpec out;
  // Objects with identity built by the trace are built once, however many slots hold them.
  // Tuples too: `copy.copy(t) is t` of a tuple the trace built must stay true.
  const bool has_identity = s->kind == SymKind::kList || s->kind == SymKind::kDict || s->kind == SymKind::kTuple ||
                            s->kind == SymKind::kCell || s->kind == SymKind::kIter ||
                            (s->kind == SymKind::kFunction && !PyFunction_Check(s->obj.get()));
  if (has_identity && s->source == nullptr) {
    auto it = memo_.find(s.get());
    if (it != memo_.end()) {
      out.kind = OutputSpec::Kind::kMemo;
      out.index = it->second;
      return out;
    }
    out.memo = num_memo_++;
    memo_[s.get()] = out.memo;
  }
  auto child = [&](const Sym& c) -> absl::StatusOr<OutputSpec> {
    if (c == nullptr || c->kind == SymKind::kNull) {
      // Only cells and a made function's optional parts may be empty.
      if (s->kind != SymKind::kCell && s->kind != SymKind::kFunction) {
        return Unsupported(absl::StrCat("rebuilding a ", Describe(s), " with an empty slot"));
      }
      OutputSpec n;
      n.kind = OutputSpec::Kind::kNull;
      return n;
    }
    return ToOutput(c, outputs);
  };
  switch (s->kind) {
    case SymKind::kTensor: {
      const GraphValue& v = graph_->value(s->value);
      if (v.producer < 0 && s->source != nullptr) {
        out.kind = OutputSpec::Kind::kSource;
        out.source = s->source;
        return out;
      }
      out.kind = OutputSpec::Kind::kGraphOutput;
      for (size_t i = 0; i < outputs.size(); ++i) {
        if (outputs[i] == s->value) {
          out.index = static_cast<int>(i);
          return out;
        }
      }
      out.index = static_cast<int>(outputs.size());
      outputs.push_back(s->value);
      return out;
    }
    case SymKind::kNull:
      out.kind = OutputSpec::Kind::kNull;
      return out;
    case SymKind::kNumber:
      out.kind = OutputSpec::Kind::kScalarSlot;
      out.index = s->value;
      return out;
    case SymKind::kRunIter:
      out.kind = OutputSpec::Kind::kSource;  // the same iterator object, at its current position
      out.source = s->source;
      return out;
    case SymKind::kConst:
    case SymKind::kOpMethod:
    case SymKind::kFunction:
      if (s->kind == SymKind::kOpMethod && !s->items.empty()) {
        out.kind = OutputSpec::Kind::kBoundMethod;
        out.obj = s->obj;
        DT_ASSIGN_OR_RETURN(OutputSpec self, child(s->items[0]));
        out.children.push_back(std::move(self));
        return out;
      }
      if (s->kind == SymKind::kFunction && !PyFunction_Check(s->obj.get())) {
        out.kind = OutputSpec::Kind::kFunction;
        out.obj = s->obj;
        out.globals = s->globals;
        for (const Sym& part : {s->defaults, s->kwdefaults, s->closure}) {
          DT_ASSIGN_OR_RETURN(OutputSpec c, child(part));
          out.children.push_back(std::move(c));
        }
        return out;
      }
      // The run-time object, not the one seen when tracing: values are guarded by equality, so
      // an equal but different object (`a is c` of equal strings) may be there now.
      if (s->source != nullptr) {
        out.kind = OutputSpec::Kind::kSource;
        out.source = s->source;
        return out;
      }
      out.kind = OutputSpec::Kind::kConst;
      out.obj = s->obj;
      return out;
    case SymKind::kObject:
      out.kind = OutputSpec::Kind::kSource;
      out.source = s->source;
      return out;
    case SymKind::kShape: {
      DT_ASSIGN_OR_RETURN(Sym t, MaterializeShape(s));
      return ToOutput(t, outputs);
    }
    case SymKind::kCell: {
      if (s->source != nullptr) {
        out.kind = OutputSpec::Kind::kSource;
        out.source = s->source;
        return out;
      }
      out.kind = OutputSpec::Kind::kCell;
      DT_ASSIGN_OR_RETURN(OutputSpec c, child(s->items.empty() ? nullptr : s->items[0]));
      out.children.push_back(std::move(c));
      return out;
    }
    case SymKind::kBoundMethod: {
      out.kind = OutputSpec::Kind::kBoundMethod;
      out.obj = s->obj;
      DT_ASSIGN_OR_RETURN(OutputSpec self, child(s->items[0]));
      out.children.push_back(std::move(self));
      return out;
    }
    case SymKind::kIter:
    case SymKind::kSlice: {
      if (s->kind == SymKind::kIter && !s->loop_iterator) {
        return Unsupported("an iterator made by zip(), enumerate(), reversed() or a dict view "
                           "crosses a graph break (it would change type)");
      }
      out.kind = s->kind == SymKind::kIter ? OutputSpec::Kind::kIterator : OutputSpec::Kind::kSlice;
      for (const Sym& item : s->items) {
        DT_ASSIGN_OR_RETURN(OutputSpec c, child(item));
        out.children.push_back(std::move(c));
      }
      return out;
    }
    case SymKind::kTuple:
    case SymKind::kList:
    case SymKind::kDict: {
      // The caller's own list/dict (unchanged), or its tuple: rebuilding a tuple would break
      // `is` (`ex is exc_info` after `ex = exc_info`).
      if (s->from_frame && s->source != nullptr) {
        out.kind = OutputSpec::Kind::kSource;
        out.source = s->source;
        return out;
      }
      out.kind = s->kind == SymKind::kTuple ? OutputSpec::Kind::kTuple
                 : s->kind == SymKind::kList ? OutputSpec::Kind::kList : OutputSpec::Kind::kDict;
      for (const Sym& item : s->items) {
        DT_ASSIGN_OR_RETURN(OutputSpec c, child(item));
        out.children.push_back(std::move(c));
      }
      out.keys = s->keys;
      return out;
    }
  }
  return Unsupported(absl::StrCat("rebuilding a ", Describe(s)));
}

template <typename Fail>
std::variant<TraceResult, TraceFailure> Tracer::Break(TFrame& root, std::string reason, Fail& fail) {
  const auto& instrs = root.decoded->instrs;
  const Instr& in = instrs[snapshot_.pc];
  graph_->Truncate(snapshot_.num_nodes);
  // What the failed instruction established is not relied on (it runs for real, or in CPython).
  guards_.RollBack(snapshot_.num_guards);
  while (journal_.size() > snapshot_.journal_size) {
    Undo& undo = journal_.back();
    undo.sym->items = std::move(undo.items);
    undo.sym->keys = std::move(undo.keys);
    journal_.pop_back();
  }
  TraceResult r;
  r.break_info = BreakInfo{reason, fail_file_, fail_line_, fail_offset_, fail_instruction_};
  r.break_offset = in.offset;
  r.next_offset = snapshot_.pc + 1 < static_cast<int>(instrs.size()) ? instrs[snapshot_.pc + 1].offset : -1;
  const bool tensor_condition = !snapshot_.stack.empty() && snapshot_.stack.back() != nullptr &&
                                (snapshot_.stack.back()->kind == SymKind::kTensor ||
                                 snapshot_.stack.back()->kind == SymKind::kNumber);
  if ((in.op == Op::kPopJumpIfFalse || in.op == Op::kPopJumpIfTrue) && tensor_condition &&
      r.next_offset >= 0) {
    r.exit = SegmentExit::kEscapeJump;
    r.jump_target = static_cast<int>(PyLong_AsLong(in.argval.get()));
    r.jump_if_true = in.op == Op::kPopJumpIfTrue;
  } else if (in.op == Op::kForIter && !snapshot_.stack.empty() && snapshot_.stack.back() != nullptr &&
             snapshot_.stack.back()->kind == SymKind::kRunIter && r.next_offset >= 0) {
    r.exit = SegmentExit::kEscapeForIter;
    // Where an exhausted loop continues: 3.12 jumps past the END_FOR its argument names.
    const int target = static_cast<int>(PyLong_AsLong(in.argval.get()));
    int exit_offset = target;
    if (PY_VERSION_HEX >= 0x030C0000) {
      auto t = root.decoded->index_of_offset.find(target);
      if (t != root.decoded->index_of_offset.end() && t->second + 1 < static_cast<int>(instrs.size())) {
        exit_offset = instrs[t->second + 1].offset;
      }
    }
    r.jump_target = exit_offset;
  } else if (in.op == Op::kCall && r.next_offset >= 0) {
    r.exit = SegmentExit::kEscapeCall;
    r.call_argc = in.arg;
    r.call_kwnames = snapshot_.kw_names;
  } else {
    r.exit = SegmentExit::kHandBack;
    // KW_NAMES keeps its names in the evaluator, not on the stack: resume before it.
    if (snapshot_.kw_names) r.break_offset = snapshot_.kw_names_offset;
  }
  std::vector<ValueId> outputs;
  PyObject* names = root.code->co_localsplusnames;
  for (size_t i = 0; i < snapshot_.locals.size(); ++i) {
    const Sym& local = snapshot_.locals[i];
    OutputSpec spec;
    if (local != nullptr) {
      auto built = ToOutput(local, outputs);
      if (!built.ok()) return fail(built.status());
      spec = *std::move(built);
    } else if (snapshot_.argument_live[i] && static_cast<int>(i) < frame_.inputs.num_locals) {
      // Untouched since the segment began: passed on as it is at run time, bound or not (it may
      // be unbound when traced and bound in a later run passing the same guards, or the reverse).
      spec.kind = OutputSpec::Kind::kSource;
      spec.source = guards::LocalSource(static_cast<int>(i), py::Utf8Or(PyTuple_GET_ITEM(names, i)));
    } else {
      spec.kind = OutputSpec::Kind::kNull;
    }
    r.locals_state.push_back(std::move(spec));
  }
  for (size_t i = 0; i < snapshot_.stack.size(); ++i) {
    const Sym& item = snapshot_.stack[i];
    // [NULL, bound method] becomes CPython's own method-call layout [function, self], so the
    // next segment sees objects with a stable identity (a bound method is new every time).
    if (item != nullptr && item->kind == SymKind::kNull && item->method_call_slot &&
        i + 1 < snapshot_.stack.size()) {
      const Sym& next = snapshot_.stack[i + 1];
      PyObject* function = nullptr;
      if (next != nullptr && (next->kind == SymKind::kBoundMethod || next->kind == SymKind::kOpMethod) &&
          !next->items.empty() && next->items[0] != nullptr) {
        if (PyUnicode_Check(next->obj.get())) {
          // dict.get / list.append on a container: the type's method descriptor.
          PyObject* container_type = next->items[0]->kind == SymKind::kDict ? reinterpret_cast<PyObject*>(&PyDict_Type)
                                     : next->items[0]->kind == SymKind::kList ? reinterpret_cast<PyObject*>(&PyList_Type)
                                                                              : reinterpret_cast<PyObject*>(&PyTuple_Type);
          function = _PyType_Lookup(reinterpret_cast<PyTypeObject*>(container_type), next->obj.get());
        } else {
          function = next->obj.get();
        }
      }
      if (function != nullptr) {
        OutputSpec fn;
        fn.kind = OutputSpec::Kind::kConst;
        fn.obj = PyRef::Borrow(function);
        auto self = ToOutput(next->items[0], outputs);
        if (!self.ok()) return fail(self.status());
        r.stack_state.push_back(std::move(fn));
        r.stack_state.push_back(*std::move(self));
        ++i;
        continue;
      }
    }
    OutputSpec spec;
    if (item == nullptr) {
      spec.kind = OutputSpec::Kind::kNull;
    } else {
      auto built = ToOutput(item, outputs);
      if (!built.ok()) return fail(built.status());
      spec = *std::move(built);
    }
    r.stack_state.push_back(std::move(spec));
  }
  r.num_memo = num_memo_;
  r.scalars = scalar_program_;
  graph_->SetOutputs(outputs);
  graph_->EliminateDeadCode();
  r.graph = graph_;
  r.input_sources = input_sources_;
  r.guards = guards_;
  r.touched_tensors = touched_tensors_;
  return r;
}

std::variant<TraceResult, TraceFailure> Tracer::Run() {
  TFrame root;
  root.code = frame_.code;
  root.is_root = true;
  root.globals = frame_.inputs.globals;
  root.function = frame_.function;
  auto fail = [&](const absl::Status& s) -> std::variant<TraceResult, TraceFailure> {
    TraceFailure failure;
    failure.reason = std::string(s.message());
    failure.file = fail_file_.empty() ? py::Utf8Or(frame_.code->co_filename) : fail_file_;
    failure.line = fail_line_ >= 0 ? fail_line_ : frame_.code->co_firstlineno;
    failure.offset = fail_offset_;
    failure.instruction = fail_instruction_;
    failure.guards = guards_;
    failure.touched_tensors = touched_tensors_;
    return failure;
  };
  auto decoded = Decode(frame_.code);
  if (!decoded.ok()) return fail(decoded.status());
  root.decoded = *decoded;
  root.locals.assign(frame_.code->co_nlocalsplus, nullptr);
  root.argument_live.assign(frame_.code->co_nlocalsplus, true);
  if (frame_.code->co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR)) {
    return fail(Unsupported("generator and coroutine frames run under CPython"));
  }
  current_ = &root;
  if (auto it = root.decoded->index_of_offset.find(frame_.start_offset);
      it != root.decoded->index_of_offset.end()) {
    root.pc = it->second;  // provenance of the start-state guards: the segment's first instruction
  }
  for (int i = 0; i < frame_.inputs.stack_size; ++i) {
    PyObject* v = frame_.inputs.stack[i];
    if (v == nullptr) {
      root.stack.push_back(MakeSym(SymKind::kNull));
      continue;
    }
    auto wrapped = Wrap(v, guards::StackSource(i));
    if (!wrapped.ok()) {
      current_ = nullptr;
      return fail(wrapped.status());
    }
    root.stack.push_back(*wrapped);
  }
  auto result = RunFrame(root);
  current_ = nullptr;
  if (!result.ok()) {
    if (frame_.fullgraph || !snapshot_.valid || result.status().code() != absl::StatusCode::kUnimplemented) {
      return fail(result.status());
    }
    return Break(root, std::string(result.status().message()), fail);
  }
  std::vector<ValueId> outputs;
  auto spec = ToOutput(*result, outputs);
  if (!spec.ok()) return fail(spec.status());
  graph_->SetOutputs(outputs);
  graph_->EliminateDeadCode();
  TraceResult r;
  r.graph = graph_;
  r.input_sources = input_sources_;
  r.guards = guards_;
  r.output = *std::move(spec);
  r.num_memo = num_memo_;
  r.scalars = scalar_program_;
  r.return_offset = return_offset_;
  r.return_pushes_value = return_pushes_value_;
  r.touched_tensors = touched_tensors_;
  return r;
}

}  // namespace

std::variant<TraceResult, TraceFailure> TraceFrame(const FrameToTrace& frame) {
  Tracer tracer(frame);
  return tracer.Run();
}

}  // namespace dt::trace
