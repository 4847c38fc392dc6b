"""Misuse: one test per row of the README's "Bad input" table. Each checks the exception type and
that the message names what was wrong; under dt.jit the exception is the one plain CPython
raises for the same call.
"""
import dyntrace as dt
from jitlib import fresh_copy
from testlib import assert_raises


def same_error_under_jit(fn, *args):
    """The exception a plain call raises, and that the jit'd call raises the same type/message."""
    plain = assert_raises(Exception, fn, *args)
    jitted = assert_raises(type(plain), dt.jit(fresh_copy(fn)), *args)
    assert type(jitted) is type(plain) and str(jitted) == str(plain), (jitted, plain)
    return plain


def adds(x, y):
    return dt.exp(x) + y


def test_wrong_types():
    assert_raises(TypeError, dt.exp, "a", match=["exp()", "Tensor", "str"])
    assert_raises(TypeError, dt.zeros, 2, dtype=complex, match="dtype")
    e = same_error_under_jit(adds, "not a tensor", dt.ones(2))
    assert isinstance(e, TypeError)


def test_shape_mismatch():
    assert_raises(dt.ShapeError, lambda: dt.ones(2, 3) + dt.ones(4), match=["[2, 3]", "[4]"])
    e = same_error_under_jit(adds, dt.ones(2, 3), dt.ones(4))
    assert isinstance(e, dt.ShapeError) and isinstance(e, ValueError) and isinstance(e, RuntimeError)


def test_unsupported_dtype_or_device():
    assert_raises(ValueError, dt.zeros, 2, dtype="complex64", match=["complex64", "float32"])
    assert_raises(ValueError, dt.zeros, 2, device="tpu", match=["tpu", "cpu"])
    assert_raises(TypeError, lambda: dt.ones(2, dtype=dt.int32).mean(), match="dtype")


def test_non_callable_given_to_jit():
    assert_raises(TypeError, dt.jit, 3, match=["jit()", "int"])
    assert_raises(TypeError, dt.jit, len, match=["Python function", "builtin"])
    assert_raises(TypeError, dt.jit(backend="eager"), "text", match="str")


def test_invalid_options():
    f = fresh_copy(adds)
    assert_raises(ValueError, dt.jit, f, backend="nope", match=["nope", "eager"])
    assert_raises(TypeError, dt.jit, f, backend=3, match="backend")
    assert_raises(ValueError, dt.jit, f, cache_limit=0, match="cache_limit")
    assert_raises(TypeError, dt.jit, f, cache_limit="2", match="cache_limit")
    assert_raises(ValueError, dt.jit, f, cuda_graphs="sometimes", match="cuda_graphs")
    assert_raises(TypeError, dt.jit, f, fast=True, match="fast")
    assert_raises(ValueError, dt.tracing, backend="x", match="'x'")
    assert_raises(TypeError, dt.enable, fullgraph=True, unknown=1, match="unknown")
    assert not dt._stress_mode()


def test_missing_cuda():
    if dt.cuda.is_available():
        return  # a machine with a GPU: the row does not apply
    assert dt.cuda.device_count() == 0
    assert_raises(RuntimeError, dt.zeros, 2, device="cuda", match=["CUDA is not available", "cpu"])
    assert_raises(RuntimeError, lambda: dt.ones(2).to("cuda"), match="CUDA is not available")
