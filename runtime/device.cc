#include "runtime/device.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace dt {

std::string Device::ToString() const {
  switch (type) {
    case DeviceType::kCpu: return "cpu";
    case DeviceType::kCuda: return absl::StrCat("cuda:", index);
    case DeviceType::kMeta: return "meta";
  }
  __builtin_unreachable();
}

absl::StatusOr<Device> ParseDevice(absl::string_view text) {
  if (text == "cpu") return Device::Cpu();
  if (text == "meta") return Device::Meta();
  if (text == "cuda") return Device::Cuda(0);
  if (text.substr(0, 5) == "cuda:") {
    int index = 0;
    if (absl::SimpleAtoi(text.substr(5), &index) && index >= 0) return Device::Cuda(index);
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("unknown device '%s' (expected 'cpu', 'cuda' or 'cuda:N')", text));
}

}  // namespace dt
