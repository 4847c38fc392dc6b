// interpreter/reason_log.h: a bounded record of reason texts (recompiles, fallbacks, breaks).
//
// A long-running program can meet the same graph break, or a frame past its cache limit, on every
// call: a plain list of reasons would grow without bound. A ReasonLog keeps the most recent
// kRecent texts in order (what stats()["break_reasons"] and friends return) and a count per
// distinct text for at most kDistinct texts; later distinct texts are counted together under
// kOther. `dropped()` says how many texts fell off the front of the recent list.
//
//   ReasonLog log;
//   log.Add("print() at f.py:3");
//   log.recent().back();   // "print() at f.py:3"
//   log.counts()[0];       // {"print() at f.py:3", 1}
#ifndef DYNTRACE_INTERPRETER_REASON_LOG_H_
#define DYNTRACE_INTERPRETER_REASON_LOG_H_

#include <cstdint>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace dt::interpreter {

class ReasonLog {
 public:
  static constexpr size_t kRecent = 256;
  static constexpr size_t kDistinct = 256;
  static constexpr const char* kOther = "(other reasons: more than 256 distinct, not kept)";

  void Add(const std::string& text);
  void Clear();

  // The most recent texts, oldest first (at most kRecent).
  const std::deque<std::string>& recent() const { return recent_; }
  // How many texts were dropped from the front of recent().
  int64_t dropped() const { return dropped_; }
  // (text, times added), in first-seen order; at most kDistinct + 1 entries (the last is kOther).
  const std::vector<std::pair<std::string, int64_t>>& counts() const { return counts_; }

 private:
  std::deque<std::string> recent_;
  int64_t dropped_ = 0;
  std::vector<std::pair<std::string, int64_t>> counts_;
  absl::flat_hash_map<std::string, size_t> index_;  // text -> position in counts_
};

}  // namespace dt::interpreter

#endif  // DYNTRACE_INTERPRETER_REASON_LOG_H_
