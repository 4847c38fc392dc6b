"""Automatic dynamic sizes and numbers (issue 17): a size Python reads, or an int/float argument,
that changes between calls becomes a run-time value after one recompile; shapes built from it
reach the graph as symbolic sizes (`reshape(v0, shape=(s0, -1))`), so new values hit the cache.
Every call is compared with plain CPython on the same inputs, bit for bit (both backends promise
eager's results element for element)."""
import math

import dyntrace as dt
from jitlib import assert_same, jitted_copy, stats
from testlib import assert_raises, rand_tensor, seed

BACKENDS = ("eager", "cpu")


def reshape_by_batch(x):
    B = x.shape[0]
    return x.reshape(B, -1) * 2 + B


def attention_like(x, w):
    B, T, D = x.shape
    H = 2
    q = (x @ w).view(B, T, H, D // H).transpose(1, 2)
    att = (q @ q.transpose(-2, -1)) * (1.0 / math.sqrt(D // H))
    att = att.softmax(-1)
    return (att @ q).transpose(1, 2).reshape(B, T, D)


def masked_attention(x, w, mask):
    # Slices and stores bounded by symbolic sizes (`mask[:T, :T]`, `y[:, T - 1:] = 0`).
    B, T, C = x.shape
    q = (x @ w).view(B, T, 2, C // 2).transpose(1, 2)
    att = (q @ q.transpose(-2, -1)) * (1.0 / math.sqrt(C // 2)) + mask[:T, :T]
    y = (att.softmax(-1) @ q).transpose(1, 2).reshape(B, T, C)
    y[:, T - 1:] = 0
    return y[:, -T // 2:]


def block_reading_intermediate_sizes(x, w1, w2, g, b):
    y, shape = block(x, w1, w2, g, b)  # inlined
    return y, shape, (y + b.unsqueeze(0)).shape[0] + dt.cat([y, y]).shape[0]


def sgd_step(p, g, lr, momentum):
    return p - lr * (g + momentum * p)


def scaled_by_int(x, k):
    return x * (k * 2 + 1) - k


def mean_of_rows(x):
    return x.sum(0) / x.size(0) + x.numel() / len(x)


def branch_on_size(x):
    if x.shape[0] > 16:
        return x * 2
    return x - 1


def zeros_like_rows(x):
    B, D = x.shape
    return dt.zeros(B, D + 1) + B


def _run(fn, backend, calls, **options):
    """fn under jit on `backend` against plain fn over `calls` (argument tuples); the stats."""
    dt.reset()
    jfn = jitted_copy(fn, backend=backend, **options)
    for args in calls:
        assert_same(jfn(*args), fn(*args), exact=True)
    return stats()


def _sizes_1_to_89():
    return [1, 2, 3, 5, 8, 13, 21, 34, 55, 89]


def test_a_batch_size_read_by_python_traces_at_most_twice():
    seed(1701)
    calls = [(rand_tensor((b, 3, 4)),) for b in _sizes_1_to_89()]
    for backend in BACKENDS:
        s = _run(reshape_by_batch, backend, calls)
        assert s["frames_traced"] <= 2 and s["fallbacks"] == 0, (backend, s["recompile_reasons"])


def test_dynamic_true_traces_once_for_sizes_from_two():
    seed(1702)
    calls = [(rand_tensor((b, 5)),) for b in _sizes_1_to_89()[1:]]
    for backend in BACKENDS:
        s = _run(reshape_by_batch, backend, calls, dynamic=True)
        assert s["frames_traced"] == 1 and s["recompiles"] == 0, (backend, s["recompile_reasons"])


def test_dynamic_false_specialises_every_size():
    seed(1703)
    calls = [(rand_tensor((b, 5)),) for b in (2, 3, 4)]
    s = _run(reshape_by_batch, "eager", calls, dynamic=False)
    assert s["frames_traced"] == 3, s["recompile_reasons"]


def test_attention_over_batch_and_sequence_pairs():
    seed(1704)
    w = rand_tensor((8, 8))
    pairs = [(2, 3), (3, 5), (4, 7), (5, 2), (2, 9), (6, 4), (3, 3), (7, 6)]
    calls = [(rand_tensor((b, t, 8)), w) for b, t in pairs]
    for backend in BACKENDS:
        s = _run(attention_like, backend, calls)
        assert s["frames_traced"] <= 2 and s["fallbacks"] == 0, (backend, s["recompile_reasons"])


def test_slices_bounded_by_symbolic_sizes():
    seed(1712)
    w, mask = rand_tensor((8, 8)), rand_tensor((16, 16))
    pairs = [(2, 3), (3, 5), (4, 7), (5, 2), (2, 9), (6, 4), (3, 3), (7, 6)]
    calls = [(rand_tensor((b, t, 8)), w, mask) for b, t in pairs]
    for backend in BACKENDS:
        s = _run(masked_attention, backend, calls)
        assert s["frames_traced"] <= 2 and s["graph_breaks"] == 0, (backend, s["recompile_reasons"])


def test_sizes_of_intermediates_follow_the_inputs_sizes():
    # cat has no shape rule: its size specialises the inputs' sizes (still correct, one trace
    # per batch size there); the rest stay symbolic.
    seed(1713)
    w1, w2, g, b = rand_tensor((8, 8)), rand_tensor((8, 8)), rand_tensor((8,)), rand_tensor((8,))
    pairs = [(2, 3), (3, 5), (4, 7), (5, 2), (2, 9), (6, 4), (3, 3), (7, 6)]
    calls = [(rand_tensor((bb, t, 8)), w1, w2, g, b) for bb, t in pairs]
    for backend in BACKENDS:
        _run(block_reading_intermediate_sizes, backend, calls)
        s = _run(block, backend, calls)
        assert s["frames_traced"] <= 2 and s["graph_breaks"] == 0, (backend, s["recompile_reasons"])


def block(x, w1, w2, g, b):
    # nanoGPT's shape: sizes read from what the layer norm, views and matmuls made.
    h = dt.layer_norm(x, (x.shape[-1],), g, b)
    B, T, C = h.size()
    q = (h @ w1).view(B, T, 2, C // 2).transpose(1, 2)
    att = ((q @ q.transpose(-2, -1)) * (1.0 / math.sqrt(q.size(-1)))).softmax(dim=-1)
    y = x + (att @ q).transpose(1, 2).contiguous().view(B, T, C) @ w2
    return y.reshape(-1, C)[: B * y.sum(-1).shape[1] // 2], y.mean(1).shape


def test_float_hyperparameters_and_int_arguments():
    seed(1705)
    p, g = rand_tensor((6,)), rand_tensor((6,))
    calls = [(p, g, 0.1 / (i + 1), 0.9 - 0.01 * i) for i in range(12)]
    for backend in BACKENDS:
        s = _run(sgd_step, backend, calls)
        # Float arguments are run-time numbers from the first trace: one trace, one kernel.
        assert s["frames_traced"] == 1, (backend, s["recompile_reasons"])
        if backend == "cpu":
            assert s["kernels_compiled"] + s["kernels_from_disk"] <= 1, s
        calls_k = [(p, k) for k in range(3, 15)]
        s = _run(scaled_by_int, backend, calls_k)
        assert s["frames_traced"] <= 2, (backend, s["recompile_reasons"])


def test_size_and_numel_and_len_are_symbolic_together():
    seed(1706)
    calls = [(rand_tensor((b, 3)),) for b in (4, 6, 9, 11, 30)]
    for backend in BACKENDS:
        s = _run(mean_of_rows, backend, calls)
        assert s["frames_traced"] <= 2, (backend, s["recompile_reasons"])
        s = _run(zeros_like_rows, backend, calls)
        assert s["frames_traced"] <= 2, (backend, s["recompile_reasons"])


def test_a_branch_on_a_symbolic_size_guards_the_comparison():
    # The comparison decides control flow: the trace guards `L['x'].size(0) > 16` (or its
    # negation), not the value, so one trace per direction serves every size.
    seed(1707)
    calls = [(rand_tensor((b, 2)),) for b in (4, 20, 5, 30, 16, 17, 9, 40)]
    for backend in BACKENDS:
        s = _run(branch_on_size, backend, calls)
        assert s["frames_traced"] == 3, (backend, s["recompile_reasons"])
    dt.reset()
    jfn = jitted_copy(branch_on_size, backend="eager")
    for b in (4, 20, 5):
        jfn(rand_tensor((b, 2)))
    guards = "\n".join(dt.guards(jfn))
    assert "not (L['x'].size(0) > 16)" in guards and "\nL['x'].size(0) > 16  #" in guards, guards


def test_symbolic_sizes_are_printed_in_graphs_and_guards():
    seed(1708)
    dt.reset()
    jfn = jitted_copy(reshape_by_batch, backend="eager")
    for b in (3, 4, 5):
        jfn(rand_tensor((b, 2)))
    graph, guards = dt.graphs(jfn)[-1], "\n".join(dt.guards(jfn))
    assert "shape=(s0, -1)" in graph and "v0: f32[s0, 2]" in graph, graph
    assert "# s0 = L['x'].size(0)" in graph, graph
    assert "L['x'].size(0) >= 2" in guards, guards


def test_explain_of_a_callable_shows_the_symbols_it_learned():
    # explain() traces afresh, but from what the callable learned: after a batch size changed,
    # it shows the symbolic graph and its relations, not a graph specialised to this call.
    seed(1712)
    dt.reset()
    jfn = jitted_copy(reshape_by_batch, backend="eager")
    fresh = dt.explain(jfn, rand_tensor((6, 2)))
    assert "v0: f32[6, 2]" in fresh.graphs[0], fresh.graphs[0]
    for b in (3, 4):
        jfn(rand_tensor((b, 2)))
    learned = dt.explain(jfn, rand_tensor((6, 2)))
    assert "v0: f32[s0, 2]" in learned.graphs[0] and "# s0 = L['x'].size(0)" in learned.graphs[0], learned.graphs[0]
    assert "L['x'].size(0) >= 2" in learned.guards[0], learned.guards[0]
    assert len(dt.graphs(jfn)) == 2  # explain neither used nor added entries of the callable


def view_by_batch(x, n):
    B = x.shape[0]
    return x.view(B, n)


def test_an_impossible_symbolic_shape_raises_what_eager_raises():
    seed(1709)
    for backend in BACKENDS:
        dt.reset()
        jfn = jitted_copy(view_by_batch, backend=backend)
        for b in (2, 3, 4):
            x = rand_tensor((b, 6))
            assert_same(jfn(x, 6), view_by_batch(x, 6))
        bad = rand_tensor((5, 6))
        try:
            view_by_batch(bad, 7)
        except RuntimeError as e:
            expected = str(e)
        assert_raises(RuntimeError, jfn, bad, 7, match=(expected,))


def rows_times_two(x):
    return x.reshape(x.shape[0], -1) * 2


def rows_in_a_range(x):
    acc = x[0] * 0
    for i in range(x.shape[0]):  # unrolled: needs the size's value
        acc = acc + x[i]
    return acc


def test_mark_dynamic_traces_once_and_mark_static_never_generalises():
    seed(1710)
    for backend in BACKENDS:
        dt.reset()
        jfn = jitted_copy(rows_times_two, backend=backend)
        for b in (3, 5, 9, 17):
            x = rand_tensor((b, 4))
            dt.mark_dynamic(x, 0)
            assert_same(jfn(x), rows_times_two(x), exact=True)
        assert stats()["frames_traced"] == 1, stats()["recompile_reasons"]
        dt.reset()
        jfn = jitted_copy(rows_times_two, backend=backend)
        for b in (3, 5, 9):
            x = rand_tensor((b, 4))
            dt.mark_static(x, [0])
            assert_same(jfn(x), rows_times_two(x), exact=True)
        assert stats()["frames_traced"] == 3, stats()["recompile_reasons"]


def test_mark_dynamic_on_a_size_the_code_needs_raises_naming_it():
    seed(1711)
    dt.reset()
    jfn = jitted_copy(rows_in_a_range, backend="eager")
    x = rand_tensor((4, 3))
    dt.mark_dynamic(x, 0)
    assert_raises(RuntimeError, jfn, x, match=("L['x'].size(0) was marked dynamic", "line"))
    assert_raises(IndexError, dt.mark_dynamic, x, 2, match=("Dimension out of range",))
    assert_raises(TypeError, dt.mark_dynamic, [1], 0, match=("Tensor",))
    y = rand_tensor((4, 3))
    assert_same(jfn(y), rows_in_a_range(y), exact=True)  # unmarked: compiles as usual
