// graph/graph_recorder.h: registry calls run on meta tensors, recorded as nodes of a graph.
//
// Installed with SetCallRecorder, it turns each Call() into one node of `out` (the op's own body
// runs unrecorded). Tensor arguments must be values it knows: given with Know(), or results of
// calls it recorded; a subclass may bind other tensors to values of its own (Unknown()).
// graph/decompose expands composites with it, autograd/joint_graph records derivative formulas.
//
//   GraphRecorder recorder(out, location, device);
//   recorder.Know(meta_x, x);
//   CallRecorder* outer = SetCallRecorder(&recorder);
//   Call("softmax", {meta_x, Scalar::Int(-1)});   // adds softmax's primitives to `out`
//   SetCallRecorder(outer);
#ifndef DYNTRACE_GRAPH_GRAPH_RECORDER_H_
#define DYNTRACE_GRAPH_GRAPH_RECORDER_H_

#include <optional>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/graph.h"
#include "graph/op_registry.h"

namespace dt {

// Meta tensors carry no identity of their own; two with the same storage, geometry and dtype
// hold the same elements, so either name is right for them.
bool SameMetaTensor(const Tensor& a, const Tensor& b);

class GraphRecorder : public CallRecorder {
 public:
  // `device`: where the graph runs. Calls run on meta tensors, so a tensor a call creates asks
  // for the meta device; its node is pointed at `device` instead (kept as asked without one).
  GraphRecorder(Graph& out, SourceLocation location, std::optional<Device> device)
      : out_(out), location_(std::move(location)), device_(device) {}

  void Know(const Tensor& meta, ValueId id) { known_.emplace_back(meta, id); }
  // Records calls of ops with a derivative formula whole, decomposable or not: a body expanded
  // for differentiation (scaled_dot_product_attention's) keeps its softmax a softmax node, so
  // backward uses softmax's formula (as eager autograd does), not the derivatives of the max,
  // exp and sum it is made of.
  void KeepDifferentiableWhole() { keep_differentiable_whole_ = true; }
  bool RecordsWhole(const OpDef& op) const override {
    return CallRecorder::RecordsWhole(op) || (keep_differentiable_whole_ && op.derivative.fn != nullptr);
  }
  // The value `meta` stands for: the latest known one, else Unknown(meta).
  absl::StatusOr<ValueId> Find(const Tensor& meta);
  absl::StatusOr<OpResult> Record(const OpDef& op, const OpArgs& args) override;

 protected:
  // A tensor no recorded call made: an error here.
  virtual absl::StatusOr<ValueId> Unknown(const Tensor& meta);
  Graph& out() { return out_; }

 private:
  Graph& out_;
  SourceLocation location_;
  std::optional<Device> device_;
  std::vector<std::pair<Tensor, ValueId>> known_;
  bool keep_differentiable_whole_ = false;
};

}  // namespace dt

#endif  // DYNTRACE_GRAPH_GRAPH_RECORDER_H_
