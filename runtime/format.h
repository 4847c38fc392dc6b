// runtime/format.h: PyTorch-style text for tensors (`repr(t)`).
//
//   tensor([[1.0000, 2.5000],
//           [3.0000, 4.0000]], dtype=dyntrace.float64)
#ifndef DYNTRACE_RUNTIME_FORMAT_H_
#define DYNTRACE_RUNTIME_FORMAT_H_

#include <string>

#include "runtime/tensor.h"

namespace dt {

std::string FormatTensor(const Tensor& t);

}  // namespace dt

#endif  // DYNTRACE_RUNTIME_FORMAT_H_
