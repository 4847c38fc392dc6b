// interpreter/tracer.h: symbolic execution of one Python frame into a graph plus guards.
//
// The tracer walks the frame's bytecode (decoded with the running interpreter's own `dis`, so
// opcode numbers and jump targets are never hard-coded) with symbolic values. Tensor work becomes
// graph nodes run on meta tensors; Python-level work on constants is folded; calls to user
// functions are inlined. Every property of the frame's values the trace relies on becomes a guard.
// Anything it cannot capture stops the trace with a reason; the caller then runs the frame under
// CPython, so an incomplete trace can never change what the program does.
#ifndef DYNTRACE_INTERPRETER_TRACER_H_
#define DYNTRACE_INTERPRETER_TRACER_H_

#include <Python.h>

#include <memory>
#include <string>
#include <variant>

#include "graph/graph.h"
#include "guards/guard_set.h"
#include "interpreter/py_ref.h"

namespace dt::trace {

// How to build the function's return value from graph outputs, constants and frame values.
struct OutputSpec {
  enum class Kind : uint8_t { kGraphOutput, kConst, kSource, kTuple, kList, kDict };
  Kind kind = Kind::kConst;
  int index = -1;  // kGraphOutput: position in graph outputs
  py::PyRef obj;   // kConst
  guards::SourceRef source;
  std::vector<OutputSpec> children;
  std::vector<py::PyRef> keys;  // kDict
};

struct TraceResult {
  std::shared_ptr<Graph> graph;
  std::vector<guards::SourceRef> input_sources;  // where each graph input is read from
  guards::GuardSet guards;
  OutputSpec output;
  int return_offset = -1;             // the RETURN instruction the frame resumes at
  bool return_pushes_value = true;    // RETURN_VALUE (result on the stack) vs RETURN_CONST
  bool touched_tensors = false;
};

struct TraceFailure {
  std::string reason;
  std::string file;
  int line = -1;
  int offset = -1;
  std::string instruction;
  guards::GuardSet guards;  // what the trace had established when it stopped
  bool touched_tensors = false;
};

struct FrameToTrace {
  PyCodeObject* code;
  PyObject* function;
  guards::FrameInputs inputs;
};

// Logs each traced instruction with the symbolic stack to stderr when set (--log bytecode).
extern bool log_bytecode;

std::variant<TraceResult, TraceFailure> TraceFrame(const FrameToTrace& frame);

}  // namespace dt::trace

#endif  // DYNTRACE_INTERPRETER_TRACER_H_
