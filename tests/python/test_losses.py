"""dyntrace.nn.functional's losses (cross_entropy, nll_loss, mse_loss, l1_loss, smooth_l1_loss,
binary_cross_entropy_with_logits, kl_div) against float64 numpy references, and under dt.jit
(eager and cpu backends) against plain eager, without graph breaks.

Error model: a float32 loss element is a few roundings of values of size ~|x| (log_softmax adds
a sum of C exponentials: C*eps relative), and a reduction sums n of them: |error| <=
k * n * eps32 * sum|terms|. The tolerances below are that bound with k = 4."""
import dyntrace as dt
import dyntrace.nn.functional as F
from cpulib import check_traced_and_compiled
from jitlib import Call
from testlib import assert_close, assert_raises, np, rand_tensor, require_numpy, seed

EPS32 = 2.0 ** -23


def _np(t):
    return np.array(t.tolist(), dtype=np.float64)


def _log_softmax(x, axis):
    s = x - x.max(axis=axis, keepdims=True)
    return s - np.log(np.exp(s).sum(axis=axis, keepdims=True))


def _tol(terms):
    """Absolute tolerance for a float32 result made of these float64 reference terms."""
    terms = np.abs(np.asarray(terms, dtype=np.float64))
    return 4.0 * max(terms.size, 1) * EPS32 * max(float(terms.sum()), 1.0)


def _reduce(loss, reduction, denominator=None):
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    return loss.sum() / (loss.size if denominator is None else denominator)


def _ref_cross_entropy(x, t, weight=None, ignore_index=-100, reduction="mean", eps=0.0):
    """Class dim 1 (or 0 for a 1-d input), as PyTorch."""
    dim = 0 if x.ndim == 1 else 1
    logp = np.moveaxis(_log_softmax(x, dim), dim, -1)      # [..., C]
    c = logp.shape[-1]
    w = np.ones(c) if weight is None else weight
    if t.dtype.kind == "f":                                # class probabilities
        t = np.moveaxis(t, dim, -1) * (1 - eps) + eps / c
        loss = -(logp * t * w).sum(-1)
        return _reduce(loss, reduction)
    valid = t != ignore_index
    safe = np.where(valid, t, 0)
    picked = np.take_along_axis(logp, safe[..., None], -1)[..., 0]
    wt = np.where(valid, w[safe], 0.0)
    loss = -(1 - eps) * picked * wt - eps * np.where(valid, (logp * w).sum(-1) / c, 0.0)
    return _reduce(loss, reduction, wt.sum())


def test_nn_functional_is_a_module_of_registry_ops():
    import sys
    import dyntrace.nn
    assert sys.modules["dyntrace.nn"] is dt.nn and sys.modules["dyntrace.nn.functional"] is F
    assert dt.nn.functional is F and type(dt.nn).__name__ == "module"
    for name in ("relu", "gelu", "silu", "softmax", "log_softmax", "layer_norm", "embedding", "one_hot"):
        assert getattr(F, name) is getattr(dt, name), name     # one op, two names
    assert not hasattr(dt, "cross_entropy") and hasattr(F, "cross_entropy")
    dt.nn.Extra = 1                                            # a plain module: others extend it
    del dt.nn.Extra


def test_cross_entropy_class_indices():
    require_numpy()
    seed(1901)
    for shape, tshape in (((6, 5), (6,)), ((5,), ()), ((3, 4, 2, 3), (3, 2, 3))):
        x = rand_tensor(shape, dt.float32, -4, 4)
        c = shape[0] if len(shape) == 1 else shape[1]
        t = (dt.rand(*tshape) * c).floor().long() if tshape else dt.tensor(2)
        w = rand_tensor((c,), dt.float32, 0.1, 2.0)
        for kwargs in ({}, {"weight": w}, {"ignore_index": 1}, {"label_smoothing": 0.2},
                       {"weight": w, "ignore_index": 0, "label_smoothing": 0.1}):
            ref_kwargs = {"weight": _np(w) if "weight" in kwargs else None,
                          "ignore_index": kwargs.get("ignore_index", -100),
                          "eps": kwargs.get("label_smoothing", 0.0)}
            for reduction in ("mean", "sum", "none"):
                got = F.cross_entropy(x, t, reduction=reduction, **kwargs)
                want = _ref_cross_entropy(_np(x), np.array(t.tolist()), reduction=reduction, **ref_kwargs)
                assert_close(got, want, rtol=0, atol=_tol(want) + _tol(_np(x)) / max(np.size(want), 1),
                             dtype=dt.float32, msg=str((shape, kwargs, reduction)))


def test_cross_entropy_probabilities_and_nll():
    require_numpy()
    seed(1902)
    x = rand_tensor((4, 3, 5), dt.float64, -3, 3)
    p = dt.softmax(rand_tensor((4, 3, 5), dt.float64), 1)
    for eps in (0.0, 0.3):
        want = _ref_cross_entropy(_np(x), _np(p), eps=eps)
        assert_close(F.cross_entropy(x, p, label_smoothing=eps), want, rtol=1e-12, atol=1e-12)
    w = dt.tensor([0.5, 1.0, 2.0], dtype=dt.float64)
    want = _ref_cross_entropy(_np(x), _np(p), weight=_np(w), reduction="sum")
    assert_close(F.cross_entropy(x, p, weight=w, reduction="sum"), want, rtol=1e-12, atol=1e-12)
    # nll_loss of log-probabilities is cross_entropy of the logits.
    logp = dt.log_softmax(x, 1)
    t = dt.tensor([[0, 1, 2, 0, 1]] * 4)
    for reduction in ("mean", "sum", "none"):
        assert_close(F.nll_loss(logp, t, weight=w, ignore_index=2, reduction=reduction),
                     F.cross_entropy(x, t, weight=w, ignore_index=2, reduction=reduction), rtol=1e-12, atol=1e-12)
    # Legacy flags override reduction, as PyTorch.
    assert F.nll_loss(logp, t, reduce=False).shape == (4, 5)
    assert_close(F.nll_loss(logp, t, size_average=False), F.nll_loss(logp, t, reduction="sum"))
    # Every target ignored: 0/0, NaN as PyTorch.
    assert F.nll_loss(logp, dt.full((4, 5), -100, dtype=dt.int64)).isnan().item()


def test_loss_errors_name_shapes_and_dtypes():
    x, t = dt.randn(3, 4), dt.tensor([0, 1, 3])
    assert_raises(ValueError, F.cross_entropy, x, dt.tensor([0, 1]), match=("batch_size (3)", "(2)"))
    assert_raises(RuntimeError, F.cross_entropy, x, t.int(), match="int64")
    assert_raises(RuntimeError, F.cross_entropy, x, t, weight=dt.ones(3), match=("4 classes", "[3]"))
    assert_raises(IndexError, F.cross_entropy, x, dt.tensor([0, 1, 4]), match="4")
    assert_raises(IndexError, F.nll_loss, x, dt.tensor([0, -1, 2]), match="-1")
    assert_raises(RuntimeError, F.cross_entropy, x, dt.rand(3, 5), match=("[3, 4]", "[3, 5]"))
    assert_raises(ValueError, F.cross_entropy, x, t, reduction="avg", match="avg")
    assert_raises(ValueError, F.cross_entropy, x, t, label_smoothing=1.5, match="1.5")
    assert_raises(TypeError, F.mse_loss, dt.tensor([1, 2]), dt.tensor([1, 2]), match="int64")
    assert_raises(ValueError, F.binary_cross_entropy_with_logits, x, dt.rand(3), match=("[3]", "[3, 4]"))
    assert_raises(ValueError, F.smooth_l1_loss, x, x, beta=-1.0, match="beta")


def test_regression_losses():
    require_numpy()
    seed(1903)
    a, b = rand_tensor((5, 7), dt.float64, -3, 3), rand_tensor((5, 7), dt.float64, -3, 3)
    d = _np(a) - _np(b)
    ad = np.abs(d)
    refs = {
        "mse_loss": (F.mse_loss, d * d, {}),
        "l1_loss": (F.l1_loss, ad, {}),
        "smooth_l1_loss": (F.smooth_l1_loss, np.where(ad < 0.7, 0.5 * d * d / 0.7, ad - 0.35), {"beta": 0.7}),
    }
    for name, (fn, loss, kwargs) in refs.items():
        for reduction in ("mean", "sum", "none"):
            assert_close(fn(a, b, reduction=reduction, **kwargs), _reduce(loss, reduction),
                         rtol=1e-12, atol=1e-12, msg=name)
    assert_close(F.smooth_l1_loss(a, b, beta=0.0), ad.mean(), rtol=1e-12, atol=1e-12)
    assert F.mse_loss(a.float(), b.float()).dtype == dt.float32


def test_bce_with_logits_and_kl_div():
    require_numpy()
    seed(1904)
    x = rand_tensor((6, 4), dt.float64, -30, 30)      # large logits: the stable form stays finite
    t = dt.rand(6, 4, dtype=dt.float64)
    w, pw = dt.rand(4, dtype=dt.float64), dt.rand(4, dtype=dt.float64) * 3
    xn, tn, wn, pwn = _np(x), _np(t), _np(w), _np(pw)
    log_sig, log_one_minus = -np.logaddexp(0, -xn), -np.logaddexp(0, xn)
    ref = -(pwn * tn * log_sig + (1 - tn) * log_one_minus) * wn
    got = F.binary_cross_entropy_with_logits(x, t, weight=w, pos_weight=pw, reduction="none")
    assert_close(got, ref, rtol=1e-12, atol=1e-12)
    assert_close(F.binary_cross_entropy_with_logits(x, t), (-(tn * log_sig + (1 - tn) * log_one_minus)).mean(),
                 rtol=1e-12, atol=1e-12)
    logq = dt.log_softmax(rand_tensor((3, 5), dt.float64), 1)
    p = dt.softmax(rand_tensor((3, 5), dt.float64), 1)
    p[0, 0] = 0.0                                      # 0 * log 0 counts as 0
    pn, lq = _np(p), _np(logq)
    with np.errstate(divide="ignore"):
        elem = np.where(pn > 0, pn * (np.log(np.where(pn > 0, pn, 1)) - lq), 0.0)
    assert_close(F.kl_div(logq, p, reduction="batchmean"), elem.sum() / 3, rtol=1e-12, atol=1e-12)
    assert_close(F.kl_div(logq, p, reduction="sum"), elem.sum(), rtol=1e-12, atol=1e-12)
    assert_close(F.kl_div(logq, p), elem.mean(), rtol=1e-12, atol=1e-12)
    logp = dt.log_softmax(rand_tensor((3, 5), dt.float64), 1)
    assert_close(F.kl_div(logq, logp, reduction="none", log_target=True),
                 np.exp(_np(logp)) * (_np(logp) - lq), rtol=1e-12, atol=1e-12)


def losses(x, t, p, y):
    return (F.cross_entropy(x, t, label_smoothing=0.1), F.cross_entropy(x, p),
            F.nll_loss(F.log_softmax(x, 1), t, ignore_index=0, reduction="sum"),
            F.mse_loss(x, y), F.l1_loss(x, y, reduction="none"), F.smooth_l1_loss(x, y, beta=0.5),
            F.binary_cross_entropy_with_logits(x, p), F.kl_div(F.log_softmax(x, 1), p, reduction="batchmean"))


def _loss_inputs(i):
    n = 4 + 2 * i                                       # a new batch size on the second call
    x = rand_tensor((n, 5))
    return Call(x, (dt.rand(n) * 5).floor().long(), dt.softmax(rand_tensor((n, 5)), 1), rand_tensor((n, 5)))


def test_losses_under_jit_match_eager_without_breaks():
    # cpu backend: the composites decompose and fuse; sums in another order, so 8 eps of slack
    # per term of a 20-element sum.
    check_traced_and_compiled(losses, _loss_inputs, 1905, rtol=2e-5, atol=2e-5)
