"""The cpu backend (fused kernels from the host compiler) against eager execution: every op,
fused patterns over dtypes, odd sizes, broadcasting, non-contiguous and expanded inputs; the
kernel cache across restarts, corrupt and badly-permissioned entries; and the fallback when no
compiler exists."""
import json
import os
import shutil
import stat
import tempfile
import textwrap

import dyntrace as dt
from cpulib import ALL_DTYPES, FLOAT_DTYPES, check, compiled, kernel_count, module_dir, run_child, compare
from jitlib import stats
from testlib import noncontig, rand_tensor, seed, skip

UNARY = ["neg", "abs", "exp", "exp2", "log", "log2", "log1p", "expm1", "sqrt", "rsqrt", "sin", "cos",
         "tan", "tanh", "sigmoid", "relu", "silu", "erf", "floor", "ceil", "round", "trunc", "sign",
         "reciprocal", "square", "logical_not"]
BINARY = ["add", "sub", "mul", "div", "floor_divide", "remainder", "pow", "maximum", "minimum",
          "atan2", "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor"]


def _supported(names, dtype, *args):
    """The ops of `names` that eager accepts for these operands."""
    ok = []
    for name in names:
        try:
            getattr(dt, name)(*args)
            ok.append(name)
        except (TypeError, RuntimeError, ValueError):
            pass
    return ok


def _make_fn(body_names, call):
    """def f(x, y): return (dt.<name>(<call>), ...) — one graph holding every listed op."""
    source = "def f(x, y):\n    return (%s,)\n" % ", ".join("dt.%s(%s)" % (n, call) for n in body_names)
    scope = {"dt": dt}
    exec(compile(source, "<cpu-test-%s>" % call, "exec"), scope)  # noqa: S102 - generated test code
    return scope["f"]


def test_every_unary_op_every_dtype():
    for dtype in ALL_DTYPES:
        seed(1)
        probe = rand_tensor((3,), dtype)
        names = _supported(UNARY, dtype, probe)
        assert names, dtype
        f = _make_fn(names, "x")
        check(f, lambda i: (rand_tensor((5 + 7 * i, 33), dtype, 0.1, 3.0) if dtype != dt.bool
                            else rand_tensor((5 + 7 * i, 33), dtype), None))


def test_every_binary_op_every_dtype_with_broadcasting_and_scalars():
    for dtype in ALL_DTYPES:
        seed(2)
        a, b = rand_tensor((2, 3), dtype, 1, 4), rand_tensor((3,), dtype, 1, 4)
        names = _supported(BINARY, dtype, a, b)
        f = _make_fn(names, "x, y")
        check(f, lambda i: (rand_tensor((4 + i, 17), dtype, 1, 4), rand_tensor((17,), dtype, 1, 4)))
        with_scalar = _supported(BINARY, dtype, a, 3)
        g = _make_fn(with_scalar, "x, 3")
        check(g, lambda i: (rand_tensor((9, 5 + i), dtype, 1, 4), None))


def test_mixed_dtype_promotion_in_one_kernel():
    def f(i32, f16, f64, flag):
        return (i32 + f16) * 2.5, (i32 * 3) // 2, dt.where(flag, f16, i32), f64 - i32, (f16 > 0.5) & flag
    check(f, lambda i: (rand_tensor((6, 7 + i), dt.int32, -5, 5), rand_tensor((6, 7 + i), dt.float16),
                        rand_tensor((7 + i,), dt.float64), rand_tensor((6, 7 + i), dt.bool)))


def test_where_and_casts():
    def f(x, y):
        c = x > y
        return dt.where(c, x, 0.0), dt.where(c, 1, y), x.to(dt.float16).to(dt.float32), c.to(dt.int64) * 7
    check(f, lambda i: (rand_tensor((8, 3 + i)), rand_tensor((8, 3 + i))))


def test_every_reduction():
    def f(x, b):
        return (x.sum(), x.sum(1), x.sum((0, 2), keepdim=True), x.prod(-1), x.amax(0), x.amin((1, 2)),
                x.mean(-1, keepdim=True), (x > 0).any(-1), (x > -1.5).all(1), x.argmax(-1), x.argmin(0),
                x.sum(-1, dtype=dt.float64), b.sum(-1), b.any(), x.mean())
    for dtype in (dt.float32, dt.float64, dt.float16):
        check(f, lambda i: (rand_tensor((3 + i, 5, 7), dtype, -2, 2) * 0.5, rand_tensor((4, 9 + i), dt.bool)))
    def g(x):
        return x.sum(-1), x.prod(0), x.amax(-1), x.amin(), x.sum(dtype=dt.float32)
    for dtype in (dt.int32, dt.int64):
        check(g, lambda i: (rand_tensor((4 + i, 6), dtype, -3, 4),))


def test_sums_over_outer_and_inner_dims_fuse_with_their_producers():
    # The sums of batch norm's backward reduce dims (0, 2, 3) of [N, C, H, W]: no row kernel walks
    # that, so the sum is split (jit/reduction_split.h) into a row sum over (H, W) into float64,
    # which the product feeding it joins, and a sum of those partials over N. The partials are
    # float64, as the float32 eager sum's accumulator: results equal eager's exactly, for every
    # size the graph serves (the second call's batch is larger; no size is baked in).
    def f(x, w):
        y = x * w
        return (y * y).sum((0, 2, 3), keepdim=True), y.sum((0, 3)), y.sum((1, 3), keepdim=True), y.mean((0, 2, 3))

    g = check(f, lambda i: (rand_tensor((2 + i, 3, 5, 6)), rand_tensor((1, 3, 1, 1))), rtol=0, atol=0)
    source = "\n".join(dt.kernels(g))
    # The products are computed inside kernels that sum rows into double accumulators (before the
    # split, every node here ran eagerly: the group holding the sum was dropped).
    assert "dt::scalar::mul" in source and "double acc" in source, source
    # float64 sums stay whole (the order of float64 additions would show in the last bit).
    check(f, lambda i: (rand_tensor((2 + i, 3, 5, 6), dt.float64), rand_tensor((1, 3, 1, 1), dt.float64)),
          rtol=0, atol=0, min_kernels=0)


def test_max_min_rows_with_special_values():
    # Compiled amax/amin fold floating rows as integer order keys and fold a row holding NaN
    # again with the float combiner: NaN at either end or inside a row, rows of infinities,
    # signed zeros and subnormals only, and rows shorter and longer than the 16 lanes.
    nan, inf = float("nan"), float("inf")

    def f(x):
        # softmax(x * 2): the max's input is computed and kept in a row buffer for the exp pass,
        # so a refolded row recomputes it.
        return (x.amax(-1), x.amin(-1, keepdim=True), x.amax(0), dt.softmax(x, -1), dt.log_softmax(x, -1),
                dt.softmax(x * 2.0, -1))

    for dtype in FLOAT_DTYPES:
        def make(i):
            n = (3, 16, 17, 41)[i]
            x = rand_tensor((8, n), dtype)
            x[0, (5 * i) % n] = nan
            x[1] = -inf
            x[2] = 0.0
            x[2, n // 2] = -0.0
            x[3, 0] = inf
            x[3, n - 1] = nan
            x[4] = 1e-40 if dtype == dt.float64 else 0.0
            x[4, 0] = -1e-40 if dtype == dt.float64 else -0.0
            x[5, n - 1] = nan
            x[6] = inf
            x[7, 0] = nan
            return (x,)
        check(f, make, calls=4)


def test_every_composite():
    def f(x, w, b):
        return (x.var(-1), x.std(0, keepdim=True), dt.logsumexp(x, (-1,)), dt.softmax(x, -1),
                dt.log_softmax(x, 0), dt.layer_norm(x, (x.shape[-1],), w, b), dt.rms_norm(x, (x.shape[-1],), w),
                dt.gelu(x), dt.gelu(x, approximate="tanh"), dt.clamp(x, -0.5, 0.5), dt.clip(x, max=0.1),
                dt.softmax(x, 1, dtype=dt.float64))
    for dtype in FLOAT_DTYPES:
        check(f, lambda i: (rand_tensor((5 + i, 19), dtype), rand_tensor((19,), dtype), rand_tensor((19,), dtype)))


def test_shape_data_creation_and_linalg_ops_between_kernels():
    def f(x, y, m):
        t = (x * 2).transpose(0, 1)
        u = t.reshape(-1).view(t.shape[1], t.shape[0]).flatten().unsqueeze(0).squeeze(0)
        a, b = (x + 1).split(2, 1)[0], (x - 1).chunk(2, 0)[-1]
        c = dt.cat([x, y], 0) * 2
        s = dt.stack([x.exp(), y.exp()], 1).permute(2, 0, 1).swapaxes(0, 1)
        e = x.expand(2, *x.shape).broadcast_to((2,) + tuple(x.shape)) + 1
        n = x.narrow(1, 1, 2).select(0, 0).contiguous().clone()
        z = dt.zeros(3, x.shape[1]) + dt.ones(x.shape[1]) * dt.full((x.shape[1],), 2.0) + dt.arange(x.shape[1])
        l = dt.linspace(0, 1, x.shape[1]) * x
        mm = dt.matmul(x, m).relu() + 1
        mm2 = dt.mm(x, m) * 2
        bm = dt.bmm(x.unsqueeze(0), m.unsqueeze(0)).tanh()
        d = dt.dot(x[0], x[1]) + 1
        g = x[1:, ::2] * 3
        k = x.clone()
        k[0] = 5.0
        h = dt.concat([x, x], 1).sum(-1)
        return u, a, b, c, s, e, n, z, l, mm, mm2, bm, d, g, k + 1, h, dt.zeros_like(x) + x, dt.ones_like(y), dt.full_like(x, 3) * x
    check(f, lambda i: (rand_tensor((4, 6)), rand_tensor((2 + i, 6)), rand_tensor((6, 5 + i))))


def test_indexing_ops_run_between_kernels():
    # _index, _index_put, index_put, index_select, gather, scatter (and scatter.value), scatter_add,
    # take_along_dim, masked_fill, embedding, one_hot: nodes between fused kernels, no break.
    def f(x, t, w):
        a = x[:, t].exp() + x[t[0]]
        y = x.clone()
        y[t] = 0.5
        p = y.index_put((t,), x[:1].expand(t.shape[0], -1), accumulate=True) * 2
        s = x.index_select(1, t).sum(0)
        i = t.unsqueeze(0).expand(x.shape[0], -1)
        g = dt.gather(x, 1, i) + dt.take_along_dim(x, i, 1)
        sc = dt.scatter_add(x, 1, i, g) - dt.scatter(x, 1, i, 2.0) + dt.scatter(x, 1, i, g)
        m = dt.masked_fill(x, x > 0.5, -1.0).relu()
        e = dt.embedding(t, w).tanh() + dt.one_hot(t, 5)
        return a, p, s, sc, m, e
    check(f, lambda i: (rand_tensor((4, 5)), dt.tensor([4, 0, 2]), rand_tensor((6, 5))))


def test_data_dependent_ops_break_and_match_eager():
    # nonzero, where.condition and masked_select have data-sized results: the graph breaks
    # before each, the segments around them compile.
    def f(x):
        n = dt.nonzero(x > 0).sum() * 2
        r, c = dt.where(x > 1)
        return n, r + 1, dt.masked_select(x, x < 0).exp(), (x * 3).sum()
    check(f, lambda i: (rand_tensor((3 + i, 4)),))


def test_sorts_scans_and_max_min_run_between_kernels():
    # max, max.dim, max.other, min, min.dim, min.other (amax/amin fuse), sort, argsort, topk,
    # cumsum, cumprod: nodes between the kernels around them.
    def f(x, y):
        v, i = x.max(1)
        w = x.min(0).values * 2
        s = dt.sort(x.exp(), 1, descending=True).values + 1
        return (v + x.max() + x.min(), i, w, dt.max(x, y) - dt.min(x, y), s, x.argsort(0), dt.topk(x, 2).values,
                dt.cumsum(x * 2, 1).tanh(), dt.cumprod(x, 0))
    check(f, lambda i: (rand_tensor((3 + i, 5)), rand_tensor((5,))))


def test_scans_searches_and_index_reductions_run_between_kernels():
    # cummax, cummin, kthvalue, logcumsumexp, searchsorted, bucketize, index_add, index_copy,
    # scatter_reduce: nodes between the kernels around them; unique breaks the graph (its
    # result size is the data's) and the segments around it compile.
    def f(x, seq, idx, src):
        m = dt.cummax(x.exp(), 1).values + x.cummin(0).values
        k = dt.kthvalue(x, 2, 1).values * 2
        p = dt.searchsorted(seq, x, right=True) + dt.bucketize(x, seq)
        a = dt.index_add(x, 0, idx, src, alpha=0.5).tanh() + x.index_copy(0, idx, src)
        r = dt.scatter_reduce(x, 0, idx.unsqueeze(1).expand(-1, x.shape[1]), src, "amin", include_self=False)
        return m, k, p, a, r + 1, dt.logcumsumexp(x * 2, 1)
    check(f, lambda i: (rand_tensor((3 + i, 5)), dt.sort(rand_tensor((6,))).values, dt.tensor([2, 0]),
                        rand_tensor((2, 5))))

    def g(x):
        u, inverse = dt.unique((x * 2).floor(), return_inverse=True)
        return u.exp(), inverse + 1, (x + 1).sum()
    check(g, lambda i: (rand_tensor((3 + i, 4)),))


def test_simple_ops_compile():
    # isnan, isinf, isfinite, nan_to_num, clamp_min, clamp_max (fused), add.alpha, sub.alpha,
    # fill, zero, copy (in place), tril, triu, flip, roll, repeat, unbind, eye.
    def f(x, y):
        a = dt.nan_to_num(x / y).clamp_min(-1.0).clamp_max(1.0) + dt.isnan(x) + dt.isinf(y) + dt.isfinite(x / y)
        c = dt.add(x, y, alpha=2) * dt.sub(x, y, alpha=0.5)
        z = x.clone()
        z.zero_()
        z.fill_(2.0)
        z.copy_(y)
        t = dt.tril(x) - dt.triu(y, 1) + dt.eye(x.shape[0], x.shape[1])
        return a, c, z * 2, t, dt.flip(x, [0]).roll(1, 1).repeat(1, 2), x.unbind(0)[0].exp()
    check(f, lambda i: (rand_tensor((3 + i, 4)), rand_tensor((3 + i, 4))))


def test_nn_functional_ops():
    # Overloads and internal ops exercised here: conv1d.padding and conv2d.padding (padding="same"),
    # _im2col (inside conv2d and the pools), _batch_norm_update_stats (batch_norm, training=True),
    # relu.inplace and silu.inplace (F.relu/F.silu with inplace=False).
    import dyntrace.nn.functional as F

    def losses(x, t, p, y):
        return (F.cross_entropy(x, t), F.nll_loss(F.log_softmax(x, 1), t), F.mse_loss(x, y), F.l1_loss(x, y),
                F.smooth_l1_loss(x, y), F.binary_cross_entropy_with_logits(x, p), F.kl_div(x, p))

    def layers(x, w, b, rm, rv):
        h = F.linear(x, w, b)
        h = F.batch_norm(h, rm, rv, training=True) + F.group_norm(h.unsqueeze(-1), 2).squeeze(-1)
        h = F.softplus(h) + F.leaky_relu(h) + F.hardswish(h) + F.mish(h) + F.normalize(h) + F.elu(h)
        h = F.hardtanh(h, -2.0, 2.0) + F.relu6(h) + F.relu(h, inplace=False) + F.silu(h, inplace=False)
        q = h.unsqueeze(0)
        return F.glu(h) + 1, F.scaled_dot_product_attention(q, q, q), F.dropout(h, training=False)

    def images(x, w, w1):
        h = F.conv2d(x, w, padding=1) + F.conv2d(x, w, padding="same")
        h = F.max_pool2d(h, 2) + F.avg_pool2d(h, 2) + F.adaptive_avg_pool2d(h, 3)
        h = F.interpolate(F.pad(h, (1, 1, 1, 1)), scale_factor=2)
        return h, F.conv1d(h.flatten(2), w1), F.conv1d(h.flatten(2), w1, padding="same")

    n = lambda i: 4 + i
    check(losses, lambda i: (rand_tensor((n(i), 6)), (dt.rand(n(i)) * 6).floor().long(),
                             dt.rand(n(i), 6), rand_tensor((n(i), 6))), rtol=1e-5, atol=1e-5)
    check(layers, lambda i: (rand_tensor((n(i), 5)), rand_tensor((4, 5)), rand_tensor((4,)), dt.zeros(4), dt.ones(4)),
          rtol=1e-4, atol=1e-5)
    check(images, lambda i: (rand_tensor((2, 3, 6 + 2 * i, 6)), rand_tensor((4, 3, 3, 3)), rand_tensor((2, 4, 3))),
          rtol=1e-5, atol=1e-5, min_kernels=0)


def test_math_and_shape_ops():
    # dt.linalg.X is the registry's linalg_X: linalg_vector_norm, linalg_norm, linalg_norm.str (a
    # string ord), linalg_cross; norm.str is dt.norm with p="fro".
    def math(a, b, c, v):
        e = dt.einsum("ij,jk->ik", a, b)
        return (dt.isclose(e, e), dt.allclose(e, e), dt.equal(e, e), dt.addmm(e, a, b), dt.baddbmm(c, c, c),
                dt.lerp(e, e * 2, 0.5), dt.hypot(e, e), dt.logaddexp(e, e), dt.outer(v, v), dt.norm(e, "fro"),
                dt.addcmul(e, e, e * 2, value=0.5), dt.addcdiv(e, e, e * e + 1, value=3), dt.count_nonzero(e, dim=1),
                dt.diff(e, dim=0), dt.repeat_interleave(v, 2), dt.meshgrid(v, v, indexing="xy")[0] * 2,
                dt.broadcast_tensors(v, e)[0] + 1,
                dt.linalg.vector_norm(e, 3), dt.linalg.norm(e), dt.linalg.norm(e, "fro"), dt.linalg.cross(c, c),
                dt.cross(c, c), dt.diag(e), dt.trace(e), dt.tile(v, (2,)), dt.movedim(c, 0, 1), e.t(),
                e.new_zeros(2), e.new_ones(2), e.new_empty(2).shape, e.new_full((2,), 3), v.long().type_as(e))

    check(math, lambda i: (rand_tensor((3 + i, 3)), rand_tensor((3, 3)), rand_tensor((3, 3, 3)), rand_tensor((3,))),
          rtol=1e-5, atol=1e-5)


def test_most_negative_integer_over_minus_one_wraps_instead_of_trapping():
    # x86 traps on INT_MIN / -1 (SIGFPE: PyTorch 1.13's CPU kernel takes the process down). The
    # quotient wraps to INT_MIN and the remainder is 0, as numpy gives, eagerly and compiled.
    def ops(a, b):
        return a // b, a % b, a // -1, a % -1

    g = compiled(ops)
    for dtype, bits in ((dt.int8, 8), (dt.int16, 16), (dt.int32, 32), (dt.int64, 64)):
        low = -2 ** (bits - 1)
        a = dt.tensor([low, low + 1, -7, 0, 7], dtype=dtype)
        b = dt.tensor([-1, -1, -1, -1, 2], dtype=dtype)
        want_q = [low, -(low + 1), 7, 0, 3]
        want_r = [0, 0, 0, 0, 1]
        for got in (ops(a, b), g(a, b)):
            assert got[0].tolist() == want_q and got[1].tolist() == want_r, (dtype, got[0].tolist(), got[1].tolist())
            assert got[2].tolist() == [low, -(low + 1), 7, 0, -7] and got[3].tolist() == [0] * 5, (dtype, got[2].tolist())


def test_intermediates_are_freed_after_their_last_use():
    # Eight products in a row, none fusible: eagerly at most two live at once. A compiled graph
    # drops each intermediate after its last reader ran, so its peak stays near eager's instead
    # of holding all eight until it returns.
    def chain(x, w):
        for _ in range(8):
            x = x @ w
        return x

    x, w = rand_tensor((256, 256)) * 0.05, rand_tensor((256, 256)) * 0.05
    g = compiled(chain)
    g(x, w)
    one = 256 * 256 * 4
    for run in (g, chain):
        dt.reset_peak_memory_stats()
        held = dt.memory_allocated()
        y = run(x, w)
        added = dt.max_memory_allocated() - held
        # The result, the product being written and the one it reads; a size class may round up.
        assert added <= 3 * one * 1.25, (run.__name__, added / one)
        del y
    compare(g(x, w), chain(x, w), what="chain of products")
    assert dt.memory_allocated() == held, "the compiled call left buffers behind"


def test_random_ops_draw_what_eager_draws():
    # Overloads: randint.low (low, high, size), bernoulli.p (a float p), normal.float (floats and a size).
    def draws(x, p):
        return (dt.randint(5, (4,)), dt.randint(2, 5, (4,)), dt.randperm(4), dt.multinomial(p, 2),
                dt.bernoulli(x.sigmoid()), dt.bernoulli(x, 0.5), dt.normal(x, 0.5), dt.normal(0.0, 1.0, (3,)),
                x.clone().uniform_(1, 2), dt.rand_like(x), dt.randn_like(x))

    g = compiled(draws)
    for i in range(2):
        x, p = rand_tensor((4 + i,)), dt.tensor([0.1, 0.2, 0.3, 0.4])
        seed(60 + i)
        expected = draws(x, p)
        seed(60 + i)
        compare(g(x, p), expected, rtol=0, atol=0)


def test_empty_buffers_written_in_compiled_code():
    # empty/empty_like allocate without writing: compiled code must give their shape, dtype and
    # device, and then what the function writes into them.
    def fill(x):
        a = dt.empty(x.shape[0], 3, dtype=dt.float64).fill_(1.5)
        b = dt.empty_like(x).copy_(x * 2)
        c = dt.empty_like(x, dtype=dt.int32)
        return a, b, c.shape, c.dtype, dt.empty(2, 3).shape

    check(fill, lambda i: (rand_tensor((4 + i, 5)),))


# ---- fused patterns: (name, function, input maker) -----------------------------------------------

def _bias_gelu(x, b):
    y = x + b
    return 0.5 * y * (1 + dt.tanh(0.7978845608 * (y + 0.044715 * y * y * y)))


def _softmax_manual(x):
    m = x.amax(-1, keepdim=True)
    e = (x - m).exp()
    return e / e.sum(-1, keepdim=True)


def _layer_norm_manual(x, w, b):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / dt.sqrt(var + 1e-5) * w + b


PATTERNS = [
    ("bias_gelu", _bias_gelu, lambda i: (rand_tensor((7 + i, 129)), rand_tensor((129,))), 1),
    ("softmax_manual", _softmax_manual, lambda i: (rand_tensor((5 + i, 37)),), 1),
    ("layer_norm_manual", _layer_norm_manual, lambda i: (rand_tensor((3 + i, 65)), rand_tensor((65,)), rand_tensor((65,))), 1),
    ("softmax_op", lambda x: dt.softmax(x * 0.125, -1), lambda i: (rand_tensor((9, 3 + 5 * i)),), 1),
    ("log_softmax_op", lambda x: dt.log_softmax(x, -1) + 1, lambda i: (rand_tensor((2 + i, 4, 31)),), 1),
    ("layer_norm_op", lambda x, w, b: dt.layer_norm(x, (x.shape[-1],), w, b).relu(), lambda i: (rand_tensor((4, 3 + i, 48)), rand_tensor((48,)), rand_tensor((48,))), 1),
    ("rms_norm_op", lambda x, w: dt.rms_norm(x, (x.shape[-1],), w) * 2, lambda i: (rand_tensor((6 + i, 40)), rand_tensor((40,))), 1),
    ("row_sum_epilogue", lambda x: (x * x).sum(-1).sqrt() + 1, lambda i: (rand_tensor((11 + i, 23)),), 1),
    # Reductions that keep the innermost dim run eagerly between kernels (vectorised across it;
    # jit/schedule.h fuse_outer_reductions): the producer and the epilogue are a kernel each.
    ("column_sum", lambda x: (x + 1).sum(0) * 3, lambda i: (rand_tensor((13, 5 + i)),), 2),
    ("middle_dim_mean", lambda x: x.exp().mean(1, keepdim=True) - 1, lambda i: (rand_tensor((3, 7 + i, 4)),), 2),
    ("full_reduction", lambda x: (x.abs() + 0.5).log().sum(), lambda i: (rand_tensor((17 + i, 3)),), 1),
    ("reduce_then_broadcast_back", lambda x: x - x.mean(-1, keepdim=True), lambda i: (rand_tensor((5, 9 + i)),), 1),
    ("two_outputs_shared_chain", lambda x: ((x * 2).exp(), (x * 2).sin()), lambda i: (rand_tensor((33 + i,)),), 1),
    ("odd_sizes_1d", lambda x, y: (x * y + 1).tanh(), lambda i: (rand_tensor((1 + 1000 * i + 7,)), rand_tensor((1 + 1000 * i + 7,))), 1),
    ("scalar_tensor_operand", lambda x, s: x * s + s, lambda i: (rand_tensor((3, 5 + i)), rand_tensor(())), 1),
    ("broadcast_outer", lambda a, b: (a + b).relu() * a, lambda i: (rand_tensor((6 + i, 1)), rand_tensor((1, 9))), 1),
    ("broadcast_3d", lambda a, b: (a * b).sigmoid(), lambda i: (rand_tensor((2, 1, 5 + i)), rand_tensor((3, 1))), 1),
    ("transposed_input", lambda x: (x.exp() + 1).log(), lambda i: (noncontig((5 + i, 7), kind="transposed"),), 1),
    ("strided_input", lambda x: x * 2 - 1, lambda i: (noncontig((4, 6 + i), kind="strided"),), 1),
    ("expanded_input", lambda x, y: x + y * 2, lambda i: (noncontig((5 + i, 8), kind="expanded"), rand_tensor((5 + i, 8))), 1),
    ("view_of_input", lambda x: x.T * 2 + x.T.exp(), lambda i: (rand_tensor((4 + i, 6)),), 1),
    ("slice_of_input", lambda x: x[:, 1:-1].square() + 1, lambda i: (rand_tensor((3 + i, 10)),), 1),
    ("matmul_bias_gelu", lambda x, w, b: dt.gelu(x @ w + b), lambda i: (rand_tensor((8 + i, 16)), rand_tensor((16, 24)), rand_tensor((24,))), 1),
    ("mlp_two_layers", lambda x, w1, w2: dt.relu(x @ w1 + 1) @ w2 * 0.5, lambda i: (rand_tensor((4 + i, 8)), rand_tensor((8, 12)), rand_tensor((12, 3))), 2),
    ("attention_scores", lambda q, k: dt.softmax(q @ k.transpose(-1, -2) * 0.25, -1), lambda i: (rand_tensor((2, 5 + i, 8)), rand_tensor((2, 5 + i, 8))), 1),
    ("clamp_chain", lambda x: dt.clamp(x * 3, -1, 1) + dt.clip(x, min=0), lambda i: (rand_tensor((7, 7 + i)),), 1),
    ("where_select", lambda x, y: dt.where(x > y, x - y, (y - x) * 0.5), lambda i: (rand_tensor((6 + i, 4)), rand_tensor((4,))), 1),
    ("comparison_chain", lambda x: ((x > 0) & (x < 1)) | (x == 0.5), lambda i: (rand_tensor((12 + i,)),), 1),
    ("integer_arithmetic", lambda a, b: (a * 3 + b) % 7 + a // 2, lambda i: (rand_tensor((5, 5 + i), dt.int64, -9, 9), rand_tensor((5 + i,), dt.int64, 1, 5)), 2),
    ("int32_to_float", lambda a: a.to(dt.float32) / 3 + a, lambda i: (rand_tensor((4 + i, 3), dt.int32, -9, 9),), 1),
    ("half_chain", lambda x: (x * 1.5 + 0.25).exp() / 3, lambda i: (rand_tensor((10 + i, 6), dt.float16, -1, 1),), 1),
    ("half_softmax", lambda x: dt.softmax(x, -1), lambda i: (rand_tensor((3, 17 + i), dt.float16),), 1),
    ("double_layer_norm", lambda x: dt.layer_norm(x, (x.shape[-1],)), lambda i: (rand_tensor((3 + i, 11), dt.float64),), 1),
    ("bool_logic", lambda a, b: dt.logical_xor(a, b) | ~a, lambda i: (rand_tensor((9 + i,), dt.bool), rand_tensor((9 + i,), dt.bool)), 1),
    ("pow_and_sqrt", lambda x: (x.abs() ** 1.5 + 1).sqrt().rsqrt(), lambda i: (rand_tensor((8, 2 + i)),), 1),
    ("inplace_between", lambda x: _inplace_between(x), lambda i: (rand_tensor((5, 4 + i)),), 2),
    ("large_parallel", lambda x: (x * 0.5).sin() * x.cos() + 1, lambda i: (rand_tensor((300 + i, 333)),), 1),
    ("large_row_softmax", lambda x: dt.softmax(x, -1), lambda i: (rand_tensor((200 + i, 513)),), 1),
    ("zero_size", lambda x: (x + 1).sum(-1) * x.exp().sum(), lambda i: (rand_tensor((0, 4 + i)),), None),
    ("size_one_dims", lambda x, y: (x * y).sum(1, keepdim=True) + x, lambda i: (rand_tensor((4 + i, 1, 6)), rand_tensor((1, 3, 6))), None),
    ("keepdim_false_epilogue", lambda x: x.amax(-1) * 2 - x.amin(-1), lambda i: (rand_tensor((6 + i, 10)),), 1),
    ("nan_and_inf", lambda x: dt.softmax(x / 0.0, -1) + dt.maximum(x, x / 0.0).relu(), lambda i: (rand_tensor((3, 4 + i)),), 1),
]


def _inplace_between(x):
    y = x * 2
    y.add_(1)
    return (y.exp() + x).sum(-1)


def _pattern_test(name, fn, make, kernels):
    def test():
        seed(hash(name) % 1000)
        if kernels is None:
            check(fn, make)
        else:
            check(fn, make, kernels=kernels)
    test.__name__ = "test_pattern_" + name
    return test


for _name, _fn, _make, _kernels in PATTERNS:
    globals()["test_pattern_" + _name] = _pattern_test(_name, _fn, _make, _kernels)


def test_patterns_over_every_dtype():
    def chain(a, b):
        return (a * b + a) - b * 2
    for dtype in ALL_DTYPES:
        if dtype == dt.bool:
            continue
        check(chain, lambda i: (rand_tensor((5, 3 + i), dtype, -4, 4), rand_tensor((5, 3 + i), dtype, -4, 4)), kernels=1)


def test_one_compile_serves_every_batch_size():
    def f(x, b):
        return dt.softmax(x + b, -1).sum(-1)
    g = compiled(f)
    before = dt.stats()
    for n in (3, 17, 256, 1):
        x, b = rand_tensor((n, 40)), rand_tensor((40,))
        compare(g(x, b), f(x, b))
    after = dt.stats()
    # n=1 changes which dims broadcast (a guarded property); the others share one entry.
    assert len(dt.kernels(g)) <= 2
    assert after["recompiles"] - before["recompiles"] <= 1


def test_chain_of_eight_ops_is_one_kernel_and_no_intermediates():
    g = check(_bias_gelu, lambda i: (rand_tensor((64, 256)), rand_tensor((256,))), kernels=1)
    source = dt.kernels(g)[0]
    assert "tanh" in source and source.count("p2[") >= 1, source


def test_large_outputs_are_streamed_and_exact():
    # Outputs of 8 MiB and more are written with cache-bypassing stores in aligned chunks of 64
    # elements: rows of 4097 elements start at every alignment, so the scalar head before the
    # first aligned chunk and the tail after the last one both run; two outputs of different
    # element sizes drift out of step, which must fall back to plain stores.
    def two_outputs(a, b):
        return (a * b + 1.0) / (b.abs() + 1.0), a > b

    def half_chain(a, b):
        return dt.tanh(a) * b - a
    g = check(two_outputs, lambda i: (rand_tensor((520 + i, 4097)), rand_tensor((520 + i, 4097))), kernels=1)
    assert "dt_stream_store" in dt.kernels(g)[0]
    check(half_chain, lambda i: (rand_tensor((1100, 4097 - i), dt.float16), rand_tensor((4097 - i,), dt.float16)),
          kernels=1)
    check(_bias_gelu, lambda i: (rand_tensor((2049, 1031 + i)), rand_tensor((1031 + i,))), kernels=1)


def test_kernel_log_shows_source_and_compile_time():
    code = textwrap.dedent("""
        import dyntrace as dt
        @dt.jit(backend="cpu")
        def f(x):
            return (x * 3).exp().sum(-1)
        f(dt.ones(4, 5))
    """)
    rc, out, err = run_child(code, {"DYNTRACE_LOGS": "kernels", "DYNTRACE_CACHE_DIR": tempfile.mkdtemp()})
    assert rc == 0, err
    assert "[dyntrace:kernels]" in err and " ms" in err and "kernel0_fixed" in err and "compiled" in err, err


# ---- the kernel cache across processes --------------------------------------------------------

CHILD = textwrap.dedent("""
    import json, warnings
    import dyntrace as dt
    warnings.simplefilter("always")
    caught = []
    warnings.showwarning = lambda m, *a, **k: caught.append(str(m))
    @dt.jit(backend="cpu")
    def f(x, y):
        return (x * y + 1).tanh().sum(-1) + %(salt)s
    x = dt.arange(12, dtype=dt.float32).reshape(3, 4) / 7
    y = dt.ones(4) * 0.5
    got = f(x, y).tolist()
    want = ((x * y + 1).tanh().sum(-1) + %(salt)s).tolist()
    s = dt.stats()
    print(json.dumps({"ok": all(abs(a - b) < 1e-5 for a, b in zip(got, want)), "compiled": s["kernels_compiled"],
                      "disk": s["kernels_from_disk"], "rejected": s["kernels_rejected"],
                      "failures": s["compile_failures"], "warnings": caught}))
""")


def _child(cache_dir, salt, **env):
    extra = {"DYNTRACE_CACHE_DIR": cache_dir}
    extra.update(env)
    rc, out, err = run_child(CHILD % {"salt": salt}, extra)
    assert rc == 0, err
    return json.loads(out.strip().splitlines()[-1])


def _child_as_nobody(cache_dir, salt):
    """_child's program run as uid/gid 65534 (REQUIRES: root), for conditions root's privileges
    hide: permission bits do not stop root. The child starts as root, moves to a directory of its
    own with a copy of the module (the test's own folders may be private to root), then drops its
    privileges before importing dyntrace."""
    home = tempfile.mkdtemp(dir="/tmp")
    os.chmod(home, 0o755)
    shutil.copy(os.path.join(module_dir(), "dyntrace.so"), home)
    drop = "import os\nos.chdir(%r)\nos.setgroups([])\nos.setgid(65534)\nos.setuid(65534)\n" % home
    env = {"DYNTRACE_CACHE_DIR": cache_dir, "PYTHONPATH": home, "HOME": home, "TMPDIR": home,
           "XDG_CACHE_HOME": ""}
    # An interpreter installed in root's private home (pyenv under /root) cannot run as nobody.
    rc, _, err = run_child(drop + "import json, textwrap, warnings\n", env)
    if rc != 0:
        skip("this interpreter's standard library is not readable by uid 65534, so the unwritable "
             "directory case cannot run as another user: " + err.strip().splitlines()[-1])
    rc, out, err = run_child(drop + CHILD % {"salt": salt}, env)
    assert rc == 0, err
    return json.loads(out.strip().splitlines()[-1])


def _entries(cache_dir):
    return sorted(os.path.join(cache_dir, n) for n in os.listdir(cache_dir) if n.endswith(".so"))


SHARED_KERNEL_CHILD = textwrap.dedent("""
    import json
    import dyntrace as dt
    import dyntrace.nn.functional as F
    def alone(x, w, b):
        return F.gelu(F.layer_norm(x, (256,), w, b))
    def with_another(x, w, b):
        return (x @ x.t()).tanh(), F.gelu(F.layer_norm(x, (256,), w, b))
    x, w, b = dt.randn(64, 256), dt.randn(256), dt.randn(256)
    first, second = dt.jit(alone, backend="cpu"), dt.jit(with_another, backend="cpu")
    a = first(x, w, b)
    after_first = dt.stats()
    t, a2 = second(x, w, b)
    s = dt.stats()
    want = F.gelu(F.layer_norm(x, (256,), w, b))
    print(json.dumps({"first_kernel_bytes": len(dt.kernels(first)[0]),
                      "first": [after_first["kernels_compiled"], after_first["kernels_cached"]],
                      "second": [s["kernels_compiled"] - after_first["kernels_compiled"],
                                 s["kernels_cached"] - after_first["kernels_cached"]],
                      "same": (a - want).abs().max().item() == 0 and (a2 - want).abs().max().item() == 0,
                      "tanh": (t - (x @ x.t()).tanh()).abs().max().item()}))
""")


def test_graphs_sharing_a_large_kernel_compile_it_once():
    """A kernel of 8 KB of code or more has a translation unit of its own, named after no graph,
    so a second graph containing it (here beside a small kernel of its own) loads it from the
    cache and compiles only the small kernel's unit; results stay eager's."""
    rc, out, err = run_child(SHARED_KERNEL_CHILD, {"DYNTRACE_CACHE_DIR": tempfile.mkdtemp()})
    assert rc == 0, err
    got = json.loads(out.strip().splitlines()[-1])
    assert got["first_kernel_bytes"] >= 8192, ("the layer-norm kernel no longer fills its own unit; "
                                               "choose a larger shared kernel", got)
    assert got["first"] == [1, 0], got
    assert got["second"] == [1, 1], got
    assert got["same"] and got["tanh"] == 0, got


def test_cache_hit_after_restart():
    d = tempfile.mkdtemp()
    first = _child(d, 1.0)
    assert first["ok"] and first["compiled"] == 1 and first["disk"] == 0, first
    assert stat.S_IMODE(os.stat(d).st_mode) & 0o077 == 0
    second = _child(d, 1.0)
    assert second["ok"] and second["compiled"] == 0 and second["disk"] == 1, second


def test_default_cache_directory_is_private():
    home = tempfile.mkdtemp()
    rc, out, err = run_child(CHILD % {"salt": 2.0}, {"DYNTRACE_CACHE_DIR": "", "XDG_CACHE_HOME": "", "HOME": home})
    assert rc == 0, err
    cache = os.path.join(home, ".cache", "dyntrace")
    assert _entries(cache), os.listdir(home)
    assert stat.S_IMODE(os.stat(cache).st_mode) == 0o700


def test_corrupt_and_truncated_entries_are_rebuilt():
    d = tempfile.mkdtemp()
    _child(d, 3.0)
    (so,) = _entries(d)
    data = open(so, "rb").read()
    with open(so, "wb") as f:
        f.write(data[: len(data) // 2])  # truncated
    r = _child(d, 3.0)
    assert r["ok"] and r["rejected"] == 1 and r["compiled"] == 1, r
    with open(so, "r+b") as f:
        f.seek(len(data) // 3)
        f.write(b"\xde\xad\xbe\xef" * 8)  # corrupt, same size
    r = _child(d, 3.0)
    assert r["ok"] and r["rejected"] == 1 and r["compiled"] == 1, r
    r = _child(d, 3.0)
    assert r["ok"] and r["rejected"] == 0 and r["disk"] == 1, r


def test_entries_with_bad_permissions_or_owner_are_refused():
    d = tempfile.mkdtemp()
    _child(d, 4.0)
    (so,) = _entries(d)
    os.chmod(so, 0o666)  # writable by others: refused, rebuilt
    r = _child(d, 4.0)
    assert r["ok"] and r["rejected"] == 1 and r["compiled"] == 1, r
    assert stat.S_IMODE(os.stat(so).st_mode) & 0o022 == 0
    # A file owned by another user: only root can make one.
    if os.geteuid() != 0:
        skip("a foreign-owned cache entry can only be made as root (this test runs as uid %d)" % os.geteuid())
    try:
        os.chown(so, 12345, 12345)
    except OSError as e:
        skip("chown to another uid failed (a user namespace mapping only root, such as Bazel's "
             "sandbox): %s" % e)
    r = _child(d, 4.0)
    assert r["ok"] and r["rejected"] == 1 and r["compiled"] == 1, r


def test_unusable_cache_directory_degrades_to_memory_with_one_warning():
    d = tempfile.mkdtemp()
    os.chmod(d, 0o777)  # writable by others: not trusted
    r = _child(d, 5.0)
    assert r["ok"] and r["compiled"] == 1 and len(r["warnings"]) == 1 and "memory only" in r["warnings"][0], r
    assert not _entries(d)
    blocker = os.path.join(tempfile.mkdtemp(), "file")
    open(blocker, "w").close()
    r = _child(os.path.join(blocker, "cache"), 5.0)  # can't be created: a file is in the way
    assert r["ok"] and r["compiled"] == 1 and len(r["warnings"]) == 1, r
    # A directory its owner cannot write: mode 0500 stops everyone but root, so as root the child
    # runs as another user (nobody) who owns the directory.
    ro = tempfile.mkdtemp(dir="/tmp" if os.geteuid() == 0 else None)
    os.chmod(ro, 0o500)
    if os.geteuid() == 0:
        try:
            os.chown(ro, 65534, 65534)
        except OSError as e:
            skip("the read-only directory case needs a second uid, and chown to nobody failed (a user "
                 "namespace mapping only root, such as Bazel's sandbox): %s" % e)
        r = _child_as_nobody(ro, 5.0)
    else:
        r = _child(ro, 5.0)
    assert r["ok"] and len(r["warnings"]) == 1 and "memory only" in r["warnings"][0], r
    assert not _entries(ro)


def test_missing_compiler_falls_back_to_eager():
    d = tempfile.mkdtemp()
    r = _child(d, 6.0, CXX="/nonexistent/c++", DYNTRACE_LOGS="kernels")
    assert r["ok"] and r["compiled"] == 0, r
    assert r["failures"] and "no C++ compiler" in r["failures"][0], r
    r = _child(d, 6.0, CXX="/bin/false")  # a "compiler" that fails
    assert r["ok"] and r["compiled"] == 0 and r["failures"], r


def test_an_op_refusing_its_inputs_raises_after_the_earlier_writes():
    # Found by the fuzzer (seed 846): the second call's sizes make `y` an expanded view that
    # mul_ refuses. Eagerly, x.sub_(x) has already written when mul_ raises; the compiled graph
    # found the refusal while planning shapes and had written nothing.
    def f(x, y):
        x.sub_(x)
        y[..., ::2].mul_(y.mean(dim=0))
        return x, y

    def inputs(n):
        return dt.tensor(1.5), dt.tensor([2.0]).expand(n)

    def outcome(fn, x, y):
        try:
            fn(x, y)
        except ValueError as e:
            return str(e), x.item()
        return None, x.item()

    g = compiled(f)
    for n in (2, 3):
        expected, got = outcome(f, *inputs(n)), outcome(g, *inputs(n))
        assert got == expected, (n, got, expected)
    assert expected[0] is not None and "share memory" in expected[0], expected


def test_float_to_int_to_float_keeps_eager_signed_zeros():
    # Found by the fuzzer: GCC folds float -> int -> float inside one kernel into trunc(), which
    # gave -0.0 for -0.5 where eager's integer gives +0.0.
    import math

    def f(x):
        return x.int().float(), x.long().double(), x.to(dt.int32).half(), x.int().float() * -1.0

    x = dt.tensor([-0.5, -0.2, 0.3, -1.5, -0.0, 2.7])
    expected, got = f(x), compiled(f)(x)
    for e, g in zip(expected, got):
        signs = lambda t: [(v, math.copysign(1.0, v)) for v in t.float().tolist()]
        assert signs(g) == signs(e), (signs(g), signs(e))


def test_float_to_integer_of_nan_and_out_of_range_values_equals_eager():
    # Found by the fuzzer (seed 4608): (z / z).long() of an int tensor z = 0, NaN made inside the
    # kernel, gave 0 compiled and -9223372036854775808 eagerly (and in PyTorch on x86). NaN and
    # out-of-range values now give the 32- or 64-bit range's most negative value on every
    # backend; narrower integers keep the low bits of the 32-bit value.
    def f(x, z):
        nan, inf = z / z, (z + 1) / z
        return (x.long(), x.int(), x.to(dt.int16), x.to(dt.int8), x.to(dt.uint8), (x * 2).long(),
                nan.long(), nan.int(), inf.long(), (-inf).int(), nan.to(dt.int8))

    big = 2.0 ** 40
    x = dt.tensor([float("nan"), float("inf"), -float("inf"), big, -big, -1.0, 3.7, -3.7, 2.0 ** 63, 300.0])
    z = dt.tensor([0, 0, 0])
    expected, got = f(x, z), compiled(f)(x, z)
    int64_min, int32_min = -2 ** 63, -2 ** 31
    assert expected[0].tolist()[:3] == [int64_min] * 3 and expected[0].tolist()[3] == 2 ** 40, expected[0]
    assert expected[1].tolist()[:5] == [int32_min] * 5 and expected[1].tolist()[5:8] == [-1, 3, -3], expected[1]
    assert expected[4].tolist()[5] == 255 and expected[4].tolist()[9] == 44, expected[4]
    assert expected[6].tolist() == [int64_min] * 3 and expected[7].tolist() == [int32_min] * 3, expected[6:8]
    for e, g in zip(expected, got):
        assert g.dtype == e.dtype and g.tolist() == e.tolist(), (g.tolist(), e.tolist())


def test_float64_sums_equal_eager_bit_for_bit():
    # Found by the fuzzer (seeds 297, 1633, ...): a float64 sum accumulated in 16 lanes rounded
    # differently from eager's single chain in the last bits.
    seed(5)

    def f(x, y):
        return x.sum(), (x * y).sum(dim=-1), x.mean(dim=0), (x + 1).sum().item()

    for n in (7, 16, 1000, 4099):
        x, y = rand_tensor((3, n), dt.float64), rand_tensor((3, n), dt.float64)
        expected, got = f(x, y), compiled(f)(x, y)
        for e, g in zip(expected, got):
            e, g = (e.tolist(), g.tolist()) if dt.is_tensor(e) else (e, g)
            assert g == e, (n, g, e)


# ---- in-place writes fused into their producers' kernel (jit/schedule.cc FuseWrite) ----

def _adam_like_update(p, m, v, lr):
    denom = v.sqrt() + 1e-8
    p.sub_(m / denom * lr)
    return p


def _read_between_start_and_write(p, a, w):
    t = a * 2
    s = p @ w  # BLAS, between kernels: reads p before the write, after the kernel of `t` started
    p.add_(t)
    return s


def _write_with_a_transposed_operand(p):
    t = p * 0.5
    p.add_(p.t() * t)
    return p


def _two_writes_in_a_row(p, g):
    p.mul_(0.9).add_(g * g * 0.1)
    return p * 1


def _moments_and_parameter_update(p, m, v, g):
    # An optimizer's update: three tensors written once each, later reads of m and v after
    # their writes (the kernel reads its own results), all in one kernel.
    m.add_((g - m) * 0.1)
    v.add_((g * g - v) * 0.001)
    p.sub_(m / (v.sqrt() + 1e-8) * 0.01)
    return p * 1


def _write_without_producers_then_read(x, y):
    t = x * 2
    y.mul_(3)  # no kernel feeds it: it joins t's kernel, and the read below sees its result
    return t + y


def _write_that_stays_eager_then_read(x, y):
    t = x * 2
    y[1:].mul_(3)  # a write into a view, run between kernels: t's kernel can't take the read
    return t + y


def test_in_place_writes_fuse_and_keep_eager_results():
    """The compiled function against plain CPython on copies of the same inputs: results and the
    written inputs equal (element functions are the same, in the same order)."""
    cases = [
        (_adam_like_update, lambda: (rand_tensor((6, 5)), rand_tensor((6, 5)), rand_tensor((6, 5)).abs(), 0.01)),
        (_read_between_start_and_write, lambda: (rand_tensor((4, 7)), rand_tensor((4, 7)), rand_tensor((7, 3)))),
        (_write_with_a_transposed_operand, lambda: (rand_tensor((5, 5)),)),
        (_two_writes_in_a_row, lambda: (rand_tensor((3, 8)), rand_tensor((3, 8)))),
        (_moments_and_parameter_update, lambda: (rand_tensor((6, 5)), rand_tensor((6, 5)), rand_tensor((6, 5)).abs(),
                                                 rand_tensor((6, 5)))),
        (_write_without_producers_then_read, lambda: (rand_tensor((4, 3)), rand_tensor((4, 3)))),
        (_write_that_stays_eager_then_read, lambda: (rand_tensor((4, 3)), rand_tensor((4, 3)))),
    ]
    dt.reset()  # the fallback count below is this test's alone, whatever ran before it
    for fn, make in cases:
        g = compiled(fn)
        for call in range(2):
            seed(call + 7)
            ours = make()
            theirs = tuple(a.clone() if isinstance(a, dt.Tensor) else a for a in ours)
            compare(g(*ours), fn(*theirs), what=fn.__name__)
            for i, (a, b) in enumerate(zip(ours, theirs)):
                if isinstance(a, dt.Tensor):
                    compare(a, b, what="%s input %d after the call" % (fn.__name__, i))
        assert stats()["fallbacks"] == 0, stats()["fallback_reasons"]
    # The update of m, v and p, with the reads after their writes, is one kernel (before, each
    # write ended every kernel: an AdamW step made six kernels and three eager nodes per tensor).
    g = compiled(_moments_and_parameter_update)
    g(rand_tensor((6, 5)), rand_tensor((6, 5)), rand_tensor((6, 5)).abs(), rand_tensor((6, 5)))
    assert kernel_count(g) == 1, "\n".join(dt.kernels(g))


def test_repeated_expressions_are_computed_once_but_never_across_writes():
    # The same op on the same values is computed once (a layer norm's statistics, which the
    # partitioner recomputes for the backward), but a read after a write of its operand reads
    # the new contents, and two equal results returned stay two tensors.
    def stats_twice(x):
        a = (x - x.mean(-1, keepdim=True)) * 2
        b = (x - x.mean(-1, keepdim=True)) * 3
        return a + b

    def around_a_write(x):
        before = x.sum(-1) * 1
        x.add_(1)
        return before, x.sum(-1) * 1

    def equal_results(x):
        return x * 2, x * 2

    g = check(stats_twice, lambda i: (rand_tensor((4 + i, 6)),))
    source = "\n".join(dt.kernels(g))
    # One accumulator (combined over its lanes once per variant), not two.
    assert source.count("for (int l = 1; l < 16; ++l) acc") == 2, source
    g = compiled(around_a_write)
    seed(5)
    ours = rand_tensor((3, 5))
    theirs = ours.clone()
    compare(g(ours), around_a_write(theirs))
    compare(ours, theirs, what="the written input")
    g = compiled(equal_results)
    first, second = g(rand_tensor((2, 3)))
    assert first is not second
    first.add_(1)
    compare(second * 1, first - 1)


def test_row_kernels_compute_each_full_value_once():
    # t is stored and reduced twice (a layer norm's backward: gelu_backward times the weight).
    # The row's first pass computes it into its row buffer and stores the output t there too;
    # before, a last pass computed exp again to store t, and the first mean computed it in its
    # own loop besides the fill.
    def f(x, y):
        t = x.exp() * y
        return t, (t * x).mean(-1, keepdim=True), t - t.mean(-1, keepdim=True)

    g = check(f, lambda i: (rand_tensor((4 + i, 40)), rand_tensor((4 + i, 40))), kernels=1)
    fixed_variant = "\n".join(dt.kernels(g)).split("_any(")[0]
    assert fixed_variant.count("exp_(") == 2, fixed_variant  # the fill's lane loop and its tail


def test_sums_over_the_batch_join_the_row_kernel_that_computes_their_input():
    # A layer norm's weight and bias gradients: sums over the rows of values the backward's row
    # kernel computes. They fold each row as it is computed (one kernel, no eager reduction);
    # on one thread in eager's order, row by row in double, so the results are eager's.
    def f(x, w):
        h = (x - x.mean(-1, keepdim=True)) * w
        return h, h.sum(0), (h * x).sum(0, keepdim=True), h.mean(0)

    dt.reset()
    # 7 rows run on one thread; 300 x 513 on the team, which folds its threads' sums in order.
    g = check(f, lambda i: (rand_tensor((7 + 293 * i, 40 + 473 * i)), rand_tensor((40 + 473 * i,))), kernels=1)
    source = "\n".join(dt.kernels(g))
    assert source.count("column_slots") > 0, source
    # A column sum of a value no reduction feeds folds in the row's first pass, where the value
    # is computed anyway: exp once per element (gelu_backward in a layer norm's backward).
    g = check(lambda x, y: ((x.exp() * y).mean(-1, keepdim=True) * y + x.exp() * y, (x.exp() * y).sum(0)),
              lambda i: (rand_tensor((5 + i, 24)), rand_tensor((5 + i, 24))), kernels=1)
    fixed_variant = "\n".join(dt.kernels(g)).split("_any(")[0]
    assert fixed_variant.count("exp_(") == 2 and "column_slots" in fixed_variant, fixed_variant
    # A sum over batch and time of a [B, T, D] value folds both kept dims.
    check(lambda x: (x.exp() - x.amax(-1, keepdim=True)).sum((0, 1)), lambda i: (rand_tensor((2 + i, 3, 8)),),
          kernels=1)


def _random_program_with_writes(rng, n_inputs=3, n_steps=8):
    """Source of a function mixing pointwise values, in-place writes of its inputs (by values,
    numbers, or values made after earlier writes), row sums and column sums."""
    lines = ["def prog(%s):" % ", ".join("x%d" % i for i in range(n_inputs))]
    temps = []
    for s in range(n_steps):
        names = ["x%d" % i for i in range(n_inputs)] + temps
        kind = rng.random()
        a, b = rng.choice(names), rng.choice(names)
        if kind < 0.35:
            lines.append("    t%d = (%s %s %s)%s" % (s, a, rng.choice("+*-"), b, rng.choice(["", ".exp()", ".sin()", " * 0.5"])))
            temps.append("t%d" % s)
        elif kind < 0.75:
            target = "x%d" % rng.randrange(n_inputs)
            lines.append("    %s.%s(%s)" % (target, rng.choice(["add_", "mul_", "sub_"]),
                                            rng.choice([b, "0.5", "(%s * 0.25)" % b])))
        elif kind < 0.9:
            lines.append("    t%d = %s.sum(-1, keepdim=True) * %s" % (s, a, b))
            temps.append("t%d" % s)
        else:
            lines.append("    t%d = (%s * 2).sum(0)" % (s, a))
            temps.append("t%d" % s)
    lines.append("    return (%s,)" % ", ".join(temps[-3:] + ["x%d * 1" % i for i in range(n_inputs)]))
    return "\n".join(lines)


def test_random_programs_with_writes_match_plain_cpython():
    # Writes no longer end the kernels started before them, kernels read back what they wrote,
    # and sums fold over rows and columns: random mixes of these against plain CPython running
    # the same source, results and the written inputs both. Both sides run the same element
    # functions; sums of 6 terms fold in another order in double, an ulp or two of a result at
    # most: 1e-5 relative holds that with room, and any misordered read or write is far off.
    import random
    rng = random.Random(20261207)
    dt.reset()
    for p in range(30):
        source = _random_program_with_writes(rng)
        plain, traced = {}, {}
        exec(compile(source, "<program %d>" % p, "exec"), plain)  # noqa: S102 - generated here
        exec(compile(source, "<program %d>" % p, "exec"), traced)  # noqa: S102
        g = dt.jit(traced["prog"], backend="cpu")
        for call in range(2):
            seed(p * 10 + call)
            ours = [rand_tensor((4, 6)) for _ in range(3)]
            theirs = [t.clone() for t in ours]
            compare(g(*ours), plain["prog"](*theirs), rtol=1e-5, atol=1e-5, what=source)
            for a, b in zip(ours, theirs):
                compare(a, b, rtol=1e-5, atol=1e-5, what="an input after the call of\n" + source)
    assert stats()["fallbacks"] == 0, stats()["fallback_reasons"]


def test_in_place_write_into_inputs_sharing_storage_runs_in_eager_order():
    # p and q are two tensors over one storage: the fused write into p may not move up past the
    # read of q, which the schedule cannot see, so the executor runs such calls node by node.
    def f(p, q):
        t = p * 2
        s = q @ q
        p.add_(t)
        return s

    g = compiled(f)
    for call in range(2):
        seed(call)
        base = rand_tensor((4, 4))
        theirs = base.clone()
        compare(g(base, base[:]), f(theirs, theirs[:]), what="aliased inputs")
        compare(base, theirs, what="written storage")


def test_read_only_inputs_sharing_storage_keep_the_fused_writes():
    # Only a written input's aliases can hide a touch from the schedule: a language model's
    # inputs and targets are two views of one token buffer, and a step writing its parameters
    # ran node by node because of them. Inputs that are only read may share storage; a written
    # one still may not (the call then runs in eager order), and both agree with plain CPython.
    def f(p, x, y):
        t = x * 2 + y
        p.add_(t)
        return t.sum()

    dt.reset()  # the fallback count below is this test's alone, whatever ran before it
    g = compiled(f)
    for call in range(2):
        seed(call + 3)
        tokens = rand_tensor((5, 4))
        ours = rand_tensor((4, 4))
        theirs = ours.clone()
        compare(g(ours, tokens[:4], tokens[1:]), f(theirs, tokens[:4], tokens[1:]), what="read-only views")
        compare(ours, theirs, what="written input")
        shared = rand_tensor((5, 4))
        copy = shared.clone()
        compare(g(shared[:4], shared[1:], shared[:4]), f(copy[:4], copy[1:], copy[:4]), what="written alias")
        compare(shared, copy, what="written storage")
    assert stats()["fallbacks"] == 0, stats()["fallback_reasons"]


def test_kernels_keep_dyntraces_thread_count_when_another_library_sets_openmps():
    # Another library in the process may set OpenMP's default (importing Debian's torch sets it to
    # one thread). dyntrace's work keeps its own count (OMP_NUM_THREADS=2 here), so its kernels
    # still start a second thread, and the other library's default is as it left it afterwards.
    code = textwrap.dedent("""
        import ctypes, os
        import dyntrace as dt
        gomp = ctypes.CDLL("libgomp.so.1")
        gomp.omp_set_num_threads(1)
        f = dt.jit(lambda x: (x * 2.0 + 1.0).exp(), backend="cpu")
        x = dt.ones(1).expand(1 << 20)
        before = len(os.listdir("/proc/self/task"))
        y = f(x)
        y = f(x)
        after = len(os.listdir("/proc/self/task"))
        # Compiled and eager kernels compute exp alike, bit for bit (an expression of its own here,
        # not the function dt.jit marked).
        assert bool((y == (x * 2.0 + 1.0).exp()).all()), y[:4]
        print(dt.get_num_threads(), gomp.omp_get_max_threads(), after - before, dt.stats()["fallbacks"])
    """)
    cache_dir = tempfile.mkdtemp(prefix="dt_threads_")
    try:
        rc, out, err = run_child(code, {"OMP_NUM_THREADS": "2", "DYNTRACE_CACHE_DIR": cache_dir})
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)
    assert rc == 0, out + err
    threads, foreign_default, started, fallbacks = (int(v) for v in out.split())
    assert threads == 2, out
    assert foreign_default == 1, "dyntrace left OpenMP's default at %d" % foreign_default
    assert started >= 1, "dyntrace's work ran on the other library's one thread"
    assert fallbacks == 0, out
