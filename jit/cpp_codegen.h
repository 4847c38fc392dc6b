// jit/cpp_codegen.h: prints a Program's kernels as one C++ translation unit for the host compiler.
//
// Each kernel becomes two extern "C" functions: `<name>_fixed`, with the innermost strides the
// trace saw (0 or 1) written in so the compiler vectorises it, and `<name>_any`, which reads
// every stride at run time. Both have the KernelFn signature. Element math comes from the
// pasted runtime/scalar_math.h and runtime/convert.h, so results match eager element for element.
// Float64 reductions fold in eager's order (one chain); narrower floats accumulate in double over
// several lanes, which can differ from eager's four chains only below the result's precision.
#ifndef DYNTRACE_JIT_CPP_CODEGEN_H_
#define DYNTRACE_JIT_CPP_CODEGEN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "jit/kernel_ir.h"
#include "jit/kernel_printer.h"

namespace dt::jit {

// outer_sizes: outer_rank sizes; inner: the innermost size; data: one pointer per operand;
// strides: per operand, outer_rank + 1 element strides (outer dims, then inner).
using KernelFn = void (*)(int64_t outer_rank, const int64_t* outer_sizes, int64_t inner,
                          char* const* data, const int64_t* strides);

struct CppProgram {
  // Translation units, each the prelude and some kernels. A kernel of at least kOwnUnitBytes of
  // code has a unit of its own, so another graph with the same kernel (the two traces of a
  // training step: the first also creates the optimizer's state) finds it in the cache instead
  // of compiling it again; the smaller kernels share one unit. Units compile in parallel.
  std::vector<std::string> units;
  std::string readable;  // the kernels without the prelude (what logs and reports show)
  // By kernel: the name its entry points start with (<entry>_fixed, <entry>_any): its own, that
  // of an earlier kernel with the same code, which is emitted once, or kOwnUnitEntry; and the
  // unit holding them.
  std::vector<std::string> entry_of_kernel;
  std::vector<int> unit_of_kernel;
};
// Below this many bytes of code a kernel's own unit would cost more (each unit takes the host
// compiler about 0.3 s of its own: start, the prelude, the link) than it saves.
inline constexpr size_t kOwnUnitBytes = 8192;
// What the entry points of a kernel in its own unit start with.
inline constexpr char kOwnUnitEntry[] = "unit_kernel";
CppProgram EmitCpp(const Program& program);

// The runtime headers pasted into every generated translation unit (built from runtime/).
const char* KernelPrelude();

}  // namespace dt::jit

#endif  // DYNTRACE_JIT_CPP_CODEGEN_H_
