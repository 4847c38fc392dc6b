// Attention: scaled_dot_product_attention, and `_fused_attention`, the one-kernel form that
// scaled_dot_product_attention without dropout and the written-out pattern
// `softmax(mask(q @ k^T * scale)) @ v` (jit/attention_pattern.h) reach.
//
// `_fused_attention(q, k, v, mask, scale, mask_kind, post_scale, causal, keep, keep_scale)` is
// dropout(softmax(mask(q k^T * scale) * post_scale)) v, where mask_kind (runtime/attention_abi.h)
// says whether a bool mask keeps or drops its true positions, or a float mask is added, causal
// masks every key after the query's position, and a bool `keep` (dropout's draw, made outside the
// op so the op itself is deterministic) zeroes the weights where it is false and multiplies the
// rest by keep_scale. On CUDA operands it is the fused kernel
// (runtime/cuda_attention.h), on float32 CPU tensors the fused loop (runtime/cpu_attention.h);
// otherwise (meta tensors, float64, a shape the kernels do not take, no NVRTC) it runs its body:
// the two matmuls, the softmax and dropout's two products, the ops scaled_dot_product_attention
// always ran.
// It declares flash attention's derivative (FusedAttentionGrad), so autograd records it as one
// node whose forward is the fused kernel and whose backward recomputes the weights.
#include <algorithm>
#include <cmath>
#include <optional>
#include <variant>

#include "absl/strings/str_format.h"
#include "graph/derivative.h"
#include "graph/nn_common.h"
#include "graph/op_registry.h"
#include "runtime/autograd_meta.h"
#include "runtime/cpu_attention.h"
#include "runtime/cuda_attention.h"
#include "runtime/errors.h"

namespace dt {
namespace {

absl::Status CheckAttentionShapes(const Tensor& q, const Tensor& k, const Tensor& v) {
  const bool ok = q.ndim() >= 2 && k.ndim() == q.ndim() && v.ndim() == q.ndim() &&
                  q.size(q.ndim() - 1) == k.size(k.ndim() - 1) && k.size(k.ndim() - 2) == v.size(v.ndim() - 2);
  if (ok) return absl::OkStatus();
  return Error(ErrorKind::kShape,
               absl::StrFormat("scaled_dot_product_attention(): expected query [..., L, E], key "
                               "[..., S, E] and value [..., S, Ev] of one rank, got %s, %s and %s",
                               q.ShapeString(), k.ShapeString(), v.ShapeString()));
}

// Scores masked as `spec` says: the causal mask and a bool mask's dropped positions become -inf,
// a float mask adds.
absl::StatusOr<Tensor> MaskScores(Tensor scores, const Tensor* mask, const AttentionSpec& spec) {
  const int64_t l = scores.size(scores.ndim() - 2), s = scores.size(scores.ndim() - 1);
  if (spec.causal) {
    DT_ASSIGN_OR_RETURN(Tensor ones, Call("ones", {Dims{l, s}, DType::kBool, scores.device()}));
    DT_ASSIGN_OR_RETURN(Tensor future, Call("triu", {ones, Scalar::Int(1)}));
    DT_ASSIGN_OR_RETURN(scores, Call("masked_fill", {scores, future, Scalar::Float(-INFINITY)}));
  }
  switch (spec.mask_kind) {
    case kAttentionNoMask:
      return scores;
    case kAttentionKeepWhereTrue: {
      DT_ASSIGN_OR_RETURN(Tensor dropped, Call("logical_not", {*mask}));
      return Call("masked_fill", {scores, dropped, Scalar::Float(-INFINITY)});
    }
    case kAttentionDropWhereTrue:
      return Call("masked_fill", {scores, *mask, Scalar::Float(-INFINITY)});
    case kAttentionAddMask:
      return Call("add", {scores, *mask});
  }
  return absl::InternalError("unknown attention mask kind");
}

// softmax(mask(q k^T * scale) * post_scale), one op at a time.
absl::StatusOr<Tensor> AttentionWeights(const Tensor& q, const Tensor& k, const Tensor* mask,
                                        const AttentionSpec& spec) {
  DT_ASSIGN_OR_RETURN(Tensor kt, Call("transpose", {k, Scalar::Int(-2), Scalar::Int(-1)}));
  DT_ASSIGN_OR_RETURN(Tensor scores, Call("matmul", {q, kt}));
  if (spec.scale != 1.0) {
    DT_ASSIGN_OR_RETURN(scores, Call("mul", {scores, Scalar::Float(spec.scale)}));
  }
  DT_ASSIGN_OR_RETURN(scores, MaskScores(scores, mask, spec));
  if (spec.post_scale != 1.0) {
    DT_ASSIGN_OR_RETURN(scores, Call("mul", {scores, Scalar::Float(spec.post_scale)}));
  }
  return Call("softmax", {scores, Scalar::Int(-1)});
}

// Autograd runs the op with grad mode off (it has a formula); a call that reaches the body while
// grad is recorded (differentiating through bodies) must record the ops, not a kernel.
bool NeedsGrad(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor* mask) {
  return TracksGrad(q) || TracksGrad(k) || TracksGrad(v) || (mask != nullptr && TracksGrad(*mask));
}

// `_fused_attention`'s scalar arguments; an error for a mask kind its mask contradicts, or a
// dropout keep mask that is not bool.
absl::StatusOr<AttentionSpec> SpecOf(const OpArgs& args) {
  const int64_t kind = args.int_(5);
  if (kind < kAttentionNoMask || kind > kAttentionAddMask || args.is_none(3) != (kind == kAttentionNoMask)) {
    return Error(ErrorKind::kValue, absl::StrFormat("_fused_attention(): mask_kind %d with %s mask", kind,
                                                    args.is_none(3) ? "no" : "a"));
  }
  if (!args.is_none(8) && args.tensor(8).dtype() != DType::kBool) {
    return Error(ErrorKind::kType, absl::StrFormat("_fused_attention(): the dropout keep mask must be bool, not %s",
                                                   DTypeName(args.tensor(8).dtype())));
  }
  return AttentionSpec{.mask_kind = static_cast<AttentionMask>(kind), .scale = args.float_(4),
                       .post_scale = args.float_(6), .causal = args.bool_(7), .keep_scale = args.float_(9)};
}

// Dropout's product, as graph/ops_nn.cc's dropout computes it: the weights times keep, then times
// keep_scale.
absl::StatusOr<Tensor> Dropped(const Tensor& weights, const Tensor* keep, const AttentionSpec& spec) {
  if (keep == nullptr) return weights;
  DT_ASSIGN_OR_RETURN(Tensor kept, Call("mul", {weights, *keep}));
  return Call("mul", {kept, Scalar::Float(spec.keep_scale)});
}

absl::StatusOr<OpResult> FusedAttentionEager(const OpDef&, const OpArgs& args) {
  const Tensor& q = args.tensor(0);
  const Tensor& k = args.tensor(1);
  const Tensor& v = args.tensor(2);
  const Tensor* mask = args.is_none(3) ? nullptr : &args.tensor(3);
  const Tensor* keep = args.is_none(8) ? nullptr : &args.tensor(8);
  DT_ASSIGN_OR_RETURN(const AttentionSpec spec, SpecOf(args));
  if (!NeedsGrad(q, k, v, mask) && (q.device().type == DeviceType::kCuda || q.device().is_cpu())) {
    DT_ASSIGN_OR_RETURN(std::optional<Tensor> fused, q.device().is_cpu()
                                                         ? FusedAttentionOnHost(q, k, v, mask, keep, spec)
                                                         : FusedAttentionOnDevice(q, k, v, mask, keep, spec));
    if (fused.has_value()) return OneResult(*std::move(fused));
  }
  DT_ASSIGN_OR_RETURN(Tensor weights, AttentionWeights(q, k, mask, spec));
  DT_ASSIGN_OR_RETURN(weights, Dropped(weights, keep, spec));
  DT_ASSIGN_OR_RETURN(Tensor out, Call("matmul", {weights, v}));
  return OneResult(out);
}

// The gradients of dropout(softmax(mask(q k^T * scale) * post_scale)) v. The weights P are
// recomputed from q and k, as flash attention's backward does: the fused forward never stores the
// [L, S] scores, so what a training step keeps for backward is q, k, v, the mask and dropout's
// bool keep. With dO the output's gradient and D = keep * keep_scale (1 without dropout):
// dV = (P D)^T dO; the weights' gradient is dP = (dO V^T) D; the masked scores' gradient is
// P (dP - rowsum(P dP)) (softmax's), times post_scale; an additive mask gets that, q k^T that
// times scale, so dQ = dZ K and dK = dZ^T Q.
absl::StatusOr<ArgGrads> FusedAttentionGrad(const GradContext& c) {
  const Tensor& q = c.input(0);
  const Tensor& k = c.input(1);
  const Tensor& v = c.input(2);
  const Tensor* mask = c.args.is_none(3) ? nullptr : &c.input(3);
  const Tensor* keep = c.args.is_none(8) ? nullptr : &c.input(8);
  DT_ASSIGN_OR_RETURN(const AttentionSpec spec, SpecOf(c.args));
  ArgGrads grads(c.args.size());
  DT_ASSIGN_OR_RETURN(Tensor p, AttentionWeights(q, k, mask, spec));
  if (c.needs(2)) {
    DT_ASSIGN_OR_RETURN(Tensor dropped, Dropped(p, keep, spec));
    DT_ASSIGN_OR_RETURN(Tensor dropped_t, Call("transpose", {dropped, Scalar::Int(-2), Scalar::Int(-1)}));
    DT_ASSIGN_OR_RETURN(grads[2], Call("matmul", {dropped_t, c.grad()}));
  }
  const bool mask_grad = c.needs(3) && spec.mask_kind == kAttentionAddMask;
  if (!c.needs(0) && !c.needs(1) && !mask_grad) return grads;
  DT_ASSIGN_OR_RETURN(Tensor vt, Call("transpose", {v, Scalar::Int(-2), Scalar::Int(-1)}));
  DT_ASSIGN_OR_RETURN(Tensor dp, Call("matmul", {c.grad(), vt}));
  DT_ASSIGN_OR_RETURN(dp, Dropped(dp, keep, spec));
  DT_ASSIGN_OR_RETURN(Tensor weighted, Call("mul", {dp, p}));
  DT_ASSIGN_OR_RETURN(Tensor total, Call("sum", {weighted, Dims{-1}, Scalar::Bool(true), None{}}));
  DT_ASSIGN_OR_RETURN(Tensor centred, Call("sub", {dp, total}));
  DT_ASSIGN_OR_RETURN(Tensor ds, Call("mul", {p, centred}));
  if (spec.post_scale != 1.0) {
    DT_ASSIGN_OR_RETURN(ds, Call("mul", {ds, Scalar::Float(spec.post_scale)}));
  }
  if (mask_grad) grads[3] = ds;
  if (spec.scale != 1.0) {
    DT_ASSIGN_OR_RETURN(ds, Call("mul", {ds, Scalar::Float(spec.scale)}));
  }
  if (c.needs(0)) {
    DT_ASSIGN_OR_RETURN(grads[0], Call("matmul", {ds, k}));
  }
  if (c.needs(1)) {
    DT_ASSIGN_OR_RETURN(Tensor dst, Call("transpose", {ds, Scalar::Int(-2), Scalar::Int(-1)}));
    DT_ASSIGN_OR_RETURN(grads[1], Call("matmul", {dst, q}));
  }
  return grads;
}

// Attention whose weights go through dropout with probability p (0 < p < 1) as `_fused_attention`
// with a keep mask: drawn as dropout draws it (rand of the weights' shape and dtype, kept where
// >= p), so the same seed drops the same weights as the unfused ops did. REQUIRES: q, k, v and an
// additive mask of one dtype (the weights' dtype; with mixed dtypes the unfused ops run).
absl::StatusOr<Tensor> DroppedAttention(const Tensor& q, const Tensor& k, const Tensor& v, const ArgValue& mask,
                                        const AttentionSpec& spec, double p) {
  // The weights' shape: the scores' (q k^T broadcast with the mask), not the result's (v's batch
  // dims do not reach the weights).
  auto batch_dims = [](const Tensor& t) {
    return Dims(t.sizes().begin(), t.sizes().begin() + std::max<int64_t>(0, t.ndim() - 2));
  };
  DT_ASSIGN_OR_RETURN(Dims weights_shape, BroadcastShapes(batch_dims(q), batch_dims(k)));
  if (const Tensor* m = std::get_if<Tensor>(&mask)) {
    DT_ASSIGN_OR_RETURN(weights_shape, BroadcastShapes(weights_shape, batch_dims(*m)));
  }
  weights_shape.push_back(q.size(q.ndim() - 2));
  weights_shape.push_back(k.size(k.ndim() - 2));
  DT_ASSIGN_OR_RETURN(Tensor u, Call("rand", {weights_shape, q.dtype(), q.device()}));
  DT_ASSIGN_OR_RETURN(Tensor keep, Call("ge", {u, Scalar::Float(p)}));
  return Call("_fused_attention", {q, k, v, mask, Scalar::Float(spec.scale), Scalar::Int(spec.mask_kind),
                                   Scalar::Float(1.0), Scalar::Bool(spec.causal), keep,
                                   Scalar::Float(1.0 / (1.0 - p))});
}

// softmax(q k^T * scale + mask) v, with dropout on the weights when dropout_p > 0.
absl::StatusOr<OpResult> AttentionEager(const OpDef&, const OpArgs& args) {
  const Tensor& q = args.tensor(0);
  const Tensor& k = args.tensor(1);
  const Tensor& v = args.tensor(2);
  DT_RETURN_IF_ERROR(RequireFloatingInput(q, "scaled_dot_product_attention"));
  DT_RETURN_IF_ERROR(CheckAttentionShapes(q, k, v));
  if (args.bool_(5) && !args.is_none(3)) {
    return Error(ErrorKind::kValue,
                 "scaled_dot_product_attention(): explicit attn_mask should not be set when is_causal=True");
  }
  const Tensor* mask = args.is_none(3) ? nullptr : &args.tensor(3);
  AttentionSpec spec;
  spec.scale = args.is_none(6) ? 1.0 / std::sqrt(static_cast<double>(q.size(q.ndim() - 1))) : args.float_(6);
  spec.causal = args.bool_(5);
  if (mask != nullptr) spec.mask_kind = mask->dtype() == DType::kBool ? kAttentionKeepWhereTrue : kAttentionAddMask;
  if (args.float_(4) <= 0.0) {
    DT_ASSIGN_OR_RETURN(Tensor out, Call("_fused_attention", {q, k, v, args[3], Scalar::Float(spec.scale),
                                                              Scalar::Int(spec.mask_kind), Scalar::Float(1.0),
                                                              Scalar::Bool(spec.causal)}));
    return OneResult(out);
  }
  const double p = args.float_(4);
  const bool one_dtype = k.dtype() == q.dtype() && v.dtype() == q.dtype() &&
                         (mask == nullptr || mask->dtype() == DType::kBool || mask->dtype() == q.dtype());
  if (p < 1.0 && one_dtype) {
    DT_ASSIGN_OR_RETURN(Tensor out, DroppedAttention(q, k, v, args[3], spec, p));
    return OneResult(out);
  }
  DT_ASSIGN_OR_RETURN(Tensor weights, AttentionWeights(q, k, mask, spec));
  DT_ASSIGN_OR_RETURN(weights, Call("dropout", {weights, args[4], Scalar::Bool(true)}));
  DT_ASSIGN_OR_RETURN(Tensor out, Call("matmul", {weights, v}));
  return OneResult(out);
}

}  // namespace

void RegisterAttentionOps(OpRegistry& registry) {
  // The default scale and the causal mask bake sizes (E, and L x S): the op stays whole. Its
  // body's ops each run on the device, so a CUDA graph may hold it.
  registry.Add("scaled_dot_product_attention(Tensor query, Tensor key, Tensor value, Tensor? attn_mask=None, "
               "float dropout_p=0.0, bool is_causal=False, *, float? scale=None) -> Tensor",
               OpKind::kComposite, kNNFunctional | kRandom | kCudaNative, &AttentionEager);
  // Its derivative is declared here, beside the body it shares with its forward.
  registry.Add("_fused_attention(Tensor query, Tensor key, Tensor value, Tensor? mask=None, float scale=1.0, "
               "int mask_kind=0, float post_scale=1.0, bool causal=False, Tensor? keep=None, "
               "float keep_scale=1.0) -> Tensor",
               OpKind::kComposite, kCudaNative, &FusedAttentionEager)
      .derivative = {&FusedAttentionGrad, true, false};
}

}  // namespace dt
