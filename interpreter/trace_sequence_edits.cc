// interpreter/trace_sequence_edits.cc: `xs[a:b] = items`, `del xs[i]`, `del xs[a:b]`, `del d[k]`
// on lists and dicts the trace holds (the caller's too: MutatingContainer records the change).
#include <Python.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "interpreter/sym_dict.h"
#include "interpreter/tracer_internal.h"

namespace dt::interpreter::trace {

namespace {

struct SliceBounds {
  Py_ssize_t start, stop, step, length;
};

// CPython's own reading of a slice over `size` items; nullopt when CPython raises (a bound that
// is not an int, a zero step).
std::optional<SliceBounds> Bounds(PyObject* slice, size_t size) {
  SliceBounds b{};
  if (!PySlice_Check(slice) || PySlice_Unpack(slice, &b.start, &b.stop, &b.step) < 0) {
    PyErr_Clear();
    return std::nullopt;
  }
  b.length = PySlice_AdjustIndices(static_cast<Py_ssize_t>(size), &b.start, &b.stop, b.step);
  return b;
}

// The positions a slice picks, in order.
std::vector<size_t> Positions(const SliceBounds& b) {
  std::vector<size_t> at;
  for (Py_ssize_t k = 0, i = b.start; k < b.length; ++k, i += b.step) at.push_back(static_cast<size_t>(i));
  return at;
}

}  // namespace

absl::Status Tracer::AssignListSlice(const Sym& list, PyObject* slice, const Sym& value) {
  const std::optional<SliceBounds> b = Bounds(slice, list->items.size());
  if (!b) return Raises("the traced code raises: a bad slice in list slice assignment");
  DT_ASSIGN_OR_RETURN(std::vector<Sym> items, Iterate(value));
  std::vector<Sym> result = list->items;
  if (b->step == 1) {
    const Py_ssize_t stop = std::max(b->start, b->stop);
    result.erase(result.begin() + b->start, result.begin() + stop);
    result.insert(result.begin() + b->start, items.begin(), items.end());
  } else {
    const std::vector<size_t> at = Positions(*b);
    if (at.size() != items.size()) {
      return Raises("the traced code raises ValueError: extended slice assignment of another size");
    }
    for (size_t k = 0; k < at.size(); ++k) result[at[k]] = items[k];
  }
  DT_RETURN_IF_ERROR(MutatingContainer(list));
  list->items = std::move(result);
  return absl::OkStatus();
}

absl::Status Tracer::DeleteItem(const Sym& container, const Sym& index) {
  if (container->kind != SymKind::kList && container->kind != SymKind::kDict) {
    return Unsupported(absl::StrCat("deleting an item of a ", Describe(container)));
  }
  DT_ASSIGN_OR_RETURN(PyRef key, container->kind == SymKind::kDict ? DictKey(index) : ConstValue(index));
  if (container->kind == SymKind::kDict) {
    DT_ASSIGN_OR_RETURN(std::optional<size_t> at, DictFind(*container, key.get()));
    if (!at) return Raises("the traced code raises KeyError in del");
    DT_RETURN_IF_ERROR(MutatingContainer(container));
    container->items.erase(container->items.begin() + *at);
    container->keys.erase(container->keys.begin() + *at);
    return absl::OkStatus();
  }
  std::vector<size_t> at;
  if (PySlice_Check(key.get())) {
    const std::optional<SliceBounds> b = Bounds(key.get(), container->items.size());
    if (!b) return Raises("the traced code raises: a bad slice in del");
    at = Positions(*b);
  } else if (PyLong_Check(key.get())) {
    const Py_ssize_t n = static_cast<Py_ssize_t>(container->items.size());
    Py_ssize_t i = PyLong_AsSsize_t(key.get());
    if (i == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      return Raises("the traced code raises IndexError in del");
    }
    if (i < 0) i += n;
    if (i < 0 || i >= n) return Raises("the traced code raises IndexError: list assignment index out of range");
    at.push_back(static_cast<size_t>(i));
  } else {
    return Raises("the traced code raises TypeError: list indices must be integers or slices");
  }
  std::vector<bool> gone(container->items.size(), false);
  for (size_t i : at) gone[i] = true;
  std::vector<Sym> kept;
  for (size_t i = 0; i < gone.size(); ++i) {
    if (!gone[i]) kept.push_back(container->items[i]);
  }
  DT_RETURN_IF_ERROR(MutatingContainer(container));
  container->items = std::move(kept);
  return absl::OkStatus();
}

}  // namespace dt::interpreter::trace
