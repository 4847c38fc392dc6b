// _im2col: the patches of a [N, C, H, W] input as columns, [N, C*kh*kw, OH*OW], so that a
// convolution or a pooling is a matrix multiply or a reduction over them (ops_conv.cc). Padding
// may differ before and after (padding='same' with an even kernel): the caller gives the output
// size, and every read outside the input gives `pad_value`.
//
// _col2im is its adjoint (a convolution's input gradient): each column entry added back onto the
// input element it was read from, entries read from padding dropped. Per input plane, in the
// columns' order (kernel row, kernel column, output position), so results do not depend on the
// thread count.
#include <algorithm>
#include <cstring>

#include "absl/strings/str_format.h"
#include "graph/cuda_eager.h"
#include "graph/op_registry.h"
#include "graph/pointwise.h"
#include "runtime/copy.h"
#include "runtime/cuda_index_kernels.h"
#include "runtime/errors.h"
#include "runtime/parallel.h"

namespace dt {
namespace {

struct Geometry {
  int64_t channels, height, width;
  int64_t kh, kw, dh, dw, ph, pw, sh, sw, oh, ow;
};

// The [lo, hi) range of output positions o with 0 <= o*stride + offset < size.
std::pair<int64_t, int64_t> InsideRange(int64_t offset, int64_t stride, int64_t size, int64_t count) {
  int64_t lo = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  int64_t hi = size - 1 - offset < 0 ? 0 : (size - 1 - offset) / stride + 1;
  lo = std::min(lo, count);
  hi = std::clamp(hi, lo, count);
  return {lo, hi};
}

// One column row: channel plane `src` [H, W] read at kernel offset (ki, kj) into `dst` [OH*OW].
template <typename T>
void FillRow(const T* src, T* dst, const Geometry& g, int64_t ki, int64_t kj, T pad) {
  const int64_t row_off = ki * g.dh - g.ph, col_off = kj * g.dw - g.pw;
  const auto [wlo, whi] = InsideRange(col_off, g.sw, g.width, g.ow);
  for (int64_t o = 0; o < g.oh; ++o) {
    T* out = dst + o * g.ow;
    const int64_t ih = o * g.sh + row_off;
    if (ih < 0 || ih >= g.height) {
      std::fill(out, out + g.ow, pad);
      continue;
    }
    const T* in = src + ih * g.width + col_off;
    std::fill(out, out + wlo, pad);
    if (g.sw == 1) {
      std::memcpy(out + wlo, in + wlo, (whi - wlo) * sizeof(T));
    } else {
      for (int64_t p = wlo; p < whi; ++p) out[p] = in[p * g.sw];
    }
    std::fill(out + whi, out + g.ow, pad);
  }
}

template <typename T>
void Im2col(const Tensor& input, const Tensor& out, const Geometry& g, double pad_value) {
  const T* src = input.data_as<T>();
  T* dst = out.data_as<T>();
  const int64_t planes = input.size(0) * g.channels;
  const int64_t rows_per_plane = g.kh * g.kw, row = g.oh * g.ow;
  const T pad = static_cast<T>(pad_value);
  ParallelFor(planes, 1, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      const T* plane = src + p * g.height * g.width;
      for (int64_t ki = 0; ki < g.kh; ++ki) {
        for (int64_t kj = 0; kj < g.kw; ++kj) {
          FillRow(plane, dst + (p * rows_per_plane + ki * g.kw + kj) * row, g, ki, kj, pad);
        }
      }
    }
  });
}

// The device form: padding written around a copy of x, then one gather of the out's
// (plane, ki, kj, oi, oj) positions from that padded copy's strides.
absl::Status Im2colOnDevice(const Tensor& x, const Tensor& out, const Geometry& g, Scalar pad_value) {
  // Rows and columns the reads reach, from -ph and -pw: the after side may be padded more.
  const int64_t rows = std::max(g.ph + g.height, (g.oh - 1) * g.sh + (g.kh - 1) * g.dh + 1);
  const int64_t cols = std::max(g.pw + g.width, (g.ow - 1) * g.sw + (g.kw - 1) * g.dw + 1);
  Tensor padded = x;
  if (rows != g.height || cols != g.width) {
    padded = Tensor::Empty({x.size(0), g.channels, rows, cols}, x.dtype(), x.device());
    DT_RETURN_IF_ERROR(Fill(padded, pad_value));
    const Tensor interior = padded.AsStrided(x.sizes(), padded.strides(),
                                             padded.offset() + g.ph * padded.stride(2) + g.pw * padded.stride(3));
    DT_RETURN_IF_ERROR(CopyInto(interior, x));
  }
  const Dims sizes{x.size(0), g.channels, g.kh, g.kw, g.oh, g.ow};
  const Tensor view = out.AsStrided(sizes, ContiguousStrides(sizes), out.offset());
  const Dims strides{padded.stride(0), padded.stride(1), g.dh * padded.stride(2), g.dw * padded.stride(3),
                     g.sh * padded.stride(2), g.sw * padded.stride(3)};
  return GatherOnDevice(view, DomainOperand{padded, strides}, {});
}

// Plane by plane: each plane of `dst` [H, W] is the sum of its kh*kw column rows scattered back.
template <typename T>
void Col2im(const Tensor& columns, const Tensor& out, const Geometry& g) {
  const T* src = columns.data_as<T>();
  T* dst = out.data_as<T>();
  const int64_t planes = out.size(0) * g.channels, rows_per_plane = g.kh * g.kw, row = g.oh * g.ow;
  ParallelFor(planes, 1, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      T* plane = dst + p * g.height * g.width;
      std::fill(plane, plane + g.height * g.width, T(0));
      for (int64_t ki = 0; ki < g.kh; ++ki) {
        for (int64_t kj = 0; kj < g.kw; ++kj) {
          const T* from = src + (p * rows_per_plane + ki * g.kw + kj) * row;
          const int64_t row_off = ki * g.dh - g.ph, col_off = kj * g.dw - g.pw;
          const auto [wlo, whi] = InsideRange(col_off, g.sw, g.width, g.ow);
          for (int64_t o = 0; o < g.oh; ++o) {
            const int64_t ih = o * g.sh + row_off;
            if (ih < 0 || ih >= g.height) continue;
            T* to = plane + ih * g.width + col_off;
            const T* in = from + o * g.ow;
            for (int64_t q = wlo; q < whi; ++q) to[q * g.sw] += in[q];
          }
        }
      }
    }
  });
}

// The device form: a zeroed buffer padded as Im2colOnDevice reads, one strided in-place add per
// kernel offset (its targets are distinct, so no add races another), then the interior.
absl::Status Col2imOnDevice(const Tensor& columns, const Tensor& out, const Geometry& g) {
  const int64_t n = out.size(0);
  const int64_t rows = std::max(g.ph + g.height, (g.oh - 1) * g.sh + (g.kh - 1) * g.dh + 1);
  const int64_t cols = std::max(g.pw + g.width, (g.ow - 1) * g.sw + (g.kw - 1) * g.dw + 1);
  Tensor padded = Tensor::Empty({n, g.channels, rows, cols}, out.dtype(), out.device());
  DT_RETURN_IF_ERROR(Fill(padded, Scalar::Int(0)));
  const OpDef* add = OpRegistry::Get().Find("add");
  const Dims strides{padded.stride(0), padded.stride(1), g.sh * padded.stride(2), g.sw * padded.stride(3)};
  const Dims sizes{n, g.channels, g.oh, g.ow};
  const int64_t plane_rows = g.kh * g.kw * g.oh * g.ow;
  for (int64_t ki = 0; ki < g.kh; ++ki) {
    for (int64_t kj = 0; kj < g.kw; ++kj) {
      const Tensor target = padded.AsStrided(sizes, strides, padded.offset() + ki * g.dh * padded.stride(2) +
                                                                 kj * g.dw * padded.stride(3));
      const Tensor source = columns.AsStrided(sizes, {g.channels * plane_rows, plane_rows, g.ow, 1},
                                              columns.offset() + (ki * g.kw + kj) * g.oh * g.ow);
      DT_RETURN_IF_ERROR(RunPointwise(*add, OpArgs({target, source}), &target).status());
    }
  }
  const Tensor interior = padded.AsStrided(out.sizes(), padded.strides(),
                                           padded.offset() + g.ph * padded.stride(2) + g.pw * padded.stride(3));
  return GatherOnDevice(out, DomainOperand{interior, interior.strides()}, {});
}

absl::StatusOr<OpResult> Col2imEager(const OpDef& op, const OpArgs& args) {
  const Tensor& columns = args.tensor(0);
  DT_RUN_THROUGH_HOST_IF_NEEDED(op, args, columns);
  const Dims &in = args.ints(1), &k = args.ints(2), &d = args.ints(3), &p = args.ints(4), &s = args.ints(5),
             &o = args.ints(6);
  const bool sized = in.size() == 2 && k.size() == 2 && d.size() == 2 && p.size() == 2 && s.size() == 2 &&
                     o.size() == 2 && columns.ndim() == 3 && k[0] * k[1] > 0;
  if (!sized || columns.size(1) % (k[0] * k[1]) != 0 || columns.size(2) != o[0] * o[1]) {
    return absl::InternalError(absl::StrFormat("_col2im: bad arguments for columns %s", columns.ShapeString()));
  }
  if (columns.dtype() != DType::kFloat32 && columns.dtype() != DType::kFloat64) {
    return Error(ErrorKind::kType, absl::StrFormat("convolution and pooling on the CPU take float32 or float64 "
                                                   "inputs, got %s", DTypeName(columns.dtype())));
  }
  const int64_t channels = columns.size(1) / (k[0] * k[1]);
  const Geometry g{channels, in[0], in[1], k[0], k[1], d[0], d[1], p[0], p[1], s[0], s[1], o[0], o[1]};
  Tensor out = Tensor::Empty({columns.size(0), channels, in[0], in[1]}, columns.dtype(), columns.device());
  if (out.is_meta() || out.numel() == 0) return OpResult{out};
  if (IndexKernelsRun(columns)) {
    DT_ASSIGN_OR_RETURN(Tensor dense, Call("contiguous", {columns}));
    DT_RETURN_IF_ERROR(Col2imOnDevice(dense, out, g));
    return OpResult{out};
  }
  DT_ASSIGN_OR_RETURN(Tensor dense, Call("contiguous", {columns}));
  if (columns.dtype() == DType::kFloat32) Col2im<float>(dense, out, g);
  else Col2im<double>(dense, out, g);
  return OpResult{out};
}

absl::StatusOr<OpResult> Im2colEager(const OpDef& op, const OpArgs& args) {
  const Tensor& x = args.tensor(0);
  DT_RUN_THROUGH_HOST_IF_NEEDED(op, args, x);
  const Dims &k = args.ints(1), &d = args.ints(2), &p = args.ints(3), &s = args.ints(4), &o = args.ints(5);
  if (x.ndim() != 4 || k.size() != 2 || d.size() != 2 || p.size() != 2 || s.size() != 2 || o.size() != 2) {
    return absl::InternalError(absl::StrFormat("_im2col: bad arguments for input %s", x.ShapeString()));
  }
  if (x.dtype() != DType::kFloat32 && x.dtype() != DType::kFloat64) {
    return Error(ErrorKind::kType, absl::StrFormat("convolution and pooling on the CPU take float32 or float64 "
                                                   "inputs, got %s",
                                                   DTypeName(x.dtype())));
  }
  const Geometry g{x.size(1), x.size(2), x.size(3), k[0], k[1], d[0], d[1], p[0], p[1], s[0], s[1], o[0], o[1]};
  Tensor out = Tensor::Empty({x.size(0), g.channels * g.kh * g.kw, g.oh * g.ow}, x.dtype(), x.device());
  if (out.is_meta() || out.numel() == 0) return OpResult{out};
  if (IndexKernelsRun(x)) {
    DT_RETURN_IF_ERROR(Im2colOnDevice(x, out, g, args.scalar(6)));
    return OpResult{out};
  }
  DT_ASSIGN_OR_RETURN(Tensor input, Call("contiguous", {x}));
  if (x.dtype() == DType::kFloat32) Im2col<float>(input, out, g, args.float_(6));
  else Im2col<double>(input, out, g, args.float_(6));
  return OpResult{out};
}

}  // namespace

void RegisterIm2colOp(OpRegistry& registry) {
  registry.Add("_im2col(Tensor input, int[] kernel_size, int[] dilation, int[] padding, int[] stride, "
               "int[] output_size, Scalar pad_value=0) -> Tensor",
               OpKind::kData, kCudaNative, &Im2colEager);
  registry.Add("_col2im(Tensor columns, int[] input_size, int[] kernel_size, int[] dilation, int[] padding, "
               "int[] stride, int[] output_size) -> Tensor",
               OpKind::kData, kCudaNative, &Col2imEager);
}

}  // namespace dt
