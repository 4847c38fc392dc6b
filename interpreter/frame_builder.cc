#include "interpreter/frame_builder.h"

#include "interpreter/py_types.h"
#include "interpreter/resume_iterator.h"

namespace dt::interpreter {

using Kind = trace::OutputSpec::Kind;

Builder::~Builder() {
  for (PyObject* m : made_) Py_XDECREF(m);
  for (PyObject* m : memo_) Py_XDECREF(m);
}

PyObject* Builder::Build(const trace::OutputSpec& spec) {
  PyObject* obj = BuildUnmemoised(spec);
  if (obj != nullptr && spec.memo >= 0 && memo_[spec.memo] == nullptr) {
    Py_INCREF(obj);
    memo_[spec.memo] = obj;
  }
  return obj;
}

PyObject* Builder::Fail() {
  failed_ = true;
  if (!PyErr_Occurred()) {
    PyErr_SetString(PyExc_RuntimeError, "dyntrace: could not rebuild the frame state at a graph break");
  }
  return nullptr;
}

PyObject* Builder::BuildSequence(const trace::OutputSpec& spec) {
  const Py_ssize_t n = static_cast<Py_ssize_t>(spec.children.size());
  PyObject* seq = spec.kind == Kind::kList ? PyList_New(n) : PyTuple_New(n);
  if (seq == nullptr) return Fail();
  // Memoised before its items: a list may contain itself (`x.append(x)`).
  const bool named = spec.kind == Kind::kTuple && spec.obj;  // an op's named results
  if (spec.memo >= 0 && spec.kind != Kind::kIterator && !named) memo_[spec.memo] = Py_NewRef(seq);
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* item = Build(spec.children[i]);
    if (item == nullptr) {
      Py_DECREF(seq);
      return Fail();
    }
    if (spec.kind == Kind::kList) PyList_SET_ITEM(seq, i, item);
    else PyTuple_SET_ITEM(seq, i, item);
  }
  if (named) {
    PyObject* result = trace::MakeNamedTuple(spec.obj.get(), seq);
    Py_DECREF(seq);
    if (result == nullptr) return Fail();
    if (spec.memo >= 0) memo_[spec.memo] = Py_NewRef(result);  // a tuple never contains itself
    return result;
  }
  if (spec.kind != Kind::kIterator) return seq;
  // The remaining items of a loop the trace was in; readable by the next segment's trace.
  PyObject* it = py::NewResumeIterator(seq);
  return it != nullptr ? it : Fail();
}

PyObject* Builder::BuildIterator(const trace::OutputSpec& spec) {
  PyObject* base = Build(spec.children[0]);
  if (base == nullptr) return Fail();
  if (spec.kind == Kind::kLiveIterator) {
    PyObject* it = py::NewLiveResumeIterator(base, spec.index);
    Py_DECREF(base);
    return it != nullptr ? it : Fail();
  }
  // The loop's own iterator from the segment's start: its items were read (and guarded) then,
  // and nothing but this segment's loop advanced it since.
  PyObject* it = py::AdvancedResumeIterator(base, spec.index);
  Py_DECREF(base);
  return it != nullptr ? it : Fail();
}

// An iterator made again (`reversed(xs)`) and moved on by as many items as the segment took.
PyObject* Builder::BuildAdvance(const trace::OutputSpec& spec) {
  PyObject* it = Build(spec.children[0]);
  if (it == nullptr) return Fail();
  for (int i = 0; i < spec.index; ++i) {
    PyObject* item = PyIter_Next(it);
    if (item == nullptr) {
      if (PyErr_Occurred()) {
        Py_DECREF(it);
        return Fail();
      }
      break;
    }
    Py_DECREF(item);
  }
  return it;
}

PyObject* Builder::BuildNewObject(const trace::OutputSpec& spec) {
  auto* cls = reinterpret_cast<PyTypeObject*>(spec.obj.get());
  PyObject* empty = PyTuple_New(0);
  PyObject* o = empty != nullptr ? PyBaseObject_Type.tp_new(cls, empty, nullptr) : nullptr;
  Py_XDECREF(empty);
  if (o == nullptr) return Fail();
  if (spec.memo >= 0) memo_[spec.memo] = Py_NewRef(o);  // before its attributes: it may hold itself
  for (size_t i = 0; i < spec.children.size(); ++i) {
    PyObject* value = Build(spec.children[i]);
    const int failed = value == nullptr ? -1 : PyObject_GenericSetAttr(o, spec.keys[i].get(), value);
    Py_XDECREF(value);
    if (failed < 0) {
      Py_DECREF(o);
      return Fail();
    }
  }
  return o;
}

PyObject* Builder::BuildDict(const trace::OutputSpec& spec) {
  PyObject* d = PyDict_New();
  if (d == nullptr) return Fail();
  if (spec.memo >= 0) memo_[spec.memo] = Py_NewRef(d);  // before its values, like lists
  for (size_t i = 0; i < spec.children.size(); ++i) {
    PyObject* item = Build(spec.children[i]);
    if (item == nullptr || PyDict_SetItem(d, spec.keys[i].get(), item) < 0) {
      Py_XDECREF(item);
      Py_DECREF(d);
      return Fail();
    }
    Py_DECREF(item);
  }
  return d;
}

PyObject* Builder::BuildCell(const trace::OutputSpec& spec) {
  // The cell exists (and is memoised) before its contents: a function stored in it may close
  // over the cell itself (`def trace(): return trace`).
  PyObject* cell = PyCell_New(nullptr);
  if (cell == nullptr) return Fail();
  if (spec.memo >= 0) memo_[spec.memo] = Py_NewRef(cell);
  PyObject* contents = Build(spec.children[0]);
  if (contents == nullptr && failed_) {
    Py_DECREF(cell);
    return nullptr;
  }
  PyCell_SET(cell, contents);  // steals `contents`
  return cell;
}

// functools.partial(func, *args, **keywords): the keywords are the last children.
PyObject* Builder::BuildCall(const trace::OutputSpec& spec) {
  const size_t nkw = spec.keys.size();
  const size_t npos = spec.children.size() - nkw;
  py::PyRef args = py::PyRef::Steal(PyTuple_New(static_cast<Py_ssize_t>(npos)));
  py::PyRef kwargs = py::PyRef::Steal(PyDict_New());
  if (!args || !kwargs) return Fail();
  for (size_t i = 0; i < spec.children.size(); ++i) {
    PyObject* value = Build(spec.children[i]);
    if (value == nullptr) return Fail();
    if (i < npos) {
      PyTuple_SET_ITEM(args.get(), static_cast<Py_ssize_t>(i), value);
      continue;
    }
    const int r = PyDict_SetItem(kwargs.get(), spec.keys[i - npos].get(), value);
    Py_DECREF(value);
    if (r < 0) return Fail();
  }
  PyObject* made = PyObject_Call(spec.obj.get(), args.get(), kwargs.get());
  return made != nullptr ? made : Fail();
}

PyObject* Builder::BuildBoundMethod(const trace::OutputSpec& spec) {
  PyObject* self = Build(spec.children[0]);
  if (self == nullptr) return Fail();
  PyObject* fn = spec.obj.get();
  PyObject* method;
  if (PyUnicode_Check(fn)) {
    method = PyObject_GetAttr(self, fn);  // dict.get, list.append: C methods of builtins
  } else if (PyFunction_Check(fn)) {
    method = PyMethod_New(fn, self);
  } else if (Py_TYPE(fn)->tp_descr_get != nullptr) {
    method = Py_TYPE(fn)->tp_descr_get(fn, self, reinterpret_cast<PyObject*>(Py_TYPE(self)));
  } else {
    method = Py_NewRef(fn);
  }
  Py_DECREF(self);
  return method != nullptr ? method : Fail();
}

PyObject* Builder::BuildFunction(const trace::OutputSpec& spec) {
  PyObject* fn = PyFunction_New(spec.obj.get(), spec.globals);
  if (fn == nullptr) return Fail();
  // Memoised before its closure: a cell in the closure may hold the function itself.
  if (spec.memo >= 0) memo_[spec.memo] = Py_NewRef(fn);
  PyObject* parts[3];
  for (int i = 0; i < 3; ++i) parts[i] = Build(spec.children[i]);
  if (failed_ || (parts[0] != nullptr && PyFunction_SetDefaults(fn, parts[0]) < 0) ||
      (parts[1] != nullptr && PyFunction_SetKwDefaults(fn, parts[1]) < 0) ||
      (parts[2] != nullptr && PyFunction_SetClosure(fn, parts[2]) < 0)) {
    for (PyObject* p : parts) Py_XDECREF(p);
    Py_DECREF(fn);
    return Fail();
  }
  for (PyObject* p : parts) Py_XDECREF(p);
  return fn;
}

PyObject* Builder::BuildUnmemoised(const trace::OutputSpec& spec) {
  switch (spec.kind) {
    case Kind::kGraphOutput: {
      PyObject*& slot = made_[spec.index];
      if (slot == nullptr) slot = py::Wrap(outputs_[spec.index]);
      if (slot == nullptr) return Fail();
      return Py_NewRef(slot);
    }
    case Kind::kConst: return Py_NewRef(spec.obj.get());
    case Kind::kNull: return nullptr;
    case Kind::kMemo:
      // A slot not built yet would be a cycle built in the wrong order: never a silent NULL.
      if (memo_[spec.index] == nullptr) return Fail();
      return Py_NewRef(memo_[spec.index]);
    case Kind::kScalarSlot: return Py_NewRef(numbers_[spec.index].get());
    case Kind::kSource: {
      PyObject* v = spec.source->Resolve(inputs_);
      // A local the segment never touched is passed on as it was, unbound included (nothing
      // guards that an untouched local is bound).
      if (v == nullptr && spec.source->kind == guards::Source::Kind::kLocal) return nullptr;
      if (v == nullptr) {
        PyErr_Format(PyExc_RuntimeError, "dyntrace: %s disappeared", spec.source->ToString().c_str());
        return Fail();
      }
      return Py_NewRef(v);
    }
    case Kind::kTuple:
    case Kind::kList:
    case Kind::kIterator: return BuildSequence(spec);
    case Kind::kLiveIterator:
    case Kind::kAdvancedIterator: return BuildIterator(spec);
    case Kind::kDict: return BuildDict(spec);
    case Kind::kNewObject: return BuildNewObject(spec);
    case Kind::kCell: return BuildCell(spec);
    case Kind::kSlice: {
      PyObject* parts[3];
      for (int i = 0; i < 3; ++i) parts[i] = Build(spec.children[i]);
      PyObject* slice = failed_ ? nullptr : PySlice_New(parts[0], parts[1], parts[2]);
      for (PyObject* p : parts) Py_XDECREF(p);
      return slice != nullptr ? slice : Fail();
    }
    case Kind::kBoundMethod: return BuildBoundMethod(spec);
    case Kind::kFunction: return BuildFunction(spec);
    case Kind::kSet: {
      PyObject* set = py::ReplaySet(spec.obj.get());
      return set != nullptr ? set : Fail();
    }
    case Kind::kCall: return BuildCall(spec);
    case Kind::kAdvance: return BuildAdvance(spec);
  }
  __builtin_unreachable();
}

}  // namespace dt::interpreter
