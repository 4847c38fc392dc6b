// runtime/device.h: where a tensor's bytes live.
//
// kMeta tensors carry shape, strides and dtype but no bytes; every op accepts them and computes
// only its result's metadata, which is how tracing infers shapes with the eager op definitions.
//
//   Device d = Device::Cpu();  d.ToString() == "cpu"
#ifndef DYNTRACE_RUNTIME_DEVICE_H_
#define DYNTRACE_RUNTIME_DEVICE_H_

#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace dt {

enum class DeviceType : uint8_t { kCpu, kCuda, kMeta };

struct Device {
  DeviceType type = DeviceType::kCpu;
  int index = 0;

  static Device Cpu() { return {DeviceType::kCpu, 0}; }
  static Device Cuda(int index = 0) { return {DeviceType::kCuda, index}; }
  static Device Meta() { return {DeviceType::kMeta, 0}; }

  bool is_cpu() const { return type == DeviceType::kCpu; }
  bool is_meta() const { return type == DeviceType::kMeta; }
  // "cpu", "cuda:0", "meta".
  std::string ToString() const;
  friend bool operator==(const Device& a, const Device& b) {
    return a.type == b.type && (a.type != DeviceType::kCuda || a.index == b.index);
  }
  friend bool operator!=(const Device& a, const Device& b) { return !(a == b); }
};

// Parses "cpu", "cuda", "cuda:1", "meta".
absl::StatusOr<Device> ParseDevice(absl::string_view text);

}  // namespace dt

#endif  // DYNTRACE_RUNTIME_DEVICE_H_
