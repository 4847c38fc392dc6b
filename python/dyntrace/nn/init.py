"""dyntrace.nn.init: PyTorch's parameter initialisations, changing tensors in place without
recording gradients. Random draws use dyntrace's generator (dyntrace.manual_seed)."""
import math

import dyntrace as _dt


def calculate_gain(nonlinearity, param=None):
    linear = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "sigmoid")
    if nonlinearity in linear:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else param
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _fans(tensor):
    if tensor.dim() < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    receptive = 1
    for s in tensor.shape[2:]:
        receptive *= s
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _fill_from(tensor, values):
    with _dt.no_grad():
        tensor.copy_(values)
    return tensor


def uniform_(tensor, a=0.0, b=1.0):
    draw = _dt.rand(*tensor.shape, dtype=tensor.dtype, device=tensor.device)
    return _fill_from(tensor, draw * (b - a) + a)


def normal_(tensor, mean=0.0, std=1.0):
    draw = _dt.randn(*tensor.shape, dtype=tensor.dtype, device=tensor.device)
    return _fill_from(tensor, draw * std + mean)


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0):
    """Normal(mean, std) redrawn until every value lies in [a, b]."""
    with _dt.no_grad():
        draw = _dt.randn(*tensor.shape, dtype=tensor.dtype, device=tensor.device) * std + mean
        outside = (draw < a) | (draw > b)
        while outside.any().item():
            fresh = _dt.randn(*tensor.shape, dtype=tensor.dtype, device=tensor.device) * std + mean
            draw = _dt.where(outside, fresh, draw)
            outside = (draw < a) | (draw > b)
        tensor.copy_(draw)
    return tensor


def constant_(tensor, val):
    with _dt.no_grad():
        tensor.fill_(val)
    return tensor


def zeros_(tensor):
    return constant_(tensor, 0.0)


def ones_(tensor):
    return constant_(tensor, 1.0)


def xavier_uniform_(tensor, gain=1.0):
    fan_in, fan_out = _fans(tensor)
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(tensor, -bound, bound)


def xavier_normal_(tensor, gain=1.0):
    fan_in, fan_out = _fans(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)))


def _kaiming_std(tensor, a, mode, nonlinearity):
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _fans(tensor)
    return calculate_gain(nonlinearity, a) / math.sqrt(fan_in if mode == "fan_in" else fan_out)


def kaiming_uniform_(tensor, a=0.0, mode="fan_in", nonlinearity="leaky_relu"):
    bound = math.sqrt(3.0) * _kaiming_std(tensor, a, mode, nonlinearity)
    return uniform_(tensor, -bound, bound)


def kaiming_normal_(tensor, a=0.0, mode="fan_in", nonlinearity="leaky_relu"):
    return normal_(tensor, 0.0, _kaiming_std(tensor, a, mode, nonlinearity))
