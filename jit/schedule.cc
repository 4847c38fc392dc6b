#include "jit/schedule.h"

#include <algorithm>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "graph/decompose.h"
#include "graph/graph_recorder.h"
#include "graph/pointwise.h"
#include "graph/reduction.h"
#include "jit/attention_pattern.h"
#include "jit/reduction_split.h"
#include "jit/launch_geometry.h"

namespace dt::jit {
namespace {

enum class Fusion : uint8_t { kNone, kPointwise, kCast, kReduce };

struct Classified {
  Fusion fusion = Fusion::kNone;
  DType compute_dtype = DType::kFloat32;  // pointwise: operands convert to it; reduce: source
  Dims reduced_dims;                      // reduce
  bool keepdim = false;                   // reduce
};

bool HasScalarRef(const Node& n) {
  for (const GraphArg& a : n.args) {
    if (a.ReadsNumbers()) return true;
  }
  return false;
}

// What kind of kernel value `n` can become, if any.
Classified Classify(const Graph& g, const Node& n, bool in_place_write = false) {
  Classified c;
  if (n.inplace != in_place_write || n.outputs.size() != 1) return c;
  const Tensor& out = g.value(n.outputs[0]).meta;
  const OpDef& op = *n.op;
  if (op.kind == OpKind::kPointwise) {
    for (int i = 0; i < op.pointwise.arity; ++i) {
      const auto& content = n.args[i].content;
      if (!std::holds_alternative<ValueId>(content) && !std::holds_alternative<ScalarRef>(content) &&
          !std::holds_alternative<Scalar>(std::get<ArgValue>(content))) {
        return c;
      }
    }
    if (HasScalarRef(n)) {
      // A run-time number's type is guarded, but not known here: the result dtype tells the
      // compute dtype except for comparisons.
      if (op.pointwise.dtype_rule == DTypeRule::kToBool) return c;
      c.compute_dtype = out.dtype();
    } else {
      std::vector<ArgValue> metas;
      for (const GraphArg& a : n.args) {
        if (auto* v = std::get_if<ValueId>(&a.content)) metas.push_back(g.value(*v).meta);
        else metas.push_back(std::get<ArgValue>(a.content));
      }
      absl::StatusOr<PointwiseSignature> sig = InferPointwise(op, OpArgs(std::move(metas)));
      if (!sig.ok() || sig->result_dtype != out.dtype()) return c;
      c.compute_dtype = sig->compute_dtype;
    }
    // Integer division and powers check their operands' values first (ZeroDivisionError, negative
    // exponents): those stay eager.
    if (!IsFloating(c.compute_dtype) && (op.has(kIntegerDivision) || op.has(kIntegerPower))) return c;
    c.fusion = Fusion::kPointwise;
    return c;
  }
  if (op.name() == "_to" && n.args.size() == 2 && std::holds_alternative<ValueId>(n.args[0].content)) {
    const ValueId in = std::get<ValueId>(n.args[0].content);
    // The same dtype returns the input itself (an alias): only real conversions fuse.
    if (g.value(in).meta.dtype() != out.dtype()) c.fusion = Fusion::kCast;
    return c;
  }
  // Copies in the same dtype are casts to it, so they fuse with their neighbours and a
  // transpose-then-copy becomes indexing in one kernel: clone always copies; contiguous only
  // when its input is not contiguous (else it returns the input itself, an alias whose writes
  // the caller sees, which a kernel's fresh buffer would not be).
  if ((op.name() == "clone" || op.name() == "contiguous") && std::holds_alternative<ValueId>(n.args[0].content)) {
    const Tensor& in = g.value(std::get<ValueId>(n.args[0].content)).meta;
    if (op.name() == "clone" || !in.is_contiguous()) c.fusion = Fusion::kCast;
    return c;
  }
  if (op.kind == OpKind::kReduction && !op.reduction.scalar_fn.empty() &&
      std::holds_alternative<ValueId>(n.args[0].content) && !HasScalarRef(n)) {
    const Tensor& in = g.value(std::get<ValueId>(n.args[0].content)).meta;
    const ArgValue& dims_arg = std::get<ArgValue>(n.args[1].content);
    std::optional<Dims> dims;
    if (const Dims* d = std::get_if<Dims>(&dims_arg)) dims = *d;
    absl::StatusOr<Dims> normal = NormalizeReductionDims(dims, in.ndim());
    if (!normal.ok()) return c;
    c.reduced_dims = *normal;
    c.keepdim = std::get<Scalar>(std::get<ArgValue>(n.args[2].content)).ToBool();
    c.compute_dtype = in.dtype();
    if (n.args.size() > 3) {
      if (const DType* d = std::get_if<DType>(&std::get<ArgValue>(n.args[3].content))) c.compute_dtype = *d;
    }
    if (op.reduction.divides_by_count) c.compute_dtype = out.dtype();
    c.fusion = Fusion::kReduce;
  }
  return c;
}

struct Level {
  bool row_level = false;
  Mapping mapping = Mapping::kFull;
  bool column = false;  // a column reduction's result: complete only after the kernel
};

struct Group {
  int first_node = 0;
  ValueId domain = -1;
  Dims domain_shape;
  Dims reduced_dims;
  bool row = false;
  std::vector<int> nodes;
  std::vector<int> hoisted;  // view nodes run just before the kernel
  std::vector<int> writes;   // fused in-place writes among `nodes`
  // Writes since the group started (by `writer`, into `target`): a node reading that storage
  // may join only if it reads exactly a tensor the group itself wrote (the kernel then reads
  // its own result, not memory).
  struct Write {
    int writer;
    ValueId target;
  };
  std::vector<Write> written_since;
  absl::flat_hash_map<ValueId, Level> levels;
};

Dims ShapeOf(const Graph& g, ValueId v) { return Dims(g.value(v).meta.sizes()); }

constexpr int64_t kSmallWholeFold = int64_t{1} << 16;

// The shape of a row-level value of `group` with `mapping`.
Dims RowShape(const Group& group, Mapping mapping) {
  Dims shape;
  for (int64_t d = 0; d < static_cast<int64_t>(group.domain_shape.size()); ++d) {
    const bool folded = std::find(group.reduced_dims.begin(), group.reduced_dims.end(), d) !=
                        group.reduced_dims.end();
    if (!folded) shape.push_back(group.domain_shape[d]);
    else if (mapping == Mapping::kRowKeepdim) shape.push_back(1);
  }
  return shape;
}

class Scheduler {
 public:
  Scheduler(const Graph& g, ScheduleOptions options)
      : g_(g), options_(options), producer_group_(g.num_values(), -1), readers_(g.num_values()) {
    if (options_.max_operands <= 0) return;  // only OperandsWith reads readers_
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      for (ValueId v : TensorOperands(g.nodes()[i])) readers_[v].push_back(static_cast<int>(i));
    }
  }

  Program Run() {
    const auto& nodes = g_.nodes();
    node_group_.assign(nodes.size(), -1);
    hoisted_.assign(nodes.size(), false);
    hoisted_by_.assign(nodes.size(), -1);
    for (size_t i = 0; i < nodes.size(); ++i) {
      const Node& n = nodes[i];
      if (n.inplace) {
        if (options_.fuse_in_place_writes) FuseWrite(static_cast<int>(i));
        const auto* target = std::get_if<ValueId>(&n.args[0].content);
        NoteWrite(static_cast<int>(i), target != nullptr ? std::vector<ValueId>{*target} : TensorOperands(n));
        continue;
      }
      if (n.op->has(kWritesArguments)) {
        NoteWrite(static_cast<int>(i), TensorOperands(n));
        continue;
      }
      const Classified c = Classify(g_, n);
      if (c.fusion == Fusion::kNone) continue;
      if (c.fusion == Fusion::kReduce && !options_.fuse_outer_reductions && ReducesOuterDims(n, c)) {
        if (options_.fuse_column_reductions) TryJoinAsColumn(static_cast<int>(i), c);
        continue;
      }
      bool joined = false;
      // Latest producer group first: it is the most likely to take the whole chain.
      const std::vector<int> candidates = ProducerGroups(n);
      for (int group : candidates) {
        if (TryJoin(group, static_cast<int>(i), c)) {
          joined = true;
          break;
        }
      }
      // Siblings: a chain reading only earlier values may share a kernel with the latest
      // kernel over the same domain (x.exp() and x.sin() read x once).
      const ValueId domain_probe = c.fusion == Fusion::kReduce ? std::get<ValueId>(n.args[0].content) : n.outputs[0];
      for (int group = static_cast<int>(groups_.size()) - 1; !joined && group >= 0; --group) {
        if (std::find(candidates.begin(), candidates.end(), group) != candidates.end()) continue;
        if (ShapeOf(g_, domain_probe) == groups_[group].domain_shape) {
          joined = TryJoin(group, static_cast<int>(i), c);
        }
      }
      if (!joined) StartGroup(static_cast<int>(i), c);
    }
    return Lower();
  }

 private:
  std::vector<ValueId> TensorOperands(const Node& n) const {
    std::vector<ValueId> vs;
    for (const GraphArg& a : n.args) {
      if (auto* v = std::get_if<ValueId>(&a.content)) vs.push_back(*v);
      if (auto* list = std::get_if<std::vector<ValueId>>(&a.content)) vs.insert(vs.end(), list->begin(), list->end());
    }
    return vs;
  }

  // Whether `v` is ready when `group`'s kernel starts: made before it, inside it, or by a view
  // of such values (views are free and pure, so they move up to just before the kernel).
  bool AvailableTo(const Group& group, int group_index, ValueId v) const {
    return producer_group_[v] == group_index || ReadyBefore(group, v);
  }

  bool ReadyBefore(const Group& group, ValueId v) const {
    const int producer = g_.value(v).producer;
    if (producer < group.first_node) return true;
    const Node& n = g_.nodes()[producer];
    if (n.op->kind != OpKind::kView || n.inplace || node_group_[producer] >= 0 || hoisted_[producer]) return false;
    for (ValueId u : TensorOperands(n)) {
      if (!ReadyBefore(group, u)) return false;
    }
    return true;
  }

  // Marks the views `v` depends on (after the group's start) to run before the group's kernel.
  void Hoist(Group& group, ValueId v) {
    const int producer = g_.value(v).producer;
    if (producer < group.first_node || node_group_[producer] >= 0 || hoisted_[producer]) return;
    if (producer_group_[v] >= 0) return;
    for (ValueId u : TensorOperands(g_.nodes()[producer])) Hoist(group, u);
    hoisted_[producer] = true;
    hoisted_by_[producer] = static_cast<int>(&group - groups_.data());
    group.hoisted.push_back(producer);
  }

  // Whether reduction `n` keeps its input's innermost memory dim (the smallest stride among dims
  // longer than 1).
  bool ReducesOuterDims(const Node& n, const Classified& c) const {
    const Tensor& in = g_.value(std::get<ValueId>(n.args[0].content)).meta;
    int64_t innermost = -1;
    for (int64_t d = 0; d < in.ndim(); ++d) {
      if (in.size(d) > 1 && (innermost < 0 || std::abs(in.stride(d)) < std::abs(in.stride(innermost)))) innermost = d;
    }
    return innermost >= 0 && std::find(c.reduced_dims.begin(), c.reduced_dims.end(), innermost) == c.reduced_dims.end();
  }

  // A kernel started before write `node` runs before it, and one holding it loads each element
  // before storing it: a later node reading the written storage from memory can't join either
  // (it would read the old contents), though nodes that don't read it still may (an
  // optimizer's update of m, v and p is one kernel). A later read of exactly the tensor the
  // kernel wrote (the graph names a written tensor by its id from before the write) reads the
  // kernel's own result instead (LowerGroup's `rebound`).
  void NoteWrite(int node, const std::vector<ValueId>& written) {
    for (Group& group : groups_) {
      for (ValueId v : written) group.written_since.push_back({node, v});
    }
  }

  bool ReadsWrittenSince(int group_index, const Node& n) const {
    for (ValueId v : TensorOperands(n)) {
      for (const Group::Write& w : groups_[group_index].written_since) {
        if (!g_.value(v).meta.SharesStorageWith(g_.value(w.target).meta)) continue;
        if (w.target != v || node_group_[w.writer] != group_index) return true;
      }
    }
    return false;
  }

  // Reduction `node` folds the rows of its input, a full-level value of a row kernel
  // whose reduced dims are the input's trailing dims (a sum over the batch of a layer norm's
  // backward terms): it joins that kernel as a column reduction.
  void TryJoinAsColumn(int node, const Classified& c) {
    const ValueId input = std::get<ValueId>(g_.nodes()[node].args[0].content);
    const int group_index = producer_group_[input];
    if (group_index < 0) return;
    Group& group = groups_[group_index];
    auto level = group.levels.find(input);
    if (!group.row || level == group.levels.end() || level->second.row_level ||
        level->second.column || ShapeOf(g_, input) != group.domain_shape) {
      return;
    }
    const int64_t rank = static_cast<int64_t>(group.domain_shape.size());
    const int64_t kept = rank - static_cast<int64_t>(group.reduced_dims.size());
    for (int64_t d = 0; d < rank; ++d) {
      const bool trailing = d >= kept;
      const bool row_reduced = std::find(group.reduced_dims.begin(), group.reduced_dims.end(), d) != group.reduced_dims.end();
      const bool column_reduced = std::find(c.reduced_dims.begin(), c.reduced_dims.end(), d) != c.reduced_dims.end();
      if (trailing != row_reduced || column_reduced == row_reduced) return;
    }
    if (ReadsWrittenSince(group_index, g_.nodes()[node])) return;
    Add(group_index, node, c, Level{false, Mapping::kFull, true});
  }

  // The kernels that make `n`'s operands, latest first.
  std::vector<int> ProducerGroups(const Node& n) const {
    std::vector<int> groups;
    for (ValueId v : TensorOperands(n)) {
      const int group = producer_group_[v];
      if (group >= 0 && std::find(groups.begin(), groups.end(), group) == groups.end()) groups.push_back(group);
    }
    std::sort(groups.rbegin(), groups.rend());
    return groups;
  }

  // A pointwise in-place write joins the kernel of one of its producers, stored into the
  // written tensor. That kernel runs at its first node, so the write moves up
  // to there: allowed only when no node between them outside the kernel touches the written
  // storage, and the kernel reads it only element for element (a full-level pointwise kernel,
  // no other view of it among its operands).
  void FuseWrite(int node) {
    const Node& n = g_.nodes()[node];
    const Classified c = Classify(g_, n, /*in_place_write=*/true);
    if (c.fusion != Fusion::kPointwise) return;
    const auto* target = std::get_if<ValueId>(&n.args[0].content);
    if (target == nullptr || ShapeOf(g_, *target) != ShapeOf(g_, n.outputs[0])) return;
    const std::vector<int> candidates = ProducerGroups(n);
    for (int group : candidates) {
      if (!WriteMayMoveUp(group, node, *target)) continue;
      if (TryJoin(group, node, c)) {
        groups_[group].writes.push_back(node);
        return;
      }
    }
    // A write no kernel feeds (`v.mul_(beta2)`) may join the latest kernel over its shape.
    for (int group = static_cast<int>(groups_.size()) - 1; group >= 0; --group) {
      if (groups_[group].domain_shape != ShapeOf(g_, n.outputs[0])) continue;
      if (std::find(candidates.begin(), candidates.end(), group) != candidates.end()) continue;
      if (WriteMayMoveUp(group, node, *target) && TryJoin(group, node, c)) {
        groups_[group].writes.push_back(node);
        return;
      }
      break;
    }
    // Alone, the write is a kernel of its own: on the CPU no better than the eager node; on CUDA
    // it keeps the update a launch of the program (capturable into its CUDA graph).
    if (!options_.in_place_writes_alone || ReadsOtherViewsOf(n, *target)) return;
    StartGroup(node, c);
    groups_.back().writes.push_back(node);
  }

  // Whether `n` reads the storage it writes through anything but the written tensor itself: a
  // kernel reading element for element could then read an element another thread already wrote.
  bool ReadsOtherViewsOf(const Node& n, ValueId target) const {
    const Tensor& written = g_.value(target).meta;
    for (ValueId v : TensorOperands(n)) {
      if (v != target && g_.value(v).meta.SharesStorageWith(written)) return true;
    }
    return false;
  }

  bool WriteMayMoveUp(int group_index, int node, ValueId target) const {
    const Tensor& written = g_.value(target).meta;
    auto touches = [&](ValueId v) {
      const Tensor& m = g_.value(v).meta;
      return m.SharesStorageWith(written) && !(v == target || SameMetaTensor(m, written));
    };
    if (ReadsOtherViewsOf(g_.nodes()[node], target)) return false;
    const Group& group = groups_[group_index];
    // The written tensor exists before the kernel starts (not one of its own fresh buffers).
    if (group.row || producer_group_[target] == group_index) return false;
    // One store per element of a storage: two into the same memory through distinct operand
    // pointers could be reordered.
    for (int w : group.writes) {
      if (g_.value(std::get<ValueId>(g_.nodes()[w].args[0].content)).meta.SharesStorageWith(written)) return false;
    }
    for (int member : group.nodes) {
      for (ValueId v : TensorOperands(g_.nodes()[member])) {
        if (touches(v)) return false;
      }
    }
    for (int between = group.first_node + 1; between < node; ++between) {
      if (node_group_[between] == group_index) continue;
      for (ValueId v : TensorOperands(g_.nodes()[between])) {
        if (g_.value(v).meta.SharesStorageWith(written)) return false;
      }
      for (ValueId v : g_.nodes()[between].outputs) {
        if (g_.value(v).meta.SharesStorageWith(written)) return false;
      }
    }
    return true;
  }

  bool TryJoin(int group_index, int node, const Classified& c) {
    Group& group = groups_[group_index];
    if (ReadsWrittenSince(group_index, g_.nodes()[node])) return false;
    if (options_.max_operands > 0 && OperandsWith(group_index, node) > options_.max_operands) return false;
    const Node& n = g_.nodes()[node];
    for (ValueId v : TensorOperands(n)) {
      if (!AvailableTo(group, group_index, v)) return false;
      auto level = group.levels.find(v);
      if (level != group.levels.end() && level->second.column) return false;  // complete only after the kernel
    }
    const Dims out_shape = ShapeOf(g_, n.outputs[0]);
    if (c.fusion == Fusion::kReduce) {
      const ValueId input = std::get<ValueId>(n.args[0].content);
      // The input is a full-level value of the group, or a value ready before it starts.
      auto it = group.levels.find(input);
      if (it != group.levels.end() && it->second.row_level) return false;
      if (ShapeOf(g_, input) != group.domain_shape) return false;
      if (group.row && c.reduced_dims != group.reduced_dims) return false;
      if (c.reduced_dims.empty() || !group.writes.empty()) return false;  // writes need a pointwise kernel
      group.row = true;
      group.reduced_dims = c.reduced_dims;
      Add(group_index, node, c, Level{true, c.keepdim ? Mapping::kRowKeepdim : Mapping::kRowSqueezed});
      return true;
    }
    // Pointwise or cast: full-level when shaped like the domain, else row-level when shaped like
    // the group's rows and fed only by row values.
    bool any_full = false;
    std::optional<Mapping> row_mapping;
    for (ValueId v : TensorOperands(n)) {
      auto it = group.levels.find(v);
      if (it == group.levels.end()) continue;
      if (!it->second.row_level) {
        any_full = true;
      } else {
        if (row_mapping.has_value() && *row_mapping != it->second.mapping) return false;
        row_mapping = it->second.mapping;
      }
    }
    if (row_mapping.has_value() && !any_full && out_shape == RowShape(group, *row_mapping)) {
      Add(group_index, node, c, Level{true, *row_mapping});
      return true;
    }
    // Row values meet full ones only keepdim-shaped, so broadcasting lines them up by row; or
    // squeezed, when the group folds its whole domain into one 0-d row value.
    if (row_mapping.has_value() && *row_mapping != Mapping::kRowKeepdim && !SmallWholeFold(group)) return false;
    if (out_shape != group.domain_shape) return false;
    Add(group_index, node, c, Level{false, Mapping::kFull});
    return true;
  }

  // Whether `group` folds every dim of a static domain of at most kSmallWholeFold elements. Its
  // one row's squeezed (0-d) values then broadcast over the domain as keepdim ones would, so a
  // chain of dependent full reductions (`x * (x * x).mean().rsqrt()`, repeated) stays one
  // kernel instead of a launch per reduction. Such a kernel runs its row in one CUDA block
  // (passes after a reduction can't be split across blocks), which a small domain's launches
  // outweigh and a large one's would not.
  bool SmallWholeFold(const Group& group) const {
    if (group.reduced_dims.size() != group.domain_shape.size() || g_.HasSymbolicInputSizes()) return false;
    int64_t elements = 1;
    for (int64_t size : group.domain_shape) elements *= size;
    return elements <= kSmallWholeFold;
  }

  void StartGroup(int node, const Classified& c) {
    const Node& n = g_.nodes()[node];
    Group group;
    group.first_node = node;
    if (c.fusion == Fusion::kReduce) {
      group.domain = std::get<ValueId>(n.args[0].content);
      group.domain_shape = ShapeOf(g_, group.domain);
      group.reduced_dims = c.reduced_dims;
      group.row = true;
      groups_.push_back(std::move(group));
      Add(static_cast<int>(groups_.size()) - 1, node, c,
          Level{true, c.keepdim ? Mapping::kRowKeepdim : Mapping::kRowSqueezed});
      return;
    }
    group.domain = n.outputs[0];
    group.domain_shape = ShapeOf(g_, group.domain);
    groups_.push_back(std::move(group));
    Add(static_cast<int>(groups_.size()) - 1, node, c, Level{false, Mapping::kFull});
  }

  void Add(int group_index, int node, const Classified& c, Level level) {
    Group& group = groups_[group_index];
    for (ValueId v : TensorOperands(g_.nodes()[node])) Hoist(group, v);
    group.nodes.push_back(node);
    node_group_[node] = group_index;
    const ValueId out = g_.nodes()[node].outputs[0];
    group.levels[out] = level;
    producer_group_[out] = group_index;
    classified_[node] = c;
  }

  // How many operands `group_index`'s kernel would have with `node` joined: the values its nodes
  // read from outside it, its run-time numbers, and the values it makes that the graph returns,
  // some other node reads, or a write stores (nodes not scheduled yet count as outside: an upper
  // bound).
  int OperandsWith(int group_index, int node) const {
    std::vector<int> members = groups_[group_index].nodes;
    members.push_back(node);
    absl::flat_hash_set<ValueId> made, read;
    absl::flat_hash_set<int> slots;
    for (int m : members) {
      for (ValueId v : g_.nodes()[m].outputs) made.insert(v);
    }
    for (int m : members) {
      for (ValueId v : TensorOperands(g_.nodes()[m])) {
        if (!made.contains(v)) read.insert(v);
      }
      for (const GraphArg& a : g_.nodes()[m].args) {
        if (const auto* ref = std::get_if<ScalarRef>(&a.content)) slots.insert(ref->slot);
      }
    }
    const absl::flat_hash_set<int> inside(members.begin(), members.end());
    int stored = 0;
    for (int m : members) {
      const Node& member = g_.nodes()[m];
      for (ValueId v : member.outputs) {
        // A write always stores (later readers name the written tensor, not its result).
        bool outside = member.inplace || std::find(g_.outputs().begin(), g_.outputs().end(), v) != g_.outputs().end();
        for (int reader : readers_[v]) outside = outside || !inside.contains(reader);
        stored += outside ? 1 : 0;
      }
    }
    return static_cast<int>(read.size() + slots.size()) + stored;
  }

  // Whether value `v` of `group_index` is read outside its kernel (so it must be stored).
  bool NeededOutside(int group_index, ValueId v) const {
    for (ValueId out : g_.outputs()) {
      if (out == v) return true;
    }
    const auto& nodes = g_.nodes();
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (node_group_[i] == group_index) continue;
      for (ValueId u : TensorOperands(nodes[i])) {
        if (u == v) return true;
      }
    }
    return false;
  }

  // Builds the kernel of a group; nullopt when its geometry can't be a kernel.
  std::optional<Kernel> LowerGroup(int group_index) {
    const Group& group = groups_[group_index];
    Kernel k;
    k.nodes = group.nodes;
    k.domain = group.domain;
    k.reduced_dims = group.reduced_dims;
    absl::flat_hash_map<ValueId, int> value_of;  // graph value -> kernel value
    // A written tensor, read after its write in the kernel: the write's result.
    absl::flat_hash_map<ValueId, ValueId> rebound;
    auto load = [&](ValueId v, int slot, DType dtype, Mapping mapping) {
      for (size_t i = 0; i < k.values.size(); ++i) {
        const KernelValue& kv = k.values[i];
        if (kv.kind != ValueKind::kLoad) continue;
        const KernelOperand& op = k.operands[kv.operand];
        if (op.value == v && op.scalar_slot == slot && op.mapping == mapping && op.dtype == dtype) {
          return static_cast<int>(i);
        }
      }
      KernelOperand op;
      op.value = v;
      op.scalar_slot = slot;
      op.dtype = dtype;
      op.mapping = mapping;
      k.operands.push_back(op);
      KernelValue kv;
      kv.kind = ValueKind::kLoad;
      kv.dtype = dtype;
      kv.row_level = mapping != Mapping::kFull || slot >= 0;
      kv.row_mapping = mapping;
      kv.operand = static_cast<int>(k.operands.size()) - 1;
      k.values.push_back(kv);
      return static_cast<int>(k.values.size()) - 1;
    };
    for (int node : group.nodes) {
      const Node& n = g_.nodes()[node];
      const Classified& c = classified_.at(node);
      const ValueId out = n.outputs[0];
      const Level level = group.levels.at(out);
      const Mapping operand_mapping = level.row_level ? level.mapping : Mapping::kFull;
      auto operand = [&](const GraphArg& a, DType want) -> int {
        if (auto* read = std::get_if<ValueId>(&a.content)) {
          auto written = rebound.find(*read);
          const ValueId* v = written != rebound.end() ? &written->second : read;
          auto it = value_of.find(*v);
          if (it != value_of.end()) return it->second;
          return load(*v, -1, g_.value(*v).meta.dtype(), operand_mapping);
        }
        if (auto* s = std::get_if<ScalarRef>(&a.content)) return load(-1, s->slot, want, Mapping::kFull);
        KernelValue kv;
        kv.kind = ValueKind::kConstant;
        kv.dtype = want;
        kv.row_level = true;
        kv.constant = std::get<Scalar>(std::get<ArgValue>(a.content));
        k.values.push_back(kv);
        return static_cast<int>(k.values.size()) - 1;
      };
      KernelValue kv;
      kv.dtype = g_.value(out).meta.dtype();
      kv.row_level = level.row_level;
      kv.row_mapping = level.row_level ? level.mapping : Mapping::kFull;
      kv.graph_value = out;
      kv.op = n.op;
      kv.compute_dtype = c.compute_dtype;
      if (c.fusion == Fusion::kPointwise) {
        kv.kind = ValueKind::kPointwise;
        const int arity = n.op->pointwise.arity;
        for (int i = 0; i < arity; ++i) {
          // where's condition stays bool; every other operand converts to the compute dtype.
          const DType want = arity == 3 && i == 0 ? DType::kBool : c.compute_dtype;
          kv.args.push_back(operand(n.args[i], want));
        }
      } else if (c.fusion == Fusion::kCast) {
        kv.kind = ValueKind::kCast;
        kv.args.push_back(operand(n.args[0], DType::kFloat32));
      } else {
        kv.kind = level.column ? ValueKind::kColumnReduce : ValueKind::kReduce;
        kv.accumulator_dtype = AccumulatorDType(n.op->reduction.combiner, c.compute_dtype);
        const ValueId input = std::get<ValueId>(n.args[0].content);
        auto it = value_of.find(input);
        kv.args.push_back(it != value_of.end() ? it->second
                                               : load(input, -1, g_.value(input).meta.dtype(), Mapping::kFull));
      }
      k.values.push_back(kv);
      value_of[out] = static_cast<int>(k.values.size()) - 1;
      const bool writes = std::find(group.writes.begin(), group.writes.end(), node) != group.writes.end();
      if (writes || NeededOutside(group_index, out)) {
        KernelOperand op;
        op.value = out;
        op.dtype = kv.dtype;
        op.mapping = kv.row_mapping;
        op.is_output = true;
        op.source = value_of[out];
        if (writes) op.write_into = std::get<ValueId>(n.args[0].content);
        k.operands.push_back(op);
      }
      if (writes) rebound[std::get<ValueId>(n.args[0].content)] = out;
    }
    // Predict the innermost strides from the trace's own tensors.
    std::vector<Tensor> metas;
    for (const KernelOperand& op : k.operands) {
      metas.push_back(op.scalar_slot >= 0 ? Tensor::Empty({}, op.dtype, Device::Meta()) : g_.value(op.value).meta);
    }
    absl::StatusOr<LaunchGeometry> geometry = PrepareLaunch(k, group.domain_shape, metas);
    if (!geometry.ok()) return std::nullopt;
    for (size_t i = 0; i < k.operands.size(); ++i) {
      const int64_t s = geometry->inner_stride(i);
      k.operands[i].predicted_inner_stride = s == 0 || s == 1 ? static_cast<int>(s) : -1;
    }
    return k;
  }

  Program Lower() {
    Program p;
    std::vector<int> kernel_of_group(groups_.size(), -1);
    for (size_t gi = 0; gi < groups_.size(); ++gi) {
      std::optional<Kernel> k = LowerGroup(static_cast<int>(gi));
      if (!k.has_value()) continue;
      k->name = absl::StrCat("kernel", p.kernels.size());
      kernel_of_group[gi] = static_cast<int>(p.kernels.size());
      p.kernels.push_back(std::move(*k));
    }
    for (size_t i = 0; i < g_.nodes().size(); ++i) {
      const int gi = node_group_[i];
      if (hoisted_[i] && kernel_of_group[hoisted_by_[i]] >= 0) continue;  // runs before its kernel
      if (gi < 0 || kernel_of_group[gi] < 0) {
        p.steps.push_back(Step{Step::Kind::kNode, static_cast<int>(i)});
      } else if (groups_[gi].first_node == static_cast<int>(i)) {
        std::vector<int> views = groups_[gi].hoisted;
        std::sort(views.begin(), views.end());
        for (int v : views) p.steps.push_back(Step{Step::Kind::kNode, v});
        p.steps.push_back(Step{Step::Kind::kKernel, kernel_of_group[gi]});
      }
    }
    return p;
  }

  const Graph& g_;
  const ScheduleOptions options_;
  std::vector<int> producer_group_;
  std::vector<std::vector<int>> readers_;  // by value: the nodes that read it
  std::vector<int> node_group_;
  std::vector<bool> hoisted_;
  std::vector<int> hoisted_by_;
  std::vector<Group> groups_;
  absl::flat_hash_map<int, Classified> classified_;
};

}  // namespace

absl::StatusOr<Program> Schedule(const Graph& graph, ScheduleOptions options) {
  std::optional<Graph> with_fused_attention;
  if (options.fuse_attention) {
    DT_ASSIGN_OR_RETURN(with_fused_attention, FuseAttention(graph, options.device));
  }
  DT_ASSIGN_OR_RETURN(Graph decomposed, Decompose(with_fused_attention ? *with_fused_attention : graph));
  if (options.split_strided_reductions) {
    DT_ASSIGN_OR_RETURN(decomposed, SplitStridedReductions(decomposed));
  }
  decomposed.MergeCommonSubexpressions();
  decomposed.EliminateDeadCode();
  Program program = Scheduler(decomposed, options).Run();
  program.graph = std::move(decomposed);
  return program;
}

namespace {

void TouchNode(const Graph& g, int node, int step, std::vector<int>& last) {
  const Node& n = g.nodes()[node];
  for (const GraphArg& a : n.args) {
    if (const auto* v = std::get_if<ValueId>(&a.content)) last[*v] = step;
    if (const auto* vs = std::get_if<std::vector<ValueId>>(&a.content)) {
      for (ValueId v : *vs) last[v] = step;
    }
  }
  for (ValueId v : n.outputs) last[v] = step;
}

}  // namespace

std::vector<std::vector<ValueId>> ReleasePoints(const Program& program) {
  const Graph& g = program.graph;
  std::vector<int> last(g.num_values(), -1);
  for (int s = 0; s < static_cast<int>(program.steps.size()); ++s) {
    const Step& step = program.steps[s];
    if (step.kind == Step::Kind::kNode) {
      TouchNode(g, step.index, s, last);
      continue;
    }
    const Kernel& k = program.kernels[step.index];
    for (const KernelOperand& op : k.operands) {
      if (op.value >= 0) last[op.value] = s;
      if (op.write_into >= 0) last[op.write_into] = s;
    }
    for (int node : k.nodes) TouchNode(g, node, s, last);
  }
  for (ValueId v : g.outputs()) last[v] = -1;
  std::vector<std::vector<ValueId>> release(program.steps.size());
  for (ValueId v = 0; v < static_cast<ValueId>(last.size()); ++v) {
    if (last[v] >= 0) release[last[v]].push_back(v);
  }
  return release;
}

std::vector<bool> InputsWrittenInPlace(const Program& program) {
  bool fuses_writes = false;
  for (const Kernel& k : program.kernels) {
    for (const KernelOperand& op : k.operands) fuses_writes = fuses_writes || op.write_into >= 0;
  }
  if (!fuses_writes) return {};
  const Graph& g = program.graph;
  std::vector<bool> written(g.inputs().size(), false);
  for (const Node& n : g.nodes()) {
    const auto* target = n.inplace ? std::get_if<ValueId>(&n.args[0].content) : nullptr;
    if (target == nullptr) continue;
    for (size_t i = 0; i < written.size(); ++i) {
      written[i] = written[i] || g.value(g.inputs()[i]).meta.SharesStorageWith(g.value(*target).meta);
    }
  }
  return written;
}

bool WrittenInputOverlaps(const std::vector<Tensor>& inputs, const std::vector<bool>& written) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (!written[i] && !written[j]) continue;
      if (inputs[i].defined() && inputs[j].defined() && inputs[i].SharesStorageWith(inputs[j])) return true;
    }
  }
  return false;
}


}  // namespace dt::jit
