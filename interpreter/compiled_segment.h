// interpreter/compiled_segment.h: cache entries made from traces, and run.
#ifndef DYNTRACE_INTERPRETER_COMPILED_SEGMENT_H_
#define DYNTRACE_INTERPRETER_COMPILED_SEGMENT_H_

#include <Python.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "interpreter/code_cache.h"
#include "interpreter/tracer.h"
#include "runtime/scalar.h"
#include "runtime/tensor.h"

namespace dt::interpreter {

// The entry for a trace, its graph compiled by the backend `options` choose: a Python backend's
// callable, the cpu or cuda backend's kernels, or the eager backend (also when a compiler
// fails; the reason is in stats().compile_failures). Null with a Python error set when a Python
// backend raised.
std::shared_ptr<CacheEntry> CompileSegment(trace::TraceResult trace, const JitOptions& options,
                                           const guards::FrameInputs& inputs, int start_offset,
                                           const std::string& name);

// Replays a segment's number program on the real values; false (no error left set) when Python
// would raise there, in which case CPython reruns the segment's code and raises itself.
bool ComputeNumbers(const CacheEntry& entry, const guards::FrameInputs& inputs,
                    std::vector<py::PyRef>& values, std::vector<Scalar>& scalars);

// Runs the entry's graph on the frame's tensors. An error from a Python backend leaves its
// Python error set; the other backends' errors set none.
absl::StatusOr<std::vector<Tensor>> RunCompiledGraph(const CacheEntry& entry, const guards::FrameInputs& inputs,
                                                     const std::vector<Scalar>& scalars);

}  // namespace dt::interpreter

#endif  // DYNTRACE_INTERPRETER_COMPILED_SEGMENT_H_
