#include "interpreter/break_reason.h"

#include "absl/strings/cord.h"

namespace dt::interpreter {
namespace {

// The payload's key; its value is the kind as one byte.
constexpr absl::string_view kBreakPayload = "dyntrace.dev/graph-break";

}  // namespace

absl::string_view BreakKindName(BreakKind kind) {
  switch (kind) {
    case BreakKind::kDataDependent: return "data-dependent";
    case BreakKind::kUnsupported: return "unsupported";
    case BreakKind::kRaises: return "raises";
    case BreakKind::kLimit: return "limit";
  }
  return "unsupported";
}

absl::Status MakeBreak(BreakKind kind, absl::string_view message) {
  absl::Status status(absl::StatusCode::kAborted, message);
  status.SetPayload(kBreakPayload, absl::Cord(std::string(1, static_cast<char>(kind))));
  return status;
}

std::optional<BreakReason> AsBreak(const absl::Status& status) {
  auto payload = status.GetPayload(kBreakPayload);
  if (!payload || payload->size() != 1) return std::nullopt;
  const auto kind = static_cast<BreakKind>(static_cast<uint8_t>((*payload)[0]));
  return BreakReason{kind, std::string(status.message())};
}

}  // namespace dt::interpreter
