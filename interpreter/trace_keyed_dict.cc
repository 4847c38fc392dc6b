// interpreter/trace_keyed_dict.cc: a caller's dict keyed by tensors, read and written one key at
// a time.
//
// An optimizer keeps its state as `self.state[param]` (a defaultdict(dict) keyed by parameter,
// as PyTorch's). Tensors hash by identity, so the trace never unpacks such a dict: each lookup by
// a tensor of the caller (one with a source) is a guard that the key is (or is not) in the dict
// at run time, and a present value is read from `dict[key]` (guards::DictItemByKeySource), as
// any value of the caller is. Keys the traced code adds (`setdefault(p, {})`, a defaultdict's
// missing key) are stored after the graph, with the key read again from its own source.
//
// Known entries are kept on the dict's Sym (`keyed_entries`: one kTuple (key, value) per key,
// `obj` the key object at trace time, a null value when the key is known absent), the writes in
// `keyed_writes`; both are journaled, so a graph break rolls them back with their guards.
#include <Python.h>

#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "interpreter/tracer_internal.h"

namespace dt::interpreter::trace {

namespace {

bool IsDefaultDict(PyObject* obj) {
  return Py_TYPE(obj)->tp_base == &PyDict_Type && std::strcmp(Py_TYPE(obj)->tp_name, "collections.defaultdict") == 0;
}

Sym Entry(PyObject* real_key, const Sym& key, const Sym& value) {
  Sym entry = MakeSym(SymKind::kTuple);
  entry->obj = PyRef::Borrow(real_key);
  entry->items = {key, value};
  return entry;
}

}  // namespace

bool Tracer::IsKeyedCallerDict(const Sym& s) const {
  if (s->kind != SymKind::kObject || s->made_by_trace || s->source == nullptr) return false;
  PyObject* obj = s->obj.get();
  return Py_TYPE(obj) == &PyDict_Type || IsDefaultDict(obj);
}

// The key object at trace time; the key must be a tensor of the caller, so later calls find it
// again at its source.
absl::StatusOr<PyObject*> Tracer::KeyedDictKey(const Sym& key) {
  if (key->kind != SymKind::kTensor) {
    return Unsupported(absl::StrCat("a dict of the caller read by a ", Describe(key),
                                    " key (only tensor keys are followed; str keys need a plain dict)"));
  }
  if (key->source == nullptr || graph_->value(key->value).producer >= 0) {
    return Unsupported("a dict of the caller read by a tensor the compiled code computed");
  }
  PyObject* real = key->source->Resolve(frame_.inputs);
  if (real == nullptr) return Unsupported("a dict key whose tensor cannot be found again");
  return real;
}

absl::StatusOr<std::optional<Sym>> Tracer::KeyedLookup(const Sym& dict, const Sym& key) {
  DT_ASSIGN_OR_RETURN(PyObject* real_key, KeyedDictKey(key));
  if (dict->keyed_entries == nullptr) dict->keyed_entries = MakeSym(SymKind::kList);
  for (const Sym& entry : dict->keyed_entries->items) {
    if (entry->obj.get() != real_key) continue;
    const Sym& known_key = entry->items[0];
    if (known_key != key) guards_.Add(LeafGuard::Same(key->source, known_key->source, Here()));
    if (entry->items[1] == nullptr) return std::nullopt;
    return entry->items[1];
  }
  PyObject* value = PyDict_GetItemWithError(dict->obj.get(), real_key);  // identity hash: no user code
  if (value == nullptr && PyErr_Occurred()) {
    PyErr_Clear();
    return Unsupported("looking up a tensor key raised");
  }
  const bool present = value != nullptr;
  auto holds = std::make_shared<const LeafGuard::RelationFn>(
      [dict_source = dict->source, key_source = key->source](const guards::FrameInputs& frame) -> std::optional<bool> {
        return guards::DictItemByKeySource(dict_source, key_source)->Resolve(frame) != nullptr;
      });
  guards_.Add(LeafGuard::Relation(dict->source, absl::StrCat(key->source->ToString(), " in ", dict->source->ToString()),
                                  present, std::move(holds), Here()));
  Sym wrapped;
  if (present) {
    DT_ASSIGN_OR_RETURN(wrapped, Wrap(value, guards::DictItemByKeySource(dict->source, key->source)));
  }
  Mutating(dict->keyed_entries);
  dict->keyed_entries->items.push_back(Entry(real_key, key, wrapped));
  if (!present) return std::nullopt;
  return wrapped;
}

absl::Status Tracer::KeyedStore(const Sym& dict, const Sym& key, const Sym& value) {
  DT_RETURN_IF_ERROR(KeyedLookup(dict, key).status());  // guards what was there, and makes the entry
  DT_ASSIGN_OR_RETURN(PyObject* real_key, KeyedDictKey(key));
  for (const Sym& entry : dict->keyed_entries->items) {
    if (entry->obj.get() != real_key) continue;
    Mutating(entry);
    entry->items[1] = value;
  }
  if (dict->keyed_writes == nullptr) {
    dict->keyed_writes = MakeSym(SymKind::kList);
    keyed_dicts_.push_back(dict);
  }
  Mutating(dict->keyed_writes);
  for (const Sym& write : dict->keyed_writes->items) {
    if (write->obj.get() == real_key) {
      Mutating(write);
      write->items[1] = value;
      return absl::OkStatus();
    }
    // Two keys the trace holds apart must stay apart, or the second store would land on the first.
    guards_.Add(LeafGuard::NotSame(key->source, write->items[0]->source, Here()));
  }
  dict->keyed_writes->items.push_back(Entry(real_key, key, value));
  return absl::OkStatus();
}

// `d[key]` on a dict, or a defaultdict whose factory is dict or list (a missing key then gets a
// new empty one, stored).
absl::StatusOr<Sym> Tracer::KeyedSubscript(const Sym& dict, const Sym& key) {
  DT_ASSIGN_OR_RETURN(std::optional<Sym> found, KeyedLookup(dict, key));
  if (found.has_value()) return *found;
  PyObject* obj = dict->obj.get();
  if (!IsDefaultDict(obj)) return Raises("the traced code raises KeyError: a tensor key not in the dict");
  PyRef factory = PyRef::Steal(PyObject_GetAttrString(obj, "default_factory"));
  if (!factory) {
    PyErr_Clear();
    return Unsupported("reading a defaultdict's default_factory failed");
  }
  const bool makes_dict = factory.get() == reinterpret_cast<PyObject*>(&PyDict_Type);
  if (!makes_dict && factory.get() != reinterpret_cast<PyObject*>(&PyList_Type)) {
    return Unsupported("a defaultdict whose default_factory is not dict or list, missing a tensor key");
  }
  auto same_factory = std::make_shared<const LeafGuard::RelationFn>(
      [source = dict->source, expected = factory.get()](const guards::FrameInputs& frame) -> std::optional<bool> {
        PyObject* d = source->Resolve(frame);
        if (d == nullptr || !IsDefaultDict(d)) return false;
        PyObject* now = PyObject_GetAttrString(d, "default_factory");  // a member: no user code
        if (now == nullptr) PyErr_Clear();
        Py_XDECREF(now);
        return now == expected;
      });
  guards_.Add(LeafGuard::Relation(dict->source, absl::StrCat(dict->source->ToString(), ".default_factory is ",
                                                             makes_dict ? "dict" : "list"),
                                  true, std::move(same_factory), Here()));
  Sym fresh = MakeSym(makes_dict ? SymKind::kDict : SymKind::kList);
  DT_RETURN_IF_ERROR(KeyedStore(dict, key, fresh));
  return fresh;
}

absl::StatusOr<Sym> Tracer::CallKeyedDictMethod(const Sym& dict, const std::string& name, const std::vector<Sym>& args,
                                                const Kwargs& kwargs) {
  if (!kwargs.empty() || args.empty() || args.size() > 2) {
    return Unsupported(absl::StrCat("dict.", name, "() of a tensor-keyed dict with these arguments"));
  }
  DT_ASSIGN_OR_RETURN(std::optional<Sym> found, KeyedLookup(dict, args[0]));
  if (found.has_value()) return *found;
  const Sym fallback = args.size() == 2 ? args[1] : ConstSym(PyRef::Borrow(Py_None));
  if (name == "setdefault") DT_RETURN_IF_ERROR(KeyedStore(dict, args[0], fallback));
  return fallback;
}

// The stores after the graph: `dict[key] = value`, the key read again from its source.
absl::Status Tracer::AppendKeyedStores(std::vector<AttrStore>& stores, std::vector<ValueId>& outputs) {
  for (const Sym& dict : keyed_dicts_) {
    for (const Sym& write : dict->keyed_writes->items) {
      DT_ASSIGN_OR_RETURN(OutputSpec value, ToOutput(write->items[1], outputs));
      stores.push_back(AttrStore{dict->source, PyRef(), std::move(value), /*dict_item=*/true, write->items[0]->source});
    }
  }
  return absl::OkStatus();
}

}  // namespace dt::interpreter::trace
