#include "jit/host_compiler.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

extern char** environ;

namespace dt::jit {
namespace {

std::optional<std::string> ResolveOnPath(const std::string& name) {
  auto executable = [](const std::string& p) {
    struct stat st;
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
  };
  if (name.find('/') != std::string::npos) {
    if (executable(name)) return name;
    return std::nullopt;
  }
  const char* path = std::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path != nullptr ? path : "/usr/bin:/bin", ':', absl::SkipEmpty())) {
    std::string candidate = absl::StrCat(dir, "/", name);
    if (executable(candidate)) return candidate;
  }
  return std::nullopt;
}

std::mutex compiler_mutex;
std::optional<absl::StatusOr<HostCompiler>> found;

}  // namespace

absl::StatusOr<HostCompiler> FindHostCompiler(bool refresh) {
  std::lock_guard<std::mutex> lock(compiler_mutex);
  if (found.has_value() && !refresh) return *found;
  const char* cxx = std::getenv("CXX");
  const std::string name = cxx != nullptr && *cxx != '\0' ? cxx : "c++";
  std::optional<std::string> path = ResolveOnPath(name);
  if (!path.has_value()) {
    found = absl::NotFoundError(absl::StrFormat(
        "no C++ compiler: '%s' (from %s) is not an executable on PATH", name,
        cxx != nullptr && *cxx != '\0' ? "CXX" : "the default c++"));
    return *found;
  }
  HostCompiler compiler;
  compiler.path = *path;
  // -fno-math-errno and -fno-trapping-math let sqrt, exp_f32 and selects vectorise; nothing that changes results (no
  // -ffast-math): compiled kernels must agree with eager ones. -ffp-contract=off: GCC's default for C++ fuses a
  // multiply and an add into one FMA (one rounding where eager rounds twice), so `w - lr * g` differed from eager in
  // the last bit. -fwrapv: integers wrap, as in eager.
  compiler.flags = {"-std=c++17", "-O3", "-march=native", "-fopenmp", "-fPIC", "-shared",
                    "-fno-math-errno", "-fno-trapping-math", "-ffp-contract=off", "-fwrapv", "-w"};
  struct stat st;
  char resolved[4096];
  std::string real = ::realpath(path->c_str(), resolved) != nullptr ? resolved : *path;
  if (::stat(real.c_str(), &st) == 0) {
    compiler.identity = absl::StrFormat("%s size=%d mtime=%d flags=%s", real, st.st_size,
                                        static_cast<int64_t>(st.st_mtime), absl::StrJoin(compiler.flags, " "));
  } else {
    compiler.identity = absl::StrCat(real, " flags=", absl::StrJoin(compiler.flags, " "));
  }
  found = compiler;
  return compiler;
}

absl::Status CompileSharedLibrary(const HostCompiler& compiler, const std::string& source_path,
                                  const std::string& output_path) {
  const std::string log_path = output_path + ".log";
  std::vector<std::string> args = {compiler.path};
  args.insert(args.end(), compiler.flags.begin(), compiler.flags.end());
  args.insert(args.end(), {"-o", output_path, source_path});
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  pid_t pid;
  const int spawned = posix_spawn(&pid, compiler.path.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) {
    return absl::UnavailableError(absl::StrFormat("could not run %s: %s", compiler.path, std::strerror(spawned)));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return absl::InternalError(absl::StrCat("waitpid: ", std::strerror(errno)));
  }
  std::ifstream log(log_path);
  std::stringstream text;
  text << log.rdbuf();
  ::unlink(log_path.c_str());
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string message = text.str();
    if (message.size() > 2000) message = message.substr(0, 2000) + "...";
    return absl::InternalError(absl::StrFormat("%s failed (status %d): %s", compiler.path,
                                               WIFEXITED(status) ? WEXITSTATUS(status) : -1, message));
  }
  return absl::OkStatus();
}

}  // namespace dt::jit
