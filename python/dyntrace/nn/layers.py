"""dyntrace.nn's layers, with PyTorch's constructors, default initialisations and forward
semantics. Each forward is a few registry ops, so dt.jit traces through it."""
import math

import dyntrace as _dt
from dyntrace.nn import init
from dyntrace.nn.module import Module
from dyntrace.nn.parameter import Parameter


def _functional():
    return _dt.nn.functional


def _new(shape, device, dtype):
    return _dt.empty(*shape, device=device, dtype=dtype or _dt.float32)


class Identity(Module):
    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, x):
        return x


class Linear(Module):
    """y = x @ weight.T + bias; weight and bias ~ U(-1/sqrt(in_features), 1/sqrt(in_features))."""

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(_new((out_features, in_features), device, dtype))
        self.bias = Parameter(_new((out_features,), device, dtype)) if bias else None
        if not bias:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1 / math.sqrt(self.in_features) if self.in_features > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, x):
        # F.linear, as PyTorch's: one op, so autocast runs the product and the bias on its dtype.
        return _dt.nn.functional.linear(x, self.weight, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Embedding(Module):
    """Rows of weight ~ N(0, 1) looked up by index; the padding_idx row starts at zero and is never trained."""

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, device=None, dtype=None):
        super().__init__()
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise AssertionError("Padding_idx must be within num_embeddings")
            padding_idx = padding_idx % num_embeddings
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.padding_idx = padding_idx
        self.weight = Parameter(_new((num_embeddings, embedding_dim), device, dtype))
        init.normal_(self.weight)
        if padding_idx is not None:
            with _dt.no_grad():
                self.weight[padding_idx] = 0.0

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, padding_idx=None, max_norm=None, norm_type=2.0,
                        scale_grad_by_freq=False, sparse=False):
        """An Embedding whose weight is (a copy of) `embeddings` [num, dim]; frozen by default."""
        if embeddings.dim() != 2:
            raise AssertionError("Embeddings parameter is expected to be 2-dimensional")
        if max_norm is not None or scale_grad_by_freq or sparse:
            raise NotImplementedError("Embedding.from_pretrained: max_norm, scale_grad_by_freq and sparse are not "
                                      "supported")
        rows, dim = embeddings.shape
        module = cls(rows, dim, padding_idx=padding_idx, device=embeddings.device, dtype=embeddings.dtype)
        with _dt.no_grad():
            module.weight.copy_(embeddings)
        module.weight.requires_grad_(not freeze)
        return module

    def forward(self, indices):
        return _dt.embedding(indices, self.weight, self.padding_idx)

    def extra_repr(self):
        pad = f", padding_idx={self.padding_idx}" if self.padding_idx is not None else ""
        return f"{self.num_embeddings}, {self.embedding_dim}{pad}"


def _shape_tuple(shape):
    return (shape,) if isinstance(shape, int) else tuple(shape)


class LayerNorm(Module):
    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, device=None, dtype=None):
        super().__init__()
        self.normalized_shape = _shape_tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        self.weight = Parameter(_dt.ones(*self.normalized_shape, device=device, dtype=dtype or _dt.float32)) \
            if elementwise_affine else None
        self.bias = Parameter(_dt.zeros(*self.normalized_shape, device=device, dtype=dtype or _dt.float32)) \
            if elementwise_affine and bias else None

    def forward(self, x):
        return _dt.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class RMSNorm(Module):
    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None, dtype=None):
        super().__init__()
        self.normalized_shape = _shape_tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        self.weight = Parameter(_dt.ones(*self.normalized_shape, device=device, dtype=dtype or _dt.float32)) \
            if elementwise_affine else None

    def forward(self, x):
        return _dt.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class Dropout(Module):
    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def forward(self, x):
        return _functional().dropout(x, self.p, self.training, self.inplace)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Channel dropout of [N, C, H, W] (or [C, H, W]) input: each channel zeroed with probability
    p, the kept ones scaled by 1 / (1 - p), as torch.nn.functional.dropout2d. Drawn as dropout
    draws, `rand(...) >= p`, one draw per channel."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if input.dim() not in (3, 4):
        raise RuntimeError(f"dropout2d: expected a 3-D or 4-D input ([C, H, W] or [N, C, H, W]), got {input.dim()}-D")
    if inplace:
        raise NotImplementedError("dropout2d(inplace=True) is not supported")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input * 0.0
    shape = tuple(input.shape[:-2]) + (1, 1)
    keep = _dt.rand(*shape, dtype=input.dtype, device=input.device) >= p
    return input * keep * (1.0 / (1.0 - p))


class Dropout2d(Dropout):
    def forward(self, x):
        return dropout2d(x, self.p, self.training, self.inplace)


class ReLU(Module):
    def __init__(self, inplace=False):
        super().__init__()

    def forward(self, x):
        return _dt.relu(x)


class GELU(Module):
    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, x):
        return _dt.gelu(x, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class SiLU(Module):
    def __init__(self, inplace=False):
        super().__init__()

    def forward(self, x):
        return _dt.silu(x)


class Tanh(Module):
    def forward(self, x):
        return _dt.tanh(x)


class Sigmoid(Module):
    def forward(self, x):
        return _dt.sigmoid(x)


class Softmax(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return _dt.softmax(x, self.dim)


class LogSoftmax(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return _dt.log_softmax(x, self.dim)


class LeakyReLU(Module):
    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x):
        return _functional().leaky_relu(x, self.negative_slope)


class ELU(Module):
    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha = alpha

    def forward(self, x):
        return _functional().elu(x, self.alpha)


class Hardtanh(Module):
    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False):
        super().__init__()
        self.min_val, self.max_val = min_val, max_val

    def forward(self, x):
        return _functional().hardtanh(x, self.min_val, self.max_val)


class ReLU6(Module):
    def __init__(self, inplace=False):
        super().__init__()

    def forward(self, x):
        return _functional().relu6(x)


class Hardswish(Module):
    def __init__(self, inplace=False):
        super().__init__()

    def forward(self, x):
        return _functional().hardswish(x)


class Mish(Module):
    def __init__(self, inplace=False):
        super().__init__()

    def forward(self, x):
        return _functional().mish(x)


class Softplus(Module):
    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, x):
        return _functional().softplus(x, self.beta, self.threshold)


class GLU(Module):
    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return _functional().glu(x, self.dim)


class _ConvNd(Module):
    """Convolution over (N, C, *spatial); weight and bias initialised as PyTorch's."""
    _rank = 0

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        name = type(self).__name__
        if in_channels % groups or out_channels % groups:
            raise ValueError("in_channels and out_channels must be divisible by groups")
        if padding_mode != "zeros":
            raise NotImplementedError(f"{name}(padding_mode={padding_mode!r}): only 'zeros' is supported")
        tuple_of = lambda v: (v,) * self._rank if isinstance(v, int) else tuple(v)  # noqa: E731
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size, self.stride, self.dilation = tuple_of(kernel_size), tuple_of(stride), tuple_of(dilation)
        self.padding = padding if isinstance(padding, str) else tuple_of(padding)
        self.groups = groups
        self.weight = Parameter(_new((out_channels, in_channels // groups) + self.kernel_size, device, dtype))
        self.bias = Parameter(_new((out_channels,), device, dtype)) if bias else None
        if not bias:
            self.register_parameter("bias", None)
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = (in_channels // groups) * math.prod(self.kernel_size)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def extra_repr(self):
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}, "
                f"padding={self.padding}")


class Conv1d(_ConvNd):
    _rank = 1

    def forward(self, x):
        return _functional().conv1d(x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)


class Conv2d(_ConvNd):
    _rank = 2

    def forward(self, x):
        return _functional().conv2d(x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)


class Flatten(Module):
    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x):
        return x.flatten(self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    def __init__(self, dim, unflattened_size):
        super().__init__()
        self.dim, self.unflattened_size = dim, tuple(unflattened_size)

    def forward(self, x):
        dim = self.dim + x.dim() if self.dim < 0 else self.dim
        return x.reshape(tuple(x.shape[:dim]) + self.unflattened_size + tuple(x.shape[dim + 1:]))

    def extra_repr(self):
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


class Upsample(Module):
    def __init__(self, size=None, scale_factor=None, mode="nearest", align_corners=None):
        super().__init__()
        self.size, self.scale_factor, self.mode, self.align_corners = size, scale_factor, mode, align_corners

    def forward(self, x):
        return _functional().interpolate(x, self.size, self.scale_factor, self.mode, self.align_corners)


class MultiheadAttention(Module):
    """PyTorch's MultiheadAttention (one packed in-projection, scaled_dot_product_attention, an
    out-projection); returns (output, None): per-head weights are not materialised."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, batch_first=False, device=None, dtype=None):
        super().__init__()
        if embed_dim % num_heads:
            raise AssertionError("embed_dim must be divisible by num_heads")
        self.embed_dim, self.num_heads, self.dropout, self.batch_first = embed_dim, num_heads, dropout, batch_first
        self.head_dim = embed_dim // num_heads
        self.in_proj_weight = Parameter(_new((3 * embed_dim, embed_dim), device, dtype))
        self.in_proj_bias = Parameter(_dt.zeros(3 * embed_dim, device=device, dtype=dtype or _dt.float32)) \
            if bias else None
        if not bias:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, device=device, dtype=dtype)
        init.xavier_uniform_(self.in_proj_weight)
        if bias:
            init.zeros_(self.out_proj.bias)

    def _heads(self, x, batch, length):
        return x.reshape(batch, length, self.num_heads, self.head_dim).transpose(1, 2)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=False, attn_mask=None,
                is_causal=False):
        if need_weights:
            raise NotImplementedError("MultiheadAttention(need_weights=True) is not supported")
        if not self.batch_first:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        batch, length, _ = query.shape
        w_q, w_k, w_v = _dt.chunk(self.in_proj_weight, 3)
        b_q, b_k, b_v = _dt.chunk(self.in_proj_bias, 3) if self.in_proj_bias is not None else (None, None, None)
        F = _functional()
        q = self._heads(F.linear(query, w_q, b_q), batch, length)
        k = self._heads(F.linear(key, w_k, b_k), batch, key.shape[1])
        v = self._heads(F.linear(value, w_v, b_v), batch, value.shape[1])
        mask = attn_mask
        if key_padding_mask is not None:
            padding = key_padding_mask.reshape(batch, 1, 1, key.shape[1])
            keep = _dt.logical_not(padding) if padding.dtype == _dt.bool else None
            mask = keep if mask is None else (_dt.logical_and(mask, keep) if keep is not None else mask + padding)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=self.dropout if self.training else 0.0,
                                             is_causal=is_causal)
        out = self.out_proj(out.transpose(1, 2).reshape(batch, length, self.embed_dim))
        return (out if self.batch_first else out.transpose(0, 1)), None
