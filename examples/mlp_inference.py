"""MLP inference loop: a three-layer classifier run over a stream of batches.

The forward pass is compiled once by @dt.jit and reused for every batch, including the smaller
last one (sizes are only guarded where Python reads them). Each batch's class probabilities are
checked against the same network computed in plain Python floats.

    dyntrace --stats examples/mlp_inference.py [num_batches]
"""
import math
import sys

import dyntrace as dt


@dt.jit
def classify(x, w1, b1, w2, b2, w3, b3):
    h = dt.relu(x @ w1 + b1)
    h = dt.relu(h @ w2 + b2)
    return dt.softmax(h @ w3 + b3, dim=-1)


def reference(rows, params):
    """The same network for each row, in plain Python."""
    out = []
    for row in rows:
        h = row
        for i, (w, b) in enumerate(params):
            h = [sum(h[k] * w[k][j] for k in range(len(h))) + b[j] for j in range(len(b))]
            if i < len(params) - 1:
                h = [max(v, 0.0) for v in h]
        top = max(h)
        exps = [math.exp(v - top) for v in h]
        total = sum(exps)
        out.append([e / total for e in exps])
    return out


def main():
    num_batches = int(sys.argv[1]) if len(sys.argv) > 1 else 12
    dt.manual_seed(1)
    sizes = [20, 32, 16, 5]
    weights = [dt.randn(sizes[i], sizes[i + 1]) / math.sqrt(sizes[i]) for i in range(3)]
    biases = [dt.randn(sizes[i + 1]) * 0.1 for i in range(3)]
    params = list(zip(weights, biases))
    plain_params = [(w.tolist(), b.tolist()) for w, b in params]

    worst = 0.0
    predictions = [0] * sizes[-1]
    for step in range(num_batches):
        batch = 8 if step < num_batches - 1 else 3  # the last batch is a partial one
        x = dt.randn(batch, sizes[0])
        probs = classify(x, weights[0], biases[0], weights[1], biases[1], weights[2], biases[2])
        for cls in probs.argmax(-1).tolist():
            predictions[cls] += 1
        for got, want in zip(probs.tolist(), reference(x.tolist(), plain_params)):
            worst = max(worst, max(abs(g - w) for g, w in zip(got, want)))

    stats = dt.stats()
    print(f"mlp_inference: {num_batches} batches, predictions per class {predictions}")
    print(f"  largest difference from plain Python: {worst:.2e}")
    print(f"  graphs captured: {stats['graphs']}, cache hits: {stats['cache_hits']}, "
          f"recompiles: {stats['recompiles']}")
    assert worst < 1e-5, worst
    print("mlp_inference OK")


if __name__ == "__main__":
    main()
