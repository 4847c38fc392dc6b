// interpreter/trace_mutations.cc: changes the traced code makes to the caller's lists and dicts.
//
// A list or dict read from the frame is unpacked into a Sym (each item guarded). When the traced
// code changes it (`xs.append(t)`, `d[k] = v`, `cache.pop(k)`, `self.history.append(h)`), the Sym
// changes as a list the trace built would, so later reads in the trace see the change, and the
// container is recorded: after the graph ran, the real object's contents are set to the Sym's
// final items (ContainerStore), before anything else can see them. CPython's own in-place
// operations would have left the same contents. The one thing contents do not carry is what
// list.sort looks at to raise "list modified during sort", so a list being sorted (a key or
// comparison function changing it) is left to CPython, and guarded not to be (NotSorting).
//
// Two names for one object would leave one Sym stale. Within a trace, a changed container
// reached a second way stops the trace; across calls, a guard says that no other list, dict or
// object the trace read is the changed one (LeafGuard::NotSame), so a call that passes the same
// list twice traces anew. Objects with attribute stores get the same guard. Iterating a dict of
// the caller guards its keys' order (LeafGuard::KeysInOrder).
#include <Python.h>

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "interpreter/tracer_internal.h"

namespace dt::interpreter::trace {

PyObject* Tracer::CallerObject(const Sym& sym) const {
  for (const CallerValue& v : caller_values_) {
    if (v.sym == sym) return v.object;
  }
  return nullptr;
}

absl::Status Tracer::NoteCallerValue(PyObject* obj, const Sym& sym) {
  for (const ChangedContainer& changed : changed_containers_) {
    if (CallerObject(changed.sym) == obj) {
      return Unsupported(absl::StrCat("a ", Py_TYPE(obj)->tp_name,
                                      " the traced code changed, reached a second way"));
    }
  }
  caller_values_.push_back(CallerValue{obj, sym});
  if ((PyList_CheckExact(obj) || PyDict_CheckExact(obj)) && sym->source != nullptr) {
    containers_by_source_.emplace(sym->source->ToString(), sym);
  }
  return absl::OkStatus();
}

absl::Status Tracer::MutatingContainer(const Sym& container) {
  if (container->from_frame) {
    const bool known = std::any_of(changed_containers_.begin(), changed_containers_.end(),
                                   [&](const ChangedContainer& c) { return c.sym == container; });
    if (!known) {
      PyObject* obj = CallerObject(container);
      if (obj == nullptr || container->source == nullptr) {
        return Unsupported(absl::StrCat("changing a ", Describe(container), " of the caller without a source"));
      }
      for (const CallerValue& v : caller_values_) {
        if (v.object == obj && v.sym != container) {
          return Unsupported(absl::StrCat("changing a ", Py_TYPE(obj)->tp_name,
                                          " of the caller reached two ways"));
        }
      }
      // CPython's sort finds out whether a key or comparison function changed the list it sorts
      // from the state each list operation leaves behind, which replaying the final contents
      // does not recreate (append and pop leave an emptied list as it was): such a change is
      // CPython's to make, and an entry that changes the list runs only while no sort is on.
      if (guards::IsBeingSorted(obj)) {
        return Unsupported("changing a list that list.sort is sorting (CPython checks each change)");
      }
      if (PyList_Check(obj)) guards_.Add(LeafGuard::NotSorting(container->source, Here()));
      changed_containers_.push_back(ChangedContainer{container, journal_.size()});
    }
  }
  Mutating(container);
  return absl::OkStatus();
}

absl::Status Tracer::GuardKeyOrder(const Sym& dict) {
  if (!dict->from_frame) return absl::OkStatus();
  PyObject* obj = CallerObject(dict);
  if (obj == nullptr || dict->source == nullptr || !PyDict_CheckExact(obj)) {
    return Unsupported("iterating over a dict of the caller that has no source");
  }
  PyRef keys = PyRef::Steal(PySequence_Tuple(obj));  // str keys only (Wrap): no user code runs
  if (!keys) {
    PyErr_Clear();
    return Unsupported("reading the keys of a dict of the caller failed");
  }
  guards_.Add(LeafGuard::KeysInOrder(dict->source, keys.get(), Here()));
  return absl::OkStatus();
}

void Tracer::ForgetRolledBackChanges() {
  while (!changed_containers_.empty() && changed_containers_.back().journal_at >= snapshot_.journal_size) {
    changed_containers_.pop_back();
  }
}

absl::StatusOr<std::vector<ContainerStore>> Tracer::ContainerStores(std::vector<ValueId>& outputs) {
  std::vector<ContainerStore> stores;
  for (const ChangedContainer& changed : changed_containers_) {
    DT_ASSIGN_OR_RETURN(OutputSpec contents, ContainerOutput(changed.sym, OutputSpec{}, outputs));
    stores.push_back(ContainerStore{changed.sym->source, std::move(contents), changed.sym->kind == SymKind::kRunSeq});
  }
  return stores;
}

void Tracer::GuardChangedUnaliased() {
  std::vector<Sym> changed;
  for (const ChangedContainer& c : changed_containers_) changed.push_back(c.sym);
  for (const Sym& obj : stored_objects_) {
    if (!obj->keys.empty()) changed.push_back(obj);
  }
  for (const Sym& sym : changed) {
    PyObject* obj = CallerObject(sym);
    if (obj == nullptr) continue;
    for (const CallerValue& other : caller_values_) {
      if (other.sym == sym || other.sym->source == nullptr || Py_TYPE(other.object) != Py_TYPE(obj)) continue;
      guards_.Add(LeafGuard::NotSame(sym->source, other.sym->source, Here()));
    }
  }
}

}  // namespace dt::interpreter::trace
