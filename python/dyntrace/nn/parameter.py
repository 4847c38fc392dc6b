"""dyntrace.nn.Parameter: a tensor a Module registers as one of its parameters.

dyntrace.Tensor is a C type that Python cannot subclass cheaply, so a Parameter is a plain
Tensor carrying a parameter flag; isinstance(t, Parameter) reads that flag.
"""
import dyntrace as _dt


class _ParameterType(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, _dt.Tensor) and obj._is_parameter


class Parameter(metaclass=_ParameterType):
    """Parameter(data=None, requires_grad=True): a leaf over data's values that requires grad."""

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            data = _dt.empty(0)
        if not isinstance(data, _dt.Tensor):
            raise TypeError(f"Parameter(): data must be a Tensor, got {type(data).__name__}")
        return _dt._make_parameter(data, requires_grad)
