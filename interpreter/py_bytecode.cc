// interpreter/py_bytecode.cc: the instruction table as Python sees it, for the test that checks
// every row against the running interpreter's `dis` (tests/python/test_instruction_table.py).
#include <Python.h>

#include <string_view>
#include <vector>

#include "interpreter/bytecode.h"
#include "interpreter/py_module.h"
#include "interpreter/py_ref.h"
#include "interpreter/py_types.h"

namespace dt::interpreter::py {
namespace {

using interpreter::BreakExit;
using interpreter::Flow;
using interpreter::InstructionRow;

const char* FlowName(Flow flow) {
  switch (flow) {
    case Flow::kNext: return "next";
    case Flow::kJump: return "jump";
    case Flow::kBranch: return "branch";
    case Flow::kReturn: return "return";
    case Flow::kRaise: return "raise";
  }
  return "?";
}

const char* ExitName(BreakExit exit) {
  switch (exit) {
    case BreakExit::kHandBack: return "hand back";
    case BreakExit::kEscapeJump: return "escape jump";
    case BreakExit::kEscapeForIter: return "escape for-iter";
    case BreakExit::kEscapeCall: return "escape call";
  }
  return "?";
}

PyObject* NameList(const std::vector<std::string_view>& names) {
  PyRef list = PyRef::Steal(PyList_New(0));
  if (!list) return nullptr;
  for (std::string_view name : names) {
    PyRef s = PyRef::Steal(PyUnicode_FromStringAndSize(name.data(), static_cast<Py_ssize_t>(name.size())));
    if (!s || PyList_Append(list.get(), s.get()) < 0) return nullptr;
  }
  return list.Release();
}

// _instruction_table() -> [{"names_311": [...], "names_312": [...], "flow": ..., "exit": ...}]
PyObject* FnInstructionTable(PyObject*, PyObject*) {
  PyRef rows = PyRef::Steal(PyList_New(0));
  if (!rows) return nullptr;
  for (const InstructionRow& row : interpreter::InstructionTable()) {
    PyRef names_311 = PyRef::Steal(NameList(row.names_311));
    PyRef names_312 = PyRef::Steal(NameList(row.names_312));
    if (!names_311 || !names_312) return nullptr;
    PyRef dict = PyRef::Steal(Py_BuildValue("{sOsOssss}", "names_311", names_311.get(), "names_312",
                                            names_312.get(), "flow", FlowName(row.flow), "exit",
                                            ExitName(row.exit)));
    if (!dict || PyList_Append(rows.get(), dict.get()) < 0) return nullptr;
  }
  return rows.Release();
}

// _stack_effect(opname, arg, jumped) -> (pops, pushes) of the tracer's handler on the running
// version, or None for an instruction without a row.
PyObject* FnStackEffect(PyObject*, PyObject* args) {
  const char* opname = nullptr;
  int arg = 0;
  int jumped = 0;
  if (!PyArg_ParseTuple(args, "sip", &opname, &arg, &jumped)) return nullptr;
  const InstructionRow* row = interpreter::RowOf(opname);
  if (row == nullptr) Py_RETURN_NONE;
  const interpreter::StackEffect effect = row->stack(arg, jumped != 0);
  return Py_BuildValue("(ii)", effect.pops, effect.pushes);
}

PyMethodDef bytecode_functions[] = {
    {"_instruction_table", FnInstructionTable, METH_NOARGS, nullptr},
    {"_stack_effect", FnStackEffect, METH_VARARGS, nullptr},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace

bool AddBytecodeBindings(PyObject* module) { return PyModule_AddFunctions(module, bytecode_functions) >= 0; }

}  // namespace dt::interpreter::py
