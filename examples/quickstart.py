"""A small end-to-end tour of dyntrace's tensor runtime: a two-layer MLP forward pass with
layer norm and softmax, checked against a plain-Python computation of the same numbers."""
import math

import dyntrace as dt


def mlp(x, w1, b1, w2, b2):
    h = dt.gelu(x @ w1 + b1)
    h = dt.layer_norm(h, (h.shape[-1],))
    return dt.softmax(h @ w2 + b2, dim=-1)


def reference_row(row, w1, b1, w2, b2):
    """The same forward pass for one row, in plain Python floats."""
    h = [sum(row[k] * w1[k][j] for k in range(len(row))) + b1[j] for j in range(len(b1))]
    h = [0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in h]
    mean = sum(h) / len(h)
    var = sum((v - mean) ** 2 for v in h) / len(h)
    h = [(v - mean) / math.sqrt(var + 1e-5) for v in h]
    logits = [sum(h[k] * w2[k][j] for k in range(len(h))) + b2[j] for j in range(len(b2))]
    top = max(logits)
    exps = [math.exp(v - top) for v in logits]
    return [e / sum(exps) for e in exps]


def main():
    dt.manual_seed(0)
    batch, d_in, d_hidden, d_out = 8, 16, 32, 4
    x = dt.randn(batch, d_in)
    w1, b1 = dt.randn(d_in, d_hidden) * 0.25, dt.zeros(d_hidden)
    w2, b2 = dt.randn(d_hidden, d_out) * 0.25, dt.randn(d_out)
    probs = mlp(x, w1, b1, w2, b2)
    print("probabilities:\n", probs)
    print("row sums:", probs.sum(-1))
    worst = 0.0
    for i, row in enumerate(x.tolist()):
        want = reference_row(row, w1.tolist(), b1.tolist(), w2.tolist(), b2.tolist())
        got = probs[i].tolist()
        worst = max(worst, max(abs(g - w) for g, w in zip(got, want)))
    print(f"largest difference from plain Python: {worst:.2e}")
    assert worst < 1e-5, worst
    print("quickstart OK")


if __name__ == "__main__":
    main()
