// interpreter/side_effects.cc: attribute stores and container changes, made on the real objects.
#include "interpreter/side_effects.h"

#include <Python.h>

#include <vector>

#include "interpreter/py_ref.h"
#include "runtime/autograd_meta.h"

namespace dt::interpreter {

namespace {

using py::PyRef;

// One change to make: an attribute store (`name` set) or new contents for a list or dict.
struct Pending {
  PyRef target;
  PyRef name;
  PyRef value;
  bool dict_item = false;  // target[name] = value (a `global` store), not setattr
  bool append = false;     // a list the trace appended to without knowing its items
};

// Makes dict `target` hold `contents`' items in `contents`' order (keys are constants: str, int
// ...; comparing them runs no user code), with the changes CPython's own
// operations would have made: keys that keep their place keep their entries (a live iterator of
// the caller over the dict goes on as in CPython); from the first key whose place changed
// (popped and inserted again), keys are deleted and inserted again in the new order.
bool ReplaceDictContents(PyObject* target, PyObject* contents) {
  PyRef old_keys = PyRef::Steal(PyDict_Keys(target));
  PyRef new_keys = PyRef::Steal(PyDict_Keys(contents));
  if (!old_keys || !new_keys) return false;
  std::vector<PyObject*> kept;  // borrowed from old_keys
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(old_keys.get()); ++i) {
    PyObject* key = PyList_GET_ITEM(old_keys.get(), i);
    const int present = PyDict_Contains(contents, key);
    if (present < 0) return false;
    if (present == 0 && PyDict_DelItem(target, key) < 0) return false;
    if (present == 1) kept.push_back(key);
  }
  size_t same_place = 0;
  while (same_place < kept.size() && static_cast<Py_ssize_t>(same_place) < PyList_GET_SIZE(new_keys.get())) {
    const int equal = PyObject_RichCompareBool(kept[same_place], PyList_GET_ITEM(new_keys.get(), same_place), Py_EQ);
    if (equal < 0) return false;
    if (equal == 0) break;
    ++same_place;
  }
  for (size_t i = same_place; i < kept.size(); ++i) {
    if (PyDict_DelItem(target, kept[i]) < 0) return false;
  }
  PyObject *key, *value;
  Py_ssize_t pos = 0;
  while (PyDict_Next(contents, &pos, &key, &value)) {
    if (PyDict_SetItem(target, key, value) < 0) return false;
  }
  return true;
}

bool Apply(const Pending& change) {
  PyObject* target = change.target.get();
  if (change.name && change.dict_item) return PyDict_SetItem(target, change.name.get(), change.value.get()) == 0;
  if (change.name) return PyObject_SetAttr(target, change.name.get(), change.value.get()) == 0;
  if (PyList_CheckExact(target) && PyList_CheckExact(change.value.get())) {
    const Py_ssize_t n = PyList_GET_SIZE(target);
    return PyList_SetSlice(target, change.append ? n : 0, n, change.value.get()) == 0;
  }
  if (PyDict_CheckExact(target) && PyDict_CheckExact(change.value.get())) {
    return ReplaceDictContents(target, change.value.get());
  }
  PyErr_SetString(PyExc_RuntimeError, "dyntrace: a list or dict the trace changed has another type now");
  return false;
}

}  // namespace

bool ApplySideEffects(const trace::TraceResult& trace, Builder& builder, const guards::FrameInputs& inputs) {
  std::vector<Pending> pending;
  auto add = [&](const guards::SourceRef& source, const PyRef& name, const trace::OutputSpec& spec,
                 bool dict_item = false, bool append = false) {
    PyRef target = PyRef::Borrow(source->Resolve(inputs));
    PyRef value = PyRef::Steal(builder.Build(spec));
    if (!target || !value) {
      if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "dyntrace: a side effect lost its object");
      return false;
    }
    pending.push_back(Pending{std::move(target), name, std::move(value), dict_item, append});
    return true;
  };
  for (const trace::AttrStore& store : trace.attr_stores) {
    PyRef name = store.name;
    if (store.key_source != nullptr) {
      name = PyRef::Borrow(store.key_source->Resolve(inputs));
      if (!name) {
        PyErr_SetString(PyExc_RuntimeError, "dyntrace: a side effect lost the key of its dict item");
        return false;
      }
    }
    if (!add(store.object, name, store.value, store.dict_item)) return false;
  }
  for (const trace::ContainerStore& store : trace.container_stores) {
    if (!add(store.container, PyRef(), store.contents, false, store.append)) return false;
  }
  for (const Pending& change : pending) {
    if (!Apply(change)) return false;
  }
  if (trace.grad_mode_at_exit.has_value()) SetGradEnabled(*trace.grad_mode_at_exit);
  if (trace.autocast_at_exit.has_value()) ThreadAutocast() = *trace.autocast_at_exit;
  return true;
}

}  // namespace dt::interpreter
