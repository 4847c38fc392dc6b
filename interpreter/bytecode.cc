#include "interpreter/bytecode.h"

#include <algorithm>
#include <bit>

#include "interpreter/cpython_frame.h"
#include "interpreter/py_str.h"
#include "runtime/errors.h"

namespace dt::interpreter {
namespace {

using py::PyRef;

StackEffect Fixed(int pops, int pushes) { return StackEffect{pops, pushes}; }

// The rows. Effects follow CPython's bytecodes.c (3.12) and ceval.c (3.11); where the tracer's
// handler does the work of two instructions, the row says so and the table test adds them up.
std::vector<InstructionRow>* BuildTable() {
  using F = Flow;
  using X = BreakExit;
  auto* t = new std::vector<InstructionRow>{
      {Op::kNop, {"RESUME", "NOP", "CACHE", "EXTENDED_ARG"}, {"RESUME", "NOP", "CACHE", "EXTENDED_ARG"},
       F::kNext, X::kHandBack, [](int, bool) { return Fixed(0, 0); }},
      // 3.11 splits a call's stack effect between PRECALL (-arg) and CALL (-1); the tracer's
      // CALL handler does all of it.
      {Op::kPrecall, {"PRECALL"}, {}, F::kNext, X::kHandBack, [](int, bool) { return Fixed(0, 0); }},
      {Op::kPushNull, {"PUSH_NULL"}, {"PUSH_NULL"}, F::kNext, X::kHandBack, [](int, bool) { return Fixed(0, 1); }},
      {Op::kPopTop, {"POP_TOP"}, {"POP_TOP"}, F::kNext, X::kHandBack, [](int, bool) { return Fixed(1, 0); }},
      {Op::kCopy, {"COPY"}, {"COPY"}, F::kNext, X::kHandBack, [](int n, bool) { return Fixed(n, n + 1); }},
      {Op::kSwap, {"SWAP"}, {"SWAP"}, F::kNext, X::kHandBack, [](int n, bool) { return Fixed(n, n); }},
      {Op::kLoadConst, {"LOAD_CONST"}, {"LOAD_CONST"}, F::kNext, X::kHandBack, [](int, bool) { return Fixed(0, 1); }},
      {Op::kLoadFast, {"LOAD_FAST"}, {"LOAD_FAST", "LOAD_FAST_CHECK"}, F::kNext, X::kHandBack,
       [](int, bool) { return Fixed(0, 1); }},
      {Op::kLoadFastAndClear, {}, {"LOAD_FAST_AND_CLEAR"}, F::kNext, X::kHandBack, [](int, bool) { return Fixed(0, 1); }},
      {Op::kStoreFast, {"STORE_FAST"}, {"STORE_FAST"}, F::kNext, X::kHandBack, [](int, bool) { return Fixed(1, 0); }},
      {Op::kDeleteFast, {"DELETE_FAST"}, {"DELETE_FAST"}, F::kNext, X::kHandBack, [](int, bool) { return Fixed(0, 0); }},
      // The low bit asks for a NULL below the global (a call follows).
      {Op::kLoadGlobal, {"LOAD_GLOBAL"}, {"LOAD_GLOBAL"}, F::kNext, X::kHandBack,
       [](int arg, bool) { return Fixed(0, 1 + (arg & 1)); }},
      {Op::kLoadDeref, {"LOAD_DEREF"}, {"LOAD_DEREF"}, F::kNext, X::kHandBack, [](int, bool) { return Fixed(0, 1); }},
      {Op::kLoadClosure, {"LOAD_CLOSURE"}, {"LOAD_CLOSURE"}, F::kNext, X::kHandBack, [](int, bool) { return Fixed(0, 1); }},
      {Op::kStoreDeref, {"STORE_DEREF"}, {"STORE_DEREF"}, F::kNext, X::kHandBack, [](int, bool) { return Fixed(1, 0); }},
      {Op::kMakeCell, {"MAKE_CELL"}, {"MAKE_CELL"}, F::kNext, X::kHandBack, [](int, bool) { return Fixed(0, 0); }},
      {Op::kCopyFreeVars, {"COPY_FREE_VARS"}, {"COPY_FREE_VARS"}, F::kNext, X::kHandBack, [](int, bool) { return Fixed(0, 0); }},
      // 3.12's LOAD_ATTR with the low bit set is 3.11's LOAD_METHOD: [NULL or function, attribute].
      {Op::kLoadAttr, {"LOAD_ATTR"}, {"LOAD_ATTR"}, F::kNext, X::kHandBack,
       [](int arg, bool) { return Fixed(1, kPython312 ? 1 + (arg & 1) : 1); }},
      {Op::kLoadMethod, {"LOAD_METHOD"}, {}, F::kNext, X::kHandBack, [](int, bool) { return Fixed(1, 2); }},
      // obj.name = value: [value, obj] -> []
      {Op::kStoreAttr, {"STORE_ATTR"}, {"STORE_ATTR"}, F::kNext, X::kHandBack, [](int, bool) { return Fixed(2, 0); }},
      {Op::kBinaryOp, {"BINARY_OP"}, {"BINARY_OP"}, F::kNext, X::kHandBack, [](int, bool) { return Fixed(2, 1); }},
      {Op::kUnaryNegative, {"UNARY_NEGATIVE"}, {"UNARY_NEGATIVE"}, F::kNext, X::kHandBack, [](int, bool) { return Fixed(1, 1); }},
      {Op::kUnaryNot, {"UNARY_NOT"}, {"UNARY_NOT"}, F::kNext, X::kHandBack, [](int, bool) { return Fixed(1, 1); }},
      {Op::kUnaryInvert, {"UNARY_INVERT"}, {"UNARY_INVERT"}, F::kNext, X::kHandBack, [](int, bool) { return Fixed(1, 1); }},
      {Op::kUnaryPositive, {"UNARY_POSITIVE"}, {}, F::kNext, X::kHandBack, [](int, bool) { return Fixed(1, 1); }},
      {Op::kCallIntrinsic1, {}, {"CALL_INTRINSIC_1"}, F::kNext, X::kHandBack, [](int, bool) { return Fixed(1, 1); }},
      {Op::kCompareOp, {"COMPARE_OP"}, {"COMPARE_OP"}, F::kNext, X::kHandBack, [](int, bool) { return Fixed(2, 1); }},
      {Op::kIsOp, {"IS_OP"}, {"IS_OP"}, F::kNext, X::kHandBack, [](int, bool) { return Fixed(2, 1); }},
      {Op::kContainsOp, {"CONTAINS_OP"}, {"CONTAINS_OP"}, F::kNext, X::kHandBack, [](int, bool) { return Fixed(2, 1); }},
      {Op::kPopJumpIfFalse, {"POP_JUMP_FORWARD_IF_FALSE", "POP_JUMP_BACKWARD_IF_FALSE"},
       {"POP_JUMP_IF_FALSE"}, F::kBranch, X::kEscapeJump, [](int, bool) { return Fixed(1, 0); }},
      {Op::kPopJumpIfTrue, {"POP_JUMP_FORWARD_IF_TRUE", "POP_JUMP_BACKWARD_IF_TRUE"},
       {"POP_JUMP_IF_TRUE"}, F::kBranch, X::kEscapeJump, [](int, bool) { return Fixed(1, 0); }},
      // None tests never depend on tensor data: the tracer decides them.
      {Op::kPopJumpIfNone, {"POP_JUMP_FORWARD_IF_NONE", "POP_JUMP_BACKWARD_IF_NONE"},
       {"POP_JUMP_IF_NONE"}, F::kBranch, X::kHandBack, [](int, bool) { return Fixed(1, 0); }},
      {Op::kPopJumpIfNotNone, {"POP_JUMP_FORWARD_IF_NOT_NONE", "POP_JUMP_BACKWARD_IF_NOT_NONE"},
       {"POP_JUMP_IF_NOT_NONE"}, F::kBranch, X::kHandBack, [](int, bool) { return Fixed(1, 0); }},
      {Op::kJump, {"JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT"},
       {"JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT"}, F::kJump, X::kHandBack,
       [](int, bool) { return Fixed(0, 0); }},
      // The condition stays on the stack when the jump is taken, so a tensor condition cannot
      // escape as a popped one does: a break hands back.
      {Op::kJumpIfFalseOrPop, {"JUMP_IF_FALSE_OR_POP"}, {}, F::kBranch, X::kHandBack,
       [](int, bool jumped) { return Fixed(1, jumped ? 1 : 0); }},
      {Op::kJumpIfTrueOrPop, {"JUMP_IF_TRUE_OR_POP"}, {}, F::kBranch, X::kHandBack,
       [](int, bool jumped) { return Fixed(1, jumped ? 1 : 0); }},
      // [NULL or self, callable, args...] -> result
      {Op::kCall, {"CALL"}, {"CALL"}, F::kNext, X::kEscapeCall, [](int argc, bool) { return Fixed(argc + 2, 1); }},
      {Op::kKwNames, {"KW_NAMES"}, {"KW_NAMES"}, F::kNext, X::kHandBack, [](int, bool) { return Fixed(0, 0); }},
      // [NULL, callable, args tuple, kwargs?] -> result. A break hands back: an escape makes
      // calls from CALL's layout only.
      {Op::kCallFunctionEx, {"CALL_FUNCTION_EX"}, {"CALL_FUNCTION_EX"}, F::kNext, X::kHandBack,
       [](int arg, bool) { return Fixed(3 + (arg & 1), 1); }},
      {Op::kBuildTuple, {"BUILD_TUPLE"}, {"BUILD_TUPLE"}, F::kNext, X::kHandBack, [](int n, bool) { return Fixed(n, 1); }},
      {Op::kBuildList, {"BUILD_LIST"}, {"BUILD_LIST"}, F::kNext, X::kHandBack, [](int n, bool) { return Fixed(n, 1); }},
      {Op::kBuildMap, {"BUILD_MAP"}, {"BUILD_MAP"}, F::kNext, X::kHandBack, [](int n, bool) { return Fixed(2 * n, 1); }},
      {Op::kBuildConstKeyMap, {"BUILD_CONST_KEY_MAP"}, {"BUILD_CONST_KEY_MAP"}, F::kNext, X::kHandBack,
       [](int n, bool) { return Fixed(n + 1, 1); }},
      // The container stays in place, `arg` slots down.
      {Op::kListAppend, {"LIST_APPEND"}, {"LIST_APPEND"}, F::kNext, X::kHandBack, [](int, bool) { return Fixed(1, 0); }},
      {Op::kListExtend, {"LIST_EXTEND"}, {"LIST_EXTEND"}, F::kNext, X::kHandBack, [](int, bool) { return Fixed(1, 0); }},
      {Op::kDictUpdate, {"DICT_UPDATE"}, {"DICT_UPDATE"}, F::kNext, X::kHandBack, [](int, bool) { return Fixed(1, 0); }},
      {Op::kDictMerge, {"DICT_MERGE"}, {"DICT_MERGE"}, F::kNext, X::kHandBack, [](int, bool) { return Fixed(1, 0); }},
      {Op::kMapAdd, {"MAP_ADD"}, {"MAP_ADD"}, F::kNext, X::kHandBack, [](int, bool) { return Fixed(2, 0); }},
      {Op::kListToTuple, {"LIST_TO_TUPLE"}, {}, F::kNext, X::kHandBack, [](int, bool) { return Fixed(1, 1); }},
      {Op::kBuildSlice, {"BUILD_SLICE"}, {"BUILD_SLICE"}, F::kNext, X::kHandBack, [](int n, bool) { return Fixed(n, 1); }},
      {Op::kBinarySubscr, {"BINARY_SUBSCR"}, {"BINARY_SUBSCR"}, F::kNext, X::kHandBack, [](int, bool) { return Fixed(2, 1); }},
      {Op::kStoreSubscr, {"STORE_SUBSCR"}, {"STORE_SUBSCR"}, F::kNext, X::kHandBack, [](int, bool) { return Fixed(3, 0); }},
      {Op::kDeleteSubscr, {"DELETE_SUBSCR"}, {"DELETE_SUBSCR"}, F::kNext, X::kHandBack, [](int, bool) { return Fixed(2, 0); }},
      {Op::kBinarySlice, {}, {"BINARY_SLICE"}, F::kNext, X::kHandBack, [](int, bool) { return Fixed(3, 1); }},
      {Op::kStoreSlice, {}, {"STORE_SLICE"}, F::kNext, X::kHandBack, [](int, bool) { return Fixed(4, 0); }},
      {Op::kUnpackSequence, {"UNPACK_SEQUENCE"}, {"UNPACK_SEQUENCE"}, F::kNext, X::kHandBack,
       [](int n, bool) { return Fixed(1, n); }},
      // Low byte: targets before the starred one; high byte: after it.
      {Op::kUnpackEx, {"UNPACK_EX"}, {"UNPACK_EX"}, F::kNext, X::kHandBack,
       [](int arg, bool) { return Fixed(1, (arg & 0xff) + (arg >> 8) + 1); }},
      {Op::kGetIter, {"GET_ITER"}, {"GET_ITER"}, F::kNext, X::kHandBack, [](int, bool) { return Fixed(1, 1); }},
      // An exhausted loop pops the iterator; on 3.12 the handler also does the END_FOR it jumps
      // to (CPython's FOR_ITER skips it), which the table test adds to dis's figure.
      {Op::kForIter, {"FOR_ITER"}, {"FOR_ITER"}, F::kBranch, X::kEscapeForIter,
       [](int, bool jumped) { return jumped ? Fixed(1, 0) : Fixed(0, 1); }},
      {Op::kEndFor, {}, {"END_FOR"}, F::kNext, X::kHandBack, [](int, bool) { return Fixed(2, 0); }},
      // Bit 2: a format spec is on the stack above the value.
      {Op::kFormatValue, {"FORMAT_VALUE"}, {"FORMAT_VALUE"}, F::kNext, X::kHandBack,
       [](int arg, bool) { return Fixed((arg & 0x04) ? 2 : 1, 1); }},
      {Op::kBuildString, {"BUILD_STRING"}, {"BUILD_STRING"}, F::kNext, X::kHandBack, [](int n, bool) { return Fixed(n, 1); }},
      // The code object plus one slot per flag (defaults, kw-defaults, annotations, closure).
      {Op::kMakeFunction, {"MAKE_FUNCTION"}, {"MAKE_FUNCTION"}, F::kNext, X::kHandBack,
       [](int arg, bool) { return Fixed(1 + std::popcount(static_cast<unsigned>(arg & 0x0f)), 1); }},
      {Op::kReturnValue, {"RETURN_VALUE"}, {"RETURN_VALUE"}, F::kReturn, X::kHandBack, [](int, bool) { return Fixed(1, 0); }},
      {Op::kReturnConst, {}, {"RETURN_CONST"}, F::kReturn, X::kHandBack, [](int, bool) { return Fixed(0, 0); }},
      // A generator consumed inside the trace runs straight through: RETURN_GENERATOR pushes the
      // value its first resumption receives (None, from next()), which the POP_TOP after it pops
      // (dis counts 0: CPython pushes it when resuming). YIELD_VALUE hands a value to the
      // consumer and pushes what next() sends back (None).
      {Op::kReturnGenerator, {"RETURN_GENERATOR"}, {"RETURN_GENERATOR"}, F::kNext, X::kHandBack,
       [](int, bool) { return Fixed(0, 1); }},
      {Op::kYieldValue, {"YIELD_VALUE"}, {"YIELD_VALUE"}, F::kNext, X::kHandBack, [](int, bool) { return Fixed(1, 1); }},
      // `yield from`: [iterable] -> [iterator]; SEND [iterator, sent] -> [iterator, next item], or
      // once it is exhausted its return value: 3.11 [value] (and jumps past the loop), 3.12
      // [iterator, value] (and jumps to END_SEND, which leaves [value]).
      {Op::kGetYieldFromIter, {"GET_YIELD_FROM_ITER"}, {"GET_YIELD_FROM_ITER"}, F::kNext, X::kHandBack,
       [](int, bool) { return Fixed(1, 1); }},
      {Op::kSend, {"SEND"}, {"SEND"}, F::kBranch, X::kHandBack,
       [](int, bool jumped) { return jumped && !interpreter::kPython312 ? Fixed(2, 1) : Fixed(2, 2); }},
      {Op::kEndSend, {}, {"END_SEND"}, F::kNext, X::kHandBack, [](int, bool) { return Fixed(2, 1); }},
      // `class` statements: pushes builtins.__build_class__ (trace_objects.cc BuildClass).
      {Op::kLoadBuildClass, {"LOAD_BUILD_CLASS"}, {"LOAD_BUILD_CLASS"}, F::kNext, X::kHandBack,
       [](int, bool) { return Fixed(0, 1); }},
      // [manager] -> [bound __exit__, what __enter__ returned] (trace_with.cc).
      {Op::kBeforeWith, {"BEFORE_WITH"}, {"BEFORE_WITH"}, F::kNext, X::kHandBack, [](int, bool) { return Fixed(1, 2); }},
      // [level, fromlist] -> module; [module] -> [module, attribute] (trace_imports.cc).
      {Op::kImportName, {"IMPORT_NAME"}, {"IMPORT_NAME"}, F::kNext, X::kHandBack, [](int, bool) { return Fixed(2, 1); }},
      {Op::kImportFrom, {"IMPORT_FROM"}, {"IMPORT_FROM"}, F::kNext, X::kHandBack, [](int, bool) { return Fixed(1, 2); }},
      {Op::kStoreGlobal, {"STORE_GLOBAL"}, {"STORE_GLOBAL"}, F::kNext, X::kHandBack, [](int, bool) { return Fixed(1, 0); }},
      // match statements (trace_match.cc): the subject stays, a test result goes on top.
      {Op::kMatchSequence, {"MATCH_SEQUENCE"}, {"MATCH_SEQUENCE"}, F::kNext, X::kHandBack, [](int, bool) { return Fixed(0, 1); }},
      {Op::kMatchMapping, {"MATCH_MAPPING"}, {"MATCH_MAPPING"}, F::kNext, X::kHandBack, [](int, bool) { return Fixed(0, 1); }},
      {Op::kGetLen, {"GET_LEN"}, {"GET_LEN"}, F::kNext, X::kHandBack, [](int, bool) { return Fixed(0, 1); }},
      {Op::kMatchKeys, {"MATCH_KEYS"}, {"MATCH_KEYS"}, F::kNext, X::kHandBack, [](int, bool) { return Fixed(0, 1); }},
      // [subject, class, keyword names] -> attributes or None
      {Op::kMatchClass, {"MATCH_CLASS"}, {"MATCH_CLASS"}, F::kNext, X::kHandBack, [](int, bool) { return Fixed(3, 1); }},
      // Exceptions the traced code raises and catches itself (trace_exceptions.cc).
      {Op::kRaiseVarargs, {"RAISE_VARARGS"}, {"RAISE_VARARGS"}, F::kRaise, X::kHandBack,
       [](int argc, bool) { return Fixed(argc, 0); }},
      // With an argument, the offset below the exception sets the frame's f_lasti (not popped).
      {Op::kReraise, {"RERAISE"}, {"RERAISE"}, F::kRaise, X::kHandBack, [](int, bool) { return Fixed(1, 0); }},
      // The exception becomes the one being handled; below it, the one handled before.
      {Op::kPushExcInfo, {"PUSH_EXC_INFO"}, {"PUSH_EXC_INFO"}, F::kNext, X::kHandBack,
       [](int, bool) { return Fixed(1, 2); }},
      {Op::kCheckExcMatch, {"CHECK_EXC_MATCH"}, {"CHECK_EXC_MATCH"}, F::kNext, X::kHandBack,
       [](int, bool) { return Fixed(2, 2); }},
      {Op::kPopExcept, {"POP_EXCEPT"}, {"POP_EXCEPT"}, F::kNext, X::kHandBack, [](int, bool) { return Fixed(1, 0); }},
      {Op::kBuildSet, {"BUILD_SET"}, {"BUILD_SET"}, F::kNext, X::kHandBack, [](int n, bool) { return Fixed(n, 1); }},
      // The set stays in place, `arg` slots down (trace_sets.cc).
      {Op::kSetAdd, {"SET_ADD"}, {"SET_ADD"}, F::kNext, X::kHandBack, [](int, bool) { return Fixed(1, 0); }},
      {Op::kSetUpdate, {"SET_UPDATE"}, {"SET_UPDATE"}, F::kNext, X::kHandBack, [](int, bool) { return Fixed(1, 0); }},
      // [super, class, self] -> the attribute; the low bit asks for a NULL below it (a call follows).
      {Op::kLoadSuperAttr, {}, {"LOAD_SUPER_ATTR"}, F::kNext, X::kHandBack,
       [](int arg, bool) { return Fixed(3, 1 + (arg & 1)); }},
  };
  return t;
}

}  // namespace

const std::vector<InstructionRow>& InstructionTable() {
  static const std::vector<InstructionRow>* table = BuildTable();
  return *table;
}

const InstructionRow* RowOf(std::string_view opname) {
  static const auto* by_name = [] {
    auto* m = new absl::flat_hash_map<std::string, const InstructionRow*>();
    for (const InstructionRow& row : InstructionTable()) {
      for (std::string_view name : kPython312 ? row.names_312 : row.names_311) {
        m->emplace(std::string(name), &row);
      }
    }
    return m;
  }();
  auto it = by_name->find(std::string(opname));
  return it == by_name->end() ? nullptr : it->second;
}

const InstructionRow& RowOf(Op op) {
  static const auto* by_op = [] {
    auto* m = new absl::flat_hash_map<Op, const InstructionRow*>();
    for (const InstructionRow& row : InstructionTable()) m->emplace(row.op, &row);
    return m;
  }();
  static const InstructionRow unsupported{Op::kUnsupported, {}, {}, Flow::kNext, BreakExit::kHandBack,
                                          [](int, bool) { return Fixed(0, 0); }};
  auto it = by_op->find(op);
  return it == by_op->end() ? unsupported : *it->second;
}

namespace {

// Decoded code, cached per code object: a trace of a loop body decodes each inlined function
// once. It hangs off a co_extra slot of its own, so it neither keeps the code object alive nor
// outlives it: the slot's free function drops it with the code. (A weak reference per code object
// was one more object in gc.get_objects(), which CPython's test_descr counts.)
class DecodeCache {
 public:
  std::shared_ptr<const DecodedCode> Find(PyCodeObject* code) const {
    const auto* held = static_cast<const Held*>(slot_.Get(code));
    return held != nullptr ? *held : nullptr;
  }
  void Put(PyCodeObject* code, std::shared_ptr<const DecodedCode> decoded) {
    if (slot_.Get(code) != nullptr) return;  // decoded meanwhile (Set would leak the old one)
    auto* held = new Held(std::move(decoded));
    if (!slot_.Set(code, held)) delete held;  // not cached
  }

 private:
  using Held = std::shared_ptr<const DecodedCode>;
  static void Free(void* held) { delete static_cast<Held*>(held); }
  cpython::CodeExtraSlot slot_{&Free};
};

}  // namespace

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
    const InstructionRow* row = RowOf(in.opname);
    in.op = row != nullptr ? row->op : Op::kUnsupported;
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
    PyRef depth = PyRef::Steal(PyObject_GetAttrString(entry, "depth"));
    PyRef lasti = PyRef::Steal(PyObject_GetAttrString(entry, "lasti"));
    if (!start || !end || !target || !depth || !lasti) {
      PyErr_Clear();
      return Error(ErrorKind::kRuntime, "unexpected exception-table entry layout");
    }
    decoded->exception_table.push_back(ExceptionHandler{
        static_cast<int>(PyLong_AsLong(start.get())), static_cast<int>(PyLong_AsLong(end.get())),
        static_cast<int>(PyLong_AsLong(target.get())), static_cast<int>(PyLong_AsLong(depth.get())),
        PyObject_IsTrue(lasti.get()) == 1});
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

const ExceptionHandler* HandlerAt(const DecodedCode& code, int offset) {
  // Entries do not overlap (CPython's compiler emits the innermost range only).
  for (const ExceptionHandler& h : code.exception_table) {
    if (offset >= h.start && offset < h.end) return &h;
  }
  return nullptr;
}

}  // namespace dt::interpreter
