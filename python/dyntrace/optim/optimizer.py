"""dyntrace.optim.Optimizer: PyTorch's optimizer protocol.

An optimizer holds param groups (each a dict: "params", a list of leaf tensors, plus that group's
options, filled from the optimizer's defaults) and per-parameter state (self.state[param], a dict
of tensors). state_dict() and load_state_dict() use PyTorch's layout: parameters are numbered in
group order, {"state": {index: {...}}, "param_groups": [{options..., "params": [indices]}]}.

Subclasses implement step(); their updates run as one multi-tensor registry op per param group
(dt._fused_sgd_, dt._fused_adam_) where every tensor is a contiguous CPU tensor, and as
per-tensor registry ops otherwise (CUDA tensors: those ops stay on the device) or when
foreach=False.
"""
import copy
from collections import defaultdict

import dyntrace as _dt
from dyntrace.nn.module import _zero_grads


class _RequiredParameter:
    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()


def _is_tensor(x):
    return isinstance(x, _dt.Tensor)


class Optimizer:
    def __init__(self, params, defaults):
        self.defaults = defaults
        self.state = defaultdict(dict)
        self.param_groups = []
        if _is_tensor(params):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors or dicts, "
                            "but got a Tensor")
        param_groups = list(params)
        if not param_groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for group in param_groups:
            self.add_param_group(group)

    def __repr__(self):
        lines = [type(self).__name__ + " ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines.extend(f"    {k}: {group[k]}" for k in sorted(group) if k != "params")
        return "\n".join(lines + [")"])

    def add_param_group(self, param_group):
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, got {type(param_group).__name__}")
        group = dict(param_group)
        params = group["params"]
        group["params"] = [params] if _is_tensor(params) else list(params)
        for p in group["params"]:
            if not _is_tensor(p):
                raise TypeError(f"optimizer can only optimize Tensors, but one of the params is {type(p).__name__}")
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
            if not p.dtype.is_floating_point:
                raise TypeError(f"optimizer can only optimize floating point Tensors, got {p.dtype}")
        for name, default in self.defaults.items():
            if default is required and name not in group:
                raise ValueError(f"parameter group didn't specify a value of required optimization parameter {name}")
            group.setdefault(name, default)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if len({id(p) for p in group["params"]}) != len(group["params"]):
            raise ValueError("optimizer contains a parameter group with duplicate parameters")
        if any(id(p) in seen for p in group["params"]):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(group)

    def zero_grad(self, set_to_none=True):
        _zero_grads((p for group in self.param_groups for p in group["params"]), set_to_none)

    def step(self, closure=None):
        """Calls `closure` (with grad enabled) for the loss it returns, then updates every param
        group under no_grad with the subclass's _step_group(group)."""
        loss = None
        if closure is not None:
            with _dt.enable_grad():
                loss = closure()
        with _dt.no_grad():
            for group in self.param_groups:
                self._step_group(group)
        return loss

    def _step_group(self, group):
        raise NotImplementedError(f"{type(self).__name__} does not define its update (_step_group)")

    # ---- state_dict ----
    def state_dict(self):
        """{"state": {index: state}, "param_groups": [...]}: the state's tensors are the
        optimizer's own (not copies), as in PyTorch."""
        index, groups, start = {}, [], 0
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            packed["params"] = list(range(start, start + len(group["params"])))
            for i, p in zip(packed["params"], group["params"]):
                index[id(p)] = i
            start += len(group["params"])
            groups.append(packed)
        state = {index[id(p)]: s for p, s in self.state.items() if id(p) in index}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        saved_groups = state_dict["param_groups"]
        if len(saved_groups) != len(self.param_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        for ours, saved in zip(self.param_groups, saved_groups):
            if len(ours["params"]) != len(saved["params"]):
                raise ValueError("loaded state dict contains a parameter group that doesn't match the size of "
                                 "optimizer's group")
        by_index = {}
        for ours, saved in zip(self.param_groups, saved_groups):
            by_index.update(zip(saved["params"], ours["params"]))
        self.state = defaultdict(dict)
        for key, values in state_dict["state"].items():
            if int(key) not in by_index:
                raise ValueError(f"loaded state dict has state for parameter {key}, which no group holds")
            param = by_index[int(key)]
            self.state[param] = {name: self._loaded_value(param, name, v) for name, v in values.items()}
        self.param_groups = [dict({k: copy.deepcopy(v) for k, v in saved.items() if k != "params"},
                                  params=ours["params"])
                             for ours, saved in zip(self.param_groups, saved_groups)]

    @staticmethod
    def _loaded_value(param, name, value):
        # A copy on the parameter's device; "step" keeps its own dtype (float32), as PyTorch
        # keeps it, and other floating state takes the parameter's dtype.
        if not _is_tensor(value):
            return copy.deepcopy(value)
        with _dt.no_grad():
            if name == "step" or not value.dtype.is_floating_point:
                return value.to(param.device).clone()
            return value.to(param.device).to(param.dtype).clone()

    # ---- helpers for subclasses ----
    @staticmethod
    def _use_fused(group, tensors):
        """Whether one multi-tensor op can update the group: foreach not turned off, and every
        tensor a contiguous CPU tensor of one dtype. Not inside a compiled function: there the
        per-tensor ops are traced into its graph, whose code generator fuses each tensor's update
        into one kernel (the multi-tensor op writes its arguments eagerly, outside any graph)."""
        if _dt.is_compiling() or group.get("foreach") is False or not tensors:
            return False
        dtype = tensors[0].dtype
        return all(t.device.type == "cpu" and t.dtype == dtype and t.is_contiguous() for t in tensors)
