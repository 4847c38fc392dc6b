#include "interpreter/graphviz.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

extern char** environ;

namespace dt::interpreter::graphviz {
namespace {

// A private temporary directory, removed with its files when the object dies.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = absl::StrCat(base != nullptr && *base ? base : "/tmp", "/dyntrace-dot-XXXXXX");
    if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~TempDir() {
    if (path_.empty()) return;
    for (const char* name : {"graph.dot", "graph.svg", "stderr.txt"}) unlink(File(name).c_str());
    rmdir(path_.c_str());
  }
  bool ok() const { return !path_.empty(); }
  std::string File(absl::string_view name) const { return absl::StrCat(path_, "/", name); }

 private:
  std::string path_;
};

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

}  // namespace

absl::StatusOr<std::string> DotToSvg(absl::string_view dot_text) {
  TempDir dir;
  if (!dir.ok()) return absl::InternalError(absl::StrCat("graphviz: no temporary directory: ", std::strerror(errno)));
  const std::string input = dir.File("graph.dot"), output = dir.File("graph.svg"),
                    errors = dir.File("stderr.txt");
  {
    std::ofstream out(input, std::ios::binary);
    out << dot_text;
    if (!out) return absl::InternalError("graphviz: could not write the DOT file");
  }
  // Files rather than pipes: dot reads all of its input before writing, and a pipe in both
  // directions could block both processes on a large graph.
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, errors.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  std::string output_flag = absl::StrCat("-o", output);
  std::vector<char*> argv = {const_cast<char*>("dot"), const_cast<char*>("-Tsvg"), output_flag.data(),
                             const_cast<char*>(input.c_str()), nullptr};
  pid_t pid = 0;
  const int spawn_error = posix_spawnp(&pid, "dot", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawn_error == ENOENT) {
    return absl::FailedPreconditionError(
        "Graphviz's `dot` command is not on PATH; graph pictures need it (Debian: apt-get install "
        "graphviz, or tools/install_deps.sh)");
  }
  if (spawn_error != 0) {
    return absl::InternalError(absl::StrCat("graphviz: could not run dot: ", std::strerror(spawn_error)));
  }
  int wait_status = 0;
  while (waitpid(pid, &wait_status, 0) < 0) {
    if (errno != EINTR) return absl::InternalError("graphviz: lost track of the dot process");
  }
  if (!WIFEXITED(wait_status) || WEXITSTATUS(wait_status) != 0) {
    return absl::InternalError(absl::StrCat("graphviz: dot -Tsvg failed: ", ReadAll(errors)));
  }
  return ReadAll(output);
}

std::string InlineSvg(absl::string_view svg) {
  const size_t start = svg.find("<svg");
  return std::string(start == absl::string_view::npos ? svg : svg.substr(start));
}

}  // namespace dt::interpreter::graphviz
