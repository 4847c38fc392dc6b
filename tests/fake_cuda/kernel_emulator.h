// tests/fake_cuda/kernel_emulator.h: runs kernels the stand-in NVRTC built for the host.
//
// A launch runs its blocks one after another; a block's threads are fibers (each on its own stack)
// on the calling thread, switched only where CUDA threads wait for each other: __syncthreads (every
// thread of the block still running) and warp shuffles (the warp's threads still running). Each
// thread otherwise runs alone, so a kernel's data races show up as wrong results rather than
// luck. Threads that wait at different barriers (a shuffle in only part of a warp, a
// __syncthreads some threads skip) fail the launch instead of hanging.
#ifndef DYNTRACE_TESTS_FAKE_CUDA_KERNEL_EMULATOR_H_
#define DYNTRACE_TESTS_FAKE_CUDA_KERNEL_EMULATOR_H_

#include <cstdint>
#include <functional>
#include <string>

namespace fake_cuda {

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

// One library the stand-in NVRTC built, loaded, with the hooks emulation_shim.h declares.
struct EmulatedLibrary {
  void* handle = nullptr;
  Dim3* block_idx = nullptr;
  Dim3* block_dim = nullptr;
  Dim3* grid_dim = nullptr;
  const Dim3** thread_idx = nullptr;
};

// Loads the shared library `bytes` (from an emulated image); null with `error` set on failure.
EmulatedLibrary* LoadEmulatedLibrary(const std::string& bytes, std::string* error);

// A kernel entry point of `library`, or null.
void* FindEmulatedKernel(const EmulatedLibrary& library, const char* name);

// The most threads per block kernel `name` of `library` may be launched with: its
// __launch_bounds__, else 1024.
int EmulatedLaunchBound(const EmulatedLibrary& library, const char* name);

// Runs `thread_body` (one CUDA thread's call of the kernel) for every thread of the grid: as
// fibers when the kernel `waits` (may call __syncthreads or shuffle), else one after another.
// Returns false with `error` set when threads of a block deadlock at mismatched barriers.
bool RunGrid(const EmulatedLibrary& library, Dim3 grid, Dim3 block, bool waits,
             const std::function<void()>& thread_body, std::string* error);

}  // namespace fake_cuda

#endif  // DYNTRACE_TESTS_FAKE_CUDA_KERNEL_EMULATOR_H_
