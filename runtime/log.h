// Log switches shared by every layer (DYNTRACE_LOGS / --log). Each kind writes to stderr with
// its own "[dyntrace:<kind>]" prefix so logs from several kinds can be told apart and grepped.
#ifndef DYNTRACE_RUNTIME_LOG_H_
#define DYNTRACE_RUNTIME_LOG_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace dt::log {

enum class Kind { kGraph, kGuards, kBreaks, kRecompiles, kKernels, kBytecode, kDynamic, kCount };

// "graph", "guards", ... (the spelling used in DYNTRACE_LOGS and --log).
absl::string_view KindName(Kind kind);

// Replaces the enabled set with the comma-separated kinds in `spec` ("" turns all off, "all"
// turns all on). An unknown kind is an InvalidArgument error naming the valid ones; the switches
// are left unchanged then.
absl::Status Configure(absl::string_view spec);

// Cheap enough for hot paths: one load.
bool Enabled(Kind kind);

// Writes "[dyntrace:<kind>] <header>\n" and then `body` (each body line indented), to stderr.
void Write(Kind kind, absl::string_view header, absl::string_view body = "");

}  // namespace dt::log

#endif  // DYNTRACE_RUNTIME_LOG_H_
