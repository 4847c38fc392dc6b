// interpreter/trace_functional.cc: map, filter, sorted(key=), functools.reduce and the itertools
// the tracer follows on symbolic values.
//
// Each takes the items of its iterables now (an iterator the trace holds is consumed, as CPython's
// would be) and gives an iterator over the results, or the folded value. CPython's map and filter
// are lazy: they call the function as the consumer asks. Calling it ahead of the consumer keeps
// the program's meaning only when the calls have no effects the consumer could observe, so a
// function that changes containers or tensors in place is left to CPython (as for generators).
#include <Python.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "interpreter/tracer_internal.h"

namespace dt::interpreter::trace {

PyObject* ModuleAttr(const char* module, const char* name) {
  PyObject* modules = PyImport_GetModuleDict();
  PyObject* m = modules != nullptr ? PyDict_GetItemString(modules, module) : nullptr;
  if (m == nullptr) return nullptr;
  PyObject* attr = PyObject_GetAttrString(m, name);
  if (attr == nullptr) {
    PyErr_Clear();
    return nullptr;
  }
  Py_DECREF(attr);  // the module keeps it alive
  return attr;
}

namespace {

bool Is(PyObject* fn, const char* module, const char* name) {
  PyObject* attr = ModuleAttr(module, name);
  return attr != nullptr && fn == attr;
}

Sym IterOver(std::vector<Sym> items) {
  Sym it = MakeSym(SymKind::kIter);
  it->items = std::move(items);
  return it;
}

std::optional<long long> ConstInt(const Sym& s) {
  if (s->kind != SymKind::kConst || !PyLong_CheckExact(s->obj.get())) return std::nullopt;
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(s->obj.get(), &overflow);
  if (overflow != 0) return std::nullopt;
  return v;
}

}  // namespace

absl::StatusOr<std::vector<Sym>> Tracer::Consume(const Sym& iterable) {
  if (iterable->kind == SymKind::kIter && iterable->over != nullptr) {  // iter(list): read live, used up
    std::vector<Sym> rest;
    while (true) {
      DT_ASSIGN_OR_RETURN(Sym item, NextItem(iterable));
      if (item == nullptr) return rest;
      rest.push_back(std::move(item));
    }
  }
  DT_ASSIGN_OR_RETURN(std::vector<Sym> items, Iterate(iterable));
  if (iterable->kind == SymKind::kIter && !iterable->dict_view) {  // a view is iterated afresh
    Mutating(iterable);
    iterable->items.clear();
  }
  return items;
}

absl::StatusOr<Sym> Tracer::CallWithoutEffects(const Sym& fn, std::vector<Sym> args) {
  const size_t journal_before = journal_.size();
  const size_t nodes_before = graph_->nodes().size();
  DT_ASSIGN_OR_RETURN(Sym result, CallSym(fn, std::move(args), {}));
  bool effects = false;
  for (size_t i = nodes_before; i < graph_->nodes().size(); ++i) effects |= graph_->nodes()[i].inplace;
  for (size_t i = journal_before; i < journal_.size(); ++i) effects |= journal_[i].sym->kind != SymKind::kIter;
  if (effects) return Unsupported("a function with effects, called ahead of its consumer, could reorder them");
  return result;
}

// map(fn, *iterables): stops at the shortest, like zip.
absl::StatusOr<Sym> Tracer::BuiltinMap(const std::vector<Sym>& args) {
  if (args.size() < 2) return Raises("the traced code raises: map() must have at least two arguments");
  std::vector<std::vector<Sym>> seqs;
  for (size_t i = 1; i < args.size(); ++i) {
    DT_ASSIGN_OR_RETURN(std::vector<Sym> items, Consume(args[i]));
    seqs.push_back(std::move(items));
  }
  size_t n = seqs[0].size();
  for (const auto& s : seqs) n = std::min(n, s.size());
  std::vector<Sym> results;
  for (size_t k = 0; k < n; ++k) {
    std::vector<Sym> call_args;
    for (const auto& s : seqs) call_args.push_back(s[k]);
    DT_ASSIGN_OR_RETURN(Sym r, CallWithoutEffects(args[0], std::move(call_args)));
    results.push_back(r);
  }
  return IterOver(std::move(results));
}

// filter(fn or None, iterable): the items whose fn(item) (or item) is true, decided now.
absl::StatusOr<Sym> Tracer::BuiltinFilter(const std::vector<Sym>& args) {
  if (args.size() != 2) return Raises("the traced code raises: filter expected 2 arguments");
  DT_ASSIGN_OR_RETURN(std::vector<Sym> items, Consume(args[1]));
  const bool identity = args[0]->kind == SymKind::kConst && args[0]->obj.get() == Py_None;
  std::vector<Sym> kept;
  for (const Sym& item : items) {
    Sym test = item;
    if (!identity) {
      DT_ASSIGN_OR_RETURN(test, CallWithoutEffects(args[0], {item}));
    }
    DT_ASSIGN_OR_RETURN(const bool keep, Truth(test));
    if (keep) kept.push_back(item);
  }
  return IterOver(std::move(kept));
}

// sorted(iterable, key=fn, reverse=b): the keys are computed by the trace and must be constants;
// CPython's own sorted() orders their positions, so ties keep their order as in CPython.
absl::StatusOr<Sym> Tracer::SortedWithKey(const std::vector<Sym>& args, const Kwargs& kwargs) {
  if (args.size() != 1) return Raises("the traced code raises: sorted expected 1 argument");
  Sym key_fn;
  Sym reverse = ConstSym(PyRef::Borrow(Py_False));
  for (const auto& [k, v] : kwargs) {
    if (k == "key") key_fn = v;
    else if (k == "reverse") reverse = v;
    else return Raises(absl::StrCat("the traced code raises: sorted() got an unexpected keyword ", k));
  }
  DT_ASSIGN_OR_RETURN(std::vector<Sym> items, Consume(args[0]));
  PyRef keys = PyRef::Steal(PyList_New(0));
  for (const Sym& item : items) {
    Sym key = item;
    if (key_fn != nullptr && !(key_fn->kind == SymKind::kConst && key_fn->obj.get() == Py_None)) {
      DT_ASSIGN_OR_RETURN(key, CallWithoutEffects(key_fn, {item}));
    }
    DT_ASSIGN_OR_RETURN(PyRef k, ConstValue(key));
    if (!IsPureConstType(k.get())) return Unsupported(absl::StrCat("sorting by keys of type ", Py_TYPE(k.get())->tp_name));
    if (PyList_Append(keys.get(), k.get()) < 0) {
      PyErr_Clear();
      return Unsupported("building sort keys failed");
    }
  }
  DT_ASSIGN_OR_RETURN(PyRef reverse_obj, ConstValue(reverse));
  // sorted(range(n), key=keys.__getitem__, reverse=...): the order CPython's sort gives the keys.
  PyRef positions = PyRef::Steal(PyObject_CallFunction(reinterpret_cast<PyObject*>(&PyRange_Type), "n",
                                                       static_cast<Py_ssize_t>(items.size())));
  PyRef getitem = PyRef::Steal(PyObject_GetAttrString(keys.get(), "__getitem__"));
  PyObject* sorted_fn = PyDict_GetItemString(frame_.inputs.builtins, "sorted");
  PyRef kw = PyRef::Steal(Py_BuildValue("{sOsO}", "key", getitem.get(), "reverse", reverse_obj.get()));
  PyRef call_args = PyRef::Steal(PyTuple_Pack(1, positions.get()));
  PyRef order = sorted_fn != nullptr && kw && call_args ? PyRef::Steal(PyObject_Call(sorted_fn, call_args.get(), kw.get()))
                                                        : PyRef();
  if (!order) {
    PyErr_Clear();
    return Raises("the traced code raises in sorted()");  // keys that do not compare, ...
  }
  Sym result = MakeSym(SymKind::kList);
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(order.get()); ++i) {
    result->items.push_back(items[PyLong_AsSize_t(PyList_GET_ITEM(order.get(), i))]);
  }
  return result;
}

// list.sort(key=, reverse=): sorted()'s order, written into the list.
absl::StatusOr<Sym> Tracer::ListSort(const Sym& list, const std::vector<Sym>& args, const Kwargs& kwargs) {
  if (!args.empty()) return Raises("the traced code raises TypeError: sort() takes no positional arguments");
  DT_ASSIGN_OR_RETURN(Sym sorted, SortedWithKey({list}, kwargs));
  DT_RETURN_IF_ERROR(MutatingContainer(list));
  list->items = sorted->items;
  return ConstSym(PyRef::Borrow(Py_None));
}

// list.remove(x): the first item that is x, or equal to it. CPython compares item by item
// (`item is x or item == x`); an item whose == the trace cannot decide (a tensor's is a tensor)
// before the match leaves the call to CPython.
absl::StatusOr<Sym> Tracer::ListRemove(const Sym& list, const std::vector<Sym>& args) {
  if (args.size() != 1) return Raises("the traced code raises TypeError: list.remove() takes exactly one argument");
  const Sym& x = args[0];
  for (size_t i = 0; i < list->items.size(); ++i) {
    const Sym& item = list->items[i];
    bool equal = item == x;
    if (!equal) {
      if (item->kind != SymKind::kConst || x->kind != SymKind::kConst || !IsPureConstType(item->obj.get()) ||
          !IsPureConstType(x->obj.get())) {
        return Unsupported(absl::StrCat("list.remove() comparing a ", Describe(item), " with a ", Describe(x)));
      }
      const int r = PyObject_RichCompareBool(item->obj.get(), x->obj.get(), Py_EQ);
      if (r < 0) {
        PyErr_Clear();
        return Raises("the traced code raises in list.remove()");
      }
      equal = r == 1;
    }
    if (equal) {
      DT_RETURN_IF_ERROR(MutatingContainer(list));
      list->items.erase(list->items.begin() + i);
      return ConstSym(PyRef::Borrow(Py_None));
    }
  }
  return Raises("the traced code raises ValueError: list.remove(x): x not in list");
}

// functools.reduce(fn, iterable[, initial]), folded left as CPython does.
absl::StatusOr<Sym> Tracer::FunctoolsReduce(const std::vector<Sym>& args) {
  if (args.size() < 2 || args.size() > 3) return Raises("the traced code raises: reduce() arguments");
  DT_ASSIGN_OR_RETURN(std::vector<Sym> items, Consume(args[1]));
  size_t next = 0;
  Sym acc = args.size() == 3 ? args[2] : nullptr;
  if (acc == nullptr) {
    if (items.empty()) return Raises("the traced code raises TypeError: reduce() of empty iterable with no initial value");
    acc = items[next++];
  }
  for (; next < items.size(); ++next) {
    DT_ASSIGN_OR_RETURN(acc, CallSym(args[0], {acc, items[next]}, {}));
  }
  return acc;
}

// itertools.chain, islice, repeat, accumulate (+ or a function) and product, unrolled.
absl::StatusOr<Sym> Tracer::CallItertools(PyObject* fn, const std::vector<Sym>& args, const Kwargs& kwargs) {
  if (Is(fn, "itertools", "chain") && kwargs.empty()) {
    std::vector<Sym> all;
    for (const Sym& a : args) {
      DT_ASSIGN_OR_RETURN(std::vector<Sym> items, Consume(a));
      all.insert(all.end(), items.begin(), items.end());
    }
    return IterOver(std::move(all));
  }
  if (Is(fn, "itertools", "pairwise") && args.size() == 1 && kwargs.empty()) {
    DT_ASSIGN_OR_RETURN(std::vector<Sym> items, Consume(args[0]));
    std::vector<Sym> pairs;
    for (size_t i = 0; i + 1 < items.size(); ++i) {
      Sym pair = MakeSym(SymKind::kTuple);
      pair->items = {items[i], items[i + 1]};
      pairs.push_back(pair);
    }
    return IterOver(std::move(pairs));
  }
  if (Is(fn, "itertools", "repeat") && args.size() == 2 && kwargs.empty()) {
    const std::optional<long long> n = ConstInt(args[1]);
    if (!n) return Unsupported("itertools.repeat() with a count that is not a constant int");
    if (*n > 10000) return LimitReached("itertools.repeat() of more than 10000 items");
    return IterOver(std::vector<Sym>(std::max(0LL, *n), args[0]));
  }
  if (Is(fn, "itertools", "islice") && (args.size() == 2 || args.size() == 3 || args.size() == 4) && kwargs.empty()) {
    std::vector<std::optional<long long>> bounds;
    for (size_t i = 1; i < args.size(); ++i) {
      const bool none = args[i]->kind == SymKind::kConst && args[i]->obj.get() == Py_None;
      const std::optional<long long> v = ConstInt(args[i]);
      if ((!none && (!v || *v < 0)) || (i == 3 && v && *v == 0)) {
        return Unsupported("itertools.islice() with bounds that are not constant non-negative ints");
      }
      bounds.push_back(none ? std::nullopt : v);
    }
    // An iterator would be left advanced by however much of the slice its consumer takes.
    if (args[0]->kind == SymKind::kIter) return Unsupported("itertools.islice() of an iterator");
    DT_ASSIGN_OR_RETURN(std::vector<Sym> items, Iterate(args[0]));
    const long long size = static_cast<long long>(items.size());
    long long start = 0, stop = size, step = 1;
    if (bounds.size() == 1) {
      stop = bounds[0].value_or(size);
    } else {
      start = bounds[0].value_or(0);
      stop = bounds[1].value_or(size);
      if (bounds.size() == 3) step = bounds[2].value_or(1);
    }
    stop = std::min(stop, size);
    std::vector<Sym> picked;
    for (long long i = start; i < stop; i += step) picked.push_back(items[i]);
    return IterOver(std::move(picked));
  }
  if (Is(fn, "itertools", "accumulate") && (args.size() == 1 || args.size() == 2)) {
    Sym initial;
    for (const auto& [k, v] : kwargs) {
      if (k != "initial") return Raises(absl::StrCat("the traced code raises: accumulate() keyword ", k));
      if (!(v->kind == SymKind::kConst && v->obj.get() == Py_None)) initial = v;
    }
    DT_ASSIGN_OR_RETURN(std::vector<Sym> items, Consume(args[0]));
    std::vector<Sym> sums;
    Sym acc = initial;
    if (acc != nullptr) sums.push_back(acc);
    for (const Sym& item : items) {
      if (acc == nullptr) {
        acc = item;
      } else if (args.size() == 2) {
        DT_ASSIGN_OR_RETURN(acc, CallWithoutEffects(args[1], {acc, item}));
      } else {
        DT_ASSIGN_OR_RETURN(acc, BinaryOp("+", acc, item));
      }
      sums.push_back(acc);
    }
    return IterOver(std::move(sums));
  }
  if (Is(fn, "itertools", "product") && kwargs.empty()) {
    std::vector<std::vector<Sym>> pools;
    size_t total = 1;
    for (const Sym& a : args) {
      DT_ASSIGN_OR_RETURN(std::vector<Sym> items, Consume(a));
      total *= items.size();
      if (total > 10000) return LimitReached("itertools.product() of more than 10000 tuples");
      pools.push_back(std::move(items));
    }
    std::vector<std::vector<Sym>> tuples = {{}};
    for (const auto& pool : pools) {
      std::vector<std::vector<Sym>> longer;
      for (const auto& t : tuples) {
        for (const Sym& item : pool) {
          longer.push_back(t);
          longer.back().push_back(item);
        }
      }
      tuples = std::move(longer);
    }
    std::vector<Sym> out;
    for (auto& t : tuples) {
      Sym tuple = MakeSym(SymKind::kTuple);
      tuple->items = std::move(t);
      out.push_back(tuple);
    }
    return IterOver(std::move(out));
  }
  if (Is(fn, "functools", "reduce") && kwargs.empty()) return FunctoolsReduce(args);
  return CallOperatorFunction(fn, args, kwargs);
}

// operator.add, operator.mul, operator.lt, operator.getitem ... as values (`reduce(operator.mul,
// xs)`, `map(operator.add, a, b)`): the operator itself.
absl::StatusOr<Sym> Tracer::CallOperatorFunction(PyObject* fn, const std::vector<Sym>& args, const Kwargs& kwargs) {
  if (!PyCFunction_Check(fn) || !kwargs.empty() || args.size() != 2) return Sym();
  PyObject* module = reinterpret_cast<PyCFunctionObject*>(fn)->m_module;
  if (module == nullptr || !PyUnicode_Check(module) || PyUnicode_CompareWithASCIIString(module, "_operator") != 0) {
    return Sym();
  }
  const std::string name = reinterpret_cast<PyCFunctionObject*>(fn)->m_ml->ml_name;
  static const auto* binary = new absl::flat_hash_map<std::string, std::string>{
      {"add", "+"}, {"sub", "-"}, {"mul", "*"}, {"truediv", "/"}, {"floordiv", "//"}, {"mod", "%"},
      {"pow", "**"}, {"matmul", "@"}, {"and_", "&"}, {"or_", "|"}, {"xor", "^"}, {"iadd", "+="},
      {"isub", "-="}, {"imul", "*="}, {"itruediv", "/="}};
  static const auto* compare = new absl::flat_hash_map<std::string, std::string>{
      {"lt", "<"}, {"le", "<="}, {"eq", "=="}, {"ne", "!="}, {"gt", ">"}, {"ge", ">="}};
  if (auto it = binary->find(name); it != binary->end()) return BinaryOp(it->second, args[0], args[1]);
  if (auto it = compare->find(name); it != compare->end()) return Compare(it->second, args[0], args[1]);
  if (name == "getitem") return Subscript(args[0], args[1]);
  return Sym();
}

}  // namespace dt::interpreter::trace
