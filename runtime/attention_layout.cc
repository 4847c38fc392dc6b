#include "runtime/attention_layout.h"

#include <algorithm>
#include <atomic>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/errors.h"

namespace dt {
namespace {

bool KernelDType(DType dtype) {
  return dtype == DType::kFloat32 || dtype == DType::kFloat16 || dtype == DType::kBFloat16;
}

Dims LeadingDims(const Tensor& t, int trailing) {
  const int keep = std::max(0, static_cast<int>(t.ndim()) - trailing);
  return Dims(t.sizes().begin(), t.sizes().begin() + keep);
}

// Sizes every operand broadcasts into: (batch dims, L, S, E, Ev).
struct Geometry {
  Dims batch;
  int64_t queries = 0, keys = 0, head = 0, value_head = 0;
};

absl::StatusOr<Geometry> GeometryOf(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor* mask,
                                    const Tensor* keep) {
  Geometry g;
  g.queries = q.size(q.ndim() - 2);
  g.keys = k.size(k.ndim() - 2);
  g.head = q.size(q.ndim() - 1);
  g.value_head = v.size(v.ndim() - 1);
  DT_ASSIGN_OR_RETURN(g.batch, BroadcastShapes(LeadingDims(q, 2), LeadingDims(k, 2)));
  DT_ASSIGN_OR_RETURN(g.batch, BroadcastShapes(g.batch, LeadingDims(v, 2)));
  for (const Tensor* scores_shaped : {mask, keep}) {
    if (scores_shaped == nullptr) continue;
    DT_ASSIGN_OR_RETURN(g.batch, BroadcastShapes(g.batch, LeadingDims(*scores_shaped, 2)));
  }
  return g;
}

// Why a [..., L, S] operand (`what`: the mask, dropout's keep) does not fit; `boolean` whether it
// must be bool, else of the scores' dtype.
std::string ScoresShapedMisfit(const char* what, const Tensor& t, bool boolean, const Tensor& q, const Geometry& g) {
  if (boolean ? t.dtype() != DType::kBool : t.dtype() != q.dtype()) {
    return absl::StrCat("a ", DTypeName(t.dtype()), " ", what, " for ", DTypeName(q.dtype()), " scores");
  }
  const int64_t r = t.ndim();
  const bool fits = (r < 1 || t.size(r - 1) == 1 || t.size(r - 1) == g.keys) &&
                    (r < 2 || t.size(r - 2) == 1 || t.size(r - 2) == g.queries);
  return fits ? "" : absl::StrCat(what, " ", t.ShapeString(), " does not broadcast to the scores");
}

std::string MaskMisfit(const Tensor& q, const Tensor* mask, const Tensor* keep, const AttentionSpec& spec,
                       const Geometry& g) {
  if ((mask != nullptr) != (spec.mask_kind != kAttentionNoMask)) return "mask and mask kind disagree";
  if (mask != nullptr) {
    std::string misfit = ScoresShapedMisfit("mask", *mask, spec.mask_kind != kAttentionAddMask, q, g);
    if (!misfit.empty()) return misfit;
  }
  return keep == nullptr ? "" : ScoresShapedMisfit("dropout keep mask", *keep, true, q, g);
}

}  // namespace

std::array<int64_t, 4> StridesOver(const Tensor& t, const std::array<int64_t, 4>& sizes) {
  std::array<int64_t, 4> strides{};
  for (int d = 0; d < 4; ++d) {
    const int64_t own = static_cast<int64_t>(t.ndim()) - 4 + d;
    if (own >= 0 && sizes[d] > 1 && t.size(own) == sizes[d]) strides[d] = t.stride(own);
  }
  return strides;
}

std::string AttentionKernelMisfit(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor* mask,
                                  const Tensor* keep, const AttentionSpec& spec) {
  if (!KernelDType(q.dtype()) || k.dtype() != q.dtype() || v.dtype() != q.dtype()) {
    return absl::StrCat("query, key, value are ", DTypeName(q.dtype()), ", ", DTypeName(k.dtype()), ", ",
                        DTypeName(v.dtype()), " (the kernel takes one of float32, float16, bfloat16)");
  }
  if (q.ndim() < 2 || k.ndim() < 2 || v.ndim() < 2 || q.size(q.ndim() - 1) != k.size(k.ndim() - 1) ||
      k.size(k.ndim() - 2) != v.size(v.ndim() - 2)) {
    return absl::StrCat("shapes ", q.ShapeString(), ", ", k.ShapeString(), ", ", v.ShapeString(),
                        " are not [..., L, E], [..., S, E], [..., S, Ev]");
  }
  absl::StatusOr<Geometry> g = GeometryOf(q, k, v, mask, keep);
  if (!g.ok()) return std::string(g.status().message());
  if (g->batch.size() > 2) return absl::StrCat(g->batch.size(), " batch dims (the kernel takes two)");
  if (g->head < 1 || g->head > kAttentionMaxHeadDim || g->value_head < 1 || g->value_head > kAttentionMaxHeadDim) {
    return absl::StrFormat("head dims %d and %d (the kernel takes 1 to %d)", g->head, g->value_head,
                           kAttentionMaxHeadDim);
  }
  if (g->keys == 0) return "no keys";
  return MaskMisfit(q, mask, keep, spec, *g);
}

namespace {
std::atomic<int64_t> fused_runs{0};
}  // namespace

int64_t FusedAttentionRuns() { return fused_runs.load(); }
void CountFusedAttentionRun() { ++fused_runs; }

absl::StatusOr<AttentionLayout> AttentionLayoutOf(const Tensor& q, const Tensor& k, const Tensor& v,
                                                  const Tensor* mask, const Tensor* keep) {
  DT_ASSIGN_OR_RETURN(Geometry g, GeometryOf(q, k, v, mask, keep));
  if (g.batch.size() > 2) return absl::InternalError("attention layout: more than two batch dims");
  AttentionLayout l;
  if (g.batch.size() == 2) l.batch[0] = g.batch[0];
  if (!g.batch.empty()) l.batch[1] = g.batch.back();
  l.queries = g.queries;
  l.keys = g.keys;
  l.head = g.head;
  l.value_head = g.value_head;
  l.out_sizes = g.batch;
  l.out_sizes.push_back(g.queries);
  l.out_sizes.push_back(g.value_head);
  l.q = StridesOver(q, l.QuerySizes());
  l.k = StridesOver(k, l.KeySizes());
  l.v = StridesOver(v, l.ValueSizes());
  if (mask != nullptr) l.mask = StridesOver(*mask, l.MaskSizes());
  if (keep != nullptr) l.keep = StridesOver(*keep, l.MaskSizes());
  return l;
}

}  // namespace dt
