#include "graph/op_schema.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace dt {
namespace {

absl::string_view ToAbsl(absl::string_view s) { return s; }

absl::Status SchemaError(absl::string_view text, absl::string_view why) {
  return absl::InternalError(absl::StrFormat("bad op schema \"%s\": %s", ToAbsl(text), ToAbsl(why)));
}

absl::StatusOr<ArgValue> ParseDefault(absl::string_view token, const Param& param) {
  if (token == "None") return ArgValue(None{});
  if (token == "True") return ArgValue(Scalar::Bool(true));
  if (token == "False") return ArgValue(Scalar::Bool(false));
  if (token.size() >= 2 && token.front() == '\'' && token.back() == '\'') {
    return ArgValue(std::string(token.substr(1, token.size() - 2)));
  }
  if (param.type == ParamType::kIntList) {
    int64_t v;
    if (absl::SimpleAtoi(token, &v)) return ArgValue(Dims{v});
  }
  int64_t i;
  if (absl::SimpleAtoi(token, &i) && param.type != ParamType::kFloat) {
    return ArgValue(Scalar::Int(i));
  }
  double d;
  if (absl::SimpleAtod(token, &d)) return ArgValue(Scalar::Float(d));
  return absl::InvalidArgumentError(absl::StrCat("unparsable default '", token, "'"));
}

}  // namespace

int Schema::IndexOf(absl::string_view name) const {
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

absl::StatusOr<Schema> ParseSchema(absl::string_view text_in) {
  absl::string_view text = ToAbsl(text_in);
  Schema schema;
  schema.text = std::string(text);
  const size_t open = text.find('(');
  const size_t arrow = text.find("->");
  const size_t close = arrow == absl::string_view::npos ? arrow : text.rfind(')', arrow);
  if (open == absl::string_view::npos || close == absl::string_view::npos || close < open) {
    return SchemaError(text_in, "expected name(params) -> result");
  }
  schema.name = std::string(absl::StripAsciiWhitespace(text.substr(0, open)));
  absl::string_view result = absl::StripAsciiWhitespace(text.substr(close + 1));
  if (!absl::ConsumePrefix(&result, "->")) return SchemaError(text_in, "missing '->'");
  result = absl::StripAsciiWhitespace(result);
  if (result == "Tensor[]") {
    schema.returns_list = true;
  } else if (absl::ConsumePrefix(&result, "(") && absl::ConsumeSuffix(&result, ")")) {
    // Named results, returned as a named tuple: "(Tensor values, Tensor indices)".
    schema.returns_list = true;
    for (absl::string_view piece : absl::StrSplit(result, ',', absl::SkipWhitespace())) {
      piece = absl::StripAsciiWhitespace(piece);
      if (!absl::ConsumePrefix(&piece, "Tensor ") || piece.empty()) {
        return SchemaError(text_in, "named results must read (Tensor name, ...)");
      }
      schema.result_names.emplace_back(absl::StripAsciiWhitespace(piece));
    }
  } else if (result != "Tensor") {
    return SchemaError(text_in, "result must be Tensor, Tensor[] or (Tensor name, ...)");
  }
  absl::string_view params = text.substr(open + 1, close - open - 1);
  bool keyword_only = false;
  for (absl::string_view piece : absl::StrSplit(params, ',', absl::SkipWhitespace())) {
    piece = absl::StripAsciiWhitespace(piece);
    if (piece == "*") {
      keyword_only = true;
      continue;
    }
    std::vector<absl::string_view> type_and_rest =
        absl::StrSplit(piece, absl::MaxSplits(' ', 1), absl::SkipWhitespace());
    if (type_and_rest.size() != 2) return SchemaError(text_in, "parameter needs a type and name");
    Param param;
    param.keyword_only = keyword_only;
    absl::string_view type = type_and_rest[0];
    if (absl::ConsumeSuffix(&type, "?")) param.optional = true;
    if (type == "Tensor") param.type = ParamType::kTensor;
    else if (type == "Operand") param.type = ParamType::kOperand;
    else if (type == "Scalar") param.type = ParamType::kScalar;
    else if (type == "int") param.type = ParamType::kInt;
    else if (type == "float") param.type = ParamType::kFloat;
    else if (type == "bool") param.type = ParamType::kBool;
    else if (type == "str") param.type = ParamType::kString;
    else if (type == "int[]") param.type = ParamType::kIntList;
    else if (type == "int...") param.type = ParamType::kShape;
    else if (type == "Tensor[]") param.type = ParamType::kTensorList;
    else if (type == "DType") param.type = ParamType::kDType;
    else if (type == "Device") param.type = ParamType::kDevice;
    else return SchemaError(text_in, absl::StrCat("unknown type '", type, "'"));
    std::vector<absl::string_view> name_and_default =
        absl::StrSplit(type_and_rest[1], absl::MaxSplits('=', 1));
    param.name = std::string(absl::StripAsciiWhitespace(name_and_default[0]));
    if (name_and_default.size() == 2) {
      auto value = ParseDefault(absl::StripAsciiWhitespace(name_and_default[1]), param);
      if (!value.ok()) return SchemaError(text_in, value.status().message());
      param.default_value = *value;
    }
    schema.params.push_back(std::move(param));
  }
  return schema;
}

std::string ArgValueToString(const ArgValue& value) {
  struct Visitor {
    std::string operator()(None) const { return "None"; }
    std::string operator()(const Tensor& t) const {
      return absl::StrFormat("Tensor(%s, %s)", t.ShapeString(), DTypeName(t.dtype()));
    }
    std::string operator()(const Scalar& s) const { return s.ToString(); }
    std::string operator()(const Dims& d) const {
      return absl::StrCat("(", absl::StrJoin(d, ", "), d.size() == 1 ? ",)" : ")");
    }
    std::string operator()(DType d) const { return absl::StrCat("dyntrace.", DTypeName(d)); }
    std::string operator()(const Device& d) const { return absl::StrCat("'", d.ToString(), "'"); }
    std::string operator()(const std::vector<Tensor>& ts) const {
      return absl::StrFormat("[%d tensors]", ts.size());
    }
    std::string operator()(const std::string& s) const { return absl::StrCat("'", s, "'"); }
  };
  return std::visit(Visitor{}, value);
}

}  // namespace dt
