"""dyntrace.optim.Adam and AdamW: PyTorch's rules (bias-corrected moments, amsgrad, maximize;
Adam's L2 weight decay added to the gradient, AdamW's decoupled decay of the parameter), as
torch.optim.Adam/AdamW update (see graph/ops_optim.cc). state["step"] is a 0-d float32 tensor per
parameter: on the CPU, as in PyTorch, for a CPU parameter; on the parameter's device for a CUDA
one, as PyTorch's capturable Adam keeps it, so that a step neither reads the count back to the host
nor mixes devices, and a compiled step can be one CUDA graph."""
import math

import dyntrace as _dt
from dyntrace.optim.optimizer import Optimizer


class Adam(Optimizer):
    _decoupled_weight_decay = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, *,
                 foreach=None, maximize=False):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                        maximize=maximize, foreach=foreach)
        super().__init__(params, defaults)

    def _state_of(self, p, amsgrad):
        state = self.state.setdefault(p, {})
        step_device = p.device if p.device.type == "cuda" else "cpu"
        if not state:
            state["step"] = _dt.tensor(0.0, dtype=_dt.float32, device=step_device)
            state["exp_avg"] = _dt.zeros_like(p)
            state["exp_avg_sq"] = _dt.zeros_like(p)
        elif not isinstance(state["step"], _dt.Tensor):  # a count saved as a number (older PyTorch)
            state["step"] = _dt.tensor(float(state["step"]), dtype=_dt.float32, device=step_device)
        elif state["step"].device != p.device and step_device != "cpu":  # loaded from a CPU state dict
            state["step"] = state["step"].to(step_device)
        if amsgrad and "max_exp_avg_sq" not in state:
            state["max_exp_avg_sq"] = _dt.zeros_like(p)
        return state

    def _step_group(self, group):
        params = [p for p in group["params"] if p.grad is not None]
        grads = [p.grad.contiguous() for p in params]
        amsgrad = group["amsgrad"]
        states = [self._state_of(p, amsgrad) for p in params]
        lists = [[s[k] for s in states] for k in ("exp_avg", "exp_avg_sq")]
        max_sqs = [s["max_exp_avg_sq"] for s in states] if amsgrad else []
        steps = [s["step"] for s in states]
        beta1, beta2 = group["betas"]
        options = (group["lr"], beta1, beta2, group["weight_decay"], group["eps"], amsgrad, group["maximize"],
                   self._decoupled_weight_decay)
        cpu_steps = all(s.device.type == "cpu" and s.dtype in (_dt.float32, _dt.float64) for s in steps)
        if cpu_steps and self._use_fused(group, params + grads + lists[0] + lists[1] + max_sqs):
            _dt._fused_adam_(params, grads, lists[0], lists[1], max_sqs, steps, *options)
        else:
            _adam_per_tensor(params, grads, lists[0], lists[1], max_sqs, steps, *options)


class AdamW(Adam):
    _decoupled_weight_decay = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 foreach=None, maximize=False):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach, maximize=maximize)


def _adam_per_tensor(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, lr, beta1, beta2, weight_decay,
                     eps, amsgrad, maximize, decoupled):
    """The same rule with registry ops, one tensor at a time: the path for CUDA tensors (whose ops
    stay on the device), mixed or non-contiguous layouts, foreach=False, and compiled code.

    In compiled code, and for counts kept on a CUDA device (PyTorch's capturable Adam), the bias
    corrections are computed from the step counts as tensors, so no count is read back into Python
    (which would end the graph there, or wait for the device) and one graph serves every step;
    elsewhere from the count as a Python number."""
    compiling = _dt.is_compiling()
    for i, p in enumerate(params):
        capturable = compiling or steps[i].device.type != "cpu"
        steps[i].add_(1)
        if capturable:
            # Before the update: compiled, these 0-d values are a kernel of their own, made
            # before the kernel that updates m, v and p and so readable by it.
            step_size = lr / (1 - beta1 ** steps[i])
            bias_correction2_sqrt = (1 - beta2 ** steps[i]).sqrt()
        g = -grads[i] if maximize else grads[i]
        if weight_decay != 0 and not decoupled:
            g = g.add(p, alpha=weight_decay)
        m, v = exp_avgs[i], exp_avg_sqs[i]
        # Each tensor is written once (m and v move toward g and g*g as lerps do, the decoupled
        # decay is part of p's one update), so that compiled, m, v and p update in one kernel.
        m.add_((g - m) * (1 - beta1))
        v.add_((g * g - v) * (1 - beta2))
        if amsgrad:
            max_exp_avg_sqs[i].copy_(_dt.maximum(max_exp_avg_sqs[i], v))
            v = max_exp_avg_sqs[i]
        if capturable:
            denom = v.sqrt() / bias_correction2_sqrt + eps
            update = m / denom * step_size
        else:
            step = steps[i].item()
            denom = v.sqrt() / math.sqrt(1 - beta2 ** step) + eps
            update = m / denom * (lr / (1 - beta1 ** step))
        p.sub_(p * (lr * weight_decay) + update if weight_decay != 0 and decoupled else update)
