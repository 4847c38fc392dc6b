// runtime/nvrtc: loading NVRTC without linking it, compiling to CUBIN, and reporting errors with
// NVRTC's log. Skips (with the probe's reason) where CUDA's NVRTC is not installed.
#include "runtime/nvrtc.h"

#include <cstdlib>
#include <string_view>

#include "gtest/gtest.h"

namespace dt {
namespace {

// Where CI has NVRTC (tools/test.sh sets DYNTRACE_REQUIRE_NVRTC=1), a missing NVRTC fails.
bool NvrtcRequired() {
  const char* required = std::getenv("DYNTRACE_REQUIRE_NVRTC");
  return required != nullptr && std::string_view(required) == "1";
}

#define SKIP_WITHOUT_NVRTC()                                                               \
  if (!ProbeNvrtc().available) {                                                         \
    if (NvrtcRequired()) FAIL() << "NVRTC is required but was not found: " << ProbeNvrtc().reason; \
    GTEST_SKIP() << "CUDA's NVRTC was not found: " << ProbeNvrtc().reason;               \
  }

TEST(Nvrtc, ProbeExplainsItself) {
  const NvrtcProbe& probe = ProbeNvrtc();
  EXPECT_EQ(&probe, &ProbeNvrtc()) << "loaded once";
  if (probe.available) {
    EXPECT_TRUE(probe.reason.empty());
    EXPECT_FALSE(probe.library_path.empty());
    auto version = NvrtcVersion();
    ASSERT_TRUE(version.ok()) << version.status();
    EXPECT_GE(version->first, 11);
  } else {
    EXPECT_NE(probe.reason.find("NVRTC"), std::string::npos) << probe.reason;
    EXPECT_FALSE(NvrtcVersion().ok());
    EXPECT_FALSE(CompileCudaToCubin("", "empty", 90).ok());
  }
}

TEST(Nvrtc, OptionsKeepExactMath) {
  const std::vector<std::string> options = NvrtcOptions(90);
  EXPECT_EQ(options[0], "--gpu-architecture=sm_90");
  for (const std::string& o : options) EXPECT_EQ(o.find("fast"), std::string::npos) << o;
}

TEST(Nvrtc, SmallKernelCompilesToElf) {
  SKIP_WITHOUT_NVRTC();
  auto cubin = CompileCudaToCubin(
      "extern \"C\" __global__ void axpy(float a, const float* x, float* y, int n) {\n"
      "  const int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
      "  if (i < n) y[i] = a * x[i] + y[i];\n"
      "}\n",
      "axpy", 90);
  ASSERT_TRUE(cubin.ok()) << cubin.status();
  ASSERT_GT(cubin->size(), 4u);
  EXPECT_EQ(cubin->substr(0, 4), std::string("\x7f" "ELF"));
}

TEST(Nvrtc, SyntaxErrorCarriesTheLog) {
  SKIP_WITHOUT_NVRTC();
  auto cubin = CompileCudaToCubin("__global__ void broken( { this is not C++ }\n", "broken_program", 90);
  ASSERT_FALSE(cubin.ok());
  const std::string message(cubin.status().message());
  EXPECT_NE(message.find("broken_program"), std::string::npos) << message;  // the log names the source
  EXPECT_NE(message.find("error"), std::string::npos) << message;
  EXPECT_NE(message.find("sm_90"), std::string::npos) << message;
}

}  // namespace
}  // namespace dt
