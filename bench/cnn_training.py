"""A ResNet-style CNN's training step on CIFAR-sized images: dyntrace eagerly, dyntrace with the
whole step compiled (dt.jit(step, backend="cpu", fullgraph=True): forward, backward, SGD with
momentum and weight decay, batch norm's running statistics updated in place, one graph), and
PyTorch's eager CPU execution (Debian's python3-torch, where installed), side by side in one run
on the same weights and data. The model and step are examples/train_cnn.py's.

    PYTHONPATH=dist/python3.11 /usr/bin/python3 bench/cnn_training.py [--steps 20] [--batch 16]

The model: a 3x3 stem (16 channels), three residual blocks (16, 32 stride 2, 64 stride 2; two
3x3 convolutions with BatchNorm2d and ReLU each, `out += shortcut`, a 1x1 convolution on the
shortcut where the shape changes), global average pooling and a linear classifier; inputs
[batch, 3, 32, 32], 10 classes. Steps run round-robin (each contender's step i, then the next
contender's), so load from elsewhere slows all alike; times are the median over the steps after
the first 3. PyTorch starts from dyntrace's weights; both sides use PyTorch's default thread
count (--threads sets both). The compiled losses must equal eager's (the cpu backend rounds as
eager does); PyTorch's first loss agrees to float32 sums taken in another order (later ones drift
apart as training amplifies those differences)."""
import argparse
import os
import statistics
import sys
import time

import dyntrace as dt

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
from train_cnn import make_model, make_step  # noqa: E402 - found through the path set above

try:
    import torch
    torch_missing = None
except ImportError as e:
    torch, torch_missing = None, f"PyTorch not importable here ({e})"


def torch_copy_of(model):
    theirs = make_model(torch)
    ours = dict(model.state_dict())
    with torch.no_grad():
        for name, value in theirs.state_dict().items():
            value.copy_(torch.tensor(ours[name].tolist(), dtype=value.dtype))
    return theirs


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--threads", type=int, default=0, help="threads for both (0: PyTorch's default)")
    args = parser.parse_args()
    dt.manual_seed(0)
    batches = [(dt.randn(args.batch, 3, 32, 32), dt.randint(0, 10, (args.batch,))) for _ in range(4)]
    models = {}
    for name in ("eager", "whole"):
        dt.manual_seed(1)
        models[name] = make_model(dt)
    steps = {"eager": make_step(dt, models["eager"]),
             "whole": dt.jit(make_step(dt, models["whole"]), backend="cpu", fullgraph=True)}
    data = {"eager": batches, "whole": batches}
    if args.threads:
        dt.set_num_threads(args.threads)
    if torch is not None:
        if args.threads:
            torch.set_num_threads(args.threads)
        dt.set_num_threads(torch.get_num_threads())
        theirs = torch_copy_of(models["eager"])
        steps["torch"] = make_step(torch, theirs)
        data["torch"] = [(torch.tensor(x.tolist()), torch.tensor(y.tolist())) for x, y in batches]
    losses = {name: [] for name in steps}
    times = {name: [] for name in steps}
    for i in range(args.steps):
        for name, step in steps.items():
            x, y = data[name][i % len(batches)]
            start = time.perf_counter()
            losses[name].append(step(x, y).item())
            times[name].append(time.perf_counter() - start)
    median = {name: statistics.median(t[3:] or t) * 1e3 for name, t in times.items()}
    s = dt.stats()
    print(f"ResNet-style CNN training step, batch {args.batch} of 3x32x32, median of steps 3..{args.steps - 1}, "
          f"{dt.get_num_threads()} thread(s)")
    print(f"  dyntrace eager   {median['eager']:8.2f} ms")
    same = losses["whole"] == losses["eager"]
    print(f"  dyntrace step    {median['whole']:8.2f} ms  (whole step compiled: {len(dt.graphs(steps['whole']))} "
          f"trace(s), {s['graph_breaks']} breaks; {median['eager'] / median['whole']:.2f}x eager; losses "
          f"{'equal to eager' if same else 'DIFFER from eager'})")
    if torch is not None:
        first = abs(losses["eager"][0] - losses["torch"][0]) / abs(losses["torch"][0])
        print(f"  torch eager      {median['torch']:8.2f} ms  (torch {torch.__version__}, "
              f"{torch.get_num_threads()} thread(s); first loss vs dyntrace's: relative difference {first:.1e})")
        print(f"  ratio torch / dyntrace: {median['torch'] / median['eager']:.2f}x eager, "
              f"{median['torch'] / median['whole']:.2f}x whole step (above 1: dyntrace faster)")
    else:
        print(f"  torch eager      n/a: {torch_missing}")
    print(f"loss: {losses['eager'][0]:.4f} -> {losses['eager'][-1]:.4f}")
    if not same:
        raise SystemExit("the compiled step's losses differ from eager's")


if __name__ == "__main__":
    main()
