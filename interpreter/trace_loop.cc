// interpreter/trace_loop.cc: the instruction loop, and the dispatch of each instruction to its
// handler (the handlers live in trace_handlers_*.cc, by family).
#include <Python.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "interpreter/py_str.h"
#include "interpreter/tracer_internal.h"
#include "runtime/log.h"

namespace dt::interpreter::trace {

absl::Status TFrame::Need(size_t n, const Instr& in) const {
  if (stack.size() < n) return Unsupported(absl::StrCat("stack underflow at ", in.opname));
  return absl::OkStatus();
}

absl::Status TFrame::JumpTo(int offset, int skip) {
  auto it = decoded->index_of_offset.find(offset);
  if (it == decoded->index_of_offset.end()) return Unsupported("jump to an unknown offset");
  pc = it->second + skip;
  return absl::OkStatus();
}

namespace {

void LogFrameHeader(const TFrame& f) {
  // A header per traced frame (inlined calls indented), so instruction lines can be attributed.
  log::Write(log::Kind::kBytecode,
             absl::StrFormat("%*s%s %s (%s:%d)%s", f.depth * 2, "", f.is_root ? "tracing" : "inlining",
                             py::Utf8Or(f.code->co_qualname), py::Utf8Or(f.code->co_filename),
                             f.code->co_firstlineno,
                             f.pc > 0 ? absl::StrCat(" from offset ", f.decoded->instrs[f.pc].offset) : ""));
}

void LogInstruction(const TFrame& f, const Instr& in) {
  std::vector<std::string> stack;
  for (const Sym& s : f.stack) stack.push_back(s ? Describe(s) : "?");
  log::Write(log::Kind::kBytecode,
             absl::StrFormat("%*s%4d %-24s %-20s stack=[%s]", f.depth * 2, "", in.offset, in.opname,
                             in.argrepr, absl::StrJoin(stack, ", ")));
}

}  // namespace

absl::StatusOr<Sym> Tracer::RunFrame(TFrame& f) {
  const auto& instrs = f.decoded->instrs;
  if (!f.resume) {
    f.pc = 0;
    if (f.is_root && frame_.start_offset > 0) {
      auto it = f.decoded->index_of_offset.find(frame_.start_offset);
      if (it == f.decoded->index_of_offset.end()) return Unsupported("a segment starting at an unknown offset");
      f.pc = it->second;
    }
  }
  if (log::Enabled(log::Kind::kBytecode)) LogFrameHeader(f);
  while (f.pc < static_cast<int>(instrs.size())) {
    if (++instructions_run_ > kMaxInstructions) return LimitReached("the trace is too long (50000 instructions)");
    const Instr& in = instrs[f.pc];
    if (log::Enabled(log::Kind::kBytecode)) LogInstruction(f, in);
    const int before = f.pc;
    const size_t depth_before = f.stack.size();
    if (f.is_root) {
      snapshot_ = RootSnapshot{true, f.pc, f.stack, f.locals, f.argument_live, f.kw_names,
                               f.kw_names_offset, graph_->nodes().size(), journal_.size(),
                               guards_.size(), grad_mode_, grad_mode_changed_, handled_exceptions_.size(),
                               autocast_, autocast_changed_};
    }
    absl::Status s = f.generator && !f.suspend_at_yield && f.decoded->protected_offsets.contains(in.offset)
                         ? Unsupported("a try/except/finally or with block in a generator the trace runs: CPython runs it")
                         : Step(f, in);
    if (!s.ok()) {
      DT_ASSIGN_OR_RETURN(const bool caught, CatchInFrame(f, in, s));
      if (caught) continue;
      if (fail_line_ < 0) {
        fail_file_ = f.decoded->filename;
        fail_line_ = in.line;
        fail_offset_ = in.offset;
        fail_instruction_ = in.argrepr.empty() ? in.opname : absl::StrCat(in.opname, " ", in.argrepr);
      }
      return s;
    }
    if (f.returned) {
      if (f.is_root) {
        return_offset_ = in.offset;
        return_pushes_value_ = in.op == Op::kReturnValue;
      }
      return f.result;
    }
    CheckStackEffect(f, in, depth_before, before);
    if (f.pc == before) ++f.pc;
    if (f.suspended) return f.yields.back();  // a contextmanager's generator at its yield
  }
  return Unsupported("fell off the end of the code");
}

// Builds with assertions check every handler against its row of the instruction table: a
// handler that pops or pushes what CPython's instruction does not would corrupt the frame state
// rebuilt at the next break.
void Tracer::CheckStackEffect(const TFrame& f, const Instr& in, size_t depth_before, int pc_before) const {
#ifndef NDEBUG
  const interpreter::InstructionRow& row = interpreter::RowOf(in.op);
  const bool jumped = f.pc != pc_before;
  const interpreter::StackEffect effect = row.stack(in.arg, jumped);
  const long expected = static_cast<long>(depth_before) - effect.pops + effect.pushes;
  if (static_cast<long>(f.stack.size()) != expected) {
    std::fprintf(stderr, "dyntrace: the handler of %s (arg %d, %s) left %zu stack values, its row says %ld\n",
                 in.opname.c_str(), in.arg, jumped ? "jumped" : "fell through", f.stack.size(), expected);
    std::abort();
  }
#endif
}

absl::Status Tracer::Step(TFrame& f, const Instr& in) {
  auto& st = f.stack;
  DT_RETURN_IF_ERROR(MaterialiseOperands(f, in));
  switch (in.op) {
    case Op::kNop:
    case Op::kPrecall: return absl::OkStatus();
    case Op::kPushNull: st.push_back(MakeSym(SymKind::kNull)); return absl::OkStatus();
    case Op::kPopTop:
      DT_RETURN_IF_ERROR(f.Need(1, in));
      f.Pop();
      return absl::OkStatus();
    case Op::kCopy:
      DT_RETURN_IF_ERROR(f.Need(in.arg, in));
      st.push_back(st[st.size() - in.arg]);
      return absl::OkStatus();
    case Op::kSwap:
      DT_RETURN_IF_ERROR(f.Need(in.arg, in));
      std::swap(st.back(), st[st.size() - in.arg]);
      return absl::OkStatus();
    case Op::kLoadConst: st.push_back(ConstSym(in.argval)); return absl::OkStatus();
    case Op::kLoadFast: return DoLoadFast(f, in);
    case Op::kLoadFastAndClear: return DoLoadFastAndClear(f, in);
    case Op::kStoreFast: return DoStoreFast(f, in);
    case Op::kDeleteFast: return DoDeleteFast(f, in);
    case Op::kLoadGlobal: return DoLoadGlobal(f, in);
    case Op::kMakeCell: return DoMakeCell(f, in);
    case Op::kCopyFreeVars: return DoCopyFreeVars(f, in);
    case Op::kLoadClosure: return DoLoadFast(f, in);  // the cell itself, as a local
    case Op::kLoadDeref: return DoLoadDeref(f, in);
    case Op::kStoreDeref: return DoStoreDeref(f, in);
    case Op::kLoadAttr:
    case Op::kLoadMethod: return DoLoadAttr(f, in);
    case Op::kStoreAttr: return DoStoreAttr(f, in);
    case Op::kBinaryOp: return DoBinaryOp(f, in);
    case Op::kUnaryNegative:
    case Op::kUnaryPositive:
    case Op::kUnaryInvert: return DoUnary(f, in);
    case Op::kUnaryNot: return DoUnaryNot(f, in);
    case Op::kCallIntrinsic1: return DoCallIntrinsic1(f, in);
    case Op::kCompareOp: return DoCompareOp(f, in);
    case Op::kIsOp: return DoIsOp(f, in);
    case Op::kContainsOp: return DoContainsOp(f, in);
    case Op::kPopJumpIfFalse:
    case Op::kPopJumpIfTrue: return DoPopJumpIf(f, in);
    case Op::kPopJumpIfNone:
    case Op::kPopJumpIfNotNone: return DoPopJumpIfNone(f, in);
    case Op::kJumpIfFalseOrPop:
    case Op::kJumpIfTrueOrPop: return DoJumpIfOrPop(f, in);
    case Op::kJump: return f.JumpTo(static_cast<int>(PyLong_AsLong(in.argval.get())));
    case Op::kKwNames: return DoKwNames(f, in);
    case Op::kCall: return DoCall(f, in);
    case Op::kCallFunctionEx: return DoCallFunctionEx(f, in);
    case Op::kBuildTuple:
    case Op::kBuildList: return DoBuildSequence(f, in);
    case Op::kBuildMap: return DoBuildMap(f, in);
    case Op::kBuildConstKeyMap: return DoBuildConstKeyMap(f, in);
    case Op::kListAppend:
    case Op::kListExtend: return DoListAppendOrExtend(f, in);
    case Op::kDictUpdate:
    case Op::kDictMerge: return DoDictUpdate(f, in);
    case Op::kMapAdd: return DoMapAdd(f, in);
    case Op::kListToTuple: return DoListToTuple(f, in);
    case Op::kBuildSlice: return DoBuildSlice(f, in);
    case Op::kBinarySubscr: return DoBinarySubscr(f, in);
    case Op::kBinarySlice: return DoBinarySlice(f, in);
    case Op::kStoreSubscr:
    case Op::kStoreSlice: return DoStoreSubscr(f, in);
    case Op::kDeleteSubscr: return DoDeleteSubscr(f, in);
    case Op::kUnpackSequence: return DoUnpackSequence(f, in);
    case Op::kUnpackEx: return DoUnpackEx(f, in);
    case Op::kGetIter: return DoGetIter(f, in);
    case Op::kForIter: return DoForIter(f, in);
    case Op::kEndFor:
      DT_RETURN_IF_ERROR(f.Need(2, in));
      f.Pop();
      f.Pop();
      return absl::OkStatus();
    case Op::kFormatValue: return DoFormatValue(f, in);
    case Op::kBuildString: return DoBuildString(f, in);
    case Op::kMakeFunction: return DoMakeFunction(f, in);
    case Op::kReturnValue:
    case Op::kReturnConst: return DoReturn(f, in);
    case Op::kReturnGenerator:
      if (!f.generator) return Unsupported("RETURN_GENERATOR outside a generator run by the trace");
      st.push_back(ConstSym(PyRef::Borrow(Py_None)));
      return absl::OkStatus();
    case Op::kYieldValue: return DoYieldValue(f, in);
    case Op::kGetYieldFromIter: return DoGetYieldFromIter(f, in);
    case Op::kSend: return DoSend(f, in);
    case Op::kEndSend: return DoEndSend(f, in);
    case Op::kLoadBuildClass: return DoLoadBuildClass(f, in);
    case Op::kBeforeWith: return DoBeforeWith(f, in);
    case Op::kLoadSuperAttr: return DoLoadSuperAttr(f, in);
    case Op::kBuildSet: return DoBuildSet(f, in);
    case Op::kImportName: return DoImportName(f, in);
    case Op::kImportFrom: return DoImportFrom(f, in);
    case Op::kStoreGlobal: return DoStoreGlobal(f, in);
    case Op::kMatchSequence:
    case Op::kMatchMapping: return DoMatchKind(f, in);
    case Op::kGetLen: return DoGetLen(f, in);
    case Op::kMatchKeys: return DoMatchKeys(f, in);
    case Op::kMatchClass: return DoMatchClass(f, in);
    case Op::kSetAdd:
    case Op::kSetUpdate: return DoSetAddOrUpdate(f, in);
    case Op::kRaiseVarargs: return DoRaiseVarargs(f, in);
    case Op::kReraise: return DoReraise(f, in);
    case Op::kPushExcInfo: return DoPushExcInfo(f, in);
    case Op::kCheckExcMatch: return DoCheckExcMatch(f, in);
    case Op::kPopExcept: return DoPopExcept(f, in);
    case Op::kUnsupported:
      return Unsupported(absl::StrCat("instruction ", in.opname, " is not supported by the tracer"));
  }
  __builtin_unreachable();
}

}  // namespace dt::interpreter::trace
