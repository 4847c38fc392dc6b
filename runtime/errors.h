// runtime/errors.h: which Python exception a failed absl::Status becomes.
//
// Errors travel as absl::Status inside C++; the Python boundary raises the exception named here.
// The kind rides along as a status payload, so the message stays free text and any layer can
// create an error that surfaces as, say, TypeError without knowing about Python.
//
//   return Error(ErrorKind::kShape, "shapes [2, 3] and [4] cannot be broadcast together");
#ifndef DYNTRACE_RUNTIME_ERRORS_H_
#define DYNTRACE_RUNTIME_ERRORS_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace dt {

enum class ErrorKind : uint8_t {
  kValue,           // ValueError: a bad argument value
  kType,            // TypeError: an argument of the wrong type or an unsupported dtype
  kIndex,           // IndexError: a dim or index out of range
  kShape,           // dyntrace.ShapeError (a RuntimeError and a ValueError): shapes disagree
  kZeroDivision,    // ZeroDivisionError: integer division by zero
  kNotImplemented,  // NotImplementedError
  kRuntime,         // RuntimeError: everything else
};

absl::Status Error(ErrorKind kind, absl::string_view message);
// The kind recorded by Error(); statuses from elsewhere map by their code.
ErrorKind KindOf(const absl::Status& status);

}  // namespace dt

// Returns from the enclosing function when `expr` (an absl::Status) is not ok.
#define DT_RETURN_IF_ERROR(expr)                 \
  do {                                           \
    const ::absl::Status dt_status_ = (expr);    \
    if (!dt_status_.ok()) return dt_status_;     \
  } while (false)

#define DT_CONCAT_INNER_(a, b) a##b
#define DT_CONCAT_(a, b) DT_CONCAT_INNER_(a, b)
// `DT_ASSIGN_OR_RETURN(auto x, MaybeX());` declares x from an ok StatusOr or returns its status.
#define DT_ASSIGN_OR_RETURN(lhs, expr) \
  DT_ASSIGN_OR_RETURN_IMPL_(DT_CONCAT_(dt_statusor_, __LINE__), lhs, expr)
#define DT_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(*tmp)

#endif  // DYNTRACE_RUNTIME_ERRORS_H_
