// interpreter/trace_builtins.cc: calls of Python builtins.
#include <Python.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "graph/pointwise.h"
#include "interpreter/py_module.h"
#include "interpreter/py_str.h"
#include "interpreter/py_types.h"
#include "interpreter/sym_dict.h"
#include "interpreter/tracer_internal.h"
#include "runtime/errors.h"
#include "runtime/indexing.h"

namespace dt::trace {

absl::StatusOr<Sym> Tracer::CallBuiltin(PyObject* fn, const std::vector<Sym>& args,
                                        const std::vector<std::pair<std::string, Sym>>& kwargs) {
  if (PyCFunction_Check(fn) && std::string(reinterpret_cast<PyCFunctionObject*>(fn)->m_ml->ml_name) == "tensor" &&
      PyCFunction_GET_SELF(fn) != nullptr && PyModule_Check(PyCFunction_GET_SELF(fn)) &&
      std::string(PyModule_GetName(PyCFunction_GET_SELF(fn))) == "dyntrace") {
    // dyntrace.tensor(constants): made now, copied into each run by a constant node.
    PyRef tuple = PyRef::Steal(PyTuple_New(args.size()));
    for (size_t i = 0; i < args.size(); ++i) {
      auto c = ConstValue(args[i]);
      if (!c.ok()) return Unsupported(absl::StrCat("dyntrace.tensor() of values only known at run time"));
      PyTuple_SET_ITEM(tuple.get(), i, c->Release());
    }
    PyRef kw = PyRef::Steal(PyDict_New());
    for (const auto& [k, v] : kwargs) {
      DT_ASSIGN_OR_RETURN(PyRef c, ConstValue(v));
      PyDict_SetItemString(kw.get(), k.c_str(), c.get());
    }
    PyRef made = PyRef::Steal(PyObject_Call(fn, tuple.get(), kw.get()));
    if (!made) {
      PyErr_Clear();
      return Raises("the traced code raises in dyntrace.tensor()");
    }
    const Tensor& value = py::Unwrap(made.get());
    const OpDef* op = OpRegistry::Get().Find("_tensor_constant");
    Tensor meta(Storage::Allocate(0, Device::Meta()), value.sizes(), value.strides(), 0, value.dtype());
    touched_tensors_ = true;
    std::vector<ValueId> ids = graph_->AddNode(op, {GraphArg{ArgValue(value)}}, {meta}, false, HereLocation());
    Sym s = MakeSym(SymKind::kTensor);
    s->value = ids[0];
    s->meta = meta;
    value_device_[s->value] = value.device();
    return s;
  }
  PyObject* builtins = frame_.inputs.builtins;
  auto is = [&](const char* name) { return fn == PyDict_GetItemString(builtins, name); };
  if (is("len") && args.size() == 1) {
    const Sym& a = args[0];
    switch (a->kind) {
      case SymKind::kTuple: case SymKind::kList: case SymKind::kDict:
        return ConstSym(PyRef::Steal(PyLong_FromSize_t(a->items.size())));
      case SymKind::kShape: return ConstSym(PyRef::Steal(PyLong_FromLongLong(a->items[0]->meta.ndim())));
      case SymKind::kTensor:
        if (a->meta.ndim() == 0) return Raises("the traced code raises: len() of a 0-d tensor");
        DT_RETURN_IF_ERROR(GuardSizes(a, 0));
        return ConstSym(PyRef::Steal(PyLong_FromLongLong(a->meta.size(0))));
      default: break;
    }
  }
  if (is("isinstance") && args.size() == 2) {
    DT_ASSIGN_OR_RETURN(PyRef cls, ConstValue(args[1]));
    PyObject* probe = nullptr;
    PyRef holder;
    switch (args[0]->kind) {
      case SymKind::kTensor: {
        DT_ASSIGN_OR_RETURN(probe, ToPython(args[0]));
        break;
      }
      case SymKind::kConst: case SymKind::kObject: case SymKind::kFunction: probe = args[0]->obj.get(); break;
      case SymKind::kTuple: holder = PyRef::Steal(PyTuple_New(0)); probe = holder.get(); break;
      case SymKind::kList: holder = PyRef::Steal(PyList_New(0)); probe = holder.get(); break;
      case SymKind::kDict: holder = PyRef::Steal(PyDict_New()); probe = holder.get(); break;
      default: return Unsupported("isinstance() of an unusual value");
    }
    const int r = PyObject_IsInstance(probe, cls.get());
    if (r < 0) {
      PyErr_Clear();
      return Raises("the traced code raises in isinstance()");
    }
    return ConstSym(PyRef::Borrow(r ? Py_True : Py_False));
  }
  if ((is("tuple") || is("list")) && args.size() == 1 && kwargs.empty()) {
    // tuple(t) of an exact tuple is t itself in CPython (`tuple(args) is args`).
    if (is("tuple") && args[0]->kind == SymKind::kTuple) return args[0];
    DT_ASSIGN_OR_RETURN(std::vector<Sym> items, Iterate(args[0]));
    Sym s = MakeSym(is("tuple") ? SymKind::kTuple : SymKind::kList);
    s->items = std::move(items);
    return s;
  }
  if ((is("enumerate") || is("zip")) && kwargs.empty() && !args.empty()) {
    std::vector<std::vector<Sym>> seqs;
    size_t start_index = 0;
    if (is("enumerate")) {
      DT_ASSIGN_OR_RETURN(std::vector<Sym> items, Iterate(args[0]));
      if (args.size() > 1) {
        DT_ASSIGN_OR_RETURN(PyRef st, ConstValue(args[1]));
        start_index = PyLong_AsSize_t(st.get());
      }
      std::vector<Sym> idx;
      for (size_t i = 0; i < items.size(); ++i) idx.push_back(ConstSym(PyRef::Steal(PyLong_FromSize_t(i + start_index))));
      seqs = {idx, items};
    } else {
      for (const Sym& a : args) {
        DT_ASSIGN_OR_RETURN(std::vector<Sym> items, Iterate(a));
        seqs.push_back(items);
      }
    }
    size_t n = seqs[0].size();
    for (const auto& s : seqs) n = std::min(n, s.size());
    Sym it = MakeSym(SymKind::kIter);
    for (size_t i = 0; i < n; ++i) {
      Sym t = MakeSym(SymKind::kTuple);
      for (const auto& s : seqs) t->items.push_back(s[i]);
      it->items.push_back(t);
    }
    return it;
  }
  if (is("reversed") && args.size() == 1) {
    DT_ASSIGN_OR_RETURN(std::vector<Sym> items, Iterate(args[0]));
    Sym it = MakeSym(SymKind::kIter);
    it->items.assign(items.rbegin(), items.rend());
    return it;
  }
  if ((is("abs")) && args.size() == 1 && args[0]->kind == SymKind::kTensor) return EmitNamed("abs", args);
  if ((is("sum")) && args.size() == 1 && (args[0]->kind == SymKind::kTuple || args[0]->kind == SymKind::kList)) {
    if (args[0]->items.empty()) return ConstSym(PyRef::Steal(PyLong_FromLong(0)));
    Sym acc = args[0]->items[0];
    for (size_t i = 1; i < args[0]->items.size(); ++i) {
      DT_ASSIGN_OR_RETURN(acc, BinaryOp("+", acc, args[0]->items[i]));
    }
    return BinaryOp("+", ConstSym(PyRef::Steal(PyLong_FromLong(0))), acc);
  }
  // Pure builtins on constants: call them for real.
  static const char* kPure[] = {"abs", "min", "max", "float", "int", "bool", "str", "round", "len",
                                "range", "tuple", "divmod", "pow", "sum", "repr", "hash", "chr",
                                "ord", "any", "all", "sorted", "slice", "type"};
  bool pure = false;
  for (const char* name : kPure) pure |= is(name);
  if (PyCFunction_Check(fn) && PyCFunction_GET_SELF(fn) != nullptr &&
      !PyModule_Check(PyCFunction_GET_SELF(fn)) && IsPureConstType(PyCFunction_GET_SELF(fn)) &&
      !PyList_Check(PyCFunction_GET_SELF(fn))) {
    pure = true;  // a method of an immutable constant: "abc".startswith, (1, 2).index
  }
  // Facts fixed for the life of the process: called now, the answer a constant of the graph.
  if (py::IsProcessConstantFunction(fn)) pure = true;
  PyObject* module_name = PyCFunction_Check(fn) ? reinterpret_cast<PyCFunctionObject*>(fn)->m_module : nullptr;
  if (module_name != nullptr && PyUnicode_Check(module_name) &&
      PyUnicode_CompareWithASCIIString(module_name, "math") == 0) {
    pure = true;
  }
  if (!pure) {
    return Unsupported(absl::StrCat("call to ", ShortRepr(fn), " is not supported by the tracer"));
  }
  bool any_number = false, numbers_only = kwargs.empty();
  for (const Sym& a : args) {
    any_number |= a->kind == SymKind::kNumber;
    numbers_only &= a->kind == SymKind::kNumber ||
                    (a->kind == SymKind::kConst && IsPureConstType(a->obj.get()));
  }
  if (any_number && numbers_only) {
    // A pure builtin on run-time numbers: replayed each run, not specialised.
    ScalarInstr instr;
    instr.kind = ScalarInstr::Kind::kCall;
    instr.function = PyRef::Borrow(fn);
    std::vector<int> deps;
    PyRef sample_args = PyRef::Steal(PyTuple_New(args.size()));
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i]->kind == SymKind::kNumber) {
        instr.arg_slots.push_back(args[i]->value);
        instr.arg_consts.push_back(PyRef());
        deps.insert(deps.end(), slot_inputs_[args[i]->value].begin(), slot_inputs_[args[i]->value].end());
      } else {
        instr.arg_slots.push_back(-1);
        instr.arg_consts.push_back(args[i]->obj);
      }
      PyTuple_SET_ITEM(sample_args.get(), i, Py_NewRef(args[i]->obj.get()));
    }
    PyObject* sample = PyObject_Call(fn, sample_args.get(), nullptr);
    if (sample == nullptr) {
      PyErr_Clear();
      return Raises(absl::StrCat("the traced code raises in ", ShortRepr(fn)));
    }
    if (PyLong_CheckExact(sample) || PyFloat_CheckExact(sample) || PyBool_Check(sample)) {
      return NumberSlot(std::move(instr), PyRef::Steal(sample), std::move(deps));
    }
    Py_DECREF(sample);  // not a number (str(), repr() ...): fold it with specialised arguments
  }
  PyRef tuple = PyRef::Steal(PyTuple_New(args.size()));
  for (size_t i = 0; i < args.size(); ++i) {
    auto c_or = ConstValue(args[i]);
    if (!c_or.ok()) {
      return Unsupported(absl::StrCat("call to ", ShortRepr(fn), " with an argument only known at run time (",
                                      c_or.status().message(), ")"));
    }
    PyRef c = *c_or;
    if (!IsPureConstType(c.get()) && !(is("type") && args.size() == 1)) {
      return Unsupported(absl::StrCat("call to ", ShortRepr(fn), " with a ", Py_TYPE(c.get())->tp_name));
    }
    PyTuple_SET_ITEM(tuple.get(), i, c.Release());
  }
  PyRef kw;
  if (!kwargs.empty()) {
    kw = PyRef::Steal(PyDict_New());
    for (const auto& [k, v] : kwargs) {
      DT_ASSIGN_OR_RETURN(PyRef c, ConstValue(v));
      PyDict_SetItemString(kw.get(), k.c_str(), c.get());
    }
  }
  PyObject* r = PyObject_Call(fn, tuple.get(), kw.get());
  if (r == nullptr) {
    PyErr_Clear();
    return Raises(absl::StrCat("the traced code raises in ", ShortRepr(fn)));
  }
  return ConstSym(PyRef::Steal(r));
}

}  // namespace dt::trace
