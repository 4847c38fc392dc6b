// interpreter/trace_sets.cc: sets the traced code makes: `{a, b}`, set(), comprehensions,
// add/discard/remove/pop/update/clear, `in`, len, comparisons, | & - ^, and iteration.
//
// A set's iteration order is its hash table's order, which depends on every operation that made
// it (a discard leaves a dummy a later add may reuse; set(other) copies other's table). So a kSet
// Sym keeps its history of steps (py_types.h ReplaySet) in `keys`, not its elements: whenever the
// trace needs the elements (iteration, `in`, len) it replays that history on a real set, with
// CPython's own set operations, and a set that leaves the trace is rebuilt the same way, so its
// order is CPython's now and after whatever the caller adds. Elements are constants whose hash
// and equality run no user code (numbers, strings, tuples of them; strings hash the same within
// the process, which is where the trace is used). A set of tensors (ordered by address) breaks.
#include <Python.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "interpreter/py_str.h"
#include "interpreter/py_types.h"
#include "interpreter/tracer_internal.h"

namespace dt::interpreter::trace {
namespace {

PyRef StepOf(int kind, PyObject* a = nullptr) {
  return PyRef::Steal(a == nullptr ? Py_BuildValue("(i)", kind) : Py_BuildValue("(iO)", kind, a));
}

// The history as a tuple, for ReplaySet and for an OutputSpec.
PyRef HistoryOf(const SymValue& set) {
  PyRef t = PyRef::Steal(PyTuple_New(static_cast<Py_ssize_t>(set.keys.size())));
  for (size_t i = 0; t && i < set.keys.size(); ++i) {
    PyTuple_SET_ITEM(t.get(), static_cast<Py_ssize_t>(i), Py_NewRef(set.keys[i].get()));
  }
  return t;
}

// What stands for `s` as an operand whose table matters: a set's history, or a frozenset
// constant itself (its table is the one it has). Null when `s` is neither.
PyRef OperandHistory(const Sym& s) {
  if (s->kind == SymKind::kSet) return HistoryOf(*s);
  if (s->kind == SymKind::kConst && PyFrozenSet_CheckExact(s->obj.get())) return s->obj;
  return PyRef();
}

}  // namespace

absl::StatusOr<PyRef> Tracer::SetValue(const Sym& set) {
  PyRef history = HistoryOf(*set);
  PyRef value = history ? PyRef::Steal(py::ReplaySet(history.get())) : PyRef();
  if (!value) {
    PyErr_Clear();
    return Unsupported("rebuilding a set from its history");
  }
  return value;
}

absl::StatusOr<PyRef> Tracer::SetElement(const Sym& item) {
  if (item->kind == SymKind::kTensor) return Unsupported("a set of tensors (a tensor hashes by its address)");
  DT_ASSIGN_OR_RETURN(PyRef x, ConstValue(item));
  if (!IsPureConstType(x.get())) return Unsupported(absl::StrCat("a set element ", ShortRepr(x.get())));
  if (PyObject_Hash(x.get()) == -1) {
    PyErr_Clear();
    return Raises(absl::StrCat("the traced code raises TypeError: unhashable type: '", Py_TYPE(x.get())->tp_name, "'"));
  }
  return x;
}

absl::Status Tracer::AppendSetStep(const Sym& set, PyRef step) {
  if (!step) {
    PyErr_Clear();
    return Unsupported("recording a set step");
  }
  Mutating(set);
  set->keys.push_back(std::move(step));
  return absl::OkStatus();
}

absl::StatusOr<Sym> Tracer::NewSet(const std::vector<Sym>& items) {
  Sym set = MakeSym(SymKind::kSet);
  for (const Sym& item : items) {
    DT_ASSIGN_OR_RETURN(PyRef x, SetElement(item));
    set->keys.push_back(StepOf(py::kSetAdd, x.get()));
  }
  return set;
}

absl::Status Tracer::UpdateSet(const Sym& set, const Sym& iterable) {
  if (PyRef other = OperandHistory(iterable)) return AppendSetStep(set, StepOf(py::kSetUpdate, other.get()));
  if (iterable->kind == SymKind::kDict || iterable->kind == SymKind::kConst) {
    // set.update(dict) sizes the table first; a constant (a str, a range) is fine item by item.
    if (iterable->kind == SymKind::kDict || PyDict_Check(iterable->obj.get()) || PyAnySet_Check(iterable->obj.get())) {
      return Unsupported("a set updated from a dict or another kind of set");
    }
  }
  DT_ASSIGN_OR_RETURN(std::vector<Sym> items, Iterate(iterable));
  for (const Sym& item : items) {
    DT_ASSIGN_OR_RETURN(PyRef x, SetElement(item));
    DT_RETURN_IF_ERROR(AppendSetStep(set, StepOf(py::kSetAdd, x.get())));
  }
  return absl::OkStatus();
}

absl::StatusOr<Sym> Tracer::BuiltinSet(const std::vector<Sym>& args, const Kwargs& kwargs) {
  if (!kwargs.empty() || args.size() > 1) return Raises("the traced code raises TypeError: set() arguments");
  Sym set = MakeSym(SymKind::kSet);
  if (!args.empty()) DT_RETURN_IF_ERROR(UpdateSet(set, args[0]));
  return set;
}

// frozenset(x): a constant, made by CPython from the replayed set (its table merged, as
// frozenset(a_set) does) or from the iterable's items one by one (as from a list).
absl::StatusOr<Sym> Tracer::BuiltinFrozenset(const std::vector<Sym>& args, const Kwargs& kwargs) {
  if (!kwargs.empty() || args.size() > 1) return Raises("the traced code raises TypeError: frozenset() arguments");
  PyRef source;
  if (args.empty()) {
    source = PyRef::Steal(PyTuple_New(0));
  } else if (PyRef history = OperandHistory(args[0])) {
    source = PyRef::Steal(py::ReplaySet(history.get()));
  } else {
    if (args[0]->kind == SymKind::kDict) return Unsupported("frozenset() of a dict");
    DT_ASSIGN_OR_RETURN(std::vector<Sym> items, Iterate(args[0]));
    source = PyRef::Steal(PyList_New(0));
    for (const Sym& item : items) {
      DT_ASSIGN_OR_RETURN(PyRef x, SetElement(item));
      if (source && PyList_Append(source.get(), x.get()) < 0) source = PyRef();
    }
  }
  PyRef r = source ? PyRef::Steal(PyFrozenSet_New(source.get())) : PyRef();
  if (!r) {
    PyErr_Clear();
    return Unsupported("frozenset()");
  }
  return ConstSym(std::move(r));
}

absl::Status Tracer::DoBuildSet(TFrame& f, const Instr& in) {
  DT_RETURN_IF_ERROR(f.Need(in.arg, in));
  std::vector<Sym> items(f.stack.end() - in.arg, f.stack.end());
  DT_ASSIGN_OR_RETURN(Sym set, NewSet(items));
  f.stack.resize(f.stack.size() - in.arg);
  f.stack.push_back(std::move(set));
  return absl::OkStatus();
}

// SET_ADD (a comprehension) and SET_UPDATE (`{*a, *b}`): the set stays `arg` slots down.
absl::Status Tracer::DoSetAddOrUpdate(TFrame& f, const Instr& in) {
  DT_RETURN_IF_ERROR(f.Need(in.arg + 1, in));
  const Sym& set = f.stack[f.stack.size() - 1 - in.arg];
  if (set->kind != SymKind::kSet) return Unsupported(absl::StrCat(in.opname, " on a ", Describe(set)));
  if (in.op == Op::kSetUpdate) {
    DT_RETURN_IF_ERROR(UpdateSet(set, f.stack.back()));
  } else {
    DT_ASSIGN_OR_RETURN(PyRef x, SetElement(f.stack.back()));
    DT_RETURN_IF_ERROR(AppendSetStep(set, StepOf(py::kSetAdd, x.get())));
  }
  f.Pop();
  return absl::OkStatus();
}

// Before each step of a loop over a set: CPython's set iterator raises once the set's size
// differs from its size when the loop began; changed at the same size, it follows the table.
absl::Status Tracer::CheckSetUnchanged(const Sym& it) {
  const Sym& set = it->iterated_set;
  if (set->keys.size() == it->keys_at_start.size() &&
      std::equal(set->keys.begin(), set->keys.end(), it->keys_at_start.begin(),
                 [](const PyRef& a, const PyRef& b) { return a.get() == b.get(); })) {
    return absl::OkStatus();
  }
  DT_ASSIGN_OR_RETURN(PyRef now, SetValue(set));
  PyRef history = PyRef::Steal(PyTuple_New(static_cast<Py_ssize_t>(it->keys_at_start.size())));
  for (size_t i = 0; history && i < it->keys_at_start.size(); ++i) {
    PyTuple_SET_ITEM(history.get(), static_cast<Py_ssize_t>(i), Py_NewRef(it->keys_at_start[i].get()));
  }
  PyRef then = history ? PyRef::Steal(py::ReplaySet(history.get())) : PyRef();
  if (!then) {
    PyErr_Clear();
    return Unsupported("rebuilding a set from its history");
  }
  if (PySet_GET_SIZE(now.get()) != PySet_GET_SIZE(then.get())) {
    return Raises("the traced code raises RuntimeError: Set changed size during iteration");
  }
  return Unsupported("a set changed (at the same size) while a loop iterates it");
}

absl::StatusOr<std::vector<Sym>> Tracer::SetItems(const Sym& set) {
  DT_ASSIGN_OR_RETURN(PyRef value, SetValue(set));
  std::vector<Sym> items;
  PyRef it = PyRef::Steal(PyObject_GetIter(value.get()));
  while (PyObject* x = it ? PyIter_Next(it.get()) : nullptr) items.push_back(ConstSym(PyRef::Steal(x)));
  PyErr_Clear();
  return items;
}

absl::StatusOr<bool> Tracer::SetContains(const Sym& set, const Sym& item) {
  DT_ASSIGN_OR_RETURN(PyRef x, SetElement(item));
  DT_ASSIGN_OR_RETURN(PyRef value, SetValue(set));
  return PySet_Contains(value.get(), x.get()) == 1;
}

// set.<name>(...) on a set the trace made.
absl::StatusOr<Sym> Tracer::CallSetMethod(const Sym& self, const std::string& name, const std::vector<Sym>& args,
                                          const Kwargs& kwargs) {
  if (!kwargs.empty()) return Raises(absl::StrCat("the traced code raises TypeError: set.", name, "() takes no keyword arguments"));
  const Sym none = ConstSym(PyRef::Borrow(Py_None));
  if ((name == "add" || name == "discard" || name == "remove") && args.size() == 1) {
    DT_ASSIGN_OR_RETURN(PyRef x, SetElement(args[0]));
    if (name == "remove") {
      DT_ASSIGN_OR_RETURN(const bool found, SetContains(self, args[0]));
      if (!found) return Raises("the traced code raises KeyError in set.remove()");
    }
    DT_RETURN_IF_ERROR(AppendSetStep(self, StepOf(name == "add" ? py::kSetAdd : py::kSetDiscard, x.get())));
    return none;
  }
  if (name == "pop" && args.empty()) {
    // Which element pop() takes depends on the table (and on earlier pops): the replayed set's.
    DT_ASSIGN_OR_RETURN(PyRef value, SetValue(self));
    if (PySet_GET_SIZE(value.get()) == 0) return Raises("the traced code raises KeyError: 'pop from an empty set'");
    PyRef popped = PyRef::Steal(PySet_Pop(value.get()));
    DT_RETURN_IF_ERROR(AppendSetStep(self, StepOf(py::kSetPop)));
    return ConstSym(std::move(popped));
  }
  if (name == "update" || name == "union") {
    Sym target = self;
    if (name == "union") {  // a copy of self (its table copied), then each argument merged in
      target = MakeSym(SymKind::kSet);
      target->keys.push_back(StepOf(py::kSetUpdate, HistoryOf(*self).get()));
    }
    for (const Sym& a : args) DT_RETURN_IF_ERROR(UpdateSet(target, a));
    return name == "union" ? target : none;
  }
  if (name == "clear" && args.empty()) {
    Mutating(self);
    self->keys.clear();  // CPython gives a cleared set a fresh table
    return none;
  }
  if (name == "copy" && args.empty()) {
    Sym copy = MakeSym(SymKind::kSet);
    copy->keys.push_back(StepOf(py::kSetUpdate, HistoryOf(*self).get()));
    return copy;
  }
  if ((name == "issubset" || name == "issuperset" || name == "isdisjoint") && args.size() == 1) {
    DT_ASSIGN_OR_RETURN(PyRef value, SetValue(self));
    DT_ASSIGN_OR_RETURN(PyRef other, SetOperandValue(args[0]));
    // One argument, never unpacked: PyObject_CallMethod's "O" would spread a tuple operand
    // ({"a"}.isdisjoint(("a",)) asked isdisjoint("a")).
    PyRef method = PyRef::Steal(py::FromUtf8(name));
    PyRef r = method ? PyRef::Steal(PyObject_CallMethodOneArg(value.get(), method.get(), other.get())) : PyRef();
    if (!r) {
      PyErr_Clear();
      return Raises(absl::StrCat("the traced code raises in set.", name, "()"));
    }
    return ConstSym(std::move(r));
  }
  return Unsupported(absl::StrCat("set.", name, "() here"));
}

// A value to compare a set with, or to pass to one of its methods: a set replayed, or a constant.
absl::StatusOr<PyRef> Tracer::SetOperandValue(const Sym& s) {
  if (s->kind == SymKind::kSet) return SetValue(s);
  DT_ASSIGN_OR_RETURN(PyRef v, ConstValue(s));
  if (!IsPureConstType(v.get())) return Unsupported(absl::StrCat("a set operation with a ", Describe(s)));
  return v;
}

absl::StatusOr<Sym> Tracer::SetCompare(int op, const Sym& a, const Sym& b) {
  DT_ASSIGN_OR_RETURN(PyRef x, SetOperandValue(a));
  DT_ASSIGN_OR_RETURN(PyRef y, SetOperandValue(b));
  PyRef r = PyRef::Steal(PyObject_RichCompare(x.get(), y.get(), op));
  if (!r) {
    PyErr_Clear();
    return Raises("the traced code raises TypeError comparing a set");
  }
  return ConstSym(std::move(r));
}

// | & - ^ with a set the trace made; |= changes it in place.
absl::StatusOr<Sym> Tracer::SetBinaryOp(const std::string& nb_name, const Sym& a, const Sym& b) {
  static const auto* codes = new absl::flat_hash_map<std::string, int>{
      {"|", py::kSetOr}, {"&", py::kSetAnd}, {"-", py::kSetSub}, {"^", py::kSetXor}};
  const bool inplace = nb_name.size() == 2 && nb_name.back() == '=';
  auto code = codes->find(inplace ? nb_name.substr(0, 1) : nb_name);
  PyRef ha = OperandHistory(a), hb = OperandHistory(b);
  if (code == codes->end() || !ha || !hb) {
    if (a->kind == SymKind::kTensor || b->kind == SymKind::kTensor) return Unsupported("a set with a tensor operand");
    return Raises(absl::StrCat("the traced code raises TypeError: unsupported operand type(s) for ", nb_name));
  }
  if (inplace && a->kind == SymKind::kSet) {
    if (code->second != py::kSetOr) return Unsupported(absl::StrCat("set ", nb_name));
    DT_RETURN_IF_ERROR(AppendSetStep(a, StepOf(py::kSetUpdate, hb.get())));
    return a;
  }
  if (a->kind != SymKind::kSet) {  // frozenset op set: a frozenset, a constant
    DT_ASSIGN_OR_RETURN(PyRef y, SetValue(b));
    PyObject* (*apply)(PyObject*, PyObject*) = code->second == py::kSetAnd   ? PyNumber_And
                                               : code->second == py::kSetSub ? PyNumber_Subtract
                                               : code->second == py::kSetXor ? PyNumber_Xor
                                                                             : PyNumber_Or;
    PyRef r = PyRef::Steal(apply(a->obj.get(), y.get()));
    if (!r) {
      PyErr_Clear();
      return Unsupported("a frozenset operation");
    }
    return ConstSym(std::move(r));
  }
  Sym set = MakeSym(SymKind::kSet);
  PyRef code_obj = PyRef::Steal(PyLong_FromLong(code->second));
  set->keys.push_back(PyRef::Steal(Py_BuildValue("(iOOO)", py::kSetFrom, code_obj.get(), ha.get(), hb.get())));
  return set;
}

namespace {

// A keys view's keys as a tuple (its dict's order), or null.
PyRef KeysTuple(const SymValue& view) {
  PyRef t = PyRef::Steal(PyTuple_New(static_cast<Py_ssize_t>(view.items.size())));
  for (size_t i = 0; t && i < view.items.size(); ++i) {
    PyTuple_SET_ITEM(t.get(), static_cast<Py_ssize_t>(i), Py_NewRef(view.items[i]->obj.get()));
  }
  return t;
}

// A dict of `keys` (values None), inserted in order; null with an error set.
PyRef KeysDict(PyObject* keys) {
  PyRef d = PyRef::Steal(PyDict_New());
  for (Py_ssize_t i = 0; d && i < PyTuple_GET_SIZE(keys); ++i) {
    if (PyDict_SetItem(d.get(), PyTuple_GET_ITEM(keys, i), Py_None) < 0) return PyRef();
  }
  return d;
}

}  // namespace

// `a.keys() op b.keys()` (& | -) and `a.keys() - s` for a set s: a new set, built by the steps
// CPython 3.11/3.12's dictobject.c takes, so that its table is CPython's. `&`
// (_PyDictView_Intersect) adds, in order, the keys of the smaller view (the right one on a tie)
// that the other holds; `|` and `-` start from set(dict) (dictviews_to_set: a table presized
// for the dict) and then update() or difference_update() with the right operand. Other
// operands (^, items views, a set on the right of & or |, a view on the right) stop the trace.
absl::StatusOr<Sym> Tracer::KeysViewBinaryOp(const std::string& nb_name, const Sym& a, const Sym& b) {
  const auto is_keys = [](const Sym& s) { return s->kind == SymKind::kIter && s->keys_view; };
  const bool set_right = b->kind == SymKind::kSet || OperandHistory(b);
  if (!is_keys(a) || !(is_keys(b) || (nb_name == "-" && set_right)) ||
      (nb_name != "&" && nb_name != "|" && nb_name != "-")) {
    return Unsupported(absl::StrCat("operator ", nb_name, " between a ", Describe(a), " and a ", Describe(b)));
  }
  for (const Sym& view : {a, b}) {
    if (!is_keys(view)) continue;
    for (const Sym& key : view->items) {
      if (key->kind != SymKind::kConst) return Unsupported("a keys view with a key that is not a constant");
    }
  }
  Sym set = MakeSym(SymKind::kSet);
  if (nb_name == "&") {
    const bool swap = b->items.size() > a->items.size();
    const Sym& iterated = swap ? a : b;
    const Sym& probed = swap ? b : a;
    PyRef probe = PyRef::Steal(PyDict_New());
    for (const Sym& key : probed->items) {
      if (!probe || PyDict_SetItem(probe.get(), key->obj.get(), Py_None) < 0) {
        PyErr_Clear();
        return Unsupported("hashing a dict view's keys");
      }
    }
    for (const Sym& key : iterated->items) {
      const int found = PyDict_Contains(probe.get(), key->obj.get());
      if (found < 0) {
        PyErr_Clear();
        return Unsupported("hashing a dict view's keys");
      }
      if (found == 1) set->keys.push_back(StepOf(py::kSetAdd, key->obj.get()));
    }
    return set;
  }
  PyRef left_keys = KeysTuple(*a);
  PyRef left = left_keys ? KeysDict(left_keys.get()) : PyRef();
  PyRef right;
  if (is_keys(b)) {
    right = KeysTuple(*b);
  } else {
    DT_ASSIGN_OR_RETURN(PyRef other, SetOperandValue(b));
    right = PyRef::Steal(PySequence_Tuple(other.get()));
  }
  if (!left || !right) {
    PyErr_Clear();
    return Unsupported("hashing a dict view's keys");
  }
  set->keys.push_back(StepOf(py::kSetUpdateWith, left.get()));
  set->keys.push_back(StepOf(nb_name == "|" ? py::kSetUpdateWith : py::kSetDifferenceUpdateWith, right.get()));
  return set;
}

}  // namespace dt::interpreter::trace
