#include "jit/cuda_executable.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "jit/cuda_launch.h"
#include "jit/launch_geometry.h"
#include "jit/schedule.h"
#include "runtime/copy.h"
#include "runtime/cuda_allocator.h"
#include "runtime/errors.h"
#include "runtime/log.h"

namespace dt::backend {
namespace {

// A fresh device tensor with `meta`'s sizes and (dense) strides.
absl::StatusOr<Tensor> AllocateOnDevice(const Tensor& meta, Device device) {
  int64_t extent = meta.numel() > 0 ? 1 : 0;
  for (int64_t d = 0; d < meta.ndim() && extent > 0; ++d) extent += (meta.size(d) - 1) * meta.stride(d);
  const size_t nbytes = static_cast<size_t>(std::max<int64_t>(extent, 1)) * meta.itemsize();
  absl::StatusOr<CUdeviceptr> block = CudaAllocator::Get().Allocate(device.index, nbytes);
  if (!block.ok()) return block.status();
  const CUdeviceptr ptr = *block;
  const int index = device.index;
  auto storage = Storage::Wrap(reinterpret_cast<void*>(ptr), nbytes, device,
                               [index, ptr, nbytes] { CudaAllocator::Get().Free(index, ptr, nbytes); });
  return Tensor(std::move(storage), meta.sizes(), meta.strides(), 0, meta.dtype());
}

}  // namespace

absl::StatusOr<std::shared_ptr<CudaExecutable>> CudaExecutable::Build(const Graph& graph, absl::string_view name,
                                                                      Device device) {
  const auto start = std::chrono::steady_clock::now();
  auto exe = std::make_shared<CudaExecutable>();
  DT_ASSIGN_OR_RETURN(exe->device_, CudaDevice::Get(device.index));
  exe->device_id_ = device;
  DT_ASSIGN_OR_RETURN(exe->program_, Schedule(graph));
  exe->plans_ = std::make_unique<ShapePlans>(&exe->program_.graph);
  if (!exe->program_.kernels.empty()) {
    DT_ASSIGN_OR_RETURN(exe->cuda_, EmitCuda(exe->program_));
    exe->kernel_source_ = exe->cuda_.readable;
    CacheSource source_kind;
    DT_ASSIGN_OR_RETURN(exe->cubin_, KernelCache::Global().LoadCubin(exe->cuda_.source, std::string(name),
                                                                     exe->device_->sm_arch(), &source_kind));
    DT_RETURN_IF_ERROR(exe->device_->Activate());
    const CudaDriver& d = exe->device_->driver();
    DT_RETURN_IF_ERROR(CudaCall(d.cuModuleLoadData(&exe->module_, exe->cubin_->data()), "cuModuleLoadData"));
  }
  exe->build_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (log::Enabled(log::Kind::kKernels)) {
    log::Write(log::Kind::kKernels,
               absl::StrFormat("%s: %d CUDA kernel(s) for %s (sm_%d), %d node(s) run eagerly, in %.1f ms", name,
                               exe->num_kernels(), device.ToString(), exe->device_->sm_arch(),
                               exe->program_.steps.size() - exe->program_.kernels.size(), exe->build_seconds_ * 1e3),
               exe->kernel_source_);
  }
  return exe;
}

CudaExecutable::~CudaExecutable() {
  if (module_ == nullptr) return;
  // Launches still queued may use the module's code.
  if (device_->Synchronize().ok()) device_->driver().cuModuleUnload(module_);
}

absl::StatusOr<CUfunction> CudaExecutable::Function(const std::string& name) {
  if (auto it = functions_.find(name); it != functions_.end()) return it->second;
  CUfunction fn = nullptr;
  DT_RETURN_IF_ERROR(CudaCall(device_->driver().cuModuleGetFunction(&fn, module_, name.c_str()),
                              "cuModuleGetFunction"));
  functions_[name] = fn;
  return fn;
}

absl::Status CudaExecutable::RunKernel(int index, const ShapePlans::Plan& plan, std::vector<Tensor>& env,
                                       const std::vector<Scalar>& scalars) {
  const Kernel& k = program_.kernels[index];
  absl::InlinedVector<Tensor, 8> tensors;
  for (const KernelOperand& op : k.operands) {
    if (op.is_output) {
      DT_ASSIGN_OR_RETURN(Tensor out, AllocateOnDevice(plan[op.value], device_id_));
      tensors.push_back(std::move(out));
    } else if (op.scalar_slot >= 0) {
      // The ABI reads a run-time number through a pointer to one device element.
      tensors.push_back(ScalarTensor(scalars.at(op.scalar_slot), op.dtype, device_id_));
    } else {
      if (!env[op.value].defined()) {
        return absl::InternalError(absl::StrFormat("%s reads v%d before it is computed", k.name, op.value));
      }
      tensors.push_back(env[op.value]);
    }
  }
  absl::StatusOr<LaunchGeometry> geometry = PrepareLaunch(k, plan[k.domain].sizes(), tensors);
  if (!geometry.ok()) {
    for (int node : k.nodes) DT_RETURN_IF_ERROR(program_.graph.RunNode(node, env, scalars));
    return absl::OkStatus();
  }
  int64_t rows = 1;
  for (int64_t s : geometry->outer_sizes) rows *= s;
  const CudaLaunchPlan launch = PlanCudaLaunch(cuda_.kernels[index], rows, geometry->inner_size,
                                               device_->multiprocessors());
  Tensor workspace;
  if (launch.workspace_bytes > 0) {
    DT_ASSIGN_OR_RETURN(workspace, AllocateOnDevice(Tensor::Empty({launch.workspace_bytes}, DType::kBool, Device::Meta()),
                                                    device_id_));
  }
  absl::InlinedVector<char*, 8> data;
  for (const Tensor& t : tensors) data.push_back(static_cast<char*>(t.data()));
  DT_ASSIGN_OR_RETURN(CudaKernelArgs args,
                      PackCudaArgs(*geometry, data, launch, workspace.defined() ? static_cast<char*>(workspace.data()) : nullptr));
  DT_RETURN_IF_ERROR(device_->Activate());
  const CudaDriver& d = device_->driver();
  for (const CudaLaunch& l : launch.launches) {
    DT_ASSIGN_OR_RETURN(CUfunction fn, Function(l.function));
    void* params[] = {&args};
    DT_RETURN_IF_ERROR(CudaCall(d.cuLaunchKernel(fn, static_cast<unsigned>(l.grid), 1, 1, static_cast<unsigned>(l.block),
                                                 1, 1, static_cast<unsigned>(l.dynamic_shared_bytes), device_->stream(),
                                                 params, nullptr),
                                "cuLaunchKernel"));
  }
  for (size_t i = 0; i < k.operands.size(); ++i) {
    if (k.operands[i].is_output) env[k.operands[i].value] = std::move(tensors[i]);
  }
  // `workspace` and scalar operands go back to the allocator here, while the launch may still
  // be queued: the next user of those blocks is queued behind it on the same stream.
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Tensor>> CudaExecutable::Run(const std::vector<Tensor>& inputs,
                                                        const std::vector<Scalar>& scalars) {
  const Graph& g = program_.graph;
  if (inputs.size() != g.inputs().size()) {
    return Error(ErrorKind::kRuntime, absl::StrFormat("compiled graph expects %d inputs, got %d",
                                                      g.inputs().size(), inputs.size()));
  }
  DT_ASSIGN_OR_RETURN(std::shared_ptr<const ShapePlans::Plan> plan, plans_->For(inputs, scalars));
  std::vector<Tensor> env(g.num_values());
  for (size_t i = 0; i < inputs.size(); ++i) env[g.inputs()[i]] = inputs[i];
  for (const Step& step : program_.steps) {
    if (step.kind == Step::Kind::kNode) {
      DT_RETURN_IF_ERROR(g.RunNode(step.index, env, scalars));
    } else {
      DT_RETURN_IF_ERROR(RunKernel(step.index, *plan, env, scalars));
    }
  }
  std::vector<Tensor> outputs;
  outputs.reserve(g.outputs().size());
  for (ValueId v : g.outputs()) outputs.push_back(env[v]);
  return outputs;
}

}  // namespace dt::backend
