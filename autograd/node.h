// autograd/node.h: the backward graph. Each recorded call is a GradNode whose edges lead to the
// nodes of its arguments; a leaf that requires grad ends a path in its AccumulateGrad node.
//
//   y = x * w          // records a node for mul with edges to x's and w's nodes
//   RunBackward(...)   // autograd/engine.h walks the nodes in dependency order
#ifndef DYNTRACE_AUTOGRAD_NODE_H_
#define DYNTRACE_AUTOGRAD_NODE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/op_registry.h"
#include "runtime/autograd_meta.h"

namespace dt {

struct Edge {
  std::shared_ptr<GradNode> node;  // null: no gradient is wanted along this edge
  int input_nr = 0;                // which of `node`'s outputs the gradient is for
};

// What a gradient must look like where it arrives: the engine sums broadcast dims away and
// casts, so formulas need not.
struct GradShape {
  Dims sizes;
  DType dtype = DType::kFloat32;
  Device device;
};

class GradNode : public std::enable_shared_from_this<GradNode> {
 public:
  virtual ~GradNode() = default;

  // PyTorch's style of name: "MulBackward0", "AccumulateGrad".
  virtual std::string name() const = 0;
  // The gradients of the node's inputs (one per edge, undefined where none flows) from those
  // of its outputs (one per output; zeros where none flowed).
  virtual absl::StatusOr<std::vector<Tensor>> Apply(std::vector<Tensor> output_grads, bool create_graph) = 0;
  // Frees what the node saved for Apply (after a backward pass without retain_graph).
  virtual void ReleaseSaved() {}
  // Said before Apply when ReleaseSaved follows it: the node may hand what it saved over to
  // Apply's computation, which then frees each value after its last use instead of at the end.
  virtual void WillReleaseSaved() {}

  const std::vector<Edge>& next() const { return next_; }
  const std::vector<GradShape>& input_shapes() const { return input_shapes_; }
  const std::vector<GradShape>& output_shapes() const { return output_shapes_; }
  // Non-leaf outputs whose .grad the user asked for (retain_grad()), by output.
  std::vector<std::weak_ptr<AutogradMeta>>& retained() { return retained_; }

 protected:
  std::vector<Edge> next_;
  std::vector<GradShape> input_shapes_;
  std::vector<GradShape> output_shapes_;
  std::vector<std::weak_ptr<AutogradMeta>> retained_;
};

// Ends every path at a leaf: adds the arriving gradient into the leaf's .grad.
class AccumulateGrad final : public GradNode {
 public:
  explicit AccumulateGrad(std::shared_ptr<AutogradMeta> leaf, GradShape shape);
  std::string name() const override { return "AccumulateGrad"; }
  absl::StatusOr<std::vector<Tensor>> Apply(std::vector<Tensor> output_grads, bool create_graph) override;
  const std::shared_ptr<AutogradMeta>& leaf() const { return leaf_; }

 private:
  std::shared_ptr<AutogradMeta> leaf_;
};

// A tensor a node keeps for its backward pass, with its storage's version when kept.
struct SavedTensor {
  Tensor tensor;
  uint64_t version;
};

// PyTorch's errors for a node's saved tensors: freed by an earlier backward pass without
// retain_graph (`released`), or changed in place since they were saved.
[[nodiscard]] absl::Status CheckSavedTensors(bool released, const std::vector<SavedTensor>& saved,
                                             const std::string& node_name);

// Adds `g` into meta.grad (a copy of `g` when .grad is unset, so later in-place changes to
// .grad cannot reach other tensors; `g` itself under create_graph, so .grad keeps its history).
[[nodiscard]] absl::Status AccumulateGradient(AutogradMeta& meta, const Tensor& g, bool create_graph);

// The edge a gradient for `t` flows along: its grad_fn's output, or its leaf accumulator. A
// view whose base changed in place takes its grad_fn afresh first (autograd/views.h), which
// records a call and so can fail. REQUIRES: RequiresGrad(t).
[[nodiscard]] absl::StatusOr<Edge> GradientEdge(const Tensor& t);
GradShape ShapeOf(const Tensor& t);

}  // namespace dt

#endif  // DYNTRACE_AUTOGRAD_NODE_H_
