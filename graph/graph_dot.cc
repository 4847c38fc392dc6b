// Graph::ToDot: the Graphviz picture of a graph (dyntrace.graphs(fn, format="dot"), the report).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "graph/graph.h"

namespace dt {
namespace {

// A DOT double-quoted string: only the quote and the backslash are special; newlines become
// DOT's centred line break.
std::string Quoted(absl::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  out += '"';
  return out;
}

std::string InputNode(int index) { return absl::StrCat("in", index); }
std::string OpNode(int index) { return absl::StrCat("n", index); }

// The non-tensor arguments a person would write (defaults left out), "dim=-1".
std::string ConstantArgs(const Node& n) {
  std::vector<std::string> parts;
  const auto& params = n.op->schema.params;
  for (size_t i = 0; i < n.args.size() && i < params.size(); ++i) {
    if (auto* scalar = std::get_if<ScalarRef>(&n.args[i].content)) {
      parts.push_back(absl::StrCat(params[i].name, "=s", scalar->slot));
      continue;
    }
    if (auto* dims = std::get_if<DimsRef>(&n.args[i].content)) {
      std::vector<std::string> sizes;
      for (size_t k = 0; k < dims->sizes.size(); ++k) {
        sizes.push_back(dims->slots[k] >= 0 ? absl::StrCat("s", dims->slots[k]) : absl::StrCat(dims->sizes[k]));
      }
      parts.push_back(absl::StrCat(params[i].name, "=(", absl::StrJoin(sizes, ", "), ")"));
      continue;
    }
    const auto* constant = std::get_if<ArgValue>(&n.args[i].content);
    if (constant == nullptr) continue;
    const std::string text = ArgValueToString(*constant);
    if (params[i].default_value.has_value() && text == ArgValueToString(*params[i].default_value)) {
      continue;
    }
    parts.push_back(absl::StrCat(params[i].name, "=", text));
  }
  return absl::StrJoin(parts, ", ");
}

}  // namespace

std::string Graph::ToDot(absl::string_view name) const {
  std::string out = absl::StrCat("digraph ", Quoted(name), " {\n");
  absl::StrAppend(&out, "  rankdir=TB;\n  node [fontname=\"monospace\", fontsize=10];\n",
                  "  edge [fontname=\"monospace\", fontsize=9];\n");
  // Where each value comes from: an input node or the node that produced it.
  std::vector<std::string> origin(values_.size());
  for (size_t i = 0; i < inputs_.size(); ++i) {
    const ValueId v = inputs_[i];
    origin[v] = InputNode(static_cast<int>(i));
    const std::string label = absl::StrCat("input v", v, ": ", DescribeMeta(values_[v].meta), "\n",
                                           input_sources_[i]);
    absl::StrAppend(&out, "  ", origin[v], " [shape=ellipse, style=filled, fillcolor=\"#dbeafe\", label=",
                    Quoted(label), "];\n");
  }
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Node& n = nodes_[i];
    std::vector<std::string> results;
    for (ValueId v : n.outputs) {
      origin[v] = OpNode(static_cast<int>(i));
      results.push_back(absl::StrCat("v", v, ": ", DescribeMeta(values_[v].meta)));
    }
    std::string label = absl::StrCat(n.op->name(), n.inplace ? "_" : "");
    if (std::string constants = ConstantArgs(n); !constants.empty()) {
      absl::StrAppend(&label, "(", constants, ")");
    }
    if (!results.empty()) absl::StrAppend(&label, "\n", absl::StrJoin(results, "\n"));
    if (n.location.line >= 0) absl::StrAppend(&label, "\nline ", n.location.line);
    absl::StrAppend(&out, "  ", OpNode(static_cast<int>(i)), " [shape=box, style=\"rounded,filled\", ",
                    "fillcolor=\"", n.inplace ? "#fde68a" : "#f3f4f6", "\", label=", Quoted(label),
                    "];\n");
    auto edge = [&](ValueId v) {
      if (origin[v].empty()) return;  // a value from nodes a rollback dropped: nothing to draw
      absl::StrAppend(&out, "  ", origin[v], " -> ", OpNode(static_cast<int>(i)), " [label=",
                      Quoted(absl::StrCat("v", v)), "];\n");
    };
    for (const GraphArg& a : n.args) {
      if (auto* v = std::get_if<ValueId>(&a.content)) edge(*v);
      if (auto* vs = std::get_if<std::vector<ValueId>>(&a.content)) {
        for (ValueId v : *vs) edge(v);
      }
    }
  }
  absl::StrAppend(&out, "  return_ [shape=doubleoctagon, style=filled, fillcolor=\"#dcfce7\", ",
                  "label=\"return\"];\n");
  for (size_t i = 0; i < outputs_.size(); ++i) {
    const ValueId v = outputs_[i];
    if (origin[v].empty()) continue;
    absl::StrAppend(&out, "  ", origin[v], " -> return_ [label=",
                    Quoted(absl::StrCat("out ", i, ": v", v)), "];\n");
  }
  out += "}\n";
  return out;
}

}  // namespace dt
