// interpreter/trace_reconstruct.cc: trace values back into Python objects and frame state (output specs).
#include <Python.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "graph/pointwise.h"
#include "interpreter/py_str.h"
#include "interpreter/py_types.h"
#include "interpreter/sym_dict.h"
#include "interpreter/tracer_internal.h"
#include "runtime/errors.h"
#include "runtime/indexing.h"

namespace dt::trace {

// ---------------------------------------------------------------------------------------------

absl::StatusOr<OutputSpec> Tracer::ToOutput(const Sym& s, std::vector<ValueId>& outputs) {
  OutputSpec out;
  // Objects with identity built by the trace are built once, however many slots hold them.
  // Tuples too: `copy.copy(t) is t` of a tuple the trace built must stay true.
  const bool has_identity = s->kind == SymKind::kList || s->kind == SymKind::kDict || s->kind == SymKind::kTuple ||
                            s->kind == SymKind::kCell || s->kind == SymKind::kIter ||
                            (s->kind == SymKind::kFunction && !PyFunction_Check(s->obj.get()));
  if (has_identity && s->source == nullptr) {
    auto it = memo_.find(s.get());
    if (it != memo_.end()) {
      out.kind = OutputSpec::Kind::kMemo;
      out.index = it->second;
      return out;
    }
    out.memo = num_memo_++;
    memo_[s.get()] = out.memo;
  }
  auto child = [&](const Sym& c) -> absl::StatusOr<OutputSpec> {
    if (c == nullptr || c->kind == SymKind::kNull) {
      // Only cells and a made function's optional parts may be empty.
      if (s->kind != SymKind::kCell && s->kind != SymKind::kFunction) {
        return Unsupported(absl::StrCat("rebuilding a ", Describe(s), " with an empty slot"));
      }
      OutputSpec n;
      n.kind = OutputSpec::Kind::kNull;
      return n;
    }
    return ToOutput(c, outputs);
  };
  switch (s->kind) {
    case SymKind::kTensor: {
      const GraphValue& v = graph_->value(s->value);
      if (v.producer < 0 && s->source != nullptr) {
        out.kind = OutputSpec::Kind::kSource;
        out.source = s->source;
        return out;
      }
      out.kind = OutputSpec::Kind::kGraphOutput;
      for (size_t i = 0; i < outputs.size(); ++i) {
        if (outputs[i] == s->value) {
          out.index = static_cast<int>(i);
          return out;
        }
      }
      out.index = static_cast<int>(outputs.size());
      outputs.push_back(s->value);
      return out;
    }
    case SymKind::kNull:
      out.kind = OutputSpec::Kind::kNull;
      return out;
    case SymKind::kNumber:
      out.kind = OutputSpec::Kind::kScalarSlot;
      out.index = s->value;
      return out;
    case SymKind::kRunIter:
      out.kind = OutputSpec::Kind::kSource;  // the same iterator object, at its current position
      out.source = s->source;
      return out;
    case SymKind::kConst:
    case SymKind::kOpMethod:
    case SymKind::kFunction:
      if (s->kind == SymKind::kOpMethod && !s->items.empty()) {
        out.kind = OutputSpec::Kind::kBoundMethod;
        out.obj = s->obj;
        DT_ASSIGN_OR_RETURN(OutputSpec self, child(s->items[0]));
        out.children.push_back(std::move(self));
        return out;
      }
      if (s->kind == SymKind::kFunction && !PyFunction_Check(s->obj.get())) {
        out.kind = OutputSpec::Kind::kFunction;
        out.obj = s->obj;
        out.globals = s->globals;
        for (const Sym& part : {s->defaults, s->kwdefaults, s->closure}) {
          DT_ASSIGN_OR_RETURN(OutputSpec c, child(part));
          out.children.push_back(std::move(c));
        }
        return out;
      }
      // The run-time object, not the one seen when tracing: values are guarded by equality, so
      // an equal but different object (`a is c` of equal strings) may be there now.
      if (s->source != nullptr) {
        out.kind = OutputSpec::Kind::kSource;
        out.source = s->source;
        return out;
      }
      out.kind = OutputSpec::Kind::kConst;
      out.obj = s->obj;
      return out;
    case SymKind::kObject:
      out.kind = OutputSpec::Kind::kSource;
      out.source = s->source;
      return out;
    case SymKind::kShape: {
      DT_ASSIGN_OR_RETURN(Sym t, MaterializeShape(s));
      return ToOutput(t, outputs);
    }
    case SymKind::kCell: {
      if (s->source != nullptr) {
        out.kind = OutputSpec::Kind::kSource;
        out.source = s->source;
        return out;
      }
      out.kind = OutputSpec::Kind::kCell;
      DT_ASSIGN_OR_RETURN(OutputSpec c, child(s->items.empty() ? nullptr : s->items[0]));
      out.children.push_back(std::move(c));
      return out;
    }
    case SymKind::kBoundMethod: {
      out.kind = OutputSpec::Kind::kBoundMethod;
      out.obj = s->obj;
      DT_ASSIGN_OR_RETURN(OutputSpec self, child(s->items[0]));
      out.children.push_back(std::move(self));
      return out;
    }
    case SymKind::kIter:
    case SymKind::kSlice: {
      if (s->kind == SymKind::kIter && !s->loop_iterator) {
        return Unsupported("an iterator made by zip(), enumerate(), reversed() or a dict view "
                           "crosses a graph break (it would change type)");
      }
      out.kind = s->kind == SymKind::kIter ? OutputSpec::Kind::kIterator : OutputSpec::Kind::kSlice;
      for (const Sym& item : s->items) {
        DT_ASSIGN_OR_RETURN(OutputSpec c, child(item));
        out.children.push_back(std::move(c));
      }
      return out;
    }
    case SymKind::kTuple:
    case SymKind::kList:
    case SymKind::kDict: {
      // The caller's own list/dict (unchanged), or its tuple: rebuilding a tuple would break
      // `is` (`ex is exc_info` after `ex = exc_info`).
      if (s->from_frame && s->source != nullptr) {
        out.kind = OutputSpec::Kind::kSource;
        out.source = s->source;
        return out;
      }
      out.kind = s->kind == SymKind::kTuple ? OutputSpec::Kind::kTuple
                 : s->kind == SymKind::kList ? OutputSpec::Kind::kList : OutputSpec::Kind::kDict;
      for (const Sym& item : s->items) {
        DT_ASSIGN_OR_RETURN(OutputSpec c, child(item));
        out.children.push_back(std::move(c));
      }
      out.keys = s->keys;
      return out;
    }
  }
  return Unsupported(absl::StrCat("rebuilding a ", Describe(s)));
}

}  // namespace dt::trace
