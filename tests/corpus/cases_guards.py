"""Corpus cases: the Python values a trace depends on change from call to call (arguments,
attributes of argument objects, dict and list contents, globals, closure cells, class
attributes), so later calls must either meet a guard that fails and retrace, or reuse a graph that
is still right. Also numbers carried across graph breaks at their edges (big ints, division by
zero, bools)."""
import dataclasses

import dyntrace as dt
from corpus import Call, I, P, T, case, n_of

VARY = 3  # calls per case: the first traces, the others change a Python value


@dataclasses.dataclass
class Opts:
    scale: float
    mode: str
    steps: int


def opts_for(i):
    return Opts(scale=(0.5, 2.0, 2.0)[i], mode=("add", "add", "mul")[i], steps=(1, 2, 2)[i])


@case(lambda i: Call(T(3), opts_for(i)), calls=VARY)
def object_attributes_change_between_calls(x, opts):
    for _ in range(opts.steps):
        x = x + opts.scale if opts.mode == "add" else x * opts.scale
    return x, opts.mode


@case(lambda i: Call(T(3), {"w": (1.0, 1.0, -3.0)[i], "act": ("relu", "tanh", "relu")[i]}),
      calls=VARY)
def dict_values_change_between_calls(x, cfg):
    y = x * cfg["w"]
    return dt.relu(y) if cfg["act"] == "relu" else dt.tanh(y)


@case(lambda i: Call(T(3), [0.5, 1.5, 2.5][: i + 1]), calls=VARY)
def list_length_and_contents_change(x, weights):
    out = x
    for w in weights:
        out = out * w + len(weights)
    return out


@case(lambda i: Call(T(3), ("a", "a", "bb")[i], (2, 2, -1)[i]), calls=VARY)
def str_and_int_arguments_change(x, name, k):
    return x * k + len(name), f"{name}{k}"


@case(lambda i: Call(T(3), (True, False, True)[i], (None, 1.5, 1.5)[i]), calls=VARY)
def bool_and_optional_arguments(x, flag, maybe):
    if flag:
        x = -x
    if maybe is not None:
        x = x * maybe
    return x


SCALE = 1.0


def set_scale(i):
    global SCALE
    SCALE = (1.0, 1.0, 4.0)[i]
    return Call(T(3))


@case(set_scale, calls=VARY)
def global_changes_between_calls(x):
    return x * SCALE, SCALE


def _make_scaled():
    factor = 1.0

    def scaled(x):
        return x * factor

    def set_factor(v):
        nonlocal factor
        factor = v
    return scaled, set_factor


_scaled, _set_factor = _make_scaled()


def set_cell(i):
    _set_factor((1.0, 3.0, 3.0)[i])
    return Call(T(3))


@case(set_cell, calls=VARY)
def closure_cell_changes_between_calls(x):
    return _scaled(x) + 1


class Mode:
    eps = 1e-5


def set_class_attr(i):
    Mode.eps = (1e-5, 1e-5, 0.5)[i]
    return Call(P(4))


@case(set_class_attr, calls=VARY)
def class_attribute_changes_between_calls(x):
    return x / (x.sum() + Mode.eps), Mode.eps


@case(lambda i: Call(T(3), T(3) if i != 1 else 7), calls=VARY)
def argument_type_changes(x, other):
    if isinstance(other, dt.Tensor):
        return x + other, "tensor"
    return x * other, type(other).__name__


@case(lambda i: Call(T(*((3,), (2, 3), (4,))[i])), calls=VARY)
def rank_changes_between_calls(x):
    if x.ndim == 1:
        return x.sum(), x.shape
    return x.sum(-1), x.shape


@case(lambda i: Call(T(3, dtype=(dt.float32, dt.float64, dt.float32)[i])), calls=VARY)
def dtype_changes_between_calls(x):
    tag = "double" if x.dtype == dt.float64 else "single"
    return x * 2, tag, str(x.dtype)


@case(lambda i: Call(T(n_of(i)), (1, 3, 2)[i]), calls=VARY)
def shape_read_in_python_changes(x, k):
    n = x.shape[0]
    idx = list(range(0, n, k))
    return dt.stack([x[j] for j in idx]), idx


@case(lambda i: Call(I(4, low=-5, high=5)), calls=VARY,
      must_break="tensor values as Python values: .item(); and print()")
def big_int_counter_across_breaks(x):
    acc = 1
    for k in range(4):
        acc = acc * 10 ** 6 + int(x[k].item())
        print(k)
    return x * (acc % 7), acc, acc > 2 ** 63


@case(lambda i: Call(T(3), (1, 1, 0)[i]), calls=VARY,
      must_break="tensor values as Python values: .item(); print(); the last call divides by 0")
def division_by_zero_across_breaks(x, d):
    s = round(x.sum().item(), 2)
    print("sum", s)
    q = 10 / (d * 2)
    return x * q


@case(lambda i: Call(T(4)), calls=VARY,
      must_break="tensor values as Python values: .item()")
def bool_number_across_breaks(x):
    positive = True
    count = 0
    for v in x:
        pos = v.item() > 0
        positive = positive and pos
        count += pos
    return x * count, positive, count, type(count).__name__


@case(lambda i: Call(T(3)), calls=VARY,
      must_break="tensor values as Python values: .item(); and print()")
def floor_and_mod_across_breaks(x):
    s = x.sum().item() * 7
    print("s")
    a, b = s // 2, s % 2
    c, d = int(s) // -3, int(s) % -3
    return x * a + b, (a, b, c, d), divmod(int(s), 4)


@case(lambda i: Call(I(3), (2, 3, 3)[i]), calls=VARY,
      must_break="tensor values as Python values: .item(); and print()")
def int_tensor_times_item(x, k):
    m = x.amax().item()
    print("max", m)
    return x * m, x * k + m, x // (m + 1), (x * 1.5 * m).dtype


@case(lambda i: Call(T(3)), calls=VARY,
      must_break="tensor values as Python values: .item(); and print()")
def pow_and_negative_exponents_across_breaks(x):
    n = int(x.abs().sum().item() * 3) + 1
    print(n)
    return x * 2 ** -n, 2 ** n, (-2) ** n, n ** 0.5


@case(lambda i: Call(T(2), {"a": T(2)} if i != 1 else {"a": T(2), "b": T(2)}), calls=VARY)
def dict_keys_change_between_calls(x, d):
    total = x
    for k in sorted(d):
        total = total + d[k]
    return total, sorted(d)


@case(lambda i: Call(T(3), (None, "x", None)[i]), calls=VARY)
def none_then_value_then_none(x, tag):
    if tag is None:
        return x
    return x * 2, tag
