// runtime/scalar.h: a Python number (bool, int or float) held without a tensor.
//
// Scalars keep their kind because type promotion depends on it: `x + 1` and `x + 1.0` differ
// for an integer x.
//
//   Scalar s = Scalar::Int(3);  s.ToDouble() == 3.0;  s.kind() == Scalar::Kind::kInt
#ifndef DYNTRACE_RUNTIME_SCALAR_H_
#define DYNTRACE_RUNTIME_SCALAR_H_

#include <cstdint>
#include <string>

#include "runtime/dtype.h"

namespace dt {

class Scalar {
 public:
  enum class Kind : uint8_t { kBool, kInt, kFloat };

  Scalar() : Scalar(Int(0)) {}
  static Scalar Bool(bool v) { Scalar s(Kind::kBool); s.i_ = v; return s; }
  static Scalar Int(int64_t v) { Scalar s(Kind::kInt); s.i_ = v; return s; }
  static Scalar Float(double v) { Scalar s(Kind::kFloat); s.d_ = v; return s; }

  Kind kind() const { return kind_; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_bool() const { return kind_ == Kind::kBool; }

  double ToDouble() const { return kind_ == Kind::kFloat ? d_ : static_cast<double>(i_); }
  int64_t ToInt() const { return kind_ == Kind::kFloat ? static_cast<int64_t>(d_) : i_; }
  bool ToBool() const { return kind_ == Kind::kFloat ? d_ != 0.0 : i_ != 0; }

  // The dtype a Python number of this kind has as a wrapped operand: bool, int64 or float64
  // (ResultTypeState narrows float to the default float).
  DType NaturalDType() const {
    switch (kind_) {
      case Kind::kBool: return DType::kBool;
      case Kind::kInt: return DType::kInt64;
      case Kind::kFloat: return DType::kFloat64;
    }
    __builtin_unreachable();
  }

  template <typename T>
  T To() const {
    if (kind_ == Kind::kFloat) return static_cast<T>(d_);
    if constexpr (std::is_same_v<T, Half>) return Half(static_cast<float>(i_));
    else if constexpr (std::is_same_v<T, BFloat16>) return BFloat16(static_cast<float>(i_));
    else return static_cast<T>(i_);
  }

  std::string ToString() const;

 private:
  explicit Scalar(Kind kind) : kind_(kind) {}
  Kind kind_;
  int64_t i_ = 0;
  double d_ = 0.0;
};

}  // namespace dt

#endif  // DYNTRACE_RUNTIME_SCALAR_H_
