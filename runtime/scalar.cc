#include "runtime/scalar.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace dt {

std::string Scalar::ToString() const {
  switch (kind_) {
    case Kind::kBool: return i_ ? "True" : "False";
    case Kind::kInt: return absl::StrCat(i_);
    case Kind::kFloat: return absl::StrFormat("%.17g", d_);
  }
  __builtin_unreachable();
}

}  // namespace dt
