"""dyntrace.nn's loss modules, as torch.nn's: each holds its options (and, for the weighted
ones, its weights as buffers) and calls the F function of the same name."""
import dyntrace as _dt
from dyntrace.nn.module import Module


def _functional():
    return _dt.nn.functional


def _reduction(size_average, reduce, reduction):
    """PyTorch's legacy size_average/reduce flags, mapped onto `reduction` as it maps them."""
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    if not reduce:
        return "none"
    return "mean" if size_average else "sum"


class _Loss(Module):
    def __init__(self, size_average=None, reduce=None, reduction="mean"):
        super().__init__()
        self.reduction = _reduction(size_average, reduce, reduction)


class _WeightedLoss(_Loss):
    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)


class CrossEntropyLoss(_WeightedLoss):
    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                 label_smoothing=0.0):
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing

    def forward(self, input, target):
        return _functional().cross_entropy(input, target, weight=self.weight, ignore_index=self.ignore_index,
                                           reduction=self.reduction, label_smoothing=self.label_smoothing)


class NLLLoss(_WeightedLoss):
    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index

    def forward(self, input, target):
        return _functional().nll_loss(input, target, weight=self.weight, ignore_index=self.ignore_index,
                                      reduction=self.reduction)


class MSELoss(_Loss):
    def forward(self, input, target):
        return _functional().mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    def forward(self, input, target):
        return _functional().l1_loss(input, target, reduction=self.reduction)


class SmoothL1Loss(_Loss):
    def __init__(self, size_average=None, reduce=None, reduction="mean", beta=1.0):
        super().__init__(size_average, reduce, reduction)
        self.beta = beta

    def forward(self, input, target):
        return _functional().smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class BCEWithLogitsLoss(_Loss):
    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean", pos_weight=None):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input, target):
        return _functional().binary_cross_entropy_with_logits(input, target, self.weight, reduction=self.reduction,
                                                              pos_weight=self.pos_weight)


class KLDivLoss(_Loss):
    def __init__(self, size_average=None, reduce=None, reduction="mean", log_target=False):
        super().__init__(size_average, reduce, reduction)
        self.log_target = log_target

    def forward(self, input, target):
        return _functional().kl_div(input, target, reduction=self.reduction, log_target=self.log_target)
