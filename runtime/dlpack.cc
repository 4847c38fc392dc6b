#include "runtime/dlpack.h"

#include <vector>

#include "absl/strings/str_format.h"
#include "runtime/errors.h"

namespace dt {
namespace {

// DLPack 0.8 names bool kDLBool (6). 8-bit unsigned is uint8, as PyTorch reads it.
constexpr uint8_t kDLBoolCode = 6;
// kDLBfloat (4) is also newer than the header's enum.
constexpr uint8_t kDLBfloatCode = 4;

struct ExportContext {
  Tensor tensor;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  DLManagedTensor managed;
};

DLDataType ToDLDataType(DType dtype) {
  switch (dtype) {
    case DType::kBool: return {kDLBoolCode, 8, 1};
    case DType::kInt32: return {kDLInt, 32, 1};
    case DType::kInt64: return {kDLInt, 64, 1};
    case DType::kFloat16: return {kDLFloat, 16, 1};
    case DType::kFloat32: return {kDLFloat, 32, 1};
    case DType::kFloat64: return {kDLFloat, 64, 1};
    case DType::kUInt8: return {kDLUInt, 8, 1};
    case DType::kInt8: return {kDLInt, 8, 1};
    case DType::kInt16: return {kDLInt, 16, 1};
    case DType::kBFloat16: return {kDLBfloatCode, 16, 1};
  }
  __builtin_unreachable();
}

absl::StatusOr<DType> FromDLDataType(DLDataType t) {
  if (t.lanes == 1) {
    if (t.code == kDLBoolCode && t.bits == 8) return DType::kBool;
    if (t.code == kDLUInt && t.bits == 8) return DType::kUInt8;
    if (t.code == kDLInt && t.bits == 8) return DType::kInt8;
    if (t.code == kDLInt && t.bits == 16) return DType::kInt16;
    if (t.code == kDLInt && t.bits == 32) return DType::kInt32;
    if (t.code == kDLInt && t.bits == 64) return DType::kInt64;
    if (t.code == kDLFloat && t.bits == 16) return DType::kFloat16;
    if (t.code == kDLFloat && t.bits == 32) return DType::kFloat32;
    if (t.code == kDLFloat && t.bits == 64) return DType::kFloat64;
    if (t.code == kDLBfloatCode && t.bits == 16) return DType::kBFloat16;
  }
  return Error(ErrorKind::kType,
               absl::StrFormat("from_dlpack: unsupported element type (code %d, %d bits, %d lanes); "
                               "dyntrace supports bool, uint8, int8, int16, int32, int64, float16, bfloat16, "
                               "float32, float64",
                               t.code, t.bits, t.lanes));
}

}  // namespace

std::pair<int, int> DLPackDevice(const Tensor& t) {
  const Device d = t.device();
  if (d.type == DeviceType::kCuda) return {kDLCUDA, d.index};
  return {kDLCPU, 0};
}

DLManagedTensor* ToDLPack(const Tensor& t) {
  auto* ctx = new ExportContext{t, {t.sizes().begin(), t.sizes().end()},
                                {t.strides().begin(), t.strides().end()}, {}};
  DLTensor& dl = ctx->managed.dl_tensor;
  dl.data = t.storage()->data();
  dl.byte_offset = static_cast<uint64_t>(t.offset() * t.itemsize());
  auto [type, id] = DLPackDevice(t);
  dl.device = {static_cast<DLDeviceType>(type), id};
  dl.ndim = static_cast<int32_t>(t.ndim());
  dl.dtype = ToDLDataType(t.dtype());
  dl.shape = ctx->shape.data();
  dl.strides = ctx->strides.data();
  ctx->managed.manager_ctx = ctx;
  ctx->managed.deleter = [](DLManagedTensor* self) {
    delete static_cast<ExportContext*>(self->manager_ctx);
  };
  return &ctx->managed;
}

absl::StatusOr<Tensor> FromDLPack(DLManagedTensor* managed) {
  auto release = [managed] {
    if (managed->deleter != nullptr) managed->deleter(managed);
  };
  const DLTensor& dl = managed->dl_tensor;
  auto dtype = FromDLDataType(dl.dtype);
  if (!dtype.ok()) {
    release();
    return dtype.status();
  }
  Device device;
  if (dl.device.device_type == kDLCPU || dl.device.device_type == kDLCUDAHost) {
    device = Device::Cpu();
  } else if (dl.device.device_type == kDLCUDA) {
    device = Device::Cuda(dl.device.device_id);
  } else {
    release();
    return Error(ErrorKind::kType,
                 absl::StrFormat("from_dlpack: unsupported device type %d (dyntrace supports CPU "
                                 "and CUDA)",
                                 static_cast<int>(dl.device.device_type)));
  }
  const int64_t itemsize = ItemSize(*dtype);
  if (dl.byte_offset % itemsize != 0) {
    release();
    return Error(ErrorKind::kValue, "from_dlpack: byte_offset is not a multiple of the element size");
  }
  Dims sizes(dl.shape, dl.shape + dl.ndim);
  Dims strides = dl.strides != nullptr ? Dims(dl.strides, dl.strides + dl.ndim)
                                       : ContiguousStrides(sizes);
  int64_t span = 1;
  for (int i = 0; i < dl.ndim; ++i) {
    if (strides[i] < 0) {
      release();
      return Error(ErrorKind::kValue, "from_dlpack: negative strides are not supported");
    }
    if (sizes[i] == 0) span = 0;
  }
  if (span != 0) {
    for (int i = 0; i < dl.ndim; ++i) span += (sizes[i] - 1) * strides[i];
  }
  const int64_t offset = static_cast<int64_t>(dl.byte_offset) / itemsize;
  auto storage = Storage::Wrap(dl.data, static_cast<size_t>((offset + span) * itemsize), device,
                               release);
  return Tensor(std::move(storage), sizes, strides, offset, *dtype);
}

}  // namespace dt
