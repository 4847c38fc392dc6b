#include "runtime/cuda_tensor.h"

#include <algorithm>
#include <cstring>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "runtime/copy.h"
#include "runtime/cuda_allocator.h"
#include "runtime/cuda_driver.h"
#include "runtime/errors.h"

namespace dt {
namespace {

struct Span {
  int64_t begin = 0;     // first element offset the view reaches
  int64_t elements = 0;  // elements from there to the last one reached, inclusive
};

Span SpanOf(const Tensor& t) {
  if (t.numel() == 0) return {t.offset(), 0};
  int64_t low = t.offset(), high = t.offset();
  for (int64_t d = 0; d < t.ndim(); ++d) {
    const int64_t reach = (t.size(d) - 1) * t.stride(d);
    (reach < 0 ? low : high) += reach;
  }
  return {low, high - low + 1};
}

CUdeviceptr AddressOf(const Tensor& t, int64_t element) {
  return reinterpret_cast<CUdeviceptr>(t.storage()->data()) + static_cast<CUdeviceptr>(element * t.itemsize());
}

struct HostOpCounts {
  absl::Mutex mu;
  int64_t total ABSL_GUARDED_BY(mu) = 0;
  absl::flat_hash_map<std::string, int64_t> by_name ABSL_GUARDED_BY(mu);
};

HostOpCounts& HostOps() {
  static auto* counts = new HostOpCounts();  // lives for the process, like the devices
  return *counts;
}

constexpr size_t kMaxHostOpNames = 64;

}  // namespace

void CountCudaHostOp(absl::string_view op) {
  HostOpCounts& c = HostOps();
  absl::MutexLock lock(&c.mu);
  ++c.total;
  auto it = c.by_name.find(op);
  if (it != c.by_name.end()) {
    ++it->second;
  } else if (c.by_name.size() < kMaxHostOpNames) {
    c.by_name.emplace(std::string(op), 1);
  }
}

int64_t CudaHostOps() {
  HostOpCounts& c = HostOps();
  absl::MutexLock lock(&c.mu);
  return c.total;
}

std::vector<std::pair<std::string, int64_t>> CudaHostOpsByName() {
  HostOpCounts& c = HostOps();
  absl::MutexLock lock(&c.mu);
  std::vector<std::pair<std::string, int64_t>> out(c.by_name.begin(), c.by_name.end());
  std::sort(out.begin(), out.end());
  return out;
}

absl::StatusOr<HostMirror> MirrorToHost(const Tensor& t) {
  absl::StatusOr<CudaDevice*> gpu = CudaDevice::Get(t.device().index);
  if (!gpu.ok()) return gpu.status();
  const Span span = SpanOf(t);
  auto storage = Storage::Allocate(static_cast<size_t>(std::max<int64_t>(span.elements, 1) * t.itemsize()),
                                   Device::Cpu());
  if (span.elements > 0) {
    absl::Status s = CopyDeviceToHost(**gpu, storage->data(), AddressOf(t, span.begin),
                                      static_cast<size_t>(span.elements * t.itemsize()));
    if (!s.ok()) return s;
  }
  HostMirror m;
  m.host = Tensor(std::move(storage), t.sizes(), t.strides(), t.offset() - span.begin, t.dtype());
  m.device = t;
  m.span_begin = span.begin;
  m.span_elements = span.elements;
  return m;
}

absl::Status WriteBack(const HostMirror& m) {
  if (m.span_elements == 0) return absl::OkStatus();
  absl::StatusOr<CudaDevice*> gpu = CudaDevice::Get(m.device.device().index);
  if (!gpu.ok()) return gpu.status();
  return CopyHostToDevice(**gpu, AddressOf(m.device, m.span_begin), m.host.storage()->data(),
                          static_cast<size_t>(m.span_elements * m.device.itemsize()));
}

absl::StatusOr<Tensor> UploadKeepingLayout(const Tensor& host, Device device) {
  absl::StatusOr<CudaDevice*> gpu = CudaDevice::Get(device.index);
  if (!gpu.ok()) return gpu.status();
  const Span span = SpanOf(host);
  const size_t nbytes = static_cast<size_t>(std::max<int64_t>(span.elements, 1) * host.itemsize());
  absl::StatusOr<CUdeviceptr> block = CudaAllocator::Get().Allocate(device.index, nbytes);
  if (!block.ok()) return block.status();
  const CUdeviceptr ptr = *block;
  const int index = device.index;
  auto storage = Storage::Wrap(reinterpret_cast<void*>(ptr), nbytes, device,
                               [index, ptr, nbytes] { CudaAllocator::Get().Free(index, ptr, nbytes); });
  if (span.elements > 0) {
    const char* src = static_cast<const char*>(host.storage()->data()) + span.begin * host.itemsize();
    absl::Status s = CopyHostToDevice(**gpu, ptr, src, static_cast<size_t>(span.elements * host.itemsize()));
    if (!s.ok()) return s;
  }
  return Tensor(std::move(storage), host.sizes(), host.strides(), host.offset() - span.begin, host.dtype());
}

absl::Status FillOnDevice(const Tensor& dst, Scalar value) {
  if (dst.numel() == 0) return absl::OkStatus();
  DT_ASSIGN_OR_RETURN(CudaDevice * gpu, CudaDevice::Get(dst.device().index));
  DT_RETURN_IF_ERROR(gpu->Activate());
  const Tensor element = ScalarTensor(value, dst.dtype(), Device::Cpu());
  uint64_t bits = 0;
  std::memcpy(&bits, element.data(), static_cast<size_t>(element.itemsize()));
  const auto ptr = reinterpret_cast<CUdeviceptr>(dst.data());
  const auto n = static_cast<size_t>(dst.numel());
  const CudaDriver& d = gpu->driver();
  switch (dst.itemsize()) {
    case 1: return CudaCall(d.cuMemsetD8Async(ptr, static_cast<unsigned char>(bits), n, gpu->stream()), "cuMemsetD8Async");
    case 2:
      return CudaCall(d.cuMemsetD16Async(ptr, static_cast<unsigned short>(bits), n, gpu->stream()), "cuMemsetD16Async");
    case 4: return CudaCall(d.cuMemsetD32Async(ptr, static_cast<unsigned>(bits), n, gpu->stream()), "cuMemsetD32Async");
    case 8:
      DT_RETURN_IF_ERROR(CudaCall(d.cuMemsetD2D32Async(ptr, 8, static_cast<unsigned>(bits), 1, n, gpu->stream()),
                                  "cuMemsetD2D32Async"));
      return CudaCall(d.cuMemsetD2D32Async(ptr + 4, 8, static_cast<unsigned>(bits >> 32), 1, n, gpu->stream()),
                      "cuMemsetD2D32Async");
  }
  return absl::InternalError(absl::StrFormat("FillOnDevice: no memset for %d-byte elements", dst.itemsize()));
}

absl::StatusOr<Tensor> ToDevice(const Tensor& t, Device device) {
  if (t.device() == device) return t;
  if (device.is_meta() || t.device().is_meta()) {
    return Error(ErrorKind::kValue, absl::StrFormat("cannot copy a tensor from %s to %s",
                                                    t.device().ToString(), device.ToString()));
  }
  Tensor host = t;
  if (IsCuda(t)) {
    absl::StatusOr<HostMirror> m = MirrorToHost(t);
    if (!m.ok()) return m.status();
    host = m->host;
  }
  if (device.is_cpu()) return Contiguous(host);
  // Dense layouts (contiguous or permuted) travel as they are; anything else packs first.
  const Tensor packed = host.is_non_overlapping_and_dense() && SpanOf(host).elements == host.numel()
                            ? host
                            : Contiguous(host);
  return UploadKeepingLayout(packed, device);
}

}  // namespace dt
