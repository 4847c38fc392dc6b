"""An attention block with softmax: causal multi-head self-attention.

Queries, keys and values come from one projection, are split into heads, scored with a scaled
dot product, masked so no token sees the future, normalised with softmax and recombined. The
result is checked against the same computation in plain Python for every head and token.

    dyntrace --report attention.html examples/attention.py
"""
import math

import dyntrace as dt


@dt.jit
def causal_self_attention(x, w_qkv, w_out, mask, heads):
    batch, tokens, d_model = x.shape
    d_head = d_model // heads
    q, k, v = (x @ w_qkv).chunk(3, dim=-1)
    q = q.reshape(batch, tokens, heads, d_head).transpose(1, 2)
    k = k.reshape(batch, tokens, heads, d_head).transpose(1, 2)
    v = v.reshape(batch, tokens, heads, d_head).transpose(1, 2)
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(d_head) + mask
    weights = dt.softmax(scores, dim=-1)
    out = (weights @ v).transpose(1, 2).reshape(batch, tokens, d_model)
    return out @ w_out


def matmul(a, b):
    return [[sum(a[i][k] * b[k][j] for k in range(len(b))) for j in range(len(b[0]))] for i in range(len(a))]


def reference(x, w_qkv, w_out, heads):
    """One sequence (a list of token vectors) through the same block, in plain Python."""
    d_model = len(x[0])
    d_head = d_model // heads
    qkv = matmul(x, w_qkv)
    out = [[0.0] * d_model for _ in x]
    for h in range(heads):
        cols = range(h * d_head, (h + 1) * d_head)
        q = [[row[c] for c in cols] for row in qkv]
        k = [[row[d_model + c] for c in cols] for row in qkv]
        v = [[row[2 * d_model + c] for c in cols] for row in qkv]
        for i in range(len(x)):
            scores = [sum(a * b for a, b in zip(q[i], k[j])) / math.sqrt(d_head) for j in range(i + 1)]
            top = max(scores)
            exps = [math.exp(s - top) for s in scores]
            total = sum(exps)
            for c in range(d_head):
                out[i][h * d_head + c] = sum(exps[j] / total * v[j][c] for j in range(i + 1))
    return matmul(out, w_out)


def main():
    dt.manual_seed(3)
    batch, tokens, d_model, heads = 2, 7, 16, 4
    w_qkv = dt.randn(d_model, 3 * d_model) / math.sqrt(d_model)
    w_out = dt.randn(d_model, d_model) / math.sqrt(d_model)
    # -inf above the diagonal: token i attends to tokens 0..i only.
    mask = dt.tensor([[0.0 if j <= i else -math.inf for j in range(tokens)] for i in range(tokens)])

    worst = 0.0
    for _ in range(3):
        x = dt.randn(batch, tokens, d_model)
        y = causal_self_attention(x, w_qkv, w_out, mask, heads)
        for b in range(batch):
            want = reference(x[b].tolist(), w_qkv.tolist(), w_out.tolist(), heads)
            for got_row, want_row in zip(y[b].tolist(), want):
                worst = max(worst, max(abs(g - w) for g, w in zip(got_row, want_row)))

    print(f"attention: {heads} heads over {tokens} tokens, output shape {tuple(y.shape)}")
    print(f"  largest difference from plain Python: {worst:.2e}")
    print(f"  graphs captured: {dt.stats()['graphs']}, cache hits: {dt.stats()['cache_hits']}")
    assert worst < 1e-5, worst
    print("attention OK")


if __name__ == "__main__":
    main()
