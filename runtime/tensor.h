// runtime/tensor.h: the strided tensor every layer of dyntrace shares.
//
// A Tensor is a view: sizes, strides (in elements) and an element offset into a shared Storage,
// plus a dtype. Copying a Tensor copies the view, not the bytes. A default-constructed Tensor is
// undefined (defined() == false). Meta tensors (device kMeta) have no bytes; data() is null.
//
//   Tensor t = Tensor::Empty({2, 3}, DType::kFloat32, Device::Cpu());
//   Tensor col = t.AsStrided({2}, {3}, 1);   // second column, shares t's bytes
#ifndef DYNTRACE_RUNTIME_TENSOR_H_
#define DYNTRACE_RUNTIME_TENSOR_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/device.h"
#include "runtime/dtype.h"
#include "runtime/storage.h"

namespace dt {

// Autograd's per-tensor state (runtime/autograd_meta.h): null for tensors that never took part in
// autograd, which is nearly all of them. Copies of a Tensor share it, as they share storage.
struct AutogradMeta;

using Dims = absl::InlinedVector<int64_t, 6>;
using DimsView = absl::Span<const int64_t>;

class Tensor {
 public:
  Tensor() = default;

  // A new contiguous tensor with uninitialised bytes.
  static Tensor Empty(DimsView sizes, DType dtype, Device device);
  // A new tensor with the same sizes, dtype and device, and `other`'s memory order where it is
  // dense (so elementwise results of transposed inputs stay transposed, as in PyTorch).
  static Tensor EmptyLike(const Tensor& other);
  static Tensor EmptyLike(const Tensor& other, DType dtype);
  // Wraps existing storage.
  Tensor(std::shared_ptr<Storage> storage, DimsView sizes, DimsView strides, int64_t offset,
         DType dtype);

  bool defined() const { return storage_ != nullptr; }
  const Dims& sizes() const { return sizes_; }
  const Dims& strides() const { return strides_; }
  int64_t size(int64_t dim) const { return sizes_[dim]; }
  int64_t stride(int64_t dim) const { return strides_[dim]; }
  int64_t ndim() const { return static_cast<int64_t>(sizes_.size()); }
  int64_t numel() const;
  int64_t offset() const { return offset_; }
  DType dtype() const { return dtype_; }
  int64_t itemsize() const { return ItemSize(dtype_); }
  Device device() const { return storage_->device(); }
  bool is_meta() const { return storage_->device().is_meta(); }
  const std::shared_ptr<Storage>& storage() const { return storage_; }

  // Address of element [0, 0, ...]; null for meta tensors.
  void* data() const;
  template <typename T>
  T* data_as() const { return static_cast<T*>(data()); }

  bool is_contiguous() const;
  // Whether the elements occupy numel() distinct, gap-free slots in some order.
  bool is_non_overlapping_and_dense() const;

  // A view of the same storage. REQUIRES: the view stays inside the storage.
  Tensor AsStrided(DimsView sizes, DimsView strides, int64_t offset) const;

  // Whether two tensors may share bytes (same storage).
  bool SharesStorageWith(const Tensor& other) const { return storage_ == other.storage_; }

  // "[2, 3]" for messages.
  std::string ShapeString() const;

  const std::shared_ptr<AutogradMeta>& autograd() const { return autograd_; }
  void set_autograd(std::shared_ptr<AutogradMeta> meta) { autograd_ = std::move(meta); }

 private:
  std::shared_ptr<Storage> storage_;
  Dims sizes_;
  Dims strides_;
  int64_t offset_ = 0;
  DType dtype_ = DType::kFloat32;
  std::shared_ptr<AutogradMeta> autograd_;
};

// ---- shape helpers shared by ops ----

std::string DimsToString(DimsView dims);
int64_t NumelOf(DimsView sizes);
Dims ContiguousStrides(DimsView sizes);
// Wraps a possibly negative dim into [0, ndim); PyTorch's message on failure. A 0-d tensor
// accepts dims -1 and 0.
absl::StatusOr<int64_t> NormalizeDim(int64_t dim, int64_t ndim);
// Broadcasts two shapes (numpy/PyTorch rules) or explains which dims disagree.
absl::StatusOr<Dims> BroadcastShapes(DimsView a, DimsView b);
// The strides `t` has when viewed with `sizes` (which it broadcasts to): 0 on broadcast dims.
absl::StatusOr<Dims> BroadcastStrides(const Tensor& t, DimsView sizes);
// Strides that let a tensor with `old_sizes`/`old_strides` be viewed as `new_sizes` without a
// copy, or nullopt when no such strides exist (PyTorch's computeStride).
std::optional<Dims> ViewStrides(DimsView old_sizes, DimsView old_strides, DimsView new_sizes);
// Resolves a single -1 and checks the element count; errors name both shapes.
absl::StatusOr<Dims> InferReshape(DimsView requested, int64_t numel, DimsView from_sizes);

}  // namespace dt

#endif  // DYNTRACE_RUNTIME_TENSOR_H_
