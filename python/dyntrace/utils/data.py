"""dyntrace.utils.data: datasets, samplers and DataLoader, as torch.utils.data.

    loader = DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True, drop_last=True)
    for xb, yb in loader:
        ...

Batches are made in the calling process: num_workers, pin_memory, prefetch_factor and
persistent_workers are accepted (scripts pass them) and change nothing but speed. Shuffling
draws a permutation from dyntrace's generator (dyntrace.manual_seed makes it repeat), once per
epoch. For a TensorDataset with the default collate, a batch is each tensor indexed by the
batch's indices at once (the same values as stacking the samples one by one, in one op)."""
import dyntrace as _dt


class Dataset:
    """A map-style dataset: __getitem__(index) and __len__."""

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} must implement __getitem__")

    def __add__(self, other):
        return ConcatDataset([self, other])


class TensorDataset(Dataset):
    """Samples are the tensors' rows: dataset[i] is (t[i] for each tensor)."""

    def __init__(self, *tensors):
        if any(t.shape[0] != tensors[0].shape[0] for t in tensors):
            raise AssertionError("Size mismatch between tensors")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return self.tensors[0].shape[0]


class Subset(Dataset):
    def __init__(self, dataset, indices):
        self.dataset, self.indices = dataset, list(indices)

    def __getitem__(self, index):
        if isinstance(index, list):
            return self.dataset[[self.indices[i] for i in index]]
        return self.dataset[self.indices[index]]

    def __len__(self):
        return len(self.indices)


class ConcatDataset(Dataset):
    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise AssertionError("datasets should not be an empty iterable")
        self.cumulative_sizes = []
        total = 0
        for d in self.datasets:
            total += len(d)
            self.cumulative_sizes.append(total)

    def __len__(self):
        return self.cumulative_sizes[-1] if self.cumulative_sizes else 0

    def __getitem__(self, index):
        if index < 0:
            if -index > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            index += len(self)
        start = 0
        for d, end in zip(self.datasets, self.cumulative_sizes):
            if index < end:
                return d[index - start]
            start = end
        raise IndexError(f"index {index} is out of range for a dataset of length {len(self)}")


def random_split(dataset, lengths, generator=None):
    """Disjoint random subsets of the given lengths (or fractions summing to 1, the remainder
    spread one by one over the first subsets, as PyTorch does)."""
    _no_generator(generator, "random_split")
    n = len(dataset)
    lengths = list(lengths)
    if lengths and all(0 <= f <= 1 for f in lengths) and abs(sum(lengths) - 1) < 1e-9 and sum(lengths) != n:
        counts = [int(f * n) for f in lengths]
        for i in range(n - sum(counts)):
            counts[i % len(counts)] += 1
        lengths = counts
    if sum(lengths) != n:
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    order = _dt.randperm(n).tolist()
    subsets, start = [], 0
    for length in lengths:
        subsets.append(Subset(dataset, order[start:start + length]))
        start += length
    return subsets


def _no_generator(generator, what):
    if generator is not None:
        raise NotImplementedError(f"{what}(generator=...) is not supported: draws come from dyntrace's generator "
                                  "(dyntrace.manual_seed)")


class Sampler:
    def __iter__(self):
        raise NotImplementedError


class SequentialSampler(Sampler):
    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """A permutation per pass (or, with replacement, num_samples uniform draws)."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        _no_generator(generator, "RandomSampler")
        self.data_source, self.replacement, self._num_samples = data_source, replacement, num_samples
        if num_samples is not None and (not isinstance(num_samples, int) or num_samples <= 0):
            raise ValueError(f"num_samples should be a positive integer value, but got num_samples={num_samples}")

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n = len(self.data_source)
        if self.replacement:
            return iter(_dt.randint(0, n, (self.num_samples,)).tolist())
        order = []
        while len(order) < self.num_samples:
            order += _dt.randperm(n).tolist()
        return iter(order[:self.num_samples])

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    def __init__(self, sampler, batch_size, drop_last):
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer value, but got batch_size={batch_size}")
        self.sampler, self.batch_size, self.drop_last = sampler, batch_size, drop_last

    def __iter__(self):
        batch = []
        for index in self.sampler:
            batch.append(index)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else (n + self.batch_size - 1) // self.batch_size


def default_collate(batch):
    """Samples to a batch: tensors stacked, numbers made tensors, tuples, lists and dicts
    collated field by field (a sequence's fields as a list), strings kept as given."""
    first = batch[0]
    if isinstance(first, _dt.Tensor):
        return _dt.stack(list(batch))
    if isinstance(first, bool):
        return _dt.tensor(list(batch), dtype=_dt.bool)
    if isinstance(first, int):
        return _dt.tensor(list(batch), dtype=_dt.int64)
    if isinstance(first, float):
        return _dt.tensor(list(batch), dtype=_dt.float64)
    if isinstance(first, (str, bytes)):
        return batch  # as given: a list at the top, a tuple inside a collated sequence (as PyTorch)
    if isinstance(first, dict):
        return {key: default_collate([sample[key] for sample in batch]) for key in first}
    if isinstance(first, tuple) and hasattr(first, "_fields"):  # a named tuple
        return type(first)(*(default_collate(field) for field in zip(*batch)))
    if isinstance(first, (tuple, list)):
        if any(len(sample) != len(first) for sample in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        return [default_collate(field) for field in zip(*batch)]
    raise TypeError(f"default_collate: batch must contain tensors, numbers, dicts or lists; found {type(first)}")


class DataLoader:
    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None, num_workers=0,
                 collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
                 generator=None, prefetch_factor=None, persistent_workers=False):
        _no_generator(generator, "DataLoader")
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None and (batch_size != 1 or shuffle or sampler is not None or drop_last):
            raise ValueError("batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, "
                             "and drop_last")
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to disable multiprocessing.")
        self.dataset, self.num_workers, self.pin_memory, self.timeout = dataset, num_workers, pin_memory, timeout
        self.drop_last = drop_last
        if sampler is None:
            sampler = RandomSampler(dataset) if shuffle else SequentialSampler(dataset)
        self.sampler = sampler
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_size, self.batch_sampler = batch_size, batch_sampler
        self._default_collate = collate_fn is None
        self.collate_fn = default_collate if collate_fn is None else collate_fn

    def _fetch(self, indices):
        if self._default_collate and type(self.dataset) is TensorDataset:
            picked = _dt.tensor(indices, dtype=_dt.int64)
            return [t[picked] for t in self.dataset.tensors]
        return self.collate_fn([self.dataset[i] for i in indices])

    def __iter__(self):
        if self.batch_sampler is None:  # batch_size=None: samples one by one, uncollated
            for index in self.sampler:
                yield self.dataset[index]
            return
        for indices in self.batch_sampler:
            yield self._fetch(indices)

    def __len__(self):
        return len(self.batch_sampler) if self.batch_sampler is not None else len(self.sampler)
