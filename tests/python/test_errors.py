"""Each error case: the exception type and that the message names the shapes/dtypes involved."""
import dyntrace as dt
from testlib import assert_raises, seed, rand_tensor


def test_shape_error_is_runtime_and_value_error():
    assert issubclass(dt.ShapeError, RuntimeError) and issubclass(dt.ShapeError, ValueError)
    e = assert_raises(dt.ShapeError, lambda: dt.ones(2, 3) + dt.ones(4))
    assert isinstance(e, RuntimeError) and isinstance(e, ValueError)


def test_broadcast_mismatch_names_both_shapes():
    cases = [((2, 3), (4,)), ((5, 1, 3), (2, 4)), ((3,), (2, 2)), ((0,), (2,))]
    for sa, sb in cases:
        for op in (lambda a, b: a + b, lambda a, b: a * b, dt.maximum, dt.atan2, lambda a, b: a < b,
                   lambda a, b: dt.where(a > 0, a, b)):
            a, b = dt.ones(*sa), dt.ones(*sb)
            fmt = lambda s: "[" + ", ".join(map(str, s)) + "]"  # noqa: E731
            assert_raises(dt.ShapeError, op, a, b, match=(fmt(sa), fmt(sb)))


def test_view_and_reshape_errors_name_shapes():
    x = dt.ones(2, 3)
    assert_raises(dt.ShapeError, x.reshape, 4, 2, match=("[4, 2]", "6"))
    assert_raises(dt.ShapeError, x.view, 5, match="5")
    assert_raises((ValueError, RuntimeError), x.reshape, -1, -1)
    assert_raises(dt.ShapeError, x.T.view, 6, match=("[3, 2]",))
    assert_raises(dt.ShapeError, x.expand, 4, 3, match="[2, 3]")
    assert_raises(dt.ShapeError, dt.cat, [x, dt.ones(3, 2)], 1, match=("[2, 3]", "[3, 2]"))
    assert_raises(dt.ShapeError, dt.stack, [x, x.T], match=("[2, 3]", "[3, 2]"))


def test_matmul_errors_name_shapes():
    assert_raises(dt.ShapeError, lambda: dt.ones(2, 3) @ dt.ones(2, 3), match=("[2, 3]",))
    assert_raises(dt.ShapeError, dt.mm, dt.ones(3), dt.ones(3), match="[3]")
    assert_raises(dt.ShapeError, dt.bmm, dt.ones(2, 2, 2), dt.ones(2, 2), match=("[2, 2, 2]", "[2, 2]"))
    assert_raises(dt.ShapeError, dt.dot, dt.ones(2, 2), dt.ones(2, 2))


def test_inplace_shape_error_names_shapes():
    x = dt.ones(3)
    assert_raises(dt.ShapeError, x.mul_, dt.ones(2, 3), match=("[3]", "[2, 3]"))

    def iadd():
        y = dt.ones(3)
        y += dt.ones(4, 1)
    assert_raises(dt.ShapeError, iadd, match=("[3]", "[4, 3]"))

    def setitem():
        z = dt.ones(2, 3)
        z[0] = dt.ones(4)
    assert_raises(dt.ShapeError, setitem, match=("[3]", "[4]"))


def test_type_errors_for_bad_argument_types():
    x = dt.ones(2, 3)
    assert_raises(TypeError, dt.exp, [1.0, 2.0], match="Tensor")
    assert_raises(TypeError, dt.add, x, "1", match="str")
    assert_raises(TypeError, dt.add, 1, x, match="Tensor")
    assert_raises(TypeError, x.sum, dim="0")
    assert_raises(TypeError, x.reshape, 2.0, 3, match="float")
    assert_raises(TypeError, x.transpose, 0, 1.0)
    assert_raises(TypeError, dt.softmax, x, None)
    assert_raises(TypeError, dt.cat, x)
    assert_raises(TypeError, dt.cat, [x, [1, 2, 3]], match="list")
    assert_raises(TypeError, dt.zeros, 2, dtype=object, match="dtype")
    assert_raises(TypeError, dt.layer_norm, x, (3,), eps="a")
    assert_raises(TypeError, dt.gelu, x, approximate=1)
    assert_raises(TypeError, x.sum, keepdim=1)


def test_dtype_errors_name_dtypes():
    i = dt.ones(3, dtype=dt.int64)
    b = dt.ones(3, dtype=dt.bool)
    assert_raises(TypeError, dt.neg, b, match="bool")
    assert_raises(TypeError, lambda: b - b, match="bool")
    assert_raises(TypeError, dt.abs, b, match="bool")
    assert_raises(TypeError, dt.where, i, i, i, match="int64")
    assert_raises(TypeError, dt.mean, i, match="Long")
    assert_raises(TypeError, dt.softmax, i, 0, match="int64")
    assert_raises(TypeError, dt.rand, 2, dtype=dt.int64, match="int64")
    assert_raises(TypeError, i.add_, 0.5, match=("Float", "Long"))
    assert_raises(TypeError, b.add_, 2, match=("Long", "Bool"))
    assert_raises(TypeError, lambda: ~dt.ones(2), match="float32")
    assert_raises(TypeError, dt.matmul, dt.ones(2, 2), dt.ones(2, 2, dtype=dt.float16),
                  match=("float32", "float16"))


def test_dim_out_of_range_is_index_error():
    x = dt.ones(2, 3)
    for fn in (lambda: x.sum(2), lambda: x.mean(-3), lambda: x.amax(dim=(0, 5)), lambda: x.argmax(2),
               lambda: x.softmax(2), lambda: x.transpose(0, 2), lambda: x.unsqueeze(4),
               lambda: x.squeeze(3), lambda: x.flatten(0, 2), lambda: x.permute(0, 2),
               lambda: x.narrow(2, 0, 1), lambda: x.select(-3, 0), lambda: dt.cat([x, x], 2),
               lambda: dt.stack([x, x], 4), lambda: x.split(1, 2), lambda: x.size(2),
               lambda: x.stride(-3), lambda: x.var(dim=2), lambda: x.logsumexp(3)):
        e = assert_raises(IndexError, fn)
        assert "range" in str(e) or "dim" in str(e), str(e)


def test_index_errors():
    x = dt.ones(2, 3)
    assert_raises(IndexError, lambda: x[2], match="2")
    assert_raises(IndexError, lambda: x[0, -4])
    assert_raises(IndexError, lambda: x[0, 0, 0])
    assert_raises(IndexError, x.select, 0, 5, match="5")
    assert_raises(IndexError, x.narrow, 1, 2, 5)
    assert_raises(IndexError, dt.ones(0).argmax)
    assert_raises(IndexError, dt.ones(0, 2).amax, 0)


def test_integer_division_by_zero():
    seed(13001)
    for dtype in (dt.int32, dt.int64):
        a = rand_tensor((5,), dtype, 1, 9)
        z = dt.tensor([1, 0, 2, 3, 4], dtype=dtype)
        assert_raises(ZeroDivisionError, lambda: a // z, match="zero")
        assert_raises(ZeroDivisionError, lambda: a % z)
        assert_raises(ZeroDivisionError, lambda: a // 0)
        assert_raises(ZeroDivisionError, lambda: a % 0)
        assert_raises(ZeroDivisionError, dt.floor_divide, a, dt.zeros(1, dtype=dtype))
        assert_raises(ZeroDivisionError, dt.remainder, a, 0)
        assert_raises(ZeroDivisionError, lambda: 7 // dt.zeros(3, dtype=dtype))

        def inplace():
            b = a.clone()
            b //= 0
        assert_raises(ZeroDivisionError, inplace)
        # true division of ints is float division: no error
        assert (a / 0).tolist() == [float("inf")] * 5
    # bool divisors are integers too
    assert_raises(ZeroDivisionError, lambda: dt.ones(2, dtype=dt.int64) // dt.tensor([True, False]))


def test_negative_integer_power():
    assert_raises(ValueError, lambda: dt.tensor([2, 3]) ** -1, match="negative")
    assert_raises(ValueError, dt.pow, dt.tensor([2]), dt.tensor([-2]))
    assert (dt.tensor([2.0]) ** -1).tolist() == [0.5]


def test_value_errors():
    assert_raises(ValueError, dt.clamp, dt.ones(2), match=("min", "max"))
    assert_raises(ValueError, dt.gelu, dt.ones(2), approximate="sigmoid", match="sigmoid")
    assert_raises(ValueError, dt.arange, 0, 5, 0, match="step")
    assert_raises(ValueError, dt.zeros, 2, -2, match="-2")
    assert_raises(ValueError, dt.ones(6).split, 0)
    assert_raises(ValueError, dt.ones(6).chunk, 0)
    assert_raises(ValueError, dt.ones(2).sum, (0, 0))
    assert_raises(ValueError, lambda: dt.ones(4)[::-1], match="step")
    assert_raises(ValueError, bool, dt.ones(2, 2), match="[2, 2]")
    assert_raises(ValueError, dt.ones(3).item)
    assert_raises(ValueError, dt.tensor, [[1], [2, 3]])


def test_not_implemented_and_device_errors():
    assert_raises(NotImplementedError, lambda: dt.ones(3)[[[0, 1]]], match="list")
    assert_raises(NotImplementedError, lambda: dt.ones(3)[True])
    assert_raises(RuntimeError, dt.zeros, 2, device="cuda", match="CUDA")
    assert_raises(RuntimeError, dt.ones(2).to, "cuda", match="cuda")
    assert_raises(ValueError, dt.device, "tpu")


def test_error_messages_name_the_op():
    e = assert_raises(dt.ShapeError, dt.atan2, dt.ones(2), dt.ones(3))
    assert "atan2" in str(e)
    e = assert_raises(TypeError, dt.sigmoid, 3)
    assert "sigmoid" in str(e)
    e = assert_raises(TypeError, dt.sum, dt.ones(2), bogus=True)
    assert "bogus" in str(e) and "sum" in str(e)
    e = assert_raises(TypeError, dt.narrow, dt.ones(2), 0, 0)
    assert "length" in str(e)
