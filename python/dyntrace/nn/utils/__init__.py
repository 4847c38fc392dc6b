"""dyntrace.nn.utils: torch.nn.utils' gradient clipping and parameters_to_vector; `rnn` holds
pad_sequence.

The clipping functions change the gradients in place with tensor ops only (no .item(), no host
read, as PyTorch's), so inside dt.jit(step, fullgraph=True) they are part of the step's graph
and, on CUDA, of its CUDA graph."""
import math

import dyntrace as _dt
from dyntrace.nn.utils import rnn  # noqa: F401 - dyntrace.nn.utils.rnn, as torch's


def _gradients(parameters):
    if isinstance(parameters, _dt.Tensor):
        parameters = [parameters]
    return [p.grad for p in parameters if p.grad is not None]


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Scales the gradients of `parameters` in place so that their joint `norm_type` norm (the norm
    of the per-tensor norms) is at most `max_norm`; returns that norm before clipping, as a tensor.
    The factor is min(1, max_norm / (norm + 1e-6)), PyTorch's. With error_if_nonfinite, a NaN or
    infinite norm raises RuntimeError (which reads the norm on the host)."""
    grads = _gradients(parameters)
    max_norm, norm_type = float(max_norm), float(norm_type)
    if not grads:
        return _dt.tensor(0.0)
    device = grads[0].device
    norms = [_dt.linalg.vector_norm(g, norm_type).to(device) for g in grads]
    total = _dt.linalg.vector_norm(_dt.stack(norms), norm_type)
    if error_if_nonfinite and not math.isfinite(total.item()):
        raise RuntimeError(
            f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, so it cannot be "
            "clipped. To disable this error and scale the gradients by the non-finite norm anyway, set "
            "`error_if_nonfinite=False`")
    factor = _dt.clamp(max_norm / (total + 1e-6), max=1.0)
    with _dt.no_grad():
        for g in grads:
            g.mul_(factor.to(g.device))
    return total


def clip_grad_norm(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Deprecated spelling of clip_grad_norm_ (PyTorch keeps it too)."""
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamps every gradient of `parameters` to [-clip_value, clip_value] in place."""
    clip_value = float(clip_value)
    with _dt.no_grad():
        for g in _gradients(parameters):
            g.clamp_(min=-clip_value, max=clip_value)


def parameters_to_vector(parameters):
    """The parameters flattened and concatenated into one 1-d tensor (a copy)."""
    return _dt.cat([p.reshape(-1) for p in parameters])
