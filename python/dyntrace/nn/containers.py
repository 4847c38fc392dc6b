"""dyntrace.nn's containers: Sequential, ModuleList, ModuleDict, as PyTorch's."""
from collections import OrderedDict

from dyntrace.nn.module import Module


def _wrap_index(index, length, what):
    if not -length <= index < length:
        raise IndexError(f"index {index} is out of range for {what} of length {length}")
    return index % length


class Sequential(Module):
    def __init__(self, *modules):
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], OrderedDict):
            for name, module in modules[0].items():
                self.add_module(name, module)
        else:
            for i, module in enumerate(modules):
                self.add_module(str(i), module)

    def forward(self, x):
        for module in self._modules.values():
            x = module(x)
        return x

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        # A generator (not iter(dict_values)): compiled code runs its body, so a loop over the
        # modules compiles into the caller's graph.
        for module in self._modules.values():
            yield module

    def __getitem__(self, index):
        if isinstance(index, slice):
            return Sequential(OrderedDict(list(self._modules.items())[index]))
        return list(self._modules.values())[_wrap_index(index, len(self), "Sequential")]

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self


class ModuleList(Module):
    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        # A generator (not iter(dict_values)): compiled code runs its body, so a loop over the
        # modules compiles into the caller's graph.
        for module in self._modules.values():
            yield module

    def __getitem__(self, index):
        if isinstance(index, slice):
            return ModuleList(list(self._modules.values())[index])
        return self._modules[str(_wrap_index(index, len(self), "ModuleList"))]

    def __setitem__(self, index, module):
        self.add_module(str(_wrap_index(index, len(self), "ModuleList")), module)

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules):
        for module in modules:
            self.append(module)
        return self

    def insert(self, index, module):
        items = list(self._modules.values())
        items.insert(index, module)
        for name in list(self._modules):
            self._forget(name)
            object.__delattr__(self, name)
        for i, m in enumerate(items):
            self.add_module(str(i), m)


class ModuleDict(Module):
    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def __delitem__(self, key):
        delattr(self, key)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def update(self, modules):
        pairs = modules.items() if hasattr(modules, "items") else modules
        for key, module in pairs:
            self[key] = module
