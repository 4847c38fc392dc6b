// cli/options.h: the dyntrace command's options, parsed from argv without touching Python.
//
// The command line is `dyntrace [options] (script.py | -m module) [args...]`; parsing stops at
// the script or module, and everything after it belongs to the program (as with `python`).
//
//   absl::StatusOr<dt::cli::Options> options = dt::cli::ParseOptions(argc, argv);
//   if (!options.ok()) { fputs(Usage().c_str(), stderr); return 2; }
#ifndef DYNTRACE_CLI_OPTIONS_H_
#define DYNTRACE_CLI_OPTIONS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace dt::cli {

struct Options {
  std::string backend = "auto";  // --backend (checked by dyntrace.enable(), which knows them)
  std::string cuda_graphs = "auto";  // --cuda-graphs: auto, true or false
  std::string logs;              // --log: comma-separated log kinds ("" = none)
  bool logs_given = false;
  std::string report_path;       // --report FILE.html ("" = no report)
  bool stats = false;            // --stats
  bool fullgraph = false;        // --fullgraph
  bool stress = false;           // --stress: sets DYNTRACE_STRESS=1 before Python starts
  bool help = false;             // --help / -h: print usage, run nothing
  // Exactly one of script / module is set unless `help`.
  std::string script;
  std::string module;
  // The program's own arguments, after the script or module name.
  std::vector<std::string> program_args;
};

// The text --help prints (and, after an error, what goes to stderr).
std::string Usage();

// An InvalidArgument error names the offending option; the caller prints it with Usage().
[[nodiscard]] absl::StatusOr<Options> ParseOptions(int argc, const char* const* argv);

}  // namespace dt::cli

#endif  // DYNTRACE_CLI_OPTIONS_H_
