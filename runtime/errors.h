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

#endif  // DYNTRACE_RUNTIME_ERRORS_H_
