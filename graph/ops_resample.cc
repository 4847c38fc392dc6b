// pad (constant, reflect, replicate, circular) and interpolate (nearest, bilinear) of
// torch.nn.functional, as composites of registry ops: constant padding concatenates filled
// blocks (a negative pad narrows), reflect/replicate and interpolation gather with index
// tensors made by arange on the input's device, so they run wherever their parts run. Sizes
// are baked into the bodies: the ops stay whole in graphs.
#include <cmath>
#include <optional>

#include "absl/strings/str_format.h"
#include "graph/nn_common.h"
#include "graph/op_registry.h"
#include "runtime/errors.h"

namespace dt {
namespace {

absl::StatusOr<Tensor> Arange(int64_t start, int64_t end, DType dtype, const Tensor& like) {
  return Call("arange", {Scalar::Int(start), Scalar::Int(end), Scalar::Int(1), dtype, like.device()});
}

// x with `before` and `after` elements of `value` added along `dim` (negative: removed).
absl::StatusOr<Tensor> PadConstantDim(Tensor x, int64_t dim, int64_t before, int64_t after, const Scalar& value) {
  const int64_t n = x.size(dim);
  if (before < 0 || after < 0) {
    const int64_t start = std::max<int64_t>(-before, 0), stop = n - std::max<int64_t>(-after, 0);
    DT_ASSIGN_OR_RETURN(x, Call("narrow", {x, Scalar::Int(dim), Scalar::Int(start), Scalar::Int(stop - start)}));
  }
  std::vector<Tensor> parts;
  auto add_block = [&](int64_t count) -> absl::Status {
    if (count <= 0) return absl::OkStatus();
    Dims shape(x.sizes().begin(), x.sizes().end());
    shape[dim] = count;
    DT_ASSIGN_OR_RETURN(Tensor block, Call("full", {shape, value, x.dtype(), x.device()}));
    parts.push_back(block);
    return absl::OkStatus();
  };
  DT_RETURN_IF_ERROR(add_block(before));
  parts.push_back(x);
  DT_RETURN_IF_ERROR(add_block(after));
  return Call("cat", {parts, Scalar::Int(dim)});
}

// Source positions of a reflect, replicate or circular pad: i in [-before, n + after) mapped
// into [0, n).
absl::StatusOr<Tensor> PadIndex(int64_t n, int64_t before, int64_t after, const std::string& mode,
                                const Tensor& like) {
  DT_ASSIGN_OR_RETURN(Tensor i, Arange(-before, n + after, DType::kInt64, like));
  if (mode == "replicate") return Call("clamp", {i, Scalar::Int(0), Scalar::Int(n - 1)});
  if (mode == "circular") return Call("remainder", {i, Scalar::Int(n)});  // Python's sign: in [0, n)
  // (n-1) - |(n-1) - |i||: mirrors at both edges without repeating the edge element.
  DT_ASSIGN_OR_RETURN(Tensor a, Call("abs", {i}));
  DT_ASSIGN_OR_RETURN(Tensor d, Call("sub", {a, Scalar::Int(n - 1)}));
  DT_ASSIGN_OR_RETURN(Tensor m, Call("abs", {d}));
  DT_ASSIGN_OR_RETURN(Tensor neg, Call("neg", {m}));
  return Call("add", {neg, Scalar::Int(n - 1)});
}

absl::Status CheckPadMode(const Tensor& x, const Dims& pad, const std::string& mode) {
  if (pad.size() % 2 != 0 || static_cast<int64_t>(pad.size()) > 2 * x.ndim()) {
    return Error(ErrorKind::kValue, absl::StrFormat("pad(): padding length must be divisible by 2 and at most "
                                                    "twice the input's dims (%d), got %d",
                                                    x.ndim(), pad.size()));
  }
  if (mode == "constant") return absl::OkStatus();
  if (mode != "reflect" && mode != "replicate" && mode != "circular") {
    return Error(ErrorKind::kNotImplemented, absl::StrFormat("pad(): mode '%s' is not supported (constant, "
                                                             "reflect, replicate, circular)", mode));
  }
  if (static_cast<int64_t>(pad.size()) / 2 >= x.ndim()) {
    return Error(ErrorKind::kNotImplemented,
                 absl::StrFormat("pad(): %s padding of %d dims needs a leading batch or channel dim, got "
                                 "input %s", mode, pad.size() / 2, x.ShapeString()));
  }
  for (size_t k = 0; k < pad.size(); ++k) {
    const int64_t dim = x.ndim() - 1 - static_cast<int64_t>(k / 2);
    if (pad[k] < 0 || (mode == "reflect" && pad[k] >= x.size(dim)) || (mode == "circular" && pad[k] > x.size(dim)) ||
        x.size(dim) == 0) {
      return Error(ErrorKind::kRuntime,
                   absl::StrFormat("pad(): %s padding (%d, %d) at dimension %d of input %s: the pads must be "
                                   "non-negative%s",
                                   mode, pad[k - k % 2], pad[k - k % 2 + 1], dim, x.ShapeString(),
                                   mode == "reflect"    ? " and smaller than the dim's size"
                                   : mode == "circular" ? " and at most the dim's size"
                                                        : ""));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<OpResult> PadEager(const OpDef&, const OpArgs& args) {
  Tensor x = args.tensor(0);
  const Dims& pad = args.ints(1);
  const std::string& mode = args.string(2);
  DT_RETURN_IF_ERROR(CheckPadMode(x, pad, mode));
  if (mode != "constant" && !args.is_none(3) && args.float_(3) != 0.0) {
    return Error(ErrorKind::kValue, absl::StrFormat("pad(): padding mode '%s' doesn't take in value argument", mode));
  }
  const Scalar value = args.is_none(3) ? Scalar::Int(0) : args.scalar(3);
  for (size_t k = 0; k + 1 < pad.size(); k += 2) {
    const int64_t dim = x.ndim() - 1 - static_cast<int64_t>(k / 2);
    if (mode == "constant") {
      DT_ASSIGN_OR_RETURN(x, PadConstantDim(x, dim, pad[k], pad[k + 1], value));
    } else {
      DT_ASSIGN_OR_RETURN(Tensor index, PadIndex(x.size(dim), pad[k], pad[k + 1], mode, x));
      DT_ASSIGN_OR_RETURN(x, Call("index_select", {x, Scalar::Int(dim), index}));
    }
  }
  if (pad.empty()) {
    DT_ASSIGN_OR_RETURN(x, Call("clone", {x}));
  }
  return OneResult(x);
}

// ---- interpolate ----

// The output size of each spatial dim and the source-per-destination scale PyTorch uses: in/out
// from `size`, or 1/scale_factor when a scale factor is given (and not recomputed).
struct Resize {
  Dims out;
  std::vector<double> scale;
};

absl::StatusOr<Resize> ResizeOf(const OpArgs& args, const Tensor& x) {
  const int64_t spatial = x.ndim() - 2;
  if (spatial < 1 || spatial > 3) {
    return Error(ErrorKind::kValue, absl::StrFormat("interpolate(): expected a 3-d, 4-d or 5-d input "
                                                    "[N, C, ...], got %s", x.ShapeString()));
  }
  if (args.is_none(1) == args.is_none(2)) {
    return Error(ErrorKind::kValue, "interpolate(): only one of size or scale_factor should be defined");
  }
  Resize r;
  const bool recompute = !args.is_none(5) && args.bool_(5);
  for (int64_t d = 0; d < spatial; ++d) {
    const int64_t in = x.size(2 + d);
    if (!args.is_none(1)) {
      const Dims& size = args.ints(1);
      if (size.size() != 1 && static_cast<int64_t>(size.size()) != spatial) {
        return Error(ErrorKind::kValue, absl::StrFormat("interpolate(): size %s does not match the input's %d "
                                                        "spatial dims", DimsToString(size), spatial));
      }
      r.out.push_back(size.size() == 1 ? size[0] : size[d]);
      r.scale.push_back(static_cast<double>(in) / static_cast<double>(r.out.back()));
    } else {
      const double factor = args.float_(2);
      r.out.push_back(static_cast<int64_t>(std::floor(in * factor)));
      r.scale.push_back(recompute ? static_cast<double>(in) / static_cast<double>(r.out.back()) : 1.0 / factor);
    }
    if (r.out.back() <= 0) {
      return Error(ErrorKind::kValue, absl::StrFormat("interpolate(): output size %d of spatial dim %d must be "
                                                      "positive", r.out.back(), d));
    }
  }
  return r;
}

// nearest: source index floor(dst * scale) (in float32, as PyTorch), clamped to the input.
absl::StatusOr<Tensor> NearestIndex(int64_t in, int64_t out, double scale, const Tensor& like) {
  DT_ASSIGN_OR_RETURN(Tensor dst, Arange(0, out, DType::kFloat32, like));
  DT_ASSIGN_OR_RETURN(Tensor src, Call("mul", {dst, Scalar::Float(static_cast<float>(scale))}));
  DT_ASSIGN_OR_RETURN(src, Call("floor", {src}));
  DT_ASSIGN_OR_RETURN(Tensor index, Call("_to", {src, DType::kInt64}));
  return Call("clamp_max", {index, Scalar::Int(in - 1)});
}

// Along `dim`: the two neighbours of each source position and the weight of the second.
absl::StatusOr<Tensor> LinearAlong(const Tensor& x, int64_t dim, int64_t out, double scale, bool align_corners) {
  const int64_t in = x.size(dim);
  DT_ASSIGN_OR_RETURN(Tensor dst, Arange(0, out, x.dtype(), x));
  Tensor src;
  if (align_corners) {
    const double s = out > 1 ? static_cast<double>(in - 1) / static_cast<double>(out - 1) : 0.0;
    DT_ASSIGN_OR_RETURN(src, Call("mul", {dst, Scalar::Float(s)}));
  } else {
    DT_ASSIGN_OR_RETURN(Tensor centre, Call("add", {dst, Scalar::Float(0.5)}));
    DT_ASSIGN_OR_RETURN(Tensor scaled, Call("mul", {centre, Scalar::Float(scale)}));
    DT_ASSIGN_OR_RETURN(Tensor shifted, Call("sub", {scaled, Scalar::Float(0.5)}));
    DT_ASSIGN_OR_RETURN(src, Call("clamp_min", {shifted, Scalar::Int(0)}));
  }
  DT_ASSIGN_OR_RETURN(Tensor floor, Call("floor", {src}));
  DT_ASSIGN_OR_RETURN(Tensor i0, Call("_to", {floor, DType::kInt64}));
  DT_ASSIGN_OR_RETURN(i0, Call("clamp_max", {i0, Scalar::Int(in - 1)}));
  DT_ASSIGN_OR_RETURN(Tensor i1, Call("add", {i0, Scalar::Int(1)}));
  DT_ASSIGN_OR_RETURN(i1, Call("clamp_max", {i1, Scalar::Int(in - 1)}));
  DT_ASSIGN_OR_RETURN(Tensor lambda, Call("sub", {src, floor}));
  DT_ASSIGN_OR_RETURN(lambda, AlongDim(lambda, dim, x.ndim()));
  DT_ASSIGN_OR_RETURN(Tensor a, Call("index_select", {x, Scalar::Int(dim), i0}));
  DT_ASSIGN_OR_RETURN(Tensor b, Call("index_select", {x, Scalar::Int(dim), i1}));
  DT_ASSIGN_OR_RETURN(Tensor step, Call("sub", {b, a}));
  DT_ASSIGN_OR_RETURN(Tensor moved, Call("mul", {step, lambda}));
  return Call("add", {a, moved});
}

absl::StatusOr<OpResult> InterpolateEager(const OpDef&, const OpArgs& args) {
  Tensor x = args.tensor(0);
  const std::string& mode = args.string(3);
  DT_ASSIGN_OR_RETURN(Resize r, ResizeOf(args, x));
  const int64_t spatial = x.ndim() - 2;
  const bool linear = mode == "bilinear" || mode == "linear";
  if (mode != "nearest" && !linear) {
    return Error(ErrorKind::kNotImplemented,
                 absl::StrFormat("interpolate(): mode '%s' is not supported (nearest, linear, bilinear)", mode));
  }
  if (linear && spatial != (mode == "bilinear" ? 2 : 1)) {
    return Error(ErrorKind::kNotImplemented, absl::StrFormat("interpolate(): got %d-d input, but %s mode needs "
                                                             "%d-d", x.ndim(), mode, mode == "bilinear" ? 4 : 3));
  }
  if (!linear && !args.is_none(4)) {
    return Error(ErrorKind::kValue, "interpolate(): align_corners option can only be set with the interpolating "
                                    "modes: linear | bilinear | bicubic | trilinear");
  }
  if (linear) {
    DT_RETURN_IF_ERROR(RequireFloatingInput(x, "interpolate"));
  }
  const bool align_corners = !args.is_none(4) && args.bool_(4);
  for (int64_t d = 0; d < spatial; ++d) {
    const int64_t dim = 2 + d;
    if (linear) {
      DT_ASSIGN_OR_RETURN(x, LinearAlong(x, dim, r.out[d], r.scale[d], align_corners));
    } else {
      DT_ASSIGN_OR_RETURN(Tensor index, NearestIndex(x.size(dim), r.out[d], r.scale[d], x));
      DT_ASSIGN_OR_RETURN(x, Call("index_select", {x, Scalar::Int(dim), index}));
    }
  }
  return OneResult(x);
}

}  // namespace

void RegisterResampleOps(OpRegistry& registry) {
  registry.Add("pad(Tensor input, int[] pad, str mode='constant', Scalar? value=None) -> Tensor",
               OpKind::kComposite, kNNFunctional, &PadEager);
  registry.Add("interpolate(Tensor input, int[]? size=None, float? scale_factor=None, str mode='nearest', "
               "bool? align_corners=None, bool? recompute_scale_factor=None, bool antialias=False) -> Tensor",
               OpKind::kComposite, kNNFunctional, &InterpolateEager);
}

}  // namespace dt
