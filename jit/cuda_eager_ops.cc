#include "jit/cuda_eager_ops.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "graph/cuda_eager.h"
#include "graph/graph.h"
#include "graph/pointwise.h"
#include "jit/cuda_executable.h"
#include "jit/kernel_cache.h"
#include "jit/schedule.h"
#include "runtime/copy.h"
#include "runtime/cuda_index_kernels.h"
#include "runtime/cuda_tensor.h"
#include "runtime/errors.h"
#include "runtime/log.h"
#include "runtime/nvrtc.h"

namespace dt::jit {
namespace {

Tensor MetaOf(const Tensor& t) {
  return Tensor(Storage::Allocate(0, Device::Meta()), t.sizes(), t.strides(), 0, t.dtype());
}

// What a compiled one-op program depends on in a tensor operand (sizes and strides are run-time
// arguments): dtype, rank, which dims are 1 or broadcast, and the innermost stride's class,
// which picks the kernel variant that vectorises.
void AppendTensorKey(std::string& key, const Tensor& t) {
  absl::StrAppend(&key, "T", DTypeName(t.dtype()), ":", t.ndim(), ":");
  for (int64_t d = 0; d < t.ndim(); ++d) key += t.size(d) == 1 ? '1' : t.stride(d) == 0 ? '0' : 'n';
  if (t.ndim() > 0) {
    const int64_t inner = t.stride(t.ndim() - 1);
    key += inner == 1 ? 'u' : inner == 0 ? 'z' : 'g';
  }
  key += ';';
}

// A one-op graph for an op call, with what to run it on.
struct OneOp {
  std::string key;
  Graph graph;
  std::vector<Tensor> inputs;
  std::vector<Scalar> scalars;
};

// Whether argument `index` of `op` may be a run-time number: the operands of pointwise ops
// (not comparisons, whose compute dtype the scheduler can't tell from a run-time number).
bool RunTimeNumber(const OpDef& op, size_t index) {
  return op.kind == OpKind::kPointwise && static_cast<int>(index) < op.pointwise.arity &&
         op.pointwise.dtype_rule != DTypeRule::kToBool;
}

// Inputs, arguments and key of `op(args)` as a graph; nullopt for arguments a graph can't take.
std::optional<OneOp> Describe(const OpDef& op, const OpArgs& args, std::vector<ArgValue>& metas,
                              std::vector<GraphArg>& graph_args) {
  OneOp one;
  one.key = absl::StrCat(op.name(), "(");
  for (size_t i = 0; i < args.size(); ++i) {
    const ArgValue& a = args[i];
    if (const auto* t = std::get_if<Tensor>(&a)) {
      if (!IsCuda(*t)) return std::nullopt;
      AppendTensorKey(one.key, *t);
      Tensor meta = MetaOf(*t);
      graph_args.push_back(GraphArg::Value(one.graph.AddInput(meta, absl::StrCat("arg", i))));
      metas.push_back(std::move(meta));
      one.inputs.push_back(*t);
    } else if (std::holds_alternative<std::vector<Tensor>>(a)) {
      return std::nullopt;
    } else if (const auto* s = std::get_if<Scalar>(&a); s != nullptr && RunTimeNumber(op, i)) {
      absl::StrAppend(&one.key, "N", DTypeName(s->NaturalDType()), ";");
      graph_args.push_back(GraphArg{ScalarRef{static_cast<int>(one.scalars.size())}});
      one.scalars.push_back(*s);
      metas.push_back(a);
    } else {
      const absl::string_view natural =
          std::holds_alternative<Scalar>(a) ? DTypeName(std::get<Scalar>(a).NaturalDType()) : absl::string_view();
      absl::StrAppend(&one.key, "C", natural, ArgValueToString(a), ";");
      graph_args.push_back(GraphArg{a});
      metas.push_back(a);
    }
  }
  one.key += ")";
  return one;
}

// `op(args)` as a one-op graph. With `into`, the result is converted to into's dtype (an
// in-place op writes there). Errors are the op's own (its meta run raises what eager raises).
absl::StatusOr<std::optional<OneOp>> BuildOneOp(const OpDef& op, const OpArgs& args, const Tensor* into) {
  std::vector<ArgValue> metas;
  std::vector<GraphArg> graph_args;
  std::optional<OneOp> one = Describe(op, args, metas, graph_args);
  if (!one.has_value()) return one;
  DT_ASSIGN_OR_RETURN(OpResult results, CallOp(op, OpArgs(std::move(metas))));
  std::vector<ValueId> outputs = one->graph.AddNode(&op, std::move(graph_args), results, false, SourceLocation());
  if (into != nullptr) {
    if (outputs.size() != 1 || results[0].sizes() != into->sizes()) return std::optional<OneOp>();
    absl::StrAppend(&one->key, "->", DTypeName(into->dtype()));
    if (results[0].dtype() != into->dtype()) {
      const OpDef* to = OpRegistry::Get().Find("_to");
      const Tensor cast = Tensor::Empty(results[0].sizes(), into->dtype(), Device::Meta());
      outputs = one->graph.AddNode(to, {GraphArg::Value(outputs[0]), GraphArg{ArgValue(into->dtype())}}, {cast},
                                   false, SourceLocation());
    }
  }
  one->graph.SetOutputs(outputs);
  return one;
}

// Whether every step of `program` runs on the device by itself: kernels and views. A node the
// scheduler left to eager execution would come back to this runner (integer division checks
// its divisor on the host first), so such programs are refused.
bool AllOnDevice(const Program& program) {
  for (const Step& step : program.steps) {
    if (step.kind == Step::Kind::kKernel) continue;
    if (program.graph.nodes()[step.index].op->kind != OpKind::kView) return false;
  }
  return true;
}

class CudaEagerOps final : public DeviceOpRunner {
 public:
  absl::StatusOr<std::optional<OpResult>> Run(const OpDef& op, const OpArgs& args, Device device) override;
  absl::StatusOr<bool> RunPointwiseInto(const OpDef& op, const OpArgs& args, const Tensor& out) override;
  absl::StatusOr<bool> Copy(const Tensor& dst, const Tensor& src);

 private:
  // The compiled program for `one`, or null when it has none on `device`.
  std::shared_ptr<CudaExecutable> ProgramFor(const OneOp& one, Device device);
  std::shared_ptr<CudaExecutable> Build(const OneOp& one, Device device);

  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<CudaExecutable>> programs_ ABSL_GUARDED_BY(mu_);
  // Devices whose driver refused a module: nothing will load there (the stand-in driver).
  absl::flat_hash_set<int> refusing_devices_ ABSL_GUARDED_BY(mu_);
};

std::shared_ptr<CudaExecutable> CudaEagerOps::ProgramFor(const OneOp& one, Device device) {
  const std::string key = absl::StrCat(device.index, "|", one.key);
  {
    absl::MutexLock lock(&mu_);
    if (refusing_devices_.contains(device.index)) return nullptr;
    if (auto it = programs_.find(key); it != programs_.end()) return it->second;
  }
  // Compiled outside the lock: NVRTC takes a while, and other threads' cached ops go on.
  std::shared_ptr<CudaExecutable> exe = Build(one, device);
  absl::MutexLock lock(&mu_);
  return programs_.emplace(key, std::move(exe)).first->second;
}

std::shared_ptr<CudaExecutable> CudaEagerOps::Build(const OneOp& one, Device device) {
  auto refuse = [&](absl::string_view why) -> std::shared_ptr<CudaExecutable> {
    if (log::Enabled(log::Kind::kKernels)) {
      log::Write(log::Kind::kKernels,
                 absl::StrFormat("eager %s on %s runs through the host: %s", one.key, device.ToString(), why));
    }
    return nullptr;
  };
  if (!ProbeNvrtc().available) return refuse(ProbeNvrtc().reason);
  // Scheduling is cheap; NVRTC is not: refuse before compiling what could not run anyway.
  absl::StatusOr<Program> planned = Schedule(one.graph);
  if (!planned.ok()) return refuse(planned.status().message());
  if (!AllOnDevice(*planned)) return refuse("a step of it would run eagerly");
  absl::StatusOr<std::shared_ptr<CudaExecutable>> exe =
      CudaExecutable::Build(one.graph, absl::StrCat("eager ", one.key), device, CudaGraphMode::kOff);
  if (!exe.ok()) {
    if (absl::StrContains(exe.status().message(), "cuModuleLoadData")) {
      absl::MutexLock lock(&mu_);
      refusing_devices_.insert(device.index);
    }
    return refuse(exe.status().message());
  }
  return *std::move(exe);
}

absl::StatusOr<std::optional<OpResult>> CudaEagerOps::Run(const OpDef& op, const OpArgs& args, Device device) {
  if (op.kind != OpKind::kPointwise && op.kind != OpKind::kReduction && op.kind != OpKind::kComposite) {
    return std::nullopt;
  }
  DT_ASSIGN_OR_RETURN(std::optional<OneOp> one, BuildOneOp(op, args, nullptr));
  std::shared_ptr<CudaExecutable> exe = one.has_value() ? ProgramFor(*one, device) : nullptr;
  if (exe == nullptr) {
    // A composite's own body calls primitives, each of which finds its way to the device.
    if (op.kind == OpKind::kComposite) {
      DT_ASSIGN_OR_RETURN(OpResult r, op.eager(op, args));
      return std::optional<OpResult>(std::move(r));
    }
    return std::nullopt;
  }
  DT_ASSIGN_OR_RETURN(std::vector<Tensor> outputs, exe->Run(one->inputs, one->scalars));
  return std::optional<OpResult>(std::move(outputs));
}

absl::StatusOr<bool> CudaEagerOps::RunPointwiseInto(const OpDef& op, const OpArgs& args, const Tensor& out) {
  if (HasInternalOverlap(out)) return false;  // the host path raises PyTorch's error
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args.is_tensor(i)) continue;
    const Tensor& t = args.tensor(i);
    if (t.device() != out.device()) return false;
    // An operand reading out's memory through another view would see elements already written.
    const bool same_view = t.offset() == out.offset() && t.sizes() == out.sizes() && t.strides() == out.strides();
    if (t.SharesStorageWith(out) && !same_view) return false;
  }
  DT_ASSIGN_OR_RETURN(std::optional<OneOp> one, BuildOneOp(op, args, &out));
  std::shared_ptr<CudaExecutable> exe = one.has_value() ? ProgramFor(*one, out.device()) : nullptr;
  if (exe == nullptr) return false;
  DT_RETURN_IF_ERROR(exe->Run(one->inputs, one->scalars, {out}).status());
  return true;
}

absl::StatusOr<bool> CudaEagerOps::Copy(const Tensor& dst, const Tensor& src) {
  if (dst.numel() == 0) return true;
  const OpDef* op = OpRegistry::Get().Find(src.dtype() == dst.dtype() ? "clone" : "_to");
  std::vector<ArgValue> args{src};
  if (src.dtype() != dst.dtype()) args.push_back(dst.dtype());
  DT_ASSIGN_OR_RETURN(std::optional<OneOp> one, BuildOneOp(*op, OpArgs(std::move(args)), &dst));
  std::shared_ptr<CudaExecutable> exe = one.has_value() ? ProgramFor(*one, dst.device()) : nullptr;
  if (exe == nullptr) return false;
  DT_RETURN_IF_ERROR(exe->Run(one->inputs, one->scalars, {dst}).status());
  return true;
}

CudaEagerOps& Runner() {
  static auto* runner = new CudaEagerOps();  // lives for the process: ops may run at exit
  return *runner;
}

absl::StatusOr<bool> CopyKernel(const Tensor& dst, const Tensor& src) { return Runner().Copy(dst, src); }

// The index kernels' modules through the kernel cache, so a process after the first loads
// their CUBINs from disk instead of running NVRTC.
absl::StatusOr<std::string> CachedCubin(const std::string& source, const std::string& name, int sm_arch) {
  CacheSource from = CacheSource::kCompiled;
  DT_ASSIGN_OR_RETURN(std::shared_ptr<const std::string> cubin,
                      KernelCache::Global().LoadCubin(source, name, sm_arch, &from));
  return *cubin;
}

}  // namespace

void InstallCudaEagerOps() {
  SetDeviceOpRunner(&Runner());
  SetDeviceCopyKernel(&CopyKernel);
  SetIndexKernelCompiler(&CachedCubin);
}

}  // namespace dt::jit
