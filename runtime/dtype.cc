#include "runtime/dtype.h"

#include <atomic>

#include "absl/strings/str_format.h"

namespace dt {

namespace {
// Relaxed: set by Python code (under the GIL) and read by ops; no other memory hangs on it.
std::atomic<DType> default_float{DType::kFloat32};
}  // namespace

DType DefaultFloat() { return default_float.load(std::memory_order_relaxed); }

void SetDefaultFloat(DType dtype) { default_float.store(dtype, std::memory_order_relaxed); }

int64_t ItemSize(DType dtype) {
  switch (dtype) {
    case DType::kBool: return 1;
    case DType::kInt32: return 4;
    case DType::kInt64: return 8;
    case DType::kFloat16: return 2;
    case DType::kFloat32: return 4;
    case DType::kFloat64: return 8;
    case DType::kUInt8: return 1;
    case DType::kInt8: return 1;
    case DType::kInt16: return 2;
    case DType::kBFloat16: return 2;
  }
  __builtin_unreachable();
}

const char* CppType(DType dtype) {
  switch (dtype) {
    case DType::kBool: return "bool";
    case DType::kInt32: return "int32_t";
    case DType::kInt64: return "int64_t";
    case DType::kFloat16: return "dt::Half";
    case DType::kFloat32: return "float";
    case DType::kFloat64: return "double";
    case DType::kUInt8: return "uint8_t";
    case DType::kInt8: return "int8_t";
    case DType::kInt16: return "int16_t";
    case DType::kBFloat16: return "dt::BFloat16";
  }
  return "void";
}

absl::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kBool: return "bool";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kFloat16: return "float16";
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
    case DType::kUInt8: return "uint8";
    case DType::kInt8: return "int8";
    case DType::kInt16: return "int16";
    case DType::kBFloat16: return "bfloat16";
  }
  __builtin_unreachable();
}

absl::string_view DTypeScalarName(DType dtype) {
  switch (dtype) {
    case DType::kBool: return "Bool";
    case DType::kInt32: return "Int";
    case DType::kInt64: return "Long";
    case DType::kFloat16: return "Half";
    case DType::kFloat32: return "Float";
    case DType::kFloat64: return "Double";
    case DType::kUInt8: return "Byte";
    case DType::kInt8: return "Char";
    case DType::kInt16: return "Short";
    case DType::kBFloat16: return "BFloat16";
  }
  __builtin_unreachable();
}

absl::StatusOr<DType> DTypeFromName(absl::string_view name) {
  for (DType d : kAllDTypes) {
    if (DTypeName(d) == name) return d;
  }
  if (name == "float" ) return DType::kFloat32;
  if (name == "double") return DType::kFloat64;
  if (name == "half") return DType::kFloat16;
  if (name == "int" ) return DType::kInt32;
  if (name == "long") return DType::kInt64;
  if (name == "short") return DType::kInt16;
  return absl::InvalidArgumentError(absl::StrFormat(
      "unknown dtype '%s' (expected one of bool, uint8, int8, int16, int32, int64, float16, bfloat16, "
      "float32, float64)",
      name));
}

namespace {
// Position in the promotion order inside a category: bool, then integers by width (uint8 and
// int8 share one, PromoteTypes settles that pair), then floats by width (float16 and bfloat16
// share one: PromoteTypes gives float32 for that pair).
int Rank(DType d) {
  switch (d) {
    case DType::kBool: return 0;
    case DType::kUInt8: return 1;
    case DType::kInt8: return 1;
    case DType::kInt16: return 2;
    case DType::kInt32: return 3;
    case DType::kInt64: return 4;
    case DType::kFloat16: return 5;
    case DType::kBFloat16: return 5;
    case DType::kFloat32: return 6;
    case DType::kFloat64: return 7;
  }
  __builtin_unreachable();
}
}  // namespace

DType PromoteTypes(DType a, DType b) {
  if (a == b) return a;
  // Neither of uint8 and int8 (float16 and bfloat16) holds the other's values: PyTorch gives
  // int16 (float32).
  if (Rank(a) == Rank(b)) return IsFloating(a) ? DType::kFloat32 : DType::kInt16;
  // Integers rank below floats, so an integer/float mix yields the float.
  return Rank(a) > Rank(b) ? a : b;
}

bool CanCast(DType from, DType to) {
  if (IsFloating(from) && IsIntegral(to)) return false;
  if (from != DType::kBool && to == DType::kBool) return false;
  return true;
}

namespace {
void Accumulate(std::optional<DType>& slot, DType dtype) {
  slot = slot.has_value() ? PromoteTypes(*slot, dtype) : dtype;
}

// PyTorch's combine_categories: a lower tier only matters when it is of a higher category.
std::optional<DType> CombineCategories(std::optional<DType> higher, std::optional<DType> lower) {
  if (!higher.has_value()) return lower;
  if (!lower.has_value()) return higher;
  if (IsFloating(*higher)) return higher;
  if (*higher == DType::kBool || IsFloating(*lower)) return PromoteTypes(*higher, *lower);
  return higher;
}
}  // namespace

void ResultTypeState::AddTensor(DType dtype, bool zero_dim) {
  Accumulate(zero_dim ? zero_dim_result_ : dim_result_, dtype);
}

void ResultTypeState::AddWrappedNumber(DType number_kind) {
  DType as_tensor = number_kind;
  if (IsFloating(number_kind)) as_tensor = DefaultFloat();
  if (IsIntegral(number_kind)) as_tensor = DType::kInt64;
  Accumulate(wrapped_result_, as_tensor);
}

DType ResultTypeState::Result() const {
  auto result = CombineCategories(dim_result_, CombineCategories(zero_dim_result_, wrapped_result_));
  return result.value_or(DefaultFloat());
}

}  // namespace dt
