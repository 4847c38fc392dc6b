"""Differential corpus for the frame evaluator: each small function below runs under plain CPython
(an unmarked copy) and under `dt.jit` on equal, freshly drawn inputs (several calls, odd sizes),
and results, exceptions, printed output and inputs afterwards must match exactly (values within a
tight tolerance). One `test_corpus_<name>` per entry, generated at the bottom.

Entries made with `case(...)` are things the tracer captures: they must not fall back.
Entries made with `case(..., fallback=True)` must run the frame under CPython (stats()['fallbacks']
grows, with a reason). `fallback=None` accepts either.
"""
import ast
import math

import dyntrace as dt
from jitlib import Call, jitted_copy, run_differential, stats
from testlib import positive, uniform

CASES = []

ODD = (3, 5, 7)      # sizes used by call i
ODD2 = (5, 7, 9)


def case(factory, fallback=False, calls=3, reason=None, name=None):
    """Registers the decorated function with an input factory(i) -> Call / tuple / value.
    `reason`: a word some fallback reason must contain. `name`: the test's name (default: the
    function's)."""
    def deco(fn):
        CASES.append((name or fn.__name__, fn, factory, fallback, calls, reason))
        return fn
    return deco


T = uniform
P = positive


def x1(i):
    return T(ODD[i], ODD2[i])


def x2(i):
    return (T(ODD[i], ODD2[i]), T(ODD[i], ODD2[i]))


# Globals read by the functions below.
SCALE = 2.5
OFFSET = -1
GBIAS = dt.tensor([0.25, -0.5, 1.0])
NAMES = ("a", "b", "c")


class Params:
    """A plain object with tensor and scalar attributes."""

    def __init__(self, w, b, scale=1.5):
        self.w = w
        self.b = b
        self.scale = scale


class Linear:
    def __init__(self, w, b):
        self.w = w
        self.b = b

    def forward(self, x):
        return x @ self.w + self.b

    def __call__(self, x):
        return dt.relu(self.forward(x))

    def scaled(self, x, factor=2.0):
        return self.forward(x) * factor


def make_linear(i):
    n, k, m = ODD[i], ODD2[i], 4
    return Linear(T(k, m), T(m))


def helper_exp(x):
    return x.exp() - 1


def affine(x, w=2.0, b=1.0):
    return x * w + b


def sum_all(*ts):
    acc = ts[0]
    for t in ts[1:]:
        acc = acc + t
    return acc


def with_opts(x, **opts):
    return x * opts["scale"] + opts.get("shift", 0)


def level3(x):
    return x.exp()


def level2(x):
    return level3(x) + 1


def level1(x):
    return level2(x) * 2


def recurse(x, n):
    if n == 0:
        return x
    return recurse(x * 2, n - 1)


def make_scaler(k):
    def scaler(x):
        return x * k
    return scaler


def make_bias(b):
    def add_bias(x):
        return x + b
    return add_bias


def make_outer(a):
    def mid(b):
        def inner(x):
            return x * a + b
        return inner
    return mid


def make_counter_reader(start):
    count = start

    def read(x):
        return x + count
    count += 1          # the cell's final value is what `read` sees
    return read


# ---------------------------------------------------------------------------------------------
# Locals and constants.

@case(x1)
def identity(x):
    return x


@case(x2)
def locals_chain(x, y):
    a = x
    b = y
    c = a + b
    return c * a


@case(x1)
def constants_mixed(x):
    return x * 2 + 1.5 - 3


@case(x2)
def swap_locals(x, y):
    x, y = y, x
    return x - y * 2


@case(x1)
def delete_local(x):
    t = x * 2
    u = t + 1
    del t
    return u


@case(lambda i: (T(ODD[i], 3), i))
def return_tuple_with_scalar(x, n):
    return x + n, n * 10, "done"


@case(x1)
def return_none_after_work(x):
    y = x * 2
    y = y + 1
    return None


# ---------------------------------------------------------------------------------------------
# Cells, closures, free variables.

closure_scaler = make_scaler(3.0)
case(x1, name="closure_scalar_free_var")(closure_scaler)

closure_bias = make_bias(dt.tensor([1.0, 2.0, 3.0]))
case(lambda i: T(ODD[i], 3), name="closure_tensor_free_var")(closure_bias)

closure_nested = make_outer(2.0)(-1.0)
case(x1, name="closure_two_levels")(closure_nested)

closure_late = make_counter_reader(4)
case(x1, name="closure_cell_final_value")(closure_late)


@case(x1)
def cell_in_frame(x):
    y = x * 2

    def g():
        return y + 1
    return g()


@case(x1)
def cell_two_levels(x):
    a = 3.0

    def outer(t):
        def inner(u):
            return u * a + t
        return inner(t)
    return outer(x)


# ---------------------------------------------------------------------------------------------
# Globals, builtins, modules.

@case(x1)
def global_scalar(x):
    return x * SCALE + OFFSET


@case(lambda i: T(ODD[i], 3))
def global_tensor(x):
    return x + GBIAS


@case(x1)
def global_function(x):
    return helper_exp(x) * 2


@case(lambda i: (T(ODD[i], 4), [T(ODD[i], 4) for _ in range(i + 1)]))
def builtin_len_list(x, xs):
    return x * len(xs)


@case(x1)
def builtin_range(x):
    acc = x
    for i in range(3):
        acc = acc + i
    for i in range(10, 4, -3):
        acc = acc - i
    return acc


@case(lambda i: (T(ODD[i], 2), (2, 1.5, 3)[i]))
def builtin_isinstance(x, n):
    if isinstance(n, int):
        return x * n
    if isinstance(n, (float, complex)):
        return x + n
    return x


@case(lambda i: (T(ODD[i], 2), isinstance(i, int)))
def builtin_isinstance_tensor(x, flag):
    if isinstance(x, dt.Tensor) and flag:
        return x - 1
    return x


@case(x1)
def builtin_abs(x):
    return abs(x) + abs(-2) + abs(-0.5)


@case(x1)
def builtin_min_max(x):
    return x * max(2, 3) - min(1.5, 0.5) + max((1, 7, 4)) - min([3, -1])


@case(x1)
def builtin_float_int(x):
    return x * float(3) + int(2.7) + float("1.5") + int(True)


@case(x1)
def builtin_len_tensor(x):
    return x * len(x)


@case(x1)
def builtin_bool_round(x):
    a = bool(0)
    b = round(2.567, 1)
    return x * b if not a else x


@case(x1)
def module_attrs(x):
    return dt.exp(x) * math.pi + math.e


@case(x1)
def module_dtype_attr(x):
    return x.to(dt.float64) * 2


# ---------------------------------------------------------------------------------------------
# Tensor attributes and plain objects.

@case(x1)
def tensor_shape_unpack(x):
    n, m = x.shape
    return x.reshape(m, n) * n


@case(lambda i: T(ODD[i], 4, dtype=(dt.float32, dt.float64, dt.float32)[i]))
def tensor_dtype_branch(x):
    if x.dtype == dt.float32:
        return x * 2
    return x + 1


@case(x1)
def tensor_T(x):
    return x.T @ x


@case(lambda i: T(2, ODD[i], 4))
def tensor_mT(x):
    return x.mT + 1


@case(lambda i: (T(ODD[i], 4), T(2, ODD[i], 4), T(4))[i])
def tensor_ndim(x):
    return x.sum(x.ndim - 1) * x.ndim


@case(lambda i: T(ODD[i], 2, 3))
def tensor_size_calls(x):
    return x.reshape(x.size(0), -1).sum(1) + x.size()[-1] + x.numel()


@case(x1)
def tensor_shape_scale(x):
    return x / x.shape[-1] ** 0.5


@case(x1)
def tensor_device_creation(x):
    return dt.ones(x.shape, dtype=x.dtype, device=x.device) + x


@case(lambda i: Call(Params(T(ODD2[i], 4), T(4), 0.5 * (i + 1)), T(ODD[i], ODD2[i])))
def object_attrs(p, x):
    return (x @ p.w + p.b) * p.scale


@case(lambda i: Call(T(ODD[i], 4), p={"w": T(4, 4), "scale": 2}))
def dict_input(x, p):
    return x @ p["w"] * p["scale"]


# ---------------------------------------------------------------------------------------------
# Calls with positional and keyword arguments.

@case(x1)
def sum_keepdim_kw(x):
    return x.sum(dim=1, keepdim=True) - x.sum(0)


@case(x1)
def softmax_kw(x):
    return dt.softmax(x, dim=-1) + x.log_softmax(-1)


@case(lambda i: T(ODD[i], 6))
def layer_norm_rms_norm(x):
    return dt.layer_norm(x, (6,)) + dt.rms_norm(x, (x.shape[-1],))


@case(lambda i: T(ODD[i], 4, 3))
def reductions_kw(x):
    return (x.mean(dim=(0, 1)), x.var(0), x.std(dim=1, keepdim=True), x.amax(-1), x.argmax(1),
            dt.logsumexp(x, dim=2), x.prod(2), (x > 0).any(0), (x > -3).all())


@case(x2)
def where_kw(x, y):
    return dt.where(x > 0, x, y) + dt.where(y < 0, 1.0, y)


@case(x1)
def clamp_kw(x):
    return dt.clamp(x, min=-0.5, max=0.5) + x.clip(-1.0, 1.0)


@case(x1)
def casts(x):
    return x.to(dt.float64), x.to(dtype=dt.int64), x.int(), x.double(), x.half(), x.bool()


@case(x2)
def cat_stack(x, y):
    return dt.cat([x, y], dim=0), dt.stack((x, y), dim=1), dt.cat((x, y), -1)


@case(lambda i: T(4, ODD[i]))
def split_chunk_unpack(x):
    a, b = x.chunk(2, dim=0)
    first, *rest = x.split(1, dim=0)
    return a * b, first, len(rest)


@case(lambda i: (T(ODD[i], 4), T(4, ODD2[i])))
def matmul_forms(x, w):
    return x @ w, dt.matmul(x, w), x.matmul(w), dt.mm(x, w)


@case(lambda i: (T(2, ODD[i], 4), T(2, 4, 3)))
def matmul_batched(x, w):
    return dt.bmm(x, w) + x @ w


@case(x1)
def creation_inside(x):
    a = dt.ones(3, 4)
    b = dt.arange(5)
    c = dt.full((2, 3), 1.5)
    d = dt.zeros_like(x) + dt.ones_like(x) * 2
    e = dt.tensor([1.0, 2.0, 3.0])
    f = dt.linspace(0.0, 1.0, 5)
    return a, b, c, d + x, e * 2, f, dt.full_like(x, 7)


@case(x1)
def pointwise_chain(x):
    return dt.tanh(dt.sigmoid(x) * 2) + dt.gelu(x) - x.silu() + dt.relu(x).sqrt() + x.sin().cos()


@case(lambda i: T(ODD[i], 3))
def shape_ops(x):
    return (x.unsqueeze(0).expand(2, x.shape[0], 3), x.permute(1, 0), x.transpose(0, 1),
            x.flatten(), x.reshape(-1, 1).squeeze(1), x.narrow(0, 1, 2), x.select(1, 0),
            x.contiguous(), x.swapaxes(0, 1), dt.broadcast_to(x, (2, x.shape[0], 3)))


# ---------------------------------------------------------------------------------------------
# Operators on tensors and scalars.

@case(x2)
def arith_ops(x, y):
    return x + y, x - y, x * y, x / (y.abs() + 1)


@case(lambda i: (T(ODD[i], 4, dtype=dt.int64, low=-9, high=9),
                 T(ODD[i], 4, dtype=dt.int64, low=1, high=5)))
def int_floordiv_mod(x, y):
    return x // y, x % y, x // 3, x % 4, -x, x * 2 - y


@case(lambda i: (P(ODD[i], 4), T(ODD[i], 4)))
def pow_ops(x, y):
    return x ** 2, 2 ** y, x ** y, x ** 0.5, x.pow(3)


@case(x1)
def unary_ops(x):
    return -x, +x, abs(x), -(-x)


@case(lambda i: (T(ODD[i], 4), T(ODD[i], 4),
                 T(ODD[i], 4, dtype=dt.bool), T(ODD[i], 4, dtype=dt.bool)))
def compare_and_logic(x, y, a, b):
    return (x > y, x <= 0.5, x == y, x != 0, 0.0 < x, a & b, a | b, a ^ b, ~a,
            (x > 0) & (y > 0))


@case(x1)
def scalar_on_left(x):
    return 1 - x, 2 / (x.abs() + 1), 3 * x, 0.5 + x


@case(lambda i: (T(ODD[i], 4, dtype=dt.int32, low=-5, high=5), T(ODD[i], 4, dtype=dt.float16),
                 T(ODD[i], 4, dtype=dt.bool)))
def promotion(i32, f16, b):
    return i32 * 2.5, i32 + 5, f16 + 1.0, f16 + i32, b + 1, b * 1.5, i32 / 2


# ---------------------------------------------------------------------------------------------
# Scalar arithmetic folded at trace time.

@case(lambda i: (T(ODD[i], 2), (1, 4, 7)[i]))
def fold_int(x, n):
    k = n * 2 + 1
    m = k // 3
    r = k % 3
    s = k ** 2 - (-n) + (n << 2) - (k >> 1) + (n & 3) + (n | 8) + (n ^ 5)
    return x * k + m - r + s


@case(lambda i: (T(ODD[i], 2), (0.5, -1.25, 3.0)[i]))
def fold_float(x, s):
    return x * (s ** 2 / 3.0 - 1.0) + s // 0.5 + s % 0.75


@case(lambda i: (T(ODD[i], 2), (True, False, True)[i]))
def fold_bool(x, flag):
    k = flag + 1
    return x * k if not flag else x - k


@case(lambda i: (T(ODD[i], 3), (None, T(3), None)[i]))
def fold_none(x, bias=None):
    if bias is None:
        return x * 2
    return x + bias


@case(lambda i: (T(ODD[i], 3), ("double", "triple", "other")[i]))
def fold_str(x, mode):
    if mode == "double":
        return x * 2
    if mode.startswith("tri"):
        return x * 3
    return x + len(mode + "_x")


@case(lambda i: (T(ODD[i], 3), (1, 3, 5)[i]))
def fold_conditional_expr(x, n):
    y = x if n > 2 else -x
    return y * (1 if n < 4 else 2)


@case(lambda i: (T(ODD[i], 3), (2, 3, 2)[i]))
def fold_divmod_builtins(x, n):
    q, r = divmod(17, n)
    return x * q + r


@case(lambda i: (T(ODD[i], 3), i))
def fold_chained_compare(x, n):
    if 0 < n < 2:
        return x * 10
    if n == 0 or n >= 2 and n != 5:
        return x - 10
    return x


# ---------------------------------------------------------------------------------------------
# Tuples, lists, dicts.

@case(x2)
def tuple_build_index(x, y):
    t = (x, y, x + y)
    return t[2] * t[-1] + t[0]


@case(x2)
def list_build_index(x, y):
    lst = [x, y, 3]
    return lst[0] * lst[2] + lst[1]


@case(x2, fallback=None)
def local_list_append(x, y):
    lst = []
    lst.append(x)
    lst.append(y * 2)
    lst.extend([x + 1])
    return lst


@case(x2)
def dict_build_index(x, y):
    d = {"a": x, "b": y}
    d["c"] = x - y
    return d["a"] * d["b"] + d["c"] + d.get("z", 1)


@case(x2)
def dict_iteration(x, y):
    d = {"a": x, "b": y}
    acc = 0
    for k, v in d.items():
        acc = acc + v * len(k)
    for k in d:
        acc = acc + d[k]
    return acc, list(d.keys())


@case(lambda i: (T(ODD[i], 2), T(ODD[i], 2), T(ODD[i], 2)))
def unpack_star(x, y, z):
    a, *rest = (x, y, z)
    *init, last = [x, y, z]
    p, (q, r) = x, (y, z)
    return a + rest[1] - last * len(init) + q * r - p


@case(lambda i: T(2, ODD[i]))
def unpack_tensor(x):
    a, b = x
    return a * b


@case(x1)
def tuple_list_slicing(x):
    t = (x, x + 1, x + 2, x + 3)
    lst = [1, 2, 3, 4, 5]
    return t[1:3], t[::-1][0], t[-2:], lst[1:4], lst[::2], sum(lst[:2]) * x


@case(lambda i: T(ODD[i], ODD2[i], 4))
def tensor_slicing(x):
    return (x[1:, ::2], x[None], x[..., 0], x[:, None, 1:-1], x[-1], x[0, 1], x[0, 1, 2],
            x[::2, :, 1:3], x[..., None], x[1:2, ..., :1])


@case(x1)
def setitem_on_created(x):
    y = x.clone()
    y[0] = 0.0
    y[:, 1] = x[:, 0]
    y[1:, ::2] = 5
    return y


@case(lambda i: (T(ODD[i], 4), T(4)))
def setitem_on_input(x, v):
    x[0] = v
    x[-1, 1:] = 2.0
    return None


# ---------------------------------------------------------------------------------------------
# Loops (unrolled), comparisons, branches.

@case(x1)
def loop_range_powers(x):
    acc = dt.zeros_like(x)
    for k in range(4):
        acc = acc + x ** k / (k + 1)
    return acc


@case(x2)
def loop_over_tuple(x, y):
    acc = x
    for t in (x, y, x * y):
        acc = acc * 0.5 + t
    return acc


@case(lambda i: [T(ODD[i], 3) for _ in range(i + 2)])
def loop_over_input_list(xs):
    acc = xs[0]
    for t in xs[1:]:
        acc = acc + t
    return acc


@case(x1)
def loop_nested(x):
    acc = x
    for a in range(3):
        for b in (1, 2):
            acc = acc + a * b
            acc = acc * 0.9
    return acc


@case(lambda i: [T(ODD[i], 3) for _ in range(3)])
def loop_enumerate_zip(xs):
    acc = 0
    for k, t in enumerate(xs):
        acc = acc + t * k
    for a, b in zip(xs, xs[1:]):
        acc = acc + a * b
    return acc


@case(x1)
def loop_while_break_continue(x):
    k = 0
    while k < 6:
        k += 1
        if k == 2:
            continue
        if k == 5:
            break
        x = x * 1.5 + k
    return x, k


@case(lambda i: (T(ODD[i], 3), (1, 4, None)[i], ("a", "q", "b")[i]))
def is_in_not(x, n, key):
    out = x
    if n in (1, 2, 3):
        out = out + 1
    if key not in NAMES:
        out = out * 2
    if n is None:
        out = -out
    if n is not None and not n > 3:
        out = out - 0.5
    return out


@case(lambda i: (T(ODD[i], 3), i))
def fstring_keys(x, n):
    d = {}
    for k in range(3):
        d[f"k{k}"] = x * k
    tag = f"{n:02d}-{SCALE:.1f}"
    d[tag] = x
    return d["k2"] - d["k1"] + d[f"{n:02d}-2.5"], tag


@case(lambda i: (T(ODD[i], 3), (2, 5, 9)[i]))
def loop_bound_by_arg(x, n):
    for _ in range(n):
        x = x * 0.5 + 1
    return x


# ---------------------------------------------------------------------------------------------
# In-place ops.

@case(x1)
def inplace_on_created(x):
    y = dt.zeros_like(x)
    y.add_(x)
    y.mul_(2)
    y += 1
    y *= x
    y -= 0.5
    y /= 2
    return y


@case(x1)
def inplace_input_returned(x):
    x.add_(1)
    return x


@case(x2)
def inplace_iadd_input(x, y):
    x += y
    return x


@case(x2)
def inplace_input_and_new(x, y):
    x.mul_(y)
    return x, x + 1, x


@case(x1)
def inplace_on_input_view(x):
    x[0].mul_(2)
    x[:, ::2] += 1
    return x.sum()


@case(lambda i: T(ODD[i], 4, dtype=dt.int64, low=0, high=9), fallback=None)
def inplace_int_float_error(x):
    x.add_(1)
    x.add_(0.5)
    return x


@case(x1)
def inplace_chain_methods(x):
    y = x.clone()
    y.exp_().sub_(1).clamp_(min=0.0)
    return y, x


@case(x1)
def inplace_alias_visible(x):
    v = x[1:]
    v.add_(10)
    return x * 1


# ---------------------------------------------------------------------------------------------
# Inlined user functions, lambdas, *args / **kwargs, classes, comprehensions.

@case(x1)
def inline_defaults(x):
    return affine(x) + affine(x, b=3.0) + affine(x, 0.5, 0.25)


@case(x1)
def inline_lambda_defaults(x):
    g = lambda t, s=3: t * s  # noqa: E731
    return g(x) + g(x, 2) + g(t=x, s=-1)


@case(lambda i: (T(ODD[i], 3), [T(ODD[i], 3), T(ODD[i], 3)]))
def inline_star_args(x, lst):
    return sum_all(x, x * 2, x) + sum_all(*lst) + sum_all(x, *lst)


@case(x1)
def inline_star_kwargs(x):
    opts = {"scale": 3}
    return with_opts(x, scale=2, shift=1) + with_opts(x, **opts) + with_opts(x=x, **{"scale": 0.5})


@case(lambda i: Call(T(ODD[i], 2), T(ODD[i], 2), scale=(1, 2, 3)[i]))
def varargs_frame(*xs, **kw):
    acc = 0
    for t in xs:
        acc = acc + t
    return acc * kw["scale"], len(xs), len(kw)


@case(lambda i: Call(T(ODD[i], 2), shift=(0.5, 1.0, None)[i]))
def kwonly_frame(x, *, shift=None, scale=2.0):
    if shift is None:
        return x * scale
    return x * scale + shift


@case(x1)
def inline_three_deep(x):
    return level1(x) - x


@case(lambda i: (T(ODD[i], 2), (0, 2, 3)[i]), fallback=None)
def inline_recursion_constant_depth(x, n):
    return recurse(x, n)


@case(lambda i: (make_linear(i), T(ODD[i], ODD2[i])))
def method_call(m, x):
    return m.forward(x) + m.scaled(x) + m.scaled(x, factor=-1.0)


@case(lambda i: (make_linear(i), T(ODD[i], ODD2[i])))
def dunder_call(m, x):
    return m(x) * 2


@case(lambda i: (T(ODD2[i], 4), T(4), T(ODD[i], ODD2[i])), fallback=None)
def construct_object_in_frame(w, b, x):
    m = Linear(w, b)
    return m.forward(x)


@case(x1)
def list_comprehension(x):
    ys = [x * k for k in range(3)]
    return dt.stack(ys), len(ys)


@case(lambda i: [T(ODD[i], 3) for _ in range(3)])
def list_comprehension_enumerate(xs):
    return dt.stack([t * k for k, t in enumerate(xs)], dim=0).sum(0)


@case(x1)
def dict_and_nested_comprehension(x):
    d = {f"k{k}": x * k for k in range(3)}
    grid = [[a * b for b in range(2)] for a in range(3)]
    return d["k2"] + grid[2][1], [[v for v in row] for row in grid]


@case(lambda i: [T(ODD[i], 3) for _ in range(4)])
def comprehension_with_filter(xs):
    picked = [t for k, t in enumerate(xs) if k % 2 == 0]
    return sum_all(*picked)


@case(x1)
def comprehension_closure_over_local(x):
    s = 2.0
    return [x * s + k for k in range(2)]


# ---------------------------------------------------------------------------------------------
# Exceptions that plain Python raises must be raised identically (type and message).

@case(lambda i: (T(ODD[i], 3), T(ODD[i], 4)), fallback=None)
def error_shape_mismatch(x, y):
    return x + y


@case(lambda i: T(ODD[i], 3), fallback=None)
def error_index_out_of_range(x):
    return x[:, 3]


@case(lambda i: T(ODD[i], 3), fallback=None)
def error_bad_dim(x):
    return x.sum(dim=5)


@case(lambda i: (T(ODD[i], 3), (1, 2, 3)), fallback=None)
def error_tuple_index(x, t):
    return x * t[3]


@case(lambda i: T(ODD[i], 3), fallback=None)
def error_zero_division_scalar(x):
    k = 0
    return x * (1 / k)


def _ok_bad_ok(i):
    """Shapes that broadcast, then shapes that do not (same ranks, no size-1 dims: the same guards
    pass), then good ones again."""
    n = ODD[i]
    return T(n, 5), T(n, (5, 4, 5)[i])


@case(_ok_bad_ok, fallback=None)
def error_after_successful_trace(x, y):
    return x * 2 + y


@case(_ok_bad_ok, fallback=None)
def try_except_later_raises(x, y):
    try:
        z = x + y
        tag = "ok"
    except ValueError as e:
        z = x * 2
        tag = str(e)
    return z, tag


@case(lambda i: (T(ODD2[i], ODD[i]).T, T(ODD[i], 2 * ODD2[i])[:, ::2]))
def noncontiguous_inputs(x, y):
    return x * y + x.sum(0), (x - y).exp()


@case(lambda i: T(ODD[i], 4).T)
def noncontiguous_inplace_input(x):
    x.mul_(2)
    x[0] += 1
    return x


# ---------------------------------------------------------------------------------------------
# Things that must fall back to CPython with identical results and side effects.

@case(x1, fallback=True, reason="print")
def fb_print(x):
    print("hello", 3, end="!\n")
    return x * 2


@case(lambda i: T(ODD[i], 3, low=(-2.0, 0.0, -1.0)[i], high=(0.0, 2.0, 1.0)[i]), fallback=True)
def fb_data_dependent_if(x):
    if x.sum() > 0:
        return x * 2
    return x - 1


@case(x1, fallback=True)
def fb_item(x):
    s = x.sum().item()
    return x * s, s


@case(x1, fallback=True)
def fb_tolist(x):
    vals = x.tolist()
    return x * len(vals) + vals[0][0], vals[-1]


@case(lambda i: (T(ODD[i], 3), 5), fallback=True)
def fb_raise_value_error(x, n):
    y = x * 2
    if n > 2:
        raise ValueError(f"n too big: {n}")
    return y


def _raising_helper(t):
    raise TypeError("helper refuses %d-d input" % t.ndim)


@case(x1, fallback=True)
def fb_raise_in_helper(x):
    return _raising_helper(x + 1)


@case(lambda i: T(ODD[i], 3), fallback=True)
def fb_assert(x):
    assert x.ndim == 3, "need a 3-d input"
    return x


# Python 3.11+ try blocks are zero-cost (no setup instruction): a tracer may capture the happy
# path as long as an exception raised later still reaches the handler (see try_except_later_raises).
@case(x2, fallback=None)
def try_except_no_error(x, y):
    try:
        z = x + y[:, :1] * 2
    except ValueError:
        z = x
    return z


@case(lambda i: (T(ODD[i], 3), T(ODD[i], 4)), fallback=True)
def fb_try_except_catches(x, y):
    try:
        z = x + y
        msg = "no error"
    except ValueError as e:
        z = x * 2
        msg = type(e).__name__
    return z, msg


# Changes to the caller's lists are replayed on the real list after the graph: no break.
@case(lambda i: ([T(ODD[i], 3)], T(ODD[i], 3)))
def mutate_input_list(xs, x):
    xs.append(x * 2)
    xs[0] = xs[0] + 1
    return len(xs)


# Attribute stores on the caller's object are replayed after the graph: no break.
@case(lambda i: Call(Params(T(3), T(3)), T(ODD[i], 3)))
def mutate_input_object(obj, x):
    obj.cache = x * 2
    obj.scale = obj.scale + 1
    return obj.cache + 1


@case(lambda i: [T(()) for _ in range(4)], fallback=True, reason="sorted")
def fb_sorted_tensors(xs):
    ys = sorted(xs)
    return ys, ys[0] + ys[-1]


@case(x1, fallback=True)
def fb_generator(x):
    for k in range(3):
        yield x * k


# ---------------------------------------------------------------------------------------------
# Test generation.

def _make_test(name, fn, factory, fallback, calls, reason, seed_base):
    def test():
        dt.reset()
        jfn = jitted_copy(fn)
        before = stats()
        assert before["fallbacks"] == 0 and before["frames_traced"] == 0, before
        run_differential(fn, jfn, factory, calls, seed_base)
        after = stats()
        if fallback is True:
            # Not captured whole: the frame breaks into segments (or runs under CPython), and
            # the reason is recorded.
            assert after["graph_breaks"] > before["graph_breaks"], (
                "%s should have broken the graph; stats %r" % (name, after))
            assert len(after["break_reasons"]) > len(before["break_reasons"]), after
            assert all(isinstance(r, str) and r for r in after["break_reasons"]), after
            if reason is not None:
                assert any(reason in r for r in after["break_reasons"]), (
                    "no break reason mentions %r: %r" % (reason, after["break_reasons"]))
        elif fallback is False:
            assert after["fallbacks"] == 0 and after["graph_breaks"] == 0, (
                "%s broke the graph: %r" % (name, after["break_reasons"]))
            assert after["frames_traced"] >= 1, "%s was never traced: %r" % (name, after)
        # Every printed graph is Python a user could paste (and parse).
        for graph in dt.graphs(jfn):
            try:
                ast.parse(graph)
            except SyntaxError as e:
                raise AssertionError("%s: a graph that does not parse (%s):\n%s" % (name, e, graph))
    test.__name__ = "test_corpus_" + name
    return test


def _register():
    for k, (name, fn, factory, fallback, calls, reason) in enumerate(CASES):
        test_name = "test_corpus_" + name
        assert test_name not in globals(), "duplicate case name " + name
        globals()[test_name] = _make_test(name, fn, factory, fallback, calls, reason,
                                          7000 + 17 * k)


_register()


def test_corpus_size():
    captured = [c for c in CASES if c[3] is not True]
    fallbacks = [c for c in CASES if c[3] is True]
    assert len(captured) >= 85, len(captured)
    assert len(fallbacks) >= 10, len(fallbacks)
