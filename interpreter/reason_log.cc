#include "interpreter/reason_log.h"

namespace dt::interpreter {

void ReasonLog::Add(const std::string& text) {
  recent_.push_back(text);
  if (recent_.size() > kRecent) {
    recent_.pop_front();
    ++dropped_;
  }
  auto it = index_.find(text);
  if (it == index_.end()) {
    // Past kDistinct texts, new ones share one bucket so the map stays bounded.
    const std::string key = index_.size() < kDistinct ? text : std::string(kOther);
    it = index_.find(key);
    if (it == index_.end()) {
      it = index_.emplace(key, counts_.size()).first;
      counts_.emplace_back(key, 0);
    }
  }
  ++counts_[it->second].second;
}

void ReasonLog::Clear() {
  recent_.clear();
  dropped_ = 0;
  counts_.clear();
  index_.clear();
}

}  // namespace dt::interpreter
