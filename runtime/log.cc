#include "runtime/log.h"

#include <array>
#include <atomic>
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_format.h"

namespace dt::log {
namespace {

constexpr int kKinds = static_cast<int>(Kind::kCount);
constexpr std::array<absl::string_view, kKinds> kNames = {"graph",      "guards",  "breaks",
                                                           "recompiles", "kernels", "bytecode", "dynamic"};
std::array<std::atomic<bool>, kKinds> enabled{};

}  // namespace

absl::string_view KindName(Kind kind) { return kNames[static_cast<int>(kind)]; }

absl::Status Configure(absl::string_view spec) {
  std::array<bool, kKinds> wanted{};
  for (absl::string_view part : absl::StrSplit(spec, ',', absl::SkipWhitespace())) {
    absl::string_view name = absl::StripAsciiWhitespace(part);
    if (name == "all") {
      wanted.fill(true);
      continue;
    }
    bool found = false;
    for (int i = 0; i < kKinds; ++i) {
      if (kNames[i] == name) wanted[i] = found = true;
    }
    if (!found) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "unknown log kind '%s'; the kinds are %s (or all)", name, absl::StrJoin(kNames, ", ")));
    }
  }
  for (int i = 0; i < kKinds; ++i) enabled[i].store(wanted[i], std::memory_order_relaxed);
  return absl::OkStatus();
}

bool Enabled(Kind kind) { return enabled[static_cast<int>(kind)].load(std::memory_order_relaxed); }

void Write(Kind kind, absl::string_view header, absl::string_view body) {
  std::string text = absl::StrFormat("[dyntrace:%s] %s\n", KindName(kind), header);
  for (absl::string_view line : absl::StrSplit(body, '\n', absl::SkipEmpty())) {
    absl::StrAppend(&text, "    ", line, "\n");
  }
  std::fwrite(text.data(), 1, text.size(), stderr);
  std::fflush(stderr);
}

}  // namespace dt::log
