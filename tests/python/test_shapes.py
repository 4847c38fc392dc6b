"""View and data-movement ops: values against a pure-Python reference, view aliasing,
strides, non-contiguous inputs, empty tensors."""
import dyntrace as dt
from testlib import (ALL_DTYPES, NAN, Ref, assert_equal, assert_raises, noncontig, np, require_numpy,
                     rand_tensor, seed)


def _flat(t):
    return Ref.of(t).values


def test_reshape_and_view():
    seed(7001)
    for dtype in ALL_DTYPES:
        x = rand_tensor((2, 3, 4), dtype)
        for shape in ((24,), (4, 6), (2, 12), (-1,), (3, -1), (2, 3, 2, 2), (1, 24, 1), (-1, 1)):
            y = x.reshape(shape)
            want_shape = list(shape)
            if -1 in want_shape:
                known = 1
                for s_ in want_shape:
                    known *= s_ if s_ != -1 else 1
                want_shape[want_shape.index(-1)] = 24 // known
            assert y.shape == tuple(want_shape)
            assert _flat(y) == _flat(x)
            assert x.view(*shape).shape == y.shape
            assert dt.reshape(x, shape).shape == y.shape
        assert x.view(24).data_ptr() == x.data_ptr()
    # view writes through
    x = dt.zeros(2, 6)
    v = x.view(3, 4)
    v[1, 1] = 5.0
    assert x[0, 5].item() == 5.0
    # reshape of a non-contiguous tensor copies when it must, view refuses
    t = dt.arange(12).reshape(3, 4).T
    r = t.reshape(12)
    assert r.tolist() == [0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11]
    assert_raises(dt.ShapeError, t.view, 12)
    # ... but a view of compatible dims of a non-contiguous tensor works
    assert t.view(2, 2, 3).shape == (2, 2, 3)
    assert dt.arange(6).reshape(2, 3)[:, :2].reshape(4).tolist() == [0, 1, 3, 4]
    assert dt.tensor(7.0).reshape(1, 1).shape == (1, 1)
    assert dt.ones(1, 1).reshape(()).shape == ()
    assert dt.zeros(0, 3).reshape(3, 0, 5).shape == (3, 0, 5)
    assert dt.zeros(0, 3).reshape(-1, 3).shape == (0, 3)


def test_flatten():
    seed(7002)
    x = rand_tensor((2, 3, 4, 5))
    assert x.flatten().shape == (120,)
    assert dt.flatten(x, 1).shape == (2, 60)
    assert x.flatten(1, 2).shape == (2, 12, 5)
    assert x.flatten(-2, -1).shape == (2, 3, 20)
    assert x.flatten(2, 2).shape == x.shape
    assert _flat(x.flatten(0, 2)) == _flat(x)
    assert dt.tensor(3.0).flatten().shape == (1,)
    t = x.transpose(0, 3)
    assert _flat(t.flatten()) == Ref.of(x).transpose((3, 1, 2, 0)).values
    assert_raises(ValueError, x.flatten, 2, 1)


def test_permute_transpose_swapaxes():
    seed(7003)
    for dtype in ALL_DTYPES:
        x = rand_tensor((2, 3, 4), dtype)
        for perm in ((0, 1, 2), (2, 0, 1), (1, 2, 0), (2, 1, 0), (-1, 0, 1)):
            y = x.permute(*perm)
            norm = tuple(p % 3 for p in perm)
            assert y.tolist() == Ref.of(x).transpose(norm).tolist()
            assert dt.permute(x, perm).tolist() == y.tolist()
            assert y.stride() == tuple(x.stride()[p] for p in norm)
        assert x.transpose(0, 2).tolist() == Ref.of(x).transpose((2, 1, 0)).tolist()
        assert dt.transpose(x, -1, -2).tolist() == Ref.of(x).transpose((0, 2, 1)).tolist()
        assert x.swapaxes(0, 1).tolist() == Ref.of(x).transpose((1, 0, 2)).tolist()
        assert dt.swapaxes(x, 1, 1).tolist() == x.tolist()
    x = dt.zeros(2, 3)
    x.T[2, 1] = 1.0
    assert x[1, 2].item() == 1.0
    assert_raises(ValueError, dt.ones(2, 3).permute, 0, 0)
    assert_raises(ValueError, dt.ones(2, 3).permute, 0)


def test_unsqueeze_squeeze():
    seed(7004)
    x = rand_tensor((3, 4))
    assert x.unsqueeze(0).shape == (1, 3, 4)
    assert x.unsqueeze(1).shape == (3, 1, 4)
    assert x.unsqueeze(2).shape == (3, 4, 1)
    assert x.unsqueeze(-1).shape == (3, 4, 1)
    assert x.unsqueeze(-3).shape == (1, 3, 4)
    assert _flat(dt.unsqueeze(x, 1)) == _flat(x)
    assert dt.tensor(1.0).unsqueeze(0).shape == (1,)
    y = rand_tensor((1, 3, 1, 4, 1))
    assert y.squeeze().shape == (3, 4)
    assert y.squeeze(0).shape == (3, 1, 4, 1)
    assert y.squeeze(1).shape == y.shape  # size != 1: unchanged
    assert y.squeeze(-1).shape == (1, 3, 1, 4)
    assert dt.squeeze(y, (0, 2)).shape == (3, 4, 1)
    assert _flat(y.squeeze()) == _flat(y)
    assert dt.ones(1, 1).squeeze().shape == ()
    assert_raises(IndexError, x.unsqueeze, 3)
    assert_raises(IndexError, y.squeeze, 5)


def test_expand_broadcast_to():
    seed(7005)
    for dtype in ALL_DTYPES:
        x = rand_tensor((3, 1), dtype)
        e = x.expand(3, 4)
        assert e.shape == (3, 4) and e.stride() == (1, 0)
        assert e.tolist() == [[r[0]] * 4 for r in x.tolist()]
        assert x.expand(2, 3, 4).shape == (2, 3, 4)
        assert x.expand(-1, 5).shape == (3, 5)
        assert x.expand((3, 2)).shape == (3, 2)
        assert dt.broadcast_to(x, (2, 3, 6)).tolist() == Ref.of(x).broadcast_to((2, 3, 6)).tolist()
        assert x.broadcast_to((3, 3)).data_ptr() == x.data_ptr()
    s = dt.tensor(4.0).expand(2, 2)
    assert s.tolist() == [[4.0, 4.0], [4.0, 4.0]]
    assert_raises(dt.ShapeError, dt.ones(3, 2).expand, 3, 4, match=("[3, 2]",))
    assert_raises(dt.ShapeError, dt.broadcast_to, dt.ones(3), (2, 4))


def test_narrow_select():
    seed(7006)
    x = rand_tensor((5, 6, 7))
    xs = x.tolist()
    assert x.narrow(0, 1, 3).tolist() == xs[1:4]
    assert dt.narrow(x, 2, 2, 4).tolist() == [[r[2:6] for r in m] for m in xs]
    assert x.narrow(-1, 0, 0).shape == (5, 6, 0)
    assert x.select(0, 2).tolist() == xs[2]
    assert dt.select(x, 1, -1).tolist() == [m[-1] for m in xs]
    assert x.select(2, 3).tolist() == [[r[3] for r in m] for m in xs]
    n = x.narrow(1, 2, 2)
    n.mul_(0)
    assert x[:, 2:4].abs().sum().item() == 0.0
    assert_raises(IndexError, x.narrow, 0, 4, 3)
    assert_raises(IndexError, x.select, 1, 6)
    assert_raises(IndexError, x.select, 3, 0)
    assert_raises(IndexError, dt.tensor(1.0).select, 0, 0)


def test_cat_concat():
    seed(7007)
    for dtype in ALL_DTYPES:
        a = rand_tensor((2, 3), dtype)
        b = rand_tensor((4, 3), dtype)
        c = rand_tensor((2, 5), dtype)
        assert dt.cat([a, b]).tolist() == a.tolist() + b.tolist()
        assert dt.cat((a, c), 1).tolist() == [x + y for x, y in zip(a.tolist(), c.tolist())]
        assert dt.concat([a, c], dim=-1).shape == (2, 8)
        assert dt.cat([a]).tolist() == a.tolist()
    # mixed dtypes promote; empties join; non-contiguous inputs
    r = dt.cat([dt.ones(2, dtype=dt.int32), dt.zeros(1, dtype=dt.float64)])
    assert r.dtype == dt.float64 and r.tolist() == [1.0, 1.0, 0.0]
    assert dt.cat([dt.ones(0, 3), dt.ones(2, 3)]).shape == (2, 3)
    t = noncontig((3, 4), dt.float32, "transposed")
    s = noncontig((3, 4), dt.float32, "strided")
    assert dt.cat([t, s], 1).tolist() == [x + y for x, y in zip(t.tolist(), s.tolist())]
    assert_raises(dt.ShapeError, dt.cat, [dt.ones(2, 3), dt.ones(2, 4)], match=("[2, 3]", "[2, 4]"))
    assert_raises(ValueError, dt.cat, [])
    assert_raises(TypeError, dt.cat, [dt.ones(2), 3])


def test_stack():
    seed(7008)
    a = rand_tensor((2, 3))
    b = rand_tensor((2, 3))
    assert dt.stack([a, b]).tolist() == [a.tolist(), b.tolist()]
    assert dt.stack([a, b], 1).tolist() == [[x, y] for x, y in zip(a.tolist(), b.tolist())]
    r = dt.stack((a, b), dim=-1)
    assert r.shape == (2, 3, 2)
    assert r.tolist() == [[[p, q] for p, q in zip(x, y)] for x, y in zip(a.tolist(), b.tolist())]
    assert dt.stack([dt.tensor(1.0), dt.tensor(2.0)]).tolist() == [1.0, 2.0]
    assert_raises(dt.ShapeError, dt.stack, [dt.ones(2), dt.ones(3)], match=("[2]", "[3]"))
    assert_raises(ValueError, dt.stack, [])


def test_split_chunk():
    seed(7009)
    x = rand_tensor((10, 4))
    xs = x.tolist()
    parts = x.split(3)
    assert isinstance(parts, tuple) and [p.shape[0] for p in parts] == [3, 3, 3, 1]
    assert [r for p in parts for r in p.tolist()] == xs
    parts = dt.split(x, [2, 5, 3])
    assert [p.tolist() for p in parts] == [xs[:2], xs[2:7], xs[7:]]
    parts = x.split(3, dim=1)
    assert [p.shape for p in parts] == [(10, 3), (10, 1)]
    assert_raises(dt.ShapeError, x.split, [2, 2])
    chunks = x.chunk(3)
    assert [c.shape[0] for c in chunks] == [4, 4, 2]
    assert [c.shape[1] for c in dt.chunk(x, 2, 1)] == [2, 2]
    assert [c.shape[0] for c in dt.arange(5).chunk(5)] == [1] * 5
    assert [c.shape[0] for c in dt.arange(6).chunk(4)] == [2, 2, 2]
    # splits are views
    x.split(5)[1][0, 0] = 99.0
    assert x[5, 0].item() == 99.0


def test_contiguous_clone():
    seed(7010)
    x = noncontig((4, 5), dt.float32, "transposed")
    c = x.contiguous()
    assert c.is_contiguous() and c.tolist() == x.tolist()
    assert c.stride() == (5, 1)
    y = rand_tensor((3, 3))
    assert y.contiguous() is y or y.contiguous().data_ptr() == y.data_ptr()
    z = y.clone()
    z[0, 0] = 100.0
    assert y[0, 0].item() != 100.0
    assert dt.clone(x).tolist() == x.tolist()
    e = x[:, ::2].clone()
    assert e.tolist() == [r[::2] for r in x.tolist()]


def test_strides_and_contiguity():
    x = dt.zeros(2, 3, 4)
    assert x.stride() == (12, 4, 1) and x.is_contiguous()
    assert x.stride(1) == 4 and x.stride(-1) == 1
    assert x.transpose(0, 2).stride() == (1, 4, 12)
    assert not x.transpose(0, 2).is_contiguous()
    assert x[:, ::2].stride() == (12, 8, 1)
    assert x[:, 1].stride() == (12, 1)
    assert x.unsqueeze(1).is_contiguous()
    assert x[:, :, :1].is_contiguous() is False
    assert x.expand(2, 3, 4).is_contiguous()


def test_shape_ops_on_empty_and_large():
    e = dt.zeros(0, 4)
    assert e.T.shape == (4, 0)
    assert e.unsqueeze(0).shape == (1, 0, 4)
    assert dt.stack([e, e]).shape == (2, 0, 4)
    assert e.split(2, 1)[0].shape == (0, 2)
    big = dt.arange(5000).reshape(50, 100)
    assert big.T.contiguous().reshape(-1)[:3].tolist() == [0, 100, 200]
    assert big.permute(1, 0).flatten()[-1].item() == 4999
    if np is not None:
        a = np.arange(5000).reshape(50, 100)
        assert big.T.tolist() == a.T.tolist()
        assert dt.cat([big, big], 1).tolist() == np.concatenate([a, a], 1).tolist()
    else:
        assert big.T.tolist() == Ref.of(big).transpose((1, 0)).tolist()
    assert NAN != NAN  # the reference helpers rely on this


def test_meshgrid_broadcast_tensors_repeat_interleave():
    require_numpy()
    a, b = dt.arange(3.0), dt.tensor([10.0, 20.0])
    for indexing in ("ij", "xy"):
        got = dt.meshgrid(a, b, indexing=indexing)
        want = np.meshgrid(np.arange(3.0), np.array([10.0, 20.0]), indexing=indexing)
        assert isinstance(got, tuple) and [g.tolist() for g in got] == [w.tolist() for w in want], indexing
    assert [g.tolist() for g in dt.meshgrid([a, b])] == [w.tolist() for w in np.meshgrid(np.arange(3.0), [10.0, 20.0],
                                                                                        indexing="ij")]
    three = dt.meshgrid(a, b, dt.tensor(5.0), indexing="xy")
    assert [tuple(g.shape) for g in three] == [(2, 3, 1)] * 3
    assert_raises(RuntimeError, dt.meshgrid, dt.ones(2, 2), a, match="Expected 0D or 1D tensor")
    assert_raises(ValueError, dt.meshgrid, a, b, indexing="yx", match="indexing must be one of")
    x, y = dt.broadcast_tensors(dt.arange(3).reshape(3, 1), dt.arange(4))
    wx, wy = np.broadcast_arrays(np.arange(3).reshape(3, 1), np.arange(4))
    assert x.tolist() == wx.tolist() and y.tolist() == wy.tolist()
    assert_raises(RuntimeError, dt.broadcast_tensors, dt.ones(2), dt.ones(3), match="do not broadcast")
    m = dt.arange(6).reshape(2, 3)
    assert dt.repeat_interleave(m, 2).tolist() == np.repeat(np.arange(6), 2).tolist()
    assert m.repeat_interleave(3, dim=0).tolist() == np.repeat(np.arange(6).reshape(2, 3), 3, axis=0).tolist()
    assert m.repeat_interleave(2, dim=-1).tolist() == np.repeat(np.arange(6).reshape(2, 3), 2, axis=1).tolist()
    assert m.repeat_interleave(0, dim=1).shape == (2, 0)
    assert_raises(RuntimeError, dt.repeat_interleave, m, -1, match="repeats can not be negative")
