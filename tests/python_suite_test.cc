// Runs every test_* function of the Python case files in tests/python/ as a GoogleTest case,
// inside an embedded interpreter with dyntrace built in. Case discovery and the assertion helpers
// live in tests/python/runner.py and testlib.py, so the same files also run under a plain
// `python3 tests/python/runner.py`.
#include <cstdlib>
#include <dirent.h>

#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "interpreter/py_ref.h"
#include "tests/embedded_python.h"

extern "C" const char* __lsan_default_options() { return "detect_leaks=0"; }

namespace {

using dt::py::PyRef;

class PythonCase : public ::testing::Test {
 public:
  explicit PythonCase(PyObject* fn) : fn_(fn) {}
  // A case marked `fn.pending = "why"` (a known gap, see runner.py) is skipped while it fails and
  // fails once it passes, so the mark cannot outlive the gap.
  void TestBody() override {
    PyRef pending = PyRef::Steal(PyObject_GetAttrString(fn_, "pending"));
    if (!pending) PyErr_Clear();
    PyRef result = PyRef::Steal(PyObject_CallNoArgs(fn_));
    const std::string reason = pending && PyUnicode_Check(pending.get()) ? PyUnicode_AsUTF8(pending.get()) : "";
    if (!reason.empty()) {
      if (!result) {
        dt::testing::TakePythonError();
        GTEST_SKIP() << "pending: " << reason;
      }
      FAIL() << "marked pending (" << reason << ") but passes; remove the mark";
    }
    if (!result) {
      PyObject *type, *value, *traceback;
      PyErr_Fetch(&type, &value, &traceback);
      if (IsSkip(type)) {
        PyRef message = PyRef::Steal(value ? PyObject_Str(value) : nullptr);
        if (!message) PyErr_Clear();
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(traceback);
        GTEST_SKIP() << (message ? PyUnicode_AsUTF8(message.get()) : "skipped");
      }
      PyErr_Restore(type, value, traceback);
      FAIL() << dt::testing::TakePythonError();
    }
  }

  // Whether `type` is testlib.SkipTest: the case does not apply on this machine.
  static bool IsSkip(PyObject* type) {
    if (type == nullptr) return false;
    PyRef testlib = PyRef::Steal(PyImport_ImportModule("testlib"));
    PyRef skip = testlib ? PyRef::Steal(PyObject_GetAttrString(testlib.get(), "SkipTest")) : PyRef();
    if (!skip) {
      PyErr_Clear();
      return false;
    }
    return PyErr_GivenExceptionMatches(type, skip.get());
  }

 private:
  PyObject* fn_;  // owned by the collected list, alive for the whole run
};

std::vector<std::string> CaseFiles(const std::string& dir) {
  std::vector<std::string> files;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string name = e->d_name;
      if (name.rfind("test_", 0) == 0 && name.size() > 3 && name.substr(name.size() - 3) == ".py") {
        files.push_back(dir + "/" + name);
      }
    }
    closedir(d);
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  // Compiled kernels go to the test's own directory (Bazel gives tests no usable HOME).
  if (std::getenv("DYNTRACE_CACHE_DIR") == nullptr && std::getenv("TEST_TMPDIR") != nullptr) {
    setenv("DYNTRACE_CACHE_DIR", (std::string(std::getenv("TEST_TMPDIR")) + "/kernel-cache").c_str(), 1);
  }
  const std::string error = dt::testing::StartEmbeddedPython();
  if (!error.empty()) {
    std::fprintf(stderr, "cannot start Python: %s\n", error.c_str());
    return 1;
  }
  const std::string dir = "tests/python";
  PyRun_SimpleString(("import sys; sys.path.insert(0, '" + dir + "')").c_str());
  PyRef runner = PyRef::Steal(PyImport_ImportModule("runner"));
  if (!runner) {
    std::fprintf(stderr, "cannot import runner.py:\n%s\n", dt::testing::TakePythonError().c_str());
    return 1;
  }
  std::vector<PyRef> keep_alive;
  const std::vector<std::string> files = CaseFiles(dir);
  if (files.empty()) {
    std::fprintf(stderr, "no test_*.py files under %s\n", dir.c_str());
    return 1;
  }
  for (const std::string& file : files) {
    PyRef cases = PyRef::Steal(PyObject_CallMethod(runner.get(), "collect", "s", file.c_str()));
    if (!cases) {
      std::fprintf(stderr, "cannot collect %s:\n%s\n", file.c_str(),
                   dt::testing::TakePythonError().c_str());
      return 1;
    }
    const std::string suite = file.substr(dir.size() + 1, file.size() - dir.size() - 4);
    for (Py_ssize_t i = 0; i < PyList_Size(cases.get()); ++i) {
      PyObject* pair = PyList_GetItem(cases.get(), i);
      const std::string name = PyUnicode_AsUTF8(PyTuple_GetItem(pair, 0));
      PyObject* fn = PyTuple_GetItem(pair, 1);
      ::testing::RegisterTest(suite.c_str(), name.c_str(), nullptr, nullptr, file.c_str(), 0,
                              [fn]() -> ::testing::Test* { return new PythonCase(fn); });
    }
    keep_alive.push_back(cases);
  }
  const int rc = RUN_ALL_TESTS();
  keep_alive.clear();
  return rc;
}
