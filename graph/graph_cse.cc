// graph/graph_cse.cc: Graph::MergeCommonSubexpressions.
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "graph/graph.h"

namespace dt {
namespace {

// An exact spelling of a constant, or nullopt for one that is not compared by value (a tensor
// constant). Floats print as hex, so 0.1 and its neighbour, or 0.0 and -0.0, never collide.
std::optional<std::string> ConstantKey(const ArgValue& value) {
  struct Visitor {
    std::optional<std::string> operator()(None) const { return "N"; }
    std::optional<std::string> operator()(const Tensor&) const { return std::nullopt; }
    std::optional<std::string> operator()(const std::vector<Tensor>&) const { return std::nullopt; }
    std::optional<std::string> operator()(const Scalar& s) const {
      if (s.is_float()) return absl::StrFormat("f%a", s.ToDouble());
      return absl::StrCat(s.is_bool() ? "b" : "i", s.ToInt());
    }
    std::optional<std::string> operator()(const Dims& d) const { return absl::StrCat("d", absl::StrJoin(d, ",")); }
    std::optional<std::string> operator()(DType d) const { return absl::StrCat("t", static_cast<int>(d)); }
    std::optional<std::string> operator()(const Device& d) const { return absl::StrCat("D", d.ToString()); }
    std::optional<std::string> operator()(const std::string& s) const { return absl::StrCat("s", s.size(), ":", s); }
  };
  return std::visit(Visitor{}, value);
}

std::optional<std::string> ArgKey(const GraphArg& arg) {
  if (const auto* v = std::get_if<ValueId>(&arg.content)) return absl::StrCat("v", *v);
  if (const auto* vs = std::get_if<std::vector<ValueId>>(&arg.content)) return absl::StrCat("[", absl::StrJoin(*vs, ","), "]");
  if (const auto* s = std::get_if<ScalarRef>(&arg.content)) return absl::StrCat("r", s->slot);
  if (const auto* d = std::get_if<DimsRef>(&arg.content)) {
    return absl::StrCat("R", absl::StrJoin(d->sizes, ","), "/", absl::StrJoin(d->slots, ","));
  }
  return ConstantKey(std::get<ArgValue>(arg.content));
}

// The op and its arguments, spelled exactly; nullopt when the node can't be compared.
std::optional<std::string> NodeKey(const Node& n) {
  std::string key = n.op->name();
  for (const GraphArg& a : n.args) {
    std::optional<std::string> k = ArgKey(a);
    if (!k) return std::nullopt;
    absl::StrAppend(&key, "|", *k);
  }
  return key;
}

bool Writes(const Node& n) { return n.inplace || n.op->has(kWritesArguments); }

}  // namespace

int Graph::MergeCommonSubexpressions() {
  // The tensors something writes: a value sharing their storage reads differently before and
  // after the write, so no node producing one is merged.
  std::vector<Tensor> written;
  for (const Node& n : nodes_) {
    if (!Writes(n)) continue;
    for (const GraphArg& a : n.args) {
      if (const auto* v = std::get_if<ValueId>(&a.content)) written.push_back(values_[*v].meta);
      if (const auto* vs = std::get_if<std::vector<ValueId>>(&a.content)) {
        for (ValueId v : *vs) written.push_back(values_[v].meta);
      }
    }
  }
  std::vector<bool> returned(values_.size(), false);
  for (ValueId v : outputs_) returned[v] = true;
  auto mergeable = [&](const Node& n) {
    if (Writes(n) || n.op->has(kRandom) || MayRaiseOnValues(n) || n.outputs.empty()) return false;
    for (ValueId v : n.outputs) {
      if (returned[v]) return false;
      for (const Tensor& w : written) {
        if (values_[v].meta.SharesStorageWith(w)) return false;
      }
    }
    return true;
  };
  std::vector<ValueId> map(values_.size());
  for (ValueId v = 0; v < static_cast<ValueId>(map.size()); ++v) map[v] = v;
  absl::flat_hash_map<std::string, int> first_with_key;
  int merged = 0;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    Node& n = nodes_[i];
    for (GraphArg& a : n.args) a = RemapValues(a, map);
    if (Writes(n)) {
      first_with_key.clear();  // what earlier nodes read may have changed
      continue;
    }
    if (!mergeable(n)) continue;
    std::optional<std::string> key = NodeKey(n);
    if (!key) continue;
    auto [it, added] = first_with_key.try_emplace(*key, static_cast<int>(i));
    if (added) continue;
    const Node& earlier = nodes_[it->second];
    for (size_t o = 0; o < n.outputs.size(); ++o) map[n.outputs[o]] = earlier.outputs[o];
    ++merged;
  }
  for (ValueId& v : outputs_) v = map[v];
  return merged;
}

}  // namespace dt
