#include "graph/cuda_eager.h"

#include <atomic>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "graph/pointwise.h"
#include "runtime/autograd_meta.h"
#include "runtime/cuda_index_kernels.h"
#include "runtime/cuda_tensor.h"
#include "runtime/errors.h"

namespace dt {
namespace {

// Host stand-ins for an op's arguments, with the mirrors behind them.
struct HostArgs {
  OpArgs args;
  std::vector<HostMirror> mirrors;
};

absl::StatusOr<Tensor> HostSide(const Tensor& t, std::vector<HostMirror>& mirrors) {
  if (!IsCuda(t)) return t;
  absl::StatusOr<HostMirror> m = MirrorToHost(t);
  if (!m.ok()) return m.status();
  mirrors.push_back(*m);
  return m->host;
}

absl::StatusOr<HostArgs> ToHost(const OpArgs& args) {
  HostArgs host;
  std::vector<ArgValue> values;
  for (size_t i = 0; i < args.size(); ++i) {
    const ArgValue& a = args[i];
    if (const auto* t = std::get_if<Tensor>(&a)) {
      absl::StatusOr<Tensor> h = HostSide(*t, host.mirrors);
      if (!h.ok()) return h.status();
      values.push_back(*h);
    } else if (const auto* list = std::get_if<std::vector<Tensor>>(&a)) {
      std::vector<Tensor> hs;
      for (const Tensor& t : *list) {
        absl::StatusOr<Tensor> h = HostSide(t, host.mirrors);
        if (!h.ok()) return h.status();
        hs.push_back(*h);
      }
      values.push_back(std::move(hs));
    } else if (const auto* d = std::get_if<Device>(&a); d != nullptr && d->type == DeviceType::kCuda) {
      values.push_back(Device::Cpu());
    } else {
      values.push_back(a);
    }
  }
  host.args = OpArgs(std::move(values));
  return host;
}

// A host result back on `device`: a view of a mirrored operand becomes that view of the operand.
absl::StatusOr<Tensor> FromHost(const Tensor& result, const std::vector<HostMirror>& mirrors, Device device) {
  for (const HostMirror& m : mirrors) {
    if (result.storage() == m.host.storage()) {
      return Tensor(m.device.storage(), result.sizes(), result.strides(), result.offset() + m.span_begin,
                    result.dtype());
    }
  }
  return UploadKeepingLayout(result, device);
}

std::atomic<DeviceOpRunner*> device_op_runner{nullptr};

}  // namespace

void SetDeviceOpRunner(DeviceOpRunner* runner) { device_op_runner.store(runner); }

absl::StatusOr<OpResult> CallOpOnCuda(const OpDef& op, const OpArgs& args, Device device) {
  if (DeviceOpRunner* runner = device_op_runner.load(); runner != nullptr) {
    DT_ASSIGN_OR_RETURN(std::optional<OpResult> result, runner->Run(op, args, device));
    if (result.has_value()) return *std::move(result);
  }
  return CallOpThroughHost(op, args, device);
}

absl::StatusOr<std::optional<Device>> CudaDeviceOf(const OpDef& op, const OpArgs& args) {
  std::optional<Device> cuda;
  std::optional<Device> other;
  auto note = [&](Device d) {
    if (d.type == DeviceType::kCuda) {
      if (cuda && *cuda != d) other = d;
      else cuda = d;
    } else if (d.is_cpu()) {
      other = other.value_or(d);
    }
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const ArgValue& a = args[i];
    if (const auto* t = std::get_if<Tensor>(&a)) {
      note(t->device());
    } else if (const auto* list = std::get_if<std::vector<Tensor>>(&a)) {
      for (const Tensor& t : *list) note(t.device());
    } else if (const auto* d = std::get_if<Device>(&a); d != nullptr && d->type == DeviceType::kCuda) {
      cuda = *d;  // creation ops: where the result goes
      return cuda;
    }
  }
  if (cuda && other) {
    return Error(ErrorKind::kRuntime,
                 absl::StrFormat("%s: expected all tensors on the same device, but found %s and %s",
                                 op.name(), cuda->ToString(), other->ToString()));
  }
  return cuda;
}

absl::StatusOr<std::optional<Device>> CudaDeviceToRunOn(const OpDef& op, const OpArgs& args,
                                                        std::optional<OpArgs>& moved) {
  absl::StatusOr<std::optional<Device>> device = CudaDeviceOf(op, args);
  if (device.ok()) return device;
  // Devices disagree (the rare path): copy CPU tensors of no dims to the CUDA device, if any.
  auto movable = [](const Tensor& t) { return t.device().is_cpu() && t.ndim() == 0 && !RequiresGrad(t); };
  std::optional<Device> cuda;
  for (size_t i = 0; i < args.size() && !cuda.has_value(); ++i) {
    const auto* t = std::get_if<Tensor>(&args[i]);
    if (t != nullptr && t->device().type == DeviceType::kCuda) cuda = t->device();
  }
  if (!cuda.has_value()) return device;
  OpArgs copied = args;
  bool any = false;
  for (size_t i = 0; i < copied.size(); ++i) {
    const auto* t = std::get_if<Tensor>(&copied[i]);
    if (t == nullptr || !movable(*t)) continue;
    DT_ASSIGN_OR_RETURN(Tensor on_device, ToDevice(*t, *cuda));
    copied[i] = std::move(on_device);
    any = true;
  }
  if (!any) return device;
  DT_ASSIGN_OR_RETURN(std::optional<Device> found, CudaDeviceOf(op, copied));
  moved = std::move(copied);
  return found;
}

absl::StatusOr<std::optional<Device>> HostBridgeFor(const OpDef& op, const OpArgs& args, const Tensor& main) {
  DT_ASSIGN_OR_RETURN(std::optional<Device> cuda, CudaDeviceOf(op, args));
  if (!cuda.has_value()) return cuda;
  if (main.defined() && main.device() == *cuda && IndexKernelsRun(main)) return std::optional<Device>();
  return cuda;
}

absl::StatusOr<OpResult> CallOpThroughHost(const OpDef& op, const OpArgs& args, Device device) {
  CountCudaHostOp(op.name());
  absl::StatusOr<HostArgs> host = ToHost(args);
  if (!host.ok()) return host.status();
  absl::StatusOr<OpResult> results = CallOp(op, host->args);
  if (!results.ok()) return results.status();
  OpResult back;
  for (const Tensor& r : *results) {
    absl::StatusOr<Tensor> b = FromHost(r, host->mirrors, device);
    if (!b.ok()) return b.status();
    back.push_back(*b);
  }
  return back;
}

absl::StatusOr<Tensor> RunPointwiseIntoOnCuda(const OpDef& op, const OpArgs& args, const Tensor& out) {
  if (DeviceOpRunner* runner = device_op_runner.load(); runner != nullptr) {
    DT_ASSIGN_OR_RETURN(bool done, runner->RunPointwiseInto(op, args, out));
    if (done) return out;
  }
  CountCudaHostOp(absl::StrCat(op.name(), "_"));
  absl::StatusOr<HostArgs> host = ToHost(args);
  if (!host.ok()) return host.status();
  // `out` is usually also args[0]: write through that mirror so the two stay one buffer.
  const HostMirror* out_mirror = nullptr;
  for (const HostMirror& m : host->mirrors) {
    if (m.device.storage() == out.storage() && m.device.offset() == out.offset() &&
        m.device.sizes() == out.sizes() && m.device.strides() == out.strides()) {
      out_mirror = &m;
    }
  }
  absl::StatusOr<HostMirror> own;
  if (out_mirror == nullptr) {
    own = MirrorToHost(out);
    if (!own.ok()) return own.status();
    out_mirror = &*own;
  }
  absl::StatusOr<Tensor> r = RunPointwise(op, host->args, &out_mirror->host);
  if (!r.ok()) return r.status();
  if (absl::Status s = WriteBack(*out_mirror); !s.ok()) return s;
  return out;
}

}  // namespace dt
