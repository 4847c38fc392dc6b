"""dyntrace.nn: modules, parameters, layers and initialisations, as torch.nn.

dyntrace.nn.functional holds the registry's neural-network functions; this package adds the
module system (written in Python: Module, Parameter, the layers, normalisations, pooling,
recurrent layers, losses and containers), dyntrace.nn.init and dyntrace.nn.utils (gradient clipping).
"""
from dyntrace.nn import init, utils
from dyntrace.nn.containers import ModuleDict, ModuleList, Sequential
from dyntrace.nn.layers import (ELU, GELU, GLU, Conv1d, Conv2d, Dropout, Dropout2d, Embedding, Flatten, Hardswish, Hardtanh,
                                Identity, LayerNorm, LeakyReLU, Linear, LogSoftmax, Mish, MultiheadAttention, ReLU,
                                ReLU6, RMSNorm, Sigmoid, SiLU, Softmax, Softplus, Tanh, Unflatten, Upsample)
from dyntrace.nn.loss import (BCEWithLogitsLoss, CrossEntropyLoss, KLDivLoss, L1Loss, MSELoss, NLLLoss,
                              SmoothL1Loss)
from dyntrace.nn.module import Module
from dyntrace.nn.normalization import BatchNorm1d, BatchNorm2d, BatchNorm3d, GroupNorm
from dyntrace.nn.parameter import Parameter
from dyntrace.nn.layers import dropout2d as _dropout2d
from dyntrace.nn.pooling import AdaptiveAvgPool2d, AvgPool2d, MaxPool2d
from dyntrace.nn.rnn import GRU, LSTM, RNN

# F.dropout2d: Python, beside the registry's functions (it is a rand draw and a product).
functional.dropout2d = _dropout2d
