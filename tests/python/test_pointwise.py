"""Pointwise ops against numpy (or math): every op, every dtype it takes, odd sizes,
broadcasting, non-contiguous and empty inputs, function/method/in-place forms."""
import math

import dyntrace as dt
from testlib import (FLOAT_DTYPES, INT_DTYPES, ALL_DTYPES, SIZES, NAN, INF, np, Ref, assert_close,
                     assert_equal, assert_raises, expect, noncontig, rand_tensor, ref_map, seed)


def _safe(fn):
    def wrapped(*xs):
        try:
            return fn(*xs)
        except ZeroDivisionError:
            return INF
        except (ValueError, OverflowError):
            return NAN
    return wrapped


def _sigmoid(x):
    return 1.0 / (1.0 + math.exp(-x)) if x > -700 else 0.0


def _gelu(x):
    return 0.5 * x * (1.0 + math.erf(x / math.sqrt(2.0)))


def _gelu_tanh(x):
    return 0.5 * x * (1.0 + math.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def _sign(x):
    if x != x:
        return x
    return (x > 0) - (x < 0)


_np = np  # may be None; the lambdas below only run when numpy exists

# name: (numpy fn or None, python fn, float range, int range or None (no ints), bool ok, rule)
# rule: 'promote' keeps the dtype, 'float' turns ints into float32, 'bool' gives bool.
UNARY = {
    "neg": (lambda a: -a, lambda x: -x, (-3, 3), (-5, 5), False, "promote"),
    "abs": (lambda a: _np.abs(a), abs, (-3, 3), (-5, 5), False, "promote"),
    "exp": (lambda a: _np.exp(a), math.exp, (-4, 4), (-3, 4), True, "float"),
    "exp2": (lambda a: _np.exp2(a), lambda x: 2.0 ** x, (-4, 4), (-3, 4), True, "float"),
    "log": (lambda a: _np.log(a), math.log, (0.05, 6), (1, 9), False, "float"),
    "log2": (lambda a: _np.log2(a), math.log2, (0.05, 6), (1, 9), False, "float"),
    "log1p": (lambda a: _np.log1p(a), math.log1p, (-0.9, 4), (0, 9), False, "float"),
    "expm1": (lambda a: _np.expm1(a), math.expm1, (-3, 3), (-3, 4), False, "float"),
    "sqrt": (lambda a: _np.sqrt(a), math.sqrt, (0, 9), (0, 9), False, "float"),
    "rsqrt": (lambda a: 1 / _np.sqrt(a), lambda x: 1 / math.sqrt(x), (0.1, 9), (1, 9), False, "float"),
    "sin": (lambda a: _np.sin(a), math.sin, (-4, 4), (-5, 5), True, "float"),
    "cos": (lambda a: _np.cos(a), math.cos, (-4, 4), (-5, 5), True, "float"),
    "tan": (lambda a: _np.tan(a), math.tan, (-1.2, 1.2), (-1, 2), False, "float"),
    "tanh": (lambda a: _np.tanh(a), math.tanh, (-4, 4), (-3, 4), True, "float"),
    "sigmoid": (lambda a: 1 / (1 + _np.exp(-a)), _sigmoid, (-8, 8), (-5, 5), True, "float"),
    "relu": (lambda a: _np.maximum(a, 0), lambda x: max(x, 0), (-3, 3), (-5, 5), False, "promote"),
    "silu": (lambda a: a / (1 + _np.exp(-a)), lambda x: x * _sigmoid(x), (-6, 6), (-5, 5), False, "float"),
    "erf": (None, math.erf, (-3, 3), (-3, 3), False, "float"),
    "floor": (lambda a: _np.floor(a), math.floor, (-5, 5), (-5, 5), False, "promote"),
    "ceil": (lambda a: _np.ceil(a), math.ceil, (-5, 5), (-5, 5), False, "promote"),
    "round": (lambda a: _np.round(a), round, (-5, 5), (-5, 5), False, "promote"),
    "trunc": (lambda a: _np.trunc(a), math.trunc, (-5, 5), (-5, 5), False, "promote"),
    "sign": (lambda a: _np.sign(a), _sign, (-3, 3), (-3, 3), False, "promote"),
    "reciprocal": (lambda a: 1 / a, lambda x: 1 / x, (0.2, 4), (1, 6), False, "float"),
    "square": (lambda a: a * a, lambda x: x * x, (-3, 3), (-9, 9), False, "promote"),
    "logical_not": (lambda a: _np.logical_not(a), lambda x: not x, (-1, 1), (-2, 2), True, "bool"),
}


def _result_dtype(rule, dtype):
    if rule == "bool":
        return dt.bool
    if rule == "float" and dtype in INT_DTYPES + (dt.bool,):
        return dt.float32
    return dtype


def _check_unary(name, x, msg=""):
    np_fn, py_fn, _, _, _, rule = UNARY[name]
    # numpy computes bool inputs in float16; give the reference float64 values instead.
    ref_in = x.double() if (x.dtype == dt.bool and rule == "float") else x
    want = expect(np_fn, _safe(py_fn), ref_in)
    want_dtype = _result_dtype(rule, x.dtype)
    assert_close(getattr(dt, name)(x), want, dtype=want_dtype, msg="%s %s %s" % (name, x.dtype, msg))
    assert_close(getattr(x, name)(), want, dtype=want_dtype, msg="method " + name)
    return want


def _make_unary_test(name, index):
    _, _, frange, irange, bool_ok, rule = UNARY[name]

    def test():
        seed(1000 + index)
        dtypes = list(FLOAT_DTYPES) + (list(INT_DTYPES) if irange is not None else [])
        if bool_ok:
            dtypes.append(dt.bool)
        for dtype in dtypes:
            lo, hi = frange if dtype in FLOAT_DTYPES else (irange or (0, 2))
            for n in SIZES:
                x = rand_tensor((n,), dtype, lo, hi)
                _check_unary(name, x, "n=%d" % n)
            # 0-d, 2-d broadcast-free shapes, empty
            _check_unary(name, rand_tensor((), dtype, lo, hi), "0-d")
            _check_unary(name, rand_tensor((3, 5, 2), dtype, lo, hi), "3-d")
            y = getattr(dt, name)(dt.zeros(0, 3, dtype=dtype))
            assert y.shape == (0, 3) and y.dtype == _result_dtype(rule, dtype)
            for kind in ("transposed", "strided", "expanded"):
                x = noncontig((4, 6), dtype, kind, lo, hi)
                assert not x.is_contiguous()
                _check_unary(name, x, kind)
            # In-place form where the result fits back into the input's dtype.
            if _result_dtype(rule, dtype) == dtype:
                x = rand_tensor((5, 7), dtype, lo, hi)
                want = expect(UNARY[name][0], _safe(UNARY[name][1]), x)
                y = x.clone()
                r = getattr(y, name + "_")()
                assert r is y
                assert_close(y, want, dtype=dtype, msg=name + "_")
                # in place into a strided view leaves the gaps alone
                base = rand_tensor((4, 10), dtype, lo, hi)
                before = base.tolist()
                view = base[:, ::2]
                want = expect(UNARY[name][0], _safe(UNARY[name][1]), view)
                getattr(view, name + "_")()
                assert_close(base[:, ::2], want, dtype=dtype, msg=name + "_ strided")
                assert_equal(base[:, 1::2], [row[1::2] for row in before])
    test.__name__ = "test_unary_" + name
    return test


for _i, _name in enumerate(UNARY):
    globals()["test_unary_" + _name] = _make_unary_test(_name, _i)


# ---------------------------------------------------------------------------------------------
# Binary ops.

def _nonzero_int(x):
    return dt.where(x == 0, 1, x)


def _floordiv(a, b):
    if isinstance(a, float) or isinstance(b, float):
        if b == 0:
            return math.copysign(INF, a) * math.copysign(1, b) if a != 0 else NAN
        return a // b
    return a // b


def _mod(a, b):
    if isinstance(a, float) or isinstance(b, float):
        if b == 0:
            return NAN
        return a % b
    return a % b


def _pow(a, b):
    try:
        return a ** b
    except ZeroDivisionError:
        return INF


def _maximum(a, b):
    if a != a or b != b:
        return NAN
    return max(a, b)


def _minimum(a, b):
    if a != a or b != b:
        return NAN
    return min(a, b)


# name: (numpy fn or None, python fn, dtypes, a range, b range, b nonzero for ints, rule)
BINARY = {
    "add": (lambda a, b: a + b, lambda a, b: a + b, ALL_DTYPES, (-3, 3), (-3, 3), False, "promote"),
    "sub": (lambda a, b: a - b, lambda a, b: a - b, INT_DTYPES + FLOAT_DTYPES, (-3, 3), (-3, 3), False, "promote"),
    "mul": (lambda a, b: a * b, lambda a, b: a * b, ALL_DTYPES, (-3, 3), (-3, 3), False, "promote"),
    "div": (lambda a, b: a / b, lambda a, b: a / b, INT_DTYPES + FLOAT_DTYPES, (-3, 3), (0.5, 3), True, "float"),
    "floor_divide": (lambda a, b: _np.floor_divide(a, b), _floordiv, INT_DTYPES + FLOAT_DTYPES,
                     (-9, 9), (-4, 4), True, "promote"),
    "remainder": (lambda a, b: _np.remainder(a, b), _mod, INT_DTYPES + FLOAT_DTYPES, (-9, 9), (-4, 4),
                  True, "promote"),
    "pow": (lambda a, b: _np.power(a, b), _pow, INT_DTYPES + FLOAT_DTYPES, (0.1, 3), (-2, 3), False,
            "promote"),
    "maximum": (lambda a, b: _np.maximum(a, b), _maximum, ALL_DTYPES, (-3, 3), (-3, 3), False, "promote"),
    "minimum": (lambda a, b: _np.minimum(a, b), _minimum, ALL_DTYPES, (-3, 3), (-3, 3), False, "promote"),
    "atan2": (lambda a, b: _np.arctan2(a, b), math.atan2, INT_DTYPES + FLOAT_DTYPES, (-3, 3), (-3, 3),
              False, "float"),
    "eq": (lambda a, b: a == b, lambda a, b: a == b, ALL_DTYPES, (-2, 2), (-2, 2), False, "bool"),
    "ne": (lambda a, b: a != b, lambda a, b: a != b, ALL_DTYPES, (-2, 2), (-2, 2), False, "bool"),
    "lt": (lambda a, b: a < b, lambda a, b: a < b, ALL_DTYPES, (-2, 2), (-2, 2), False, "bool"),
    "le": (lambda a, b: a <= b, lambda a, b: a <= b, ALL_DTYPES, (-2, 2), (-2, 2), False, "bool"),
    "gt": (lambda a, b: a > b, lambda a, b: a > b, ALL_DTYPES, (-2, 2), (-2, 2), False, "bool"),
    "ge": (lambda a, b: a >= b, lambda a, b: a >= b, ALL_DTYPES, (-2, 2), (-2, 2), False, "bool"),
    "logical_and": (lambda a, b: _np.logical_and(a, b), lambda a, b: bool(a) and bool(b), ALL_DTYPES,
                    (-2, 2), (-2, 2), False, "bool"),
    "logical_or": (lambda a, b: _np.logical_or(a, b), lambda a, b: bool(a) or bool(b), ALL_DTYPES,
                   (-2, 2), (-2, 2), False, "bool"),
    "logical_xor": (lambda a, b: _np.logical_xor(a, b), lambda a, b: bool(a) != bool(b), ALL_DTYPES,
                    (-2, 2), (-2, 2), False, "bool"),
}

OPERATORS = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b, "floor_divide": lambda a, b: a // b,
    "remainder": lambda a, b: a % b, "pow": lambda a, b: a ** b,
    "eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
}


def _operands(name, dtype, shape_a, shape_b):
    _, _, _, arange_, brange, nonzero, _ = BINARY[name]
    if name in ("eq", "ne", "lt", "le", "gt", "ge") and dtype in FLOAT_DTYPES:
        # Whole numbers so that ties happen.
        a = rand_tensor(shape_a, dt.int64, *arange_).to(dtype)
        b = rand_tensor(shape_b, dt.int64, *brange).to(dtype)
        return a, b
    if name == "pow" and dtype in INT_DTYPES:
        return rand_tensor(shape_a, dtype, -3, 4), rand_tensor(shape_b, dtype, 0, 4)
    a = rand_tensor(shape_a, dtype, *arange_)
    b = rand_tensor(shape_b, dtype, *brange)
    if nonzero and dtype in INT_DTYPES:
        b = _nonzero_int(b)
    if name in ("floor_divide", "remainder") and dtype in FLOAT_DTYPES:
        b = dt.where(b.abs() < 0.25, 1.0, b)
    return a, b


def _binary_result_dtype(rule, dtype):
    if rule == "bool":
        return dt.bool
    if rule == "float" and dtype in INT_DTYPES + (dt.bool,):
        return dt.float32
    return dtype


def _tol(name, dtype):
    # float16 results of floor_divide/remainder/pow need a little more room.
    if dtype == dt.float16 and name in ("pow",):
        return 8e-3, 4e-3
    return None, None


def _check_binary(name, a, b, msg=""):
    np_fn, py_fn, _, _, _, _, rule = BINARY[name]
    want = expect(np_fn, _safe(py_fn), a, b)
    dtype = a.dtype if isinstance(a, dt.Tensor) else b.dtype
    want_dtype = _binary_result_dtype(rule, dtype)
    rtol, atol = _tol(name, dtype)
    assert_close(getattr(dt, name)(a, b), want, rtol, atol, dtype=want_dtype,
                 msg="%s %s %s" % (name, dtype, msg))
    if isinstance(a, dt.Tensor):
        assert_close(getattr(a, name)(b), want, rtol, atol, dtype=want_dtype, msg="method " + name)
    if name in OPERATORS:
        assert_close(OPERATORS[name](a, b), want, rtol, atol, dtype=want_dtype, msg="operator " + name)


def _make_binary_test(name, index):
    dtypes = BINARY[name][2]

    def test():
        seed(2000 + index)
        for dtype in dtypes:
            for n in SIZES:
                a, b = _operands(name, dtype, (n,), (n,))
                _check_binary(name, a, b, "n=%d" % n)
            # broadcasting [3,1] x [1,4], [2,3,4] x [4], and 0-d
            a, b = _operands(name, dtype, (3, 1), (1, 4))
            _check_binary(name, a, b, "[3,1]x[1,4]")
            a, b = _operands(name, dtype, (2, 3, 4), (4,))
            _check_binary(name, a, b, "[2,3,4]x[4]")
            a, b = _operands(name, dtype, (5, 2), ())
            _check_binary(name, a, b, "0-d b")
            _check_binary(name, b, a, "0-d a") if name not in ("div", "floor_divide", "remainder",
                                                                "pow") else None
            # non-contiguous operands
            for kind in ("transposed", "strided", "expanded"):
                a, _ = _operands(name, dtype, (4, 6), (4, 6))
                a = noncontig((4, 6), dtype, kind, *BINARY[name][3]) if name != "pow" else a.T.contiguous().T
                _, b = _operands(name, dtype, (4, 6), (4, 6))
                bt = b.T.contiguous().T  # transposed layout, same values
                _check_binary(name, a, bt, kind)
            # empty
            a, b = _operands(name, dtype, (0, 4), (1, 4))
            r = getattr(dt, name)(a, b)
            assert r.shape == (0, 4), r.shape
            # Python scalar as the second operand
            a, _ = _operands(name, dtype, (3, 4), (1,))
            scalar = {dt.bool: True}.get(dtype, 2 if dtype in INT_DTYPES else 1.5)
            _check_binary(name, a, scalar, "scalar")
    test.__name__ = "test_binary_" + name
    return test


for _i, _name in enumerate(BINARY):
    globals()["test_binary_" + _name] = _make_binary_test(_name, _i)


def test_binary_reflected_scalar_operators():
    seed(3001)
    x = rand_tensor((4, 5), dt.float64, 0.5, 3)
    xs = x.tolist()
    assert_close(2 - x, ref_map(lambda v: 2 - v, x))
    assert_close(3 / x, ref_map(lambda v: 3 / v, x))
    assert_close(7 // x, ref_map(lambda v: 7 // v, x))
    assert_close(7 % x, ref_map(lambda v: 7 % v, x))
    assert_close(2 ** x, ref_map(lambda v: 2 ** v, x))
    assert_close(1.5 * x, ref_map(lambda v: 1.5 * v, x))
    assert_equal(1 < x, ref_map(lambda v: 1 < v, x), dtype=dt.bool)
    assert_equal(2 >= x, ref_map(lambda v: 2 >= v, x), dtype=dt.bool)
    assert xs == x.tolist()  # operands are untouched
    i = rand_tensor((6,), dt.int64, 1, 9)
    assert_equal(20 // i, ref_map(lambda v: 20 // v, i), dtype=dt.int64)
    assert_equal(-20 % i, ref_map(lambda v: -20 % v, i), dtype=dt.int64)


def test_inplace_binary_methods():
    seed(3002)
    for name in ("add", "sub", "mul", "div", "floor_divide", "remainder", "pow", "atan2"):
        for dtype in FLOAT_DTYPES:
            a, b = _operands(name, dtype, (3, 4), (4,))
            want = expect(BINARY[name][0], _safe(BINARY[name][1]), a, b)
            y = a.clone()
            r = getattr(y, name + "_")(b)
            assert r is y
            rtol, atol = _tol(name, dtype)
            assert_close(y, want, rtol, atol, dtype=dtype, msg=name + "_")


def test_round_half_to_even():
    values = [-3.5, -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 4.5, 0.49, -0.51, 1e6 + 0.5]
    for dtype in (dt.float32, dt.float64):
        x = dt.tensor(values, dtype=dtype)
        assert_equal(x.round(), [float(round(v)) for v in x.tolist()], dtype=dtype)
    x = dt.tensor(values[:-1], dtype=dt.float16)
    assert_equal(x.round(), [float(round(v)) for v in x.tolist()], dtype=dt.float16)


def test_floor_divide_remainder_python_semantics_int():
    avals = list(range(-9, 10))
    bvals = [-4, -3, -2, -1, 1, 2, 3, 4]
    for dtype in INT_DTYPES:
        a = dt.tensor([[x for _ in bvals] for x in avals], dtype=dtype)
        b = dt.tensor(bvals, dtype=dtype)
        assert_equal(a // b, [[x // y for y in bvals] for x in avals], dtype=dtype)
        assert_equal(a % b, [[x % y for y in bvals] for x in avals], dtype=dtype)
        assert_equal(dt.remainder(a, -3), [[x % -3 for _ in bvals] for x in avals], dtype=dtype)


def test_floor_divide_remainder_python_semantics_float():
    avals = [-7.5, -3.0, -2.25, -0.5, -0.0, 0.0, 0.5, 2.25, 3.0, 7.5]
    bvals = [-2.0, -0.75, 0.75, 2.0]
    for dtype in (dt.float32, dt.float64):
        a = dt.tensor(avals, dtype=dtype).reshape(-1, 1)
        b = dt.tensor(bvals, dtype=dtype)
        assert_equal(a // b, [[x // y for y in bvals] for x in avals], dtype=dtype)
        assert_equal(a % b, [[x % y for y in bvals] for x in avals], dtype=dtype)
    # division by zero of floats gives inf/nan like IEEE
    z = dt.tensor([1.0, -1.0, 0.0]) / 0.0
    assert_equal(z, [INF, -INF, NAN])


def test_minimum_maximum_propagate_nan():
    a = dt.tensor([1.0, NAN, 3.0, NAN, -INF])
    b = dt.tensor([NAN, 2.0, 1.0, NAN, 0.0])
    assert_equal(dt.maximum(a, b), [NAN, NAN, 3.0, NAN, 0.0])
    assert_equal(dt.minimum(a, b), [NAN, NAN, 1.0, NAN, -INF])
    assert_equal(a.maximum(b), dt.maximum(b, a))
    assert_equal(dt.tensor([NAN]).clamp(0.0, 1.0), [NAN])


def test_clamp_and_clip():
    seed(3003)
    for dtype in INT_DTYPES + FLOAT_DTYPES:
        lo_, hi_ = (-5, 5) if dtype in INT_DTYPES else (-3, 3)
        x = rand_tensor((7, 9), dtype, lo_, hi_)
        lo, hi = (-2, 1) if dtype in INT_DTYPES else (-1.5, 0.5)
        assert_close(dt.clamp(x, lo, hi), ref_map(lambda v: min(max(v, lo), hi), x), dtype=dtype)
        assert_close(dt.clip(x, lo, hi), ref_map(lambda v: min(max(v, lo), hi), x), dtype=dtype)
        assert_close(x.clamp(min=lo), ref_map(lambda v: max(v, lo), x), dtype=dtype)
        assert_close(x.clamp(max=hi), ref_map(lambda v: min(v, hi), x), dtype=dtype)
        # tensor bounds broadcast
        tlo = rand_tensor((9,), dtype, lo_, 0)
        assert_close(dt.clamp(x, tlo), ref_map(max, x, tlo), dtype=dtype)
        y = x.clone()
        assert y.clamp_(lo, hi) is y
        assert_close(y, ref_map(lambda v: min(max(v, lo), hi), x), dtype=dtype)
        y = x.clone()
        y.clip_(max=hi)
        assert_close(y, ref_map(lambda v: min(v, hi), x), dtype=dtype)
    # int tensor clamped with float bounds promotes like PyTorch
    r = dt.clamp(dt.tensor([1, 5, 9]), 2.5, 7.5)
    assert_close(r, [2.5, 5.0, 7.5], dtype=dt.float32)


def test_where():
    seed(3004)
    for dtype in ALL_DTYPES:
        c = rand_tensor((5, 1), dt.bool)
        a = rand_tensor((5, 6), dtype)
        b = rand_tensor((6,), dtype)
        assert_equal(dt.where(c, a, b), ref_map(lambda ci, x, y: x if ci else y, c, a, b), dtype=dtype)
    c = rand_tensor((3, 4), dt.bool)
    x = rand_tensor((3, 4), dt.float64)
    assert_equal(dt.where(c, x, 0.0), ref_map(lambda ci, v: v if ci else 0.0, c, x), dtype=dt.float64)
    assert_equal(dt.where(c, 1, x), ref_map(lambda ci, v: 1.0 if ci else v, c, x), dtype=dt.float64)
    r = dt.where(c, 1, 0)
    assert r.dtype == dt.int64
    assert_equal(r, ref_map(lambda ci: int(ci), c))
    ri = dt.where(c, dt.ones(3, 4, dtype=dt.int32), 2.5)
    assert ri.dtype == dt.float32
    # non-contiguous condition and operands
    c = rand_tensor((6, 4), dt.bool).T
    a = noncontig((4, 6), dt.float32, "strided")
    b = noncontig((4, 6), dt.float32, "expanded")
    assert_equal(dt.where(c, a, b), ref_map(lambda ci, x, y: x if ci else y, c, a, b))


def test_gelu_exact_and_tanh():
    seed(3005)
    for dtype in FLOAT_DTYPES:
        for n in SIZES:
            x = rand_tensor((n,), dtype, -5, 5)
            assert_close(dt.gelu(x), ref_map(_gelu, x), dtype=dtype)
            assert_close(x.gelu(approximate="none"), ref_map(_gelu, x), dtype=dtype)
            assert_close(dt.gelu(x, approximate="tanh"), ref_map(_gelu_tanh, x), dtype=dtype)
        x = noncontig((3, 5), dtype, "transposed")
        assert_close(dt.gelu(x, approximate="tanh"), ref_map(_gelu_tanh, x), dtype=dtype)
    assert_close(dt.gelu(dt.tensor([1, -2, 3])), ref_map(_gelu, [1, -2, 3]), dtype=dt.float32)
    assert_raises(ValueError, dt.gelu, dt.ones(2), approximate="fast", match="fast")


def test_special_float_values():
    x = dt.tensor([0.0, -0.0, INF, -INF, NAN, -1.0], dtype=dt.float64)
    assert_equal(dt.exp(x), [1.0, 1.0, INF, 0.0, NAN, math.exp(-1)])
    assert_equal(dt.log(x), [-INF, -INF, INF, NAN, NAN, NAN])
    assert_equal(dt.sqrt(x), [0.0, -0.0, INF, NAN, NAN, NAN])
    assert_equal(dt.sign(x), [0.0, 0.0, 1.0, -1.0, NAN, -1.0])
    assert_equal(dt.relu(x), [0.0, 0.0, INF, 0.0, NAN, 0.0])
    assert_equal(dt.sigmoid(x), [0.5, 0.5, 1.0, 0.0, NAN, _sigmoid(-1.0)])
    assert_equal(dt.tanh(x), [0.0, -0.0, 1.0, -1.0, NAN, math.tanh(-1.0)])
    assert_equal(dt.reciprocal(x), [INF, -INF, 0.0, -0.0, NAN, -1.0])
    assert_equal(dt.floor(x), [0.0, -0.0, INF, -INF, NAN, -1.0])
    assert_equal(x.abs(), [0.0, 0.0, INF, INF, NAN, 1.0])
    # exp overflow in float16 goes to inf rather than wrapping
    assert_equal(dt.exp(dt.tensor([12.0], dtype=dt.float16)), [INF], dtype=dt.float16)


def test_bool_arithmetic():
    a = dt.tensor([True, True, False, False])
    b = dt.tensor([True, False, True, False])
    assert_equal(a + b, [True, True, True, False], dtype=dt.bool)
    assert_equal(a * b, [True, False, False, False], dtype=dt.bool)
    assert_equal(a & b, [True, False, False, False], dtype=dt.bool)
    assert_equal(a | b, [True, True, True, False], dtype=dt.bool)
    assert_equal(a ^ b, [False, True, True, False], dtype=dt.bool)
    assert_equal(~a, [False, False, True, True], dtype=dt.bool)
    assert_equal(a + 1, [2, 2, 1, 1], dtype=dt.int64)
    assert_equal(a * 1.5, [1.5, 1.5, 0.0, 0.0], dtype=dt.float32)
    assert_equal(dt.sign(a), [True, True, False, False], dtype=dt.bool)
    assert_equal(dt.maximum(a, b), [True, True, True, False], dtype=dt.bool)


def test_integer_pow_and_overflow_wraps_like_cpp():
    seed(3006)
    a = rand_tensor((50,), dt.int64, -6, 7)
    e = rand_tensor((50,), dt.int64, 0, 6)
    assert_equal(a ** e, ref_map(lambda x, y: x ** y, a, e), dtype=dt.int64)
    assert_equal(a ** 2, ref_map(lambda x: x * x, a), dtype=dt.int64)
    assert_close(a.abs() ** 0.5, ref_map(lambda x: abs(x) ** 0.5, a),
                 dtype=dt.float32)
    assert_close(a.abs().float() ** -1, ref_map(_safe(lambda x: 1.0 / abs(x)), a), dtype=dt.float32)


def test_large_pointwise_parallel_loops():
    seed(3007)
    n = 200003
    a = rand_tensor((n,), dt.float32)
    b = rand_tensor((n,), dt.float32)
    r = a * b + 1.0
    if np is not None:
        want = (to64(a) * to64(b) + 1.0)
        assert_close(r, want, rtol=1e-5, atol=1e-5)
    else:
        al, bl = a.tolist(), b.tolist()
        assert_close(r, [x * y + 1.0 for x, y in zip(al, bl)], rtol=1e-5, atol=1e-5)
    # 3-d with a broadcast middle dim and a transposed operand
    a = rand_tensor((40, 1, 70), dt.float64)
    b = rand_tensor((70, 30, 40), dt.float64).permute(2, 1, 0)
    assert_close(a - b, ref_map(lambda x, y: x - y, a, b))


def to64(t):
    return np.array(t.tolist(), dtype=np.float64)
