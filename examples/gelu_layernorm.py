"""GELU and LayerNorm blocks: the feed-forward half of a pre-norm transformer layer.

    y = x + gelu(layer_norm(x) * gamma + beta) @ w_up) @ w_down

Every token of the result is checked against the same arithmetic in plain Python floats (erf
from the math module, biased variance as layer_norm uses).

    dyntrace --log graph examples/gelu_layernorm.py
"""
import math

import dyntrace as dt

EPS = 1e-5


@dt.jit
def feed_forward(x, gamma, beta, w_up, b_up, w_down, b_down):
    h = dt.layer_norm(x, (x.shape[-1],), gamma, beta, eps=EPS)
    h = dt.gelu(h @ w_up + b_up)
    return x + (h @ w_down + b_down)


def reference_token(t, gamma, beta, w_up, b_up, w_down, b_down):
    mean = sum(t) / len(t)
    var = sum((v - mean) ** 2 for v in t) / len(t)
    h = [(v - mean) / math.sqrt(var + EPS) * g + b for v, g, b in zip(t, gamma, beta)]
    up = [sum(h[k] * w_up[k][j] for k in range(len(h))) + b_up[j] for j in range(len(b_up))]
    up = [0.5 * v * (1.0 + math.erf(v / math.sqrt(2.0))) for v in up]
    down = [sum(up[k] * w_down[k][j] for k in range(len(up))) + b_down[j] for j in range(len(b_down))]
    return [a + b for a, b in zip(t, down)]


def main():
    dt.manual_seed(2)
    batch, tokens, d_model, d_hidden = 2, 6, 16, 64
    gamma = 1.0 + 0.1 * dt.randn(d_model)
    beta = 0.1 * dt.randn(d_model)
    w_up, b_up = dt.randn(d_model, d_hidden) / math.sqrt(d_model), dt.zeros(d_hidden)
    w_down, b_down = dt.randn(d_hidden, d_model) / math.sqrt(d_hidden), 0.1 * dt.randn(d_model)
    params = (gamma, beta, w_up, b_up, w_down, b_down)
    plain = [p.tolist() for p in params]

    worst = 0.0
    for _ in range(3):  # a small stack of identical blocks: the same graph three times
        x = dt.randn(batch, tokens, d_model)
        y = feed_forward(x, *params)
        for b in range(batch):
            for t in range(tokens):
                want = reference_token(x[b, t].tolist(), *plain)
                worst = max(worst, max(abs(g - w) for g, w in zip(y[b, t].tolist(), want)))

    print(f"gelu_layernorm: output shape {tuple(y.shape)}, mean {y.mean().item():+.4f}")
    print(f"  largest difference from plain Python: {worst:.2e}")
    print(f"  graphs captured: {dt.stats()['graphs']}")
    assert worst < 1e-4, worst
    print("gelu_layernorm OK")


if __name__ == "__main__":
    main()
