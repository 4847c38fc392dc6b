"""dyntrace.autograd: gradients of tensor code, as torch.autograd.

The engine is C++ (autograd/ in the repository); this module is its Python surface:
grad(), backward(), the grad-mode context managers (also exported as dyntrace.no_grad,
dyntrace.enable_grad, dyntrace.set_grad_enabled, dyntrace.inference_mode) and gradcheck().
"""
import functools

import dyntrace as _dt


class _GradModeContext:
    """A context manager and decorator that sets grad mode for its block."""

    _enabled = True

    def __init__(self):
        self._previous = []

    def __enter__(self):
        self._previous.append(_dt.is_grad_enabled())
        _dt._set_grad_enabled(self._enabled)
        return None

    def __exit__(self, *exc_info):
        _dt._set_grad_enabled(self._previous.pop())
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def with_mode(*args, **kwargs):
            with self._fresh():
                return fn(*args, **kwargs)

        return with_mode

    def _fresh(self):
        return type(self)()


class no_grad(_GradModeContext):
    """Ops in the block record nothing for backward (`with dyntrace.no_grad():` or `@no_grad()`)."""

    _enabled = False


class enable_grad(_GradModeContext):
    """Ops in the block record for backward, even inside no_grad."""

    _enabled = True


class inference_mode(_GradModeContext):
    """Like no_grad (dyntrace has no separate inference tensors); inference_mode(False) records."""

    def __init__(self, mode=True):
        super().__init__()
        self._mode = bool(mode)
        self._enabled = not self._mode

    def _fresh(self):
        return inference_mode(self._mode)


class set_grad_enabled(_GradModeContext):
    """Sets grad mode at once (as a call) and restores the previous mode when its block ends."""

    def __init__(self, mode):
        super().__init__()
        self._enabled = bool(mode)
        self._previous.append(_dt.is_grad_enabled())
        _dt._set_grad_enabled(self._enabled)

    def __enter__(self):
        return None

    def _fresh(self):
        return set_grad_enabled(self._enabled)


def _as_tuple(tensors):
    if isinstance(tensors, _dt.Tensor):
        return (tensors,)
    return tuple(tensors)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, allow_unused=False):
    """The gradients of `outputs` with respect to `inputs`, as a tuple; .grad is left alone."""
    outputs = _as_tuple(outputs)
    if grad_outputs is not None:
        grad_outputs = _as_tuple(grad_outputs)
    return _dt._autograd_grad(outputs, _as_tuple(inputs), grad_outputs, retain_graph, create_graph,
                              allow_unused)


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False):
    """Accumulates the gradients of `tensors` into the leaves' .grad, in one pass."""
    tensors = _as_tuple(tensors)
    if grad_tensors is not None:
        grad_tensors = _as_tuple(grad_tensors)
    _dt._autograd_grad(tensors, (), grad_tensors, retain_graph, create_graph, False, True)


def gradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-3):
    """Compares backward's gradients of fn at float64 `inputs` with central finite differences.

    Each output element's gradient row is checked (one backward pass per output element), so
    keep inputs small. Returns True, or raises AssertionError naming the input and element.
    """
    inputs = _as_tuple(inputs)
    for i, x in enumerate(inputs):
        if x.requires_grad and x.dtype != _dt.float64:
            raise ValueError(f"gradcheck: input {i} is {x.dtype}; use float64 inputs")
    wanted = [x for x in inputs if isinstance(x, _dt.Tensor) and x.requires_grad]
    outputs = _as_tuple(fn(*inputs))
    for out_index, out in enumerate(outputs):
        flat = out.reshape(-1)
        for k in range(flat.numel()):
            analytic = grad(flat[k], wanted, retain_graph=True, allow_unused=True)
            for x, g in zip(wanted, analytic):
                numeric = _numeric_row(fn, inputs, x, out_index, k, eps)
                got = [0.0] * x.numel() if g is None else g.reshape(-1).tolist()
                for j, (a, n) in enumerate(zip(got, numeric)):
                    if abs(a - n) > atol + rtol * abs(n):
                        raise AssertionError(
                            f"gradcheck: d output[{out_index}][{k}] / d input element {j} of shape "
                            f"{tuple(x.shape)}: backward gives {a!r}, finite differences {n!r}")
    return True


def _numeric_row(fn, inputs, x, out_index, k, eps):
    """d output[k] / d x[j] for every j, on a perturbed copy (x itself is never changed, so the
    graph backward walks stays valid)."""
    row = []
    position = next(i for i, v in enumerate(inputs) if v is x)
    with no_grad():
        copy = x.detach().clone()
        flat = copy.view(-1)
        trial = list(inputs)
        trial[position] = copy
        for j in range(x.numel()):
            original = flat[j].item()
            flat[j] = original + eps
            plus = _as_tuple(fn(*trial))[out_index].reshape(-1)[k].item()
            flat[j] = original - eps
            minus = _as_tuple(fn(*trial))[out_index].reshape(-1)[k].item()
            flat[j] = original
            row.append((plus - minus) / (2 * eps))
    return row


# PyTorch has these at the top level too (torch.no_grad ...).
_dt.no_grad = no_grad
_dt.enable_grad = enable_grad
_dt.inference_mode = inference_mode
_dt.set_grad_enabled = set_grad_enabled
