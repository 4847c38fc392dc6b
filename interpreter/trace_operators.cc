// interpreter/trace_operators.cc: graph emission, shapes, truth values, operators, subscripts and iteration.
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
#include "interpreter/number_program.h"
#include "interpreter/py_str.h"
#include "interpreter/py_types.h"
#include "interpreter/sym_dict.h"
#include "interpreter/tracer_internal.h"
#include "runtime/errors.h"
#include "runtime/indexing.h"

namespace dt::interpreter::trace {

// ---------------------------------------------------------------------------------------------
// Graph emission

absl::StatusOr<Device> Tracer::DeviceOf(const Sym& tensor) const {
  auto it = value_device_.find(tensor->value);
  // Every tensor value records its device when made; a missing one must not be guessed.
  if (tensor->kind != SymKind::kTensor || it == value_device_.end()) {
    return Unsupported("the device of a traced value is unknown");
  }
  return it->second;
}

absl::StatusOr<Device> Tracer::ResultDevice(const OpDef& op, const std::vector<ArgValue>& args,
                                            const std::vector<GraphArg>& graph_args) const {
  if (op.kind == OpKind::kCreation) {
    const int device = op.schema.IndexOf("device");
    if (device >= 0 && device < static_cast<int>(args.size()) && std::holds_alternative<Device>(args[device])) {
      return std::get<Device>(args[device]);
    }
  }
  std::optional<Device> found;
  bool cpu_scalar = false;  // a CPU tensor of no dims among the operands
  auto note = [&](ValueId v, const ArgValue* meta) -> absl::Status {
    auto it = value_device_.find(v);
    if (it == value_device_.end()) return Unsupported("the device of a traced value is unknown");
    const Tensor* t = meta == nullptr ? nullptr : std::get_if<Tensor>(meta);
    if (it->second.is_cpu() && t != nullptr && t->ndim() == 0) {
      cpu_scalar = true;
      return absl::OkStatus();
    }
    if (found && *found != it->second) {
      return Raises("the traced code raises: tensors on different devices");
    }
    found = it->second;
    return absl::OkStatus();
  };
  for (size_t i = 0; i < graph_args.size(); ++i) {
    const ArgValue* meta = i < args.size() ? &args[i] : nullptr;
    if (const ValueId* v = std::get_if<ValueId>(&graph_args[i].content)) DT_RETURN_IF_ERROR(note(*v, meta));
    if (const auto* vs = std::get_if<std::vector<ValueId>>(&graph_args[i].content)) {
      for (ValueId v : *vs) DT_RETURN_IF_ERROR(note(v, nullptr));
    }
  }
  if (cpu_scalar && found.has_value() && !found->is_cpu()) {
    // PyTorch lets a number held in a CPU tensor join device operands; eager dyntrace copies it
    // over, which a compiled graph's inputs can't yet.
    return Unsupported(absl::StrCat("a CPU tensor of no dims among ", found->ToString(),
                                    " operands runs eagerly (copied to the device there)"));
  }
  return found.value_or(Device::Cpu());  // no tensor operand, no device argument: the CPU
}

absl::StatusOr<std::vector<Sym>> Tracer::Emit(const OpDef* op, std::vector<ArgValue> meta_args,
                                              std::vector<GraphArg> graph_args, bool inplace) {
  DT_ASSIGN_OR_RETURN(const Device device_of_results, ResultDevice(*op, meta_args, graph_args));
  // Made on the meta device at trace time, *_like ops too: rand_like(x, device="cpu") must not
  // draw at trace time.
  CreateOnMeta(*op, meta_args);
  OpArgs args(std::move(meta_args));
  if (op->has(kEagerUpdate)) {
    return Unsupported(absl::StrCat(op->name(), " writes its arguments in place; it runs eagerly"));
  }
  if (op->data_dependent_shape != nullptr) {
    if (std::optional<std::string> why = op->data_dependent_shape(args)) {
      return DataDependent(absl::StrCat(op->name(), ": ", *why));
    }
  }
  if (!inplace && ExpandsForAutograd(*op, graph_args)) {
    DT_ASSIGN_OR_RETURN(std::optional<std::vector<Sym>> expanded, EmitBody(*op, args, graph_args, device_of_results));
    if (expanded.has_value()) return *std::move(expanded);
  }
  std::vector<Tensor> outs;
  if (inplace && op->kind == OpKind::kPointwise) {
    const Tensor target = args.tensor(0);
    auto r = RunPointwise(*op, args, &target);
    if (!r.ok()) return Raises(absl::StrCat("the traced code raises: ", r.status().message()));
    outs.push_back(*r);
  } else {
    auto r = CallOp(*op, args);
    if (!r.ok()) return Raises(absl::StrCat("the traced code raises: ", r.status().message()));
    if (inplace && !CanCast(r->at(0).dtype(), args.tensor(0).dtype())) {
      return Raises(absl::StrCat("the traced code raises: ", op->name(),
                                      "_: result type can't be cast to the output type"));
    }
    outs = *std::move(r);
  }
  touched_tensors_ = true;
  const std::vector<GraphArg> read = graph_args;
  std::vector<ValueId> ids = graph_->AddNode(op, std::move(graph_args), inplace ? std::vector<Tensor>{args.tensor(0)} : outs,
                                             inplace, HereLocation());
  std::vector<Sym> result;
  for (size_t i = 0; i < ids.size(); ++i) {
    Sym s = MakeSym(SymKind::kTensor);
    s->value = ids[i];
    s->meta = inplace ? args.tensor(0) : outs[i];
    value_device_[s->value] = device_of_results;
    result.push_back(s);
  }
  DT_RETURN_IF_ERROR(NoteGradResults(*op, read, result, inplace));
  return result;
}

absl::StatusOr<Sym> Tracer::EmitNamed(absl::string_view name, const std::vector<Sym>& operands,
                                      bool inplace) {
  const OpDef* op = OpRegistry::Get().Find(name);
  if (op == nullptr) return Unsupported(absl::StrCat("no op ", name));
  std::vector<ArgValue> metas;
  std::vector<GraphArg> gargs;
  for (const Sym& s : operands) {
    if (s->kind == SymKind::kTensor) {
      metas.push_back(s->meta);
      gargs.push_back(GraphArg::Value(s->value));
    } else if (s->kind == SymKind::kNumber) {
      auto scalar = py::ToScalar(s->obj.get(), name);
      if (!scalar.ok()) return Unsupported(absl::StrCat(name, " with an unusual number"));
      metas.push_back(*scalar);
      gargs.push_back(GraphArg{ScalarRef{s->value}});
    } else {
      if (s->kind == SymKind::kObject && py::IsNdarray(s->obj.get())) {
        return Unsupported(absl::StrCat(name, " with a numpy.ndarray operand: numpy arrays are not traced "
                                              "values, so the operator runs in Python"));
      }
      DT_ASSIGN_OR_RETURN(PyRef c, ConstValue(s));
      auto scalar = py::ToScalar(c.get(), name);
      if (!scalar.ok()) return Unsupported(absl::StrCat(name, " with a ", Py_TYPE(c.get())->tp_name, " operand"));
      metas.push_back(*scalar);
      gargs.push_back(GraphArg{ArgValue(*scalar)});
    }
  }
  const auto& params = op->schema.params;
  for (size_t i = operands.size(); i < params.size(); ++i) {
    if (!params[i].default_value) return Unsupported(absl::StrCat(name, ": missing argument"));
    metas.push_back(*params[i].default_value);
    gargs.push_back(GraphArg{*params[i].default_value});
  }
  if (inplace) return EmitInPlace(op, std::move(metas), std::move(gargs), operands[0]);
  DT_RETURN_IF_ERROR(AutocastArguments(*op, metas, gargs));  // `a @ b`, `x ** 2`
  DT_ASSIGN_OR_RETURN(std::vector<Sym> outs, Emit(op, std::move(metas), std::move(gargs), false));
  return outs.at(0);
}


// ---------------------------------------------------------------------------------------------
// Shapes: exact sizes are guarded only when Python reads them.

absl::Status Tracer::GuardSizes(const Sym& tensor, std::optional<int64_t> dim) {
  if (tensor->source != nullptr) {
    const Tensor& real = tensor->meta;
    for (int64_t d = 0; d < real.ndim(); ++d) {
      if (dim.has_value() && *dim != d) continue;
      guards_.Add(LeafGuard::TensorSize(tensor->source, d, real.size(d), Here()));
    }
    return absl::OkStatus();
  }
  // An intermediate's sizes follow from the inputs' sizes: guard them all.
  for (ValueId in : graph_->inputs()) {
    const Tensor& meta = graph_->value(in).meta;
    auto it = inputs_by_source_.find(graph_->input_sources()[graph_->value(in).input_index]);
    if (it == inputs_by_source_.end()) continue;
    for (int64_t d = 0; d < meta.ndim(); ++d) {
      guards_.Add(LeafGuard::TensorSize(it->second->source, d, meta.size(d), Here()));
    }
  }
  return absl::OkStatus();
}

std::pair<uint64_t, uint64_t> Tracer::MarksOf(const guards::Source& source) const {
  PyObject* obj = source.Resolve(frame_.inputs);
  if (obj == nullptr || !py::IsTensor(obj)) return {0, 0};
  const auto* t = reinterpret_cast<const py::PyTensor*>(obj);
  return {t->marked_dynamic, t->marked_static};
}

bool Tracer::IsDynamicSize(const Sym& tensor, int64_t dim) const {
  const auto [dynamic, fixed] = MarksOf(*tensor->source);
  const uint64_t bit = dim < 64 ? uint64_t{1} << dim : 0;
  if (fixed & bit) return false;
  return (dynamic & bit) || frame_.all_dynamic ||
         (frame_.dynamic_numbers != nullptr &&
          frame_.dynamic_numbers->contains(DynamicSizeKey(*tensor->source, dim)));
}

absl::StatusOr<Sym> Tracer::SizeOf(const Sym& tensor, int64_t dim) {
  const int64_t size = tensor->meta.size(dim);
  if (tensor->source == nullptr) {
    // An intermediate: the same expression of the inputs' sizes the ops compute, else every
    // input size is specialised.
    DT_ASSIGN_OR_RETURN(Sym symbolic, SymbolicSize(tensor->value, dim));
    // Its value now must be the size the meta run gave (a rule that disagrees is a bug: the
    // safe answer is the specialised one).
    if (symbolic != nullptr && PyLong_AsLongLong(symbolic->obj.get()) == size) return symbolic;
    PyErr_Clear();
  }
  if (tensor->source == nullptr || size < 2 || !IsDynamicSize(tensor, dim)) {
    DT_RETURN_IF_ERROR(GuardSizes(tensor, dim));
    return ConstSym(PyRef::Steal(PyLong_FromLongLong(size)));
  }
  // One run-time number per size, however often it is read, so `B == B` holds symbolically.
  // The guard is added again on a repeat read: a rolled-back instruction may have dropped it.
  guards_.Add(LeafGuard::TensorSizeAtLeast(tensor->source, dim, 2, Here()));
  auto key = std::make_pair(tensor.get(), dim);
  if (auto it = size_numbers_.find(key); it != size_numbers_.end()) return it->second;
  ScalarInstr read;
  read.kind = ScalarInstr::Kind::kTensorSize;
  read.source = tensor->source;
  read.a = static_cast<int>(dim);
  const int slot = static_cast<int>(scalar_program_.size());
  DT_ASSIGN_OR_RETURN(Sym number, NumberSlot(std::move(read), PyRef::Steal(PyLong_FromLongLong(size)), {slot}));
  size_numbers_[key] = number;
  size_number_tensors_.push_back(tensor);  // keeps the key's address unique while the trace runs
  return number;
}

absl::StatusOr<Sym> Tracer::NumelOf(const Sym& tensor) {
  Sym numel = ConstSym(PyRef::Steal(PyLong_FromLong(1)));
  for (int64_t d = 0; d < tensor->meta.ndim(); ++d) {
    DT_ASSIGN_OR_RETURN(Sym size, SizeOf(tensor, d));
    DT_ASSIGN_OR_RETURN(numel, BinaryOp("*", numel, size));
  }
  return numel;
}

absl::StatusOr<Sym> Tracer::MaterializeShape(const Sym& shape) {
  const Sym& t = shape->items[0];
  Sym tuple = MakeSym(SymKind::kTuple);
  for (int64_t d = 0; d < t->meta.ndim(); ++d) {
    DT_ASSIGN_OR_RETURN(Sym size, SizeOf(t, d));
    tuple->items.push_back(size);
  }
  return tuple;
}

// ---------------------------------------------------------------------------------------------

// Whether a run-time number comes only from the frame's arguments made dynamic (not from the
// state of a segment that starts mid-function, whose numbers change every iteration).
bool Tracer::FromDynamicArguments(const Sym& number) const {
  for (int input : slot_inputs_[number->value]) {
    const ScalarInstr& in = scalar_program_[input];
    // Symbolic sizes and run-time lengths are only made dynamic.
    if (in.kind == ScalarInstr::Kind::kTensorSize || in.kind == ScalarInstr::Kind::kSequence) continue;
    const bool float_argument = frame_.float_arguments_dynamic && frame_.start_offset == 0 && in.source != nullptr &&
                                in.source->kind == guards::Source::Kind::kLocal &&
                                PyFloat_CheckExact(slot_samples_[input].get());
    if (in.source == nullptr || !(frame_.all_dynamic || float_argument ||
                                  (frame_.dynamic_numbers != nullptr &&
                                   frame_.dynamic_numbers->contains(in.source->ToString())))) {
      return false;
    }
  }
  return true;
}

absl::StatusOr<bool> Tracer::GuardRelation(const Sym& number) {
  const int truth = PyObject_IsTrue(number->obj.get());
  if (truth < 0) {
    PyErr_Clear();
    return Raises("the traced code raises on the truth value of a number");
  }
  auto program = std::make_shared<const std::vector<ScalarInstr>>(scalar_program_.begin(),
                                                                  scalar_program_.begin() + number->value + 1);
  const int slot = number->value;
  auto relation = std::make_shared<const LeafGuard::RelationFn>(
      [program, slot](const guards::FrameInputs& inputs) -> std::optional<bool> {
        PyRef value = EvaluateSlot(*program, slot, inputs);
        const int t = value ? PyObject_IsTrue(value.get()) : -1;
        if (t < 0) {
          PyErr_Clear();
          return std::nullopt;
        }
        return t == 1;
      });
  const ScalarInstr& first_input = scalar_program_[slot_inputs_[slot].front()];
  guards_.Add(LeafGuard::Relation(first_input.source, NumberExpression(*program, slot), truth == 1,
                                  std::move(relation), Here()));
  return truth == 1;
}

absl::StatusOr<bool> Tracer::Truth(const Sym& s) {
  switch (s->kind) {
    case SymKind::kConst: {
      if (!IsPureConstType(s->obj.get()) && !PyType_Check(s->obj.get()) && !PyCallable_Check(s->obj.get()) &&
          !PyModule_Check(s->obj.get())) {
        return Unsupported(absl::StrCat("truth value of a ", Py_TYPE(s->obj.get())->tp_name));
      }
      const int r = PyObject_IsTrue(s->obj.get());
      if (r < 0) {
        PyErr_Clear();
        return Unsupported("truth value raises");
      }
      return r == 1;
    }
    case SymKind::kTuple:
    case SymKind::kList:
    case SymKind::kDict: return !s->items.empty();
    case SymKind::kSet: {
      DT_ASSIGN_OR_RETURN(PyRef value, SetValue(s));
      return PySet_GET_SIZE(value.get()) > 0;
    }
    case SymKind::kShape: return s->items[0]->meta.ndim() > 0;
    case SymKind::kRunSeq: return true;  // len >= 1 is guarded
    case SymKind::kTensor:
      return DataDependent(absl::StrFormat(
          "data-dependent branch: the truth value of tensor v%d (%s) is only known at run time",
          s->value, DescribeMeta(s->meta)));
    case SymKind::kFunction:
    case SymKind::kBoundMethod:
    case SymKind::kOpMethod:
    case SymKind::kPartial: return true;
    case SymKind::kNumber:
      // Control flow on symbolic sizes or dynamic arguments: the trace holds for every frame
      // where the condition comes out the same, which is what it guards.
      if (FromDynamicArguments(s)) return GuardRelation(s);
      return DataDependent(absl::StrFormat(
          "data-dependent branch: the truth value of a Python number (s%d) is only known at run "
          "time", s->value));
    case SymKind::kNull:
    case SymKind::kIter:
    case SymKind::kCell:
    case SymKind::kObject:
    case SymKind::kSlice:
    case SymKind::kRunIter:
    case SymKind::kGenManager:
    case SymKind::kSuper: return Unsupported(absl::StrCat("truth value of a ", Describe(s)));
  }
}

absl::StatusOr<Sym> Tracer::BinaryOp(const std::string& nb_name, const Sym& a, const Sym& b) {
  // nb_name is the operator as `dis` spells it: "+", "+=", "@", ...
  std::string sym = nb_name;
  const bool inplace = sym.size() >= 2 && sym.back() == '=' && sym != "==";
  if (inplace) sym.pop_back();
  static const auto* ops = new absl::flat_hash_map<std::string, std::string>{
      {"+", "add"}, {"-", "sub"}, {"*", "mul"}, {"/", "div"}, {"//", "floor_divide"},
      {"%", "remainder"}, {"**", "pow"}, {"@", "matmul"}, {"&", "logical_and"},
      {"|", "logical_or"}, {"^", "logical_xor"}};
  if ((a->kind == SymKind::kIter && a->keys_view) || (b->kind == SymKind::kIter && b->keys_view)) {
    return KeysViewBinaryOp(nb_name, a, b);
  }
  if (a->kind == SymKind::kSet || b->kind == SymKind::kSet) return SetBinaryOp(nb_name, a, b);
  if (a->kind == SymKind::kTensor || b->kind == SymKind::kTensor) {
    auto it = ops->find(sym);
    if (it == ops->end()) return Unsupported(absl::StrCat("operator ", sym, " on tensors"));
    if ((sym == "&" || sym == "|" || sym == "^")) {
      for (const Sym& s : {a, b}) {
        if (s->kind == SymKind::kTensor && s->meta.dtype() != DType::kBool) {
          return Unsupported(absl::StrCat("bitwise ", sym, " on non-bool tensors"));
        }
      }
    }
    if (sym == "@" && (a->kind != SymKind::kTensor || b->kind != SymKind::kTensor)) {
      return Unsupported("@ with a non-tensor operand");
    }
    const bool write = inplace && a->kind == SymKind::kTensor && sym != "@";
    return EmitNamed(it->second, {a, b}, write);
  }
  if ((a->kind == SymKind::kNumber || b->kind == SymKind::kNumber) && IsNumber(a) && IsNumber(b)) {
    return NumberOp(sym, /*compare=*/false, a, b);
  }
  // A constant tuple beside one the trace holds (`(a, b) + ()`, `t + (x,)` folded to a constant):
  // concatenated item by item like two traced tuples.
  if (sym == "+" && (a->kind == SymKind::kTuple || b->kind == SymKind::kTuple) && a->kind != b->kind) {
    auto as_tuple = [](const Sym& s) {
      if (s->kind != SymKind::kConst || !PyTuple_CheckExact(s->obj.get())) return s;
      Sym t = MakeSym(SymKind::kTuple);
      for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(s->obj.get()); ++i) {
        t->items.push_back(ConstSym(PyRef::Borrow(PyTuple_GET_ITEM(s->obj.get(), i))));
      }
      return t;
    };
    const Sym ta = as_tuple(a), tb = as_tuple(b);
    if (ta->kind == SymKind::kTuple && tb->kind == SymKind::kTuple) return BinaryOp(nb_name, ta, tb);
  }
  // Sequences built by the trace.
  if ((a->kind == SymKind::kTuple || a->kind == SymKind::kList) && a->kind == b->kind && sym == "+") {
    if (inplace && a->kind == SymKind::kList) {
      DT_RETURN_IF_ERROR(MutatingContainer(a));
      a->items.insert(a->items.end(), b->items.begin(), b->items.end());
      return a;
    }
    Sym s = MakeSym(a->kind);
    s->items = a->items;
    s->items.insert(s->items.end(), b->items.begin(), b->items.end());
    return s;
  }
  if ((a->kind == SymKind::kTuple || a->kind == SymKind::kList) && b->kind == SymKind::kConst &&
      PyLong_CheckExact(b->obj.get()) && sym == "*") {
    int overflow = 0;
    const long long n = std::max(0LL, PyLong_AsLongLongAndOverflow(b->obj.get(), &overflow));
    // Repeats are made item by item: a huge one (CPython's MemoryError / OverflowError, a list
    // of a million) is left to CPython rather than exhausting memory here.
    constexpr long long kMaxRepeatedItems = 4096;
    if (overflow != 0 || (!a->items.empty() && n > kMaxRepeatedItems / static_cast<long long>(a->items.size()))) {
      return LimitReached("repeating a sequence into a very long one");
    }
    std::vector<Sym> repeated;
    for (long long i = 0; i < n; ++i) repeated.insert(repeated.end(), a->items.begin(), a->items.end());
    if (inplace && a->kind == SymKind::kList) {
      // `xs *= n` changes the list itself: every alias sees it.
      DT_RETURN_IF_ERROR(MutatingContainer(a));
      a->items = std::move(repeated);
      return a;
    }
    Sym s = MakeSym(a->kind);
    s->items = std::move(repeated);
    return s;
  }
  DT_ASSIGN_OR_RETURN(PyRef x, ConstValue(a));
  DT_ASSIGN_OR_RETURN(PyRef y, ConstValue(b));
  if (!IsPureConstType(x.get()) || !IsPureConstType(y.get())) {
    return Unsupported(absl::StrFormat("operator %s on %s and %s", nb_name, Py_TYPE(x.get())->tp_name,
                                       Py_TYPE(y.get())->tp_name));
  }
  PyObject* r = nullptr;
  if (sym == "+") r = PyNumber_Add(x.get(), y.get());
  else if (sym == "-") r = PyNumber_Subtract(x.get(), y.get());
  else if (sym == "*") r = PyNumber_Multiply(x.get(), y.get());
  else if (sym == "/") r = PyNumber_TrueDivide(x.get(), y.get());
  else if (sym == "//") r = PyNumber_FloorDivide(x.get(), y.get());
  else if (sym == "%") r = PyNumber_Remainder(x.get(), y.get());
  else if (sym == "**") r = PyNumber_Power(x.get(), y.get(), Py_None);
  else if (sym == "&") r = PyNumber_And(x.get(), y.get());
  else if (sym == "|") r = PyNumber_Or(x.get(), y.get());
  else if (sym == "^") r = PyNumber_Xor(x.get(), y.get());
  else if (sym == "<<") r = PyNumber_Lshift(x.get(), y.get());
  else if (sym == ">>") r = PyNumber_Rshift(x.get(), y.get());
  else return Unsupported(absl::StrCat("operator ", nb_name));
  if (r == nullptr) return PythonError(absl::StrCat("the traced code raises on ", nb_name));
  return ConstSym(PyRef::Steal(r));
}

namespace {

// A list, tuple or dict against a str, number, bytes or None: never equal, and no user code runs.
bool ContainerAgainstScalar(const Sym& container, const Sym& scalar) {
  if (container->kind != SymKind::kList && container->kind != SymKind::kTuple && container->kind != SymKind::kDict) {
    return false;
  }
  if (scalar->kind != SymKind::kConst) return false;
  PyObject* o = scalar->obj.get();
  return o == Py_None || PyBool_Check(o) || PyLong_CheckExact(o) || PyFloat_CheckExact(o) || PyUnicode_CheckExact(o) ||
         PyBytes_CheckExact(o);
}

}  // namespace

absl::StatusOr<Sym> Tracer::Compare(const std::string& op, const Sym& a, const Sym& b) {
  static const auto* names = new absl::flat_hash_map<std::string, std::pair<std::string, int>>{
      {"<", {"lt", Py_LT}}, {"<=", {"le", Py_LE}}, {"==", {"eq", Py_EQ}},
      {"!=", {"ne", Py_NE}}, {">", {"gt", Py_GT}}, {">=", {"ge", Py_GE}}};
  auto it = names->find(op);
  if (it == names->end()) return Unsupported(absl::StrCat("comparison ", op));
  if (a->kind == SymKind::kSet || b->kind == SymKind::kSet) return SetCompare(it->second.second, a, b);
  if ((op == "==" || op == "!=") && (ContainerAgainstScalar(a, b) || ContainerAgainstScalar(b, a))) {
    // Both sides' __eq__ return NotImplemented, so Python compares identities (a `match` literal
    // case tried on a dict or list subject).
    return ConstSym(PyRef::Borrow(op == "!=" ? Py_True : Py_False));
  }
  if (a->kind == SymKind::kTensor || b->kind == SymKind::kTensor) {
    for (const Sym& s : {a, b}) {
      if (s->kind == SymKind::kConst && s->obj.get() == Py_None) {
        // tensor == None is False, as in Python for unrelated objects.
        if (op == "==" || op == "!=") return ConstSym(PyRef::Borrow(op == "==" ? Py_False : Py_True));
      }
    }
    return EmitNamed(it->second.first, {a, b});
  }
  if ((a->kind == SymKind::kNumber || b->kind == SymKind::kNumber) && IsNumber(a) && IsNumber(b)) {
    return NumberOp(op, /*compare=*/true, a, b);
  }
  DT_ASSIGN_OR_RETURN(PyRef x, ConstValue(a));
  DT_ASSIGN_OR_RETURN(PyRef y, ConstValue(b));
  if (!IsPureConstType(x.get()) || !IsPureConstType(y.get())) {
    if ((op == "==" || op == "!=") ) {
      const bool same = x.get() == y.get();
      if (same || PyType_Check(x.get()) || PyType_Check(y.get())) {
        return ConstSym(PyRef::Borrow((same == (op == "==")) ? Py_True : Py_False));
      }
    }
    return Unsupported(absl::StrFormat("comparison %s of %s and %s", op, Py_TYPE(x.get())->tp_name,
                                       Py_TYPE(y.get())->tp_name));
  }
  PyObject* r = PyObject_RichCompare(x.get(), y.get(), it->second.second);
  if (r == nullptr) return PythonError(absl::StrCat("the traced code raises on ", op));
  return ConstSym(PyRef::Steal(r));
}

absl::StatusOr<Tracer::IndexTensors> Tracer::IndexTensorsOf(const py::ParsedIndex& parsed) {
  IndexTensors out;
  for (PyObject* t : parsed.tensors) {
    auto it = sym_of_wrapper_.find(t);
    if (it == sym_of_wrapper_.end()) return Unsupported("an index tensor of unknown origin");
    out.metas.push_back(it->second->meta);
    out.ids.push_back(it->second->value);
  }
  return out;
}

absl::StatusOr<Sym> Tracer::Subscript(const Sym& container, const Sym& index) {
  if (IsKeyedCallerDict(container)) return KeyedSubscript(container, index);
  if (container->kind == SymKind::kTensor) {
    absl::flat_hash_map<PyObject*, Sym> traced;
    DT_ASSIGN_OR_RETURN(PyObject* key, IndexKey(index, traced));
    auto parsed = py::ParseIndex(key);
    if (!parsed.ok()) return Unsupported(absl::StrCat("index: ", parsed.status().message()));
    const Dims encoded = EncodeIndex(parsed->items);
    DT_ASSIGN_OR_RETURN(GraphArg index_arg, IndexArgument(key, encoded, traced));
    if (HasAdvancedItems(parsed->items)) {
      DT_ASSIGN_OR_RETURN(IndexTensors tensors, IndexTensorsOf(*parsed));
      DT_ASSIGN_OR_RETURN(std::vector<Sym> outs,
                          Emit(OpRegistry::Get().Find("_index"), {container->meta, encoded, tensors.metas},
                               {GraphArg::Value(container->value), index_arg, GraphArg{tensors.ids}}, false));
      return outs[0];
    }
    const OpDef* op = OpRegistry::Get().Find("_getitem");
    DT_ASSIGN_OR_RETURN(std::vector<Sym> outs, Emit(op, {container->meta, encoded},
                                                    {GraphArg::Value(container->value), index_arg}, false));
    return outs[0];
  }
  if (container->kind == SymKind::kShape) {
    const Sym& t = container->items[0];
    if (index->kind == SymKind::kConst && PyLong_CheckExact(index->obj.get())) {
      long long i = PyLong_AsLongLong(index->obj.get());
      const int64_t nd = t->meta.ndim();
      if (i < -nd || i >= nd) return Raises("the traced code raises: shape index out of range");
      if (i < 0) i += nd;
      return SizeOf(t, i);
    }
    DT_ASSIGN_OR_RETURN(Sym tuple, MaterializeShape(container));
    return Subscript(tuple, index);
  }
  if (container->kind == SymKind::kTuple || container->kind == SymKind::kList) {
    DT_ASSIGN_OR_RETURN(PyRef key, ConstValue(index));
    const Py_ssize_t n = static_cast<Py_ssize_t>(container->items.size());
    if (PyLong_Check(key.get())) {
      Py_ssize_t i = PyLong_AsSsize_t(key.get());
      if (i < 0) i += n;
      if (i < 0 || i >= n) {
        PyRef message = PyRef::Steal(PyUnicode_FromString(container->kind == SymKind::kTuple ? "tuple index out of range"
                                                                                             : "list index out of range"));
        return RaiseNew(PyExc_IndexError, message.get(), "the traced code raises IndexError");
      }
      return container->items[i];
    }
    if (PySlice_Check(key.get())) {
      Py_ssize_t start, stop, step;
      if (PySlice_Unpack(key.get(), &start, &stop, &step) < 0) {
        PyErr_Clear();
        return Raises("the traced code raises on a slice");
      }
      const Py_ssize_t len = PySlice_AdjustIndices(n, &start, &stop, step);
      Sym s = MakeSym(container->kind);
      for (Py_ssize_t k = 0, i = start; k < len; ++k, i += step) s->items.push_back(container->items[i]);
      return s;
    }
    return Unsupported("sequence index of an unsupported type");
  }
  if (container->kind == SymKind::kDict) {
    DT_ASSIGN_OR_RETURN(PyRef key, DictKey(index));
    DT_ASSIGN_OR_RETURN(std::optional<size_t> at, DictFind(*container, key.get()));
    if (!at) return RaiseNew(PyExc_KeyError, key.get(), "the traced code raises KeyError");
    return container->items[*at];
  }
  DT_ASSIGN_OR_RETURN(PyRef c, ConstValue(container));
  DT_ASSIGN_OR_RETURN(PyRef k, ConstValue(index));
  if (!IsPureConstType(c.get())) return Unsupported(absl::StrCat("indexing a ", Py_TYPE(c.get())->tp_name));
  PyObject* r = PyObject_GetItem(c.get(), k.get());
  if (r == nullptr) return PythonError("the traced code raises on indexing");
  return ConstSym(PyRef::Steal(r));
}

absl::StatusOr<PyObject*> Tracer::IndexKey(const Sym& index, absl::flat_hash_map<PyObject*, Sym>& traced) {
  TracedIntScope scope(*this, traced);
  return ToPython(index);
}

// Index items are encoded 4 ints each (runtime/indexing.h): kind, then the int index or the
// slice's start, stop and step. A run-time int in one of those places becomes a slot there;
// anywhere else it is specialised.
absl::StatusOr<GraphArg> Tracer::IndexArgument(PyObject* key, const Dims& encoded,
                                               const absl::flat_hash_map<PyObject*, Sym>& traced) {
  if (traced.empty()) return GraphArg{ArgValue(encoded)};
  std::vector<PyObject*> elements = {key};
  if (PyTuple_Check(key)) elements.assign(&PyTuple_GET_ITEM(key, 0), &PyTuple_GET_ITEM(key, 0) + PyTuple_GET_SIZE(key));
  DimsRef ref{encoded, std::vector<int>(encoded.size(), -1)};
  size_t placed = 0;
  auto place = [&](PyObject* part, size_t at) {
    auto it = part != nullptr ? traced.find(part) : traced.end();
    if (it == traced.end() || at >= encoded.size()) return;
    ref.slots[at] = it->second->value;
    ++placed;
  };
  if (elements.size() * 4 == encoded.size()) {
    for (size_t i = 0; i < elements.size(); ++i) {
      if (PySlice_Check(elements[i])) {
        auto* slice = reinterpret_cast<PySliceObject*>(elements[i]);
        place(slice->start, 4 * i + 1);
        place(slice->stop, 4 * i + 2);
        place(slice->step, 4 * i + 3);
      } else {
        place(elements[i], 4 * i + 1);
      }
    }
  }
  if (placed == traced.size()) return GraphArg{std::move(ref)};
  for (const auto& [marker, number] : traced) DT_RETURN_IF_ERROR(Specialize(number).status());
  return GraphArg{ArgValue(encoded)};
}

absl::StatusOr<std::vector<Sym>> Tracer::Iterate(const Sym& s) {
  DT_RETURN_IF_ERROR(Materialise(s));
  switch (s->kind) {
    case SymKind::kTuple:
    case SymKind::kList: return s->items;
    case SymKind::kIter: {
      if (s->raises_when_exhausted && !s->items.empty()) {  // a generator that raises at its end
        Sym raised = s->items.back();
        Mutating(s);
        s->items.clear();
        return Throw(raised);
      }
      if (!s->zip_sources.empty()) {  // a lazy zip()/enumerate(): its items, taken now
        std::vector<Sym> rest;
        while (true) {
          DT_ASSIGN_OR_RETURN(Sym item, NextItem(s));
          if (item == nullptr) return rest;
          rest.push_back(std::move(item));
        }
      }
      if (s->over == nullptr) return s->items;
      // iter(list) or iter(dict) reads its container live, and a reader such as zip() takes
      // its items lazily, as many as it needs: only Consume (which takes them all) and next()
      // follow it.
      return Unsupported("an iterator from iter() of a list or dict read by zip(), map() or the like");
    }
    case SymKind::kDict: {
      std::vector<Sym> keys;
      DT_RETURN_IF_ERROR(GuardKeyOrder(s));
      for (const PyRef& k : s->keys) keys.push_back(KeySym(k));
      return keys;
    }
    case SymKind::kShape: {
      DT_ASSIGN_OR_RETURN(Sym t, MaterializeShape(s));
      return t->items;
    }
    case SymKind::kTensor: {
      if (s->meta.ndim() == 0) return Raises("the traced code raises: iteration over a 0-d tensor");
      DT_RETURN_IF_ERROR(GuardSizes(s, 0));
      std::vector<Sym> rows;
      for (int64_t i = 0; i < s->meta.size(0); ++i) {
        DT_ASSIGN_OR_RETURN(Sym row, Subscript(s, ConstSym(PyRef::Steal(PyLong_FromLongLong(i)))));
        rows.push_back(row);
      }
      return rows;
    }
    case SymKind::kConst: {
      PyObject* obj = s->obj.get();
      if (!(PyRange_Check(obj) || PyTuple_CheckExact(obj) || PyUnicode_CheckExact(obj))) {
        return Unsupported(absl::StrCat("iterating over a ", Py_TYPE(obj)->tp_name));
      }
      PyRef list = PyRef::Steal(PySequence_List(obj));
      if (!list) {
        PyErr_Clear();
        return Unsupported("iteration raises");
      }
      if (PyList_GET_SIZE(list.get()) > 10000) return LimitReached("a loop of more than 10000 iterations");
      std::vector<Sym> items;
      for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list.get()); ++i) {
        items.push_back(ConstSym(PyRef::Borrow(PyList_GET_ITEM(list.get(), i))));
      }
      return items;
    }
    case SymKind::kNull:
    case SymKind::kCell:
    case SymKind::kBoundMethod:
    case SymKind::kOpMethod:
    case SymKind::kFunction:
    case SymKind::kSlice:
    case SymKind::kNumber:
    case SymKind::kRunIter:
    case SymKind::kRunSeq:  // materialised above
    case SymKind::kPartial:
    case SymKind::kGenManager:
    case SymKind::kSuper: return Unsupported(absl::StrCat("iterating over a ", Describe(s)));
    case SymKind::kSet: return SetItems(s);
    case SymKind::kObject: return IterateObject(s);
  }
}

absl::StatusOr<std::vector<Sym>> Tracer::IterateObject(const Sym& s) {
  static PyObject* const name = PyUnicode_InternFromString("__iter__");
  PyObject* method = s->obj ? cpython::LookupOnType(Py_TYPE(s->obj.get()), name) : nullptr;
  if (method == nullptr || !PyFunction_Check(method)) {
    return Unsupported(absl::StrCat("iterating over a ", Describe(s)));
  }
  DT_ASSIGN_OR_RETURN(Sym bound, ObjectAttr(s, "__iter__"));
  DT_ASSIGN_OR_RETURN(Sym iterator, CallSym(bound, {}, Kwargs()));
  // An __iter__ that returns an object (often `self`, whose __next__ gives the items) would
  // otherwise recurse here without end: its items come from __next__, which is not traced.
  if (iterator->kind == SymKind::kObject) {
    return Unsupported(absl::StrCat("iterating over a ", Describe(s), " whose __iter__ returns an object"));
  }
  return Iterate(iterator);
}

}  // namespace dt::interpreter::trace
