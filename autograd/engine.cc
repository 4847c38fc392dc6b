#include "autograd/engine.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_format.h"
#include "autograd/node.h"
#include "graph/op_registry.h"
#include "runtime/errors.h"

namespace dt {
namespace {

// Sums a gradient computed at a broadcast shape back to `shape` and casts it to its dtype.
absl::StatusOr<Tensor> FitGradient(Tensor g, const GradShape& shape, const GradNode& node) {
  if (g.sizes() != shape.sizes) {
    const int64_t lead = g.ndim() - static_cast<int64_t>(shape.sizes.size());
    Dims dims;
    for (int64_t d = 0; d < g.ndim(); ++d) {
      if (d < lead || (shape.sizes[d - lead] == 1 && g.size(d) != 1)) dims.push_back(d);
    }
    if (lead < 0) {
      return Error(ErrorKind::kRuntime, absl::StrFormat("%s returned a gradient of shape %s for an input of shape %s",
                                                        node.name(), g.ShapeString(), DimsToString(shape.sizes)));
    }
    if (!dims.empty()) {
      DT_ASSIGN_OR_RETURN(g, Call("sum", {g, dims, Scalar::Bool(true), None{}}));
    }
    DT_ASSIGN_OR_RETURN(g, Call("reshape", {g, shape.sizes}));
  }
  if (g.device() != shape.device) {
    DT_ASSIGN_OR_RETURN(g, Call("_to_device", {g, shape.device}));
  }
  if (g.dtype() != shape.dtype) {
    DT_ASSIGN_OR_RETURN(g, Call("_to", {g, shape.dtype}));
  }
  return g;
}

absl::StatusOr<Tensor> AddGradients(const Tensor& sum, const Tensor& g) {
  if (!sum.defined()) return g;
  return Call("add", {sum, g});
}

struct Plan {
  std::vector<GradNode*> order;  // every node reachable from the roots, dependencies first
  absl::flat_hash_map<GradNode*, std::shared_ptr<GradNode>> owners;
};

// Kahn's order over the graph reachable from `roots`: a node runs once every node whose
// gradient flows into it has run.
Plan PlanBackward(const std::vector<Edge>& roots) {
  Plan plan;
  absl::flat_hash_map<GradNode*, int> pending;
  std::vector<GradNode*> stack;
  for (const Edge& e : roots) {
    if (plan.owners.emplace(e.node.get(), e.node).second) stack.push_back(e.node.get());
  }
  while (!stack.empty()) {
    GradNode* node = stack.back();
    stack.pop_back();
    for (const Edge& e : node->next()) {
      if (e.node == nullptr) continue;
      ++pending[e.node.get()];
      if (plan.owners.emplace(e.node.get(), e.node).second) stack.push_back(e.node.get());
    }
  }
  for (const auto& [node, owner] : plan.owners) {
    if (!pending.contains(node)) stack.push_back(node);
  }
  while (!stack.empty()) {
    GradNode* node = stack.back();
    stack.pop_back();
    plan.order.push_back(node);
    for (const Edge& e : node->next()) {
      if (e.node != nullptr && --pending[e.node.get()] == 0) stack.push_back(e.node.get());
    }
  }
  return plan;
}

// For autograd.grad: the nodes on some path to a wanted input (others need not run).
absl::flat_hash_set<GradNode*> NeededNodes(const Plan& plan, const absl::flat_hash_set<GradNode*>& targets) {
  absl::flat_hash_set<GradNode*> needed(targets.begin(), targets.end());
  for (auto it = plan.order.rbegin(); it != plan.order.rend(); ++it) {
    for (const Edge& e : (*it)->next()) {
      if (e.node != nullptr && needed.contains(e.node.get())) {
        needed.insert(*it);
        break;
      }
    }
  }
  return needed;
}

absl::Status CheckRoots(const BackwardRequest& request, std::vector<Edge>& edges, std::vector<Tensor>& grads) {
  for (size_t i = 0; i < request.roots.size(); ++i) {
    const Tensor& root = request.roots[i];
    if (!RequiresGrad(root)) {
      return Error(ErrorKind::kRuntime,
                   absl::StrFormat("element %d of tensors does not require grad and does not have a grad_fn", i));
    }
    Tensor g = i < request.root_grads.size() ? request.root_grads[i] : Tensor();
    if (!g.defined()) {
      if (root.numel() != 1) {
        return Error(ErrorKind::kRuntime, "grad can be implicitly created only for scalar outputs");
      }
      DT_ASSIGN_OR_RETURN(g, Call("full_like", {root, Scalar::Int(1), None{}, None{}}));
    } else if (g.sizes() != root.sizes()) {
      return Error(ErrorKind::kRuntime,
                   absl::StrFormat("Mismatch in shape: grad_output[%d] has a shape of %s and output[%d] has a shape "
                                   "of %s.", i, g.ShapeString(), i, root.ShapeString()));
    }
    DT_ASSIGN_OR_RETURN(Edge edge, GradientEdge(root));
    edges.push_back(std::move(edge));
    grads.push_back(std::move(g));
  }
  return absl::OkStatus();
}

class Sweep {
 public:
  Sweep(const BackwardRequest& request, Plan plan) : request_(request), plan_(std::move(plan)) {}

  absl::Status Seed(const std::vector<Edge>& edges, const std::vector<Tensor>& grads) {
    for (size_t i = 0; i < edges.size(); ++i) DT_RETURN_IF_ERROR(Deliver(edges[i], grads[i]));
    return absl::OkStatus();
  }

  // Captures the gradient arriving at (node, output) for autograd.grad's inputs.
  void Capture(const Edge& edge, size_t slot) { captures_[edge.node.get()].push_back({edge.input_nr, slot}); }

  absl::Status Run(const absl::flat_hash_set<GradNode*>* needed, std::vector<Tensor>& captured) {
    for (GradNode* node : plan_.order) {
      if (needed != nullptr && !needed->contains(node)) continue;
      std::vector<Tensor> grads = std::move(buffers_[node]);
      grads.resize(node->output_shapes().size());
      if (auto it = captures_.find(node); it != captures_.end()) {
        for (const auto& [output, slot] : it->second) captured[slot] = grads[output];
      }
      DT_RETURN_IF_ERROR(Retain(*node, grads));
      if (std::none_of(grads.begin(), grads.end(), [](const Tensor& g) { return g.defined(); })) continue;
      if (dynamic_cast<AccumulateGrad*>(node) != nullptr && (!request_.accumulate || IntoInputs())) continue;
      DT_RETURN_IF_ERROR(Step(*node, std::move(grads)));
    }
    return absl::OkStatus();
  }

 private:
  absl::Status Deliver(const Edge& edge, const Tensor& g) {
    if (edge.node == nullptr || !g.defined()) return absl::OkStatus();
    std::vector<Tensor>& buffer = buffers_[edge.node.get()];
    buffer.resize(edge.node->output_shapes().size());
    DT_ASSIGN_OR_RETURN(buffer[edge.input_nr], AddGradients(buffer[edge.input_nr], g));
    return absl::OkStatus();
  }

  // backward(inputs=...): gradients go only to the inputs' .grad, through Capture.
  bool IntoInputs() const { return request_.accumulate && !request_.inputs.empty(); }

  absl::Status Retain(GradNode& node, const std::vector<Tensor>& grads) {
    for (size_t k = 0; k < node.retained().size() && k < grads.size(); ++k) {
      std::shared_ptr<AutogradMeta> meta = node.retained()[k].lock();
      if (meta == nullptr || !grads[k].defined() || !request_.accumulate) continue;
      DT_ASSIGN_OR_RETURN(meta->grad, AddGradients(meta->grad, grads[k]));
    }
    return absl::OkStatus();
  }

  absl::Status Step(GradNode& node, std::vector<Tensor> grads) {
    for (size_t k = 0; k < grads.size(); ++k) {
      if (grads[k].defined()) continue;
      const GradShape& shape = node.output_shapes()[k];
      DT_ASSIGN_OR_RETURN(grads[k], Call("full", {shape.sizes, Scalar::Int(0), shape.dtype, shape.device}));
    }
    if (!request_.retain_graph) node.WillReleaseSaved();
    DT_ASSIGN_OR_RETURN(std::vector<Tensor> inputs, node.Apply(std::move(grads), request_.create_graph));
    if (!request_.retain_graph) node.ReleaseSaved();
    for (size_t e = 0; e < inputs.size() && e < node.next().size(); ++e) {
      if (!inputs[e].defined() || node.next()[e].node == nullptr) continue;
      DT_ASSIGN_OR_RETURN(Tensor g, FitGradient(std::move(inputs[e]), node.input_shapes()[e], node));
      DT_RETURN_IF_ERROR(Deliver(node.next()[e], g));
    }
    return absl::OkStatus();
  }

  const BackwardRequest& request_;
  Plan plan_;
  absl::flat_hash_map<GradNode*, std::vector<Tensor>> buffers_;
  absl::flat_hash_map<GradNode*, std::vector<std::pair<int, size_t>>> captures_;
};

// The edges whose arriving gradients are wanted: autograd.grad's inputs, or backward(inputs=)'s.
absl::StatusOr<std::vector<Edge>> InputEdges(const BackwardRequest& request) {
  std::vector<Edge> edges;
  for (size_t i = 0; i < request.inputs.size(); ++i) {
    if (RequiresGrad(request.inputs[i])) {
      DT_ASSIGN_OR_RETURN(Edge edge, GradientEdge(request.inputs[i]));
      edges.push_back(std::move(edge));
    } else if (request.accumulate) {
      return Error(ErrorKind::kRuntime, "can't retain_grad on Tensor that has requires_grad=False");
    } else {
      return Error(ErrorKind::kRuntime, absl::StrFormat("One of the differentiated Tensors (input %d) does not require grad", i));
    }
  }
  return edges;
}

// backward(inputs=...) adds each input's gradient to its .grad, leaf or not, once per tensor
// however often it is listed; no other .grad changes.
absl::Status AccumulateIntoInputs(const BackwardRequest& request, const std::vector<Tensor>& captured) {
  absl::flat_hash_set<AutogradMeta*> done;
  for (size_t i = 0; i < captured.size(); ++i) {
    AutogradMeta* meta = request.inputs[i].autograd().get();
    // A non-leaf that retains its grad got it from Sweep::Retain already.
    const bool retained = meta->retains_grad && meta->grad_fn != nullptr;
    if (!captured[i].defined() || retained || !done.insert(meta).second) continue;
    DT_RETURN_IF_ERROR(AccumulateGradient(*meta, captured[i], request.create_graph));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<Tensor>> RunBackward(const BackwardRequest& request) {
  GradModeGuard mode(request.create_graph);
  std::vector<Edge> root_edges;
  std::vector<Tensor> root_grads;
  DT_RETURN_IF_ERROR(CheckRoots(request, root_edges, root_grads));
  Plan plan = PlanBackward(root_edges);
  DT_ASSIGN_OR_RETURN(std::vector<Edge> input_edges, InputEdges(request));
  absl::flat_hash_set<GradNode*> targets;
  for (const Edge& e : input_edges) targets.insert(e.node.get());
  const bool prune = !request.accumulate || !request.inputs.empty();
  const absl::flat_hash_set<GradNode*> needed = NeededNodes(plan, targets);
  Sweep sweep(request, std::move(plan));
  for (size_t i = 0; i < input_edges.size(); ++i) sweep.Capture(input_edges[i], i);
  DT_RETURN_IF_ERROR(sweep.Seed(root_edges, root_grads));
  std::vector<Tensor> captured(request.inputs.size());
  DT_RETURN_IF_ERROR(sweep.Run(prune ? &needed : nullptr, captured));
  if (request.accumulate) {
    // As in PyTorch, an input backward() did not reach keeps its .grad (no allow_unused).
    DT_RETURN_IF_ERROR(AccumulateIntoInputs(request, captured));
    return std::vector<Tensor>{};
  }
  for (size_t i = 0; i < captured.size(); ++i) {
    if (captured[i].defined() || request.allow_unused) continue;
    return Error(ErrorKind::kRuntime,
                 absl::StrFormat("One of the differentiated Tensors (input %d) appears to not have been used in the "
                                 "graph. Set allow_unused=True if this is the desired behavior.", i));
  }
  return captured;
}

}  // namespace dt
