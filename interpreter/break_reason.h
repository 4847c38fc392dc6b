// interpreter/break_reason.h: why a trace stopped, as its own type.
//
// A graph break is not an error: it is the tracer saying "CPython runs this part". It travels
// through the tracer's absl::Status returns as a status carrying a BreakReason payload, so it can
// never be confused with an error of the runtime (whose kUnimplemented means "not implemented")
// or of dyntrace itself; AsBreak recovers it, and anything else is a real error.
#ifndef DYNTRACE_INTERPRETER_BREAK_REASON_H_
#define DYNTRACE_INTERPRETER_BREAK_REASON_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace dt::interpreter {

enum class BreakKind : uint8_t {
  kDataDependent,  // control flow or a value that depends on tensor data (or a run-time number)
  kUnsupported,    // Python the tracer does not follow (a call, an instruction, an object kind)
  kRaises,         // the traced code raises: CPython runs it and raises exactly what it would
  kLimit,          // a size limit of the tracer (trace length, call depth, unrolled loop length)
};

struct BreakReason {
  BreakKind kind = BreakKind::kUnsupported;
  std::string message;
};

// "data-dependent", "unsupported", "raises", "limit": the kind as reports and stats spell it.
absl::string_view BreakKindName(BreakKind kind);

absl::Status MakeBreak(BreakKind kind, absl::string_view message);
// The break a status carries; nullopt for OK and for real errors.
std::optional<BreakReason> AsBreak(const absl::Status& status);

inline absl::Status Unsupported(absl::string_view why) { return MakeBreak(BreakKind::kUnsupported, why); }
inline absl::Status Raises(absl::string_view why) { return MakeBreak(BreakKind::kRaises, why); }
inline absl::Status DataDependent(absl::string_view why) {
  return MakeBreak(BreakKind::kDataDependent, why);
}
inline absl::Status LimitReached(absl::string_view why) { return MakeBreak(BreakKind::kLimit, why); }

}  // namespace dt::interpreter

#endif  // DYNTRACE_INTERPRETER_BREAK_REASON_H_
