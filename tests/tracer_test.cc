// The tracer as a unit: TraceFrame on small Python functions, linked without the dyntrace module
// (only dyntrace's Python types, registered into a scratch module).
#include <Python.h>

#include <string>
#include <variant>
#include <vector>

#include "gtest/gtest.h"
#include "interpreter/py_ref.h"
#include "interpreter/py_types.h"
#include "interpreter/tracer.h"
#include "runtime/copy.h"
#include "runtime/tensor.h"
#include "tests/python_start.h"

namespace dt::interpreter {
namespace {

using py::PyRef;

class TracerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_EQ(testing::StartPython(), "");
    PyRef module = PyRef::Steal(PyModule_New("tracer_test_types"));
    ASSERT_TRUE(module && py::InitTypes(module.get())) << testing::TakePythonError();
  }

  // The function `name` defined by `source` in a fresh namespace.
  PyRef Define(const std::string& source, const char* name) {
    globals_ = PyRef::Steal(PyDict_New());
    PyDict_SetItemString(globals_.get(), "__builtins__", PyEval_GetBuiltins());
    PyRef done = PyRef::Steal(PyRun_String(source.c_str(), Py_file_input, globals_.get(), globals_.get()));
    EXPECT_TRUE(done) << testing::TakePythonError();
    return PyRef::Borrow(PyDict_GetItemString(globals_.get(), name));
  }

  // Traces `fn` called with `args` (its first co_argcount locals) from the frame's entry.
  std::variant<trace::TraceResult, trace::TraceFailure> Trace(PyObject* fn, std::vector<PyObject*> args) {
    auto* code = reinterpret_cast<PyCodeObject*>(PyFunction_GET_CODE(fn));
    locals_.assign(code->co_nlocalsplus, nullptr);
    for (size_t i = 0; i < args.size(); ++i) locals_[i] = args[i];
    guards::FrameInputs inputs;
    inputs.locals = locals_.data();
    inputs.num_locals = code->co_nlocalsplus;
    inputs.globals = globals_.get();
    inputs.builtins = PyEval_GetBuiltins();
    return trace::TraceFrame({code, fn, inputs, /*start_offset=*/0, /*fullgraph=*/false});
  }

  static PyRef Filled(DimsView sizes, double value) {
    Tensor t = Tensor::Empty(sizes, DType::kFloat32, Device::Cpu());
    EXPECT_TRUE(Fill(t, Scalar::Float(value)).ok());
    return PyRef::Steal(py::Wrap(t));
  }
  static PyRef Tensor2x3() { return Filled({2, 3}, 1.5); }

  static std::vector<std::string> OpNames(const Graph& graph) {
    std::vector<std::string> names;
    for (const Node& n : graph.nodes()) names.push_back(n.op->name());
    return names;
  }

  PyRef globals_;
  std::vector<PyObject*> locals_;
};

TEST_F(TracerTest, TensorArithmeticBecomesOneGraphThatReturns) {
  PyRef fn = Define("def f(x, y):\n    z = (x + y) * 2\n    return z - x\n", "f");
  PyRef x = Tensor2x3(), y = Tensor2x3();
  auto traced = Trace(fn.get(), {x.get(), y.get()});
  ASSERT_TRUE(std::holds_alternative<trace::TraceResult>(traced)) << std::get<trace::TraceFailure>(traced).reason;
  const trace::TraceResult& r = std::get<trace::TraceResult>(traced);
  EXPECT_TRUE(std::holds_alternative<trace::ReturnExit>(r.exit));
  EXPECT_FALSE(r.break_info.has_value());
  EXPECT_EQ(OpNames(*r.graph), (std::vector<std::string>{"add", "mul", "sub"}));
  EXPECT_EQ(r.graph->inputs().size(), 2u);
  EXPECT_GT(r.guards.size(), 0u);  // at least the two tensors' metadata
  EXPECT_TRUE(r.touched_tensors);
}

TEST_F(TracerTest, PythonWorkFoldsAndOnlyTensorsReachTheGraph) {
  PyRef fn = Define(
      "def f(x, n):\n"
      "    d = {'a': n, **{'a': n + 1}}\n"
      "    scale = sum(v * 2 for v in [d['a'], 3]) if False else d['a'] * 2 + 3\n"
      "    return x * scale\n",
      "f");
  PyRef x = Tensor2x3();
  PyRef n = PyRef::Steal(PyLong_FromLong(4));
  auto traced = Trace(fn.get(), {x.get(), n.get()});
  ASSERT_TRUE(std::holds_alternative<trace::TraceResult>(traced)) << std::get<trace::TraceFailure>(traced).reason;
  const trace::TraceResult& r = std::get<trace::TraceResult>(traced);
  EXPECT_EQ(OpNames(*r.graph), (std::vector<std::string>{"mul"}));
  EXPECT_TRUE(std::holds_alternative<trace::ReturnExit>(r.exit));
}

TEST_F(TracerTest, TensorConditionIsADataDependentBreakThatEscapesAsAJump) {
  PyRef fn = Define("def f(x):\n    y = x * 3\n    if y:\n        return y + 1\n    return y - 1\n", "f");
  PyRef x = Filled({}, 2.0);
  auto traced = Trace(fn.get(), {x.get()});
  ASSERT_TRUE(std::holds_alternative<trace::TraceResult>(traced));
  const trace::TraceResult& r = std::get<trace::TraceResult>(traced);
  ASSERT_TRUE(r.break_info.has_value());
  EXPECT_EQ(r.break_info->kind, BreakKind::kDataDependent);
  ASSERT_TRUE(std::holds_alternative<trace::EscapeJumpExit>(r.exit));
  const auto& jump = std::get<trace::EscapeJumpExit>(r.exit);
  EXPECT_GT(jump.jump_target, jump.break_offset);
  EXPECT_GT(jump.next_offset, jump.break_offset);
  // The graph up to the break computes y, which the rebuilt frame state holds.
  EXPECT_EQ(OpNames(*r.graph), (std::vector<std::string>{"mul"}));
  EXPECT_FALSE(r.stack_state.empty());
}

TEST_F(TracerTest, CodeThatRaisesBreaksWithTheRaisesKind) {
  PyRef fn = Define("def f(x):\n    y = x + 1\n    return {'a': y}['b']\n", "f");
  PyRef x = Tensor2x3();
  auto traced = Trace(fn.get(), {x.get()});
  ASSERT_TRUE(std::holds_alternative<trace::TraceResult>(traced));
  const trace::TraceResult& r = std::get<trace::TraceResult>(traced);
  ASSERT_TRUE(r.break_info.has_value());
  EXPECT_EQ(r.break_info->kind, BreakKind::kRaises) << r.break_info->reason;
  // CPython runs the subscript and raises KeyError itself.
  EXPECT_TRUE(std::holds_alternative<trace::HandBackExit>(r.exit));
}

TEST_F(TracerTest, UnknownCallEscapesAsACall) {
  PyRef fn = Define("import os\ndef f(x):\n    y = x + 1\n    os.getpid()\n    return y\n", "f");
  PyRef x = Tensor2x3();
  auto traced = Trace(fn.get(), {x.get()});
  ASSERT_TRUE(std::holds_alternative<trace::TraceResult>(traced));
  const trace::TraceResult& r = std::get<trace::TraceResult>(traced);
  ASSERT_TRUE(r.break_info.has_value());
  EXPECT_EQ(r.break_info->kind, BreakKind::kUnsupported);
  ASSERT_TRUE(std::holds_alternative<trace::EscapeCallExit>(r.exit)) << r.break_info->reason;
  EXPECT_EQ(std::get<trace::EscapeCallExit>(r.exit).argc, 0);
}

TEST_F(TracerTest, FullgraphTurnsABreakIntoAFailure) {
  PyRef fn = Define("def f(x):\n    if x:\n        return x\n    return -x\n", "f");
  PyRef x = Filled({}, 1.0);
  auto* code = reinterpret_cast<PyCodeObject*>(PyFunction_GET_CODE(fn.get()));
  std::vector<PyObject*> locals(code->co_nlocalsplus, nullptr);
  locals[0] = x.get();
  guards::FrameInputs inputs;
  inputs.locals = locals.data();
  inputs.num_locals = code->co_nlocalsplus;
  inputs.globals = globals_.get();
  inputs.builtins = PyEval_GetBuiltins();
  auto traced = trace::TraceFrame({code, fn.get(), inputs, 0, /*fullgraph=*/true});
  ASSERT_TRUE(std::holds_alternative<trace::TraceFailure>(traced));
  EXPECT_EQ(std::get<trace::TraceFailure>(traced).kind, BreakKind::kDataDependent);
}

}  // namespace
}  // namespace dt::interpreter

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
