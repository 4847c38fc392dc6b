"""Indexing with tensors, gathers and scatters under dt.jit: on the eager and cpu backends the
compiled function gives plain eager's results bit for bit (jitlib.run_differential, exact), with
no graph break; out-of-range indices raise the same IndexError from compiled code; ops whose
result size is the data's (x[mask], nonzero, where(cond), masked_select, one_hot without
num_classes) break the graph with a reason that says so, and still give eager's results."""
import dyntrace as dt
from cpulib import kernel_count
from jitlib import Call, jitted_copy, run_differential, stats
from testlib import assert_raises, noncontig, rand_tensor

BACKENDS = ("eager", "cpu")


def check(fn, factory, breaks=0, calls=3):
    for backend in BACKENDS:
        dt.reset()
        jfn = jitted_copy(fn, backend=backend)
        run_differential(fn, jfn, factory, calls, seed_base=19, exact=True)
        s = stats()
        assert s["graph_breaks"] == breaks, (fn.__name__, backend, s["break_reasons"])
        assert s["fallbacks"] == 0, (fn.__name__, backend, s["fallback_reasons"])
    return jfn


def indices(n, size):
    return (dt.rand(n) * (2 * size) - size).floor().long()   # negative ones too


def read_with_tensors(x, t, u):
    a = x[:, t] * 2 + 1                 # a gather between fused kernels
    b = x[t, :, u].sum(0)               # separated: the broadcast dim goes first
    c = x[t[0]][[1, -1]] - x[[1, -1], 0]  # 0-d index tensor, int lists
    return a.relu(), b, c


def test_reading_through_index_tensors_compiles_without_a_break():
    check(read_with_tensors, lambda i: Call(noncontig((4, 5, 6)) if i % 2 else rand_tensor((4, 5, 6)),
                                            indices(3, 4) % 4 if i == 2 else indices(3, 4), indices(3, 6)))


def write_with_tensors(x, t, v):
    y = x.clone()
    y[t] = v                            # broadcast over rows
    y[:, t[:2]] += 1.0                  # read, add, write back
    y.index_put_((t,), v.unsqueeze(0).expand(t.shape[0], -1), accumulate=True)
    y[y > 1.5] = 0.0                    # a mask write has no data-dependent size
    return y * 3


def mask_rows_write(x, v):
    x[x[:, 0] > 0] = v          # v broadcasts over any number of True rows
    return x * 1


def test_writing_through_index_tensors_and_masks_compiles_without_a_break():
    check(write_with_tensors, lambda i: Call(rand_tensor((5, 4)), dt.tensor([1, -1, 1, 3]), rand_tensor((4,))))
    check(mask_rows_write, lambda i: Call(rand_tensor((5, 3)), rand_tensor((3,))))


def gathers(x, idx, w, t):
    g = dt.gather(x, 1, idx)
    s = dt.scatter_add(dt.zeros_like(x), 1, idx, g)
    sel = x.index_select(0, t % x.shape[0])
    e = dt.embedding(t % w.shape[0], w, padding_idx=0)
    taken = dt.take_along_dim(x, idx, dim=1)
    oh = dt.one_hot(t % 4, 4)
    return g.exp(), s, sel, e.tanh(), taken, oh, x.scatter(0, idx[:1], 1.5)


def test_gather_scatter_embedding_compile_without_a_break():
    check(gathers, lambda i: Call(rand_tensor((3, 5)), (dt.rand(3, 5) * 5).floor().long(), rand_tensor((7, 2)),
                                  indices(4, 3)))


def masked(x, y):
    return (dt.masked_fill(x, y > 0, -1.0) * 2).sum(1), x.masked_fill(x < 0, dt.tensor(0.5))


def test_masked_fill_fuses_with_its_neighbours():
    check(masked, lambda i: Call(rand_tensor((4, 6)), rand_tensor((6,))))
    dt.reset()
    jfn = jitted_copy(masked, backend="cpu")
    jfn(rand_tensor((4, 6)), rand_tensor((6,)))
    # The first masked_fill is a `where` inside the kernel that multiplies and sums its rows.
    sources = dt.kernels(jfn)
    assert any("scalar::where" in k and "reduce_sum" in k for k in sources), sources


def out_of_range(x, t):
    return x[t] + 1


def gather_out_of_range(x, idx):
    return dt.gather(x, 0, idx) * 2


def test_out_of_range_indices_raise_index_error_from_compiled_code():
    for backend in BACKENDS:
        dt.reset()
        f = jitted_copy(out_of_range, backend=backend)
        x = dt.zeros(4, 3)
        assert f(x, dt.tensor([0, 3])).shape == (2, 3)
        assert_raises(IndexError, f, x, dt.tensor([0, 4]), match=("index 4", "size 4"))
        assert_raises(IndexError, f, x, dt.tensor([-5]), match=("index -5", "size 4"))
        g = jitted_copy(gather_out_of_range, backend=backend)
        assert g(x, dt.tensor([[3, 0, 1]])).shape == (1, 3)
        assert_raises(IndexError, g, x, dt.tensor([[3, 9, 1]]), match=("index 9", "size 4"))
        assert stats()["graph_breaks"] == 0


def mask_read(x):
    return x[x > 0].sum() * 2


def nonzero_count(x):
    return dt.nonzero(x > 0).shape[0] + x.sum()


def one_hot_inferred(t):
    return dt.one_hot(t) * 2


def mask_write_with_a_vector(x, v):
    x[x > 0] = v                # v lines up with the True elements: how many depends on the data
    return x


def test_data_dependent_sizes_break_the_graph_with_a_reason():
    cases = [(mask_read, lambda i: Call(rand_tensor((3, 4))), "x[mask]"),
             (nonzero_count, lambda i: Call(rand_tensor((5,))), "nonzero"),
             (one_hot_inferred, lambda i: Call(dt.tensor([0, 2, 1])), "one_hot"),
             (mask_write_with_a_vector, lambda i: Call(dt.tensor([1.0, -2.0, 3.0]), dt.tensor([7.0, 8.0])),
              "x[mask] = v")]
    for fn, factory, what in cases:
        for backend in BACKENDS:
            dt.reset()
            jfn = jitted_copy(fn, backend=backend)
            run_differential(fn, jfn, factory, 2, seed_base=23, exact=True)
            s = stats()
            assert s["graph_breaks"] >= 1, (fn.__name__, s)
            reasons = " ".join(s["break_reasons"])
            assert what in reasons and ("True" in reasons or "nonzero" in reasons or "largest" in reasons), reasons
