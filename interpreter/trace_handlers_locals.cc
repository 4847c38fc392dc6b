// interpreter/trace_handlers_locals.cc: instructions that read and write locals, globals, cells
// and attributes.
#include <Python.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "interpreter/cpython_frame.h"
#include "interpreter/py_str.h"
#include "interpreter/tracer_internal.h"
#include "runtime/errors.h"

namespace dt::interpreter::trace {

absl::Status Tracer::DoLoadFast(TFrame& f, const Instr& in) {
  DT_ASSIGN_OR_RETURN(Sym s, LoadLocal(f, in.arg));
  f.stack.push_back(s);
  return absl::OkStatus();
}

absl::Status Tracer::DoLoadFastAndClear(TFrame& f, const Instr& in) {
  if (f.is_root && f.locals[in.arg] == nullptr && f.argument_live[in.arg] &&
      frame_.inputs.locals[in.arg] != nullptr) {
    DT_ASSIGN_OR_RETURN(f.locals[in.arg], LoadLocal(f, in.arg));
  }
  GuardStillUnbound(f, in.arg);
  if (f.is_root) f.argument_live[in.arg] = false;
  Sym s = f.locals[in.arg];
  f.stack.push_back(s != nullptr ? s : MakeSym(SymKind::kNull));
  f.locals[in.arg] = nullptr;
  return absl::OkStatus();
}

absl::Status Tracer::DoStoreFast(TFrame& f, const Instr& in) {
  DT_RETURN_IF_ERROR(f.Need(1, in));
  Sym s = f.Pop();
  f.locals[in.arg] = s->kind == SymKind::kNull ? nullptr : s;
  if (f.is_root) f.argument_live[in.arg] = false;
  return absl::OkStatus();
}

absl::Status Tracer::DoDeleteFast(TFrame& f, const Instr& in) {
  f.locals[in.arg] = nullptr;
  if (f.is_root) f.argument_live[in.arg] = false;
  return absl::OkStatus();
}

absl::Status Tracer::DoLoadGlobal(TFrame& f, const Instr& in) {
  DT_ASSIGN_OR_RETURN(const std::string name, NameText(in.argval.get()));
  DT_ASSIGN_OR_RETURN(Sym g, LoadGlobal(f, name));
  if (in.arg & 1) f.stack.push_back(MakeSym(SymKind::kNull));
  f.stack.push_back(g);
  return absl::OkStatus();
}

absl::Status Tracer::DoMakeCell(TFrame& f, const Instr& in) {
  Sym content;
  if (f.is_root && in.arg < frame_.inputs.num_locals && frame_.inputs.locals[in.arg] != nullptr &&
      f.locals[in.arg] == nullptr && f.argument_live[in.arg]) {
    DT_ASSIGN_OR_RETURN(content, LoadLocal(f, in.arg));
  } else {
    GuardStillUnbound(f, in.arg);
    content = f.locals[in.arg];
  }
  Sym cell = MakeSym(SymKind::kCell);
  cell->items.push_back(content);
  f.locals[in.arg] = cell;
  return absl::OkStatus();
}

absl::Status Tracer::DoCopyFreeVars(TFrame& f, const Instr& in) {
  const int nfree = in.arg;
  const int first = f.code->co_nlocalsplus - nfree;
  for (int i = 0; i < nfree; ++i) {
    if (f.function == nullptr) {
      if (f.function_sym == nullptr || f.function_sym->closure == nullptr) {
        return Unsupported("free variables without a closure");
      }
      f.locals[first + i] = f.function_sym->closure->items.at(i);
      continue;
    }
    const std::string name = py::Utf8Or(cpython::LocalNameObject(f.code, first + i));
    PyObject* cell = PyTuple_GET_ITEM(PyFunction_GET_CLOSURE(f.function), i);
    Sym c = MakeSym(SymKind::kCell);
    c->from_frame = true;
    if (f.is_root) c->source = guards::FreeCellSource(i, name);
    c->items.push_back(nullptr);
    if (PyObject* contents = PyCell_GET(cell); contents != nullptr) {
      SourceRef src = f.is_root ? guards::ClosureSource(i, name)
                                : (f.function_source ? guards::FuncCellSource(f.function_source, i, name) : nullptr);
      if (src == nullptr && name == "__class__" && PyType_Check(contents)) {
        // A method's class cell (zero-argument super()): set when the class is made, and
        // belonging to that method, found on that class.
        c->items[0] = ConstSym(PyRef::Borrow(contents));
        f.locals[first + i] = c;
        continue;
      }
      if (src == nullptr) return Unsupported("a closure of a function without a source");
      DT_ASSIGN_OR_RETURN(c->items[0], Wrap(contents, src));
    }
    f.locals[first + i] = c;
  }
  return absl::OkStatus();
}

absl::Status Tracer::DoLoadDeref(TFrame& f, const Instr& in) {
  Sym cell = f.locals[in.arg];
  if (cell == nullptr || cell->kind != SymKind::kCell) {
    // 3.11 frames may read an argument-cell before MAKE_CELL ran; treat as a plain local.
    DT_ASSIGN_OR_RETURN(Sym v, LoadLocal(f, in.arg));
    if (v->kind != SymKind::kCell) {
      f.stack.push_back(v);
      return absl::OkStatus();
    }
    cell = v;
  }
  if (cell->items.empty() || cell->items[0] == nullptr) {
    return Raises("the traced code raises: free variable referenced before assignment");
  }
  f.stack.push_back(cell->items[0]);
  return absl::OkStatus();
}

absl::Status Tracer::DoStoreDeref(TFrame& f, const Instr& in) {
  DT_RETURN_IF_ERROR(f.Need(1, in));
  Sym cell = f.locals[in.arg];
  if (cell == nullptr || cell->kind != SymKind::kCell) return Unsupported("STORE_DEREF without a cell");
  if (cell->from_frame) return Unsupported("assigning to a nonlocal variable of the caller");
  Mutating(cell);
  cell->items.assign(1, f.Pop());
  return absl::OkStatus();
}

absl::Status Tracer::DoLoadAttr(TFrame& f, const Instr& in) {
  DT_RETURN_IF_ERROR(f.Need(1, in));
  DT_ASSIGN_OR_RETURN(const std::string name, NameText(in.argval.get()));
  DT_ASSIGN_OR_RETURN(Sym attr, GetAttr(f.stack.back(), name));
  f.Pop();
  const bool method = in.op == Op::kLoadMethod || (interpreter::kPython312 && (in.arg & 1));
  if (method) {
    Sym slot = MakeSym(SymKind::kNull);
    slot->method_call_slot = true;
    f.stack.push_back(slot);
  }
  f.stack.push_back(attr);
  return absl::OkStatus();
}

// obj.name = value on an object of the caller: recorded on its Sym (later reads in the trace see
// it) and replayed on the real object after the graph runs. Only plain attribute stores qualify:
// the class keeps object.__setattr__, has no data descriptor (property, slot) of that name, and
// the instance has a __dict__; anything else could run user code, so CPython runs it.
absl::Status Tracer::DoStoreAttr(TFrame& f, const Instr& in) {
  DT_RETURN_IF_ERROR(f.Need(2, in));
  const Sym& obj = f.stack.back();
  if (obj->kind == SymKind::kObject && (obj->source != nullptr || obj->made_by_trace) &&
      Py_TYPE(obj->obj.get())->tp_setattro == PyBaseObject_Type.tp_setattro) {
    // A property with a Python setter: the setter is inlined.
    PyObject* cls_attr = cpython::LookupOnType(Py_TYPE(obj->obj.get()), in.argval.get());
    if (cls_attr != nullptr && Py_IS_TYPE(cls_attr, &PyProperty_Type)) {
      DT_ASSIGN_OR_RETURN(const std::string name, NameText(in.argval.get()));
      DT_RETURN_IF_ERROR(PendingClassAttr(Py_TYPE(obj->obj.get()), name, nullptr).status());
      DT_ASSIGN_OR_RETURN(Sym setter, PropertyFunction(obj, cls_attr, name, /*setter=*/true));
      if (setter != nullptr) {
        Sym target = obj;
        Sym value = f.stack[f.stack.size() - 2];
        DT_RETURN_IF_ERROR(CallSym(setter, {target, value}, {}).status());
        f.Pop();
        f.Pop();
        return absl::OkStatus();
      }
    }
  }
  if (obj->kind == SymKind::kConst && PyType_Check(obj->obj.get())) {
    DT_RETURN_IF_ERROR(StoreClassAttr(obj, in.argval.get(), f.stack[f.stack.size() - 2]));
  } else {
    DT_RETURN_IF_ERROR(StoreAttr(f.stack.back(), in.argval.get(), f.stack[f.stack.size() - 2]));
  }
  f.Pop();
  f.Pop();
  return absl::OkStatus();
}

// `obj.name = value` (STORE_ATTR, setattr()) on a plain object the trace follows: recorded on its
// Sym and replayed after the graph. Changes nothing when it stops the trace.
absl::Status Tracer::StoreAttr(const Sym& target, PyObject* name_obj, const Sym& value, bool through_object_setattr) {
  if (target->kind == SymKind::kTensor && PyUnicode_Check(name_obj) &&
      PyUnicode_CompareWithASCIIString(name_obj, "grad") == 0) {
    return StoreGrad(target, value);
  }
  if (target->kind != SymKind::kObject || (target->source == nullptr && !target->made_by_trace)) {
    return Unsupported(absl::StrCat("storing an attribute on a ", Describe(target)));
  }
  DT_ASSIGN_OR_RETURN(const std::string name, NameText(name_obj));
  PyObject* o = target->obj.get();
  PyTypeObject* type = Py_TYPE(o);
  // A class attribute of that name the trace stored could be a descriptor CPython would call;
  // a number, str or tensor is not (the store goes to the instance).
  const SourceRef cls_source = target->made_by_trace ? target->class_source
                               : target->source != nullptr ? guards::TypeOfSource(target->source) : nullptr;
  DT_ASSIGN_OR_RETURN(Sym pending, PendingClassAttr(type, name, cls_source));
  if (pending != nullptr && !(pending->kind == SymKind::kTensor || pending->kind == SymKind::kNumber ||
                              (pending->kind == SymKind::kConst && IsPureConstType(pending->obj.get())))) {
    return Unsupported(absl::StrCat("storing attribute '", name, "' over a class attribute the trace stored"));
  }
  PyObject* cls_attr = cpython::LookupOnType(type, name_obj);
  const bool setattr_is_objects = through_object_setattr || type->tp_setattro == PyBaseObject_Type.tp_setattro;
  if (!setattr_is_objects || cpython::InstanceDict(o) == nullptr ||
      (cls_attr != nullptr && Py_TYPE(cls_attr)->tp_descr_set != nullptr)) {
    return Unsupported(absl::StrCat("storing attribute '", name, "' on a ", type->tp_name,
                                    " (a custom __setattr__, a descriptor or no __dict__)"));
  }
  if (objects_[o].sources > 1) {
    return Unsupported(absl::StrCat("storing attribute '", name, "' on an object reached two ways"));
  }
  if (value->kind == SymKind::kNull) return Unsupported("storing NULL");
  Mutating(target);
  if (target->keys.empty()) stored_objects_.push_back(target);
  for (size_t i = 0; i < target->keys.size(); ++i) {
    if (PyUnicode_Compare(target->keys[i].get(), name_obj) == 0) {
      target->items[i] = value;
      return absl::OkStatus();
    }
  }
  target->keys.push_back(PyRef::Borrow(name_obj));
  target->items.push_back(value);
  return absl::OkStatus();
}

// The stores to replay, one per (object, name), with the value last stored.
absl::StatusOr<std::vector<AttrStore>> Tracer::AttrStores(std::vector<ValueId>& outputs) {
  std::vector<AttrStore> stores;
  for (const Sym& obj : stored_objects_) {
    if (obj->made_by_trace) continue;  // built with its attributes where it leaves the trace
    for (size_t i = 0; i < obj->keys.size(); ++i) {  // empty when a break rolled the stores back
      DT_ASSIGN_OR_RETURN(OutputSpec value, ToOutput(obj->items[i], outputs));
      stores.push_back(AttrStore{obj->source, obj->keys[i], std::move(value), false, nullptr});
    }
  }
  DT_RETURN_IF_ERROR(AppendGlobalStores(stores, outputs));
  DT_RETURN_IF_ERROR(AppendKeyedStores(stores, outputs));
  return stores;
}

}  // namespace dt::interpreter::trace
