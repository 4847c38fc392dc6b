// interpreter/trace_attributes.cc: attribute reads on traced values.
#include <Python.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "graph/pointwise.h"
#include "interpreter/cpython_frame.h"
#include "interpreter/py_str.h"
#include "interpreter/py_types.h"
#include "interpreter/sym_dict.h"
#include "interpreter/tracer_internal.h"
#include "runtime/errors.h"
#include "runtime/indexing.h"

namespace dt::trace {

// ---------------------------------------------------------------------------------------------
// Attributes and calls

absl::StatusOr<Sym> Tracer::GetAttr(const Sym& obj, const std::string& name) {
  if (obj->kind == SymKind::kTensor) {
    const Tensor& m = obj->meta;
    if (name == "shape") {
      Sym s = MakeSym(SymKind::kShape);
      s->items.push_back(obj);
      return s;
    }
    if (name == "dtype") return ConstSym(PyRef::Steal(py::WrapDType(m.dtype())));
    if (name == "device" || name == "is_cuda") {
      DT_ASSIGN_OR_RETURN(const Device device, DeviceOf(obj));
      if (name == "device") return ConstSym(PyRef::Steal(py::WrapDevice(device)));
      return ConstSym(PyRef::Borrow(device.type == DeviceType::kCuda ? Py_True : Py_False));
    }
    if (name == "ndim") return ConstSym(PyRef::Steal(PyLong_FromLongLong(m.ndim())));
    if (name == "T" || name == "mT") {
      Dims perm;
      for (int64_t d = 0; d < m.ndim(); ++d) perm.push_back(d);
      if (name == "T") std::reverse(perm.begin(), perm.end());
      else if (m.ndim() >= 2) std::swap(perm[m.ndim() - 1], perm[m.ndim() - 2]);
      else return Raises("the traced code raises: .mT of a tensor with fewer than 2 dims");
      const OpDef* op = OpRegistry::Get().Find("permute");
      DT_ASSIGN_OR_RETURN(std::vector<Sym> outs,
                          Emit(op, {m, perm}, {GraphArg::Value(obj->value), GraphArg{ArgValue(perm)}}, false));
      return outs[0];
    }
    PyObject* attr = PyDict_GetItemString(py::TensorType.tp_dict, name.c_str());
    if (attr == nullptr) return Raises(absl::StrCat("the traced code raises: Tensor has no attribute ", name));
    Sym s = MakeSym(py::IsOpFunction(attr) ? SymKind::kOpMethod : SymKind::kBoundMethod);
    s->obj = PyRef::Borrow(attr);
    s->items.push_back(obj);
    return s;
  }
  if (obj->kind == SymKind::kShape) {
    return Unsupported(absl::StrCat("attribute ", name, " of a shape"));
  }
  if ((obj->kind == SymKind::kDict && (name == "get" || name == "items" || name == "keys" || name == "values")) ||
      (obj->kind == SymKind::kList && (name == "append" || name == "extend" || name == "index" || name == "count")) ||
      (obj->kind == SymKind::kTuple && (name == "index" || name == "count"))) {
    Sym s = MakeSym(SymKind::kBoundMethod);
    s->obj = PyRef::Steal(py::FromUtf8(name));
    s->items.push_back(obj);
    return s;
  }
  if (obj->kind == SymKind::kObject || (obj->kind == SymKind::kConst && (PyModule_Check(obj->obj.get()) || PyType_Check(obj->obj.get())))) {
    PyObject* o = obj->obj.get();
    PyObject* own = nullptr;
    if (PyModule_Check(o)) {
      own = PyDict_GetItemString(PyModule_GetDict(o), name.c_str());
    } else if (PyType_Check(o)) {
      // The MRO lookup, not tp_dict: 3.12 keeps builtin types' dicts elsewhere (tp_dict is NULL).
      PyRef key = PyRef::Steal(py::FromUtf8(name));
      own = cpython::LookupOnType(reinterpret_cast<PyTypeObject*>(o), key.get());
    } else {
      if (PyObject* dict = cpython::InstanceDict(o); dict != nullptr) own = PyDict_GetItemString(dict, name.c_str());
      // A data descriptor on the class wins over the instance dict: leave those to Python.
      PyObject* cls_attr = cpython::LookupOnType(Py_TYPE(o), PyRef::Steal(py::FromUtf8(name)).get());
      if (cls_attr != nullptr && Py_TYPE(cls_attr)->tp_descr_set != nullptr) {
        return Unsupported(absl::StrCat("attribute '", name, "' is a descriptor (property or slot)"));
      }
      if (own == nullptr && cls_attr != nullptr) {
        if (PyFunction_Check(cls_attr)) {
          Sym s = MakeSym(SymKind::kBoundMethod);
          s->obj = PyRef::Borrow(cls_attr);
          s->items.push_back(obj);
          return s;
        }
        return Unsupported(absl::StrCat("class attribute '", name, "' of ", Py_TYPE(o)->tp_name));
      }
    }
    if (own == nullptr) {
      return Unsupported(absl::StrCat("attribute '", name, "' of ", ShortRepr(o), " (the code raises or reads a class attribute)"));
    }
    if (obj->source == nullptr) return Unsupported(absl::StrCat("attribute of an object without a source"));
    if (PyType_Check(o) && PyFunction_Check(own)) {
      Sym s = MakeSym(SymKind::kFunction);
      s->obj = PyRef::Borrow(own);
      s->source = guards::AttrSource(obj->source, name);
      guards_.Add(LeafGuard::Identity(s->source, own, Here()));
      return s;
    }
    if (PyType_Check(o)) {
      // type.__getattribute__: a data descriptor of the metaclass (__dict__, __doc__, __name__)
      // wins over the class's own attribute, and a descriptor found in the class is bound with
      // __get__(None, cls) (classmethod, staticmethod, property ...).
      PyRef key = PyRef::Steal(py::FromUtf8(name));
      PyObject* meta_attr = cpython::LookupOnType(Py_TYPE(o), key.get());
      if (meta_attr != nullptr && Py_TYPE(meta_attr)->tp_descr_set != nullptr) {
        return Unsupported(absl::StrCat("attribute '", name, "' of a class is a descriptor of its metaclass"));
      }
      const bool is_classmethod = Py_IS_TYPE(own, &PyClassMethod_Type);
      if (is_classmethod || Py_IS_TYPE(own, &PyStaticMethod_Type)) {
        PyRef function = PyRef::Steal(PyObject_GetAttrString(own, "__func__"));
        if (function && !is_classmethod && PyCFunction_Check(function.get())) {
          // A builtin as a static method (dyntrace.cuda.is_available): the call decides.
          // The static method's identity fixes the builtin it holds.
          guards_.Add(LeafGuard::Identity(guards::AttrSource(obj->source, name), own, Here()));
          return ConstSym(std::move(function));
        }
        if (!function || !PyFunction_Check(function.get())) {
          PyErr_Clear();
          return Unsupported(absl::StrCat("class attribute '", name, "' wraps a non-function"));
        }
        guards_.Add(LeafGuard::Identity(guards::AttrSource(obj->source, name), own, Here()));
        Sym s = MakeSym(is_classmethod ? SymKind::kBoundMethod : SymKind::kFunction);
        s->obj = function;
        if (is_classmethod) s->items.push_back(obj);
        return s;
      }
      if (Py_TYPE(own)->tp_descr_get != nullptr) {
        return Unsupported(absl::StrCat("class attribute '", name, "' is a descriptor (", Py_TYPE(own)->tp_name, ")"));
      }
    }
    return Wrap(own, guards::AttrSource(obj->source, name));
  }
  if (obj->kind == SymKind::kConst && IsPureConstType(obj->obj.get())) {
    PyObject* r = PyObject_GetAttrString(obj->obj.get(), name.c_str());
    if (r == nullptr) {
      PyErr_Clear();
      return Raises("the traced code raises AttributeError");
    }
    return ConstSym(PyRef::Steal(r));
  }
  return Unsupported(absl::StrCat("attribute '", name, "' of a ", Describe(obj)));
}

}  // namespace dt::trace
