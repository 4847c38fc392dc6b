// autograd/op_node.h: the backward node of one recorded registry call.
#ifndef DYNTRACE_AUTOGRAD_OP_NODE_H_
#define DYNTRACE_AUTOGRAD_OP_NODE_H_

#include <string>
#include <vector>

#include "autograd/node.h"

namespace dt {

class OpNode final : public GradNode {
 public:
  // Records `op` called with `args` that produced `outputs`; sets the outputs' grad_fn (and,
  // for views, their ViewInfo).
  [[nodiscard]] static absl::Status Record(const OpDef& op, const OpArgs& args, OpResult& outputs);

  std::string name() const override;
  absl::StatusOr<std::vector<Tensor>> Apply(std::vector<Tensor> output_grads, bool create_graph) override;
  void ReleaseSaved() override;

 private:
  struct Slot {  // where edge i's gradient is in the formula's ArgGrads
    int param;
    int item;  // index in a tensor list; -1 for a tensor argument
  };

  explicit OpNode(const OpDef& op) : op_(op) {}
  void SaveArgs(const OpArgs& args);
  void SaveOutputs(const OpResult& outputs);
  absl::Status CheckVersions() const;
  std::vector<Tensor> OutputsForFormula(bool create_graph);

  const OpDef& op_;
  OpArgs args_;
  std::vector<bool> wanted_;
  std::vector<Slot> slots_;
  std::vector<SavedTensor> saved_;  // tensors whose values the formula reads, for version checks
  std::vector<Tensor> outputs_;
  bool released_ = false;
};

}  // namespace dt

#endif  // DYNTRACE_AUTOGRAD_OP_NODE_H_
