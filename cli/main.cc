// The dyntrace command: `dyntrace [options] script.py args...` or `dyntrace [options] -m module`.
//
// It embeds the CPython dyntrace was built for, registers the dyntrace module as a built-in, and
// lets CPython's own Py_RunMain run the program: sys.argv, sys.path[0], `__main__`, SystemExit
// codes and tracebacks are then exactly those of `python script.py`. Between start-up and
// Py_RunMain it imports dyntrace, applies --log, turns the frame evaluator on for every frame
// outside the standard library (dyntrace.enable) and registers the --stats / --report work with
// atexit, which CPython runs after the program (and after printing an uncaught traceback).
#include <Python.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "cli/options.h"
#include "cli/stats_table.h"
#include "interpreter/py_module.h"
#include "interpreter/py_ref.h"
#include "interpreter/report.h"
#include "local_python/python_config.h"
#include "runtime/log.h"

namespace dt::cli {
namespace {

using interpreter::py::PyRef;

constexpr int kUsageExitCode = 2;  // as python's for a bad command line

// What the atexit callback needs; set once in main before the program runs.
const Options* exit_options = nullptr;

// Runs after the program, inside Py_FinalizeEx's atexit phase (Python objects still usable).
PyObject* AtExit(PyObject*, PyObject*) {
  PyRef module = PyRef::Steal(PyImport_ImportModule("dyntrace"));
  if (!module) return nullptr;
  // Nothing that runs from here on is the user's program.
  PyRef disabled = PyRef::Steal(PyObject_CallMethod(module.get(), "disable", nullptr));
  if (!disabled) PyErr_Clear();
  if (exit_options->stats) {
    PyRef stats = PyRef::Steal(PyObject_CallMethod(module.get(), "stats", nullptr));
    if (!stats || !PyDict_Check(stats.get())) return nullptr;
    const std::string table = FormatStatsTable(SummaryFromDict(stats.get()));
    std::fflush(stdout);
    std::fputs(table.c_str(), stderr);
    std::fflush(stderr);
  }
  if (!exit_options->report_path.empty()) {
    if (absl::Status status = interpreter::WriteReport(exit_options->report_path); !status.ok()) {
      std::fprintf(stderr, "dyntrace: could not write the report: %s\n",
                   std::string(status.message()).c_str());
    } else {
      std::fprintf(stderr, "dyntrace: report written to %s\n", exit_options->report_path.c_str());
    }
  }
  Py_RETURN_NONE;
}

PyMethodDef at_exit_def = {"_dyntrace_command_at_exit", AtExit, METH_NOARGS, nullptr};

// Imports dyntrace, applies the options and registers AtExit. False with a Python error set.
bool PrepareDyntrace(const Options& options) {
  PyRef module = PyRef::Steal(PyImport_ImportModule("dyntrace"));
  if (!module) return false;
  // The module's import read DYNTRACE_LOGS; an explicit --log wins over it.
  if (options.logs_given) {
    if (absl::Status status = log::Configure(options.logs); !status.ok()) {
      PyErr_SetString(PyExc_ValueError, std::string(status.message()).c_str());
      return false;
    }
  }
  PyRef enable = PyRef::Steal(PyObject_GetAttrString(module.get(), "enable"));
  PyRef args = PyRef::Steal(PyTuple_New(0));
  PyObject* cuda_graphs = options.cuda_graphs == "true"    ? Py_True
                          : options.cuda_graphs == "false" ? Py_False
                                                           : nullptr;
  PyRef kwargs = PyRef::Steal(
      cuda_graphs != nullptr
          ? Py_BuildValue("{s:s,s:O,s:O}", "backend", options.backend.c_str(), "fullgraph",
                          options.fullgraph ? Py_True : Py_False, "cuda_graphs", cuda_graphs)
          : Py_BuildValue("{s:s,s:O}", "backend", options.backend.c_str(), "fullgraph",
                          options.fullgraph ? Py_True : Py_False));
  if (!enable || !args || !kwargs) return false;
  PyRef enabled = PyRef::Steal(PyObject_Call(enable.get(), args.get(), kwargs.get()));
  if (!enabled) return false;
  if (options.stats || !options.report_path.empty()) {
    exit_options = &options;
    PyRef callback = PyRef::Steal(PyCFunction_New(&at_exit_def, nullptr));
    PyRef atexit = PyRef::Steal(PyImport_ImportModule("atexit"));
    if (!callback || !atexit) return false;
    PyRef registered =
        PyRef::Steal(PyObject_CallMethod(atexit.get(), "register", "O", callback.get()));
    if (!registered) return false;
  }
  return true;
}

// The Python installation the embedded interpreter takes its standard library (and venv) from.
struct InterpreterChoice {
  std::string program_name;  // becomes sys.executable; CPython finds the stdlib and venv from it
  bool pin_home = false;     // set config.home to the build's prefix
};

bool IsExecutable(const std::string& path) { return !path.empty() && access(path.c_str(), X_OK) == 0; }

// `pythonX.Y` (the version dyntrace was built for) on PATH, or "".
std::string VersionedPythonOnPath() {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return "";
  const std::string name = absl::StrCat("python", DYNTRACE_PYTHON_VERSION);
  for (absl::string_view dir : absl::StrSplit(path, ':', absl::SkipEmpty())) {
    std::string candidate = absl::StrCat(dir, "/", name);
    if (IsExecutable(candidate)) return candidate;
  }
  return "";
}

// DYNTRACE_PYTHON when set; else the interpreter dyntrace was built against, where it still
// exists; else, for a copy moved to another machine (the GPU bundle), the same X.Y found on PATH.
// Only the build's own interpreter pins home: an explicit home disables venv detection, and
// PYTHONHOME, when set, is CPython's to honour.
InterpreterChoice ChooseInterpreter() {
  if (const char* chosen = std::getenv("DYNTRACE_PYTHON"); chosen != nullptr && *chosen) {
    return {chosen, false};
  }
  if (IsExecutable(DYNTRACE_PYTHON_BIN)) {
    const char* home = std::getenv("PYTHONHOME");
    return {DYNTRACE_PYTHON_BIN, (home == nullptr || *home == '\0') &&
                                     std::string(DYNTRACE_PYTHON_PREFIX) == DYNTRACE_PYTHON_BASE_PREFIX};
  }
  std::string on_path = VersionedPythonOnPath();
  return {on_path.empty() ? DYNTRACE_PYTHON_BIN : on_path, false};
}

// A relocated copy (the GPU bundle) ships the extension modules of the CPython it embeds in
// `python-dynload` beside the executable. The other machine's standard library may have some of
// them built into its interpreter instead (Debian and Ubuntu build math, _struct ... in), so
// they would be missing, and its own builds of the rest belong to another libpython; this
// folder goes on the module path ahead of the standard library. Empty when there is none.
std::string BundledExtensionModules() {
  char exe[4096];
  const ssize_t length = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (length <= 0) return "";
  const std::string path(exe, static_cast<size_t>(length));
  std::string dir = absl::StrCat(path.substr(0, path.rfind('/')), "/python-dynload");
  struct stat info;
  return stat(dir.c_str(), &info) == 0 && S_ISDIR(info.st_mode) ? dir : "";
}

// Configures the embedded interpreter to run the program the way `python` would.
PyStatus ConfigureInterpreter(const Options& options, PyConfig& config) {
  PyConfig_InitPythonConfig(&config);
  // Our options are parsed already; Python must not read argv as its own command line.
  config.parse_argv = 0;
  // program_name gives sys.executable the real interpreter (so subprocess.run([sys.executable,
  // ...]) works) and lets CPython find the standard library.
  const InterpreterChoice interpreter = ChooseInterpreter();
  PyStatus status = PyConfig_SetBytesString(&config, &config.program_name, interpreter.program_name.c_str());
  if (PyStatus_Exception(status)) return status;
  if (interpreter.pin_home) {
    status = PyConfig_SetBytesString(&config, &config.home, DYNTRACE_PYTHON_PREFIX);
    if (PyStatus_Exception(status)) return status;
  }
  if (const std::string modules = BundledExtensionModules(); !modules.empty()) {
    // Setting the field replaces what PYTHONPATH would have given, so it is kept first.
    const char* user_path = std::getenv("PYTHONPATH");
    const std::string search = user_path != nullptr && *user_path ? absl::StrCat(user_path, ":", modules) : modules;
    status = PyConfig_SetBytesString(&config, &config.pythonpath_env, search.c_str());
    if (PyStatus_Exception(status)) return status;
  }
  // sys.argv as python sets it: the script path, or "-m" (runpy replaces it with the module's
  // file), followed by the program's arguments.
  std::vector<std::string> program_argv = {options.module.empty() ? options.script : "-m"};
  program_argv.insert(program_argv.end(), options.program_args.begin(), options.program_args.end());
  std::vector<char*> raw;
  for (std::string& a : program_argv) raw.push_back(a.data());
  status = PyConfig_SetBytesArgv(&config, static_cast<Py_ssize_t>(raw.size()), raw.data());
  if (PyStatus_Exception(status)) return status;
  if (options.module.empty()) {
    return PyConfig_SetBytesString(&config, &config.run_filename, options.script.c_str());
  }
  return PyConfig_SetBytesString(&config, &config.run_module, options.module.c_str());
}

int Main(int argc, char** argv) {
  absl::StatusOr<Options> parsed = ParseOptions(argc, argv);
  if (!parsed.ok()) {
    std::fprintf(stderr, "dyntrace: %s\n\n%s", std::string(parsed.status().message()).c_str(),
                 Usage().c_str());
    return kUsageExitCode;
  }
  static const Options options = *std::move(parsed);
  if (options.help) {
    std::fputs(Usage().c_str(), stdout);
    return 0;
  }
  // Stress mode is read from the environment by whoever implements it, so it must be in place
  // before the interpreter (and the program's subprocesses) start.
  if (options.stress) setenv("DYNTRACE_STRESS", "1", /*overwrite=*/1);

  if (PyImport_AppendInittab("dyntrace", PyInit_dyntrace) < 0) {
    std::fputs("dyntrace: could not register the dyntrace module\n", stderr);
    return 1;
  }
  PyConfig config;
  PyStatus status = ConfigureInterpreter(options, config);
  if (!PyStatus_Exception(status)) status = Py_InitializeFromConfig(&config);
  PyConfig_Clear(&config);
  if (PyStatus_Exception(status)) {
    if (PyStatus_IsExit(status)) return status.exitcode;
    Py_ExitStatusException(status);  // prints the message and exits
  }
  if (!PrepareDyntrace(options)) {
    std::fputs("dyntrace: could not start: ", stderr);
    PyErr_Print();
    Py_FinalizeEx();
    return kUsageExitCode;
  }
  return Py_RunMain();
}

}  // namespace
}  // namespace dt::cli

int main(int argc, char** argv) { return dt::cli::Main(argc, argv); }
