"""The Python face of Tensor: operators, repr, tolist/item, conversions, len/iter, attributes,
casts, and in-place semantics (identity kept, views writing through to their base)."""
import math

import dyntrace as dt
from jitlib import fresh_copy
from testlib import (ALL_DTYPES, FLOAT_DTYPES, INT_DTYPES, NAN, assert_close, assert_equal,
                     assert_raises, rand_tensor, ref_map, seed)


def test_attributes():
    x = dt.zeros(2, 3, 4)
    assert x.shape == (2, 3, 4) and isinstance(x.shape, tuple)
    assert x.size() == (2, 3, 4) and x.size(1) == 3 and x.size(-1) == 4
    assert x.ndim == 3 and x.dim() == 3 and x.numel() == 24
    assert x.dtype == dt.float32 and x.device == dt.device("cpu")
    assert x.element_size() == 4 and x.is_floating_point()
    assert not dt.zeros(1, dtype=dt.int32).is_floating_point()
    assert dt.tensor(1.0).shape == () and dt.tensor(1.0).ndim == 0 and dt.tensor(1.0).numel() == 1
    assert isinstance(x, dt.Tensor) and dt.is_tensor(x) and not dt.is_tensor([1])
    assert_raises(IndexError, x.size, 3)


def test_T_and_mT():
    seed(11001)
    x = rand_tensor((2, 3, 4))
    xs = x.tolist()
    assert x.T.shape == (4, 3, 2)
    assert x.T.tolist() == [[[xs[i][j][k] for i in range(2)] for j in range(3)] for k in range(4)]
    assert x.mT.shape == (2, 4, 3)
    assert x.mT.tolist() == [[[m[j][k] for j in range(3)] for k in range(4)] for m in xs]
    m = rand_tensor((3, 5))
    assert m.T.tolist() == m.mT.tolist() == [list(c) for c in zip(*m.tolist())]
    assert dt.arange(3).T.tolist() == [0, 1, 2]
    assert_raises(ValueError, lambda: dt.arange(3).mT)


def test_repr_matches_pytorch_style():
    assert repr(dt.tensor([1.0, 2.0])) == "tensor([1., 2.])"
    assert repr(dt.tensor([1.5, -2.25])) == "tensor([ 1.5000, -2.2500])"
    assert repr(dt.tensor(2.5)) == "tensor(2.5000)"
    assert repr(dt.tensor([1, 2, 3])) == "tensor([1, 2, 3])"
    assert repr(dt.tensor([True, False])) == "tensor([ True, False])"
    assert repr(dt.tensor([1, 2], dtype=dt.int32)) == "tensor([1, 2], dtype=dyntrace.int32)"
    assert repr(dt.tensor([1.0], dtype=dt.float64)) == "tensor([1.], dtype=dyntrace.float64)"
    assert repr(dt.tensor([1.0], dtype=dt.float16)) == "tensor([1.], dtype=dyntrace.float16)"
    assert repr(dt.zeros(0, 3)) == "tensor([], size=(0, 3))"
    assert repr(dt.tensor([[1, 2], [3, 4]])) == "tensor([[1, 2],\n        [3, 4]])"
    assert repr(dt.tensor([NAN, float("inf"), -1.0])) == "tensor([nan, inf, -1.])"
    r = repr(dt.arange(2000))
    assert r.startswith("tensor([   0,    1,    2,") and "..." in r and r.endswith("1999])")
    assert str(dt.tensor([1.0])) == repr(dt.tensor([1.0]))


def test_tolist_and_item_types():
    for dtype, pytype in ((dt.bool, bool), (dt.int32, int), (dt.int64, int), (dt.float16, float),
                          (dt.float32, float), (dt.float64, float)):
        x = dt.ones(2, 2, dtype=dtype)
        lst = x.tolist()
        assert isinstance(lst, list) and isinstance(lst[0], list)
        assert type(lst[0][0]) is pytype, (dtype, type(lst[0][0]))
        assert type(x[0, 0].item()) is pytype
    assert dt.tensor(3).tolist() == 3
    assert dt.tensor([[]]).tolist() == [[]]
    assert dt.tensor([2 ** 40]).item() == 2 ** 40
    assert dt.tensor([0.1], dtype=dt.float64).item() == 0.1
    assert dt.tensor([0.1]).item() == float(dt.tensor([0.1]).tolist()[0])
    assert dt.ones(1, 1, 1).item() == 1.0
    assert_raises(ValueError, dt.ones(2).item)
    assert_raises(ValueError, dt.ones(0).item)


def test_bool_float_int_index_conversions():
    assert bool(dt.tensor([1.0])) is True and bool(dt.tensor(0)) is False
    assert float(dt.tensor([[2.5]])) == 2.5 and float(dt.tensor(3)) == 3.0
    assert int(dt.tensor(7.9)) == 7 and int(dt.tensor(-7.9)) == -7 and int(dt.tensor([True])) == 1
    assert_raises(ValueError, bool, dt.ones(2), match="ambiguous")
    assert_raises(ValueError, float, dt.ones(3))
    assert_raises(ValueError, int, dt.tensor(float("nan")))
    assert_raises(OverflowError, int, dt.tensor(float("inf")))
    assert [10, 20, 30][dt.tensor(1)] == 20
    assert range(10)[dt.tensor(3, dtype=dt.int32)] == 3
    assert_raises(TypeError, lambda: [1, 2][dt.tensor(1.0)])
    assert math.isclose(math.sqrt(dt.tensor(4.0)), 2.0)
    if dt.tensor([0.0]):
        raise AssertionError("a zero tensor is falsy")


def test_len_iter():
    seed(11002)
    x = rand_tensor((4, 2))
    assert len(x) == 4
    assert [r.tolist() for r in x] == x.tolist()
    assert sum(1 for _ in dt.zeros(7)) == 7
    assert_raises(TypeError, len, dt.tensor(1.0))
    assert_raises(TypeError, iter, dt.tensor(1.0))
    a, b = dt.tensor([1, 2])
    assert a.item() == 1 and b.item() == 2


def test_operators_all_dtypes():
    seed(11003)
    for dtype in INT_DTYPES + FLOAT_DTYPES:
        a = rand_tensor((3, 4), dtype, 1, 5)
        b = rand_tensor((4,), dtype, 1, 5)
        assert_close(a + b, ref_map(lambda x, y: x + y, a, b), dtype=dtype)
        assert_close(a - b, ref_map(lambda x, y: x - y, a, b), dtype=dtype)
        assert_close(a * b, ref_map(lambda x, y: x * y, a, b), dtype=dtype)
        assert_close(a / b, ref_map(lambda x, y: x / y, a, b))
        assert_close(a // b, ref_map(lambda x, y: x // y, a, b), dtype=dtype)
        assert_close(a % b, ref_map(lambda x, y: x % y, a, b), dtype=dtype)
        assert_close(a ** 2, ref_map(lambda x: x ** 2, a), dtype=dtype)
        assert_close(-a, ref_map(lambda x: -x, a), dtype=dtype)
        assert_close(abs(-a), ref_map(abs, a), dtype=dtype)
        assert (+a) is a
        for op in ("__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__"):
            r = getattr(a, op)(b)
            assert r.dtype == dt.bool
            assert_equal(r, ref_map(lambda x, y: getattr(x, op)(y), a, b))


def test_bool_operators_and_invert():
    a = dt.tensor([True, False, True])
    b = dt.tensor([False, False, True])
    assert (a & b).tolist() == [False, False, True]
    assert (a | b).tolist() == [True, False, True]
    assert (a ^ b).tolist() == [True, False, False]
    assert (~a).tolist() == [False, True, False]
    assert (a & True).tolist() == [True, False, True]
    assert (False | a).tolist() == [True, False, True]
    assert_raises(TypeError, lambda: ~dt.tensor([1, 2]), match="int64")
    assert_raises(TypeError, lambda: -a)


def test_comparison_with_none_and_foreign_objects():
    x = dt.ones(2)
    assert (x == None) is False  # noqa: E711
    assert (x != None) is True  # noqa: E711
    assert_raises(TypeError, lambda: x < "a")
    assert_raises(TypeError, lambda: x + "a")
    assert_raises(TypeError, lambda: x + [1, 2])
    assert x in [x] and hash(x) == hash(x)
    assert len({x, dt.ones(2)}) == 2  # hashed by identity


def test_inplace_operators_keep_identity():
    seed(11004)
    for dtype in FLOAT_DTYPES:
        x = rand_tensor((3, 4), dtype, 1, 3)
        ref = x.tolist()
        ident = id(x)
        x += 1
        x -= 0.5
        x *= 2
        x /= 4
        x //= 0.25
        x %= 3
        x **= 2
        assert id(x) == ident and x.dtype == dtype
        want = ref_map(lambda v: ((((v + 1 - 0.5) * 2 / 4) // 0.25) % 3) ** 2, ref)
        assert_close(x, want, atol=5e-2 if dtype == dt.float16 else None, rtol=5e-2 if dtype == dt.float16 else None)
    y = dt.arange(6)
    y += y
    assert y.tolist() == [0, 2, 4, 6, 8, 10]
    y //= 3
    assert y.tolist() == [0, 0, 1, 2, 2, 3]
    y %= 2
    assert y.tolist() == [0, 0, 1, 0, 0, 1]


def test_inplace_on_views_writes_through():
    base = dt.zeros(4, 6)
    row = base[1]
    row += 1
    col = base[:, 2]
    col *= 0
    col += 5
    strided = base[::2, ::3]
    strided.add_(10)
    t = base.T
    t[0, 3] = -1.0
    want = [[0.0] * 6 for _ in range(4)]
    for j in range(6):
        want[1][j] += 1
    for i in range(4):
        want[i][2] = 5.0
    for i in (0, 2):
        for j in (0, 3):
            want[i][j] += 10
    want[3][0] = -1.0
    assert base.tolist() == want
    v = base.view(24)
    v.mul_(2)
    assert base[1, 1].item() == 2.0
    # method forms return self
    r = base.add_(1)
    assert r is base
    assert base.mul_(dt.ones(6)) is base
    assert base.clamp_(0, 3) is base and base.amax().item() == 3.0


def test_inplace_broadcast_rules():
    x = dt.zeros(2, 3)
    x += dt.tensor([1.0, 2.0, 3.0])
    assert x.tolist() == [[1.0, 2.0, 3.0]] * 2
    y = dt.zeros(3)

    def grow():
        y.add_(dt.ones(2, 3))
    assert_raises(dt.ShapeError, grow, match=("[3]", "[2, 3]"))

    e = dt.zeros(1, 3).expand(2, 3)

    def write_expanded():
        e.add_(1)
    assert_raises(ValueError, write_expanded)


def test_casts_and_to():
    seed(11005)
    x = rand_tensor((5,), dt.float64, -3, 3)
    xs = x.tolist()
    assert x.float().dtype == dt.float32
    assert x.half().dtype == dt.float16
    assert x.int().tolist() == [int(v) for v in xs]  # truncation toward zero
    assert x.long().tolist() == [int(v) for v in xs]
    assert x.bool().tolist() == [v != 0 for v in xs]
    assert x.double() is x  # a cast to the own dtype is the tensor itself, as in PyTorch
    assert dt.ones(2, dtype=dt.int32).int().dtype == dt.int32
    assert x.to(dt.float32).dtype == dt.float32
    assert x.to(dtype=dt.int64).tolist() == [int(v) for v in xs]
    assert x.to(dt.float64) is x
    assert x.to("cpu") is x
    assert x.to(dt.zeros(1, dtype=dt.int32)).dtype == dt.int32
    c = x.to(dt.float64, copy=True)
    assert c is not x and c.tolist() == xs
    assert x.cpu() is x
    assert dt.tensor([1.7]).to(dt.float16).tolist() == [1.7001953125]
    assert dt.tensor([True, False]).float().tolist() == [1.0, 0.0]
    assert_raises(RuntimeError, x.to, "cuda")
    assert_raises(TypeError, x.to, 5)


def test_clone_independent_and_contiguous():
    seed(11006)
    for dtype in ALL_DTYPES:
        x = rand_tensor((3, 4), dtype).T
        xs = x.tolist()
        c = x.clone()
        # like PyTorch's preserve_format: a dense transposed input keeps its strides
        assert c.tolist() == xs and c.dtype == dtype and c.stride() == x.stride()
        c[0] = c[1]
        c[1, 0] = True if dtype == dt.bool else 100
        assert x.tolist() == xs


def test_methods_exist_for_ops():
    x = dt.ones(2, 3)
    for name in ("exp", "log", "sum", "mean", "amax", "softmax", "reshape", "permute", "transpose",
                 "unsqueeze", "squeeze", "flatten", "expand", "narrow", "select", "split", "chunk",
                 "matmul", "clamp", "clip", "abs", "add_", "mul_", "clamp_"):
        assert callable(getattr(x, name)), name
    assert dt.add.__name__ == "add" and "Tensor" in dt.add.__doc__
    assert x.add(1).tolist() == [[2.0] * 3] * 2
    assert dt.add(x, other=2).tolist() == [[3.0] * 3] * 2
    assert_raises(TypeError, dt.add, x)
    assert_raises(TypeError, dt.add, x, 1, 2)
    assert_raises(TypeError, dt.add, x, bogus=1)


def test_legacy_type_names_and_type_casts():
    # x.type() names PyTorch's legacy class (HF code calls attn_weights.type(value.dtype));
    # x.type(dtype) and x.type("torch.LongTensor") cast, and a cast to the tensor's own dtype is
    # the tensor itself, as .float() is. The same answers under dt.jit, without a break.
    x = dt.tensor([1.5, -2.5])
    assert x.type() == "dyntrace.FloatTensor" and dt.zeros(2, dtype=dt.int64).type() == "dyntrace.LongTensor"
    assert dt.zeros(1, dtype=dt.bfloat16).type() == "dyntrace.BFloat16Tensor"
    assert x.type(dt.float32) is x
    y = x.type(dt.int32)
    assert y.dtype == dt.int32 and y.tolist() == [1, -2]
    assert x.type("torch.DoubleTensor").dtype == dt.float64 and x.type("dyntrace.HalfTensor").dtype == dt.float16
    assert_raises(ValueError, x.type, "torch.NoSuchTensor", match="invalid type: 'torch.NoSuchTensor'")
    assert_raises(TypeError, x.type, 3, match="must be a dyntrace dtype")

    def f(a, b):
        return a.type(b.dtype) * 2, a.type(), a.type("torch.LongTensor")

    before = dt.stats()["graph_breaks"]
    got, want = dt.jit(fresh_copy(f))(x, y), f(x, y)
    assert got[0].dtype == want[0].dtype and got[0].tolist() == want[0].tolist()
    assert got[1] == want[1] and got[2].tolist() == want[2].tolist() and got[2].dtype == dt.int64
    assert dt.stats()["graph_breaks"] == before
