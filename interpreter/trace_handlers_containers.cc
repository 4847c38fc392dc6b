// interpreter/trace_handlers_containers.cc: instructions that build, update, index and unpack
// tuples, lists, dicts and slices (and index tensors).
#include <Python.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "interpreter/py_types.h"
#include "interpreter/sym_dict.h"
#include "interpreter/tracer_internal.h"
#include "runtime/errors.h"
#include "runtime/indexing.h"

namespace dt::interpreter::trace {
namespace {

Sym NoneSym() { return ConstSym(PyRef::Borrow(Py_None)); }

Sym SliceSym(Sym start, Sym stop, Sym step) {
  Sym s = MakeSym(SymKind::kSlice);
  s->items = {std::move(start), std::move(stop), std::move(step)};
  return s;
}

}  // namespace

absl::Status Tracer::DoBuildSequence(TFrame& f, const Instr& in) {
  DT_RETURN_IF_ERROR(f.Need(in.arg, in));
  Sym s = MakeSym(in.op == Op::kBuildTuple ? SymKind::kTuple : SymKind::kList);
  s->items.assign(f.stack.end() - in.arg, f.stack.end());
  f.stack.resize(f.stack.size() - in.arg);
  f.stack.push_back(s);
  return absl::OkStatus();
}

absl::Status Tracer::DoBuildMap(TFrame& f, const Instr& in) {
  DT_RETURN_IF_ERROR(f.Need(2 * in.arg, in));
  Sym d = MakeSym(SymKind::kDict);
  const size_t first = f.stack.size() - 2 * in.arg;
  for (int i = 0; i < in.arg; ++i) {
    DT_ASSIGN_OR_RETURN(PyRef key, DictKey(f.stack[first + 2 * i]));
    DT_RETURN_IF_ERROR(DictInsert(*d, std::move(key), f.stack[first + 2 * i + 1]));
  }
  f.stack.resize(first);
  f.stack.push_back(d);
  return absl::OkStatus();
}

absl::Status Tracer::DoBuildConstKeyMap(TFrame& f, const Instr& in) {
  DT_RETURN_IF_ERROR(f.Need(in.arg + 1, in));
  DT_ASSIGN_OR_RETURN(PyRef k, ConstValue(f.stack.back()));
  if (!PyTuple_CheckExact(k.get()) || PyTuple_GET_SIZE(k.get()) != in.arg) {
    return Unsupported("BUILD_CONST_KEY_MAP without a matching key tuple");
  }
  f.Pop();
  Sym d = MakeSym(SymKind::kDict);
  const size_t first = f.stack.size() - in.arg;
  for (int i = 0; i < in.arg; ++i) {
    DT_RETURN_IF_ERROR(DictInsert(*d, PyRef::Borrow(PyTuple_GET_ITEM(k.get(), i)), f.stack[first + i]));
  }
  f.stack.resize(first);
  f.stack.push_back(d);
  return absl::OkStatus();
}

absl::Status Tracer::DoListAppendOrExtend(TFrame& f, const Instr& in) {
  DT_RETURN_IF_ERROR(f.Need(in.arg + 1, in));
  Sym v = f.Pop();
  Sym list = f.stack[f.stack.size() - in.arg];
  if (list->kind != SymKind::kList) return Unsupported(absl::StrCat("appending to a ", Describe(list)));
  std::vector<Sym> items = {v};
  if (in.op == Op::kListExtend) {
    DT_ASSIGN_OR_RETURN(items, Iterate(v));
  }
  DT_RETURN_IF_ERROR(MutatingContainer(list));
  list->items.insert(list->items.end(), items.begin(), items.end());
  return absl::OkStatus();
}

absl::Status Tracer::DoDictUpdate(TFrame& f, const Instr& in) {
  DT_RETURN_IF_ERROR(f.Need(in.arg + 1, in));
  Sym v = f.Pop();
  Sym d = f.stack[f.stack.size() - in.arg];
  if (d->kind != SymKind::kDict || v->kind != SymKind::kDict) return Unsupported("dict update");
  DT_RETURN_IF_ERROR(MutatingContainer(d));
  for (size_t i = 0; i < v->keys.size(); ++i) {
    // DICT_MERGE builds a call's **kwargs: a repeated key is CPython's TypeError, whose message
    // names the callee; CPython raises it itself when it runs the instruction.
    if (in.op == Op::kDictMerge) {
      DT_ASSIGN_OR_RETURN(std::optional<size_t> at, DictFind(*d, v->keys[i].get()));
      if (at) return Raises("the traced code raises: multiple values for a keyword argument");
    }
    DT_RETURN_IF_ERROR(DictInsert(*d, v->keys[i], v->items[i]));
  }
  return absl::OkStatus();
}

absl::Status Tracer::DoMapAdd(TFrame& f, const Instr& in) {
  DT_RETURN_IF_ERROR(f.Need(in.arg + 2, in));
  Sym value = f.Pop();
  Sym key = f.Pop();
  Sym d = f.stack[f.stack.size() - in.arg];
  if (d->kind != SymKind::kDict) return Unsupported("MAP_ADD into a dict of the caller");
  DT_ASSIGN_OR_RETURN(PyRef k, DictKey(key));
  DT_RETURN_IF_ERROR(MutatingContainer(d));
  return DictInsert(*d, std::move(k), value);
}

absl::Status Tracer::DoListToTuple(TFrame& f, const Instr& in) {
  DT_RETURN_IF_ERROR(f.Need(1, in));
  if (f.stack.back()->kind != SymKind::kList) return Unsupported("LIST_TO_TUPLE of a non-list");
  Sym t = MakeSym(SymKind::kTuple);
  t->items = f.Pop()->items;
  f.stack.push_back(t);
  return absl::OkStatus();
}

absl::Status Tracer::DoBuildSlice(TFrame& f, const Instr& in) {
  DT_RETURN_IF_ERROR(f.Need(in.arg, in));
  Sym step = in.arg == 3 ? f.Pop() : NoneSym();
  Sym stop = f.Pop();
  Sym start = f.Pop();
  f.stack.push_back(SliceSym(start, stop, step));
  return absl::OkStatus();
}

absl::Status Tracer::DoBinarySubscr(TFrame& f, const Instr& in) {
  DT_RETURN_IF_ERROR(f.Need(2, in));
  Sym index = f.Pop();
  Sym container = f.Pop();
  DT_ASSIGN_OR_RETURN(Sym r, Subscript(container, index));
  f.stack.push_back(r);
  return absl::OkStatus();
}

absl::Status Tracer::DoBinarySlice(TFrame& f, const Instr& in) {
  DT_RETURN_IF_ERROR(f.Need(3, in));
  Sym stop = f.Pop();
  Sym start = f.Pop();
  Sym container = f.Pop();
  DT_ASSIGN_OR_RETURN(Sym r, Subscript(container, SliceSym(start, stop, NoneSym())));
  f.stack.push_back(r);
  return absl::OkStatus();
}

absl::Status Tracer::StoreIntoTensor(const Sym& tensor, const Sym& index, const Sym& value) {
  absl::flat_hash_map<PyObject*, Sym> traced;
  DT_ASSIGN_OR_RETURN(PyObject* key, IndexKey(index, traced));
  auto parsed = py::ParseIndex(key);
  if (!parsed.ok()) return Unsupported(absl::StrCat("index: ", parsed.status().message()));
  const Dims encoded = EncodeIndex(parsed->items);
  const bool advanced = HasAdvancedItems(parsed->items);
  DT_ASSIGN_OR_RETURN(GraphArg index_arg, IndexArgument(key, encoded, traced));
  std::vector<ArgValue> metas = {tensor->meta, encoded};
  std::vector<GraphArg> gargs = {GraphArg::Value(tensor->value), std::move(index_arg)};
  if (advanced) {
    DT_ASSIGN_OR_RETURN(IndexTensors tensors, IndexTensorsOf(*parsed));
    metas.push_back(tensors.metas);
    gargs.push_back(GraphArg{tensors.ids});
  }
  if (value->kind == SymKind::kTensor) {
    metas.push_back(value->meta);
    gargs.push_back(GraphArg::Value(value->value));
  } else {
    DT_ASSIGN_OR_RETURN(PyRef c, ConstValue(value));
    auto scalar = py::ToScalar(c.get(), "setitem");
    if (!scalar.ok()) return Unsupported("assigning a non-number into a tensor");
    metas.push_back(*scalar);
    gargs.push_back(GraphArg{ArgValue(*scalar)});
  }
  if (advanced) {
    metas.push_back(Scalar::Bool(false));
    gargs.push_back(GraphArg{ArgValue(Scalar::Bool(false))});
  }
  // The meta run checks shapes; the node mutates `tensor` when the graph runs.
  const OpDef* op = OpRegistry::Get().Find(advanced ? "_index_put" : "_setitem");
  if (op->data_dependent_shape != nullptr) {
    if (std::optional<std::string> why = op->data_dependent_shape(OpArgs(metas))) return DataDependent(*why);
  }
  auto check = CallOp(*op, OpArgs(metas));
  if (!check.ok()) return Raises(absl::StrCat("the traced code raises: ", check.status().message()));
  graph_->AddNode(op, std::move(gargs), {tensor->meta}, /*inplace=*/true, HereLocation());
  touched_tensors_ = true;
  return absl::OkStatus();
}

absl::Status Tracer::DoStoreSubscr(TFrame& f, const Instr& in) {
  DT_RETURN_IF_ERROR(f.Need(in.op == Op::kStoreSlice ? 4 : 3, in));
  Sym index;
  if (in.op == Op::kStoreSlice) {
    Sym stop = f.Pop();
    Sym start = f.Pop();
    index = SliceSym(start, stop, NoneSym());
  } else {
    index = f.Pop();
  }
  Sym container = f.Pop();
  Sym value = f.Pop();
  if (container->kind == SymKind::kTensor) return StoreIntoTensor(container, index, value);
  if (IsKeyedCallerDict(container)) return KeyedStore(container, index, value);
  if (container->kind != SymKind::kList && container->kind != SymKind::kDict) {
    return Unsupported(absl::StrCat("item assignment into a ", Describe(container)));
  }
  DT_ASSIGN_OR_RETURN(PyRef key, container->kind == SymKind::kDict ? DictKey(index) : ConstValue(index));
  if (container->kind == SymKind::kDict) {
    DT_RETURN_IF_ERROR(MutatingContainer(container));
    return DictInsert(*container, key, value);
  }
  if (PySlice_Check(key.get())) return AssignListSlice(container, key.get(), value);
  if (!PyLong_Check(key.get())) return Raises("the traced code raises TypeError: list indices must be integers or slices");
  Py_ssize_t i = PyLong_AsSsize_t(key.get());
  if (i < 0) i += container->items.size();
  if (i < 0 || i >= static_cast<Py_ssize_t>(container->items.size())) {
    return Raises("the traced code raises IndexError");
  }
  DT_RETURN_IF_ERROR(MutatingContainer(container));
  container->items[i] = value;
  return absl::OkStatus();
}

absl::Status Tracer::DoDeleteSubscr(TFrame& f, const Instr& in) {
  DT_RETURN_IF_ERROR(f.Need(2, in));
  DT_RETURN_IF_ERROR(DeleteItem(f.stack[f.stack.size() - 2], f.stack.back()));
  f.Pop();
  f.Pop();
  return absl::OkStatus();
}

absl::Status Tracer::DoUnpackSequence(TFrame& f, const Instr& in) {
  DT_RETURN_IF_ERROR(f.Need(1, in));
  DT_ASSIGN_OR_RETURN(std::vector<Sym> items, Iterate(f.stack.back()));
  if (static_cast<int>(items.size()) != in.arg) {
    return Raises("the traced code raises: wrong number of values to unpack");
  }
  f.Pop();
  for (auto it = items.rbegin(); it != items.rend(); ++it) f.stack.push_back(*it);
  return absl::OkStatus();
}

absl::Status Tracer::DoUnpackEx(TFrame& f, const Instr& in) {
  DT_RETURN_IF_ERROR(f.Need(1, in));
  DT_ASSIGN_OR_RETURN(std::vector<Sym> items, Iterate(f.stack.back()));
  const int before = in.arg & 0xff, after = in.arg >> 8;
  if (static_cast<int>(items.size()) < before + after) {
    return Raises("the traced code raises: not enough values to unpack");
  }
  f.Pop();
  Sym rest = MakeSym(SymKind::kList);
  rest->items.assign(items.begin() + before, items.end() - after);
  for (int i = 0; i < after; ++i) f.stack.push_back(items[items.size() - 1 - i]);
  f.stack.push_back(rest);
  for (int i = before - 1; i >= 0; --i) f.stack.push_back(items[i]);
  return absl::OkStatus();
}

}  // namespace dt::interpreter::trace
