// interpreter/side_effects.h: replaying the side effects a trace recorded on the caller's objects.
//
// A traced segment may store attributes on the caller's objects (`self.h = h`) and change the
// caller's lists and dicts (`xs.append(t)`, `d[k] = v`). The trace records them
// (trace::AttrStore, trace::ContainerStore); after the segment's graph ran, ApplySideEffects makes
// them on the real objects, before anything else can observe those objects.
//
//   Builder builder(outputs, inputs, trace.num_memo, numbers);
//   PyObject* result = builder.Build(exit.output);
//   if (!ApplySideEffects(trace, builder, inputs)) ...  // a Python error is set
//
// Every target and value is resolved and built first, then every change is made, so a value read
// from the caller (`self.a, self.b = self.b, self.a`) is the one the traced code read, not one a
// store before it had already changed.
#ifndef DYNTRACE_INTERPRETER_SIDE_EFFECTS_H_
#define DYNTRACE_INTERPRETER_SIDE_EFFECTS_H_

#include "guards/source.h"
#include "interpreter/frame_builder.h"
#include "interpreter/tracer.h"

namespace dt::interpreter {

// REQUIRES: the GIL; `builder` built the segment's other outputs from the same run. False with a
// Python error set when a target is gone or a change raises.
[[nodiscard]] bool ApplySideEffects(const trace::TraceResult& trace, Builder& builder,
                                    const guards::FrameInputs& inputs);

}  // namespace dt::interpreter

#endif  // DYNTRACE_INTERPRETER_SIDE_EFFECTS_H_
