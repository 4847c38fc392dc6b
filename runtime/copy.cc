#include "runtime/copy.h"

#include <atomic>
#include <cstring>
#include <new>

#include "absl/strings/str_format.h"
#include "runtime/cuda_driver.h"
#include "runtime/cuda_tensor.h"
#include "runtime/errors.h"
#include "runtime/strided_loop.h"

namespace dt {
namespace {

template <typename Out, typename In>
void ConvertLoop(char* const* p, const int64_t* s, int64_t n) {
  auto convert = [](In v) -> Out { return Convert<Out, In>(v); };
  if (s[0] == sizeof(Out) && s[1] == sizeof(In)) {
    Out* out = reinterpret_cast<Out*>(p[0]);
    const In* in = reinterpret_cast<const In*>(p[1]);
    if constexpr (std::is_same_v<Out, In>) {
      std::memcpy(out, in, static_cast<size_t>(n) * sizeof(In));
    } else {
      for (int64_t i = 0; i < n; ++i) out[i] = convert(in[i]);
    }
    return;
  }
  char* out = p[0];
  const char* in = p[1];
  for (int64_t i = 0; i < n; ++i) {
    *reinterpret_cast<Out*>(out + i * s[0]) = convert(*reinterpret_cast<const In*>(in + i * s[1]));
  }
}

InnerLoop ConvertLoopFor(DType out, DType in) {
  return DT_DISPATCH_ALL(out, [&]() -> InnerLoop {
    using O = scalar_t;
    return DT_DISPATCH_ALL(in, [&]() -> InnerLoop { return &ConvertLoop<O, scalar_t>; });
  });
}

// Same dtype, sizes and strides, dense, and not overlapping: the bytes move as one block on the
// device's stream. False (nothing done) for every other CUDA copy.
absl::StatusOr<bool> CopyDenseOnDevice(const Tensor& dst, const Tensor& src) {
  if (dst.dtype() != src.dtype() || dst.sizes() != src.sizes() || dst.strides() != src.strides() ||
      !dst.is_non_overlapping_and_dense()) {
    return false;
  }
  for (int64_t d = 0; d < dst.ndim(); ++d) {
    if (dst.stride(d) < 0) return false;
  }
  const size_t nbytes = static_cast<size_t>(dst.numel()) * dst.itemsize();
  const auto to = reinterpret_cast<CUdeviceptr>(dst.data());
  const auto from = reinterpret_cast<CUdeviceptr>(src.data());
  if (nbytes == 0 || to == from) return true;
  if (to < from + nbytes && from < to + nbytes) return false;
  absl::StatusOr<CudaDevice*> device = CudaDevice::Get(dst.device().index);
  if (!device.ok()) return device.status();
  if (absl::Status s = (*device)->Activate(); !s.ok()) return s;
  if (absl::Status s = CudaCall((*device)->driver().cuMemcpyDtoDAsync(to, from, nbytes, (*device)->stream()),
                                "cuMemcpyDtoDAsync");
      !s.ok()) {
    return s;
  }
  return true;
}

// Through host mirrors (runtime/cuda_tensor.h); the source's mirror is taken before anything
// is written, so a source overlapping the destination is read in full first.
absl::Status CopyThroughHost(const Tensor& dst, const Tensor& src) {
  if (IsCuda(dst) && IsCuda(src)) CountCudaHostOp("copy");
  Tensor host_src = src;
  if (IsCuda(src)) {
    DT_ASSIGN_OR_RETURN(HostMirror m, MirrorToHost(src));
    host_src = m.host;
  }
  if (!IsCuda(dst)) return CopyInto(dst, host_src);
  DT_ASSIGN_OR_RETURN(HostMirror m, MirrorToHost(dst));
  DT_RETURN_IF_ERROR(CopyInto(m.host, host_src));
  return WriteBack(m);
}

std::atomic<DeviceCopyKernel> device_copy_kernel{nullptr};

// A copy between two tensors of one CUDA device: one block copy where it can be, else the
// installed kernel, else host mirrors.
absl::Status CopyOnDevice(const Tensor& dst, const Tensor& src, const Dims& src_byte_strides) {
  absl::StatusOr<bool> copied = CopyDenseOnDevice(dst, src);
  if (!copied.ok() || *copied) return copied.status();
  if (DeviceCopyKernel kernel = device_copy_kernel.load(); kernel != nullptr) {
    Dims strides = src_byte_strides;
    for (int64_t& s : strides) s /= src.itemsize();
    Tensor source = src.AsStrided(dst.sizes(), strides, src.offset());
    // A source overlapping the destination (x[1:] = x[:-1]) is read in full before writing.
    if (source.SharesStorageWith(dst)) {
      Tensor whole = Tensor::Empty(source.sizes(), source.dtype(), source.device());
      DT_ASSIGN_OR_RETURN(bool staged, kernel(whole, source));
      if (!staged) return CopyThroughHost(dst, src);
      source = whole;
    }
    DT_ASSIGN_OR_RETURN(bool done, kernel(dst, source));
    if (done) return absl::OkStatus();
  }
  return CopyThroughHost(dst, src);
}

}  // namespace

void SetDeviceCopyKernel(DeviceCopyKernel kernel) { device_copy_kernel.store(kernel); }

bool HasInternalOverlap(const Tensor& t) {
  for (int64_t d = 0; d < t.ndim(); ++d) {
    if (t.stride(d) == 0 && t.size(d) > 1) return true;
  }
  return false;
}

absl::Status CopyInto(const Tensor& dst, const Tensor& src) {
  if (HasInternalOverlap(dst)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "unsupported operation: more than one element of the written-to tensor (shape %s, "
        "strides %s) refers to a single memory location; clone() it first",
        dst.ShapeString(), DimsToString(dst.strides())));
  }
  auto src_strides = BroadcastByteStrides(src, dst.sizes());
  if (!src_strides.ok()) return src_strides.status();
  if (dst.is_meta() || src.is_meta()) return absl::OkStatus();
  if (IsCuda(dst) && IsCuda(src) && dst.device() == src.device()) return CopyOnDevice(dst, src, *src_strides);
  if (IsCuda(dst) && !IsCuda(src) && src.numel() == 1 && dst.numel() > 0) {
    // A fill (zeros, x[i] = 0.5): the one element goes up, the broadcast happens on the device.
    DT_ASSIGN_OR_RETURN(Tensor element, UploadKeepingLayout(src.AsStrided({}, {}, src.offset()), dst.device()));
    return CopyInto(dst, element);
  }
  if (IsCuda(dst) || IsCuda(src)) return CopyThroughHost(dst, src);
  if (dst.device() != src.device()) {
    return absl::UnimplementedError(absl::StrFormat("copy between %s and %s is not supported here",
                                                    src.device().ToString(), dst.device().ToString()));
  }
  Dims dst_strides = dst.strides();
  for (int64_t& s : dst_strides) s *= dst.itemsize();
  // A source overlapping the destination (x[1:] = x[:-1]) is read in full before writing.
  Tensor source = src;
  if (src.SharesStorageWith(dst)) source = Clone(src);
  char* bases[2] = {static_cast<char*>(dst.data()), static_cast<char*>(source.data())};
  Dims strides[2] = {dst_strides, *BroadcastByteStrides(source, dst.sizes())};
  StridedLoop loop(dst.sizes(), bases, strides);
  loop.Run(ConvertLoopFor(dst.dtype(), source.dtype()), /*parallel=*/true);
  return absl::OkStatus();
}

absl::Status Fill(const Tensor& dst, Scalar value) {
  if (dst.device().type == DeviceType::kCuda && dst.is_contiguous()) return FillOnDevice(dst, value);
  return CopyInto(dst, ScalarTensor(value, dst.dtype(), Device::Cpu()));
}

Tensor ScalarTensor(Scalar value, DType dtype, Device device) {
  if (device.type == DeviceType::kCuda) {
    absl::StatusOr<Tensor> uploaded = UploadKeepingLayout(ScalarTensor(value, dtype, Device::Cpu()), device);
    if (!uploaded.ok()) throw std::bad_alloc();  // the device was usable: out of memory
    return *uploaded;
  }
  Tensor t = Tensor::Empty({}, dtype, device);
  if (!t.is_meta()) {
    DT_DISPATCH_ALL(dtype, [&] {
      if constexpr (std::is_same_v<scalar_t, bool>) {
        *t.data_as<bool>() = value.ToBool();
      } else {
        *t.data_as<scalar_t>() = value.To<scalar_t>();
      }
    });
  }
  return t;
}

Tensor Contiguous(const Tensor& t) {
  if (t.is_contiguous()) return t;
  Tensor out = Tensor::Empty(t.sizes(), t.dtype(), t.device());
  (void)CopyInto(out, t);  // same shape and a fresh output: cannot fail
  return out;
}

Tensor CastTo(const Tensor& t, DType dtype) {
  if (t.dtype() == dtype) return t;
  Tensor out = Tensor::EmptyLike(t, dtype);
  (void)CopyInto(out, t);
  return out;
}

Tensor Clone(const Tensor& t) {
  Tensor out = Tensor::EmptyLike(t);
  if (t.is_meta()) return out;
  if (IsCuda(t)) {
    (void)CopyInto(out, t);  // same shape and a fresh output: only the driver can fail
    return out;
  }
  char* bases[2] = {static_cast<char*>(out.data()), static_cast<char*>(t.data())};
  Dims out_strides = out.strides(), in_strides = t.strides();
  for (int64_t& s : out_strides) s *= t.itemsize();
  for (int64_t& s : in_strides) s *= t.itemsize();
  Dims strides[2] = {out_strides, in_strides};
  StridedLoop loop(t.sizes(), bases, strides);
  loop.Run(ConvertLoopFor(t.dtype(), t.dtype()), /*parallel=*/true);
  return out;
}

absl::StatusOr<Scalar> ItemOf(const Tensor& t) {
  if (t.numel() != 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "a Tensor with %d elements cannot be converted to Scalar (shape %s)", t.numel(),
        t.ShapeString()));
  }
  if (t.is_meta()) {
    return absl::FailedPreconditionError("item() on a meta tensor: its value is not known");
  }
  if (IsCuda(t)) {
    absl::StatusOr<HostMirror> m = MirrorToHost(t);
    if (!m.ok()) return m.status();
    return ItemOf(m->host);
  }
  return DT_DISPATCH_ALL(t.dtype(), [&]() -> Scalar {
    const scalar_t v = *t.data_as<scalar_t>();
    if constexpr (std::is_same_v<scalar_t, bool>) return Scalar::Bool(v);
    else if constexpr (std::is_integral_v<scalar_t>) return Scalar::Int(v);
    else return Scalar::Float(static_cast<double>(static_cast<ComputeType<scalar_t>>(v)));
  });
}

}  // namespace dt
