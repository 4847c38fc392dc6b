// interpreter/trace_partial.cc: functools.partial objects, made in the trace or passed in.
//
// A kPartial Sym is the function and the arguments it binds: items = [func, positional...,
// keyword values...], keys = the keyword names. Calling it calls func with those arguments
// first (keywords of the call win), which the tracer follows like any call. One made by the
// trace is rebuilt by calling functools.partial when it leaves; one of the caller is read
// through its parts (func, args, keywords), each guarded, and leaves as itself.
#include <Python.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "interpreter/py_str.h"
#include "interpreter/tracer_internal.h"

namespace dt::interpreter::trace {

PyObject* PartialType() { return ModuleAttr("functools", "partial"); }

absl::StatusOr<Sym> Tracer::MakePartial(const std::vector<Sym>& args, const Kwargs& kwargs) {
  if (args.empty()) return Raises("the traced code raises TypeError: partial() needs a callable");
  Sym p = MakeSym(SymKind::kPartial);
  p->obj = PyRef::Borrow(PartialType());
  p->items = args;
  for (const auto& [name, value] : kwargs) {
    PyRef key = PyRef::Steal(py::FromUtf8(name));
    if (!key) {
      PyErr_Clear();
      return Unsupported("a keyword name UTF-8 cannot encode");
    }
    p->keys.push_back(std::move(key));
    p->items.push_back(value);
  }
  return p;
}

// A functools.partial of the caller (exactly that type): its function, arguments and keywords,
// each read through the partial and guarded like any value.
absl::StatusOr<Sym> Tracer::WrapPartial(PyObject* obj, const SourceRef& source) {
  if (wrap_depth_ >= kMaxUnpackedDepth) return Unsupported("a functools.partial nested too deep to follow");
  WrapDepthScope nested(wrap_depth_);
  guards_.Add(LeafGuard::Type(source, Py_TYPE(obj), Here()));
  PyRef parts[3];
  const char* names[3] = {"func", "args", "keywords"};
  for (int i = 0; i < 3; ++i) parts[i] = PyRef::Steal(PyObject_GetAttrString(obj, names[i]));
  if (!parts[0] || !parts[1] || !parts[2] || !PyTuple_CheckExact(parts[1].get()) || !PyDict_CheckExact(parts[2].get())) {
    PyErr_Clear();
    return Unsupported("a functools.partial whose parts cannot be read");
  }
  DT_ASSIGN_OR_RETURN(Sym func, Wrap(parts[0].get(), guards::PartialPartSource(source, "func")));
  DT_ASSIGN_OR_RETURN(Sym args, Wrap(parts[1].get(), guards::PartialPartSource(source, "args")));
  DT_ASSIGN_OR_RETURN(Sym keywords, Wrap(parts[2].get(), guards::PartialPartSource(source, "keywords")));
  if (args->kind != SymKind::kTuple || keywords->kind != SymKind::kDict) {
    return Unsupported("a functools.partial with too many arguments to follow");
  }
  Sym p = MakeSym(SymKind::kPartial);
  p->obj = PyRef::Borrow(reinterpret_cast<PyObject*>(Py_TYPE(obj)));
  p->source = source;
  p->items.push_back(func);
  p->items.insert(p->items.end(), args->items.begin(), args->items.end());
  p->items.insert(p->items.end(), keywords->items.begin(), keywords->items.end());
  p->keys = keywords->keys;
  return p;
}

absl::StatusOr<Sym> Tracer::CallPartial(const Sym& p, std::vector<Sym> args, Kwargs kwargs) {
  const size_t nkw = p->keys.size();
  const size_t npos = p->items.size() - 1 - nkw;
  std::vector<Sym> all(p->items.begin() + 1, p->items.begin() + 1 + static_cast<long>(npos));
  all.insert(all.end(), args.begin(), args.end());
  Kwargs merged;
  for (size_t i = 0; i < nkw; ++i) {
    DT_ASSIGN_OR_RETURN(std::string name, KeywordName(p->keys[i].get()));
    bool overridden = false;
    for (const auto& [k, v] : kwargs) overridden |= k == name;
    if (!overridden) merged.emplace_back(std::move(name), p->items[1 + npos + i]);
  }
  merged.insert(merged.end(), kwargs.begin(), kwargs.end());
  return CallSym(p->items[0], std::move(all), std::move(merged));
}

// One the trace made is made again by functools.partial where it leaves (one of the caller's
// leaves as itself, through its source).
absl::StatusOr<OutputSpec> Tracer::PartialOutput(const Sym& p, OutputSpec out, std::vector<ValueId>& outputs) {
  out.kind = OutputSpec::Kind::kCall;
  out.obj = p->obj;
  out.keys = p->keys;
  for (const Sym& item : p->items) {
    DT_ASSIGN_OR_RETURN(OutputSpec c, ChildOutput(p, item, outputs));
    out.children.push_back(std::move(c));
  }
  return out;
}

}  // namespace dt::interpreter::trace
