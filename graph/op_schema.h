// graph/op_schema.h: an op's calling convention, written once as text and parsed at start-up.
//
// A schema reads like a Python signature with types, in PyTorch's style:
//
//   "sum(Tensor input, int[]? dim=None, bool keepdim=False, *, DType? dtype=None) -> Tensor"
//   "sort(Tensor input, int dim=-1, ...) -> (Tensor values, Tensor indices)"
//
// The Python surface parses call arguments against it, the tracer records them against it, and the
// printer shows them with its parameter names, so argument conventions are defined in one place.
// Parameter types:
//   Tensor, Tensor?    a tensor (or None)
//   Operand            a tensor or a Python number (binary ops' second operand)
//   Scalar, Scalar?    a Python number
//   int, int?, float, float?, bool, str
//   int[], int[]?      an int or a sequence of ints
//   int...             a shape given as separate ints or as one sequence (`view(2, 3)`, `view((2, 3))`)
//   Tensor[]           a sequence of tensors
//   DType?, Device?
#ifndef DYNTRACE_GRAPH_OP_SCHEMA_H_
#define DYNTRACE_GRAPH_OP_SCHEMA_H_

#include <optional>
#include <string>
#include "absl/strings/string_view.h"
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/device.h"
#include "runtime/dtype.h"
#include "runtime/scalar.h"
#include "runtime/tensor.h"

namespace dt {

enum class ParamType : uint8_t {
  kTensor,
  kOperand,
  kScalar,
  kInt,
  kFloat,
  kBool,
  kString,
  kIntList,
  kShape,
  kTensorList,
  kDType,
  kDevice,
};

struct None {
  friend bool operator==(None, None) { return true; }
};

// One argument value. Python ints, floats and bools are Scalars (their kind is kept).
using ArgValue = std::variant<None, Tensor, Scalar, Dims, DType, Device, std::vector<Tensor>,
                              std::string>;

struct Param {
  std::string name;
  ParamType type;
  bool optional = false;  // accepts None
  bool keyword_only = false;
  std::optional<ArgValue> default_value;  // absent: the argument is required
};

struct Schema {
  std::string name;
  std::vector<Param> params;
  bool returns_list = false;  // "-> Tensor[]", or named results
  // "-> (Tensor values, Tensor indices)": the names of the results, which Python sees as a named
  // tuple (torch.return_types-like); empty otherwise.
  std::vector<std::string> result_names;
  std::string text;

  // Index of the parameter called `name`, or -1.
  int IndexOf(absl::string_view name) const;
};

[[nodiscard]] absl::StatusOr<Schema> ParseSchema(absl::string_view text);

// The arguments of one call, one per schema parameter, defaults filled in.
class OpArgs {
 public:
  OpArgs() = default;
  explicit OpArgs(std::vector<ArgValue> values) : values_(std::move(values)) {}

  size_t size() const { return values_.size(); }
  const ArgValue& operator[](size_t i) const { return values_[i]; }
  ArgValue& operator[](size_t i) { return values_[i]; }

  bool is_none(size_t i) const { return std::holds_alternative<None>(values_[i]); }
  bool is_tensor(size_t i) const { return std::holds_alternative<Tensor>(values_[i]); }
  // REQUIRES: the argument has the named kind (the schema guarantees it).
  const Tensor& tensor(size_t i) const { return std::get<Tensor>(values_[i]); }
  Scalar scalar(size_t i) const { return std::get<Scalar>(values_[i]); }
  int64_t int_(size_t i) const { return std::get<Scalar>(values_[i]).ToInt(); }
  double float_(size_t i) const { return std::get<Scalar>(values_[i]).ToDouble(); }
  bool bool_(size_t i) const { return std::get<Scalar>(values_[i]).ToBool(); }
  const Dims& ints(size_t i) const { return std::get<Dims>(values_[i]); }
  const std::string& string(size_t i) const { return std::get<std::string>(values_[i]); }
  const std::vector<Tensor>& tensors(size_t i) const {
    return std::get<std::vector<Tensor>>(values_[i]);
  }
  std::optional<DType> dtype(size_t i) const {
    if (is_none(i)) return std::nullopt;
    return std::get<DType>(values_[i]);
  }
  std::optional<Device> device(size_t i) const {
    if (is_none(i)) return std::nullopt;
    return std::get<Device>(values_[i]);
  }

 private:
  std::vector<ArgValue> values_;
};

// Renders an argument the way Python would print it (for graphs and messages).
std::string ArgValueToString(const ArgValue& value);

}  // namespace dt

#endif  // DYNTRACE_GRAPH_OP_SCHEMA_H_
