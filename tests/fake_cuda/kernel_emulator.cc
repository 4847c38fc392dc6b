#include "tests/fake_cuda/kernel_emulator.h"

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

// Saves the callee-saved registers on the running stack, stores its pointer at *save, and resumes
// the stack `load` (one this function saved, or a fresh one PrepareStack built). glibc's
// swapcontext also saves the signal mask, a system call per switch: most of a launch's time.
extern "C" void fake_cuda_switch_stack(void** save, void* load);
#if !defined(__x86_64__)
#error "the kernel emulator's stack switch is written for x86-64"
#endif
asm(R"(
  .text
  .p2align 4
  .type fake_cuda_switch_stack, @function
fake_cuda_switch_stack:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size fake_cuda_switch_stack, .-fake_cuda_switch_stack
)");

namespace fake_cuda {
namespace {

constexpr size_t kStackBytes = 64 * 1024;
constexpr unsigned kWarpSize = 32;

enum class FiberState { kRunnable, kAtSync, kAtShuffle, kDone };

// A fresh stack for fake_cuda_switch_stack to resume: six zero registers, then `entry` as the
// return address, with the stack aligned as at a call (entry must never return).
void* PrepareStack(char* base, size_t bytes, void (*entry)()) {
  auto* top = reinterpret_cast<void**>(reinterpret_cast<uintptr_t>(base + bytes) & ~uintptr_t{15});
  void** sp = top - 8;
  for (int i = 0; i < 6; ++i) sp[i] = nullptr;
  sp[6] = reinterpret_cast<void*>(entry);
  sp[7] = nullptr;
  return sp;
}

struct Fiber {
  void* stack = nullptr;  // saved stack pointer while not running
  Dim3 thread_idx;
  FiberState state = FiberState::kRunnable;
  uint64_t shuffle_in = 0, shuffle_out = 0;
  int shuffle_mask = 0;
};

// The block being run on this thread: its fibers, and where each goes back to when it waits.
class BlockRunner {
 public:
  static BlockRunner*& Active() {
    static thread_local BlockRunner* runner = nullptr;
    return runner;
  }

  // The hooks the shim calls: both suspend the running fiber until the scheduler releases it.
  static void SyncThreads() { Running()->Wait(FiberState::kAtSync); }
  static uint64_t ShuffleXor(uint64_t bits, int lane_mask) {
    BlockRunner* r = Running();
    Fiber& f = r->fibers_[r->current_];
    f.shuffle_in = bits;
    f.shuffle_mask = lane_mask;
    r->Wait(FiberState::kAtShuffle);
    return f.shuffle_out;
  }

  // The runner of the fiber calling a hook. A kernel run without fibers (one said never to
  // wait) that waits is a broken promise: the process stops with a message.
  static BlockRunner* Running() {
    if (Active() == nullptr) {
      std::fprintf(stderr, "fake CUDA: a kernel launched as one that never waits called __syncthreads or a shuffle\n");
      std::abort();
    }
    return Active();
  }

  BlockRunner(const EmulatedLibrary& library, Dim3 block, const std::function<void()>& body)
      : library_(library), block_(block), body_(body), fibers_(size_t{block.x} * block.y * block.z),
        stacks_(Stacks(fibers_.size())) {}

  bool Run(std::string* error) {
    if (stacks_ == nullptr) return Fail(error, "could not map fiber stacks");
    for (size_t i = 0; i < fibers_.size(); ++i) {
      Fiber& f = fibers_[i];
      f.thread_idx = Dim3{static_cast<unsigned>(i % block_.x), static_cast<unsigned>(i / block_.x % block_.y),
                          static_cast<unsigned>(i / (size_t{block_.x} * block_.y))};
      f.state = FiberState::kRunnable;
      f.stack = PrepareStack(stacks_ + i * kStackBytes, kStackBytes, &BlockRunner::Start);
    }
    while (true) {
      bool progressed = RunRunnable();
      progressed = ReleaseShuffles() || progressed;
      if (AllDone()) return true;
      if (!progressed && !ReleaseSync()) {
        return Fail(error, "threads of a block wait at different barriers (a shuffle or __syncthreads not "
                           "reached by all of them)");
      }
    }
  }

 private:
  // A fiber's first frame: runs the thread, then leaves its stack for good.
  [[noreturn]] static void Start() {
    BlockRunner* r = Active();
    r->body_();
    r->Wait(FiberState::kDone);
    __builtin_unreachable();
  }

  void Wait(FiberState state) {
    Fiber& f = fibers_[current_];
    f.state = state;
    fake_cuda_switch_stack(&f.stack, scheduler_);
  }

  bool RunRunnable() {
    bool ran = false;
    for (size_t i = 0; i < fibers_.size(); ++i) {
      if (fibers_[i].state != FiberState::kRunnable) continue;
      current_ = i;
      *library_.thread_idx = &fibers_[i].thread_idx;
      fake_cuda_switch_stack(&scheduler_, fibers_[i].stack);
      ran = true;
    }
    return ran;
  }

  // Warps whose running threads all wait at a shuffle get each other's values.
  bool ReleaseShuffles() {
    bool released = false;
    for (size_t first = 0; first < fibers_.size(); first += kWarpSize) {
      const size_t end = std::min(fibers_.size(), first + kWarpSize);
      bool any = false, all = true;
      for (size_t i = first; i < end; ++i) {
        any = any || fibers_[i].state == FiberState::kAtShuffle;
        all = all && (fibers_[i].state == FiberState::kAtShuffle || fibers_[i].state == FiberState::kDone);
      }
      if (!any || !all) continue;
      for (size_t i = first; i < end; ++i) {
        Fiber& f = fibers_[i];
        if (f.state != FiberState::kAtShuffle) continue;
        const size_t source = first + ((i - first) ^ static_cast<size_t>(f.shuffle_mask & (kWarpSize - 1)));
        const bool live = source < end && fibers_[source].state == FiberState::kAtShuffle;
        f.shuffle_out = live ? fibers_[source].shuffle_in : f.shuffle_in;
      }
      for (size_t i = first; i < end; ++i) {
        if (fibers_[i].state == FiberState::kAtShuffle) fibers_[i].state = FiberState::kRunnable;
      }
      released = true;
    }
    return released;
  }

  // When every running thread of the block waits at __syncthreads, all go on.
  bool ReleaseSync() {
    bool any = false;
    for (const Fiber& f : fibers_) {
      if (f.state == FiberState::kAtSync) any = true;
      else if (f.state != FiberState::kDone) return false;
    }
    for (Fiber& f : fibers_) {
      if (f.state == FiberState::kAtSync) f.state = FiberState::kRunnable;
    }
    return any;
  }

  bool AllDone() const {
    for (const Fiber& f : fibers_) {
      if (f.state != FiberState::kDone) return false;
    }
    return true;
  }

  // Stacks for `count` fibers, kept from launch to launch (a fresh mapping per launch spent
  // most of a small launch's time in page faults); null when they cannot be mapped.
  static char* Stacks(size_t count) {
    static thread_local char* stacks = nullptr;
    static thread_local size_t mapped = 0;
    if (count > mapped) {
      if (stacks != nullptr) munmap(stacks, kStackBytes * mapped);
      void* fresh = mmap(nullptr, kStackBytes * count, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                         -1, 0);
      stacks = fresh == MAP_FAILED ? nullptr : static_cast<char*>(fresh);
      mapped = stacks == nullptr ? 0 : count;
    }
    return stacks;
  }

  static bool Fail(std::string* error, const char* what) {
    *error = what;
    return false;
  }

  const EmulatedLibrary& library_;
  Dim3 block_;
  const std::function<void()>& body_;
  std::vector<Fiber> fibers_;
  char* stacks_;
  void* scheduler_ = nullptr;  // the scheduler's stack pointer while a fiber runs
  size_t current_ = 0;
};

template <typename T>
T* Symbol(void* handle, const char* name, std::string* missing) {
  void* p = dlsym(handle, name);
  if (p == nullptr) *missing += std::string(" ") + name;
  return static_cast<T*>(p);
}

}  // namespace

EmulatedLibrary* LoadEmulatedLibrary(const std::string& bytes, std::string* error) {
  char path[] = "/tmp/fake_cuda_module_XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) {
    *error = "mkstemp failed";
    return nullptr;
  }
  const bool written = write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size());
  close(fd);
  void* handle = written ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : nullptr;
  unlink(path);
  if (handle == nullptr) {
    const char* why = dlerror();
    *error = std::string("dlopen of an emulated module failed: ") + (why != nullptr ? why : "short write");
    return nullptr;
  }
  auto* library = new EmulatedLibrary();
  library->handle = handle;
  std::string missing;
  library->block_idx = Symbol<Dim3>(handle, "dt_emu_block_idx", &missing);
  library->block_dim = Symbol<Dim3>(handle, "dt_emu_block_dim", &missing);
  library->grid_dim = Symbol<Dim3>(handle, "dt_emu_grid_dim", &missing);
  library->thread_idx = Symbol<const Dim3*>(handle, "dt_emu_thread_idx", &missing);
  auto* sync = Symbol<void (*)()>(handle, "dt_emu_syncthreads", &missing);
  auto* shuffle = Symbol<uint64_t (*)(uint64_t, int)>(handle, "dt_emu_shfl_xor", &missing);
  if (!missing.empty()) {
    *error = "an emulated module lacks the shim's hooks:" + missing;
    dlclose(handle);
    delete library;
    return nullptr;
  }
  *sync = &BlockRunner::SyncThreads;
  *shuffle = &BlockRunner::ShuffleXor;
  return library;
}

void* FindEmulatedKernel(const EmulatedLibrary& library, const char* name) { return dlsym(library.handle, name); }

int EmulatedLaunchBound(const EmulatedLibrary& library, const char* name) {
  const auto* table = static_cast<const char*>(dlsym(library.handle, "dt_emu_launch_bounds"));
  if (table == nullptr) return 1024;
  const std::string entries(table), key = std::string(name) + "=";
  for (size_t at = entries.find(key); at != std::string::npos; at = entries.find(key, at + 1)) {
    if (at == 0 || entries[at - 1] == ';') return std::atoi(entries.c_str() + at + key.size());
  }
  return 1024;
}

bool RunGrid(const EmulatedLibrary& library, Dim3 grid, Dim3 block, bool waits,
             const std::function<void()>& thread_body, std::string* error) {
  *library.grid_dim = grid;
  *library.block_dim = block;
  if (!waits) {
    Dim3 thread;
    *library.thread_idx = &thread;
    for (unsigned z = 0; z < grid.z; ++z) {
      for (unsigned y = 0; y < grid.y; ++y) {
        for (unsigned x = 0; x < grid.x; ++x) {
          *library.block_idx = Dim3{x, y, z};
          for (thread.z = 0; thread.z < block.z; ++thread.z) {
            for (thread.y = 0; thread.y < block.y; ++thread.y) {
              for (thread.x = 0; thread.x < block.x; ++thread.x) thread_body();
            }
          }
        }
      }
    }
    return true;
  }
  BlockRunner runner(library, block, thread_body);
  BlockRunner* outer = BlockRunner::Active();
  BlockRunner::Active() = &runner;
  bool ok = true;
  for (unsigned z = 0; ok && z < grid.z; ++z) {
    for (unsigned y = 0; ok && y < grid.y; ++y) {
      for (unsigned x = 0; ok && x < grid.x; ++x) {
        *library.block_idx = Dim3{x, y, z};
        ok = runner.Run(error);
      }
    }
  }
  BlockRunner::Active() = outer;
  return ok;
}

}  // namespace fake_cuda
