// A stand-in for NVRTC (libnvrtc.so) that builds CUDA sources for the host, so that the
// stand-in driver can run dyntrace's kernels on a machine without a GPU.
//
// nvrtcCompileProgram pastes emulation_shim.h ahead of the source and compiles the result with
// the host compiler ($CXX, else c++) into a shared library. The "CUBIN" it hands back is that
// library behind a small header (kEmulatedImageMagic, then its size), which the stand-in driver
// recognises in cuModuleLoadData (index kernels also get entries taking their arguments by
// address, which the driver calls instead, and each function's __launch_bounds__ is listed in
// `dt_emu_launch_bounds` for the driver to enforce). A compile error is a failed compilation with the compiler's
// messages as the program log, as NVRTC reports its own. The version it reports (99.0) keeps
// these images apart from real CUBINs in dyntrace's disk cache.
//
// Loaded by tests through DYNTRACE_LIBNVRTC, with DYNTRACE_LIBCUDA naming the stand-in driver.
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/fake_cuda/emulated_image.h"
#include "tests/fake_cuda/emulation_shim_text.h"

namespace {

constexpr int kSuccess = 0;
constexpr int kInvalidInput = 3;
constexpr int kInvalidProgram = 4;
constexpr int kCompilation = 6;

// Pasted after the source: for the index kernels' module, an entry per kernel that takes its
// IxArgs by address. Their launches cover every position with a thread, and a by-value struct
// of 1.8 KB copied for each thread's call was most of an emulated run's time.
constexpr char kIndexEntriesByAddress[] = R"(
#if defined(DT_IX_UNTYPED_KERNELS)
#define DT_EMU_IX_ENTRY(name) \
  extern "C" void dt_emu_ix_##name(const dt::IxArgs* a) { dt::ix::name(*a); }
#define DT_EMU_IX_TYPED_ENTRY(name) \
  extern "C" void dt_emu_ix_##name(const dt::IxArgs* a) { dt::ix::name<DT_IX_SCALAR>(*a); }
DT_IX_UNTYPED_KERNELS(DT_EMU_IX_ENTRY)
DT_IX_TYPED_KERNELS(DT_EMU_IX_TYPED_ENTRY)
#endif
)";

// Each `__launch_bounds__(N) name(` of the source as "name=N;": the driver refuses a launch of
// more threads than the function's bound, as a real device does (its CUBIN records it).
std::string LaunchBounds(const std::string& source) {
  std::string table;
  const std::string marker = "__launch_bounds__(";
  for (size_t at = source.find(marker); at != std::string::npos; at = source.find(marker, at + 1)) {
    const size_t number = at + marker.size();
    const size_t close = source.find(')', number);
    const size_t open = close == std::string::npos ? close : source.find('(', close);
    if (open == std::string::npos) break;
    size_t name_end = open;
    while (name_end > close && source[name_end - 1] == ' ') --name_end;
    size_t name_start = name_end;
    while (name_start > close && (std::isalnum(static_cast<unsigned char>(source[name_start - 1])) ||
                                  source[name_start - 1] == '_')) {
      --name_start;
    }
    table += source.substr(name_start, name_end - name_start) + "=" + source.substr(number, close - number) + ";";
  }
  return table;
}

struct Program {
  std::string source;
  std::string name;
  std::string image;  // kEmulatedImageMagic, size, the library's bytes
  std::string log;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

// Compiles `text` into a shared library; returns its bytes, or sets `log` and returns "".
std::string BuildLibrary(const std::string& text, std::string* log) {
  char dir_template[] = "/tmp/fake_nvrtc_XXXXXX";
  const char* dir = mkdtemp(dir_template);
  if (dir == nullptr) {
    *log = "fake NVRTC: mkdtemp failed";
    return "";
  }
  const std::string source = std::string(dir) + "/unit.cc", library = std::string(dir) + "/unit.so",
                    messages = std::string(dir) + "/log.txt";
  std::ofstream(source, std::ios::binary) << text;
  const char* cxx = std::getenv("CXX");
  // No contraction into fused multiply-adds: x86-64's baseline has none, and the host's eager
  // kernels, which results are compared with, round each operation.
  const std::string command = std::string(cxx != nullptr && *cxx != '\0' ? cxx : "c++") +
                              " -std=c++17 -O1 -ffp-contract=off -fPIC -shared -w -o " + library + " " + source +
                              " > " + messages + " 2>&1";
  const int status = std::system(command.c_str());
  std::string bytes;
  if (status == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    bytes = ReadFile(library);
  } else {
    *log = ReadFile(messages);
    if (log->empty()) *log = "fake NVRTC: the host compiler failed: " + command;
  }
  std::remove(source.c_str());
  std::remove(library.c_str());
  std::remove(messages.c_str());
  rmdir(dir);
  return bytes;
}

}  // namespace

extern "C" {

const char* nvrtcGetErrorString(int result) {
  switch (result) {
    case kSuccess: return "NVRTC_SUCCESS";
    case kInvalidInput: return "NVRTC_ERROR_INVALID_INPUT";
    case kInvalidProgram: return "NVRTC_ERROR_INVALID_PROGRAM";
    case kCompilation: return "NVRTC_ERROR_COMPILATION";
  }
  return "NVRTC_ERROR (fake)";
}

int nvrtcVersion(int* major, int* minor) {
  *major = 99;
  *minor = 0;
  return kSuccess;
}

int nvrtcCreateProgram(void** program, const char* source, const char* name, int, const char* const*,
                       const char* const*) {
  if (program == nullptr || source == nullptr) return kInvalidInput;
  *program = new Program{source, name != nullptr ? name : "default_program", "", ""};
  return kSuccess;
}

int nvrtcDestroyProgram(void** program) {
  if (program == nullptr || *program == nullptr) return kInvalidProgram;
  delete static_cast<Program*>(*program);
  *program = nullptr;
  return kSuccess;
}

int nvrtcCompileProgram(void* handle, int, const char* const*) {
  if (handle == nullptr) return kInvalidProgram;
  auto& program = *static_cast<Program*>(handle);
  const std::string text = std::string(fake_cuda::EmulationShim()) + "\n#line 1 \"" + program.name + "\"\n" + program.source +
                           kIndexEntriesByAddress + "\nextern \"C\" __attribute__((visibility(\"default\"))) const char "
                           "dt_emu_launch_bounds[] = \"" + LaunchBounds(program.source) + "\";\n";
  const std::string library = BuildLibrary(text, &program.log);
  if (library.empty()) return kCompilation;
  program.image = fake_cuda::WrapEmulatedImage(library);
  return kSuccess;
}

int nvrtcGetCUBINSize(void* handle, size_t* size) {
  if (handle == nullptr) return kInvalidProgram;
  *size = static_cast<Program*>(handle)->image.size();
  return kSuccess;
}

int nvrtcGetCUBIN(void* handle, char* out) {
  if (handle == nullptr) return kInvalidProgram;
  const std::string& image = static_cast<Program*>(handle)->image;
  std::memcpy(out, image.data(), image.size());
  return kSuccess;
}

int nvrtcGetProgramLogSize(void* handle, size_t* size) {
  if (handle == nullptr) return kInvalidProgram;
  *size = static_cast<Program*>(handle)->log.size() + 1;
  return kSuccess;
}

int nvrtcGetProgramLog(void* handle, char* out) {
  if (handle == nullptr) return kInvalidProgram;
  const std::string& log = static_cast<Program*>(handle)->log;
  std::memcpy(out, log.c_str(), log.size() + 1);
  return kSuccess;
}

}  // extern "C"
