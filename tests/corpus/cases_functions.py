"""Corpus cases: calls. Keyword arguments, defaults, *args/**kwargs forwarding, closures and
nonlocal, lambdas, decorators, recursion, `global`, big ints and unicode identifiers."""
import functools
import math

import dyntrace as dt
from corpus import Call, I, P, T, case, n_of


# ---------------------------------------------------------------------------------------------
# Keyword arguments and defaults.

def linear(x, w, b=None, *, activation=None):
    y = x @ w
    if b is not None:
        y = y + b
    return activation(y) if activation is not None else y


@case(lambda i: Call(T(2, 4), T(4, 3), T(3)))
def keyword_only_activation(x, w, b):
    return linear(x, w, b, activation=dt.relu), linear(x, w), linear(x, w, b=b)


def scaled_add(x, y, alpha=1.0, beta=0.0):
    return x * alpha + y + beta


@case(lambda i: Call(T(n_of(i)), T(n_of(i))))
def keywords_in_any_order(x, y):
    return (scaled_add(x, y), scaled_add(x, y, beta=2.0), scaled_add(beta=-1.0, y=y, x=x, alpha=3.0))


@case(lambda i: Call(T(3), T(3)),
      must_break="raises by design: a missing argument raises TypeError")
def missing_required_argument_raises(x, y):
    return scaled_add(x, alpha=2.0)


@case(lambda i: Call(T(3), T(3)),
      must_break="raises by design: an unexpected keyword raises TypeError")
def unexpected_keyword_raises(x, y):
    return scaled_add(x, y, gamma=2.0)


@case(lambda i: Call(T(3)),
      must_break="raises by design: too many positional arguments")
def keyword_only_passed_positionally_raises(x):
    return linear(x, dt.ones(3, 3), None, dt.relu)


@case(lambda i: Call(T(3)))
def mutable_default_argument(x):
    def accumulate(x, history=[]):  # noqa: B006 - the shared default is the point
        history.append(len(history))
        return x * len(history), list(history)
    a = accumulate(x)
    b = accumulate(x)
    return a, b


def norm(x, p=2, *, dim=-1, eps=1e-6):
    return (x.abs() ** p).sum(dim) ** (1.0 / p) + eps


@case(lambda i: Call(T(3, 4)))
def defaults_and_keyword_only(x):
    return norm(x), norm(x, 1), norm(x, p=3, dim=0), norm(x, eps=0.5)


@case(lambda i: Call(T(4), 0.5))
def positional_only_parameters(x, s):
    def clip(t, lo, hi, /, scale=1.0):
        return dt.clamp(t, lo, hi) * scale
    return clip(x, -s, s), clip(x, -1.0, 1.0, scale=s)


@case(lambda i: Call(T(3)),
      must_break="raises by design: a positional-only argument by name: TypeError")
def positional_only_as_keyword_raises(x):
    def clip(t, lo, /):
        return dt.clamp(t, lo, 10.0)
    return clip(x, lo=0.0)


# ---------------------------------------------------------------------------------------------
# *args and **kwargs forwarding.

def apply_all(x, *fns, **options):
    scale = options.get("scale", 1.0)
    for fn in fns:
        x = fn(x)
    return x * scale


@case(lambda i: Call(T(n_of(i))))
def star_args_functions(x):
    return apply_all(x, dt.tanh, dt.sigmoid, scale=2.0), apply_all(x)


def logged(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        print("call", fn.__name__, len(args), sorted(kwargs))
        return fn(*args, **kwargs)
    return wrapper


@logged
def mlp(x, w1, w2, act=dt.gelu):
    return act(x @ w1) @ w2


@case(lambda i: Call(T(2, 3), T(3, 5), T(5, 2)),
      must_break="does I/O: the decorator's wrapper calls print()")
def decorator_forwards_args(x, w1, w2):
    return mlp(x, w1, w2), mlp(x, w1, w2, act=dt.relu), mlp.__name__


def forward(*args, **kwargs):
    return scaled_add(*args, **kwargs)


@case(lambda i: Call(T(3), T(3), {"alpha": 2.0, "beta": 1.0}))
def forward_star_star(x, y, opts):
    return forward(x, y, **opts), forward(*(x, y), alpha=0.5), forward(x, *[y], **{})


@case(lambda i: Call(T(3), T(3)),
      must_break="raises by design: a repeated keyword raises TypeError")
def forward_duplicate_keyword_raises(x, y):
    return forward(x, y, **{"alpha": 1.0}, **{"alpha": 2.0})


def count_args(*args, **kwargs):
    return len(args), tuple(sorted(kwargs.items()))


@case(lambda i: Call(T(3), [1, 2, 3]))
def star_of_list_and_generator(x, xs):
    a = count_args(*xs, *range(2), k=1)
    b = count_args(*(v * 2 for v in xs))
    return x * a[0] + b[0], a, b


@case(lambda i: Call(T(4), T(4)))
def kwargs_dict_mutation_is_local(x, y):
    def f(**kw):
        kw["x"] = kw["x"] * 2
        return kw
    opts = {"x": x, "y": y}
    out = f(**opts)
    return out["x"] - opts["x"], len(opts), out is opts


@case(lambda i: Call(T(5)))
def functools_partial_and_reduce(x):
    add3 = functools.partial(scaled_add, beta=3.0)
    total = functools.reduce(lambda a, b: a + b, [x, x * 2, x * 3])
    return add3(x, x), total


# ---------------------------------------------------------------------------------------------
# Closures and nonlocal.

def make_scaler(factor):
    def scale(t):
        return t * factor
    return scale


@case(lambda i: Call(T(n_of(i))))
def closure_factory(x):
    double, half = make_scaler(2.0), make_scaler(0.5)
    return double(x) + half(x), double(half(x))


@case(lambda i: Call(T(3)))
def nonlocal_counter(x):
    calls = 0

    def step(t):
        nonlocal calls
        calls += 1
        return t * 0.9 + calls

    for _ in range(4):
        x = step(x)
    return x, calls


@case(lambda i: Call(T(4)))
def closure_over_tensor(x):
    bias = x.mean()

    def center(t):
        return t - bias

    return center(x), center(x * 2)


@case(lambda i: Call(T(3)))
def closure_cells_shared(x):
    def make():
        v = 1

        def get():
            return v

        def set_(n):
            nonlocal v
            v = n
        return get, set_
    get, set_ = make()
    set_(5)
    return x * get(), get()


@case(lambda i: Call(T(3)))
def late_binding_lambdas(x):
    fns = [lambda t: t * k for k in range(3)]
    bound = [lambda t, k=k: t * k for k in range(3)]
    return [f(x) for f in fns], [f(x) for f in bound]


@case(lambda i: Call(T(4)))
def returned_closure_called_later(x):
    def make_ema(decay):
        state = {"avg": None}

        def update(v):
            state["avg"] = v if state["avg"] is None else state["avg"] * decay + v * (1 - decay)
            return state["avg"]
        return update
    ema = make_ema(0.9)
    for k in range(3):
        out = ema(x + k)
    return out


@case(lambda i: Call(T(3)))
def nonlocal_list_accumulator(x):
    log = []

    def record(name, t):
        log.append((name, tuple(t.shape)))
        return t

    y = record("in", x) * 2
    z = record("mid", y).sum()
    return z, log


# ---------------------------------------------------------------------------------------------
# Lambdas, higher-order builtins, recursion.

@case(lambda i: Call(T(n_of(i))))
def lambda_table(x):
    ops = {"sq": lambda t: t * t, "neg": lambda t: -t, "sh": lambda t, s=1.0: t + s}
    return {k: f(x) for k, f in sorted(ops.items())}


@case(lambda i: Call([T(3) * k for k in range(1, 5)]),
      must_break="tensor values as Python values: .item() as sort keys")
def sorted_by_tensor_key(xs):
    sums = [t.sum().item() for t in xs]
    order = sorted(range(len(xs)), key=lambda j: -sums[j])
    return [xs[j] for j in order], order


@case(lambda i: Call(T(4)))
def map_filter_builtins(x):
    vals = list(map(lambda v: v * 2, range(5)))
    odd = list(filter(lambda v: v % 4 != 0, vals))
    return x * sum(odd), vals, odd, list(map(str, odd))


def depth_sum(t, depth):
    if depth == 0:
        return t
    return depth_sum(t * 0.5, depth - 1) + t


@case(lambda i: Call(T(n_of(i))))
def recursion_on_tensors(x):
    return depth_sum(x, 4)


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


@case(lambda i: Call(T(3)))
def recursion_on_ints(x):
    return x * fib(10), fib(15)


def flatten(tree):
    if isinstance(tree, (list, tuple)):
        out = []
        for sub in tree:
            out.extend(flatten(sub))
        return out
    return [tree]


@case(lambda i: Call([T(2), [T(2), (T(2), [T(2)])]]))
def recursive_tree_flatten(tree):
    leaves = flatten(tree)
    return dt.stack(leaves).sum(0), len(leaves)


def runaway(t, n):
    return runaway(t + 1, n + 1)


@case(lambda i: Call(T(2)), calls=1,
      must_break="raises by design: CPython raises RecursionError (caught)")
def recursion_error_caught(x):
    try:
        runaway(x, 0)
    except RecursionError as e:
        return x * 2, type(e).__name__
    return x


# ---------------------------------------------------------------------------------------------
# Globals.

STEP = 0
CONFIG = {"scale": 2.0}
TABLE = dt.tensor([1.0, 2.0, 3.0])


@case(lambda i: Call(T(3)))
def global_counter(x):
    global STEP
    STEP = 10
    for _ in range(3):
        STEP += 1
        x = x + STEP
    return x, STEP


@case(lambda i: Call(T(3)))
def global_dict_and_tensor(x):
    return x * CONFIG["scale"] + TABLE, TABLE.sum()


@case(lambda i: Call(T(3)))
def global_rebinding_tensor(x):
    global LAST_OUTPUT
    LAST_OUTPUT = x * 3
    return LAST_OUTPUT + 1, LAST_OUTPUT


@case(lambda i: Call(T(3)),
      must_break="raises by design: NameError escapes")
def undefined_global_raises(x):
    return x + NOT_DEFINED_ANYWHERE  # noqa: F821


# ---------------------------------------------------------------------------------------------
# Big ints and numbers.

@case(lambda i: Call(T(3)))
def big_int_arithmetic(x):
    big = 2 ** 100 + 7
    small = big % 1000
    return x * small, big * 3, big // 12345, -big >> 3, str(2 ** 70), big.bit_length()


@case(lambda i: Call(T(4)))
def big_int_in_shape_math(x):
    n = x.shape[0]
    huge = (n ** 40) // (n ** 39)
    return x * huge, n ** 40, hash(n ** 40) == hash(n ** 40)


@case(lambda i: Call(T(3)),
      must_break="raises by design: float(10 ** 400) raises OverflowError")
def big_int_to_float_overflow(x):
    return x * float(10 ** 400)


@case(lambda i: Call(T(3)))
def int_float_mixing(x):
    a = 7 // 2, 7 % -3, -7 // 2, 2 ** -1, divmod(17, 5), round(2.5), round(3.5), int(-2.7)
    return x * a[0] + a[1], a, 0.1 + 0.2 == 0.3, math.isclose(0.1 + 0.2, 0.3), 10 / 4


@case(lambda i: Call(I(4)),
      must_break="tensor values as Python values: .item()")
def integer_tensor_with_python_ints(x):
    y = x * 3 + 7
    z = y // 2
    return y, z, y % 5, int(y.sum().item()) * 2 ** 64


@case(lambda i: Call(T(3)),
      must_break="raises by design: 10 // 0 raises ZeroDivisionError")
def zero_division_raises(x):
    n = x.shape[0] - 3
    return x / (10 // n)


@case(lambda i: Call(T(3)))
def float_specials(x):
    inf, nan = float("inf"), float("nan")
    return x * 2, inf > 1e308, nan == nan, math.isnan(nan), str(-inf), min(3, inf), max(-inf, -2)


# ---------------------------------------------------------------------------------------------
# Unicode identifiers.

def 标准化(张量):
    均值 = 张量.mean()
    return 张量 - 均值


@case(lambda i: Call(T(n_of(i))))
def unicode_function_and_locals(x):
    α, β = 0.5, 2.0
    résultat = 标准化(x) * α + β
    return résultat, f"α={α} β={β}"


@case(lambda i: Call(T(3)))
def unicode_keyword_arguments(x):
    def scale(t, *, größe=1.0, 係数=1.0):
        return t * größe * 係数
    kw = {"größe": 2.0}
    return scale(x, **kw), scale(x, 係数=3.0), sorted(kw)


@case(lambda i: Call(T(3)))
def unicode_normalised_identifier(x):
    ﬁle = 2.0  # NFKC makes this identifier `file`
    return x * file, "ﬁle" == "file"
