// interpreter/frame_builder.h: Python objects from a trace's output specs: the return value of
// a compiled segment, and the frame state (locals and stack) rebuilt at a graph break.
#ifndef DYNTRACE_INTERPRETER_FRAME_BUILDER_H_
#define DYNTRACE_INTERPRETER_FRAME_BUILDER_H_

#include <Python.h>

#include <vector>

#include "guards/source.h"
#include "interpreter/py_ref.h"
#include "interpreter/tracer.h"
#include "runtime/tensor.h"

namespace dt::interpreter {

// Graph outputs are wrapped once (so a tensor returned twice is one object) and memo slots hold
// objects several slots share.
class Builder {
 public:
  Builder(const std::vector<Tensor>& outputs, const guards::FrameInputs& inputs, int num_memo,
          const std::vector<py::PyRef>& numbers)
      : outputs_(outputs), inputs_(inputs), numbers_(numbers), made_(outputs.size(), nullptr),
        memo_(num_memo, nullptr) {}
  ~Builder();
  Builder(const Builder&) = delete;
  Builder& operator=(const Builder&) = delete;

  // A new reference; null is a valid result for kNull. `ok()` tells whether a Python error is set.
  PyObject* Build(const trace::OutputSpec& spec);
  bool ok() const { return !failed_; }

 private:
  PyObject* Fail();
  PyObject* BuildUnmemoised(const trace::OutputSpec& spec);
  PyObject* BuildSequence(const trace::OutputSpec& spec);
  PyObject* BuildIterator(const trace::OutputSpec& spec);
  PyObject* BuildDict(const trace::OutputSpec& spec);
  PyObject* BuildNewObject(const trace::OutputSpec& spec);
  PyObject* BuildCell(const trace::OutputSpec& spec);
  PyObject* BuildBoundMethod(const trace::OutputSpec& spec);
  PyObject* BuildCall(const trace::OutputSpec& spec);
  PyObject* BuildAdvance(const trace::OutputSpec& spec);
  PyObject* BuildFunction(const trace::OutputSpec& spec);

  const std::vector<Tensor>& outputs_;
  const guards::FrameInputs& inputs_;
  const std::vector<py::PyRef>& numbers_;
  std::vector<PyObject*> made_;
  std::vector<PyObject*> memo_;
  bool failed_ = false;
};

}  // namespace dt::interpreter

#endif  // DYNTRACE_INTERPRETER_FRAME_BUILDER_H_
