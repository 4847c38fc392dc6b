#include "jit/shape_plans.h"

#include "runtime/storage.h"

namespace dt::jit {
namespace {

// Plans kept per executable; a program called with ever-new shapes recomputes instead of growing.
constexpr size_t kMaxPlans = 64;

bool ReadsScalars(const Graph& g) {
  for (const Node& n : g.nodes()) {
    for (const GraphArg& a : n.args) {
      if (std::holds_alternative<ScalarRef>(a.content)) return true;
    }
  }
  return false;
}

}  // namespace

Tensor MetaLike(const Tensor& t) {
  return Tensor(Storage::Allocate(0, Device::Meta()), t.sizes(), t.strides(), 0, t.dtype());
}

ShapePlans::ShapePlans(const Graph* graph) : graph_(graph), reads_scalars_(ReadsScalars(*graph)) {}

absl::StatusOr<std::shared_ptr<const ShapePlans::Plan>> ShapePlans::For(const std::vector<Tensor>& inputs,
                                                                        const std::vector<Scalar>& scalars) {
  std::vector<int64_t> key;
  if (!reads_scalars_) {
    for (const Tensor& t : inputs) {
      key.push_back(t.ndim());
      key.insert(key.end(), t.sizes().begin(), t.sizes().end());
      key.insert(key.end(), t.strides().begin(), t.strides().end());
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = plans_.find(key); it != plans_.end()) return it->second;
  }
  const Graph& g = *graph_;
  auto plan = std::make_shared<Plan>(g.num_values());
  for (size_t i = 0; i < inputs.size(); ++i) (*plan)[g.inputs()[i]] = MetaLike(inputs[i]);
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    DT_RETURN_IF_ERROR(g.RunNode(i, *plan, scalars, /*on_meta=*/true));
  }
  if (!reads_scalars_) {
    std::lock_guard<std::mutex> lock(mu_);
    if (plans_.size() >= kMaxPlans) plans_.clear();
    plans_[key] = plan;
  }
  return plan;
}

}  // namespace dt::jit
