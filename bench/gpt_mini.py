"""GPT-mini training with its loss compiled: losses, saved activation bytes and step time.

    PYTHONPATH=dist/python3.11 python3 bench/gpt_mini.py [--steps 100]

The model is examples/train_char_lm.py's decoder at issue 22's size: 2 layers, D=128, 4 heads,
T=64, dropout 0.1, AdamW, batch 8. Four runs start from the same weights and the same seed:
eager autograd; `dt.jit(loss, backend="cpu")` (a compiled forward graph and a compiled backward
graph) once with the min-cut partitioner and once saving every value the derivative formulas
read (DYNTRACE_PARTITIONER=save-all); and the whole step compiled (`dt.jit(train_step,
fullgraph=True)`: zero_grad, forward, backward and AdamW in one graph). Dropout draws the same
numbers in all four.

It prints the largest relative difference between the compiled and the eager losses (issue
22's bar: 1e-3 over 100 steps), the bytes each compiled forward saves for backward, the peak
memory a step adds to what was allocated before it (dt.max_memory_allocated after
dt.reset_peak_memory_stats: activations, gradients and temporaries), and the median step
times, measured round-robin (each step of one run is followed by the same step of the others,
so load from elsewhere slows all alike).
"""
import argparse
import os
import statistics
import sys
import time

import dyntrace as dt

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
import train_char_lm as lm  # noqa: E402 - found through the path set above
from dyntrace.nn import functional as F  # noqa: E402

CONTEXT, BATCH, DIM, HEADS, LAYERS, DROPOUT = 64, 8, 128, 4, 2, 0.1


def loss_of(model, x, y, vocab):
    return F.cross_entropy(model(x).reshape(-1, vocab), y.reshape(-1))


def train_step(model, opt, x, y, vocab):
    """One step as one compiled program (the "jit whole step" run): zero_grad, forward,
    backward and AdamW's update."""
    opt.zero_grad()
    loss = loss_of(model, x, y, vocab)
    loss.backward()
    opt.step()
    return loss.detach()


class Run:
    def __init__(self, name, vocab, compiled, partitioner=None, whole=False):
        self.name, self.vocab, self.partitioner = name, vocab, partitioner
        dt.manual_seed(0)
        self.model = lm.CharLM(vocab, dim=DIM, heads=HEADS, layers=LAYERS, context=CONTEXT, dropout=DROPOUT)
        self.opt = dt.optim.AdamW(self.model.parameters(), lr=3e-3, weight_decay=0.1)
        self.loss = dt.jit(loss_of, backend="cpu") if compiled else loss_of
        self.whole = dt.jit(train_step, backend="cpu", fullgraph=True) if whole else None
        self.generator_state = None
        self.losses, self.times, self.peaks = [], [], []
        self.saved_bytes = self.save_everything_bytes = None

    def step(self, x, y):
        if self.partitioner is not None:
            os.environ["DYNTRACE_PARTITIONER"] = self.partitioner
        before = dt.stats()
        dt.reset_peak_memory_stats()
        held = dt.memory_allocated()
        start = time.perf_counter()
        if self.whole is not None:
            loss = self.whole(self.model, self.opt, x, y, self.vocab)
        else:
            self.opt.zero_grad()
            loss = self.loss(self.model, x, y, self.vocab)
            loss.backward()
            self.opt.step()
        self.losses.append(loss.item())
        self.times.append(time.perf_counter() - start)
        self.peaks.append(dt.max_memory_allocated() - held)
        after = dt.stats()
        if after["backward_graphs"] > before["backward_graphs"]:  # this step traced and compiled
            self.saved_bytes = after["saved_bytes"] - before["saved_bytes"]
            self.save_everything_bytes = after["save_everything_bytes"] - before["save_everything_bytes"]
        os.environ.pop("DYNTRACE_PARTITIONER", None)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=100)
    args = parser.parse_args()
    dt.set_num_threads(1)
    lm.CONTEXT, lm.BATCH = CONTEXT, BATCH
    chars = sorted(set(lm.TEXT))
    ids = [{c: i for i, c in enumerate(chars)}[c] for c in lm.TEXT]
    runs = [Run("eager", len(chars), False), Run("jit min-cut", len(chars), True, "min-cut"),
            Run("jit save-all", len(chars), True, "save-all"), Run("jit whole step", len(chars), False, whole=True)]
    data = lm.batches(ids)
    batches = [next(data) for _ in range(args.steps)]
    for step in range(args.steps):
        x, y = batches[step]
        for run in runs:
            dt.manual_seed(1000 + step)  # dropout's masks: the same draws in every run
            run.step(x, y)
    eager = runs[0]
    print(f"GPT-mini: {LAYERS} layers, D={DIM}, {HEADS} heads, T={CONTEXT}, batch {BATCH}, dropout {DROPOUT}, "
          f"{args.steps} steps, cpu backend, 1 thread")
    print(f"loss: {eager.losses[0]:.4f} -> {eager.losses[-1]:.4f} (eager)")
    for run in runs[1:]:
        drift = max(abs(a - b) / abs(a) for a, b in zip(eager.losses, run.losses))
        print(f"  {run.name:13s} largest relative loss difference from eager: {drift:.2e} (bar 1e-3)")
    median = {run.name: statistics.median(run.times[5:] or run.times) * 1e3 for run in runs}
    print("median step time (steps 5..):")
    for run in runs:
        print(f"  {run.name:13s} {median[run.name]:8.2f} ms  ({median[run.name] / median['eager']:.2f}x eager)")
    print("peak memory a step adds to what was allocated before it (largest over steps 5..):")
    for run in runs:
        peak = max(run.peaks[5:] or run.peaks) / 1e6
        print(f"  {run.name:13s} {peak:8.2f} MB  ({peak * 1e6 / max(eager.peaks[5:] or eager.peaks):.2f}x eager)")
    cut, full = runs[1], runs[2]
    if cut.saved_bytes is not None and full.saved_bytes is not None:
        saving = 1 - cut.saved_bytes / full.saved_bytes if full.saved_bytes else 0.0
        print(f"saved for backward per step: min-cut {cut.saved_bytes / 1e6:.3f} MB, save-all "
              f"{full.saved_bytes / 1e6:.3f} MB: {100 * saving:.0f}% less (bar 30%); step time min-cut / save-all "
              f"{median[cut.name] / median[full.name]:.2f}x (bar 1.05x)")
    s = dt.stats()
    print(f"graphs {s['graphs']}, backward graphs {s['backward_graphs']}, graph breaks {s['graph_breaks']}, "
          f"fallbacks {s['fallbacks']}")
    for reason in s["fallback_reasons"][:3] + s["break_reasons"][:3]:
        print("  ", reason)
    return 0


if __name__ == "__main__":
    sys.exit(main())
