// Binary search in sorted rows: searchsorted and bucketize.
//
// Both compare in the promoted dtype of the sequence and the values, with PyTorch's own bound
// tests (`!(seq[mid] >= v)` left, `!(seq[mid] > v)` right), so even unsorted rows and NaN give
// PyTorch's positions. They run as one node between fused kernels; the result has the values'
// shape, so tracing never breaks on them. On CUDA tensors each value's search is one device
// thread (runtime/cuda_index_kernels.h).
#include <optional>

#include "absl/strings/str_format.h"
#include "graph/cuda_eager.h"
#include "graph/op_registry.h"
#include "runtime/copy.h"
#include "runtime/cuda_index_kernels.h"
#include "runtime/errors.h"

namespace dt {
namespace {

struct Search {
  const char* op;
  Tensor sequence;  // 1-D, or the values' leading dims then the sorted dim
  Tensor values;
  std::optional<Tensor> sorter;  // int64, the sequence's shape: positions sorting each row
  bool right = false;
  bool out_int32 = false;
};

// The values as a tensor: a Python number becomes a 0-d tensor the way PyTorch wraps it (in the
// sequence's dtype unless a float meets an integer sequence, which gives the default float).
Tensor ValuesTensor(const ArgValue& value, const Tensor& sequence) {
  if (const Tensor* t = std::get_if<Tensor>(&value)) return *t;
  const Scalar s = std::get<Scalar>(value);
  const bool widens = s.is_float() && !IsFloating(sequence.dtype());
  return ScalarTensor(s, widens ? DType::kFloat32 : sequence.dtype(),
                      sequence.is_meta() ? Device::Cpu() : sequence.device());
}

absl::Status CheckShapes(const Search& s) {
  const Tensor& seq = s.sequence;
  if (seq.ndim() == 0) {
    return Error(ErrorKind::kShape, absl::StrFormat("%s(): the sorted sequence must have at least one dim, got a "
                                                    "0-d tensor", s.op));
  }
  bool leading_match = seq.ndim() == 1 || seq.ndim() == s.values.ndim();
  for (int64_t d = 0; leading_match && seq.ndim() > 1 && d + 1 < seq.ndim(); ++d) {
    leading_match = seq.size(d) == s.values.size(d);
  }
  if (!leading_match) {
    return Error(ErrorKind::kShape,
                 absl::StrFormat("%s(): the sorted sequence %s must be 1-D or share all but its last dim with the "
                                 "input %s",
                                 s.op, seq.ShapeString(), s.values.ShapeString()));
  }
  if (!s.sorter) return absl::OkStatus();
  if (s.sorter->dtype() != DType::kInt64) {
    return Error(ErrorKind::kType,
                 absl::StrFormat("%s(): sorter must be an int64 tensor, got %s", s.op, DTypeName(s.sorter->dtype())));
  }
  if (s.sorter->sizes() != seq.sizes()) {
    return Error(ErrorKind::kShape, absl::StrFormat("%s(): sorter %s must have the sorted sequence's shape %s", s.op,
                                                    s.sorter->ShapeString(), seq.ShapeString()));
  }
  return absl::OkStatus();
}

// The first position in `row` (read through `order` when given) where `v` goes: before every
// element not below it (left), or after every element not above it (right).
template <typename T, typename C = ComputeType<T>>
int64_t Bound(const T* row, const int64_t* order, int64_t n, C v, bool right) {
  int64_t low = 0, high = n;
  while (low < high) {
    const int64_t mid = low + (high - low) / 2;
    const C at = static_cast<C>(order != nullptr ? row[order[mid]] : row[mid]);
    if (right ? !(at > v) : !(at >= v)) {
      low = mid + 1;
    } else {
      high = mid;
    }
  }
  return low;
}

// Checks the sorter's positions before any search reads through them.
absl::StatusOr<Tensor> SorterPositions(const Search& s, int64_t n) {
  if (!s.sorter) return Tensor();
  Tensor order = Contiguous(*s.sorter);
  const int64_t* p = order.data_as<int64_t>();
  for (int64_t i = 0; i < order.numel(); ++i) {
    if (p[i] < 0 || p[i] >= n) {
      return Error(ErrorKind::kIndex, absl::StrFormat("%s(): sorter index %d is out of range for a sorted dim of "
                                                      "size %d",
                                                      s.op, p[i], n));
    }
  }
  return order;
}

absl::Status SearchOnDevice(const Search& s, DType common, const Tensor& out) {
  const int64_t n = s.sequence.size(s.sequence.ndim() - 1);
  if (s.sorter) {
    DT_ASSIGN_OR_RETURN(std::optional<int64_t> bad, FindValueOutside(*s.sorter, 0, n));
    if (bad) {
      return Error(ErrorKind::kIndex, absl::StrFormat("%s(): sorter index %d is out of range for a sorted dim of "
                                                      "size %d",
                                                      s.op, *bad, n));
    }
  }
  const Tensor seq = Contiguous(CastTo(s.sequence, common)), values = Contiguous(CastTo(s.values, common));
  const Tensor order = s.sorter ? Contiguous(*s.sorter) : Tensor();
  const int64_t per_row = s.sequence.ndim() == 1 ? values.numel() : s.values.size(s.values.ndim() - 1);
  return SearchSortedOnDevice(seq, s.sorter ? &order : nullptr, values, per_row, s.right, out);
}

absl::StatusOr<OpResult> RunSearch(const Search& s) {
  DT_RETURN_IF_ERROR(CheckShapes(s));
  const DType common = PromoteTypes(s.sequence.dtype(), s.values.dtype());
  if (common == DType::kBool) {
    return Error(ErrorKind::kType, absl::StrFormat("%s(): bool tensors are not supported", s.op));
  }
  const DType result_dtype = s.out_int32 ? DType::kInt32 : DType::kInt64;
  Tensor out = Tensor::Empty(s.values.sizes(), result_dtype, s.sequence.device());
  if (out.is_meta() || out.numel() == 0) return OpResult{out};
  if (IndexKernelsRun(s.sequence)) {
    DT_RETURN_IF_ERROR(SearchOnDevice(s, common, out));
    return OpResult{out};
  }
  const int64_t n = s.sequence.size(s.sequence.ndim() - 1);
  DT_ASSIGN_OR_RETURN(Tensor order, SorterPositions(s, n));
  const Tensor seq = Contiguous(CastTo(s.sequence, common)), values = Contiguous(CastTo(s.values, common));
  // Values per row of the sequence: all of them for a 1-D sequence, else the last dim's.
  const int64_t per_row = s.sequence.ndim() == 1 ? values.numel() : s.values.size(s.values.ndim() - 1);
  DT_DISPATCH_ALL(common, [&] {
    using C = ComputeType<scalar_t>;
    const scalar_t* rows = seq.data_as<scalar_t>();
    const scalar_t* v = values.data_as<scalar_t>();
    const int64_t* orders = order.defined() ? order.data_as<int64_t>() : nullptr;
    for (int64_t i = 0; i < values.numel(); ++i) {
      const int64_t r = i / per_row;
      const int64_t at = Bound(rows + r * n, orders ? orders + r * n : nullptr, n, static_cast<C>(v[i]), s.right);
      if (s.out_int32) {
        out.data_as<int32_t>()[i] = static_cast<int32_t>(at);
      } else {
        out.data_as<int64_t>()[i] = at;
      }
    }
  });
  return OpResult{out};
}

// side='left'/'right' says what `right` does; both given must agree, as in PyTorch.
absl::StatusOr<bool> SearchesRight(const OpArgs& args, int right_param, int side_param) {
  const bool right = args.bool_(right_param);
  if (args.is_none(side_param)) return right;
  const std::string& side = args.string(side_param);
  if (side != "left" && side != "right") {
    return Error(ErrorKind::kValue,
                 absl::StrFormat("searchsorted(): side must be 'left' or 'right', got '%s'", side));
  }
  if (right && side == "left") {
    return Error(ErrorKind::kValue, "searchsorted(): side='left' and right=True ask for opposite sides");
  }
  return side == "right";
}

absl::StatusOr<OpResult> SearchsortedEager(const OpDef& op, const OpArgs& args) {
  DT_RUN_THROUGH_HOST_IF_NEEDED(op, args, args.tensor(0));
  Search s{.op = "searchsorted", .sequence = args.tensor(0), .values = ValuesTensor(args[1], args.tensor(0)),
           .out_int32 = args.bool_(2)};
  DT_ASSIGN_OR_RETURN(s.right, SearchesRight(args, 3, 4));
  if (!args.is_none(5)) s.sorter = args.tensor(5);
  return RunSearch(s);
}

absl::StatusOr<OpResult> BucketizeEager(const OpDef& op, const OpArgs& args) {
  const Tensor& boundaries = args.tensor(1);
  DT_RUN_THROUGH_HOST_IF_NEEDED(op, args, boundaries);
  if (boundaries.ndim() != 1) {
    return Error(ErrorKind::kShape,
                 absl::StrFormat("bucketize(): boundaries must be 1-D, got shape %s", boundaries.ShapeString()));
  }
  return RunSearch(Search{.op = "bucketize", .sequence = boundaries, .values = ValuesTensor(args[0], boundaries),
                          .right = args.bool_(3), .out_int32 = args.bool_(2)});
}

}  // namespace

void RegisterSearchOps(OpRegistry& registry) {
  registry.Add("searchsorted(Tensor sorted_sequence, Operand input, *, bool out_int32=False, bool right=False, "
               "str? side=None, Tensor? sorter=None) -> Tensor",
               OpKind::kData, kFunction | kCudaNative | kChecksIndices, &SearchsortedEager);
  registry.Add("bucketize(Operand input, Tensor boundaries, *, bool out_int32=False, bool right=False) -> Tensor",
               OpKind::kData, kFunction | kCudaNative, &BucketizeEager);
}

}  // namespace dt
