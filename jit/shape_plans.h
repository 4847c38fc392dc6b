// jit/shape_plans.h: every value's layout for one set of input shapes, shared by the executables.
//
// A compiled program takes sizes and strides when it runs; what it needs to know before launching
// anything is each value's sizes and strides, which a meta-device run of the graph gives (the
// eager op definitions computing metadata only). That run is kept per input-shape set and the
// values of the run-time numbers that can change a shape (symbolic sizes in a view or creation
// op), so a steady loop pays for it once.
#ifndef DYNTRACE_JIT_SHAPE_PLANS_H_
#define DYNTRACE_JIT_SHAPE_PLANS_H_

#include <memory>
#include <mutex>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "graph/graph.h"

namespace dt::jit {

class ShapePlans {
 public:
  // Meta tensors, one per graph value.
  using Plan = std::vector<Tensor>;

  explicit ShapePlans(const Graph* graph);

  absl::StatusOr<std::shared_ptr<const Plan>> For(const std::vector<Tensor>& inputs,
                                                  const std::vector<Scalar>& scalars);

 private:
  const Graph* graph_;
  std::vector<int> shape_slots_;  // run-time numbers in the plan's key
  std::mutex mu_;
  absl::flat_hash_map<std::vector<int64_t>, std::shared_ptr<const Plan>> plans_;
};

// A meta tensor with `t`'s sizes, strides and dtype.
Tensor MetaLike(const Tensor& t);

}  // namespace dt::jit

#endif  // DYNTRACE_JIT_SHAPE_PLANS_H_
