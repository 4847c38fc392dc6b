#include "cli/options.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/log.h"

namespace dt::cli {

std::string Usage() {
  return R"(usage: dyntrace [options] script.py [args...]
       dyntrace [options] -m module [args...]

Runs a Python program as `python` would, with dyntrace's frame evaluator on for every frame
outside the standard library.

options:
  --backend B        auto (default), eager, cpu or cuda
  --cuda-graphs M    auto (default), true or false: replay the cuda backend's launches as
                     CUDA graphs (as dyntrace.jit's cuda_graphs=)
  --log KINDS        comma-separated: graph, guards, breaks, recompiles, kernels, bytecode
                     (or all); logs go to stderr, one [dyntrace:KIND] prefix per kind
  --report FILE.html at exit, write one self-contained HTML report of every compiled frame
  --stats            at exit, print a table of frames, cache hits, recompiles, breaks, kernels
  --fullgraph        a graph break is an error instead of a fallback to CPython
  --stress           set DYNTRACE_STRESS=1 for the program (stress mode)
  -h, --help         show this text

DYNTRACE_LOGS=KINDS does what --log does, in any Python process that imports dyntrace.
DYNTRACE_PYTHON=PATH names the Python (or venv) whose standard library and site-packages the
program gets; by default the one dyntrace was built for, else pythonX.Y on PATH.
)";
}

absl::StatusOr<Options> ParseOptions(int argc, const char* const* argv) {
  Options options;
  int i = 1;
  // Options that take a value accept both `--opt value` and `--opt=value`.
  auto take_value = [&](absl::string_view arg, absl::string_view name,
                        std::string& out) -> absl::StatusOr<bool> {
    if (arg == name) {
      if (i + 1 >= argc) return absl::InvalidArgumentError(absl::StrCat(name, " needs a value"));
      out = argv[++i];
      return true;
    }
    if (absl::StartsWith(arg, absl::StrCat(name, "="))) {
      out = std::string(arg.substr(name.size() + 1));
      return true;
    }
    return false;
  };
  for (; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      options.help = true;
      return options;
    }
    if (arg == "--stats") {
      options.stats = true;
      continue;
    }
    if (arg == "--fullgraph") {
      options.fullgraph = true;
      continue;
    }
    if (arg == "--stress") {
      options.stress = true;
      continue;
    }
    if (arg == "-m") {
      if (i + 1 >= argc) return absl::InvalidArgumentError("-m needs a module name");
      options.module = argv[++i];
      ++i;
      break;
    }
    if (absl::StartsWith(arg, "-m") && arg.size() > 2 && arg[2] != '-') {
      options.module = std::string(arg.substr(2));  // python accepts -mmodule too
      ++i;
      break;
    }
    absl::StatusOr<bool> matched = take_value(arg, "--backend", options.backend);
    if (matched.ok() && !*matched) {
      matched = take_value(arg, "--cuda-graphs", options.cuda_graphs);
      if (matched.ok() && *matched && options.cuda_graphs != "auto" && options.cuda_graphs != "true" &&
          options.cuda_graphs != "false") {
        return absl::InvalidArgumentError(
            absl::StrFormat("--cuda-graphs must be auto, true or false, not '%s'", options.cuda_graphs));
      }
    }
    if (matched.ok() && !*matched) matched = take_value(arg, "--report", options.report_path);
    if (matched.ok() && !*matched) {
      matched = take_value(arg, "--log", options.logs);
      if (matched.ok() && *matched) options.logs_given = true;
    }
    if (!matched.ok()) return matched.status();
    if (*matched) continue;
    if (arg == "--") {
      ++i;
      if (i >= argc) return absl::InvalidArgumentError("no script after --");
      options.script = argv[i++];
      break;
    }
    if (absl::StartsWith(arg, "-") && arg != "-") {
      return absl::InvalidArgumentError(absl::StrFormat("unknown option '%s'", arg));
    }
    options.script = std::string(arg);
    ++i;
    break;
  }
  if (options.script.empty() && options.module.empty()) {
    return absl::InvalidArgumentError("no script or -m module given");
  }
  if (options.module.empty() && options.script == "-") {
    return absl::InvalidArgumentError("reading the program from stdin is not supported; name a script");
  }
  for (; i < argc; ++i) options.program_args.push_back(argv[i]);
  if (options.logs_given) {
    // Checked here so a typo is a usage error before the program runs, not a warning after.
    if (absl::Status status = log::Configure(options.logs); !status.ok()) return status;
  }
  return options;
}

}  // namespace dt::cli
