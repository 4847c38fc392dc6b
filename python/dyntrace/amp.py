"""dyntrace.amp: automatic mixed precision, as torch.amp.

`with dyntrace.autocast("cuda"):` (or dyntrace.amp.autocast, or as a decorator) runs the ops that
profit from lower precision (matmul, linear, conv, attention) in float16 (CUDA's default) or
bfloat16 (the CPU's default, or `dtype=`), and ops that need float32's range or accuracy
(softmax, norms, losses, exp and log, sums on CUDA; losses on the CPU) in float32, casting their
arguments; the lists are PyTorch's (graph/autocast.h). Gradients flow back through the casts, so
float32 parameters get float32 gradients. A function compiled by dyntrace.jit and called inside
the region compiles with the same casts (the state it was traced under is guarded); entering or
leaving a region inside compiled code is a graph break."""
import functools
import warnings

import dyntrace as _dt

_DEFAULT_DTYPES = {"cuda": _dt.float16, "cpu": _dt.bfloat16}


def is_autocast_available(device_type):
    return device_type in _DEFAULT_DTYPES


class autocast:
    """Autocast for `device_type` ("cuda" or "cpu") in the block: a context manager and decorator."""

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        if not isinstance(device_type, str) or device_type not in _DEFAULT_DTYPES:
            raise RuntimeError(f"User specified an unsupported autocast device_type '{device_type}'")
        self.device = device_type
        self.fast_dtype = _DEFAULT_DTYPES[device_type] if dtype is None else dtype
        self._enabled = bool(enabled)
        if self._enabled and self.fast_dtype not in (_dt.float16, _dt.bfloat16):
            warnings.warn(f"In {device_type} autocast, but the target dtype {self.fast_dtype} is not supported. "
                          "Disabling autocast.")
            self._enabled = False
        self._previous = []

    def __enter__(self):
        self._previous.append(_dt._autocast_state(self.device))
        _dt._set_autocast(self.device, self._enabled, self.fast_dtype)
        return self

    def __exit__(self, *exc_info):
        enabled, dtype = self._previous.pop()
        _dt._set_autocast(self.device, enabled, dtype)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def autocast_wrapper(*args, **kwargs):
            with autocast(self.device, self.fast_dtype, self._enabled):
                return fn(*args, **kwargs)

        return autocast_wrapper


def is_autocast_enabled(device_type=None):
    """Whether autocast is on for `device_type` (CUDA when not given, as in PyTorch)."""
    return _dt._autocast_state("cuda" if device_type is None else device_type)[0]


def get_autocast_dtype(device_type):
    return _dt._autocast_state(device_type)[1]


_dt.autocast = autocast
_dt.is_autocast_enabled = is_autocast_enabled
_dt.get_autocast_dtype = get_autocast_dtype
_dt.is_autocast_available = is_autocast_available
