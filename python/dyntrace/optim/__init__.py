"""dyntrace.optim: optimizers (SGD, Adam, AdamW) and dyntrace.optim.lr_scheduler, as torch.optim.

Each optimizer updates a param group with one multi-tensor registry op (dt._fused_sgd_,
dt._fused_adam_: one pass over the group's tensors in C++), under no_grad.
"""
from dyntrace.optim import lr_scheduler
from dyntrace.optim.adam import Adam, AdamW
from dyntrace.optim.optimizer import Optimizer
from dyntrace.optim.sgd import SGD
