"""Training step time: dyntrace eagerly, dyntrace with the loss compiled (dt.jit on the cpu
backend: a compiled forward graph and a compiled backward graph), dyntrace with the whole step
compiled (dt.jit(step, fullgraph=True): forward, backward, AdamW's update and zero_grad in one
graph), and PyTorch's eager CPU execution, side by side in one run, on the same model, weights
and data.

    PYTHONPATH=dist/python3.11 python3 bench/training.py [--steps 40] [--threads N]

Both run with the same number of threads (PyTorch's default, or --threads).

The model and data are examples/train_mlp.py's: an MLP classifier 64 -> 256 -> 256 -> 10 with
LayerNorm and GELU, AdamW (lr 1e-3), batch 128, points around 10 cluster centres made
deterministically. A step is zero_grad, forward, loss, backward and the optimizer's update.
The cross-entropy is written out as log_softmax + gather in both (what F.cross_entropy
computes; the recorded figures use this form). Both runs start from the same weights (PyTorch's are copied from dyntrace's).
The loss curves are printed next to each other; dyntrace's must fall below 0.7 of its start
within 40 steps. Step times are the median over the steps after the first 5, measured
round-robin (each step of one is followed by the same step of the other), so load from
elsewhere slows both alike. PyTorch is Debian's python3-torch where installed; without it, its
column says why. The compiled run also reports what its forward graph saves for backward
against saving every value the derivative formulas read (stats()["saved_bytes"] and
["save_everything_bytes"], the min-cut partitioner's effect)."""
import argparse
import os
import statistics
import sys
import time

import dyntrace as dt

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
from train_mlp import cross_entropy, make_data, make_model, train_step  # noqa: E402 - found through the path set above

try:
    import torch
    torch_missing = None
except ImportError as e:
    torch, torch_missing = None, f"PyTorch not importable here ({e})"


def torch_copy_of(model):
    """PyTorch's model with dyntrace's weights, parameter for parameter."""
    theirs = make_model(torch)
    with torch.no_grad():
        for (name, p), (their_name, q) in zip(model.named_parameters(), theirs.named_parameters()):
            assert name == their_name and tuple(p.shape) == tuple(q.shape), (name, their_name)
            q.copy_(torch.tensor(p.tolist()))
    return theirs


def loss_of(model, x, y):
    return cross_entropy(dt, model(x), y)


def compiled_step(compiled_loss):
    """train_step with the forward and backward compiled: the optimizer's update stays eager."""
    def step(ns, model, opt, x, y):
        opt.zero_grad()
        loss = compiled_loss(model, x, y)
        loss.backward()
        opt.step()
        return loss.item()
    return step


def whole_step(model, opt, x, y):
    """train_step as one compiled program: returns the loss as a tensor (its .item() would end
    the graph there), read by the caller."""
    opt.zero_grad()
    loss = cross_entropy(dt, model(x), y)
    loss.backward()
    opt.step()
    return loss.detach()


def compiled_whole_step(compiled):
    def step(ns, model, opt, x, y):
        return compiled(model, opt, x, y).item()
    return step


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--threads", type=int, default=0,
                        help="threads for both (0: PyTorch's default, which dyntrace then uses too)")
    args = parser.parse_args()
    dt.manual_seed(0)
    compiled_model = make_model(dt)
    dt.manual_seed(0)
    model = make_model(dt)
    dt.manual_seed(0)
    whole_model = make_model(dt)
    whole = dt.jit(whole_step, backend="cpu", fullgraph=True)
    contenders = {"dyntrace": (dt, model, dt.optim.AdamW(model.parameters(), lr=1e-3), make_data(dt), train_step),
                  "compiled": (dt, compiled_model, dt.optim.AdamW(compiled_model.parameters(), lr=1e-3),
                               make_data(dt), compiled_step(dt.jit(loss_of, backend="cpu"))),
                   "whole": (dt, whole_model, dt.optim.AdamW(whole_model.parameters(), lr=1e-3), make_data(dt),
                             compiled_whole_step(whole))}
    if args.threads:
        dt.set_num_threads(args.threads)
    if torch is not None:
        if args.threads:
            torch.set_num_threads(args.threads)
        # The same thread count on both sides: on a shared 2-core machine OpenMP's waiting
        # threads, spinning between kernels, cost dyntrace 3x when it used 2 and PyTorch 1.
        dt.set_num_threads(torch.get_num_threads())
        theirs = torch_copy_of(model)
        contenders["torch"] = (torch, theirs, torch.optim.AdamW(theirs.parameters(), lr=1e-3), make_data(torch),
                               train_step)
    losses = {name: [] for name in contenders}
    times = {name: [] for name in contenders}
    for step in range(args.steps):
        for name, (ns, m, opt, data, step_fn) in contenders.items():
            x, y = data[step % len(data)]
            start = time.perf_counter()
            losses[name].append(step_fn(ns, m, opt, x, y))
            times[name].append(time.perf_counter() - start)
    print(f"{'step':>4}  {'dyntrace loss':>13}  {'compiled loss':>13}  {'whole-step loss':>15}  {'torch loss':>10}")
    for step in range(args.steps):
        theirs = f"{losses['torch'][step]:10.4f}" if torch is not None else f"{'-':>10}"
        print(f"{step:4d}  {losses['dyntrace'][step]:13.4f}  {losses['compiled'][step]:13.4f}  "
              f"{losses['whole'][step]:15.4f}  {theirs}")
    median = {name: statistics.median(t[5:] or t) * 1e3 for name, t in times.items()}
    print(f"\nper-step time (median of steps 5..{args.steps - 1}), batch 128:")
    print(f"  dyntrace eager  {median['dyntrace']:8.3f} ms  (threads: {dt.get_num_threads()})")
    stats = dt.stats()
    print(f"  dyntrace jit    {median['compiled']:8.3f} ms  (cpu backend, forward and backward compiled: "
          f"{stats['graphs']} graph(s), {stats['backward_graphs']} backward graph(s), "
          f"{stats['fallbacks']} fallbacks; {median['compiled'] / median['dyntrace']:.2f}x eager)")
    print(f"  saved for backward per step: {stats['saved_bytes'] / 1e6:.3f} MB, against "
          f"{stats['save_everything_bytes'] / 1e6:.3f} MB saving everything the formulas read "
          f"({stats['recomputed_nodes']} nodes recomputed)")
    drift = max(abs(a - b) / abs(a) for a, b in zip(losses["dyntrace"], losses["compiled"]))
    print(f"  compiled vs eager losses: largest relative difference {drift:.2e}")
    whole_drift = max(abs(a - b) / abs(a) for a, b in zip(losses["dyntrace"], losses["whole"]))
    print(f"  dyntrace step   {median['whole']:8.3f} ms  (the whole step compiled, fullgraph=True: "
          f"{len(dt.graphs(whole))} trace(s); {median['dyntrace'] / median['whole']:.2f}x faster than eager; "
          f"losses vs eager: largest relative difference {whole_drift:.2e})")
    if torch is not None:
        print(f"  torch eager     {median['torch']:8.3f} ms  (threads: {torch.get_num_threads()}, "
              f"torch {torch.__version__})")
        print(f"  ratio dyntrace / torch: {median['dyntrace'] / median['torch']:.2f}x eager, "
              f"{median['compiled'] / median['torch']:.2f}x compiled, {median['whole'] / median['torch']:.2f}x "
              f"whole step")
    else:
        print(f"  torch eager     -  ({torch_missing})")
    first, best = losses["dyntrace"][0], min(losses["dyntrace"][:40])
    verdict = "OK" if best < 0.7 * first else "FAILED"
    print(f"loss: {first:.4f} -> {best:.4f} within 40 steps ({best / first:.2f} of its start; must be < 0.70): "
          f"{verdict}")
    return 0 if verdict == "OK" else 1


if __name__ == "__main__":
    sys.exit(main())
