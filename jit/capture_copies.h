// jit/capture_copies.h: the device copies that let a CUDA graph hold library calls.
//
// A captured cuBLAS call keeps the addresses it was captured with; unlike a generated kernel it
// can't be re-pointed. Two things moved its operands on every call of a training step: its
// result was returned (a gradient), so each call needed a fresh buffer, and it read a batch the
// caller allocates anew each step. Both become copies the graph can patch: a returned result is
// the clone of the call's graph-owned output (the clone, a kernel, writes a fresh buffer each
// call and often fuses with the output's other readers), and a moving input is cloned into a
// graph-owned buffer that the library calls read ("one device copy" per batch). Parameters stay
// where they are, so inputs are staged only once a replay saw them move.
#ifndef DYNTRACE_JIT_CAPTURE_COPIES_H_
#define DYNTRACE_JIT_CAPTURE_COPIES_H_

#include <vector>

#include "absl/status/statusor.h"
#include "jit/kernel_ir.h"

namespace dt::jit {

struct CaptureCopies {
  // Graph outputs a library step computes (not through views aliased by another output).
  std::vector<ValueId> outputs;
  // Per graph input: a library step reads it (through views), and staging it is safe: no node
  // writes it in place and no output is it or a view of it.
  std::vector<bool> stageable_inputs;
};
CaptureCopies FindCaptureCopies(const Program& program);

// `graph` with a clone of each `outputs` value returned in its place, and a clone of each input
// in `staged_inputs` (indices into inputs()) read by every node instead of the input.
absl::StatusOr<Graph> WithCaptureCopies(const Graph& graph, const std::vector<ValueId>& outputs,
                                        const std::vector<int>& staged_inputs);

}  // namespace dt::jit

#endif  // DYNTRACE_JIT_CAPTURE_COPIES_H_
