"""conv1d/conv2d, max_pool2d, avg_pool2d, adaptive_avg_pool2d, pad and interpolate against
direct numpy loops (float64, so the comparison is at 1e-12: a conv output sums C*kh*kw products
of O(1) values, ~100 terms, far below that), and under dt.jit (eager and cpu backends) without
graph breaks."""
import itertools

import dyntrace as dt
import dyntrace.nn.functional as F
from cpulib import check_traced_and_compiled
from jitlib import Call
from testlib import assert_close, assert_raises, np, rand_tensor, require_numpy, seed

TOL64 = dict(rtol=1e-12, atol=1e-12)


def _np(t):
    return np.array(t.tolist(), dtype=np.float64)


def _ref_conv2d(x, w, b, stride, pad, dilation, groups):
    """Direct loops over the zero-padded input; pad is ((top, bottom), (left, right))."""
    n, c, h, wd = x.shape
    cout, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), pad[0], pad[1]))
    oh = (xp.shape[2] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (xp.shape[3] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, cout, oh, ow))
    per = cout // groups
    for o in range(cout):
        g = o // per
        for i, j in itertools.product(range(oh), range(ow)):
            patch = xp[:, g * cg:(g + 1) * cg, i * stride[0]:i * stride[0] + dilation[0] * (kh - 1) + 1:dilation[0],
                       j * stride[1]:j * stride[1] + dilation[1] * (kw - 1) + 1:dilation[1]]
            out[:, o, i, j] = (patch * w[o]).sum(axis=(1, 2, 3))
    return out + (0 if b is None else b[None, :, None, None])


def test_conv2d_strides_padding_dilation_groups():
    require_numpy()
    seed(1921)
    x = rand_tensor((2, 4, 7, 6), dt.float64)
    for (cout, kh, kw), stride, padding, dilation, groups in (
            ((6, 3, 3), 1, 0, 1, 1), ((6, 3, 2), (2, 1), 1, (1, 2), 2), ((4, 1, 1), 2, 0, 1, 4),
            ((3, 2, 2), 1, "same", 1, 1), ((3, 3, 3), 1, "same", 2, 1), ((3, 3, 3), 1, "valid", 1, 1)):
        w = rand_tensor((cout, 4 // groups, kh, kw), dt.float64)
        b = rand_tensor((cout,), dt.float64)
        got = F.conv2d(x, w, b, stride=stride, padding=padding, dilation=dilation, groups=groups)
        st = stride if isinstance(stride, tuple) else (stride, stride)
        dl = dilation if isinstance(dilation, tuple) else (dilation, dilation)
        if padding == "same":
            tot = [dl[0] * (kh - 1), dl[1] * (kw - 1)]
            pad = ((tot[0] // 2, tot[0] - tot[0] // 2), (tot[1] // 2, tot[1] - tot[1] // 2))
        else:
            p = 0 if padding == "valid" else padding
            pad = ((p, p), (p, p))
        want = _ref_conv2d(_np(x), _np(w), _np(b), st, pad, dl, groups)
        assert_close(got, want, msg=str((cout, kh, kw, stride, padding, dilation, groups)), **TOL64)
        if padding == "same":
            assert got.shape[2:] == x.shape[2:]
    assert_close(dt.conv2d(x[0], w, b, padding=1), _ref_conv2d(_np(x)[:1], _np(w), _np(b), (1, 1), ((1, 1),) * 2,
                                                                (1, 1), 1)[0], **TOL64)   # unbatched


def _ref_conv2d_input_grad(g, w, x_shape, stride, pad, dilation, groups):
    """The adjoint of _ref_conv2d in x: each output gradient spread back over its patch."""
    n, c, h, wd = x_shape
    cout, cg, kh, kw = w.shape
    xp = np.zeros((n, c, h + pad[0][0] + pad[0][1], wd + pad[1][0] + pad[1][1]))
    per = cout // groups
    for o in range(cout):
        grp = o // per
        for i, j in itertools.product(range(g.shape[2]), range(g.shape[3])):
            xp[:, grp * cg:(grp + 1) * cg, i * stride[0]:i * stride[0] + dilation[0] * (kh - 1) + 1:dilation[0],
               j * stride[1]:j * stride[1] + dilation[1] * (kw - 1) + 1:dilation[1]] += \
                w[o][None] * g[:, o, i, j][:, None, None, None]
    return xp[:, :, pad[0][0]:pad[0][0] + h, pad[1][0]:pad[1][0] + wd]


def test_conv2d_input_gradient_against_numpy_eagerly_and_compiled():
    # The input gradient is _col2im of W^T G: checked against the adjoint written as loops, in
    # float64 (sums of ~100 products of O(1) values: 1e-12), eagerly and with the loss compiled
    # by the cpu backend (its backward graph holds the _col2im node).
    require_numpy()
    seed(1925)
    x = rand_tensor((2, 4, 7, 6), dt.float64)
    for (cout, kh, kw), stride, pad, dilation, groups in (
            ((6, 3, 3), (2, 2), ((1, 1), (1, 1)), (1, 1), 1), ((6, 3, 2), (2, 1), ((2, 2), (0, 0)), (1, 2), 2),
            ((3, 2, 2), (1, 1), ((0, 1), (0, 1)), (1, 1), 1), ((4, 3, 3), (1, 2), ((0, 0), (0, 0)), (2, 1), 4)):
        w = rand_tensor((cout, 4 // groups, kh, kw), dt.float64)
        padding = "same" if pad == ((0, 1), (0, 1)) else (pad[0][0], pad[1][0])

        def loss(x, w, g):
            return (F.conv2d(x, w, stride=stride, padding=padding, dilation=dilation, groups=groups) * g).sum()

        out_shape = F.conv2d(x, w, stride=stride, padding=padding, dilation=dilation, groups=groups).shape
        g = rand_tensor(tuple(out_shape), dt.float64)
        want = _ref_conv2d_input_grad(_np(g), _np(w), tuple(x.shape), stride, pad, dilation, groups)
        for run in (loss, dt.jit(loss, backend="cpu")):
            leaf = x.clone().requires_grad_()
            run(leaf, w, g).backward()
            assert_close(leaf.grad, want, msg=str((cout, kh, kw, stride, pad, dilation, groups)), **TOL64)


def test_conv1d():
    require_numpy()
    seed(1922)
    x, w, b = rand_tensor((2, 4, 9), dt.float64), rand_tensor((6, 2, 3), dt.float64), rand_tensor((6,), dt.float64)
    got = F.conv1d(x, w, b, stride=2, padding=2, dilation=2, groups=2)
    want = _ref_conv2d(_np(x)[:, :, None], _np(w)[:, :, None], _np(b), (1, 2), ((0, 0), (2, 2)), (1, 2), 2)[:, :, 0]
    assert_close(got, want, **TOL64)
    assert F.conv1d(x, rand_tensor((3, 4, 4), dt.float64), padding="same").shape == (2, 3, 9)


def test_conv_errors():
    x = dt.randn(2, 4, 5, 5)
    assert_raises(RuntimeError, F.conv2d, x, dt.randn(3, 3, 3, 3), match=("groups=1", "[3, 3, 3, 3]", "4 channels"))
    assert_raises(RuntimeError, F.conv2d, x, dt.randn(3, 4, 6, 6), match="too small")
    assert_raises(RuntimeError, F.conv2d, dt.randn(5, 5), dt.randn(3, 4, 3, 3), match="[5, 5]")
    assert_raises(ValueError, F.conv2d, x, dt.randn(3, 4, 3, 3), stride=2, padding="same", match="strided")
    assert_raises(ValueError, F.conv2d, x, dt.randn(3, 4, 3, 3), padding="full", match="full")
    assert_raises(RuntimeError, F.conv2d, x, dt.randn(3, 4, 3, 3, dtype=dt.float64), match=("float32", "float64"))
    assert_raises(RuntimeError, F.conv2d, x, dt.randn(3, 4, 3, 3), dt.randn(4), match="[4]")


def _windows(x, k, s, p, d, ceil_mode, fill):
    """Every pooling window of x [N, C, H, W] as an array [N, C, OH, OW, k*k] (padding = fill, and
    windows cut off at the padded input's end as PyTorch's ceil_mode does)."""
    n, c, h, w = x.shape
    sizes = []
    for size in (h, w):
        span = size + 2 * p - d * (k - 1) - 1
        o = (-(-span // s) if ceil_mode else span // s) + 1
        if ceil_mode and (o - 1) * s >= size + p:
            o -= 1
        sizes.append(o)
    big = np.full((n, c, h + 2 * p + k * d * 2, w + 2 * p + k * d * 2), np.nan)
    big[:, :, :h + 2 * p, :w + 2 * p] = fill
    big[:, :, p:p + h, p:p + w] = x
    out = np.empty((n, c, sizes[0], sizes[1], k * k))
    for i, j in itertools.product(range(sizes[0]), range(sizes[1])):
        win = big[:, :, i * s:i * s + d * (k - 1) + 1:d, j * s:j * s + d * (k - 1) + 1:d]
        out[:, :, i, j] = win.reshape(n, c, -1)
    return out


def test_pools():
    require_numpy()
    seed(1923)
    x = rand_tensor((2, 3, 7, 6), dt.float64)
    xn = _np(x)
    for k, s, p, d, ceil_mode in ((2, 2, 0, 1, False), (3, 2, 1, 1, True), (3, 1, 1, 2, False), (2, 3, 1, 1, True)):
        win = _windows(xn, k, s, p, d, ceil_mode, -np.inf)
        assert_close(F.max_pool2d(x, k, s, p, d, ceil_mode), np.nanmax(win, -1), **TOL64)
    for k, s, p, ceil_mode, include in ((2, 2, 0, False, True), (3, 2, 1, True, True), (3, 2, 1, True, False),
                                        (3, 1, 1, False, False)):
        total = np.nansum(_windows(xn, k, s, p, 1, ceil_mode, 0.0), -1)
        inside = np.nansum(_windows(np.ones_like(xn), k, s, p, 1, ceil_mode, 1.0 if include else 0.0), -1)
        assert_close(F.avg_pool2d(x, k, s, p, ceil_mode, include), total / inside, **TOL64)
    assert_close(F.avg_pool2d(x, 2, divisor_override=3), np.nansum(_windows(xn, 2, 2, 0, 1, False, 0.0), -1) / 3,
                 **TOL64)
    for out in ((3, 2), (7, 6), (4, 4), 1):
        oh, ow = out if isinstance(out, tuple) else (out, out)
        want = np.empty((2, 3, oh, ow))
        for i, j in itertools.product(range(oh), range(ow)):
            h0, h1 = i * 7 // oh, -(-(i + 1) * 7 // oh)
            w0, w1 = j * 6 // ow, -(-(j + 1) * 6 // ow)
            want[:, :, i, j] = xn[:, :, h0:h1, w0:w1].mean(axis=(2, 3))
        assert_close(F.adaptive_avg_pool2d(x, out), want, **TOL64)
    assert F.max_pool2d(x[0], 2).shape == (3, 3, 3)                     # unbatched
    assert_raises(RuntimeError, F.max_pool2d, x, 2, 2, 2, match="half")
    assert_raises(NotImplementedError, F.max_pool2d, x, 2, return_indices=True)


def test_pad():
    require_numpy()
    x = rand_tensor((2, 3, 4, 5), dt.float64)
    xn = _np(x)
    assert_close(F.pad(x, (1, 2)), np.pad(xn, ((0, 0),) * 3 + ((1, 2),)), **TOL64)
    assert_close(F.pad(x, (1, 2, 0, 3), value=1.5), np.pad(xn, ((0, 0),) * 2 + ((0, 3), (1, 2)), constant_values=1.5),
                 **TOL64)
    assert_close(F.pad(x, (-1, 2, 1, -2)), np.pad(xn, ((0, 0),) * 2 + ((1, 0), (0, 2)))[:, :, :-2, 1:], **TOL64)
    for mode, np_mode in (("reflect", "reflect"), ("replicate", "edge"), ("circular", "wrap")):
        assert_close(F.pad(x, (2, 3, 3, 1), mode=mode), np.pad(xn, ((0, 0),) * 2 + ((3, 1), (2, 3)), mode=np_mode),
                     **TOL64)
        assert_close(F.pad(x[0], (1, 1), mode=mode), np.pad(xn[0], ((0, 0),) * 2 + ((1, 1),), mode=np_mode), **TOL64)
    assert F.pad(dt.tensor([1, 2], dtype=dt.int64), (1, 0)).tolist() == [0, 1, 2]
    assert_raises(RuntimeError, F.pad, x, (5, 0), mode="reflect", match=("(5, 0)", "[2, 3, 4, 5]"))
    assert_raises(ValueError, F.pad, x, (1, 2, 3), match="divisible by 2")
    assert_raises(NotImplementedError, F.pad, x, (1, 1), mode="symmetric", match="symmetric")
    assert_raises(RuntimeError, F.pad, x, (6, 0), mode="circular", match="(6, 0)")


def _ref_linear_1d(x, axis, out, align_corners, scale=None):
    n = x.shape[axis]
    dst = np.arange(out, dtype=np.float64)
    if align_corners:
        src = dst * ((n - 1) / (out - 1) if out > 1 else 0.0)
    else:
        src = np.maximum((dst + 0.5) * (n / out if scale is None else scale) - 0.5, 0)
    i0 = np.minimum(np.floor(src).astype(int), n - 1)
    i1 = np.minimum(i0 + 1, n - 1)
    lam = (src - np.floor(src)).reshape([-1 if a == axis else 1 for a in range(x.ndim)])
    return np.take(x, i0, axis) * (1 - lam) + np.take(x, i1, axis) * lam


def test_interpolate():
    require_numpy()
    x = rand_tensor((2, 3, 4, 5), dt.float64)
    xn = _np(x)
    assert_close(F.interpolate(x, scale_factor=2), xn.repeat(2, 2).repeat(2, 3), **TOL64)
    idx_h = np.minimum(np.floor(np.arange(7, dtype=np.float32) * np.float32(4 / 7)).astype(int), 3)
    idx_w = np.minimum(np.floor(np.arange(3, dtype=np.float32) * np.float32(5 / 3)).astype(int), 4)
    assert_close(F.interpolate(x, size=(7, 3)), xn[:, :, idx_h][:, :, :, idx_w], **TOL64)
    for align in (True, False):
        want = _ref_linear_1d(_ref_linear_1d(xn, 2, 7, align), 3, 9, align)
        assert_close(F.interpolate(x, size=(7, 9), mode="bilinear", align_corners=align), want, rtol=1e-12, atol=1e-12)
    want = _ref_linear_1d(_ref_linear_1d(xn, 2, 6, False, 1 / 1.5), 3, 7, False, 1 / 1.5)
    assert_close(F.interpolate(x, scale_factor=1.5, mode="bilinear"), want, **TOL64)
    assert_close(F.interpolate(x[:, :, 0], size=8, mode="linear"), _ref_linear_1d(xn[:, :, 0], 2, 8, False),
                 **TOL64)
    assert_raises(ValueError, F.interpolate, x, match="size or scale_factor")
    assert_raises(NotImplementedError, F.interpolate, x, size=3, mode="bicubic", match="bicubic")
    assert_raises(ValueError, F.interpolate, x, size=3, align_corners=True, match="align_corners")


def cnn(x, w, b, w1):
    h = F.conv2d(F.pad(x, (1, 1, 1, 1), mode="reflect"), w, b, padding=1).relu()
    h = F.max_pool2d(h, 2) + F.avg_pool2d(h, 2)
    h = F.interpolate(h, scale_factor=2, mode="bilinear", align_corners=False)
    h = F.conv1d(h.flatten(2), w1, padding="same")
    return F.adaptive_avg_pool2d(h.unsqueeze(1), (2, 3))


def _cnn_inputs(i):
    return Call(rand_tensor((2 + i, 3, 6, 6)), rand_tensor((4, 3, 3, 3)), rand_tensor((4,)), rand_tensor((5, 4, 3)))


def test_conv_and_pools_under_jit_match_eager_without_breaks():
    check_traced_and_compiled(cnn, _cnn_inputs, 1924, rtol=1e-5, atol=1e-5)
