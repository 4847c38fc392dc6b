"""dyntrace.optim.SGD: stochastic gradient descent with PyTorch's momentum, dampening, Nesterov,
weight decay and maximize, exactly as torch.optim.SGD updates (see graph/ops_optim.cc)."""
import dyntrace as _dt
from dyntrace.optim.optimizer import Optimizer, required


class SGD(Optimizer):
    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, *,
                 maximize=False, foreach=None):
        if lr is not required and lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov, maximize=maximize, foreach=foreach)
        super().__init__(params, defaults)

    def _step_group(self, group):
        params = [p for p in group["params"] if p.grad is not None]
        grads = [p.grad.contiguous() for p in params]
        uses_momentum = group["momentum"] != 0
        buffers = [self.state.get(p, {}).get("momentum_buffer") for p in params]
        options = (group["lr"], group["momentum"], group["dampening"], group["weight_decay"],
                   group["nesterov"], group["maximize"])
        if self._use_fused(group, params + grads + [b for b in buffers if b is not None]):
            fresh = [i for i, b in enumerate(buffers) if b is None] if uses_momentum else []
            for i in fresh:
                buffers[i] = _dt.empty_like(params[i])
            _dt._fused_sgd_(params, grads, buffers if uses_momentum else [], fresh, *options)
        else:
            _sgd_per_tensor(params, grads, buffers, *options)
        if uses_momentum:
            for p, b in zip(params, buffers):
                self.state.setdefault(p, {})["momentum_buffer"] = b


def _sgd_per_tensor(params, grads, buffers, lr, momentum, dampening, weight_decay, nesterov, maximize):
    """The same rule with registry ops, one tensor at a time: the path for CUDA tensors (whose ops
    stay on the device), mixed or non-contiguous layouts, and foreach=False. Fills `buffers`."""
    for i, p in enumerate(params):
        g = -grads[i] if maximize else grads[i]
        if weight_decay != 0:
            g = g.add(p, alpha=weight_decay)
        if momentum != 0:
            if buffers[i] is None:
                buffers[i] = g.clone()
            else:
                buffers[i].mul_(momentum).add_(g, alpha=1 - dampening)
            g = g.add(buffers[i], alpha=momentum) if nesterov else buffers[i]
        p.add_(g, alpha=-lr)
