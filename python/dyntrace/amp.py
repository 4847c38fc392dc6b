"""dyntrace.amp: automatic mixed precision, as torch.amp.

`with dyntrace.autocast("cuda"):` (or dyntrace.amp.autocast, or as a decorator) runs the ops that
profit from lower precision (matmul, linear, conv, attention) in float16 (CUDA's default) or
bfloat16 (the CPU's default, or `dtype=`), and ops that need float32's range or accuracy
(softmax, norms, losses, exp and log, sums on CUDA; losses on the CPU) in float32, casting their
arguments; the lists are PyTorch's (graph/autocast.h). Gradients flow back through the casts, so
float32 parameters get float32 gradients. A function compiled by dyntrace.jit and called inside
the region compiles with the same casts (the state it was traced under is guarded); entering or
leaving a region inside compiled code is a graph break. GradScaler scales float16 losses."""
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


def _any_found(found):
    return any(count.item() != 0 for count in found.values())


class GradScaler:
    """Loss scaling for float16 training, as torch.amp.GradScaler: scale(loss) multiplies by the
    scale; unscale_(optimizer) divides the gradients back and notes any inf or NaN among them;
    step(optimizer) unscales if that was not done, and skips the step when something was not
    finite; update() halves the scale after such a step (backoff_factor) and doubles it after
    growth_interval good ones (growth_factor). The check reads one flag on the host per step, as
    PyTorch's does. With enabled=False every method passes through (bfloat16 needs no scaling)."""

    def __init__(self, device="cuda", init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        if not growth_factor > 1.0:
            raise ValueError("The growth factor must be > 1.0.")
        if not backoff_factor < 1.0:
            raise ValueError("The backoff factor must be < 1.0.")
        self._device = device
        self._enabled = bool(enabled)
        self._scale = float(init_scale)
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = int(growth_interval)
        self._growth_tracker = 0
        self._optimizers = {}  # id(optimizer) -> {"stage": "unscaled" | "stepped", "found_inf": tensor}

    def is_enabled(self):
        return self._enabled

    def get_scale(self):
        return self._scale if self._enabled else 1.0

    def get_growth_factor(self):
        return self._growth_factor

    def get_backoff_factor(self):
        return self._backoff_factor

    def get_growth_interval(self):
        return self._growth_interval

    def scale(self, outputs):
        if not self._enabled:
            return outputs
        if isinstance(outputs, _dt.Tensor):
            return outputs * self._scale
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        raise ValueError("outputs must be a Tensor or an iterable of Tensors")

    def unscale_(self, optimizer):
        if not self._enabled:
            return
        state = self._optimizers.setdefault(id(optimizer), {"stage": "ready", "found_inf": None})
        if state["stage"] == "unscaled":
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        if state["stage"] == "stepped":
            raise RuntimeError("unscale_() is being called after step().")
        inverse = 1.0 / self._scale
        found = {}  # per device, a count of gradients with a non-finite value: read once per step
        with _dt.no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    p.grad.mul_(inverse)
                    bad = (~_dt.isfinite(p.grad)).any().float()
                    key = str(p.grad.device)
                    found[key] = found[key] + bad if key in found else bad
        state["stage"], state["found_inf"] = "unscaled", found

    def step(self, optimizer, *args, **kwargs):
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        state = self._optimizers.get(id(optimizer))
        if state is not None and state["stage"] == "stepped":
            raise RuntimeError("step() has already been called since the last update().")
        if state is None or state["stage"] != "unscaled":
            self.unscale_(optimizer)
            state = self._optimizers[id(optimizer)]
        result = optimizer.step(*args, **kwargs) if not _any_found(state["found_inf"]) else None
        state["stage"] = "stepped"
        return result

    def update(self, new_scale=None):
        if not self._enabled:
            return
        if new_scale is not None:
            self._scale = float(new_scale.item() if isinstance(new_scale, _dt.Tensor) else new_scale)
        else:
            checks = [s["found_inf"] for s in self._optimizers.values() if s["found_inf"] is not None]
            if not checks:
                raise RuntimeError("No inf checks were recorded prior to update.")
            if any(_any_found(c) for c in checks):
                self._scale *= self._backoff_factor
                self._growth_tracker = 0
            else:
                self._growth_tracker += 1
                if self._growth_tracker == self._growth_interval:
                    self._scale *= self._growth_factor
                    self._growth_tracker = 0
        self._optimizers = {}

    def state_dict(self):
        if not self._enabled:
            return {}
        return {"scale": self._scale, "growth_factor": self._growth_factor, "backoff_factor": self._backoff_factor,
                "growth_interval": self._growth_interval, "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state_dict):
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved from a disabled "
                               "instance of GradScaler.")
        self._scale = float(state_dict["scale"])
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._growth_tracker = int(state_dict["_growth_tracker"])
