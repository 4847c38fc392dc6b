// interpreter/bytecode.h: CPython 3.11/3.12 bytecode as the tracer reads it.
//
// Code is decoded with the running interpreter's own `dis`, so opcode numbers and jump targets
// are never hard-coded. Each instruction the tracer handles has one row in the instruction
// table: its names on 3.11 and on 3.12, what it pops and pushes, and how control leaves it. The
// table is the single description the tracer's handlers, its break logic and the tests share:
// tests/python/test_instruction_table.py checks every row against `dis.stack_effect`, and builds
// with assertions check that each handler moves the stack exactly as its row says.
#ifndef DYNTRACE_INTERPRETER_BYTECODE_H_
#define DYNTRACE_INTERPRETER_BYTECODE_H_

#include <Python.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "interpreter/py_ref.h"

namespace dt::interpreter {

inline constexpr bool kPython312 = PY_VERSION_HEX >= 0x030C0000;

enum class Op : uint8_t {
  kNop, kPrecall, kPushNull, kPopTop, kCopy, kSwap, kLoadConst, kLoadFast, kLoadFastAndClear,
  kStoreFast, kDeleteFast, kLoadGlobal, kLoadDeref, kLoadClosure, kStoreDeref, kMakeCell,
  kCopyFreeVars, kLoadAttr, kLoadMethod, kStoreAttr, kBinaryOp, kUnaryNegative, kUnaryNot, kUnaryInvert,
  kUnaryPositive, kCallIntrinsic1, kCompareOp, kIsOp, kContainsOp, kPopJumpIfFalse,
  kPopJumpIfTrue, kPopJumpIfNone, kPopJumpIfNotNone, kJump, kJumpIfFalseOrPop, kJumpIfTrueOrPop,
  kCall, kKwNames, kCallFunctionEx, kBuildTuple, kBuildList, kBuildMap, kBuildConstKeyMap,
  kListAppend, kListExtend, kDictUpdate, kDictMerge, kMapAdd, kListToTuple, kBuildSlice,
  kBinarySubscr, kStoreSubscr, kDeleteSubscr, kBinarySlice, kStoreSlice, kUnpackSequence, kUnpackEx, kGetIter,
  kForIter, kEndFor, kFormatValue, kBuildString, kMakeFunction, kReturnValue, kReturnConst,
  kReturnGenerator, kYieldValue, kGetYieldFromIter, kSend, kEndSend, kLoadBuildClass, kBeforeWith, kLoadSuperAttr, kBuildSet, kSetAdd, kSetUpdate, kImportName, kImportFrom, kStoreGlobal,
  kMatchSequence, kMatchMapping, kGetLen, kMatchKeys, kMatchClass,
  kRaiseVarargs, kReraise, kPushExcInfo, kCheckExcMatch, kPopExcept,
  kUnsupported,  // every instruction without a row: the trace stops there
};

// How control leaves an instruction.
enum class Flow : uint8_t {
  kNext,    // falls through
  kJump,    // always jumps
  kBranch,  // jumps or falls through
  kReturn,  // returns from the frame
  kRaise,   // raises: control goes to the frame's exception table (or out of the frame)
};

// What a graph break at the instruction does. Every break can hand the rest of the frame back
// to CPython; some instructions can instead escape: run just that instruction on real values and
// continue in a new compiled segment after it.
enum class BreakExit : uint8_t {
  kHandBack,
  kEscapeJump,     // a truth test of a tensor (or run-time number): decided on the real value
  kEscapeForIter,  // the next item of an iterator known only at run time
  kEscapeCall,     // a call the trace cannot follow: made on real values
};

struct StackEffect {
  int pops = 0;
  int pushes = 0;
};

struct InstructionRow {
  Op op;
  std::vector<std::string_view> names_311;
  std::vector<std::string_view> names_312;
  Flow flow;
  BreakExit exit;
  // What the tracer's handler pops and pushes for argument `arg`, after jumping or not.
  StackEffect (*stack)(int arg, bool jumped);
};

// Every row; an instruction name appears in at most one row per version.
const std::vector<InstructionRow>& InstructionTable();
// The row of an opcode name on the running version; null for instructions without one.
const InstructionRow* RowOf(std::string_view opname);
const InstructionRow& RowOf(Op op);

struct Instr {
  Op op;
  std::string opname;
  int arg = 0;
  py::PyRef argval;
  std::string argrepr;
  int offset = 0;
  int line = -1;
};

// One row of a code object's exception table: an exception raised at an offset in [start, end)
// goes to `target` with the value stack cut to `depth` values (plus the raising instruction's
// offset when `lasti`), then the exception.
struct ExceptionHandler {
  int start = 0;
  int end = 0;
  int target = 0;
  int depth = 0;
  bool lasti = false;
};

struct DecodedCode {
  std::vector<Instr> instrs;
  absl::flat_hash_map<int, int> index_of_offset;
  std::string filename;
  std::vector<std::string> binary_ops;  // dis._nb_ops names by BINARY_OP argument
  // Offsets inside try/except/finally and with bodies (exception-table ranges whose handler
  // starts with PUSH_EXC_INFO; comprehension cleanup handlers do not count). The root frame and
  // inlined calls trace them: a handler runs only when something raises, and a raise stops the
  // trace, so CPython runs that instruction and its own exception table finds the handler. A
  // generator run straight through does not (its `finally` would also run when it is closed).
  absl::flat_hash_set<int> protected_offsets;
  std::vector<ExceptionHandler> exception_table;  // every entry, in the table's order
};

// The handler of an exception raised at `offset`; null when it leaves the frame.
const ExceptionHandler* HandlerAt(const DecodedCode& code, int offset);

// Decoded once per live code object (held in a co_extra slot of its own, freed with the code).
absl::StatusOr<std::shared_ptr<const DecodedCode>> Decode(PyCodeObject* code);

}  // namespace dt::interpreter

#endif  // DYNTRACE_INTERPRETER_BYTECODE_H_
