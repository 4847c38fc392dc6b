"""dyntrace.nn: modules, parameters, layers and initialisations, as torch.nn.

dyntrace.nn.functional holds the registry's neural-network functions; this package adds the
module system (written in Python: Module, Parameter, the layers and containers),
dyntrace.nn.init and dyntrace.nn.utils (gradient clipping).
"""
from dyntrace.nn import init, utils
from dyntrace.nn.containers import ModuleDict, ModuleList, Sequential
from dyntrace.nn.layers import (GELU, Conv2d, Dropout, Embedding, Identity, LayerNorm, Linear,
                                MultiheadAttention, ReLU, RMSNorm, Sigmoid, SiLU, Softmax, Tanh)
from dyntrace.nn.module import Module
from dyntrace.nn.parameter import Parameter
