#include "interpreter/number_program.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "interpreter/py_str.h"
#include "interpreter/py_types.h"

namespace dt::interpreter::trace {
namespace {

using py::PyRef;

// One instruction on values computed before it (`values[slot]`, null where not computed). A new
// reference, or null (with a Python error where Python raised).
PyObject* Step(const ScalarInstr& in, const guards::FrameInputs& inputs, const std::vector<PyRef>& values) {
  auto operand = [&](int slot, const PyRef& constant) { return slot >= 0 ? values[slot].get() : constant.get(); };
  switch (in.kind) {
    case ScalarInstr::Kind::kInput: {
      // Only numbers: guards run relations in the order they were made, but the recompile
      // policy asks every guard of a failed entry, and `==` on an object of another type runs
      // its own code (a user __eq__ that consumes a generator, say) outside the program.
      PyObject* x = in.source->Resolve(inputs);
      const bool number = x != nullptr && (PyLong_CheckExact(x) || PyFloat_CheckExact(x) || PyBool_Check(x));
      return number ? Py_NewRef(x) : nullptr;
    }
    case ScalarInstr::Kind::kSequence: {
      PyObject* seq = in.source->Resolve(inputs);
      const bool sequence = seq != nullptr && (PyList_CheckExact(seq) || PyTuple_CheckExact(seq));
      return sequence ? Py_NewRef(seq) : nullptr;
    }
    case ScalarInstr::Kind::kTensorSize: {
      PyObject* t = in.source->Resolve(inputs);
      if (t == nullptr || !py::IsTensor(t) || in.a >= py::Unwrap(t).ndim()) return nullptr;
      return PyLong_FromLongLong(py::Unwrap(t).size(in.a));
    }
    case ScalarInstr::Kind::kNegate: {
      PyObject* x = operand(in.a, in.const_a);
      return x != nullptr ? PyNumber_Negative(x) : nullptr;
    }
    case ScalarInstr::Kind::kCompare:
    case ScalarInstr::Kind::kBinary: {
      PyObject* x = operand(in.a, in.const_a);
      PyObject* y = operand(in.b, in.const_b);
      return x != nullptr && y != nullptr ? ApplyNumberOp(in.op, x, y) : nullptr;
    }
    case ScalarInstr::Kind::kCall: {
      PyRef args = PyRef::Steal(PyTuple_New(static_cast<Py_ssize_t>(in.arg_slots.size())));
      if (!args) return nullptr;
      for (size_t i = 0; i < in.arg_slots.size(); ++i) {
        PyObject* arg = operand(in.arg_slots[i], in.arg_consts[i]);
        if (arg == nullptr) return nullptr;
        PyTuple_SET_ITEM(args.get(), i, Py_NewRef(arg));
      }
      return PyObject_Call(in.function.get(), args.get(), nullptr);
    }
  }
  return nullptr;
}

void Dependencies(const std::vector<ScalarInstr>& program, int slot, std::vector<bool>& needed) {
  if (slot < 0 || needed[slot]) return;
  needed[slot] = true;
  const ScalarInstr& in = program[slot];
  Dependencies(program, in.a, needed);
  Dependencies(program, in.b, needed);
  for (int s : in.arg_slots) Dependencies(program, s, needed);
}

std::string Constant(const PyRef& obj) {
  PyRef repr = PyRef::Steal(PyObject_Repr(obj.get()));
  if (!repr) {
    PyErr_Clear();
    return "<?>";
  }
  return py::Utf8Or(repr.get());
}

}  // namespace

bool EvaluateNumbers(const std::vector<ScalarInstr>& program, const guards::FrameInputs& inputs,
                     std::vector<PyRef>& values) {
  values.clear();
  for (const ScalarInstr& in : program) {
    PyObject* r = Step(in, inputs, values);
    if (r == nullptr) {
      PyErr_Clear();
      return false;
    }
    values.push_back(PyRef::Steal(r));
  }
  return true;
}

PyRef EvaluateSlot(const std::vector<ScalarInstr>& program, int slot, const guards::FrameInputs& inputs) {
  std::vector<bool> needed(program.size(), false);
  Dependencies(program, slot, needed);
  std::vector<PyRef> values(slot + 1);
  for (int i = 0; i <= slot; ++i) {
    if (!needed[i]) continue;
    PyObject* r = Step(program[i], inputs, values);
    if (r == nullptr) {
      PyErr_Clear();
      return PyRef();
    }
    values[i] = PyRef::Steal(r);
  }
  return values[slot];
}

std::string NumberExpression(const std::vector<ScalarInstr>& program, int slot) {
  const ScalarInstr& in = program[slot];
  auto operand = [&](int s, const PyRef& constant) {
    if (s < 0) return Constant(constant);
    const ScalarInstr& of = program[s];
    const bool compound = of.kind == ScalarInstr::Kind::kBinary || of.kind == ScalarInstr::Kind::kCompare;
    return compound ? absl::StrCat("(", NumberExpression(program, s), ")") : NumberExpression(program, s);
  };
  switch (in.kind) {
    case ScalarInstr::Kind::kInput:
    case ScalarInstr::Kind::kSequence: return in.source->ToString();
    case ScalarInstr::Kind::kTensorSize: return absl::StrCat(in.source->ToString(), ".size(", in.a, ")");
    case ScalarInstr::Kind::kNegate: return absl::StrCat("-", operand(in.a, in.const_a));
    case ScalarInstr::Kind::kCompare:
    case ScalarInstr::Kind::kBinary:
      return absl::StrCat(operand(in.a, in.const_a), " ", in.op, " ", operand(in.b, in.const_b));
    case ScalarInstr::Kind::kCall: {
      std::vector<std::string> args;
      for (size_t i = 0; i < in.arg_slots.size(); ++i) args.push_back(operand(in.arg_slots[i], in.arg_consts[i]));
      PyRef name = PyRef::Steal(PyObject_GetAttrString(in.function.get(), "__name__"));
      if (!name) PyErr_Clear();
      return absl::StrCat(name ? py::Utf8Or(name.get()) : "<function>", "(", absl::StrJoin(args, ", "), ")");
    }
  }
  return "?";
}

}  // namespace dt::interpreter::trace
