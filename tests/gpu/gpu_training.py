"""gpu_check.py's training rows (issue 22): a GPT-mini's whole training step compiled as one
program against the same steps run eagerly, and against PyTorch.

The model is issue 22's GPT-mini (2 layers, D=128, 4 heads, T=64, dropout 0.1, AdamW with
weight decay, batch 8), written once as source for either tensor module (NS is dt or torch),
like gpu_check's other workloads; the bundle carries no examples/, so it lives here.

dyntrace side (run_training): two copies of the model from one seed; one runs the step
eagerly on the device, the other through dt.jit(step, fullgraph=True) (forward, backward,
AdamW and zero_grad in one graph, which on CUDA replays as one CUDA graph); each step takes
the next of a few batches. Checked: the compiled losses equal the eager ones within 1e-3
relative (dropout draws the same numbers on both sides) and, on CUDA, every timed step is one
graph replay with no op through host memory. Timed: steps per second of both, and the peak
device memory a step adds. PyTorch side (torch_training, in gpu_check's torch child): the
same model eagerly and under torch.compile(mode="reduce-overhead"), each with a fused AdamW.
Issue 22's goals, reported beside the figures: compiled at least 3x faster than eager
dyntrace, and at most 1.0x reduce-overhead's time at no more peak memory."""
import statistics
import time

MODEL_SOURCE = '''
class Block(NS.nn.Module):
    def __init__(self, dim, heads, dropout):
        super().__init__()
        self.heads, self.p = heads, dropout
        self.ln1, self.ln2 = NS.nn.LayerNorm(dim), NS.nn.LayerNorm(dim)
        self.qkv, self.proj = NS.nn.Linear(dim, 3 * dim), NS.nn.Linear(dim, dim)
        self.fc, self.out = NS.nn.Linear(dim, 4 * dim), NS.nn.Linear(4 * dim, dim)
        self.drop = NS.nn.Dropout(dropout)

    def forward(self, x):
        F = NS.nn.functional
        b, t, d = x.shape
        q, k, v = [h.reshape(b, t, self.heads, d // self.heads).transpose(1, 2)
                   for h in self.qkv(self.ln1(x)).chunk(3, dim=-1)]
        a = F.scaled_dot_product_attention(q, k, v, dropout_p=self.p if self.training else 0.0, is_causal=True)
        x = x + self.drop(self.proj(a.transpose(1, 2).reshape(b, t, d)))
        return x + self.drop(self.out(F.gelu(self.fc(self.ln2(x)))))

class GPTMini(NS.nn.Module):
    def __init__(self, vocab, dim, heads, layers, context, dropout):
        super().__init__()
        self.tokens, self.positions = NS.nn.Embedding(vocab, dim), NS.nn.Embedding(context, dim)
        self.drop = NS.nn.Dropout(dropout)
        self.blocks = NS.nn.ModuleList([Block(dim, heads, dropout) for _ in range(layers)])
        self.ln, self.head = NS.nn.LayerNorm(dim), NS.nn.Linear(dim, vocab)

    def forward(self, idx):
        x = self.drop(self.tokens(idx) + self.positions(NS.arange(idx.shape[1], device=idx.device)))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))

def gpt_mini_step(model, opt, x, y):
    opt.zero_grad()
    logits = model(x)
    loss = NS.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
    loss.backward()
    opt.step()
    return loss.detach()
'''

# (vocab, dim, heads, layers, context, dropout, batch): issue 22's GPT-mini on the GPU; a small
# one for --cpu-dry-run, which only checks the logic.
FULL_SIZE = (65, 128, 4, 2, 64, 0.1, 8)
DRY_SIZE = (17, 32, 4, 2, 16, 0.1, 2)
LR, WEIGHT_DECAY = 3e-3, 0.1
LOSS_RTOL = 1e-3  # issue 22's bar for compiled against eager losses


def model_scope(ns):
    scope = {"NS": ns}
    exec(compile(MODEL_SOURCE, "<gpu_training model>", "exec"), scope)  # noqa: S102 - our own text
    return scope


def token_batches(ns, size, device, count=4, seed=7):
    """`count` (inputs, targets) pairs of random tokens, the same numbers for either module."""
    import random
    vocab, _, _, _, context, _, batch = size
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        rows = [[rng.randrange(vocab) for _ in range(context + 1)] for _ in range(batch)]
        t = ns.tensor(rows).to(device)
        out.append((t[:, :-1], t[:, 1:]))
    return out


def per_step_seconds(step, batches, sync, steps, repeats=3):
    """Best of `repeats` runs of `steps` steps between two synchronisations, per step."""
    best = None
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        for i in range(steps):
            x, y = batches[i % len(batches)]
            step(x, y)
        sync()
        elapsed = (time.perf_counter() - start) / steps
        best = elapsed if best is None else min(best, elapsed)
    return best


def run_training(mode, log, fresh_copy):
    """Returns (failures, row): row has ms per step for the compiled and the eager step and the
    peak bytes a step adds for each."""
    import dyntrace as dt
    size = FULL_SIZE if mode.full else DRY_SIZE
    scope = model_scope(dt)
    batches = token_batches(dt, size, mode.device)

    def build():
        dt.manual_seed(0)
        model = scope["GPTMini"](*size[:6]).to(mode.device)
        return model, dt.optim.AdamW(model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)

    eager_model, eager_opt = build()
    whole_model, whole_opt = build()
    compiled = dt.jit(fresh_copy(scope["gpt_mini_step"]), backend=mode.backend, fullgraph=True)
    runs = {"eager": lambda x, y: scope["gpt_mini_step"](eager_model, eager_opt, x, y),
            "compiled": lambda x, y: compiled(whole_model, whole_opt, x, y)}
    check_steps = 30 if mode.full else 6
    losses = {}
    for name, step in runs.items():
        dt.manual_seed(1)  # the same dropout draws on both sides
        start = time.perf_counter()
        losses[name] = [step(*batches[i % len(batches)]).item() for i in range(check_steps)]
        log("  gpt_mini %-8s %d steps with .item() each in %.2f s (the compiled one's first step traces and "
            "compiles)" % (name, check_steps, time.perf_counter() - start))
    failures = []
    worst = max(abs(a - b) / abs(b) for a, b in zip(losses["compiled"], losses["eager"]))
    log("  gpt_mini losses: eager %.4f -> %.4f, compiled %.4f -> %.4f; largest relative difference %.2e (bar %.0e)"
        % (losses["eager"][0], losses["eager"][-1], losses["compiled"][0], losses["compiled"][-1], worst, LOSS_RTOL))
    if not worst <= LOSS_RTOL:
        failures.append("gpt_mini whole step: losses differ from eager's by %.2e relative (bar %.0e)" % (worst, LOSS_RTOL))
    row = {"size": size}
    timed_steps = 20 if mode.full else 4
    for name, step in runs.items():
        before = dt.stats()
        row[name + "_ms"] = per_step_seconds(step, batches, mode.sync, timed_steps) * 1e3
        after = dt.stats()
        row[name + "_peak"] = peak_bytes_per_step(dt, mode, step, batches)
        if name == "compiled" and not mode.dry:
            replays = after.get("cuda_graph_replays", 0) - before.get("cuda_graph_replays", 0)
            host_ops = after.get("cuda_host_ops", 0) - before.get("cuda_host_ops", 0)
            log("  gpt_mini compiled: %d graph replays in %d timed steps, %d host ops, %d captures so far"
                % (replays, 3 * timed_steps, host_ops, after.get("cuda_graph_captures", 0)))
            if replays != 3 * timed_steps or host_ops:
                failures.append("gpt_mini whole step: %d CUDA graph replays for %d steps, %d ops through host memory"
                                % (replays, 3 * timed_steps, host_ops))
    log("  gpt_mini step: compiled %.3f ms, eager dyntrace %.3f ms (%.2fx, goal >= 3x); peak added per step: "
        "compiled %.1f MB, eager %.1f MB%s"
        % (row["compiled_ms"], row["eager_ms"], row["eager_ms"] / row["compiled_ms"], row["compiled_peak"] / 1e6,
           row["eager_peak"] / 1e6, " (emulated device: times mean nothing)" if getattr(mode, "emulated", False) else ""))
    return failures, row


def peak_bytes_per_step(dt, mode, step, batches):
    mode.sync()
    memory = dt.cuda if not mode.dry else dt
    base = memory.memory_allocated()
    memory.reset_peak_memory_stats()
    step(*batches[0])
    mode.sync()
    return memory.max_memory_allocated() - base


def torch_training(torch, spec, emit, deadline):
    """PyTorch's rows: eager and torch.compile(model, mode="reduce-overhead"), fused AdamW."""
    size = FULL_SIZE
    scope = model_scope(torch)
    batches = token_batches(torch, size, "cuda")
    F = torch.nn.functional
    for mode in ("eager", "reduce-overhead"):
        if time.monotonic() > deadline:
            emit(workload="gpt_mini_step", mode=mode, error="time budget for torch spent")
            continue
        try:
            torch.manual_seed(0)
            model = scope["GPTMini"](*size[:6]).to("cuda")
            opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY, fused=True)
            forward = model if mode == "eager" else torch.compile(model, mode=mode)

            def step(x, y):
                opt.zero_grad(set_to_none=True)
                logits = forward(x)
                loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
                loss.backward()
                opt.step()
                return loss.detach()

            start = time.perf_counter()
            for i in range(3):  # compiles, records its CUDA graphs
                step(*batches[i % len(batches)])
            torch.cuda.synchronize()
            first = time.perf_counter() - start
            seconds = per_step_seconds(step, batches, torch.cuda.synchronize, spec["iters"] // 2 or 1)
            torch.cuda.synchronize()
            base = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
            step(*batches[0])
            torch.cuda.synchronize()
            emit(workload="gpt_mini_step", mode=mode, ms=seconds * 1e3, first_call_s=first,
                 peak_bytes=torch.cuda.max_memory_allocated() - base)
        except Exception as e:  # noqa: BLE001 - n/a in the report
            emit(workload="gpt_mini_step", mode=mode, error=("%s: %s" % (type(e).__name__, e)).splitlines()[0][:300])


def training_lines(row, torch_rows):
    """The report's lines: dyntrace's figures and, per PyTorch mode, its time and memory and the
    ratios issue 22 sets goals for."""
    size = row["size"]
    lines = ["gpt_mini training step (B=%d, T=%d, D=%d): dyntrace whole step %.3f ms, eager dyntrace %.3f ms "
             "(%.2fx, goal >= 3x); peak added per step %.1f MB (eager %.1f MB)"
             % (size[6], size[4], size[1], row["compiled_ms"], row["eager_ms"],
                row["eager_ms"] / row["compiled_ms"], row["compiled_peak"] / 1e6, row["eager_peak"] / 1e6)]
    for mode in ("eager", "reduce-overhead"):
        t = torch_rows.get(mode)
        if t is None or "error" in t:
            lines.append("  torch %-16s n/a: %s" % (mode, "no result" if t is None else t["error"]))
            continue
        lines.append("  torch %-16s %.3f ms, peak added %.1f MB; dyntrace/torch time %.2f (goal <= 1.0 against "
                     "reduce-overhead), memory %.2f"
                     % (mode, t["ms"], t["peak_bytes"] / 1e6, row["compiled_ms"] / t["ms"],
                        row["compiled_peak"] / max(t["peak_bytes"], 1)))
    return lines
