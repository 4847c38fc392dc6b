"""Shared helpers for dyntrace's Python end-to-end tests.

numpy is the reference where it is importable; otherwise a small pure-Python reference
(`Ref`: a flat list plus a shape, with broadcasting, reductions and matmul) computes expected
values from `tensor.tolist()` with the `math` module, so every test checks values on every
interpreter.
"""
import math
import os

import dyntrace as dt

try:
    import numpy as np
except ImportError:  # pyenv interpreters have no numpy
    np = None

FLOAT_DTYPES = (dt.float16, dt.float32, dt.float64)
INT_DTYPES = (dt.int32, dt.int64)
ALL_DTYPES = (dt.bool,) + INT_DTYPES + FLOAT_DTYPES
SIZES = (1, 7, 33, 1031)

NAN = float("nan")
INF = float("inf")


# ---------------------------------------------------------------------------------------------
# Pure-Python reference arrays.

def _infer_shape(nested):
    shape = []
    while isinstance(nested, (list, tuple)):
        shape.append(len(nested))
        if not nested:
            break
        nested = nested[0]
    return tuple(shape)


def _flatten(nested):
    if isinstance(nested, (list, tuple)):
        out = []
        for x in nested:
            out.extend(_flatten(x))
        return out
    return [nested]


def _prod(xs):
    p = 1
    for x in xs:
        p *= x
    return p


def _contig_strides(shape):
    strides = []
    s = 1
    for n in reversed(shape):
        strides.append(s)
        s *= n
    return tuple(reversed(strides))


def _unravel(i, shape):
    idx = []
    for n in reversed(shape):
        idx.append(i % n)
        i //= n
    return tuple(reversed(idx))


def broadcast_shapes(*shapes):
    ndim = max(len(s) for s in shapes)
    out = []
    for d in range(ndim):
        size = 1
        for s in shapes:
            k = d - (ndim - len(s))
            if k < 0:
                continue
            if s[k] != 1:
                if size != 1 and size != s[k]:
                    raise ValueError("shapes %s do not broadcast" % (shapes,))
                size = s[k]
        out.append(size)
    return tuple(out)


class Ref:
    """A tiny n-d array: `values` is a flat row-major list, `shape` a tuple."""

    def __init__(self, values, shape):
        self.values = list(values)
        self.shape = tuple(shape)
        assert len(self.values) == _prod(self.shape), (len(self.values), self.shape)

    @staticmethod
    def of(x):
        if isinstance(x, Ref):
            return x
        if isinstance(x, dt.Tensor):
            return Ref(_flatten(x.tolist()), x.shape)
        if np is not None and isinstance(x, np.ndarray):
            return Ref(x.ravel().tolist(), x.shape)
        if isinstance(x, (list, tuple)):
            return Ref(_flatten(x), _infer_shape(x))
        return Ref([x], ())

    def at(self, idx):
        off = 0
        for i, s in zip(idx, _contig_strides(self.shape)):
            off += i * s
        return self.values[off]

    def tolist(self):
        def build(off, d):
            if d == len(self.shape):
                return self.values[off]
            step = _prod(self.shape[d + 1:])
            return [build(off + i * step, d + 1) for i in range(self.shape[d])]
        return build(0, 0)

    def transpose(self, perm):
        shape = tuple(self.shape[p] for p in perm)
        out = []
        for i in range(_prod(shape)):
            idx = _unravel(i, shape)
            src = [0] * len(perm)
            for k, p in enumerate(perm):
                src[p] = idx[k]
            out.append(self.at(src))
        return Ref(out, shape)

    def broadcast_to(self, shape):
        shape = tuple(shape)
        off = len(shape) - len(self.shape)
        out = []
        for i in range(_prod(shape)):
            idx = _unravel(i, shape)
            src = [0 if self.shape[k] == 1 else idx[k + off] for k in range(len(self.shape))]
            out.append(self.at(src))
        return Ref(out, shape)


def ref_map(fn, *operands):
    """Applies `fn` element by element with broadcasting; operands are tensors, Refs, lists
    or Python numbers."""
    refs = [Ref.of(x) for x in operands]
    shape = broadcast_shapes(*[r.shape for r in refs])
    expanded = [r.broadcast_to(shape) for r in refs]
    return Ref([fn(*vals) for vals in zip(*[e.values for e in expanded])], shape)


def ref_reduce(fn, x, dim=None, keepdim=False):
    """fn(list_of_values) -> value, applied over `dim` (None, int or tuple)."""
    r = Ref.of(x)
    nd = len(r.shape)
    if dim is None:
        dims = tuple(range(nd))
    elif isinstance(dim, int):
        dims = (dim % nd,) if nd else ()
    else:
        dims = tuple(d % nd for d in dim)
    kept = tuple(d for d in range(nd) if d not in dims)
    out_shape = tuple(r.shape[d] for d in kept)
    groups = {}
    for i, v in enumerate(r.values):
        idx = _unravel(i, r.shape)
        groups.setdefault(tuple(idx[d] for d in kept), []).append(v)
    values = []
    for i in range(_prod(out_shape)):
        values.append(fn(groups.get(_unravel(i, out_shape), [])))
    if keepdim:
        out_shape = tuple(1 if d in dims else r.shape[d] for d in range(nd))
    return Ref(values, out_shape)


def ref_matmul(a, b):
    a, b = Ref.of(a), Ref.of(b)
    a_vec, b_vec = len(a.shape) == 1, len(b.shape) == 1
    if a_vec:
        a = Ref(a.values, (1,) + a.shape)
    if b_vec:
        b = Ref(b.values, b.shape + (1,))
    batch = broadcast_shapes(a.shape[:-2], b.shape[:-2])
    m, k = a.shape[-2:]
    k2, n = b.shape[-2:]
    assert k == k2
    A = a.broadcast_to(batch + (m, k))
    B = b.broadcast_to(batch + (k, n))
    out = []
    nb = _prod(batch)
    for bi in range(nb):
        for i in range(m):
            for j in range(n):
                s = 0
                for p in range(k):
                    s += A.values[bi * m * k + i * k + p] * B.values[bi * k * n + p * n + j]
                out.append(s)
    shape = batch + ((m,) if not a_vec else ()) + ((n,) if not b_vec else ())
    return Ref(out, shape)


# ---------------------------------------------------------------------------------------------
# numpy bridges (reference side only: built from tolist(), never from shared memory).

def np_dtype(dtype):
    return {dt.bool: np.bool_, dt.int32: np.int32, dt.int64: np.int64, dt.float16: np.float16,
            dt.float32: np.float32, dt.float64: np.float64}[dtype]


def to_np(t, compute=True):
    """A numpy copy of tensor `t`. With `compute`, float16/float32 become float64 so that the
    reference is more precise than the value under test."""
    a = np.array(t.tolist(), dtype=np_dtype(t.dtype))
    if compute and t.dtype in (dt.float16, dt.float32):
        a = a.astype(np.float64)
    return a


def expect(np_fn, py_fn, *operands):
    """The reference result: np_fn on numpy copies when numpy exists and np_fn is given,
    else py_fn element by element (with broadcasting)."""
    if np is not None and np_fn is not None:
        args = [to_np(x) if isinstance(x, dt.Tensor) else x for x in operands]
        with np.errstate(all="ignore"):
            return np.asarray(np_fn(*args))
    return ref_map(py_fn, *operands)


# ---------------------------------------------------------------------------------------------
# Comparisons.

def default_tol(dtype):
    if dtype == dt.float16:
        return 4e-3, 2e-3
    if dtype == dt.float32:
        return 2e-5, 1e-6
    if dtype == dt.float64:
        return 1e-10, 1e-12
    return 0.0, 0.0


def _expected_flat(expected):
    if np is not None and isinstance(expected, (np.ndarray, np.generic)):
        a = np.asarray(expected)
        return [x for x in a.ravel().tolist()], tuple(a.shape)
    if isinstance(expected, Ref):
        return expected.values, expected.shape
    if isinstance(expected, dt.Tensor):
        return _flatten(expected.tolist()), expected.shape
    if isinstance(expected, (list, tuple)):
        return _flatten(expected), _infer_shape(expected)
    return [expected], ()


def close(a, b, rtol, atol):
    if isinstance(a, bool) or isinstance(b, bool):
        return bool(a) == bool(b) if rtol == atol == 0 else abs(float(a) - float(b)) <= atol
    a, b = float(a), float(b)
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= atol + rtol * abs(b)


def assert_close(actual, expected, rtol=None, atol=None, dtype=None, shape=None, msg=""):
    """Compares a dyntrace tensor against an ndarray, Ref, tensor, nested list or number:
    shape (exactly), dtype (when given), and values (NaN equal to NaN, infinities exact)."""
    assert isinstance(actual, dt.Tensor), "expected a Tensor, got %r %s" % (type(actual), msg)
    if dtype is not None:
        assert actual.dtype == dtype, "dtype %s != expected %s %s" % (actual.dtype, dtype, msg)
    d_rtol, d_atol = default_tol(actual.dtype)
    rtol = d_rtol if rtol is None else rtol
    atol = d_atol if atol is None else atol
    exp_values, exp_shape = _expected_flat(expected)
    if shape is not None:
        exp_shape = tuple(shape)
    assert tuple(actual.shape) == tuple(exp_shape), "shape %s != expected %s %s" % (
        actual.shape, exp_shape, msg)
    got = _flatten(actual.tolist())
    assert len(got) == len(exp_values), (len(got), len(exp_values))
    bad = [i for i, (g, e) in enumerate(zip(got, exp_values)) if not close(g, e, rtol, atol)]
    if bad:
        i = bad[0]
        raise AssertionError("%d/%d elements differ (rtol=%g atol=%g) %s; first at flat index %d: "
                             "got %r, expected %r" % (len(bad), len(got), rtol, atol, msg, i,
                                                      got[i], exp_values[i]))


def assert_equal(actual, expected, dtype=None, msg=""):
    assert_close(actual, expected, rtol=0.0, atol=0.0, dtype=dtype, msg=msg)


def assert_raises(exc_type, fn, *args, match=(), **kwargs):
    """Calls fn and checks it raises exc_type whose message contains every string in `match`.
    Returns the exception."""
    if isinstance(match, str):
        match = (match,)
    try:
        fn(*args, **kwargs)
    except exc_type as e:
        text = str(e)
        for m in match:
            assert m in text, "message %r does not mention %r" % (text, m)
        return e
    except Exception as e:  # noqa: BLE001 - report the wrong type
        raise AssertionError("expected %s, got %s: %s" % (exc_type.__name__, type(e).__name__, e))
    raise AssertionError("expected %s, nothing was raised" % exc_type.__name__)


def shape_str(shape):
    return "[" + ", ".join(str(s) for s in shape) + "]"


# ---------------------------------------------------------------------------------------------
# Inputs.

def rand_tensor(shape, dtype=dt.float32, low=-2.0, high=2.0):
    """Uniform values in [low, high) of `dtype` (ints: whole numbers in [low, high); bool:
    random True/False). Drawn from dt.rand in float64, so the current seed decides them."""
    shape = tuple(shape)
    u = dt.rand(*shape, dtype=dt.float64) if shape else dt.rand((), dtype=dt.float64)
    if dtype == dt.bool:
        return u < 0.5
    x = u * (high - low) + low
    if dtype in INT_DTYPES:
        return x.floor().to(dtype)
    return x.to(dtype)


def uniform(*shape, dtype=dt.float32, low=-2.0, high=2.0):
    """rand_tensor with the shape as separate arguments: `uniform(3, 4)`."""
    return rand_tensor(shape, dtype, low, high)


def positive(*shape, dtype=dt.float32):
    """Strictly positive values (safe for division, log, sqrt, pow)."""
    return rand_tensor(shape, dtype, 0.5, 2.0)


def noncontig(shape, dtype=dt.float32, kind="transposed", low=-2.0, high=2.0):
    """A non-contiguous tensor of `shape`: 'transposed' (last two dims swapped storage),
    'strided' (every other element of the last dim) or 'expanded' (dim 0 broadcast)."""
    shape = tuple(shape)
    if kind == "transposed":
        assert len(shape) >= 2
        base = rand_tensor(shape[:-2] + (shape[-1], shape[-2]), dtype, low, high)
        t = base.transpose(-1, -2)
    elif kind == "strided":
        base = rand_tensor(shape[:-1] + (shape[-1] * 2,), dtype, low, high)
        t = base[..., ::2]
    elif kind == "expanded":
        base = rand_tensor((1,) + shape[1:], dtype, low, high)
        t = base.expand(*shape)
    else:
        raise ValueError(kind)
    assert t.shape == shape
    return t


def example_module(name):
    """examples/NAME.py imported as a module: from the runfiles under Bazel, else from the
    source tree beside tests/."""
    import importlib.util
    candidates = []
    for root in (os.environ.get("TEST_SRCDIR", ""), os.environ.get("RUNFILES_DIR", "")):
        if root:
            candidates += [os.path.join(root, d, "examples", name + ".py") for d in sorted(os.listdir(root))
                           if os.path.isdir(os.path.join(root, d))]
    candidates.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", name + ".py"))
    for path in candidates:
        if os.path.exists(path):
            spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module
    raise AssertionError("examples/%s.py not found (looked at %s)" % (name, candidates))


def seed(n):
    dt.manual_seed(n)


class SkipTest(Exception):
    """Raised by skip(): the test does not apply on this machine (the reason says why)."""


def skip(reason):
    raise SkipTest(reason)


def require_numpy():
    """numpy is the reference for the rest of the test: a loud skip where it is not importable
    (pyenv's interpreters), a failure where it must be (tools/test.sh sets
    DYNTRACE_REQUIRE_NUMPY=1 for Debian's python3, which install_deps gives numpy)."""
    if np is not None:
        return
    if os.environ.get("DYNTRACE_REQUIRE_NUMPY") == "1":
        raise AssertionError("numpy is required here (DYNTRACE_REQUIRE_NUMPY=1) but cannot be imported")
    skip("numpy is not importable: the numpy half of this test did not run")


def require_nvrtc(unavailable_reason):
    """NVRTC is missing (`unavailable_reason`, e.g. dt._nvrtc_unavailable()): a loud skip, or a
    failure where CI has NVRTC (tools/test.sh sets DYNTRACE_REQUIRE_NVRTC=1 when CUDA's NVRTC is
    installed), so a broken NVRTC setup can never pass as a skip."""
    if os.environ.get("DYNTRACE_REQUIRE_NVRTC") == "1":
        raise AssertionError("NVRTC is required here (DYNTRACE_REQUIRE_NVRTC=1) but unavailable: %s"
                             % unavailable_reason)
    skip("NVRTC is not available: %s" % unavailable_reason)
