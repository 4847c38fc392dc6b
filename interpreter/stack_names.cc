#include "interpreter/stack_names.h"

#include <deque>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "interpreter/py_str.h"

namespace dt::interpreter {
namespace {

using Names = std::vector<std::string>;

// The name an instruction's operand refers to (a local, global or attribute), if it has one.
std::optional<std::string> NameOperand(const Instr& in) {
  if (in.argval && PyUnicode_Check(in.argval.get())) return py::Utf8(in.argval.get());
  return std::nullopt;
}

// `f(a, b)` from what CALL pops: [NULL, f, args...] or [method, self, args...].
std::string CallName(const Names& popped) {
  if (popped.size() < 2) return "a call's result";
  const std::string& callee = popped[0] == "NULL" ? popped[1] : popped[0];
  std::string args;
  for (size_t i = 2; i < popped.size(); ++i) absl::StrAppend(&args, i > 2 ? ", " : "", popped[i]);
  return absl::StrCat(callee, "(", args, ")");
}

// What `in` pushes, named from the names of what it pops (`popped`, bottom first).
Names PushedNames(const Instr& in, const Names& popped, int pushes) {
  const auto operand = [&](size_t i) { return i < popped.size() ? popped[i] : std::string("?"); };
  std::string top;
  switch (in.op) {
    case Op::kLoadFast:
    case Op::kLoadFastAndClear:
    case Op::kLoadGlobal:
    case Op::kLoadDeref:
    case Op::kLoadClosure: top = NameOperand(in).value_or(in.argrepr); break;
    case Op::kLoadConst: top = in.argrepr; break;
    case Op::kLoadAttr:
    case Op::kLoadMethod: top = absl::StrCat(operand(0), ".", NameOperand(in).value_or("?")); break;
    case Op::kGetIter: top = absl::StrCat("iter(", operand(0), ")"); break;
    case Op::kForIter: top = absl::StrCat("next(", operand(0), ")"); break;
    case Op::kBinarySubscr: top = absl::StrCat(operand(0), "[", operand(1), "]"); break;
    case Op::kPushNull: top = "NULL"; break;
    case Op::kCall: top = CallName(popped); break;
    case Op::kBinaryOp:
    case Op::kCompareOp: top = absl::StrCat("(", operand(0), " ", in.argrepr, " ", operand(1), ")"); break;
    default: top = absl::StrCat("the value of ", in.opname, " at line ", in.line); break;
  }
  Names pushed(pushes, top);
  if (pushes == 2 && in.op == Op::kLoadGlobal) pushed[0] = "NULL";  // NULL + global
  if (pushes == 2 && (in.op == Op::kLoadMethod || in.op == Op::kLoadAttr)) pushed[1] = operand(0);
  return pushed;
}

// The stack after `in`, from the stack before it; nullopt where the row does not fit.
std::optional<Names> Apply(const Instr& in, const Names& before, bool jumped) {
  if (in.op == Op::kCopy || in.op == Op::kSwap) {
    if (in.arg < 1 || static_cast<size_t>(in.arg) > before.size()) return std::nullopt;
    Names after = before;
    if (in.op == Op::kCopy) {
      after.push_back(before[before.size() - in.arg]);
    } else {
      std::swap(after.back(), after[after.size() - in.arg]);
    }
    return after;
  }
  const StackEffect effect = RowOf(in.op).stack(in.arg, jumped);
  if (effect.pops < 0 || static_cast<size_t>(effect.pops) > before.size()) return std::nullopt;
  Names after(before.begin(), before.end() - effect.pops);
  const Names popped(before.end() - effect.pops, before.end());
  // FOR_ITER keeps its iterator: it pops nothing and names the item after it.
  const Names& operands = in.op == Op::kForIter ? Names{before.empty() ? "?" : before.back()} : popped;
  for (std::string& name : PushedNames(in, operands, effect.pushes)) after.push_back(std::move(name));
  return after;
}

// Gives each repeated name its slot, so two slots never print alike.
void MakeUnique(Names& names) {
  absl::flat_hash_map<std::string, int> count;
  for (const std::string& n : names) ++count[n];
  for (size_t i = 0; i < names.size(); ++i) {
    if (count[names[i]] > 1) names[i] = absl::StrCat(names[i], " (stack slot ", i, ")");
  }
}

}  // namespace

std::vector<std::string> StackNamesAt(const DecodedCode& code, int offset, int depth) {
  const auto target = code.index_of_offset.find(offset);
  if (target == code.index_of_offset.end() || code.instrs.empty()) return {};
  std::vector<std::optional<Names>> at(code.instrs.size());
  std::deque<int> work;
  const auto reach = [&](int index, Names names) {
    if (index < 0 || static_cast<size_t>(index) >= at.size() || at[index]) return;
    at[index] = std::move(names);
    work.push_back(index);
  };
  reach(0, {});
  while (!work.empty() && !at[target->second]) {
    const int i = work.front();
    work.pop_front();
    const Instr& in = code.instrs[i];
    if (in.op == Op::kUnsupported) continue;  // no stack effect known: this path ends here
    const Flow flow = RowOf(in.op).flow;
    if (flow == Flow::kReturn || flow == Flow::kRaise) continue;
    if (flow == Flow::kNext || flow == Flow::kBranch) {
      if (auto after = Apply(in, *at[i], /*jumped=*/false)) reach(i + 1, std::move(*after));
    }
    if ((flow == Flow::kJump || flow == Flow::kBranch) && in.argval && PyLong_Check(in.argval.get())) {
      const auto jump = code.index_of_offset.find(static_cast<int>(PyLong_AsLong(in.argval.get())));
      if (jump == code.index_of_offset.end()) continue;
      const int skip = in.op == Op::kForIter && kPython312 ? 1 : 0;  // past END_FOR, as the tracer
      if (auto after = Apply(in, *at[i], /*jumped=*/true)) reach(jump->second + skip, std::move(*after));
    }
  }
  std::optional<Names>& found = at[target->second];
  if (!found || static_cast<int>(found->size()) != depth) return {};
  MakeUnique(*found);
  return std::move(*found);
}

}  // namespace dt::interpreter
