// jit/kernel_ir.h: what the fusion scheduler produces and both code generators print.
//
// A Program is the graph's nodes in order, some grouped into Kernels. A Kernel iterates one
// domain: a shape whose trailing "reduced" dims are folded by its reductions (none for a pure
// pointwise kernel). Each kernel value is either full-level (one per domain element) or
// row-level (one per row: constant along the reduced dims, like a reduction's result). So one
// kernel can hold a chain of pointwise ops, a reduction with its producers and its consumers,
// or several reductions over the same rows (softmax, layer_norm) computed row by row.
//
// Kernels take sizes and strides when they run, so one compilation serves every size that
// passes the guards; what is fixed is the rank, dtypes, and which operands broadcast.
#ifndef DYNTRACE_JIT_KERNEL_IR_H_
#define DYNTRACE_JIT_KERNEL_IR_H_

#include <string>
#include <vector>

#include "graph/graph.h"

namespace dt::jit {

// How an operand's tensor lies over the kernel's domain.
enum class Mapping : uint8_t {
  kFull,         // broadcasts to the whole domain
  kRowKeepdim,   // one element per row, shaped like the domain with reduced dims of size 1
  kRowSqueezed,  // one element per row, shaped like the domain without the reduced dims
};

struct KernelOperand {
  ValueId value = -1;       // the graph value read or written; -1 for a run-time scalar
  int scalar_slot = -1;     // a run-time Python number, read as a 0-d tensor of `dtype`
  DType dtype = DType::kFloat32;
  Mapping mapping = Mapping::kFull;
  bool is_output = false;
  int source = -1;          // outputs: the kernel value stored
  // Outputs of a fused in-place write: the graph value whose tensor the kernel stores into
  // (the output value then is that tensor); -1 for a fresh buffer.
  ValueId write_into = -1;
  // The stride along the innermost domain dim seen at trace time when it was 0 or 1, else -1.
  // The specialised variant of a kernel hard-codes these; a run with other strides uses the
  // general variant.
  int predicted_inner_stride = -1;
};

// kColumnReduce (CPU row kernels): folds a full-level value over the rows instead of along them
// (a bias or norm-weight gradient: the sum over the batch of a value the row kernel computes),
// one accumulator per inner position, complete only after the last row; stored as an output
// shaped like the inner dims, never read inside the kernel.
enum class ValueKind : uint8_t { kLoad, kConstant, kPointwise, kCast, kReduce, kColumnReduce };

struct KernelValue {
  ValueKind kind = ValueKind::kLoad;
  DType dtype = DType::kFloat32;  // how the value is stored
  bool row_level = false;
  Mapping row_mapping = Mapping::kFull;  // row-level values: keepdim- or squeezed-shaped
  int operand = -1;                      // kLoad
  Scalar constant;                       // kConstant, already meaning a `dtype` value
  const OpDef* op = nullptr;             // kPointwise, kReduce, kColumnReduce
  DType compute_dtype = DType::kFloat32; // kPointwise: operands convert to it; reductions: source
  DType accumulator_dtype = DType::kFloat64;  // kReduce, kColumnReduce
  std::vector<int> args;                 // kernel value indices
  ValueId graph_value = -1;
};

struct Kernel {
  std::string name;
  std::vector<int> nodes;   // graph nodes it computes, in order (run eagerly when it can't)
  ValueId domain = -1;      // a value shaped like the domain
  Dims reduced_dims;        // dims of the domain folded by the reductions; empty: pointwise
  std::vector<KernelOperand> operands;
  std::vector<KernelValue> values;  // in dependency order

  // Row kernels (with reductions) run a row per iteration; pointwise ones split rows further.
  bool is_row_kernel() const {
    for (const KernelValue& v : values) {
      if (v.kind == ValueKind::kReduce) return true;
    }
    return false;
  }
};

struct Step {
  enum class Kind : uint8_t { kNode, kKernel } kind;
  int index;  // node index or kernel index
};

struct Program {
  Graph graph;  // decomposed: the nodes steps refer to
  std::vector<Kernel> kernels;
  std::vector<Step> steps;
};

}  // namespace dt::jit

#endif  // DYNTRACE_JIT_KERNEL_IR_H_
