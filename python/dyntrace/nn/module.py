"""dyntrace.nn.Module: PyTorch's module protocol.

Parameters, buffers and submodules live in the instance's __dict__ like any attribute (so
reading `self.weight` is a plain attribute load, cheap eagerly and simple to trace) and are
also recorded, in assignment order, in _parameters / _buffers / _modules, which
parameters(), state_dict() and the rest walk.
"""
from collections import OrderedDict, namedtuple

import dyntrace as _dt
from dyntrace.nn.parameter import Parameter

_IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


class Module:
    def __init__(self):
        object.__setattr__(self, "training", True)
        # Plain dicts (ordered, as OrderedDict): compiled code follows dict methods, so a
        # Sequential's loop over its modules compiles into the caller's graph.
        object.__setattr__(self, "_parameters", {})
        object.__setattr__(self, "_buffers", {})
        object.__setattr__(self, "_non_persistent", set())
        object.__setattr__(self, "_modules", {})

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    # ---- registration ----
    def _registries(self, name):
        registries = self.__dict__.get("_parameters")
        if registries is None:
            raise AttributeError(f"cannot assign '{name}' before Module.__init__() call")
        return self._parameters, self._buffers, self._modules

    def __setattr__(self, name, value):
        if isinstance(value, Parameter):
            self.register_parameter(name, value)
        elif isinstance(value, Module):
            self.add_module(name, value)
        else:
            params = self.__dict__.get("_parameters")
            if params is not None and name in params:
                if value is not None:
                    raise TypeError(f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                                    "(dyntrace.nn.Parameter or None expected)")
                params[name] = None
            elif params is not None and name in self._buffers:
                if value is not None and not isinstance(value, _dt.Tensor):
                    raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                                    "(dyntrace.Tensor or None expected)")
                self._buffers[name] = value
            elif params is not None and name in self._modules:
                if value is not None:
                    raise TypeError(f"cannot assign '{type(value).__name__}' as child module '{name}' "
                                    "(dyntrace.nn.Module or None expected)")
                self._modules[name] = None
            object.__setattr__(self, name, value)

    def __delattr__(self, name):
        for registry in (self._parameters, self._buffers, self._modules):
            registry.pop(name, None)
        self._non_persistent.discard(name)
        object.__delattr__(self, name)

    def _forget(self, name):
        for registry in self._registries(name):
            registry.pop(name, None)

    def register_parameter(self, name, param):
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter '{name}' "
                            "(dyntrace.nn.Parameter or None required)")
        self._check_name(name)
        self._forget(name)
        self._parameters[name] = param
        object.__setattr__(self, name, param)

    def register_buffer(self, name, tensor, persistent=True):
        if tensor is not None and not isinstance(tensor, _dt.Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' "
                            "(dyntrace.Tensor or None required)")
        self._check_name(name)
        self._forget(name)
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent.discard(name)
        else:
            self._non_persistent.add(name)
        object.__setattr__(self, name, tensor)

    def add_module(self, name, module):
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        self._check_name(name)
        self._forget(name)
        self._modules[name] = module
        object.__setattr__(self, name, module)

    register_module = add_module

    @staticmethod
    def _check_name(name):
        if not isinstance(name, str):
            raise TypeError(f"attribute name should be a string, got {type(name).__name__}")
        if not name or "." in name:
            raise KeyError(f'attribute name can\'t be empty or contain ".", got: {name!r}')

    # ---- walking the tree ----
    # The walks below collect their results into a list and return its iterator: a generator
    # whose body updates a `seen` set could not be traced ahead of its consumer (dt.jit of a
    # training step calling clip_grad_norm_(model.parameters(), ...)).
    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        found = []
        self._collect_modules(set() if memo is None else memo, prefix, remove_duplicate, found)
        return iter(found)

    def _collect_modules(self, memo, prefix, remove_duplicate, found):
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        found.append((prefix, self))
        for name, child in self._modules.items():
            if child is not None:
                child._collect_modules(memo, prefix + ("." if prefix else "") + name, remove_duplicate, found)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        seen, found = set(), []
        for name, child in self._modules.items():
            if child is not None and id(child) not in seen:
                seen.add(id(child))
                found.append((name, child))
        return iter(found)

    def children(self):
        for _, child in self.named_children():
            yield child

    def _named_members(self, registry, prefix, recurse, remove_duplicate):
        seen, found = set(), []
        pairs = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        for module_prefix, module in pairs:
            for name, value in getattr(module, registry).items():
                if value is None or (remove_duplicate and id(value) in seen):
                    continue
                seen.add(id(value))
                found.append((module_prefix + ("." if module_prefix else "") + name, value))
        return iter(found)

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def get_submodule(self, target):
        module = self
        for part in target.split(".") if target else []:
            child = module._modules.get(part)
            if child is None:
                raise AttributeError(f"{type(module).__name__} has no attribute `{part}`")
            module = child
        return module

    def get_parameter(self, target):
        module_path, _, name = target.rpartition(".")
        module = self.get_submodule(module_path)
        if name not in module._parameters:
            raise AttributeError(f"`{name}` is not an nn.Parameter")
        return module._parameters[name]

    # ---- state ----
    def state_dict(self, destination=None, prefix="", keep_vars=False):
        if destination is None:
            destination = OrderedDict()
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent:
                destination[prefix + name] = b if keep_vars else b.detach()
        for name, child in self._modules.items():
            if child is not None:
                child.state_dict(destination, prefix + name + ".", keep_vars)
        return destination

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """Copies values in (no_grad, keeping each tensor object); returns (missing_keys,
        unexpected_keys); with strict, either being non-empty raises RuntimeError, as does a
        shape mismatch."""
        own = self.state_dict(keep_vars=True)
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        errors = []
        with _dt.no_grad():
            for key, target in own.items():
                if key not in state_dict:
                    continue
                value = state_dict[key]
                if not isinstance(value, _dt.Tensor):
                    errors.append(f'While copying the parameter named "{key}", expected a tensor, got '
                                  f"{type(value).__name__}.")
                elif tuple(value.shape) != tuple(target.shape):
                    errors.append(f"size mismatch for {key}: copying a param with shape {list(value.shape)} "
                                  f"from checkpoint, the shape in current model is {list(target.shape)}.")
                elif assign:
                    target.data = value.detach()
                else:
                    target.copy_(value)
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected) + ".")
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ".")
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t" + "\n\t".join(errors))
        return _IncompatibleKeys(missing, unexpected)

    # ---- modes and conversions ----
    def train(self, mode=True):
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        _zero_grads(self.parameters(), set_to_none)

    def apply(self, fn):
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    def _apply_to_tensors(self, convert):
        """Replaces every parameter's, gradient's and buffer's values in place (same objects)."""
        with _dt.no_grad():
            for m in self.modules():
                for p in m._parameters.values():
                    if p is None:
                        continue
                    p.data = convert(p)
                    if p.grad is not None:
                        p.grad = convert(p.grad)
                for name, b in m._buffers.items():
                    if b is not None:
                        b.data = convert(b)
        return self

    def to(self, *args, **kwargs):
        """to(device), to(dtype), to(device, dtype) or to(tensor); only floating tensors change dtype."""
        def convert(t):
            moved = t.to(*[a for a in args if not _is_dtype(a)], **{k: v for k, v in kwargs.items() if k == "device"})
            dtype = next((a for a in args if _is_dtype(a)), kwargs.get("dtype"))
            if dtype is not None and t.is_floating_point():
                moved = moved.to(dtype)
            return moved
        return self._apply_to_tensors(convert)

    def cuda(self, device=None):
        return self._apply_to_tensors(lambda t: t.cuda(device))

    def cpu(self):
        return self._apply_to_tensors(lambda t: t.cpu())

    def float(self):
        return self._apply_to_tensors(lambda t: t.float() if t.is_floating_point() else t)

    def double(self):
        return self._apply_to_tensors(lambda t: t.double() if t.is_floating_point() else t)

    def half(self):
        return self._apply_to_tensors(lambda t: t.half() if t.is_floating_point() else t)

    # ---- printing ----
    def extra_repr(self):
        return ""

    def __repr__(self):
        lines = [f"({name}): " + repr(child).replace("\n", "\n  ") for name, child in self._modules.items()]
        extra = self.extra_repr()
        if not lines:
            return f"{type(self).__name__}({extra})"
        body = "\n  ".join(([extra] if extra else []) + lines)
        return f"{type(self).__name__}(\n  {body}\n)"


def _is_dtype(value):
    return isinstance(value, _dt.dtype)


def _zero_grads(params, set_to_none=True):
    """Module.zero_grad and Optimizer.zero_grad: each grad dropped (None) or zeroed in place."""
    for p in params:
        if p.grad is None:
            continue
        if set_to_none:
            p.grad = None
        else:
            with _dt.no_grad():
                p.grad.zero_()
