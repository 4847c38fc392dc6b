// Shape and data composites of torch: tile, movedim, t, new_zeros/new_ones/new_full/new_empty,
// type_as, diag, trace, cross / linalg.cross, meshgrid, broadcast_tensors, repeat_interleave. Those that make tensors of the input's sizes or
// on its device (new_*, diag) or narrow by sizes stay whole in graphs: a recorded body would
// bake the sizes and the trace's meta device.
#include <algorithm>

#include "absl/strings/str_format.h"
#include "graph/nn_common.h"
#include "graph/op_registry.h"
#include "runtime/errors.h"

namespace dt {
namespace {

absl::StatusOr<OpResult> TileEager(const OpDef&, const OpArgs& args) {
  const Tensor& x = args.tensor(0);
  Dims reps = args.ints(1);
  while (static_cast<int64_t>(reps.size()) < x.ndim()) reps.insert(reps.begin(), 1);
  DT_ASSIGN_OR_RETURN(Tensor y, Call("repeat", {x, reps}));
  return OneResult(y);
}

absl::StatusOr<int64_t> WrapDim(int64_t d, int64_t ndim, absl::string_view op) {
  const int64_t n = std::max<int64_t>(ndim, 1);
  if (d < -n || d >= n) {
    return Error(ErrorKind::kIndex, absl::StrFormat("%s(): Dimension out of range (expected to be in range of "
                                                    "[%d, %d], but got %d)", op, -n, n - 1, d));
  }
  return d < 0 ? d + n : d;
}

absl::StatusOr<OpResult> MovedimEager(const OpDef&, const OpArgs& args) {
  const Tensor& x = args.tensor(0);
  const Dims &source = args.ints(1), &destination = args.ints(2);
  if (source.size() != destination.size()) {
    return Error(ErrorKind::kRuntime, absl::StrFormat("movedim: Invalid source or destination dims: source (%s dims) "
                                                      "should contain the same number of dims as destination (%s dims)",
                                                      DimsToString(source), DimsToString(destination)));
  }
  const int64_t n = x.ndim();
  Dims order(n, -1);
  std::vector<bool> moved(n, false);
  for (size_t i = 0; i < source.size(); ++i) {
    DT_ASSIGN_OR_RETURN(int64_t s, WrapDim(source[i], n, "movedim"));
    DT_ASSIGN_OR_RETURN(int64_t d, WrapDim(destination[i], n, "movedim"));
    if (moved[s] || order[d] != -1) {
      return Error(ErrorKind::kRuntime, "movedim: repeated dim in source or destination");
    }
    order[d] = s;
    moved[s] = true;
  }
  int64_t next = 0;
  for (int64_t& slot : order) {
    if (slot != -1) continue;
    while (moved[next]) ++next;
    slot = next++;
  }
  DT_ASSIGN_OR_RETURN(Tensor y, Call("permute", {x, order}));
  return OneResult(y);
}

absl::StatusOr<OpResult> TEager(const OpDef&, const OpArgs& args) {
  const Tensor& x = args.tensor(0);
  if (x.ndim() > 2) {
    return Error(ErrorKind::kRuntime, absl::StrFormat("t() expects a tensor with <= 2 dimensions, but self is %dD",
                                                      x.ndim()));
  }
  DT_ASSIGN_OR_RETURN(Tensor y, x.ndim() == 2 ? Call("transpose", {x, Scalar::Int(0), Scalar::Int(1)})
                                              : Call("reshape", {x, Dims(x.sizes().begin(), x.sizes().end())}));
  return OneResult(y);
}

// new_zeros/new_ones/new_empty(size) and new_full(size, value): the input's dtype and device
// unless given.
absl::StatusOr<OpResult> NewEager(const OpDef& op, const OpArgs& args) {
  const Tensor& x = args.tensor(0);
  const bool full = op.name() == "new_full";
  const size_t dtype_index = full ? 3 : 2;
  const DType dtype = args.dtype(dtype_index).value_or(x.dtype());
  const Device device = args.device(dtype_index + 1).value_or(x.device());
  DT_ASSIGN_OR_RETURN(Tensor y, full ? Call("full", {args.ints(1), args[2], dtype, device})
                                     : Call(op.name().substr(4), {args.ints(1), dtype, device}));
  return OneResult(y);
}

absl::StatusOr<OpResult> TypeAsEager(const OpDef&, const OpArgs& args) {
  DT_ASSIGN_OR_RETURN(Tensor y, Call("_to", {args.tensor(0), args.tensor(1).dtype()}));
  return OneResult(y);
}

// [rows, cols] bool: j - i == k.
absl::StatusOr<Tensor> DiagonalMask(int64_t rows, int64_t cols, int64_t k, const Tensor& like) {
  DT_ASSIGN_OR_RETURN(Tensor i, Call("arange", {Scalar::Int(rows), None{}, Scalar::Int(1), DType::kInt64, like.device()}));
  DT_ASSIGN_OR_RETURN(Tensor j, Call("arange", {Scalar::Int(cols), None{}, Scalar::Int(1), DType::kInt64, like.device()}));
  DT_ASSIGN_OR_RETURN(i, Call("unsqueeze", {i, Scalar::Int(1)}));
  DT_ASSIGN_OR_RETURN(Tensor offset, Call("sub", {j, i}));
  return Call("eq", {offset, Scalar::Int(k)});
}

absl::StatusOr<Tensor> Diag(const Tensor& x, int64_t k) {
  if (x.ndim() == 1) {
    const int64_t n = x.size(0) + std::abs(k);
    DT_ASSIGN_OR_RETURN(Tensor zeros, Call("zeros", {Dims{std::abs(k)}, x.dtype(), x.device()}));
    DT_ASSIGN_OR_RETURN(Tensor padded, Call("cat", {std::vector<Tensor>{x, zeros}}));
    // Row i holds x[i] when k >= 0; column j holds x[j] when k < 0.
    DT_ASSIGN_OR_RETURN(Tensor along, Call("unsqueeze", {padded, Scalar::Int(k >= 0 ? 1 : 0)}));
    DT_ASSIGN_OR_RETURN(Tensor mask, DiagonalMask(n, n, k, x));
    return Call("where", {mask, along, Scalar::Int(0)});
  }
  if (x.ndim() != 2) {
    return Error(ErrorKind::kRuntime, absl::StrFormat("diag(): Supports 1D or 2D tensors. Got %dD", x.ndim()));
  }
  const int64_t rows = x.size(0), cols = x.size(1);
  const int64_t first = std::max<int64_t>(0, -k), last = std::min(rows, cols - k);
  DT_ASSIGN_OR_RETURN(Tensor mask, DiagonalMask(rows, cols, k, x));
  DT_ASSIGN_OR_RETURN(Tensor kept, Call("where", {mask, x, Scalar::Int(0)}));
  DT_ASSIGN_OR_RETURN(Tensor sums, Call("sum", {kept, Dims{1}, Scalar::Bool(false), x.dtype()}));
  return Call("narrow", {sums, Scalar::Int(0), Scalar::Int(std::min(first, rows)),
                         Scalar::Int(std::max<int64_t>(0, last - first))});
}

absl::StatusOr<OpResult> DiagEager(const OpDef&, const OpArgs& args) {
  DT_ASSIGN_OR_RETURN(Tensor y, Diag(args.tensor(0), args.int_(1)));
  return OneResult(y);
}

absl::StatusOr<OpResult> TraceEager(const OpDef&, const OpArgs& args) {
  const Tensor& x = args.tensor(0);
  if (x.ndim() != 2) {
    return Error(ErrorKind::kRuntime, absl::StrFormat("trace: expected a matrix, but got tensor with dim %d", x.ndim()));
  }
  DT_ASSIGN_OR_RETURN(Tensor d, Diag(x, 0));
  DT_ASSIGN_OR_RETURN(Tensor y, Call("sum", {d}));
  return OneResult(y);
}

// a x b along a dim of size 3: torch.cross's default dim is the first of size 3,
// linalg.cross's is -1.
absl::StatusOr<OpResult> CrossEager(const OpDef& op, const OpArgs& args) {
  const Tensor& a = args.tensor(0);
  const Tensor& b = args.tensor(1);
  if (a.ndim() != b.ndim()) {
    return Error(ErrorKind::kRuntime, absl::StrFormat("%s(): inputs must have the same number of dimensions, got %s "
                                                      "and %s", op.name(), a.ShapeString(), b.ShapeString()));
  }
  int64_t dim = -1;
  if (!args.is_none(2)) {
    DT_ASSIGN_OR_RETURN(dim, WrapDim(args.int_(2), a.ndim(), op.name()));
  } else {
    for (int64_t d = 0; d < a.ndim() && dim < 0; ++d) {
      if (a.size(d) == 3 && b.size(d) == 3) dim = d;
    }
  }
  if (dim < 0 || a.ndim() == 0 || a.size(dim) != 3 || b.size(dim) != 3) {
    return Error(ErrorKind::kRuntime, absl::StrFormat("%s(): inputs dimension %d must have length 3. Got %s and %s",
                                                      op.name(), dim, a.ShapeString(), b.ShapeString()));
  }
  auto part = [&](const Tensor& t, int64_t i) { return Call("narrow", {t, Scalar::Int(dim), Scalar::Int(i), Scalar::Int(1)}); };
  std::vector<Tensor> parts;
  for (int64_t i = 0; i < 3; ++i) {
    DT_ASSIGN_OR_RETURN(Tensor a1, part(a, (i + 1) % 3));
    DT_ASSIGN_OR_RETURN(Tensor a2, part(a, (i + 2) % 3));
    DT_ASSIGN_OR_RETURN(Tensor b1, part(b, (i + 1) % 3));
    DT_ASSIGN_OR_RETURN(Tensor b2, part(b, (i + 2) % 3));
    DT_ASSIGN_OR_RETURN(Tensor p, Call("mul", {a1, b2}));
    DT_ASSIGN_OR_RETURN(Tensor q, Call("mul", {a2, b1}));
    DT_ASSIGN_OR_RETURN(Tensor c, Call("sub", {p, q}));
    parts.push_back(c);
  }
  DT_ASSIGN_OR_RETURN(Tensor y, Call("cat", {parts, Scalar::Int(dim)}));
  return OneResult(y);
}

// meshgrid(a, b, ..., indexing="ij" | "xy"): each 0-d or 1-d input viewed along its own dim of
// the grid and expanded over the others (views, as PyTorch's); "xy" swaps the first two dims.
absl::StatusOr<OpResult> MeshgridEager(const OpDef&, const OpArgs& args) {
  const std::vector<Tensor>& inputs = args.tensors(0);
  const std::string indexing = args.is_none(1) ? "ij" : args.string(1);
  if (indexing != "ij" && indexing != "xy") {
    return Error(ErrorKind::kValue, absl::StrFormat("torch.meshgrid: indexing must be one of \"xy\" or \"ij\", "
                                                    "but received: %s", indexing));
  }
  if (inputs.empty()) return Error(ErrorKind::kRuntime, "meshgrid expects a non-empty TensorList");
  Dims sizes;
  for (const Tensor& t : inputs) {
    if (t.ndim() > 1) {
      return Error(ErrorKind::kRuntime, absl::StrFormat("torch.meshgrid: Expected 0D or 1D tensor in the tensor "
                                                        "list but got: %s", t.ShapeString()));
    }
    if (t.dtype() != inputs[0].dtype() || t.device() != inputs[0].device()) {
      return Error(ErrorKind::kRuntime, "torch.meshgrid: Expected all tensors in the tensor list to have the same "
                                        "dtype and device");
    }
    sizes.push_back(t.numel());
  }
  const bool swap = indexing == "xy" && inputs.size() >= 2;
  if (swap) std::swap(sizes[0], sizes[1]);
  OpResult out;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const size_t at = swap && i < 2 ? 1 - i : i;
    Dims shape(inputs.size(), 1);
    shape[at] = -1;
    DT_ASSIGN_OR_RETURN(Tensor line, Call("reshape", {inputs[i], shape}));
    DT_ASSIGN_OR_RETURN(Tensor grid, Call("broadcast_to", {line, sizes}));
    out.push_back(grid);
  }
  return out;
}

// Every input expanded to the shape they broadcast to (views).
absl::StatusOr<OpResult> BroadcastTensorsEager(const OpDef&, const OpArgs& args) {
  const std::vector<Tensor>& inputs = args.tensors(0);
  Dims shape;
  for (const Tensor& t : inputs) {
    absl::StatusOr<Dims> next = BroadcastShapes(shape, t.sizes());
    if (!next.ok()) {
      return Error(ErrorKind::kRuntime, absl::StrFormat("broadcast_tensors(): shapes %s and %s do not broadcast",
                                                        DimsToString(shape), t.ShapeString()));
    }
    shape = *next;
  }
  OpResult out;
  for (const Tensor& t : inputs) {
    DT_ASSIGN_OR_RETURN(Tensor expanded, Call("broadcast_to", {t, shape}));
    out.push_back(expanded);
  }
  return out;
}

// Each element `repeats` times in a row along `dim` (over the flattened input without one).
absl::StatusOr<OpResult> RepeatInterleaveEager(const OpDef&, const OpArgs& args) {
  Tensor x = args.tensor(0);
  const int64_t repeats = args.int_(1);
  if (repeats < 0) return Error(ErrorKind::kRuntime, "repeat_interleave(): repeats can not be negative");
  int64_t dim = 0;
  if (args.is_none(2)) {
    DT_ASSIGN_OR_RETURN(x, Call("reshape", {x, Dims{-1}}));
  } else {
    DT_ASSIGN_OR_RETURN(dim, WrapDim(args.int_(2), x.ndim(), "repeat_interleave"));
    if (x.ndim() == 0) {
      DT_ASSIGN_OR_RETURN(x, Call("reshape", {x, Dims{1}}));
    }
  }
  Dims expanded(x.sizes().begin(), x.sizes().end());
  expanded.insert(expanded.begin() + dim + 1, repeats);
  Dims result(x.sizes().begin(), x.sizes().end());
  result[dim] *= repeats;
  DT_ASSIGN_OR_RETURN(Tensor y, Call("unsqueeze", {x, Scalar::Int(dim + 1)}));
  DT_ASSIGN_OR_RETURN(y, Call("broadcast_to", {y, expanded}));
  DT_ASSIGN_OR_RETURN(y, Call("reshape", {y, result}));
  return OneResult(y);
}

}  // namespace

void RegisterShapeExtraOps(OpRegistry& registry) {
  constexpr uint32_t kBoth = kMethod | kFunction;
  registry.Add("tile(Tensor input, int[] dims) -> Tensor", OpKind::kComposite, kBoth, &TileEager);
  registry.Add("movedim(Tensor input, int[] source, int[] destination) -> Tensor", OpKind::kComposite,
               kBoth | kDecomposable, &MovedimEager);
  registry.Add("t(Tensor input) -> Tensor", OpKind::kComposite, kBoth | kDecomposable, &TEager);
  for (const char* name : {"new_zeros", "new_ones", "new_empty"}) {
    registry.Add(absl::StrCat(name, "(Tensor input, int... size, *, DType? dtype=None, Device? device=None) -> Tensor"),
                 OpKind::kComposite, kMethod, &NewEager);
  }
  registry.Add("new_full(Tensor input, int[] size, Scalar fill_value, *, DType? dtype=None, Device? device=None) "
               "-> Tensor",
               OpKind::kComposite, kMethod, &NewEager);
  registry.Add("type_as(Tensor input, Tensor other) -> Tensor", OpKind::kComposite, kMethod | kDecomposable,
               &TypeAsEager);
  registry.Add("diag(Tensor input, int diagonal=0) -> Tensor", OpKind::kComposite, kBoth, &DiagEager);
  registry.Add("trace(Tensor input) -> Tensor", OpKind::kComposite, kBoth, &TraceEager);
  registry.Add("cross(Tensor input, Tensor other, int? dim=None) -> Tensor", OpKind::kComposite, kBoth, &CrossEager);
  registry.Add("linalg_cross(Tensor input, Tensor other, int? dim=-1) -> Tensor", OpKind::kComposite, kLinalg,
               &CrossEager);
  // Their bodies bake sizes (reshape, broadcast_to): whole nodes in graphs.
  registry.Add("meshgrid(Tensor[] tensors, *, str? indexing=None) -> Tensor[]", OpKind::kComposite, kFunction,
               &MeshgridEager);
  registry.Add("broadcast_tensors(Tensor[] tensors) -> Tensor[]", OpKind::kComposite, kFunction,
               &BroadcastTensorsEager);
  registry.Add("repeat_interleave(Tensor input, int repeats, int? dim=None) -> Tensor", OpKind::kComposite, kBoth,
               &RepeatInterleaveEager);
}

}  // namespace dt
