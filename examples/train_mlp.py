"""Training an MLP classifier eagerly: dyntrace.nn, dyntrace.optim.AdamW and autograd.

The model is 64 -> 256 -> 256 -> 10 with LayerNorm and GELU; the data are points scattered
around 10 cluster centres in 64 dimensions, made deterministically with `random`. The script
prints the loss curve and checks that the loss falls below 0.7 of its start within 40 steps.

    dyntrace --stats examples/train_mlp.py [steps]

bench/training.py times the same model and data against PyTorch.
"""
import random
import sys

import dyntrace as dt
from dyntrace import nn

IN, HIDDEN, CLASSES, BATCH = 64, 256, 10, 128


def make_data(ns, batches=8, seed=0, spread=1.5):
    """[(x, y)] batches for the tensor module `ns` (dyntrace or torch): points around one of
    CLASSES random centres, the same numbers for either module."""
    rng = random.Random(seed)
    centres = [[rng.gauss(0.0, 1.0) for _ in range(IN)] for _ in range(CLASSES)]
    out = []
    for _ in range(batches):
        labels = [rng.randrange(CLASSES) for _ in range(BATCH)]
        rows = [[c + rng.gauss(0.0, spread) for c in centres[k]] for k in labels]
        out.append((ns.tensor(rows), ns.tensor(labels)))
    return out


def make_model(ns):
    """The classifier in `ns`'s nn (dyntrace.nn or torch.nn): the same layers in either."""
    return ns.nn.Sequential(
        ns.nn.Linear(IN, HIDDEN), ns.nn.LayerNorm(HIDDEN), ns.nn.GELU(),
        ns.nn.Linear(HIDDEN, HIDDEN), ns.nn.LayerNorm(HIDDEN), ns.nn.GELU(),
        ns.nn.Linear(HIDDEN, CLASSES))


def cross_entropy(ns, logits, labels):
    # Written out (the mean of -log_softmax at each row's label), as F.cross_entropy computes it:
    # the figures in the README and bench/training.py were measured with this form.
    return -ns.log_softmax(logits, -1).gather(1, labels.unsqueeze(1)).mean()


def train_step(ns, model, opt, x, y):
    opt.zero_grad()
    loss = cross_entropy(ns, model(x), y)
    loss.backward()
    opt.step()
    return loss.item()


def main(steps=40):
    dt.manual_seed(0)
    model = make_model(dt)
    opt = dt.optim.AdamW(model.parameters(), lr=1e-3)
    data = make_data(dt)
    losses = []
    for step in range(steps):
        x, y = data[step % len(data)]
        losses.append(train_step(dt, model, opt, x, y))
        print(f"step {step:3d}  loss {losses[-1]:.4f}")
    assert min(losses[:40]) < 0.7 * losses[0], losses
    print("train_mlp OK")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 40)
