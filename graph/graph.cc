#include "graph/graph.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "graph/pointwise.h"
#include "runtime/copy.h"
#include "runtime/errors.h"

namespace dt {

std::string DescribeMeta(const Tensor& meta) {
  static const char* short_names[] = {"b8", "i32", "i64", "f16", "f32", "f64"};
  return absl::StrCat(short_names[static_cast<int>(meta.dtype())], DimsToString(meta.sizes()));
}

ValueId Graph::AddInput(const Tensor& meta, std::string source) {
  const ValueId id = static_cast<ValueId>(values_.size());
  values_.push_back(GraphValue{meta, -1, static_cast<int>(inputs_.size())});
  inputs_.push_back(id);
  input_sources_.push_back(std::move(source));
  return id;
}

std::vector<ValueId> Graph::AddNode(const OpDef* op, std::vector<GraphArg> args,
                                    const std::vector<Tensor>& output_metas, bool inplace,
                                    SourceLocation location) {
  Node node{op, std::move(args), {}, inplace, std::move(location)};
  const int index = static_cast<int>(nodes_.size());
  for (const Tensor& meta : output_metas) {
    node.outputs.push_back(static_cast<ValueId>(values_.size()));
    values_.push_back(GraphValue{meta, index, -1});
  }
  std::vector<ValueId> outs = node.outputs;
  nodes_.push_back(std::move(node));
  return outs;
}

bool Graph::MayRaiseOnValues(const Node& n) const {
  if (n.op->has(kChecksIndices)) return true;
  if (!n.op->has(kIntegerDivision) && !n.op->has(kIntegerPower)) return false;
  for (ValueId v : n.outputs) {
    if (!IsFloating(value(v).meta.dtype())) return true;
  }
  return false;
}

int Graph::EliminateDeadCode() {
  std::vector<bool> live(values_.size(), false);
  for (ValueId v : outputs_) live[v] = true;
  std::vector<bool> keep(nodes_.size(), false);
  for (int i = static_cast<int>(nodes_.size()) - 1; i >= 0; --i) {
    const Node& n = nodes_[i];
    // A node that may raise runs though its result is unused, as the plain call would.
    bool needed = n.inplace || n.op->has(kRandom) || n.op->has(kWritesArguments) || MayRaiseOnValues(n);
    for (ValueId v : n.outputs) needed |= live[v];
    if (!needed) continue;
    keep[i] = true;
    for (const GraphArg& a : n.args) {
      if (auto* v = std::get_if<ValueId>(&a.content)) live[*v] = true;
      if (auto* vs = std::get_if<std::vector<ValueId>>(&a.content)) {
        for (ValueId v : *vs) live[v] = true;
      }
    }
  }
  // Node indices shift; values keep their ids (producers are renumbered).
  std::vector<Node> kept;
  int removed = 0;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (!keep[i]) {
      ++removed;
      continue;
    }
    for (ValueId v : nodes_[i].outputs) values_[v].producer = static_cast<int>(kept.size());
    kept.push_back(std::move(nodes_[i]));
  }
  nodes_ = std::move(kept);
  return removed;
}

GraphArg RemapValues(const GraphArg& a, const std::vector<ValueId>& map) {
  if (auto* v = std::get_if<ValueId>(&a.content)) return GraphArg::Value(map[*v]);
  if (auto* vs = std::get_if<std::vector<ValueId>>(&a.content)) {
    std::vector<ValueId> ids;
    for (ValueId v : *vs) ids.push_back(map[v]);
    return GraphArg{std::move(ids)};
  }
  return a;
}

void CopyNode(const Graph& from, const Node& node, std::vector<ValueId>& map, Graph& to) {
  std::vector<GraphArg> args;
  for (const GraphArg& a : node.args) args.push_back(RemapValues(a, map));
  std::vector<Tensor> metas;
  for (ValueId v : node.outputs) metas.push_back(from.value(v).meta);
  std::vector<ValueId> ids = to.AddNode(node.op, std::move(args), metas, node.inplace, node.location);
  for (size_t i = 0; i < ids.size(); ++i) map[node.outputs[i]] = ids[i];
}

absl::StatusOr<Graph> RewriteNodes(const Graph& graph, NodeRewrite rewrite) {
  Graph out;
  std::vector<ValueId> map(graph.num_values(), -1);
  for (size_t i = 0; i < graph.inputs().size(); ++i) {
    map[graph.inputs()[i]] = out.AddInput(graph.value(graph.inputs()[i]).meta, graph.input_sources()[i]);
  }
  for (const Node& node : graph.nodes()) {
    DT_ASSIGN_OR_RETURN(const bool replaced, rewrite(node, map, out));
    if (!replaced) CopyNode(graph, node, map, out);
  }
  std::vector<ValueId> outputs;
  for (ValueId v : graph.outputs()) outputs.push_back(map[v]);
  out.SetOutputs(std::move(outputs));
  return out;
}

Dims ResolveDims(const DimsRef& dims, const std::vector<Scalar>& scalars) {
  Dims out = dims.sizes;
  for (size_t i = 0; i < out.size(); ++i) {
    if (dims.slots[i] >= 0) out[i] = scalars[dims.slots[i]].ToInt();
  }
  return out;
}

namespace {

std::string ValueName(ValueId v) { return absl::StrCat("v", v); }

std::string ArgToString(const GraphArg& arg) {
  if (auto* v = std::get_if<ValueId>(&arg.content)) return ValueName(*v);
  if (auto* s = std::get_if<ScalarRef>(&arg.content)) return absl::StrCat("s", s->slot);
  if (auto* d = std::get_if<DimsRef>(&arg.content)) {
    std::vector<std::string> sizes;
    for (size_t i = 0; i < d->sizes.size(); ++i) {
      sizes.push_back(d->slots[i] >= 0 ? absl::StrCat("s", d->slots[i]) : absl::StrCat(d->sizes[i]));
    }
    return absl::StrCat("(", absl::StrJoin(sizes, ", "), sizes.size() == 1 ? ",)" : ")");
  }
  if (auto* vs = std::get_if<std::vector<ValueId>>(&arg.content)) {
    std::vector<std::string> names;
    for (ValueId v : *vs) names.push_back(ValueName(v));
    return absl::StrCat("[", absl::StrJoin(names, ", "), "]");
  }
  return ArgValueToString(std::get<ArgValue>(arg.content));
}

}  // namespace

// One node as a Python statement: `v3 = dyntrace.op(v0, 2, dim=1)`, or the op's own form
// (subscripts). Arguments equal to their defaults are left out, like a person would write the
// call; once one argument needs its keyword (a default left out before it, a keyword-only
// parameter, a constant after the tensors), the rest are keywords too, so the line parses.
std::string Graph::NodeStatement(const Node& n, const std::vector<std::string>& outs) const {
  const auto& params_def = n.op->schema.params;
  std::vector<std::string> texts;
  std::vector<const ArgValue*> constants;
  for (const GraphArg& a : n.args) {
    texts.push_back(ArgToString(a));
    constants.push_back(std::get_if<ArgValue>(&a.content));
  }
  if (n.op->print_statement != nullptr) {
    if (std::optional<std::string> own = n.op->print_statement(outs, texts, constants)) return *own;
  }
  std::vector<std::string> args;
  bool keywords = false;
  for (size_t i = 0; i < n.args.size(); ++i) {
    if (params_def[i].default_value.has_value() && constants[i] != nullptr &&
        ArgValueToString(*constants[i]) == ArgValueToString(*params_def[i].default_value)) {
      keywords = true;  // later arguments no longer sit at their positions
      continue;
    }
    keywords |= params_def[i].keyword_only || (i > 0 && !std::holds_alternative<ValueId>(n.args[i].content));
    args.push_back(keywords ? absl::StrCat(params_def[i].name, "=", texts[i]) : texts[i]);
  }
  const std::string call = absl::StrCat("dyntrace.", n.op->name(), n.inplace ? "_" : "", "(",
                                        absl::StrJoin(args, ", "), ")");
  return outs.empty() ? call : absl::StrCat(absl::StrJoin(outs, ", "), " = ", call);
}

void Graph::NameScalar(int slot, std::string expression) {
  if (slot >= static_cast<int>(scalar_names_.size())) scalar_names_.resize(slot + 1);
  scalar_names_[slot] = std::move(expression);
}

void Graph::MarkSymbolicInputSize(int input, int dim, int slot) {
  if (input >= static_cast<int>(symbolic_input_sizes_.size())) symbolic_input_sizes_.resize(input + 1);
  std::vector<int>& dims = symbolic_input_sizes_[input];
  if (dim >= static_cast<int>(dims.size())) dims.resize(dim + 1, -1);
  dims[dim] = slot;
}

bool Graph::HasSymbolicInputSizes() const {
  for (const std::vector<int>& dims : symbolic_input_sizes_) {
    for (int slot : dims) {
      if (slot >= 0) return true;
    }
  }
  return false;
}

namespace {

// "f32[s0, 4]": an input's type with its symbolic sizes named.
std::string InputType(const Tensor& meta, const std::vector<int>* symbolic) {
  std::string type = DescribeMeta(meta);
  if (symbolic == nullptr || meta.ndim() == 0) return type;
  std::vector<std::string> sizes;
  for (int64_t d = 0; d < meta.ndim(); ++d) {
    const int slot = d < static_cast<int64_t>(symbolic->size()) ? (*symbolic)[d] : -1;
    sizes.push_back(slot >= 0 ? absl::StrCat("s", slot) : absl::StrCat(meta.size(d)));
  }
  return absl::StrCat(type.substr(0, type.find('[')), "[", absl::StrJoin(sizes, ", "), "]");
}

}  // namespace

std::string Graph::ToString(absl::string_view name) const {
  std::string out;
  std::vector<std::string> params;
  for (size_t i = 0; i < inputs_.size(); ++i) {
    std::string annotation = InputType(values_[inputs_[i]].meta,
                                       i < symbolic_input_sizes_.size() ? &symbolic_input_sizes_[i] : nullptr);
    // A 0-d tensor's "f32[]" is not an expression; "f32[()]" is.
    if (absl::EndsWith(annotation, "[]")) annotation.insert(annotation.size() - 1, "()");
    params.push_back(absl::StrFormat("%s: %s", ValueName(inputs_[i]), annotation));
  }
  absl::StrAppend(&out, "def ", name, "(", absl::StrJoin(params, ", "), "):\n");
  for (size_t i = 0; i < inputs_.size(); ++i) {
    absl::StrAppendFormat(&out, "    # %s = %s\n", ValueName(inputs_[i]), input_sources_[i]);
  }
  for (size_t slot = 0; slot < scalar_names_.size(); ++slot) {
    if (!scalar_names_[slot].empty()) absl::StrAppendFormat(&out, "    # s%d = %s\n", slot, scalar_names_[slot]);
  }
  for (const Node& n : nodes_) {
    std::vector<std::string> outs;
    for (ValueId v : n.outputs) outs.push_back(ValueName(v));
    std::string line = NodeStatement(n, outs);
    std::string type_note;
    if (n.outputs.size() == 1) type_note = DescribeMeta(values_[n.outputs[0]].meta);
    absl::StrAppendFormat(&out, "    %-48s # %s", line, type_note);
    if (n.location.line >= 0) absl::StrAppendFormat(&out, "  line %d", n.location.line);
    out += "\n";
  }
  std::vector<std::string> outs;
  for (ValueId v : outputs_) outs.push_back(ValueName(v));
  absl::StrAppend(&out, "    return (", absl::StrJoin(outs, ", "), outs.size() == 1 ? ",)" : ")", "\n");
  return out;
}

absl::StatusOr<std::vector<Tensor>> Graph::RunEager(const std::vector<Tensor>& inputs,
                                                    const std::vector<Scalar>& scalars) const {
  if (inputs.size() != inputs_.size()) {
    return Error(ErrorKind::kRuntime, absl::StrFormat("graph expects %d inputs, got %d",
                                                      inputs_.size(), inputs.size()));
  }
  std::vector<Tensor> env(values_.size());
  for (size_t i = 0; i < inputs_.size(); ++i) env[inputs_[i]] = inputs[i];
  for (size_t i = 0; i < nodes_.size(); ++i) DT_RETURN_IF_ERROR(RunNode(i, env, scalars));
  std::vector<Tensor> outs;
  for (ValueId v : outputs_) outs.push_back(env[v]);
  return outs;
}

namespace {

// A graph constant on a device (a tensor the traced code made there) planned over meta inputs:
// only its layout matters there, and running the op on the device with a meta operand would
// mix devices.
void DeviceConstantsToMeta(ArgValue& value) {
  auto to_meta = [](Tensor& t) {
    if (t.defined() && !t.device().is_cpu() && !t.is_meta()) {
      t = Tensor(Storage::Allocate(0, Device::Meta()), t.sizes(), t.strides(), 0, t.dtype());
    }
  };
  if (auto* t = std::get_if<Tensor>(&value)) to_meta(*t);
  if (auto* list = std::get_if<std::vector<Tensor>>(&value)) {
    for (Tensor& t : *list) to_meta(t);
  }
}

}  // namespace

absl::Status Graph::RunNode(size_t index, std::vector<Tensor>& env,
                            const std::vector<Scalar>& scalars, bool on_meta) const {
  const Node& n = nodes_[index];
  std::vector<ArgValue> values;
  values.reserve(n.args.size());
  for (const GraphArg& a : n.args) {
    if (auto* v = std::get_if<ValueId>(&a.content)) {
      values.push_back(env[*v]);
    } else if (auto* vs = std::get_if<std::vector<ValueId>>(&a.content)) {
      std::vector<Tensor> ts;
      for (ValueId v : *vs) ts.push_back(env[v]);
      values.push_back(std::move(ts));
    } else if (auto* s = std::get_if<ScalarRef>(&a.content)) {
      if (s->slot < 0 || s->slot >= static_cast<int>(scalars.size())) {
        return Error(ErrorKind::kRuntime, "graph: missing runtime scalar");
      }
      values.push_back(scalars[s->slot]);
    } else if (auto* d = std::get_if<DimsRef>(&a.content)) {
      for (int slot : d->slots) {
        if (slot >= static_cast<int>(scalars.size())) return Error(ErrorKind::kRuntime, "graph: missing runtime size");
      }
      values.push_back(ResolveDims(*d, scalars));
    } else {
      values.push_back(std::get<ArgValue>(a.content));
      if (on_meta) DeviceConstantsToMeta(values.back());
    }
  }
  if (on_meta) CreateOnMeta(*n.op, values);
  OpArgs args(std::move(values));
  if (n.inplace && n.op->kind == OpKind::kPointwise) {
    const Tensor target = args.tensor(0);
    DT_ASSIGN_OR_RETURN(Tensor r, RunPointwise(*n.op, args, &target));
    env[n.outputs[0]] = r;
    return absl::OkStatus();
  }
  DT_ASSIGN_OR_RETURN(OpResult r, CallOp(*n.op, args));
  if (n.inplace) {
    // A non-pointwise in-place form (clamp_): compute, then write into the target.
    const Tensor& target = args.tensor(0);
    if (r.at(0).data() != target.data()) {
      if (!CanCast(r[0].dtype(), target.dtype())) {
        return Error(ErrorKind::kType, absl::StrFormat("%s_: result type %s can't be cast to %s",
                                                       n.op->name(), DTypeScalarName(r[0].dtype()),
                                                       DTypeScalarName(target.dtype())));
      }
      DT_RETURN_IF_ERROR(CopyInto(target, r[0]));
    }
    env[n.outputs[0]] = target;
    return absl::OkStatus();
  }
  for (size_t i = 0; i < n.outputs.size() && i < r.size(); ++i) env[n.outputs[i]] = r[i];
  return absl::OkStatus();
}

}  // namespace dt
