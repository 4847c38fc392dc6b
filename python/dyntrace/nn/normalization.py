"""dyntrace.nn's batch and group normalisation layers, as torch.nn's: BatchNorm1d/2d/3d keep
running statistics in buffers that F.batch_norm updates in place while training (so a compiled
training step writes them in their own storage), and count batches in `num_batches_tracked`."""
import dyntrace as _dt
from dyntrace.nn.module import Module
from dyntrace.nn.parameter import Parameter


def _functional():
    return _dt.nn.functional


def _affine_parameters(module, affine, count, device, dtype):
    """weight (ones) and bias (zeros) of `count` channels, or both registered as None."""
    if affine:
        module.weight = Parameter(_dt.ones(count, device=device, dtype=dtype))
        module.bias = Parameter(_dt.zeros(count, device=device, dtype=dtype))
    else:
        module.register_parameter("weight", None)
        module.register_parameter("bias", None)


class _BatchNorm(Module):
    _expected_ranks = ()

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 device=None, dtype=None):
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        dtype = dtype or _dt.float32
        _affine_parameters(self, affine, num_features, device, dtype)
        if track_running_stats:
            self.register_buffer("running_mean", _dt.zeros(num_features, device=device, dtype=dtype))
            self.register_buffer("running_var", _dt.ones(num_features, device=device, dtype=dtype))
            self.register_buffer("num_batches_tracked", _dt.tensor(0, dtype=_dt.int64, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)

    def reset_running_stats(self):
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1)
            self.num_batches_tracked.zero_()

    def reset_parameters(self):
        self.reset_running_stats()
        if self.affine:
            self.weight.data.fill_(1)
            self.bias.data.zero_()

    def _check_input_dim(self, x):
        if x.dim() not in self._expected_ranks:
            ranks = " or ".join(f"{r}D" for r in self._expected_ranks)
            raise ValueError(f"expected {ranks} input (got {x.dim()}D input)")

    def forward(self, x):
        self._check_input_dim(x)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:  # a cumulative average, as PyTorch's (reads the count back)
                factor = 1.0 / float(self.num_batches_tracked)
        # Batch statistics while training, and whenever there are no running ones to use.
        use_batch_stats = self.training or (self.running_mean is None and self.running_var is None)
        track = not self.training or self.track_running_stats
        return _functional().batch_norm(x, self.running_mean if track else None,
                                        self.running_var if track else None, self.weight, self.bias,
                                        use_batch_stats, factor, self.eps)

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    _expected_ranks = (2, 3)


class BatchNorm2d(_BatchNorm):
    _expected_ranks = (4,)


class BatchNorm3d(_BatchNorm):
    _expected_ranks = (5,)


class GroupNorm(Module):
    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None, dtype=None):
        super().__init__()
        if num_channels % num_groups != 0:
            raise ValueError("num_channels must be divisible by num_groups")
        self.num_groups, self.num_channels, self.eps, self.affine = num_groups, num_channels, eps, affine
        _affine_parameters(self, affine, num_channels, device, dtype or _dt.float32)

    def forward(self, x):
        return _functional().group_norm(x, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"
