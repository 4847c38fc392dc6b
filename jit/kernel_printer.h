// jit/kernel_printer.h: the part of code generation both targets share.
//
// The C++ and CUDA generators print the same kernel IR; they differ in how they loop over a
// domain and how an operand's element is addressed, never in what a value means. KernelPrinter
// holds what is common: the statement defining each value (loads, constants, casts, pointwise
// ops through their registry entry's dt::scalar function), the cones of values an output or a
// reduction needs, the stores of full-level outputs, and the spelling of a reduction's
// accumulator, identity, combiner and result. A target subclasses it and supplies Element().
//
//   class MyPrinter : public KernelPrinter {
//     std::string Element(int operand, const std::string& j) const override { ... }
//   };
#ifndef DYNTRACE_JIT_KERNEL_PRINTER_H_
#define DYNTRACE_JIT_KERNEL_PRINTER_H_

#include <set>
#include <string>
#include <vector>

#include "jit/kernel_ir.h"

namespace dt::jit {

// The C++ spelling of a dtype's element type in generated code is runtime/dtype.h's CppType.
// The type a dtype's arithmetic happens in (float for float16).
const char* ComputeCppType(DType dtype);
// `value` as a `dtype` element, converted exactly as the eager runtime converts Python numbers;
// valid C++ for the host compiler and for NVRTC.
std::string Literal(const Scalar& value, DType dtype);

// How one reduction of a kernel is spelled. `Combine(a, b)` merges an element or another
// accumulator into an accumulator.
struct ReductionSpelling {
  std::string accumulator_type;
  std::string identity;
  std::string combiner;  // a callable's name: dt::scalar::reduce_sum ...
  std::string input;     // the reduction's input value converted to the accumulator type
  // The fold over order keys (dt::scalar::reduce_max_key) and the key type, where the reduction
  // has one and its accumulator is floating; empty otherwise.
  std::string order_key_combiner;
  std::string order_key_type;
  std::string Combine(const std::string& a, const std::string& b) const;
};

class KernelPrinter {
 public:
  explicit KernelPrinter(const Kernel& kernel) : k_(kernel) {}
  virtual ~KernelPrinter() = default;

 protected:
  // An lvalue for operand `operand`'s element at inner index `j` of the current row.
  virtual std::string Element(int operand, const std::string& j) const = 0;

  // The statement defining value `i` (not a reduction) at inner index `j`.
  std::string ValueStatement(int i, const std::string& j) const;
  // Full-level values the `roots` need, in dependency order; values in `available` are taken as
  // already computed.
  std::vector<int> FullCone(const std::vector<int>& roots, const std::set<int>& available = {}) const;
  // The kernel values that full-level outputs store (not column reductions' results).
  std::vector<int> FullOutputs() const;
  // Indices of the column reductions (ValueKind::kColumnReduce), in order.
  std::vector<int> ColumnReductions() const;
  bool IsColumnOutput(const KernelOperand& op) const {
    return op.is_output && k_.values[op.source].kind == ValueKind::kColumnReduce;
  }
  // Indices of the reduction values, in order.
  std::vector<int> Reductions() const;
  // Whether value `i` depends, directly or through others, on a reduction's result.
  bool DependsOnReduction(int i) const;
  ReductionSpelling SpellReduction(int r) const;
  // The statement defining reduction `r`'s value v<r> from its final accumulator `acc`, with
  // `count` the number of elements reduced (mean divides by it, as eager's div(sum, count) does).
  std::string ReductionResult(int r, const std::string& acc, const std::string& count) const;
  // Appends `cone`'s statements at `j`.
  void EmitStatements(const std::vector<int>& cone, const std::string& j, const std::string& indent);
  // Appends the row-level values (not reductions) below index `upto` that are not yet in
  // `defined` and whose arguments all are, marking them defined.
  void EmitReadyRowValues(size_t upto, std::vector<bool>& defined, const std::string& indent);
  // Appends the stores of the full-level outputs at `j`, but for the operands in `skip`.
  void EmitFullStores(const std::string& j, const std::string& indent, const std::set<int>& skip = {});

  const Kernel& k_;
  std::string out_;
};

// `text` with each use of `name` as a whole identifier ("kernel5(", "kernel5_fixed", not
// "kernel50") replaced by `new_name`.
std::string RenamedKernel(const std::string& text, const std::string& name, const std::string& new_name);
// RenamedKernel to a placeholder: two kernels whose texts then match are the same code, which
// the generators emit once.
inline std::string WithoutKernelName(const std::string& text, const std::string& name) {
  return RenamedKernel(text, name, "@kernel");
}

}  // namespace dt::jit

#endif  // DYNTRACE_JIT_KERNEL_PRINTER_H_
