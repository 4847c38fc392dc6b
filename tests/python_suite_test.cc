// Runs every test_* function of the Python case files in tests/python/ as a GoogleTest case,
// inside an embedded interpreter with dyntrace built in (see tests/python_cases.h).
#include <cstdlib>
#include <string>

#include "gtest/gtest.h"
#include "tests/embedded_python.h"
#include "tests/python_cases.h"

extern "C" const char* __lsan_default_options() { return "detect_leaks=0"; }

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const std::string error = dt::testing::StartSuiteInterpreter();
  if (!error.empty()) {
    std::fprintf(stderr, "cannot start Python: %s\n", error.c_str());
    return 1;
  }
  const std::string dir = "tests/python";
  dt::testing::PythonCases cases;
  if (!cases.Register(dir, dt::testing::CaseFiles(dir))) return 1;
  return RUN_ALL_TESTS();
}
