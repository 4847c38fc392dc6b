"""dyntrace.nn's pooling layers, as torch.nn's: thin modules over F.max_pool2d, F.avg_pool2d and
F.adaptive_avg_pool2d."""
import dyntrace as _dt
from dyntrace.nn.module import Module


def _functional():
    return _dt.nn.functional


def _pair(value):
    return (value, value) if isinstance(value, int) else tuple(value)


class MaxPool2d(Module):
    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False):
        super().__init__()
        if return_indices:
            raise NotImplementedError("MaxPool2d(return_indices=True) is not supported")
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.dilation, self.ceil_mode = padding, dilation, ceil_mode
        self.return_indices = return_indices

    def forward(self, x):
        return _functional().max_pool2d(x, _pair(self.kernel_size), _pair(self.stride), _pair(self.padding),
                                        _pair(self.dilation), self.ceil_mode)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class AvgPool2d(Module):
    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                 divisor_override=None):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.ceil_mode = padding, ceil_mode
        self.count_include_pad, self.divisor_override = count_include_pad, divisor_override

    def forward(self, x):
        return _functional().avg_pool2d(x, _pair(self.kernel_size), _pair(self.stride), _pair(self.padding),
                                        self.ceil_mode, self.count_include_pad, self.divisor_override)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AdaptiveAvgPool2d(Module):
    """output_size: an int, or a pair whose None entries keep the input's size there."""

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, x):
        size = _pair(self.output_size)
        size = tuple(x.shape[-2 + i] if s is None else s for i, s in enumerate(size))
        return _functional().adaptive_avg_pool2d(x, size)

    def extra_repr(self):
        return f"output_size={self.output_size}"
