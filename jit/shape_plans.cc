#include "jit/shape_plans.h"

#include <algorithm>

#include "absl/base/casts.h"
#include "runtime/storage.h"

namespace dt::jit {
namespace {

// Plans kept per executable; a program called with ever-new shapes recomputes instead of growing.
constexpr size_t kMaxPlans = 64;

// The run-time numbers that can change a value's layout: sizes in a DimsRef, and numbers passed
// to ops other than pointwise ones (a pointwise op's scalar operand never shapes its result).
std::vector<int> ShapeSlots(const Graph& g) {
  std::vector<int> slots;
  for (const Node& n : g.nodes()) {
    for (const GraphArg& a : n.args) {
      if (const auto* dims = std::get_if<DimsRef>(&a.content)) {
        for (int slot : dims->slots) {
          if (slot >= 0) slots.push_back(slot);
        }
      } else if (const auto* s = std::get_if<ScalarRef>(&a.content); s && n.op->kind != OpKind::kPointwise) {
        slots.push_back(s->slot);
      }
    }
  }
  std::sort(slots.begin(), slots.end());
  slots.erase(std::unique(slots.begin(), slots.end()), slots.end());
  return slots;
}

}  // namespace

Tensor MetaLike(const Tensor& t) {
  return Tensor(Storage::Allocate(0, Device::Meta()), t.sizes(), t.strides(), 0, t.dtype());
}

ShapePlans::ShapePlans(const Graph* graph) : graph_(graph), shape_slots_(ShapeSlots(*graph)) {}

absl::StatusOr<std::shared_ptr<const ShapePlans::Plan>> ShapePlans::For(const std::vector<Tensor>& inputs,
                                                                        const std::vector<Scalar>& scalars) {
  std::vector<int64_t> key;
  for (const Tensor& t : inputs) {
    key.push_back(t.ndim());
    key.insert(key.end(), t.sizes().begin(), t.sizes().end());
    key.insert(key.end(), t.strides().begin(), t.strides().end());
  }
  for (int slot : shape_slots_) {
    if (slot >= static_cast<int>(scalars.size())) return absl::InternalError("shape plan: missing run-time number");
    const Scalar& v = scalars[slot];
    key.push_back(v.is_float() ? absl::bit_cast<int64_t>(v.ToDouble()) : v.ToInt());
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = plans_.find(key); it != plans_.end()) return it->second;
  }
  const Graph& g = *graph_;
  auto plan = std::make_shared<Plan>(g.num_values());
  for (size_t i = 0; i < inputs.size(); ++i) (*plan)[g.inputs()[i]] = MetaLike(inputs[i]);
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    DT_RETURN_IF_ERROR(g.RunNode(i, *plan, scalars, /*on_meta=*/true));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (plans_.size() >= kMaxPlans) plans_.clear();
    plans_[key] = plan;
  }
  return plan;
}

}  // namespace dt::jit
