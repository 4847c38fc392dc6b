#include "runtime/errors.h"

#include <optional>

#include "absl/strings/cord.h"

namespace dt {
namespace {
constexpr absl::string_view kPayloadUrl = "dyntrace/error-kind";

absl::StatusCode CodeFor(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kValue: return absl::StatusCode::kInvalidArgument;
    case ErrorKind::kType: return absl::StatusCode::kInvalidArgument;
    case ErrorKind::kIndex: return absl::StatusCode::kOutOfRange;
    case ErrorKind::kShape: return absl::StatusCode::kInvalidArgument;
    case ErrorKind::kZeroDivision: return absl::StatusCode::kInvalidArgument;
    case ErrorKind::kNotImplemented: return absl::StatusCode::kUnimplemented;
    case ErrorKind::kRuntime: return absl::StatusCode::kInternal;
  }
  __builtin_unreachable();
}
}  // namespace

absl::Status Error(ErrorKind kind, absl::string_view message) {
  absl::Status status(CodeFor(kind), message);
  status.SetPayload(kPayloadUrl, absl::Cord(std::string(1, static_cast<char>(kind))));
  return status;
}

ErrorKind KindOf(const absl::Status& status) {
  auto payload = status.GetPayload(kPayloadUrl);
  if (payload.has_value() && payload->size() == 1) {
    return static_cast<ErrorKind>(std::string(*payload)[0]);
  }
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument: return ErrorKind::kValue;
    case absl::StatusCode::kOutOfRange: return ErrorKind::kIndex;
    case absl::StatusCode::kUnimplemented: return ErrorKind::kNotImplemented;
    default: return ErrorKind::kRuntime;
  }
}

}  // namespace dt
