// Convolutions and pooling of torch.nn.functional: conv1d, conv2d (stride, padding with
// 'same'/'valid', dilation, groups), max_pool2d, avg_pool2d, adaptive_avg_pool2d.
//
// conv2d is _im2col (ops_im2col.cc) then one matmul per image on the BLAS path (runtime/blas.h):
// weight [Cout, C*kh*kw] @ columns [N, C*kh*kw, OH*OW] is already the [N, Cout, OH*OW] output,
// so no transpose follows. Pools reduce the same columns. Output sizes are baked into these
// bodies, so the ops stay whole in graphs (nodes between fused kernels).
#include <array>
#include <cmath>
#include <optional>

#include "absl/strings/str_format.h"
#include "graph/nn_common.h"
#include "graph/op_registry.h"
#include "runtime/errors.h"

namespace dt {
namespace {

// An int or a pair, as PyTorch's _pair: one value for both spatial dims.
absl::StatusOr<std::array<int64_t, 2>> Pair(const Dims& v, absl::string_view op, absl::string_view what) {
  if (v.size() == 1) return std::array<int64_t, 2>{v[0], v[0]};
  if (v.size() == 2) return std::array<int64_t, 2>{v[0], v[1]};
  return Error(ErrorKind::kValue, absl::StrFormat("%s(): %s must be an int or a pair of ints, got %s", op, what,
                                                  DimsToString(v)));
}

struct Window {
  std::array<int64_t, 2> kernel, stride, dilation, pad_before, pad_after;
};

absl::StatusOr<std::array<int64_t, 2>> OutputSize(const Tensor& x, const Window& w, bool ceil_mode,
                                                  absl::string_view op) {
  std::array<int64_t, 2> out{};
  for (int i = 0; i < 2; ++i) {
    const int64_t size = x.size(2 + i) + w.pad_before[i] + w.pad_after[i];
    const int64_t span = w.dilation[i] * (w.kernel[i] - 1) + 1;
    if (w.stride[i] <= 0 || w.dilation[i] <= 0 || w.kernel[i] <= 0) {
      return Error(ErrorKind::kValue, absl::StrFormat("%s(): kernel size, stride and dilation must be positive", op));
    }
    int64_t n = size - span;
    n = n < 0 ? -1 : (ceil_mode ? (n + w.stride[i] - 1) / w.stride[i] : n / w.stride[i]);
    // ceil_mode: the last window must start inside the input or its left padding (PyTorch).
    if (ceil_mode && n >= 0 && n * w.stride[i] >= x.size(2 + i) + w.pad_before[i]) --n;
    out[i] = n + 1;
    if (out[i] <= 0) {
      return Error(ErrorKind::kRuntime,
                   absl::StrFormat("%s(): Given input size %s, the calculated output size is too small "
                                   "(kernel %d x %d, dilation %d x %d, padding %d x %d)",
                                   op, x.ShapeString(), w.kernel[0], w.kernel[1], w.dilation[0],
                                   w.dilation[1], w.pad_before[0], w.pad_before[1]));
    }
  }
  return out;
}

absl::StatusOr<Tensor> Columns(const Tensor& x, const Window& w, const std::array<int64_t, 2>& out,
                               double pad_value) {
  return Call("_im2col", {x, Dims{w.kernel[0], w.kernel[1]}, Dims{w.dilation[0], w.dilation[1]},
                          Dims{w.pad_before[0], w.pad_before[1]}, Dims{w.stride[0], w.stride[1]},
                          Dims{out[0], out[1]}, Scalar::Float(pad_value)});
}

absl::Status CheckConvOperands(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias,
                               int64_t groups, absl::string_view op) {
  if (weight.ndim() != 4) {
    return Error(ErrorKind::kRuntime, absl::StrFormat("%s(): expected weight of 4 dims [out, in/groups, kh, kw] "
                                                      "after unsqueezing, got %s", op, weight.ShapeString()));
  }
  if (x.dtype() != weight.dtype()) {
    return Error(ErrorKind::kRuntime, absl::StrFormat("%s(): Input type (%s) and weight type (%s) should be the same",
                                                      op, DTypeName(x.dtype()), DTypeName(weight.dtype())));
  }
  if (groups <= 0 || weight.size(0) % groups != 0 || x.size(1) != weight.size(1) * groups) {
    return Error(ErrorKind::kRuntime,
                 absl::StrFormat("%s(): Given groups=%d, weight of size %s, expected input%s to have %d "
                                 "channels, but got %d channels instead",
                                 op, groups, weight.ShapeString(), x.ShapeString(), weight.size(1) * groups,
                                 x.size(1)));
  }
  if (bias.has_value() && (bias->ndim() != 1 || bias->size(0) != weight.size(0))) {
    return Error(ErrorKind::kRuntime, absl::StrFormat("%s(): expected bias of shape [%d], got %s", op,
                                                      weight.size(0), bias->ShapeString()));
  }
  return absl::OkStatus();
}

// The convolution of a 4-d input by a 4-d weight.
absl::StatusOr<Tensor> Conv(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias,
                            const Window& w, int64_t groups, absl::string_view op) {
  DT_RETURN_IF_ERROR(CheckConvOperands(x, weight, bias, groups, op));
  DT_ASSIGN_OR_RETURN(auto out, OutputSize(x, w, false, op));
  const int64_t n = x.size(0), cout = weight.size(0), patch = weight.size(1) * w.kernel[0] * w.kernel[1];
  DT_ASSIGN_OR_RETURN(Tensor cols, Columns(x, w, out, 0.0));
  Tensor y;
  if (groups == 1) {
    DT_ASSIGN_OR_RETURN(Tensor w2, Call("reshape", {weight, Dims{cout, patch}}));
    DT_ASSIGN_OR_RETURN(y, Call("matmul", {w2, cols}));
  } else {
    DT_ASSIGN_OR_RETURN(cols, Call("reshape", {cols, Dims{n, groups, patch, out[0] * out[1]}}));
    DT_ASSIGN_OR_RETURN(Tensor w2, Call("reshape", {weight, Dims{groups, cout / groups, patch}}));
    DT_ASSIGN_OR_RETURN(y, Call("matmul", {w2, cols}));
  }
  DT_ASSIGN_OR_RETURN(y, Call("reshape", {y, Dims{n, cout, out[0], out[1]}}));
  if (bias.has_value()) {
    DT_ASSIGN_OR_RETURN(Tensor b, AlongDim(*bias, 1, 4));
    DT_ASSIGN_OR_RETURN(y, Call("add", {y, b}));
  }
  return y;
}

// padding: ints, or 'valid' (none) / 'same' (output size = input size; stride 1 only; an odd
// total puts the extra element after, as PyTorch).
absl::Status SetPadding(const ArgValue& padding, Window& w, absl::string_view op) {
  if (const auto* text = std::get_if<std::string>(&padding)) {
    if (*text != "same" && *text != "valid") {
      return Error(ErrorKind::kValue, absl::StrFormat("%s(): Invalid padding string '%s', should be one of "
                                                      "{'valid', 'same'}", op, *text));
    }
    for (int i = 0; i < 2; ++i) {
      if (*text == "same" && w.stride[i] != 1) {
        return Error(ErrorKind::kValue, absl::StrFormat("%s(): padding='same' is not supported for strided "
                                                        "convolutions", op));
      }
      const int64_t total = *text == "same" ? w.dilation[i] * (w.kernel[i] - 1) : 0;
      w.pad_before[i] = total / 2;
      w.pad_after[i] = total - total / 2;
    }
    return absl::OkStatus();
  }
  DT_ASSIGN_OR_RETURN(auto p, Pair(std::get<Dims>(padding), op, "padding"));
  for (int i = 0; i < 2; ++i) {
    if (p[i] < 0) return Error(ErrorKind::kRuntime, absl::StrFormat("%s(): negative padding is not supported", op));
    w.pad_before[i] = w.pad_after[i] = p[i];
  }
  return absl::OkStatus();
}

// conv1d and conv2d: (input, weight, bias, stride, padding, dilation, groups). conv1d runs as a
// conv2d of height 1; an unbatched input gets a batch of one.
absl::StatusOr<OpResult> ConvEager(const OpDef& op, const OpArgs& args) {
  const bool one_d = op.name().rfind("conv1d", 0) == 0;
  const std::string name = one_d ? "conv1d" : "conv2d";
  Tensor x = args.tensor(0), weight = args.tensor(1);
  const int64_t spatial = one_d ? 1 : 2;
  if (x.ndim() != spatial + 1 && x.ndim() != spatial + 2) {
    return Error(ErrorKind::kRuntime, absl::StrFormat("%s(): Expected %dD (unbatched) or %dD (batched) input to "
                                                      "%s, but got input of size: %s",
                                                      name, spatial + 1, spatial + 2, name, x.ShapeString()));
  }
  DT_RETURN_IF_ERROR(RequireFloatingInput(x, name));
  const bool unbatched = x.ndim() == spatial + 1;
  if (unbatched) {
    DT_ASSIGN_OR_RETURN(x, Call("unsqueeze", {x, Scalar::Int(0)}));
  }
  // conv1d's height dim: kernel 1, stride 1, dilation 1, no padding.
  auto widen = [&](const Dims& v, int64_t unit) { return one_d ? Dims{unit, v.at(0)} : v; };
  if (one_d) {
    DT_ASSIGN_OR_RETURN(x, Call("unsqueeze", {x, Scalar::Int(2)}));
    if (weight.ndim() == 3) {
      DT_ASSIGN_OR_RETURN(weight, Call("unsqueeze", {weight, Scalar::Int(2)}));
    }
  }
  Window w;
  w.kernel = {weight.ndim() == 4 ? weight.size(2) : 1, weight.ndim() == 4 ? weight.size(3) : 1};
  DT_ASSIGN_OR_RETURN(w.stride, Pair(widen(args.ints(3), 1), name, "stride"));
  DT_ASSIGN_OR_RETURN(w.dilation, Pair(widen(args.ints(5), 1), name, "dilation"));
  ArgValue padding = args[4];
  if (one_d && std::holds_alternative<Dims>(padding)) padding = widen(std::get<Dims>(padding), 0);
  DT_RETURN_IF_ERROR(SetPadding(padding, w, name));
  std::optional<Tensor> bias;
  if (!args.is_none(2)) bias = args.tensor(2);
  DT_ASSIGN_OR_RETURN(Tensor y, Conv(x, weight, bias, w, args.int_(6), name));
  if (one_d) {
    DT_ASSIGN_OR_RETURN(y, Call("squeeze", {y, Dims{2}}));
  }
  if (unbatched) {
    DT_ASSIGN_OR_RETURN(y, Call("squeeze", {y, Dims{0}}));
  }
  return OneResult(y);
}


// ---- pooling ----

// kernel_size, stride (None or empty: the kernel), padding and dilation of a 2-d pool, with
// PyTorch's limit on padding.
absl::StatusOr<Window> PoolWindow(const OpArgs& args, bool has_dilation, absl::string_view op) {
  Window w;
  DT_ASSIGN_OR_RETURN(w.kernel, Pair(args.ints(1), op, "kernel_size"));
  w.stride = w.kernel;
  if (!args.is_none(2) && !args.ints(2).empty()) {
    DT_ASSIGN_OR_RETURN(w.stride, Pair(args.ints(2), op, "stride"));
  }
  DT_ASSIGN_OR_RETURN(w.pad_before, Pair(args.ints(3), op, "padding"));
  w.pad_after = w.pad_before;
  w.dilation = {1, 1};
  if (has_dilation) {
    DT_ASSIGN_OR_RETURN(w.dilation, Pair(args.ints(4), op, "dilation"));
  }
  for (int i = 0; i < 2; ++i) {
    if (w.pad_before[i] < 0 || w.pad_before[i] * 2 > w.kernel[i]) {
      return Error(ErrorKind::kRuntime, absl::StrFormat("%s(): pad should be at most half of effective kernel size, "
                                                        "but got pad=%d, kernel_size=%d",
                                                        op, w.pad_before[i], w.kernel[i]));
    }
  }
  return w;
}

// The input as [N, C, H, W] (a 3-d input gets a batch of one), or a RuntimeError.
absl::StatusOr<Tensor> Batched4d(const Tensor& x, absl::string_view op) {
  if (x.ndim() == 4) return x;
  if (x.ndim() == 3) return Call("unsqueeze", {x, Scalar::Int(0)});
  return Error(ErrorKind::kRuntime, absl::StrFormat("%s(): Expected 3D or 4D (batch mode) tensor for input, got %s",
                                                    op, x.ShapeString()));
}

absl::StatusOr<Tensor> Unbatched(const Tensor& y, const Tensor& original) {
  if (original.ndim() == 4) return y;
  return Call("squeeze", {y, Dims{0}});
}

// The columns of `x` as [N, C, kh*kw, OH*OW], reduced over the window by `reduce`.
absl::StatusOr<Tensor> ReduceWindows(const Tensor& x, const Window& w, const std::array<int64_t, 2>& out,
                                     double pad_value, absl::string_view reduce) {
  DT_ASSIGN_OR_RETURN(Tensor cols, Columns(x, w, out, pad_value));
  DT_ASSIGN_OR_RETURN(cols, Call("reshape", {cols, Dims{x.size(0), x.size(1), w.kernel[0] * w.kernel[1], out[0] * out[1]}}));
  DT_ASSIGN_OR_RETURN(Tensor r, Call(reduce, {cols, Dims{2}}));
  return Call("reshape", {r, Dims{x.size(0), x.size(1), out[0], out[1]}});
}

absl::StatusOr<OpResult> MaxPoolEager(const OpDef&, const OpArgs& args) {
  DT_ASSIGN_OR_RETURN(Tensor x, Batched4d(args.tensor(0), "max_pool2d"));
  DT_RETURN_IF_ERROR(RequireFloatingInput(x, "max_pool2d"));
  if (args.bool_(6)) {
    return Error(ErrorKind::kNotImplemented, "max_pool2d(): return_indices=True is not supported");
  }
  DT_ASSIGN_OR_RETURN(Window w, PoolWindow(args, true, "max_pool2d"));
  DT_ASSIGN_OR_RETURN(auto out, OutputSize(x, w, args.bool_(5), "max_pool2d"));
  DT_ASSIGN_OR_RETURN(Tensor y, ReduceWindows(x, w, out, -INFINITY, "amax"));
  DT_ASSIGN_OR_RETURN(y, Unbatched(y, args.tensor(0)));
  return OneResult(y);
}

// How many elements each window averages: those inside the padded input (count_include_pad)
// or inside the input itself, counted by pooling a tensor of ones the same way.
absl::StatusOr<Tensor> WindowCounts(const Tensor& x, Window w, const std::array<int64_t, 2>& out,
                                    bool include_pad) {
  Dims shape{1, 1, x.size(2), x.size(3)};
  if (include_pad) {
    for (int i = 0; i < 2; ++i) shape[2 + i] += 2 * w.pad_before[i];
    w.pad_before = w.pad_after = {0, 0};
  }
  DT_ASSIGN_OR_RETURN(Tensor ones, Call("ones", {shape, x.dtype(), x.device()}));
  return ReduceWindows(ones, w, out, 0.0, "sum");
}

absl::StatusOr<OpResult> AvgPoolEager(const OpDef&, const OpArgs& args) {
  DT_ASSIGN_OR_RETURN(Tensor x, Batched4d(args.tensor(0), "avg_pool2d"));
  DT_RETURN_IF_ERROR(RequireFloatingInput(x, "avg_pool2d"));
  DT_ASSIGN_OR_RETURN(Window w, PoolWindow(args, false, "avg_pool2d"));
  DT_ASSIGN_OR_RETURN(auto out, OutputSize(x, w, args.bool_(4), "avg_pool2d"));
  DT_ASSIGN_OR_RETURN(Tensor sums, ReduceWindows(x, w, out, 0.0, "sum"));
  Tensor y;
  if (!args.is_none(6)) {
    if (args.int_(6) == 0) return Error(ErrorKind::kRuntime, "avg_pool2d(): divisor must be not zero");
    DT_ASSIGN_OR_RETURN(y, Call("div", {sums, args.scalar(6)}));
  } else {
    DT_ASSIGN_OR_RETURN(Tensor counts, WindowCounts(x, w, out, args.bool_(5)));
    DT_ASSIGN_OR_RETURN(y, Call("div", {sums, counts}));
  }
  DT_ASSIGN_OR_RETURN(y, Unbatched(y, args.tensor(0)));
  return OneResult(y);
}

// [out, in]: row i averages input positions [floor(i*in/out), ceil((i+1)*in/out)), PyTorch's
// adaptive windows, built on the input's device from registry ops.
absl::StatusOr<Tensor> AdaptiveMatrix(int64_t in, int64_t out, const Tensor& like) {
  DT_ASSIGN_OR_RETURN(Tensor i, Call("arange", {Scalar::Int(out), None{}, Scalar::Int(1), DType::kInt64, like.device()}));
  DT_ASSIGN_OR_RETURN(Tensor scaled, Call("mul", {i, Scalar::Int(in)}));
  DT_ASSIGN_OR_RETURN(Tensor start, Call("floor_divide", {scaled, Scalar::Int(out)}));
  DT_ASSIGN_OR_RETURN(Tensor next, Call("add", {scaled, Scalar::Int(in + out - 1)}));
  DT_ASSIGN_OR_RETURN(Tensor end, Call("floor_divide", {next, Scalar::Int(out)}));
  DT_ASSIGN_OR_RETURN(start, Call("unsqueeze", {start, Scalar::Int(1)}));
  DT_ASSIGN_OR_RETURN(end, Call("unsqueeze", {end, Scalar::Int(1)}));
  DT_ASSIGN_OR_RETURN(Tensor h, Call("arange", {Scalar::Int(in), None{}, Scalar::Int(1), DType::kInt64, like.device()}));
  DT_ASSIGN_OR_RETURN(Tensor after_start, Call("ge", {h, start}));
  DT_ASSIGN_OR_RETURN(Tensor before_end, Call("lt", {h, end}));
  DT_ASSIGN_OR_RETURN(Tensor inside, Call("logical_and", {after_start, before_end}));
  DT_ASSIGN_OR_RETURN(Tensor weights, Call("_to", {inside, like.dtype()}));
  DT_ASSIGN_OR_RETURN(Tensor lengths, Call("sub", {end, start}));
  return Call("div", {weights, lengths});
}

absl::StatusOr<OpResult> AdaptiveAvgPoolEager(const OpDef&, const OpArgs& args) {
  DT_ASSIGN_OR_RETURN(Tensor x, Batched4d(args.tensor(0), "adaptive_avg_pool2d"));
  DT_RETURN_IF_ERROR(RequireFloatingInput(x, "adaptive_avg_pool2d"));
  DT_ASSIGN_OR_RETURN(auto out, Pair(args.ints(1), "adaptive_avg_pool2d", "output_size"));
  if (out[0] <= 0 || out[1] <= 0 || x.size(2) == 0 || x.size(3) == 0) {
    return Error(ErrorKind::kRuntime, absl::StrFormat("adaptive_avg_pool2d(): output size %s and input %s must "
                                                      "both be non-empty",
                                                      DimsToString(args.ints(1)), x.ShapeString()));
  }
  DT_ASSIGN_OR_RETURN(Tensor rows, AdaptiveMatrix(x.size(2), out[0], x));
  DT_ASSIGN_OR_RETURN(Tensor cols, AdaptiveMatrix(x.size(3), out[1], x));
  DT_ASSIGN_OR_RETURN(Tensor cols_t, Call("transpose", {cols, Scalar::Int(0), Scalar::Int(1)}));
  DT_ASSIGN_OR_RETURN(Tensor y, Call("matmul", {rows, x}));
  DT_ASSIGN_OR_RETURN(y, Call("matmul", {y, cols_t}));
  DT_ASSIGN_OR_RETURN(y, Unbatched(y, args.tensor(0)));
  return OneResult(y);
}

}  // namespace

void RegisterConvOps(OpRegistry& registry) {
  // torch.conv1d/conv2d take the same arguments: both names. A string padding is an overload.
  constexpr uint32_t kConv = kFunction | kNNFunctional;
  for (const char* name : {"conv1d", "conv2d"}) {
    registry.Add(absl::StrCat(name, "(Tensor input, Tensor weight, Tensor? bias=None, int[] stride=1, "
                                    "int[] padding=0, int[] dilation=1, int groups=1) -> Tensor"),
                 OpKind::kComposite, kConv, &ConvEager);
    registry.Add(absl::StrCat(name, ".padding(Tensor input, Tensor weight, Tensor? bias=None, int[] stride=1, "
                                    "str padding='valid', int[] dilation=1, int groups=1) -> Tensor"),
                 OpKind::kComposite, kConv, &ConvEager);
  }
  // torch.max_pool2d matches torch.nn.functional's; avg and adaptive pools are F's only.
  registry.Add("max_pool2d(Tensor input, int[] kernel_size, int[]? stride=None, int[] padding=0, "
               "int[] dilation=1, bool ceil_mode=False, bool return_indices=False) -> Tensor",
               OpKind::kComposite, kConv, &MaxPoolEager);
  registry.Add("avg_pool2d(Tensor input, int[] kernel_size, int[]? stride=None, int[] padding=0, "
               "bool ceil_mode=False, bool count_include_pad=True, int? divisor_override=None) -> Tensor",
               OpKind::kComposite, kNNFunctional, &AvgPoolEager);
  registry.Add("adaptive_avg_pool2d(Tensor input, int[] output_size) -> Tensor", OpKind::kComposite,
               kNNFunctional, &AdaptiveAvgPoolEager);
}

}  // namespace dt
