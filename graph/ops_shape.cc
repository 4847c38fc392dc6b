// Views (reshape, permute, expand, narrow ...) and data movement (cat, stack, split, clone).
// Views share the input's storage, as in PyTorch; reshape copies only when no view exists.
#include <algorithm>
#include <numeric>
#include <optional>
#include <string>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "graph/op_registry.h"
#include "runtime/copy.h"
#include "runtime/cuda_tensor.h"
#include "runtime/errors.h"
#include "runtime/indexing.h"

namespace dt {
namespace {

OpResult One(Tensor t) { return OpResult{std::move(t)}; }

absl::StatusOr<Tensor> ViewAs(const Tensor& input, const Dims& requested, bool allow_copy,
                              absl::string_view op) {
  DT_ASSIGN_OR_RETURN(Dims shape, InferReshape(requested, input.numel(), input.sizes()));
  if (auto strides = ViewStrides(input.sizes(), input.strides(), shape)) {
    return input.AsStrided(shape, *strides, input.offset());
  }
  if (!allow_copy) {
    return Error(ErrorKind::kShape,
                 absl::StrFormat("%s: view size %s is not compatible with input tensor's size %s and "
                                 "stride %s (at least one dimension spans across two contiguous "
                                 "subspaces); use .reshape(...) instead",
                                 op, DimsToString(shape), input.ShapeString(),
                                 DimsToString(input.strides())));
  }
  Tensor copy = Contiguous(input);
  return copy.AsStrided(shape, ContiguousStrides(shape), copy.offset());
}

absl::StatusOr<OpResult> ReshapeEager(const OpDef& op, const OpArgs& args) {
  DT_ASSIGN_OR_RETURN(Tensor t, ViewAs(args.tensor(0), args.ints(1), op.name() == "reshape",
                                       op.name()));
  return One(t);
}

absl::StatusOr<OpResult> FlattenEager(const OpDef&, const OpArgs& args) {
  const Tensor& input = args.tensor(0);
  if (input.ndim() == 0) return One(input.AsStrided({1}, {1}, input.offset()));
  DT_ASSIGN_OR_RETURN(int64_t start, NormalizeDim(args.int_(1), input.ndim()));
  DT_ASSIGN_OR_RETURN(int64_t end, NormalizeDim(args.int_(2), input.ndim()));
  if (start > end) {
    return Error(ErrorKind::kValue, "flatten() has invalid args: start_dim cannot come after end_dim");
  }
  Dims shape;
  for (int64_t d = 0; d < start; ++d) shape.push_back(input.size(d));
  int64_t merged = 1;
  for (int64_t d = start; d <= end; ++d) merged *= input.size(d);
  shape.push_back(merged);
  for (int64_t d = end + 1; d < input.ndim(); ++d) shape.push_back(input.size(d));
  DT_ASSIGN_OR_RETURN(Tensor t, ViewAs(input, shape, true, "flatten"));
  return One(t);
}

absl::StatusOr<Tensor> Permute(const Tensor& input, const Dims& dims) {
  if (static_cast<int64_t>(dims.size()) != input.ndim()) {
    return Error(ErrorKind::kValue,
                 absl::StrFormat("permute(sparse_coo): number of dimensions in the tensor input does "
                                 "not match the length of the desired ordering of dimensions i.e. "
                                 "input.dim() = %d is not equal to len(dims) = %d",
                                 input.ndim(), dims.size()));
  }
  Dims sizes, strides;
  std::vector<bool> seen(input.ndim(), false);
  for (int64_t d : dims) {
    DT_ASSIGN_OR_RETURN(int64_t nd, NormalizeDim(d, input.ndim()));
    if (seen[nd]) return Error(ErrorKind::kValue, "permute(): duplicate dims are not allowed.");
    seen[nd] = true;
    sizes.push_back(input.size(nd));
    strides.push_back(input.stride(nd));
  }
  return input.AsStrided(sizes, strides, input.offset());
}

absl::StatusOr<OpResult> PermuteEager(const OpDef&, const OpArgs& args) {
  DT_ASSIGN_OR_RETURN(Tensor t, Permute(args.tensor(0), args.ints(1)));
  return One(t);
}

absl::StatusOr<OpResult> TransposeEager(const OpDef&, const OpArgs& args) {
  const Tensor& input = args.tensor(0);
  if (input.ndim() == 0) return One(input);
  DT_ASSIGN_OR_RETURN(int64_t a, NormalizeDim(args.int_(1), input.ndim()));
  DT_ASSIGN_OR_RETURN(int64_t b, NormalizeDim(args.int_(2), input.ndim()));
  Dims perm(input.ndim());
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[a], perm[b]);
  DT_ASSIGN_OR_RETURN(Tensor t, Permute(input, perm));
  return One(t);
}

absl::StatusOr<OpResult> UnsqueezeEager(const OpDef&, const OpArgs& args) {
  const Tensor& input = args.tensor(0);
  DT_ASSIGN_OR_RETURN(int64_t dim, NormalizeDim(args.int_(1), input.ndim() + 1));
  Dims sizes = input.sizes(), strides = input.strides();
  const int64_t stride = dim < input.ndim() ? input.size(dim) * input.stride(dim) : 1;
  sizes.insert(sizes.begin() + dim, 1);
  strides.insert(strides.begin() + dim, stride);
  return One(input.AsStrided(sizes, strides, input.offset()));
}

absl::StatusOr<OpResult> SqueezeEager(const OpDef&, const OpArgs& args) {
  const Tensor& input = args.tensor(0);
  std::vector<bool> drop(input.ndim(), false);
  if (args.is_none(1)) {
    for (int64_t d = 0; d < input.ndim(); ++d) drop[d] = input.size(d) == 1;
  } else {
    for (int64_t d : args.ints(1)) {
      DT_ASSIGN_OR_RETURN(int64_t nd, NormalizeDim(d, input.ndim()));
      if (input.ndim() > 0) drop[nd] = input.size(nd) == 1;
    }
  }
  Dims sizes, strides;
  for (int64_t d = 0; d < input.ndim(); ++d) {
    if (drop[d]) continue;
    sizes.push_back(input.size(d));
    strides.push_back(input.stride(d));
  }
  return One(input.AsStrided(sizes, strides, input.offset()));
}

absl::StatusOr<Tensor> Expand(const Tensor& input, const Dims& requested, absl::string_view op) {
  const int64_t nd = static_cast<int64_t>(requested.size());
  if (nd < input.ndim()) {
    return Error(ErrorKind::kShape,
                 absl::StrFormat("%s: the number of sizes provided (%d) must be greater or equal to "
                                 "the number of dimensions in the tensor (%d, shape %s)",
                                 op, nd, input.ndim(), input.ShapeString()));
  }
  Dims sizes(nd), strides(nd);
  const int64_t lead = nd - input.ndim();
  for (int64_t i = nd - 1; i >= 0; --i) {
    const int64_t want = requested[i];
    if (i < lead) {
      if (want < 0) {
        return Error(ErrorKind::kShape,
                     absl::StrFormat("%s: -1 is not allowed in a leading, non-existing dimension",
                                     op));
      }
      sizes[i] = want;
      strides[i] = 0;
      continue;
    }
    const int64_t have = input.size(i - lead);
    if (want == -1 || want == have) {
      sizes[i] = have;
      strides[i] = input.stride(i - lead);
    } else if (have == 1) {
      sizes[i] = want;
      strides[i] = 0;
    } else {
      return Error(ErrorKind::kShape,
                   absl::StrFormat("%s: the expanded size of the tensor (%d) must match the existing "
                                   "size (%d) at non-singleton dimension %d.  Target sizes: %s.  "
                                   "Tensor sizes: %s",
                                   op, want, have, i, DimsToString(requested), input.ShapeString()));
    }
  }
  return input.AsStrided(sizes, strides, input.offset());
}

absl::StatusOr<OpResult> ExpandEager(const OpDef& op, const OpArgs& args) {
  DT_ASSIGN_OR_RETURN(Tensor t, Expand(args.tensor(0), args.ints(1), op.name()));
  return One(t);
}

absl::StatusOr<OpResult> NarrowEager(const OpDef&, const OpArgs& args) {
  const Tensor& input = args.tensor(0);
  if (input.ndim() == 0) return Error(ErrorKind::kIndex, "narrow() cannot be applied to a 0-dim tensor.");
  DT_ASSIGN_OR_RETURN(int64_t dim, NormalizeDim(args.int_(1), input.ndim()));
  int64_t start = args.int_(2);
  const int64_t length = args.int_(3);
  const int64_t size = input.size(dim);
  if (start < 0) start += size;
  if (start < 0 || length < 0 || start > size || start + length > size) {
    return Error(ErrorKind::kIndex,
                 absl::StrFormat("narrow(): start (%d) + length (%d) exceeds dimension size (%d) of "
                                 "a tensor of shape %s",
                                 args.int_(2), length, size, input.ShapeString()));
  }
  Dims sizes = input.sizes();
  sizes[dim] = length;
  return One(input.AsStrided(sizes, input.strides(), input.offset() + start * input.stride(dim)));
}

absl::StatusOr<OpResult> SelectEager(const OpDef&, const OpArgs& args) {
  const Tensor& input = args.tensor(0);
  if (input.ndim() == 0) {
    return Error(ErrorKind::kIndex, "select() cannot be applied to a 0-dim tensor.");
  }
  DT_ASSIGN_OR_RETURN(int64_t dim, NormalizeDim(args.int_(1), input.ndim()));
  int64_t index = args.int_(2);
  const int64_t size = input.size(dim);
  if (index < -size || index >= size) {
    return Error(ErrorKind::kIndex,
                 absl::StrFormat("index %d is out of bounds for dimension %d with size %d",
                                 index, dim, size));
  }
  if (index < 0) index += size;
  Dims sizes = input.sizes(), strides = input.strides();
  sizes.erase(sizes.begin() + dim);
  strides.erase(strides.begin() + dim);
  return One(input.AsStrided(sizes, strides, input.offset() + index * input.stride(dim)));
}

absl::StatusOr<OpResult> ContiguousEager(const OpDef&, const OpArgs& args) {
  return One(Contiguous(args.tensor(0)));
}

absl::StatusOr<OpResult> CloneEager(const OpDef&, const OpArgs& args) {
  return One(Clone(args.tensor(0)));
}

absl::Status CheckSameDevice(const std::vector<Tensor>& tensors, absl::string_view op) {
  for (const Tensor& t : tensors) {
    if (t.device() != tensors[0].device()) {
      return Error(ErrorKind::kValue,
                   absl::StrFormat("%s: expected all tensors on one device, got %s and %s", op,
                                   tensors[0].device().ToString(), t.device().ToString()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> Cat(const std::vector<Tensor>& tensors, int64_t dim_arg, absl::string_view op) {
  if (tensors.empty()) {
    return Error(ErrorKind::kValue, absl::StrCat(op, "(): expected a non-empty list of Tensors"));
  }
  DT_RETURN_IF_ERROR(CheckSameDevice(tensors, op));
  // PyTorch skips 1-d empty tensors (legacy behaviour) when deciding shapes.
  const Tensor* ref = nullptr;
  ResultTypeState types;
  for (const Tensor& t : tensors) {
    types.AddTensor(t.dtype(), false);
    if (!(t.ndim() == 1 && t.size(0) == 0) && ref == nullptr) ref = &t;
  }
  if (ref == nullptr) return Tensor::Empty({0}, types.Result(), tensors[0].device());
  if (ref->ndim() == 0) {
    return Error(ErrorKind::kValue,
                 absl::StrCat(op, "(): zero-dimensional tensor cannot be concatenated"));
  }
  DT_ASSIGN_OR_RETURN(int64_t dim, NormalizeDim(dim_arg, ref->ndim()));
  Dims shape = ref->sizes();
  int64_t total = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (t.ndim() == 1 && t.size(0) == 0) continue;
    bool ok = t.ndim() == ref->ndim();
    for (int64_t d = 0; ok && d < t.ndim(); ++d) ok = d == dim || t.size(d) == ref->size(d);
    if (!ok) {
      return Error(ErrorKind::kShape,
                   absl::StrFormat("%s(): sizes of tensors must match except in dimension %d: "
                                   "tensor 0 has shape %s but tensor %d has shape %s",
                                   op, dim, ref->ShapeString(), i, t.ShapeString()));
    }
    total += t.size(dim);
  }
  shape[dim] = total;
  Tensor out = Tensor::Empty(shape, types.Result(), ref->device());
  int64_t at = 0;
  for (const Tensor& t : tensors) {
    if (t.ndim() == 1 && t.size(0) == 0) continue;
    Dims part = shape;
    part[dim] = t.size(dim);
    Tensor slot = out.AsStrided(part, out.strides(), at * out.stride(dim));
    DT_RETURN_IF_ERROR(CopyInto(slot, t));
    at += t.size(dim);
  }
  return out;
}

absl::StatusOr<OpResult> CatEager(const OpDef&, const OpArgs& args) {
  DT_ASSIGN_OR_RETURN(Tensor t, Cat(args.tensors(0), args.int_(1), "cat"));
  return One(t);
}

absl::StatusOr<OpResult> StackEager(const OpDef&, const OpArgs& args) {
  const auto& tensors = args.tensors(0);
  if (tensors.empty()) return Error(ErrorKind::kValue, "stack expects a non-empty TensorList");
  for (size_t i = 1; i < tensors.size(); ++i) {
    if (tensors[i].sizes() != tensors[0].sizes()) {
      return Error(ErrorKind::kShape,
                   absl::StrFormat("stack expects each tensor to be equal size, but got %s at "
                                   "entry 0 and %s at entry %d",
                                   tensors[0].ShapeString(), tensors[i].ShapeString(), i));
    }
  }
  DT_ASSIGN_OR_RETURN(int64_t dim, NormalizeDim(args.int_(1), tensors[0].ndim() + 1));
  std::vector<Tensor> expanded;
  for (const Tensor& t : tensors) {
    Dims sizes = t.sizes(), strides = t.strides();
    sizes.insert(sizes.begin() + dim, 1);
    strides.insert(strides.begin() + dim, 1);
    expanded.push_back(t.AsStrided(sizes, strides, t.offset()));
  }
  DT_ASSIGN_OR_RETURN(Tensor t, Cat(expanded, dim, "stack"));
  return One(t);
}

absl::StatusOr<OpResult> SplitBySizes(const Tensor& input, const Dims& sizes, int64_t dim_arg,
                                      absl::string_view op) {
  if (input.ndim() == 0) {
    return Error(ErrorKind::kValue, absl::StrCat(op, "() expects at least a 1-dimensional tensor"));
  }
  DT_ASSIGN_OR_RETURN(int64_t dim, NormalizeDim(dim_arg, input.ndim()));
  int64_t total = 0;
  for (int64_t s : sizes) total += s;
  if (total != input.size(dim)) {
    return Error(ErrorKind::kShape,
                 absl::StrFormat("%s(): split sizes %s must sum to the size of dimension %d (%d) "
                                 "of a tensor of shape %s",
                                 op, DimsToString(sizes), dim, input.size(dim), input.ShapeString()));
  }
  OpResult out;
  int64_t at = 0;
  for (int64_t s : sizes) {
    Dims part = input.sizes();
    part[dim] = s;
    out.push_back(input.AsStrided(part, input.strides(), input.offset() + at * input.stride(dim)));
    at += s;
  }
  return out;
}

absl::StatusOr<OpResult> SplitEager(const OpDef&, const OpArgs& args) {
  const Tensor& input = args.tensor(0);
  const int64_t size = args.int_(1);
  if (size <= 0) {
    return Error(ErrorKind::kValue, absl::StrFormat("split expects split_size be positive, but got %d", size));
  }
  if (input.ndim() == 0) return Error(ErrorKind::kValue, "split() expects at least a 1-dimensional tensor");
  DT_ASSIGN_OR_RETURN(int64_t dim, NormalizeDim(args.int_(2), input.ndim()));
  Dims sizes;
  for (int64_t left = input.size(dim); left > 0; left -= size) sizes.push_back(std::min(size, left));
  if (sizes.empty()) sizes.push_back(0);
  return SplitBySizes(input, sizes, dim, "split");
}

absl::StatusOr<OpResult> SplitWithSizesEager(const OpDef&, const OpArgs& args) {
  return SplitBySizes(args.tensor(0), args.ints(1), args.int_(2), "split");
}

absl::StatusOr<OpResult> ChunkEager(const OpDef&, const OpArgs& args) {
  const Tensor& input = args.tensor(0);
  const int64_t chunks = args.int_(1);
  if (chunks <= 0) {
    return Error(ErrorKind::kValue, absl::StrFormat("chunk expects `chunks` to be greater than 0, got: %d", chunks));
  }
  if (input.ndim() == 0) return Error(ErrorKind::kValue, "chunk expects at least a 1-dimensional tensor");
  DT_ASSIGN_OR_RETURN(int64_t dim, NormalizeDim(args.int_(2), input.ndim()));
  const int64_t size = input.size(dim);
  const int64_t each = (size + chunks - 1) / chunks;
  Dims sizes;
  for (int64_t left = size; left > 0; left -= std::max<int64_t>(each, 1)) {
    sizes.push_back(std::min(std::max<int64_t>(each, 1), left));
  }
  if (sizes.empty()) sizes.push_back(0);
  return SplitBySizes(input, sizes, dim, "chunk");
}

absl::StatusOr<OpResult> ToDTypeEager(const OpDef&, const OpArgs& args) {
  return One(CastTo(args.tensor(0), *args.dtype(1)));
}

absl::StatusOr<OpResult> GetItemEager(const OpDef&, const OpArgs& args) {
  DT_ASSIGN_OR_RETURN(std::vector<IndexItem> items, DecodeIndex(args.ints(1)));
  DT_ASSIGN_OR_RETURN(Tensor view, ApplyIndex(args.tensor(0), items));
  return One(view);
}

absl::StatusOr<OpResult> ToDeviceEager(const OpDef&, const OpArgs& args) {
  DT_ASSIGN_OR_RETURN(Tensor moved, ToDevice(args.tensor(0), *args.device(1)));
  return One(moved);
}

// x[index] = value, written through to x's storage; returns x.
absl::StatusOr<OpResult> SetItemEager(const OpDef&, const OpArgs& args) {
  const Tensor& target = args.tensor(0);
  DT_ASSIGN_OR_RETURN(std::vector<IndexItem> items, DecodeIndex(args.ints(1)));
  DT_ASSIGN_OR_RETURN(Tensor view, ApplyIndex(target, items));
  if (args.is_tensor(2)) {
    DT_RETURN_IF_ERROR(CopyInto(view, args.tensor(2)));
  } else {
    DT_RETURN_IF_ERROR(Fill(view, args.scalar(2)));
  }
  return One(target);
}

}  // namespace

namespace {

// The subscript an encoded index argument reads as, e.g. "1:, :50".
std::optional<std::string> SubscriptText(const ArgValue* encoded) {
  const Dims* dims = encoded != nullptr ? std::get_if<Dims>(encoded) : nullptr;
  if (dims == nullptr) return std::nullopt;
  absl::StatusOr<std::vector<IndexItem>> items = DecodeIndex(*dims);
  if (!items.ok()) return std::nullopt;
  if (items->empty()) return std::string("()");
  return IndexToString(*items);
}

std::optional<std::string> PrintGetItem(absl::Span<const std::string> outputs, absl::Span<const std::string> args,
                                        absl::Span<const ArgValue* const> constants) {
  std::optional<std::string> index = SubscriptText(constants[1]);
  if (!index || outputs.size() != 1) return std::nullopt;
  return absl::StrCat(outputs[0], " = ", args[0], "[", *index, "]");
}

// In place: the statement, then the result (the input itself) named.
std::optional<std::string> PrintSetItem(absl::Span<const std::string> outputs, absl::Span<const std::string> args,
                                        absl::Span<const ArgValue* const> constants) {
  std::optional<std::string> index = SubscriptText(constants[1]);
  if (!index) return std::nullopt;
  std::string text = absl::StrCat(args[0], "[", *index, "] = ", args[2]);
  if (outputs.size() == 1) absl::StrAppend(&text, "; ", outputs[0], " = ", args[0]);
  return text;
}

}  // namespace

void RegisterShapeOps(OpRegistry& registry) {
  constexpr uint32_t kBoth = kMethod | kFunction;
  registry.Add("reshape(Tensor input, int... shape) -> Tensor", OpKind::kView, kBoth, &ReshapeEager).shape_rule =
      ShapeRule::kReshape;
  registry.Add("view(Tensor input, int... shape) -> Tensor", OpKind::kView, kMethod, &ReshapeEager).shape_rule =
      ShapeRule::kReshape;
  registry.Add("flatten(Tensor input, int start_dim=0, int end_dim=-1) -> Tensor", OpKind::kView,
               kBoth, &FlattenEager);
  registry.Add("permute(Tensor input, int... dims) -> Tensor", OpKind::kView, kBoth, &PermuteEager).shape_rule =
      ShapeRule::kPermute;
  registry.Add("transpose(Tensor input, int dim0, int dim1) -> Tensor", OpKind::kView, kBoth,
               &TransposeEager).shape_rule = ShapeRule::kTranspose;
  registry.Add("swapaxes(Tensor input, int axis0, int axis1) -> Tensor", OpKind::kView, kBoth,
               &TransposeEager).shape_rule = ShapeRule::kTranspose;
  registry.Add("unsqueeze(Tensor input, int dim) -> Tensor", OpKind::kView, kBoth, &UnsqueezeEager).shape_rule =
      ShapeRule::kUnsqueeze;
  registry.Add("squeeze(Tensor input, int[]? dim=None) -> Tensor", OpKind::kView, kBoth,
               &SqueezeEager);
  registry.Add("expand(Tensor input, int... size) -> Tensor", OpKind::kView, kMethod, &ExpandEager);
  registry.Add("broadcast_to(Tensor input, int[] size) -> Tensor", OpKind::kView, kBoth,
               &ExpandEager);
  registry.Add("narrow(Tensor input, int dim, int start, int length) -> Tensor", OpKind::kView,
               kBoth, &NarrowEager);
  registry.Add("select(Tensor input, int dim, int index) -> Tensor", OpKind::kView, kBoth,
               &SelectEager);
  // Data ops copy through runtime/copy.h, which stays on a CUDA device: all are kCudaNative.
  registry.Add("contiguous(Tensor input) -> Tensor", OpKind::kData, kMethod | kCudaNative, &ContiguousEager)
      .shape_rule = ShapeRule::kSameAsFirst;
  // clone of a CUDA tensor copies on the device (runtime/copy.h), never through the host.
  registry.Add("clone(Tensor input) -> Tensor", OpKind::kData, kBoth | kCudaNative, &CloneEager).shape_rule =
      ShapeRule::kSameAsFirst;
  registry.Add("cat(Tensor[] tensors, int dim=0) -> Tensor", OpKind::kData, kFunction | kCudaNative, &CatEager);
  registry.Add("concat(Tensor[] tensors, int dim=0) -> Tensor", OpKind::kData, kFunction | kCudaNative,
               &CatEager);
  registry.Add("stack(Tensor[] tensors, int dim=0) -> Tensor", OpKind::kData, kFunction | kCudaNative,
               &StackEager);
  registry.Add("split(Tensor input, int split_size, int dim=0) -> Tensor[]", OpKind::kView, kBoth,
               &SplitEager);
  registry.Add("split.sizes(Tensor input, int[] split_size, int dim=0) -> Tensor[]", OpKind::kView,
               kBoth, &SplitWithSizesEager);
  // x.float(), x.to(dtype): a copy in the new dtype, or x itself when it already has it.
  registry.Add("_to(Tensor input, DType dtype) -> Tensor", OpKind::kData, kCudaNative,
               &ToDTypeEager).shape_rule = ShapeRule::kSameAsFirst;
  // Moves between devices (Tensor.cpu()/cuda()/to(device)) while autograd follows the tensor.
  registry.Add("_to_device(Tensor input, Device device) -> Tensor", OpKind::kData, kCudaNative,
               &ToDeviceEager).shape_rule = ShapeRule::kSameAsFirst;
  // Basic indexing as graph ops; `index` is EncodeIndex()'s flat form. They print as Python's
  // subscripts: `v1 = v0[1:, :50]`, `v0[0] = v2`.
  registry.Add("_getitem(Tensor input, int[] index) -> Tensor", OpKind::kView, kNoProperty,
               &GetItemEager).print_statement = &PrintGetItem;
  // _setitem writes its input and returns it (kWritesArguments): recorded by a derivative formula
  // into zeros, several such writes into same-looking zeros must stay apart (graph_cse merged
  // them, and a compiled backward summed one buffer four times).
  registry.Add("_setitem(Tensor input, int[] index, Operand value) -> Tensor", OpKind::kData,
               kCudaNative | kWritesArguments, &SetItemEager).print_statement = &PrintSetItem;
  registry.Add("chunk(Tensor input, int chunks, int dim=0) -> Tensor[]", OpKind::kView, kBoth,
               &ChunkEager);
}

}  // namespace dt
