// interpreter/trace_autograd.cc: a trace whose inputs autograd follows ends in a joint
// forward/backward split (autograd/joint_graph.h), so the compiled frame returns tensors with a
// backward of their own instead of running eagerly.
#include <cstdlib>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "interpreter/tracer_internal.h"

namespace dt::interpreter::trace {

absl::Status Tracer::SplitForAutograd(TraceResult& r) {
  if (grad_inputs_.empty()) return absl::OkStatus();
  std::vector<bool> requires_grad;
  std::optional<Device> device;
  for (ValueId v : graph_->inputs()) {
    const bool follows = grad_inputs_.contains(v);
    requires_grad.push_back(follows);
    if (follows && !device.has_value()) device = value_device_.at(v);
  }
  // DYNTRACE_PARTITIONER=save-all keeps every value the formulas read (to measure the min cut).
  const char* partitioner = std::getenv("DYNTRACE_PARTITIONER");
  const bool min_cut = partitioner == nullptr || std::string_view(partitioner) != "save-all";
  absl::StatusOr<JointGraph> built = BuildJointGraph(*graph_, requires_grad, *device, min_cut);
  if (!built.ok()) return Unsupported(absl::StrCat("compiled autograd: ", built.status().message()));
  JointGraph joint = *std::move(built);
  if (joint.differentiable_outputs.empty()) return absl::OkStatus();  // no output depends on them
  // Graphs serve any sizes their guards allow, but the backward graph is built for these (its
  // formulas sum and reshape to them): the entry serves exactly these sizes.
  for (size_t i = 0; i < graph_->inputs().size(); ++i) {
    const Tensor& meta = graph_->value(graph_->inputs()[i]).meta;
    for (int64_t d = 0; d < meta.ndim(); ++d) {
      guards_.Add(LeafGuard::TensorSize(input_sources_[i], d, meta.size(d), Here()));
    }
  }
  r.graph = joint.forward;
  r.joint = std::make_shared<const JointGraph>(std::move(joint));
  return absl::OkStatus();
}

}  // namespace dt::interpreter::trace
