// interpreter/number_program.h: running and printing a trace's number program (ScalarInstr).
//
// The hook runs the whole program before each run of a segment (the run-time numbers its graph
// and frame state read); relation guards run the part one slot depends on, to decide whether a
// branch a trace took on symbolic sizes or dynamic numbers goes the same way for this frame.
#ifndef DYNTRACE_INTERPRETER_NUMBER_PROGRAM_H_
#define DYNTRACE_INTERPRETER_NUMBER_PROGRAM_H_

#include <Python.h>

#include <string>
#include <vector>

#include "guards/source.h"
#include "interpreter/py_ref.h"
#include "interpreter/tracer.h"

namespace dt::interpreter::trace {

// Every slot's value, in order. False (no Python error left set) where Python would raise or a
// source is gone.
bool EvaluateNumbers(const std::vector<ScalarInstr>& program, const guards::FrameInputs& inputs,
                     std::vector<py::PyRef>& values);
// Slot `slot`'s value, evaluating only what it depends on. Null (no error left set) as above.
py::PyRef EvaluateSlot(const std::vector<ScalarInstr>& program, int slot, const guards::FrameInputs& inputs);
// Slot `slot` as Python code: "L['x'].size(1) * 2 > 64".
std::string NumberExpression(const std::vector<ScalarInstr>& program, int slot);

}  // namespace dt::interpreter::trace

#endif  // DYNTRACE_INTERPRETER_NUMBER_PROGRAM_H_
