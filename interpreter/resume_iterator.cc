#include "interpreter/resume_iterator.h"

#include <algorithm>

#include "guards/source.h"

namespace dt::interpreter::py {
namespace {

struct ResumeIterator {
  PyObject_HEAD
  // A tuple of the remaining items (from `next` on), or the list or dict iterated live.
  PyObject* items;
  // Tuple and list: the index of the next item. Dict: PyDict_Next's position.
  Py_ssize_t next;
  // Dict: its size when iteration began (-1 once it changed: it keeps raising, like CPython's).
  Py_ssize_t dict_size;
  // Dict: the keys left, for readers; valid while `remaining_at` == `next`.
  PyObject* remaining;
  Py_ssize_t remaining_at;
  bool exhausted;
};

PyTypeObject ResumeIteratorType = {PyVarObject_HEAD_INIT(nullptr, 0) "dyntrace.loop_iterator"};

void Dealloc(PyObject* self) {
  PyObject_GC_UnTrack(self);
  auto* it = reinterpret_cast<ResumeIterator*>(self);
  Py_CLEAR(it->items);
  Py_CLEAR(it->remaining);
  PyObject_GC_Del(self);
}

int Traverse(PyObject* self, visitproc visit, void* arg) {
  auto* it = reinterpret_cast<ResumeIterator*>(self);
  Py_VISIT(it->items);
  Py_VISIT(it->remaining);
  return 0;
}

PyObject* NextOfDict(ResumeIterator* it) {
  if (it->dict_size != PyDict_GET_SIZE(it->items)) {
    it->dict_size = -1;
    PyErr_SetString(PyExc_RuntimeError, "dictionary changed size during iteration");
    return nullptr;
  }
  PyObject* key;
  if (!PyDict_Next(it->items, &it->next, &key, nullptr)) {
    it->exhausted = true;
    return nullptr;
  }
  return Py_NewRef(key);
}

PyObject* Next(PyObject* self) {
  auto* it = reinterpret_cast<ResumeIterator*>(self);
  if (it->exhausted) return nullptr;  // StopIteration, and for good (a list that grows later)
  if (PyDict_Check(it->items)) return NextOfDict(it);
  if (it->next >= PySequence_Fast_GET_SIZE(it->items)) {
    it->exhausted = true;
    return nullptr;
  }
  return Py_NewRef(PySequence_Fast_GET_ITEM(it->items, it->next++));
}

PyObject* KeysLeft(ResumeIterator* it) {
  if (it->remaining != nullptr && it->remaining_at == it->next) return it->remaining;
  PyObject* keys = PyList_New(0);
  if (keys == nullptr) return nullptr;
  Py_ssize_t pos = it->next;
  PyObject* key;
  while (PyDict_Next(it->items, &pos, &key, nullptr)) {
    if (PyList_Append(keys, key) < 0) {
      Py_DECREF(keys);
      return nullptr;
    }
  }
  Py_XSETREF(it->remaining, keys);
  it->remaining_at = it->next;
  return keys;
}

Py_ssize_t CountLeft(ResumeIterator* it) {
  if (it->exhausted) return 0;
  if (PyDict_Check(it->items)) {
    PyObject* keys = it->dict_size == PyDict_GET_SIZE(it->items) ? KeysLeft(it) : nullptr;
    if (keys == nullptr) PyErr_Clear();
    return keys != nullptr ? PyList_GET_SIZE(keys) : 0;
  }
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(it->items) - it->next;
  return n > 0 ? n : 0;
}

PyObject* LengthHint(PyObject* self, PyObject*) {
  return PyLong_FromSsize_t(CountLeft(reinterpret_cast<ResumeIterator*>(self)));
}

PyMethodDef methods[] = {
    {"__length_hint__", LengthHint, METH_NOARGS, nullptr},
    {nullptr, nullptr, 0, nullptr},
};

// A dict iterator whose dict changed size is not readable: the next segment sees an opaque
// iterator, and CPython's FOR_ITER raises as it would have.
bool Read(PyObject* obj, guards::RemainingItems* out) {
  if (Py_TYPE(obj) != &ResumeIteratorType) return false;
  auto* it = reinterpret_cast<ResumeIterator*>(obj);
  static PyObject* const empty = PyTuple_New(0);  // immortal enough: never freed
  if (it->exhausted) {
    out->items = empty;
    out->start = 0;
  } else if (PyDict_Check(it->items)) {
    if (it->dict_size != PyDict_GET_SIZE(it->items)) return false;
    PyObject* keys = KeysLeft(it);
    if (keys == nullptr) {
      PyErr_Clear();
      return false;
    }
    out->items = keys;
    out->start = 0;
  } else {
    out->items = it->items;
    out->start = std::min(it->next, PySequence_Fast_GET_SIZE(it->items));
  }
  return true;
}

ResumeIterator* Allocate(PyObject* items) {
  auto* it = PyObject_GC_New(ResumeIterator, &ResumeIteratorType);
  if (it == nullptr) return nullptr;
  it->items = items;
  it->next = 0;
  it->dict_size = -1;
  it->remaining = nullptr;
  it->remaining_at = -1;
  it->exhausted = false;
  return it;
}

}  // namespace

PyObject* NewResumeIterator(PyObject* items) {
  ResumeIterator* it = Allocate(items);
  if (it == nullptr) {
    Py_DECREF(items);
    return nullptr;
  }
  PyObject_GC_Track(it);
  return reinterpret_cast<PyObject*>(it);
}

PyObject* NewLiveResumeIterator(PyObject* container, Py_ssize_t position) {
  ResumeIterator* it = Allocate(Py_NewRef(container));
  if (it == nullptr) {
    Py_DECREF(container);
    return nullptr;
  }
  PyObject_GC_Track(it);
  auto* self = reinterpret_cast<PyObject*>(it);
  if (!PyDict_Check(container)) {
    it->next = position;
    return self;
  }
  it->dict_size = PyDict_GET_SIZE(container);
  for (Py_ssize_t i = 0; i < position; ++i) {
    PyObject* key;
    if (!PyDict_Next(container, &it->next, &key, nullptr)) {
      Py_DECREF(self);
      PyErr_SetString(PyExc_RuntimeError, "dyntrace: a dict iterator's position is past its end");
      return nullptr;
    }
  }
  return self;
}

PyObject* AdvancedResumeIterator(PyObject* iterator, Py_ssize_t n) {
  if (Py_TYPE(iterator) != &ResumeIteratorType) {
    PyErr_SetString(PyExc_RuntimeError, "dyntrace: a loop's iterator changed type across a graph break");
    return nullptr;
  }
  auto* from = reinterpret_cast<ResumeIterator*>(iterator);
  ResumeIterator* it = Allocate(Py_NewRef(from->items));
  if (it == nullptr) {
    Py_DECREF(from->items);
    return nullptr;
  }
  PyObject_GC_Track(it);
  it->next = from->next;
  it->dict_size = from->dict_size;
  it->exhausted = from->exhausted;
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* item = Next(reinterpret_cast<PyObject*>(it));
    if (item == nullptr) {
      Py_DECREF(it);
      if (!PyErr_Occurred()) {
        PyErr_SetString(PyExc_RuntimeError, "dyntrace: a loop's iterator ended before the items its segment used");
      }
      return nullptr;
    }
    Py_DECREF(item);
  }
  return reinterpret_cast<PyObject*>(it);
}

bool InitResumeIterator() {
  ResumeIteratorType.tp_basicsize = sizeof(ResumeIterator);
  ResumeIteratorType.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC;
  ResumeIteratorType.tp_dealloc = Dealloc;
  ResumeIteratorType.tp_traverse = Traverse;
  ResumeIteratorType.tp_iter = PyObject_SelfIter;
  ResumeIteratorType.tp_iternext = Next;
  ResumeIteratorType.tp_methods = methods;
  ResumeIteratorType.tp_doc = "The rest of a loop that crossed a dyntrace graph break.";
  if (PyType_Ready(&ResumeIteratorType) < 0) return false;
  guards::SetIteratorReader(&Read);
  return true;
}

}  // namespace dt::interpreter::py
