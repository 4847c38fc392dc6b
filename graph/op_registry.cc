#include "graph/op_registry.h"

#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_format.h"
#include "graph/autocast.h"
#include "graph/cuda_eager.h"
#include "runtime/autograd_meta.h"

namespace dt {

const OpRegistry& OpRegistry::Get() {
  static const OpRegistry* registry = [] {
    auto* r = new OpRegistry();
    RegisterPointwiseOps(*r);
    RegisterReductionOps(*r);
    RegisterShapeOps(*r);
    RegisterCreationOps(*r);
    RegisterCompositeOps(*r);
    RegisterLinalgOps(*r);
    RegisterIndexingOps(*r);
    RegisterSortingOps(*r);
    RegisterSearchOps(*r);
    RegisterDataOps(*r);
    RegisterLossOps(*r);
    RegisterNNOps(*r);
    RegisterAttentionOps(*r);
    RegisterNormOps(*r);
    RegisterIm2colOp(*r);
    RegisterConvOps(*r);
    RegisterResampleOps(*r);
    RegisterEinsumOp(*r);
    RegisterMathOps(*r);
    RegisterNormReductionOps(*r);
    RegisterShapeExtraOps(*r);
    RegisterRandomOps(*r);
    RegisterOptimOps(*r);
    RegisterDerivatives(*r);  // last: it and the autocast lists amend ops registered above
    RegisterAutocastPolicies(*r);
    return r;
  }();
  return *registry;
}

OpDef& OpRegistry::Add(absl::string_view schema_text, OpKind kind, uint32_t properties,
                       EagerFn eager) {
  auto schema = ParseSchema(schema_text);
  if (!schema.ok() || by_name_.contains(schema->name)) {
    std::fprintf(stderr, "dyntrace: invalid op registration '%s': %s\n",
                 std::string(schema_text).c_str(),
                 schema.ok() ? "duplicate name" : std::string(schema.status().message()).c_str());
    std::abort();
  }
  auto op = std::make_unique<OpDef>();
  op->schema = *std::move(schema);
  op->kind = kind;
  op->properties = properties;
  op->eager = eager;
  OpDef* raw = op.get();
  by_name_[raw->name()] = raw;
  ops_.push_back(std::move(op));
  return *raw;
}

const OpDef* OpRegistry::Find(absl::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

namespace {
GradRecorder grad_recorder = nullptr;
}  // namespace

void InstallGradRecorder(GradRecorder recorder) { grad_recorder = recorder; }

bool RecordsGrad(const OpArgs& args) {
  if (grad_recorder == nullptr || !GradEnabled()) return false;
  for (size_t i = 0; i < args.size(); ++i) {
    if (const Tensor* t = std::get_if<Tensor>(&args[i]); t != nullptr && RequiresGrad(*t)) return true;
    if (const auto* list = std::get_if<std::vector<Tensor>>(&args[i])) {
      for (const Tensor& t : *list) {
        if (RequiresGrad(t)) return true;
      }
    }
  }
  return false;
}

OpDef& OpRegistry::Mutable(absl::string_view name) {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) {
    std::fprintf(stderr, "dyntrace: no op named '%s' to amend\n", std::string(name).c_str());
    std::abort();
  }
  return *it->second;
}

absl::StatusOr<OpResult> CallOp(const OpDef& op, const OpArgs& args) {
  if (RecordsGrad(args)) return grad_recorder(op, args);
  return CallOpUnrecorded(op, args);
}

absl::StatusOr<OpResult> CallOpUnrecorded(const OpDef& op, const OpArgs& args) {
  if (args.size() != op.schema.params.size()) {
    return absl::InternalError(absl::StrFormat("%s: expected %d arguments, got %d", op.name(),
                                               op.schema.params.size(), args.size()));
  }
  if (op.kind != OpKind::kView && !op.has(kCudaNative)) {
    std::optional<OpArgs> moved;
    DT_ASSIGN_OR_RETURN(std::optional<Device> cuda, CudaDeviceToRunOn(op, args, moved));
    if (cuda.has_value()) return CallOpOnCuda(op, moved.has_value() ? *moved : args, *cuda);
  }
  return op.eager(op, args);
}

absl::StatusOr<OpResult> CallOpBody(const OpDef& op, const OpArgs& args) {
  if (op.kind != OpKind::kComposite || args.size() != op.schema.params.size()) return CallOpUnrecorded(op, args);
  return op.eager(op, args);
}

void CreateOnMeta(const OpDef& op, std::vector<ArgValue>& args) {
  if (op.kind != OpKind::kCreation) return;
  const int device = op.schema.IndexOf("device");
  if (device >= 0 && device < static_cast<int>(args.size())) args[device] = Device::Meta();
}

namespace {
thread_local CallRecorder* call_recorder = nullptr;
}  // namespace

absl::StatusOr<Tensor> Call(absl::string_view name, std::vector<ArgValue> args) {
  const OpDef* op = OpRegistry::Get().Find(name);
  if (op == nullptr) return absl::InternalError(absl::StrCat("no op named ", name));
  const auto& params = op->schema.params;
  if (args.size() > params.size()) {
    return absl::InternalError(absl::StrFormat("%s: too many arguments", name));
  }
  for (size_t i = args.size(); i < params.size(); ++i) {
    if (!params[i].default_value.has_value()) {
      return absl::InternalError(absl::StrFormat("%s: missing argument %s", name, params[i].name));
    }
    args.push_back(*params[i].default_value);
  }
  if (call_recorder != nullptr && call_recorder->RecordsWhole(*op)) {
    DT_ASSIGN_OR_RETURN(OpResult recorded, call_recorder->Record(*op, OpArgs(std::move(args))));
    return recorded.at(0);
  }
  DT_ASSIGN_OR_RETURN(OpResult result, CallOp(*op, OpArgs(std::move(args))));
  return result.at(0);
}

CallRecorder* SetCallRecorder(CallRecorder* recorder) {
  CallRecorder* previous = call_recorder;
  call_recorder = recorder;
  return previous;
}

}  // namespace dt
