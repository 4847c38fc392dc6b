// The NVRTC corpus check: runs the Python case files that compile graphs with the cpu backend
// under DYNTRACE_NVRTC_CHECK=sm_90, so every graph they build is also printed as CUDA and compiled
// by NVRTC to a CUBIN for sm_90 (jit/nvrtc_check.h); a compile failure fails that graph's Build
// and the case expecting compiled results. The last case asserts that graphs were checked and
// none failed. Needs no GPU; where CUDA's NVRTC is not installed it says so and passes, unless
// DYNTRACE_REQUIRE_NVRTC=1 (set by tools/test.sh where NVRTC is installed).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "gtest/gtest.h"
#include "jit/nvrtc_check.h"
#include "runtime/nvrtc.h"
#include "tests/embedded_python.h"
#include "tests/python_cases.h"

extern "C" const char* __lsan_default_options() { return "detect_leaks=0"; }

namespace {

// The case files exercising the cpu backend (they compile with backend="cpu").
constexpr const char* kCorpus[] = {"test_cpu_backend.py", "test_cuda_codegen.py"};

// Registered after the corpus's cases so that it runs last (Bazel does not shuffle).
class CorpusTotals : public ::testing::Test {
 public:
  void TestBody() override {
  const dt::jit::NvrtcCheckTotals totals = dt::jit::NvrtcCheckCounters();
  std::printf("NVRTC corpus: %lld graph(s) compiled to CUBIN for %s, %lld failure(s), %lld skipped\n",
              static_cast<long long>(totals.checked), std::getenv("DYNTRACE_NVRTC_CHECK"),
              static_cast<long long>(totals.failures), static_cast<long long>(totals.skipped));
  EXPECT_TRUE(totals.unavailable.empty()) << totals.unavailable;
  EXPECT_GT(totals.checked, 0);
  EXPECT_EQ(totals.failures, 0);
  }
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (!dt::ProbeNvrtc().available) {
    // Where CI has NVRTC (tools/test.sh sets DYNTRACE_REQUIRE_NVRTC=1) this is a failure.
    const char* required = std::getenv("DYNTRACE_REQUIRE_NVRTC");
    const bool must_run = required != nullptr && std::string(required) == "1";
    std::printf("%s: CUDA's NVRTC was not found, so generated CUDA kernels are not checked (%s)\n",
                must_run ? "FAILED (DYNTRACE_REQUIRE_NVRTC=1)" : "SKIPPED", dt::ProbeNvrtc().reason.c_str());
    return must_run ? 1 : 0;
  }
  setenv("DYNTRACE_NVRTC_CHECK", "sm_90", 0);
  const std::string error = dt::testing::StartSuiteInterpreter();
  if (!error.empty()) {
    std::fprintf(stderr, "cannot start Python: %s\n", error.c_str());
    return 1;
  }
  const std::string dir = "tests/python";
  std::vector<std::string> files;
  for (const char* file : kCorpus) files.push_back(dir + "/" + file);
  dt::testing::PythonCases cases;
  if (!cases.Register(dir, files)) return 1;
  ::testing::RegisterTest("NvrtcCorpus", "EveryGeneratedCudaKernelCompiled", nullptr, nullptr, __FILE__, __LINE__,
                          []() -> ::testing::Test* { return new CorpusTotals(); });
  return RUN_ALL_TESTS();
}
