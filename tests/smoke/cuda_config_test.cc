// Checks @local_cuda's generated config and, when a toolkit is present, that
// its headers compile and NVRTC can be opened at run time the way dyntrace
// does it (dlopen, no link-time dependency, no GPU needed).
#include <dlfcn.h>

#include <string>

#include "gtest/gtest.h"
#include "local_cuda/cuda_config.h"

#if DYNTRACE_HAVE_CUDA
#include <cuda.h>
#include <nvrtc.h>
#endif

namespace {

#if DYNTRACE_HAVE_CUDA
TEST(CudaConfig, HeadersAndNvrtc) {
  EXPECT_GT(CUDA_VERSION, 0);
  const std::string lib = std::string(DYNTRACE_CUDA_HOME) + "/lib64/libnvrtc.so";
  void* handle = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) GTEST_SKIP() << "cannot open " << lib << ": " << dlerror();
  using VersionFn = nvrtcResult (*)(int*, int*);
  auto version = reinterpret_cast<VersionFn>(dlsym(handle, "nvrtcVersion"));
  ASSERT_NE(version, nullptr);
  int major = 0, minor = 0;
  ASSERT_EQ(version(&major, &minor), NVRTC_SUCCESS);
  EXPECT_EQ(major, CUDA_VERSION / 1000);
  // No dlclose: NVRTC's static state would then show up as a leak under ASan.
}
#else
TEST(CudaConfig, NoToolkit) { EXPECT_STREQ(DYNTRACE_CUDA_HOME, ""); }
#endif

}  // namespace
