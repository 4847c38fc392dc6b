"""Training a character-level transformer language model eagerly with dyntrace.

A 2-layer decoder (token and position embeddings, pre-LayerNorm blocks of causal multi-head
self-attention through nn.functional.scaled_dot_product_attention and a GELU MLP, dropout)
learns to continue the text below, the opening of Lewis Carroll's "Alice's Adventures in
Wonderland" (1865, public domain). AdamW with weight decay on the matrices only, a linear
warm-up then cosine decay (SequentialLR), and gradient-norm clipping, as in small GPT recipes.

The script prints the loss curve and a sample drawn (under no_grad) from the trained model,
and checks that the loss fell below 0.7 of its start. Its default run is 300 steps of 16
windows of 32 characters, a few seconds eagerly:

    dyntrace --stats examples/train_char_lm.py [steps]
"""
import math
import sys

import dyntrace as dt
from dyntrace import nn
from dyntrace.nn import functional as F

TEXT = (
    "Alice was beginning to get very tired of sitting by her sister on the bank, and of having "
    "nothing to do: once or twice she had peeped into the book her sister was reading, but it had "
    "no pictures or conversations in it, 'and what is the use of a book,' thought Alice 'without "
    "pictures or conversations?' So she was considering in her own mind (as well as she could, for "
    "the hot day made her feel very sleepy and stupid), whether the pleasure of making a "
    "daisy-chain would be worth the trouble of getting up and picking the daisies, when suddenly a "
    "White Rabbit with pink eyes ran close by her. There was nothing so very remarkable in that; "
    "nor did Alice think it so very much out of the way to hear the Rabbit say to itself, 'Oh "
    "dear! Oh dear! I shall be late!' (when she thought it over afterwards, it occurred to her "
    "that she ought to have wondered at this, but at the time it all seemed quite natural); but "
    "when the Rabbit actually took a watch out of its waistcoat-pocket, and looked at it, and then "
    "hurried on, Alice started to her feet, for it flashed across her mind that she had never "
    "before seen a rabbit with either a waistcoat-pocket, or a watch to take out of it, and "
    "burning with curiosity, she ran across the field after it, and fortunately was just in time "
    "to see it pop down a large rabbit-hole under the hedge. In another moment down went Alice "
    "after it, never once considering how in the world she was to get out again. The rabbit-hole "
    "went straight on like a tunnel for some way, and then dipped suddenly down, so suddenly that "
    "Alice had not a moment to think about stopping herself before she found herself falling down "
    "a very deep well."
)

CONTEXT, BATCH, DIM, HEADS, LAYERS, DROPOUT = 32, 16, 48, 4, 2, 0.1


class Block(nn.Module):
    """Pre-norm transformer block: x + attention(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, dim, heads, dropout):
        super().__init__()
        self.heads, self.p = heads, dropout
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.fc = nn.Linear(dim, 4 * dim)
        self.out = nn.Linear(4 * dim, dim)
        self.drop = nn.Dropout(dropout)

    def attention(self, x):
        batch, length, dim = x.shape
        heads = [t.reshape(batch, length, self.heads, dim // self.heads).transpose(1, 2)
                 for t in self.qkv(x).chunk(3, dim=-1)]
        a = F.scaled_dot_product_attention(*heads, dropout_p=self.p if self.training else 0.0, is_causal=True)
        return self.proj(a.transpose(1, 2).reshape(batch, length, dim))

    def forward(self, x):
        x = x + self.drop(self.attention(self.ln1(x)))
        return x + self.drop(self.out(F.gelu(self.fc(self.ln2(x)))))


class CharLM(nn.Module):
    def __init__(self, vocab, dim=DIM, heads=HEADS, layers=LAYERS, context=CONTEXT, dropout=DROPOUT):
        super().__init__()
        self.tokens = nn.Embedding(vocab, dim)
        self.positions = nn.Embedding(context, dim)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList([Block(dim, heads, dropout) for _ in range(layers)])
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, idx):
        x = self.drop(self.tokens(idx) + self.positions(dt.arange(idx.shape[1], device=idx.device)))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


def batches(ids, rng_seed=0):
    """Endless (inputs, targets) batches of random windows; targets are inputs shifted by one."""
    data = dt.tensor(ids)
    dt.manual_seed(rng_seed)
    offsets = dt.arange(CONTEXT + 1)
    while True:
        starts = dt.randint(0, len(ids) - CONTEXT - 1, (BATCH, 1))
        windows = data[starts + offsets]
        yield windows[:, :-1], windows[:, 1:]


def make_optimizer(model, steps, lr=6e-3):
    """AdamW that decays matrices but not biases, norms or embeddings' positions; warm-up then cosine."""
    decay = [p for name, p in model.named_parameters() if p.ndim == 2]
    rest = [p for name, p in model.named_parameters() if p.ndim != 2]
    opt = dt.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}], lr=lr)
    warmup = max(1, steps // 10)
    sched = dt.optim.lr_scheduler.SequentialLR(opt, [
        dt.optim.lr_scheduler.LinearLR(opt, start_factor=0.1, total_iters=warmup),
        dt.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps - warmup, eta_min=lr / 10),
    ], milestones=[warmup])
    return opt, sched


def clip_grad_norm(parameters, max_norm):
    """Scales the gradients so that their joint 2-norm is at most max_norm (torch's clip_grad_norm_)."""
    grads = [p.grad for p in parameters if p.grad is not None]
    with dt.no_grad():
        total = math.sqrt(sum(float((g * g).sum()) for g in grads))
        if total > max_norm:
            for g in grads:
                g.mul_(max_norm / (total + 1e-6))
    return total


@dt.no_grad()
def sample(model, prompt, chars, stoi, itos, length=120, temperature=0.8):
    """Continues `prompt` one character at a time from the model's softmax (in eval mode)."""
    model.eval()
    ids = [stoi[c] for c in prompt]
    for _ in range(length):
        context = dt.tensor([ids[-CONTEXT:]])
        logits = model(context)[0, -1] / temperature
        ids.append(int(dt.multinomial(dt.softmax(logits, -1), 1).item()))
    model.train()
    return "".join(itos[i] for i in ids)


def main(steps=300):
    # Tensors this small gain nothing from a second thread, and where the machine is busy
    # OpenMP's waiting threads cost far more than they save (6.5 s against 43 s here).
    dt.set_num_threads(1)
    chars = sorted(set(TEXT))
    stoi = {c: i for i, c in enumerate(chars)}
    ids = [stoi[c] for c in TEXT]
    dt.manual_seed(0)
    model = CharLM(len(chars))
    opt, sched = make_optimizer(model, steps)
    data = batches(ids)
    params = list(model.parameters())
    print(f"{len(TEXT)} characters, vocabulary {len(chars)}, {sum(p.numel() for p in params)} parameters")
    losses = []
    for step in range(steps):
        x, y = next(data)
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, len(chars)), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        clip_grad_norm(params, 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % 25 == 0 or step == steps - 1:
            recent = sum(losses[-25:]) / len(losses[-25:])
            print(f"step {step:4d}  loss {losses[-1]:.4f}  (mean of last {min(25, len(losses))}: {recent:.4f})"
                  f"  lr {sched.get_last_lr()[0]:.2e}")
    print("sample:", repr(sample(model, "Alice was ", chars, stoi, chars)))
    start, end = losses[0], sum(losses[-10:]) / 10
    assert end < 0.7 * start, (start, end)
    print(f"loss {start:.3f} -> {end:.3f}")
    print("train_char_lm OK")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 300)
