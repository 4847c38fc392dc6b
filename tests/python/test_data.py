"""dyntrace.utils.data: datasets, samplers, collation and DataLoader against torch.utils.data's
rules written out (batches as plain slices, permutations covering every index once, the
collated structure), against torch.utils.data itself where PyTorch is importable, and a
training loop over a shuffled DataLoader with the step compiled."""
from collections import namedtuple

import dyntrace as dt
from dyntrace.utils.data import (BatchSampler, ConcatDataset, DataLoader, Dataset, RandomSampler, SequentialSampler,
                                 Subset, TensorDataset, default_collate, random_split)
from testlib import assert_raises, skip

try:
    import torch
    import torch.utils.data as torch_data
except ImportError:  # pyenv's interpreters have no torch
    torch = None


def test_tensor_dataset_and_sequential_batches():
    x, y = dt.arange(20.0).reshape(10, 2), dt.arange(10)
    ds = TensorDataset(x, y)
    assert len(ds) == 10 and [t.tolist() for t in ds[3]] == [[6.0, 7.0], 3]
    assert_raises(AssertionError, TensorDataset, x, dt.arange(9), match="Size mismatch between tensors")
    loader = DataLoader(ds, batch_size=4)
    batches = list(loader)
    assert len(loader) == 3 and len(batches) == 3
    for k, (xb, yb) in enumerate(batches):  # plain slices, the last one short
        assert xb.tolist() == x[4 * k:4 * k + 4].tolist() and yb.tolist() == y[4 * k:4 * k + 4].tolist()
    assert len(DataLoader(ds, batch_size=4, drop_last=True)) == 2
    assert [b[1].tolist() for b in DataLoader(ds, batch_size=4, drop_last=True)] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    # The one-op fast path for TensorDataset equals stacking the samples one by one.
    slow = list(DataLoader(ds, batch_size=4, collate_fn=default_collate))
    assert [[t.tolist() for t in b] for b in slow] == [[t.tolist() for t in b] for b in batches]
    # batch_size=None: samples one by one, uncollated.
    assert [s[1].item() for s in DataLoader(ds, batch_size=None)] == list(range(10))


def test_shuffle_draws_a_permutation_per_epoch_from_the_generator():
    ds = TensorDataset(dt.arange(50))
    dt.manual_seed(3)
    loader = DataLoader(ds, batch_size=8, shuffle=True)
    epochs = [[i for (b,) in loader for i in b.tolist()] for _ in range(2)]
    assert all(sorted(e) == list(range(50)) for e in epochs) and epochs[0] != epochs[1]
    assert epochs[0] != list(range(50))
    dt.manual_seed(3)
    assert [i for (b,) in DataLoader(ds, batch_size=8, shuffle=True) for i in b.tolist()] == epochs[0]
    with_replacement = list(RandomSampler(ds, replacement=True, num_samples=70))
    assert len(with_replacement) == 70 and all(0 <= i < 50 for i in with_replacement)
    assert len(list(RandomSampler(ds, num_samples=120))) == 120  # permutations chained
    assert_raises(ValueError, DataLoader, ds, sampler=SequentialSampler(ds), shuffle=True, match="mutually exclusive")
    assert_raises(NotImplementedError, DataLoader, ds, generator=object(), match="generator")
    assert_raises(ValueError, BatchSampler, SequentialSampler(ds), 0, False, match="batch_size should be a positive")


def test_default_collate_structures():
    Point = namedtuple("Point", "x y")
    batch = [{"a": 1, "b": dt.ones(2), "c": (2.5, "s"), "d": Point(dt.zeros(1), True)},
             {"a": 2, "b": dt.zeros(2), "c": (3.5, "t"), "d": Point(dt.ones(1), False)}]
    out = default_collate(batch)
    assert out["a"].tolist() == [1, 2] and out["a"].dtype == dt.int64
    assert out["b"].tolist() == [[1.0, 1.0], [0.0, 0.0]]
    assert out["c"][0].dtype == dt.float64 and out["c"][0].tolist() == [2.5, 3.5] and out["c"][1] == ("s", "t")
    assert isinstance(out["d"], Point) and out["d"].x.tolist() == [[0.0], [1.0]] and out["d"].y.tolist() == [True, False]
    assert_raises(RuntimeError, default_collate, [(1, 2), (3,)], match="equal size")
    assert_raises(TypeError, default_collate, [object()], match="default_collate")


def test_subsets_splits_and_concatenation():
    ds = TensorDataset(dt.arange(10))
    dt.manual_seed(5)
    parts = random_split(ds, [0.7, 0.3])
    assert [len(p) for p in parts] == [7, 3]
    seen = sorted(p[i][0].item() for p in parts for i in range(len(p)))
    assert seen == list(range(10))
    assert [len(p) for p in random_split(ds, [3, 3, 4])] == [3, 3, 4]
    assert_raises(ValueError, random_split, ds, [3, 3], match="Sum of input lengths")
    assert Subset(ds, [4, 2])[1][0].item() == 2
    both = ds + TensorDataset(dt.arange(100, 103))
    assert isinstance(both, ConcatDataset) and len(both) == 13
    assert both[11][0].item() == 101 and both[-1][0].item() == 102 and both[0][0].item() == 0

    class Squares(Dataset):
        def __getitem__(self, i):
            return dt.tensor(float(i * i)), i

        def __len__(self):
            return 5

    (values, labels), = [b for b in DataLoader(Squares(), batch_size=5)]
    assert values.tolist() == [0.0, 1.0, 4.0, 9.0, 16.0] and labels.tolist() == [0, 1, 2, 3, 4]


def test_matches_torch_utils_data_when_importable():
    if torch is None:
        skip("PyTorch is not importable: the batching rules are checked above, not against torch.utils.data")
    values = [[float(i), float(-i)] for i in range(11)]
    ours = [[t.tolist() for t in b] for b in DataLoader(TensorDataset(dt.tensor(values), dt.arange(11)), batch_size=3)]
    theirs = [[t.tolist() for t in b] for b in torch_data.DataLoader(
        torch_data.TensorDataset(torch.tensor(values), torch.arange(11)), batch_size=3)]
    assert ours == theirs
    batch = [{"a": 1, "c": (2.5, "s")}, {"a": 2, "c": (3.5, "t")}]
    mine, yours = default_collate(batch), torch_data.default_collate(batch)
    assert mine["a"].tolist() == yours["a"].tolist() and mine["c"][1] == yours["c"][1]
    assert len(DataLoader(list(range(10)), batch_size=4, drop_last=True)) == len(
        torch_data.DataLoader(list(range(10)), batch_size=4, drop_last=True))


def test_a_training_loop_over_a_shuffled_loader_with_the_step_compiled():
    dt.manual_seed(7)
    x = dt.randn(64, 5)
    y = (x.sum(1) > 0).to(dt.int64)
    model = dt.nn.Sequential(dt.nn.Linear(5, 16), dt.nn.ReLU(), dt.nn.Linear(16, 2))
    opt = dt.optim.SGD(model.parameters(), lr=0.2)

    def step(xb, yb):
        loss = dt.nn.functional.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss.detach()

    compiled = dt.jit(step, backend="cpu", fullgraph=True)
    before = dt.stats()
    losses = [compiled(xb, yb).item() for _ in range(5) for xb, yb in DataLoader(TensorDataset(x, y), batch_size=16,
                                                                                  shuffle=True, drop_last=True)]
    after = dt.stats()
    assert after["graph_breaks"] == before["graph_breaks"] and len(losses) == 20
    assert sum(losses[-4:]) < sum(losses[:4]), losses
