#include "jit/kernel_printer.h"

#include <cinttypes>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "graph/reduction.h"
#include "runtime/copy.h"

namespace dt::jit {
namespace {

std::string FloatLiteral(double v, bool single) {
  const char* type = single ? "float" : "double";
  if (std::isnan(v)) return absl::StrFormat("dt::QuietNan<%s>()", type);
  if (std::isinf(v)) return absl::StrFormat("%sdt::Infinity<%s>()", v < 0 ? "-" : "", type);
  return absl::StrFormat(single ? "%af" : "%a", v);
}

}  // namespace

const char* ComputeCppType(DType dtype) { return IsHalfWidthFloat(dtype) ? "float" : CppType(dtype); }

std::string Literal(const Scalar& value, DType dtype) {
  Tensor t = ScalarTensor(value, dtype, Device::Cpu());
  switch (dtype) {
    case DType::kBool: return *t.data_as<bool>() ? "true" : "false";
    case DType::kInt32: return absl::StrCat("int32_t(", *t.data_as<int32_t>(), ")");
    case DType::kInt64: {
      const int64_t v = *t.data_as<int64_t>();
      // INT64_MIN has no literal spelling.
      if (v == INT64_MIN) return "(-INT64_C(9223372036854775807) - 1)";
      return absl::StrCat("INT64_C(", v, ")");
    }
    case DType::kFloat16: return absl::StrFormat("dt::Half::FromBits(0x%04x)", t.data_as<Half>()->bits);
    case DType::kFloat32: return FloatLiteral(*t.data_as<float>(), true);
    case DType::kFloat64: return FloatLiteral(*t.data_as<double>(), false);
    case DType::kUInt8: return absl::StrCat("uint8_t(", int{*t.data_as<uint8_t>()}, ")");
    case DType::kInt8: return absl::StrCat("int8_t(", int{*t.data_as<int8_t>()}, ")");
    case DType::kInt16: return absl::StrCat("int16_t(", *t.data_as<int16_t>(), ")");
    case DType::kBFloat16:
      return absl::StrFormat("dt::BFloat16::FromBits(0x%04x)", t.data_as<BFloat16>()->bits);
  }
  return "";
}

std::string ReductionSpelling::Combine(const std::string& a, const std::string& b) const {
  return absl::StrCat(combiner, "(", a, ", ", b, ")");
}

std::string KernelPrinter::ValueStatement(int i, const std::string& j) const {
  const KernelValue& v = k_.values[i];
  const char* type = CppType(v.dtype);
  switch (v.kind) {
    case ValueKind::kLoad:
      return absl::StrFormat("const %s v%d = %s;", type, i, Element(v.operand, j));
    case ValueKind::kConstant:
      return absl::StrFormat("const %s v%d = %s;", type, i, Literal(v.constant, v.dtype));
    case ValueKind::kCast:
      return absl::StrFormat("const %s v%d = dt::Convert<%s>(v%d);", type, i, type, v.args[0]);
    case ValueKind::kPointwise: {
      // Operands convert to the compute dtype and widen to its arithmetic type, as the eager
      // loops do; the conversions are spelled out only where they change something.
      std::vector<std::string> args;
      for (size_t a = 0; a < v.args.size(); ++a) {
        const DType from = k_.values[v.args[a]].dtype;
        if (v.args.size() == 3 && a == 0) {
          args.push_back(from == DType::kBool ? absl::StrCat("v", v.args[a])
                                              : absl::StrFormat("dt::Convert<bool>(v%d)", v.args[a]));
        } else if (from == v.compute_dtype && !IsHalfWidthFloat(from)) {
          args.push_back(absl::StrCat("v", v.args[a]));
        } else {
          args.push_back(absl::StrFormat("static_cast<%s>(dt::Convert<%s>(v%d))",
                                         ComputeCppType(v.compute_dtype), CppType(v.compute_dtype),
                                         v.args[a]));
        }
      }
      const std::string call =
          absl::StrFormat("dt::scalar::%s(%s)", v.op->pointwise.scalar_fn, absl::StrJoin(args, ", "));
      if (v.dtype == v.compute_dtype && !IsHalfWidthFloat(v.dtype)) {
        return absl::StrFormat("const %s v%d = %s;", type, i, call);
      }
      return absl::StrFormat("const %s v%d = dt::Store<%s>(%s);", type, i, type, call);
    }
    case ValueKind::kReduce:
    case ValueKind::kColumnReduce:
      break;
  }
  return "";
}

std::vector<int> KernelPrinter::FullCone(const std::vector<int>& roots, const std::set<int>& available) const {
  std::set<int> seen;
  std::vector<int> stack = roots;
  while (!stack.empty()) {
    const int i = stack.back();
    stack.pop_back();
    if (k_.values[i].row_level || !seen.insert(i).second) continue;
    if (available.count(i)) continue;
    for (int a : k_.values[i].args) stack.push_back(a);
  }
  // Values are in dependency order, so index order is an evaluation order.
  return std::vector<int>(seen.begin(), seen.end());
}

std::vector<int> KernelPrinter::FullOutputs() const {
  std::vector<int> roots;
  for (const KernelOperand& op : k_.operands) {
    if (op.is_output && !k_.values[op.source].row_level && !IsColumnOutput(op)) roots.push_back(op.source);
  }
  return roots;
}

std::vector<int> KernelPrinter::ColumnReductions() const {
  std::vector<int> columns;
  for (size_t i = 0; i < k_.values.size(); ++i) {
    if (k_.values[i].kind == ValueKind::kColumnReduce) columns.push_back(static_cast<int>(i));
  }
  return columns;
}

std::vector<int> KernelPrinter::Reductions() const {
  std::vector<int> reductions;
  for (size_t r = 0; r < k_.values.size(); ++r) {
    if (k_.values[r].kind == ValueKind::kReduce) reductions.push_back(static_cast<int>(r));
  }
  return reductions;
}

bool KernelPrinter::DependsOnReduction(int i) const {
  std::set<int> seen;
  std::vector<int> stack = {i};
  while (!stack.empty()) {
    const int v = stack.back();
    stack.pop_back();
    if (!seen.insert(v).second) continue;
    if (k_.values[v].kind == ValueKind::kReduce) return true;
    for (int a : k_.values[v].args) stack.push_back(a);
  }
  return false;
}

ReductionSpelling KernelPrinter::SpellReduction(int r) const {
  const KernelValue& v = k_.values[r];
  ReductionSpelling s;
  s.accumulator_type = CppType(v.accumulator_dtype);
  s.identity = Literal(ReductionIdentity(v.op->reduction.combiner, v.accumulator_dtype), v.accumulator_dtype);
  s.combiner = absl::StrCat("dt::scalar::", v.op->reduction.scalar_fn);
  s.input = absl::StrFormat("static_cast<%s>(static_cast<%s>(dt::Convert<%s>(v%d)))", s.accumulator_type,
                            ComputeCppType(v.compute_dtype), CppType(v.compute_dtype), v.args[0]);
  if (!v.op->reduction.order_key_fn.empty() &&
      (v.accumulator_dtype == DType::kFloat32 || v.accumulator_dtype == DType::kFloat64)) {
    s.order_key_combiner = absl::StrCat("dt::scalar::", v.op->reduction.order_key_fn);
    s.order_key_type = v.accumulator_dtype == DType::kFloat32 ? "int32_t" : "int64_t";
  }
  return s;
}

std::string KernelPrinter::ReductionResult(int r, const std::string& acc, const std::string& count) const {
  const KernelValue& v = k_.values[r];
  const char* type = CppType(v.dtype);
  if (v.op->reduction.divides_by_count) {
    // mean: the sum in the result dtype, divided by the count as eager's div(sum, count) does.
    const char* compute = ComputeCppType(v.dtype);
    return absl::StrFormat(
        "const %s v%d = dt::Store<%s>(dt::scalar::div(static_cast<%s>(dt::Convert<%s>(%s)), "
        "static_cast<%s>(dt::Convert<%s>(static_cast<int64_t>(%s)))));",
        type, r, type, compute, type, acc, compute, type, count);
  }
  return absl::StrFormat("const %s v%d = dt::Convert<%s>(%s);", type, r, type, acc);
}

void KernelPrinter::EmitStatements(const std::vector<int>& cone, const std::string& j, const std::string& indent) {
  for (int i : cone) absl::StrAppend(&out_, indent, ValueStatement(i, j), "\n");
}

void KernelPrinter::EmitReadyRowValues(size_t upto, std::vector<bool>& defined, const std::string& indent) {
  for (size_t i = 0; i < upto; ++i) {
    const KernelValue& v = k_.values[i];
    if (defined[i] || !v.row_level || v.kind == ValueKind::kReduce) continue;
    bool ready = true;
    for (int a : v.args) ready = ready && defined[a];
    if (!ready) continue;
    absl::StrAppend(&out_, indent, ValueStatement(static_cast<int>(i), "0"), "\n");
    defined[i] = true;
  }
}

void KernelPrinter::EmitFullStores(const std::string& j, const std::string& indent, const std::set<int>& skip) {
  for (size_t o = 0; o < k_.operands.size(); ++o) {
    const KernelOperand& op = k_.operands[o];
    if (!op.is_output || k_.values[op.source].row_level || IsColumnOutput(op) || skip.count(static_cast<int>(o))) {
      continue;
    }
    absl::StrAppendFormat(&out_, "%s%s = v%d;\n", indent, Element(static_cast<int>(o), j), op.source);
  }
}

std::string RenamedKernel(const std::string& text, const std::string& name, const std::string& new_name) {
  std::string out;
  out.reserve(text.size());
  size_t from = 0;
  for (size_t at = text.find(name); at != std::string::npos; at = text.find(name, at + name.size())) {
    const size_t end = at + name.size();
    const bool starts_word = at == 0 || !(absl::ascii_isalnum(text[at - 1]) || text[at - 1] == '_');
    const bool ends_word = end == text.size() || !absl::ascii_isdigit(text[end]);
    if (!starts_word || !ends_word) continue;
    out.append(text, from, at - from);
    out += new_name;
    from = end;
  }
  out.append(text, from, std::string::npos);
  return out;
}

}  // namespace dt::jit
