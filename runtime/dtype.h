// runtime/dtype.h: element types and PyTorch's type-promotion lattice.
//
// DType names the six element types dyntrace stores. Promotion follows PyTorch: categories
// bool < integer < floating, the wider type wins inside a category, and ResultType() gives
// dimensioned tensors priority over zero-dim tensors, which beat Python numbers, so that
// `float32_tensor * 2.5` stays float32 while `int32_tensor * 2.5` becomes float32 as well.
//
//   DType t = PromoteTypes(DType::kInt32, DType::kFloat16);  // kFloat16
#ifndef DYNTRACE_RUNTIME_DTYPE_H_
#define DYNTRACE_RUNTIME_DTYPE_H_

#include <cstdint>
#include <optional>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "runtime/convert.h"
#include "runtime/half.h"

namespace dt {

// Later additions (the small integer types, bfloat16) come last so that the values of the first
// six (which index tables such as each op's loops) do not move; promotion does not rely on the order.
enum class DType : uint8_t {
  kBool, kInt32, kInt64, kFloat16, kFloat32, kFloat64, kUInt8, kInt8, kInt16, kBFloat16
};
inline constexpr int kNumDTypes = 10;
inline constexpr DType kAllDTypes[kNumDTypes] = {
    DType::kBool,    DType::kInt32, DType::kInt64, DType::kFloat16, DType::kFloat32,
    DType::kFloat64, DType::kUInt8, DType::kInt8,  DType::kInt16,   DType::kBFloat16};
// The dtype a Python float becomes, and what float factories make without a dtype
// (torch.get_default_dtype()): float32 until SetDefaultFloat changes it. One value for the whole
// process, as in PyTorch; guard sets record it, so code traced under another default is not reused.
DType DefaultFloat();
// REQUIRES: IsFloating(dtype) (the Python binding raises PyTorch's TypeError otherwise).
void SetDefaultFloat(DType dtype);

int64_t ItemSize(DType dtype);
// "float32", as in `dyntrace.float32`.
absl::string_view DTypeName(DType dtype);
// The element type generated kernels store it as ("float", "dt::Half"; runtime/half.h).
const char* CppType(DType dtype);
// PyTorch's capitalised scalar-type name ("Float", "Long") used in its error messages.
absl::string_view DTypeScalarName(DType dtype);
absl::StatusOr<DType> DTypeFromName(absl::string_view name);

inline bool IsFloating(DType d) {
  return d == DType::kFloat16 || d == DType::kBFloat16 || d == DType::kFloat32 ||
         d == DType::kFloat64;
}
// The 16-bit floats: stored narrow, computed in float32 (ComputeType), rounded back on store.
inline bool IsHalfWidthFloat(DType d) { return d == DType::kFloat16 || d == DType::kBFloat16; }
inline bool IsIntegral(DType d) {
  return d == DType::kUInt8 || d == DType::kInt8 || d == DType::kInt16 || d == DType::kInt32 ||
         d == DType::kInt64;
}

// The smallest type both promote to, as PyTorch's table: bool < integers < floats; among integers
// the wider wins, and uint8 with int8 gives int16 (neither holds the other); float16 with bfloat16
// gives float32 (likewise); any integer with any float gives that float.
DType PromoteTypes(DType a, DType b);

// Whether a value of `from` may be written into a tensor of `to` by an in-place op
// (PyTorch's canCast: no float -> integer, no non-bool -> bool).
bool CanCast(DType from, DType to);

// Tracks PyTorch's three priority tiers while the operands of one op are visited.
class ResultTypeState {
 public:
  void AddTensor(DType dtype, bool zero_dim);
  // A Python number: bool, int (-> int64) or float (-> default float).
  void AddWrappedNumber(DType number_kind);
  // REQUIRES: at least one operand was added.
  DType Result() const;

 private:
  std::optional<DType> dim_result_;
  std::optional<DType> zero_dim_result_;
  std::optional<DType> wrapped_result_;
};

// Maps a C++ element type to its DType, and back.
template <typename T>
struct DTypeOf;
template <> struct DTypeOf<bool> { static constexpr DType value = DType::kBool; };
template <> struct DTypeOf<uint8_t> { static constexpr DType value = DType::kUInt8; };
template <> struct DTypeOf<int8_t> { static constexpr DType value = DType::kInt8; };
template <> struct DTypeOf<int16_t> { static constexpr DType value = DType::kInt16; };
template <> struct DTypeOf<int32_t> { static constexpr DType value = DType::kInt32; };
template <> struct DTypeOf<int64_t> { static constexpr DType value = DType::kInt64; };
template <> struct DTypeOf<Half> { static constexpr DType value = DType::kFloat16; };
template <> struct DTypeOf<BFloat16> { static constexpr DType value = DType::kBFloat16; };
template <> struct DTypeOf<float> { static constexpr DType value = DType::kFloat32; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::kFloat64; };

}  // namespace dt

// Calls BODY with `scalar_t` bound to the C++ element type of DTYPE; the caller handles every
// dtype, so a new dtype fails to compile here rather than silently doing nothing.
#define DT_DISPATCH_ALL(DTYPE, ...)                         \
  [&] {                                                     \
    switch (DTYPE) {                                        \
      case ::dt::DType::kBool: {                            \
        using scalar_t = bool;                              \
        return __VA_ARGS__();                               \
      }                                                     \
      case ::dt::DType::kInt32: {                           \
        using scalar_t = int32_t;                           \
        return __VA_ARGS__();                               \
      }                                                     \
      case ::dt::DType::kInt64: {                           \
        using scalar_t = int64_t;                           \
        return __VA_ARGS__();                               \
      }                                                     \
      case ::dt::DType::kFloat16: {                         \
        using scalar_t = ::dt::Half;                        \
        return __VA_ARGS__();                               \
      }                                                     \
      case ::dt::DType::kFloat32: {                         \
        using scalar_t = float;                             \
        return __VA_ARGS__();                               \
      }                                                     \
      case ::dt::DType::kFloat64: {                         \
        using scalar_t = double;                            \
        return __VA_ARGS__();                               \
      }                                                     \
      case ::dt::DType::kUInt8: {                           \
        using scalar_t = uint8_t;                           \
        return __VA_ARGS__();                               \
      }                                                     \
      case ::dt::DType::kInt8: {                            \
        using scalar_t = int8_t;                            \
        return __VA_ARGS__();                               \
      }                                                     \
      case ::dt::DType::kInt16: {                           \
        using scalar_t = int16_t;                           \
        return __VA_ARGS__();                               \
      }                                                     \
      case ::dt::DType::kBFloat16: {                        \
        using scalar_t = ::dt::BFloat16;                    \
        return __VA_ARGS__();                               \
      }                                                     \
    }                                                       \
    __builtin_unreachable();                                \
  }()

#endif  // DYNTRACE_RUNTIME_DTYPE_H_
