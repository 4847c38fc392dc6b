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


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulates the gradients of `tensors` into the leaves' .grad, in one pass; with `inputs`
    (tensors, leaves or not), into those tensors' .grad only."""
    tensors = _as_tuple(tensors)
    if grad_tensors is not None:
        grad_tensors = _as_tuple(grad_tensors)
    if inputs is None:
        inputs = ()
    else:
        inputs = _as_tuple(inputs)
        if not inputs:
            raise RuntimeError("'inputs' argument to backward() cannot be empty.")
    _dt._autograd_grad(tensors, inputs, grad_tensors, retain_graph, create_graph, False, True)


def gradcheck(fn, inputs, eps=1e-6, atol=1e-6, rtol=1e-5):
    """Compares backward's gradients of fn at float64 `inputs` with central finite differences.

    The numeric Jacobian takes two calls of fn per input element; the analytic one a backward
    pass per output element, so keep inputs small. In float64 with eps=1e-6 the difference
    quotient's rounding error is about 2e-16 * |f| / eps = 2e-10 |f| and its truncation error
    eps**2 * |f'''| / 6, so the default tolerances hold for smooth functions away from kinks.
    Returns True, or raises AssertionError naming the output, input and element.
    """
    inputs = _as_tuple(inputs)
    wanted = [i for i, x in enumerate(inputs) if isinstance(x, _dt.Tensor) and x.requires_grad]
    for i in wanted:
        if inputs[i].dtype != _dt.float64:
            raise ValueError(f"gradcheck: input {i} is {inputs[i].dtype}; use float64 inputs")
    outputs = [o for o in _as_tuple(fn(*inputs)) if o.is_floating_point()]
    numeric = {i: _numeric_columns(fn, inputs, i, eps) for i in wanted}
    offset = 0
    for o_index, out in enumerate(outputs):
        flat = out.reshape(-1)
        for k in range(flat.numel()):
            if not out.requires_grad:
                analytic = [None] * len(wanted)
            else:
                analytic = grad(flat[k], [inputs[i] for i in wanted], retain_graph=True, allow_unused=True)
            for i, g in zip(wanted, analytic):
                got = [0.0] * inputs[i].numel() if g is None else g.reshape(-1).tolist()
                for j, a in enumerate(got):
                    n = numeric[i][j][offset + k]
                    if abs(a - n) > atol + rtol * abs(n):
                        raise AssertionError(
                            f"gradcheck: d output{o_index}[{k}] / d input{i}[{j}] (shape "
                            f"{tuple(inputs[i].shape)}): backward gives {a!r}, finite differences {n!r}")
        offset += flat.numel()
    return True


def _numeric_columns(fn, inputs, position, eps):
    """For each element j of inputs[position]: the central difference of every floating output
    element, flattened in order. Works on a contiguous copy (the input itself never changes, so
    the graph backward walks stays valid)."""
    # fn runs with grad mode as the caller has it (fn may itself differentiate); only the
    # perturbations are made under no_grad.
    columns = []
    copy = inputs[position].detach().contiguous().clone().requires_grad_(inputs[position].requires_grad)
    flat = copy.detach().view(-1)
    trial = list(inputs)
    trial[position] = copy

    def evaluate():
        values = []
        for o in _as_tuple(fn(*trial)):
            if o.is_floating_point():
                values.extend(o.detach().reshape(-1).tolist())
        return values

    for j in range(copy.numel()):
        with no_grad():
            original = flat[j].item()
            flat[j] = original + eps
        plus = evaluate()
        with no_grad():
            flat[j] = original - eps
        minus = evaluate()
        with no_grad():
            flat[j] = original
        columns.append([(p - m) / (2 * eps) for p, m in zip(plus, minus)])
    return columns


# PyTorch has these at the top level too (torch.no_grad ...).
_dt.no_grad = no_grad
_dt.enable_grad = enable_grad
_dt.inference_mode = inference_mode
_dt.set_grad_enabled = set_grad_enabled
