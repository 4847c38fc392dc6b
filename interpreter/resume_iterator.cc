#include "interpreter/resume_iterator.h"

#include "guards/source.h"

namespace dt::interpreter::py {
namespace {

struct ResumeIterator {
  PyObject_HEAD
  PyObject* items;  // strong: a tuple
  Py_ssize_t next;
};

PyTypeObject ResumeIteratorType = {PyVarObject_HEAD_INIT(nullptr, 0) "dyntrace._ResumeIterator"};

void Dealloc(PyObject* self) {
  PyObject_GC_UnTrack(self);
  Py_CLEAR(reinterpret_cast<ResumeIterator*>(self)->items);
  PyObject_GC_Del(self);
}

int Traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(reinterpret_cast<ResumeIterator*>(self)->items);
  return 0;
}

PyObject* Next(PyObject* self) {
  auto* it = reinterpret_cast<ResumeIterator*>(self);
  if (it->next >= PyTuple_GET_SIZE(it->items)) return nullptr;  // exhausted: StopIteration
  return Py_NewRef(PyTuple_GET_ITEM(it->items, it->next++));
}

PyObject* LengthHint(PyObject* self, PyObject*) {
  auto* it = reinterpret_cast<ResumeIterator*>(self);
  return PyLong_FromSsize_t(PyTuple_GET_SIZE(it->items) - it->next);
}

PyMethodDef methods[] = {
    {"__length_hint__", LengthHint, METH_NOARGS, nullptr},
    {nullptr, nullptr, 0, nullptr},
};

bool Read(PyObject* obj, guards::RemainingItems* out) {
  if (Py_TYPE(obj) != &ResumeIteratorType) return false;
  auto* it = reinterpret_cast<ResumeIterator*>(obj);
  out->items = it->items;
  out->start = it->next;
  return true;
}

}  // namespace

PyObject* NewResumeIterator(PyObject* items) {
  auto* it = PyObject_GC_New(ResumeIterator, &ResumeIteratorType);
  if (it == nullptr) {
    Py_DECREF(items);
    return nullptr;
  }
  it->items = items;
  it->next = 0;
  PyObject_GC_Track(it);
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
