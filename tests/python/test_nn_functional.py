"""dyntrace.nn.functional's dropout, linear, scaled_dot_product_attention, activations
(softplus, elu, leaky_relu, hardswish, mish, glu) and normalisations (normalize, group_norm,
batch_norm) against float64 numpy references, and under dt.jit (eager and cpu backends) against
plain eager.

Tolerances: float64 inputs are compared at 1e-12 (a few roundings of O(1) values); float32
results of sums of n terms at 4 * n * eps32 relative to the sum of |terms|."""
import dyntrace as dt
import dyntrace.nn.functional as F
from cpulib import kernel_count
from jitlib import Call, jitted_copy, run_differential, stats
from testlib import assert_close, assert_raises, np, rand_tensor, require_numpy, seed

TOL64 = dict(rtol=1e-12, atol=1e-12)


def _np(t):
    return np.array(t.tolist(), dtype=np.float64)


def test_dropout_scales_kept_elements_and_follows_the_seed():
    x = dt.ones(20000)
    seed(7)
    y = F.dropout(x, 0.25)
    kept = (y != 0).sum().item() / 20000
    # Each element kept with probability 0.75: the fraction's standard deviation is 0.003.
    assert abs(kept - 0.75) < 0.02, kept
    assert set(y.tolist()) == {0.0, dt.tensor(1.0 / 0.75).item()}     # kept values scaled by 1/(1-p)
    seed(7)
    assert F.dropout(x, 0.25).tolist() == y.tolist()              # same seed, same mask
    assert F.dropout(x, 0.25, training=False).tolist() == x.tolist()
    assert F.dropout(x, 0.0).tolist() == x.tolist()
    assert F.dropout(x, 1.0).tolist() == [0.0] * 20000
    z = dt.ones(4)
    assert F.dropout(z, 1.0, inplace=True) is not None and z.tolist() == [0.0] * 4
    assert_raises(ValueError, F.dropout, x, 1.5, match="1.5")


def test_linear_and_attention():
    require_numpy()
    seed(1911)
    x, w, b = rand_tensor((2, 3, 4), dt.float64), rand_tensor((5, 4), dt.float64), rand_tensor((5,), dt.float64)
    assert_close(F.linear(x, w, b), _np(x) @ _np(w).T + _np(b), **TOL64)
    assert_close(F.linear(x, w), _np(x) @ _np(w).T, **TOL64)
    assert_raises(RuntimeError, F.linear, x, rand_tensor((5, 3)), match=("[2, 3, 4]", "[5, 3]"))
    q, k, v = (rand_tensor((2, 3, l, 4), dt.float64) for l in (5, 6, 6))
    qn, kn, vn = _np(q), _np(k), _np(v)

    def ref(mask_add=None, scale=None):
        s = qn @ np.swapaxes(kn, -1, -2) * (scale if scale is not None else 1 / np.sqrt(4))
        if mask_add is not None:
            s = s + mask_add
        e = np.exp(s - s.max(-1, keepdims=True))
        return (e / e.sum(-1, keepdims=True)) @ vn

    assert_close(F.scaled_dot_product_attention(q, k, v), ref(), **TOL64)
    assert_close(F.scaled_dot_product_attention(q, k, v, scale=0.3), ref(scale=0.3), **TOL64)
    keep = dt.rand(5, 6) > 0.3
    keep[:, 0] = True                                             # every row keeps one key
    assert_close(F.scaled_dot_product_attention(q, k, v, attn_mask=keep),
                 ref(np.where(np.array(keep.tolist()), 0, -np.inf)), **TOL64)
    bias = rand_tensor((5, 6), dt.float64)
    assert_close(F.scaled_dot_product_attention(q, k, v, attn_mask=bias), ref(_np(bias)), **TOL64)
    causal = np.where(np.tril(np.ones((5, 6))) > 0, 0, -np.inf)
    assert_close(F.scaled_dot_product_attention(q, k, v, is_causal=True), ref(causal), **TOL64)
    assert_raises(ValueError, F.scaled_dot_product_attention, q, k, v, attn_mask=keep, is_causal=True)
    assert_raises(RuntimeError, F.scaled_dot_product_attention, q, rand_tensor((2, 3, 6, 3)), v, match="[2, 3, 6, 3]")


def test_activations():
    require_numpy()
    x = dt.tensor([-40.0, -3.5, -1.0, -0.2, 0.0, 0.3, 1.0, 2.5, 3.5, 40.0], dtype=dt.float64)
    xn = _np(x)
    softplus = np.logaddexp(0, xn)
    assert_close(F.softplus(x), softplus, **TOL64)
    assert_close(F.softplus(x, beta=2, threshold=5), np.where(2 * xn > 5, xn, np.logaddexp(0, 2 * xn) / 2), **TOL64)
    assert_close(F.elu(x, alpha=0.7), np.where(xn > 0, xn, 0.7 * np.expm1(xn)), **TOL64)
    assert_close(F.leaky_relu(x, 0.2), np.where(xn > 0, xn, 0.2 * xn), **TOL64)
    assert_close(F.hardswish(x), xn * np.clip(xn + 3, 0, 6) / 6, **TOL64)
    assert_close(F.mish(x), xn * np.tanh(softplus), **TOL64)
    assert_close(F.hardtanh(x, -2.0, 3.0), np.clip(xn, -2, 3), **TOL64)
    assert_close(F.relu6(x), np.clip(xn, 0, 6), **TOL64)
    assert_close(F.relu(x, inplace=False), np.maximum(xn, 0), **TOL64)
    assert_close(F.silu(x, inplace=False), xn / (1 + np.exp(-xn)), **TOL64)
    r = x.clone()
    F.relu(r, inplace=True)
    assert_close(r, np.maximum(xn, 0), **TOL64)
    assert_raises(ValueError, F.hardtanh, x, 2.0, 1.0, match="min_val")
    g = rand_tensor((3, 6), dt.float64)
    gn = _np(g)
    assert_close(F.glu(g), gn[:, :3] / (1 + np.exp(-gn[:, 3:])), **TOL64)
    assert_close(F.glu(g.T, 0), (gn[:, :3] / (1 + np.exp(-gn[:, 3:]))).T, **TOL64)
    assert_raises(RuntimeError, F.glu, rand_tensor((3, 5)), match=("even", "size 5"))
    y = x.clone()
    F.leaky_relu(y, 0.2, inplace=True)
    assert_close(y, np.where(xn > 0, xn, 0.2 * xn), **TOL64)
    assert_raises(TypeError, F.elu, dt.tensor([1, 2]), match="int64")


def test_normalize_and_group_norm():
    require_numpy()
    seed(1912)
    x = rand_tensor((2, 6, 3, 2), dt.float64)
    xn = _np(x)
    for p in (2.0, 1.0, 3.0, float("inf")):
        norm = np.linalg.norm(np.moveaxis(xn, 1, -1), ord=p, axis=-1)[:, None]
        assert_close(F.normalize(x, p=p), xn / np.maximum(norm, 1e-12), **TOL64)
    assert_close(F.normalize(dt.zeros(2, 3)), np.zeros((2, 3)))          # eps keeps 0/0 away
    w, b = rand_tensor((6,), dt.float64), rand_tensor((6,), dt.float64)
    g = xn.reshape(2, 3, -1)
    ref = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-5)).reshape(xn.shape)
    assert_close(F.group_norm(x, 3, w, b), ref * _np(w)[:, None, None] + _np(b)[:, None, None], **TOL64)
    assert_close(dt.group_norm(x, 3), ref, **TOL64)
    assert_raises(RuntimeError, F.group_norm, x, 4, match=("[2, 6, 3, 2]", "num_groups=4"))
    assert_raises(RuntimeError, F.group_norm, x, 3, dt.ones(5), match="[5]")


def test_batch_norm_inference_and_training_statistics():
    require_numpy()
    seed(1913)
    x = rand_tensor((4, 3, 5), dt.float64)
    xn = _np(x)
    rm, rv = rand_tensor((3,), dt.float64), rand_tensor((3,), dt.float64, 0.5, 2)
    w, b = rand_tensor((3,), dt.float64), rand_tensor((3,), dt.float64)
    rmn, rvn = _np(rm), _np(rv)
    ref = (xn - rmn[:, None]) / np.sqrt(rvn[:, None] + 1e-5) * _np(w)[:, None] + _np(b)[:, None]
    assert_close(F.batch_norm(x, rm, rv, w, b), ref, **TOL64)
    mean, var = xn.mean((0, 2)), xn.var((0, 2))
    ref = (xn - mean[:, None]) / np.sqrt(var[:, None] + 1e-3)
    assert_close(F.batch_norm(x, rm, rv, training=True, momentum=0.3, eps=1e-3), ref, **TOL64)
    assert_close(rm, 0.7 * rmn + 0.3 * mean, **TOL64)                   # running stats updated in place
    assert_close(rv, 0.7 * rvn + 0.3 * xn.var((0, 2), ddof=1), **TOL64)  # with the unbiased variance
    assert_close(F.batch_norm(x, None, None, training=True), (xn - mean[:, None]) / np.sqrt(var[:, None] + 1e-5),
                 **TOL64)
    assert_raises(ValueError, F.batch_norm, x, None, None, match="evaluation mode")
    assert_raises(ValueError, F.batch_norm, dt.ones(1, 3), None, None, training=True, match="[1, 3]")
    assert_raises(RuntimeError, F.batch_norm, x, dt.zeros(4), dt.ones(4), match=("running_mean", "[4]"))


def nn_block(x, w, b, rm, rv, mask):
    h = F.linear(x, w, b)
    h = F.batch_norm(h.transpose(1, 2), rm, rv, training=True).transpose(1, 2)
    h = F.mish(F.leaky_relu(F.elu(F.softplus(h)), 0.1)) + F.hardswish(h)
    h = F.normalize(h, dim=-1) + F.glu(dt.cat([h, h], -1))
    a = F.scaled_dot_product_attention(h, h, h, attn_mask=mask)
    g = F.group_norm(a.transpose(1, 2), 2)
    return F.dropout(g, 0.2) + F.dropout(g, training=False)


def _block_inputs(i):
    n = 3 + i
    return Call(rand_tensor((2, n, 4)), rand_tensor((6, 4)), rand_tensor((6,)), dt.zeros(6), dt.ones(6),
                dt.rand(n, n) > 0.2)


def _same_draws(fn, jfn, rtol=None, atol=None):
    """run_differential builds both calls' inputs before either runs, which would give the two
    runs' dropout different draws: here each run seeds, builds its inputs, then runs."""
    for i in range(2):
        runs = []
        for f in (fn, jfn):
            dt.manual_seed(1914 + i)
            args = _block_inputs(i).args
            runs.append((f(*args), args[3], args[4]))
        for got, want in zip(runs[1], runs[0]):               # result, running mean and var
            assert_close(got, want, rtol=rtol, atol=atol, msg="call %d" % i)


def test_nn_functions_under_jit_match_eager_without_breaks():
    dt.reset()
    _same_draws(nn_block, jitted_copy(nn_block))
    s = stats()
    assert s["graph_breaks"] == 0 and s["fallbacks"] == 0, s["break_reasons"]
    # cpu backend: fused sums in another order; the deepest chain sums 6 terms a few times over.
    jfn = jitted_copy(nn_block, backend="cpu")
    _same_draws(nn_block, jfn, rtol=1e-4, atol=1e-5)
    assert kernel_count(jfn) >= 1


def test_inplace_activation_under_jit_breaks_with_a_reason_and_writes():
    def f(x):
        F.elu(x, inplace=True)
        return x * 2

    dt.reset()
    jfn = jitted_copy(f)
    run_differential(f, jfn, lambda i: Call(rand_tensor((3, 4))), 2, seed_base=1915)
    reasons = " ".join(str(r) for r in stats()["break_reasons"])
    assert "inplace=True" in reasons, reasons


def via_module_attributes(x):
    return dt.nn.functional.relu(x) + F.gelu(x) + dt.nn.functional.linear(x, x)


def test_calls_through_nn_functional_trace_as_dyntrace_ops():
    dt.reset()
    jfn = jitted_copy(via_module_attributes)
    run_differential(via_module_attributes, jfn, lambda i: Call(rand_tensor((3, 3))), 2, seed_base=1916)
    s = stats()
    assert s["graph_breaks"] == 0 and s["fallbacks"] == 0, s["break_reasons"]
    graph = "\n".join(dt.graphs(jfn))
    assert "dyntrace.relu(" in graph and "dyntrace.linear(" in graph, graph
