"""dyntrace.nn's recurrent layers (RNN, LSTM, GRU): PyTorch's parameter names, shapes and
initialisation; forward results against the cell equations written out in numpy (float64, on
copies of the weights), in every layout (batch_first, unbatched, bidirectional, several layers,
no bias); gradients against central finite differences in float64; errors PyTorch raises; and
an LSTM language model's training step compiled whole (fullgraph=True), equal to eager steps,
dropout between layers included. Against PyTorch itself where it is importable.

Tolerance: each gate sums F + H products of O(1) values per step, and a step's error carries
into the next through factors of at most 1 (tanh' and sigmoid' <= 1, gates <= 1), so after T
steps a float32 result is within T * (F + H + 8) * 2^-24 * 4 of the float64 one (the 4 bounds
the size of the terms)."""
import math

import dyntrace as dt
from dyntrace import nn
from dyntrace.autograd import gradcheck
from testlib import assert_close, assert_raises, np, require_numpy, skip, to_np

try:
    import torch
except ImportError:  # pyenv's interpreters have no torch
    torch = None

U = 2.0 ** -24


def sigmoid(a):
    return 1.0 / (1.0 + np.exp(-a))


def reference(module, x, states):
    """The module's forward in float64 numpy: x [T, B, F]; states per (layer, direction)."""
    kind = type(module).__name__
    directions = 2 if module.bidirectional else 1
    finals = []
    for layer in range(module.num_layers):
        outs = []
        for d in range(directions):
            names = [k + f"_l{layer}" + ("_reverse" if d else "") for k in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
            w_ih, w_hh, b_ih, b_hh = (to_np(getattr(module, n)) if getattr(module, n) is not None else 0.0 for n in names)
            state = states[layer * directions + d]
            ys = [None] * x.shape[0]
            for t in (range(x.shape[0] - 1, -1, -1) if d else range(x.shape[0])):
                xp, hp = x[t] @ w_ih.T + b_ih, state[0] @ w_hh.T + b_hh
                if kind == "LSTM":
                    i, f, g, o = np.split(xp + hp, 4, -1)
                    c = sigmoid(f) * state[1] + sigmoid(i) * np.tanh(g)
                    state = (sigmoid(o) * np.tanh(c), c)
                elif kind == "GRU":
                    (xr, xz, xn), (hr, hz, hn) = np.split(xp, 3, -1), np.split(hp, 3, -1)
                    r, z = sigmoid(xr + hr), sigmoid(xz + hz)
                    n = np.tanh(xn + r * hn)
                    state = ((1 - z) * n + z * state[0],)
                else:
                    pre = xp + hp
                    state = (np.tanh(pre) if module.nonlinearity == "tanh" else np.maximum(pre, 0),)
                ys[t] = state[0]
            outs.append(np.stack(ys))
            finals.append(state)
        x = np.concatenate(outs, -1)
    return x, finals


CONFIGS = [("LSTM", dict(num_layers=2, bidirectional=True, batch_first=True)), ("LSTM", dict(bias=False)),
           ("GRU", dict(num_layers=2)), ("GRU", dict(bidirectional=True, batch_first=True)),
           ("RNN", dict(nonlinearity="relu", bidirectional=True)), ("RNN", dict(num_layers=3, bias=False))]


def test_parameters_have_pytorchs_names_shapes_and_initial_range():
    lstm = nn.LSTM(4, 3, num_layers=2, bidirectional=True)
    names = [n for n, _ in lstm.named_parameters()]
    expected = [f"{k}_l{layer}{s}" for layer in range(2) for s in ("", "_reverse")
                for k in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
    assert names == expected, names
    shapes = {n: tuple(p.shape) for n, p in lstm.named_parameters()}
    assert shapes["weight_ih_l0"] == (12, 4) and shapes["weight_ih_l1"] == (12, 6) and shapes["bias_hh_l1_reverse"] == (12,)
    assert tuple(nn.GRU(5, 2).weight_hh_l0.shape) == (6, 2) and tuple(nn.RNN(5, 2).weight_ih_l0.shape) == (2, 5)
    bound = 1 / math.sqrt(3)
    assert all(abs(v) <= bound for p in lstm.parameters() for v in p.flatten().tolist())
    assert [n for n, _ in nn.GRU(4, 3, bias=False).named_parameters()] == ["weight_ih_l0", "weight_hh_l0"]
    assert "LSTM(4, 3, num_layers=2, bidirectional=True)" in repr(lstm)


def test_forward_matches_the_cell_equations():
    require_numpy()
    dt.manual_seed(3)
    for kind, options in CONFIGS:
        module = getattr(nn, kind)(4, 3, **options)
        directions = 2 if module.bidirectional else 1
        x = dt.randn(2, 5, 4)  # batch-first or sequence-first, as the module reads it
        h0 = dt.randn(module.num_layers * directions, 2 if module.batch_first else 5, 3)
        hx = (h0, dt.randn(*h0.shape)) if kind == "LSTM" else h0
        out, state = module(x, hx)
        seq = to_np(x).transpose(1, 0, 2) if module.batch_first else to_np(x)
        given = [to_np(t) for t in (hx if kind == "LSTM" else (hx,))]
        want, finals = reference(module, seq, [tuple(g[i] for g in given) for i in range(h0.shape[0])])
        if module.batch_first:
            want = want.transpose(1, 0, 2)
        tol = seq.shape[0] * (4 + 3 * directions + 8) * U * 4 * module.num_layers
        assert_close(out, want, rtol=tol, atol=tol, msg=f"{kind} {options}")
        states = state if kind == "LSTM" else (state,)
        for k, got in enumerate(states):
            assert_close(got, np.stack([f[k] for f in finals]), rtol=tol, atol=tol, msg=f"{kind} {options} state {k}")
        # No initial state: zeros. Unbatched input: one sequence, no batch dim anywhere.
        out0, _ = module(x)
        zero = [np.zeros(s.shape) for s in given]
        want0, _ = reference(module, seq, [tuple(z[i] for z in zero) for i in range(h0.shape[0])])
        assert_close(out0, want0.transpose(1, 0, 2) if module.batch_first else want0, rtol=tol, atol=tol)
        single, single_state = module(x[0])
        want1, _ = reference(module, to_np(x[0])[:, None], [tuple(z[i][:1] for z in zero) for i in range(h0.shape[0])])
        assert_close(single, want1[:, 0], rtol=tol, atol=tol, msg=f"{kind} unbatched")
        assert (single_state[0] if kind == "LSTM" else single_state).dim() == 2


def test_matches_pytorch_when_importable():
    if torch is None:
        skip("PyTorch is not importable: the forward is checked against numpy above, not against PyTorch")
    dt.manual_seed(4)
    for kind, options in CONFIGS:
        ours, theirs = getattr(nn, kind)(4, 3, **options), getattr(torch.nn, kind)(4, 3, **options)
        with torch.no_grad():
            for name, p in theirs.named_parameters():
                p.copy_(torch.tensor(getattr(ours, name).tolist()))
        x = dt.randn(2, 5, 4)
        out, _ = ours(x)
        expected, _ = theirs(torch.tensor(x.tolist()))
        tol = 5 * 15 * U * 4 * ours.num_layers
        assert_close(out, expected.tolist(), rtol=tol, atol=tol, msg=kind)


def test_gradients_match_finite_differences():
    dt.manual_seed(5)
    for kind in ("LSTM", "GRU", "RNN"):
        module = getattr(nn, kind)(3, 2, bidirectional=True).double()
        named = list(module.named_parameters())

        def loss(x, *params):
            # The forward reads each weight by name: the perturbed copies gradcheck passes stand in
            # for the module's own for this call.
            for (name, _), p in zip(named, params):
                object.__setattr__(module, name, p)
            try:
                out, _ = module(x)
            finally:
                for name, p in named:
                    object.__setattr__(module, name, p)
            return (out * out).sum()

        x = dt.randn(4, 2, 3, dtype=dt.float64, requires_grad=True)
        assert gradcheck(loss, [x] + [p for _, p in named]), kind


def test_bad_arguments_raise_pytorchs_errors():
    lstm = nn.LSTM(4, 3)
    assert_raises(RuntimeError, lstm, dt.randn(5, 2, 6), match="input.size(-1) must be equal to input_size. Expected 4, got 6")
    assert_raises(ValueError, lstm, dt.randn(2, 5, 2, 4), match="Expected input to be 2D or 3D, got 4D instead")
    assert_raises(RuntimeError, lstm, dt.randn(5, 2, 4), (dt.zeros(1, 3, 3), dt.zeros(1, 2, 3)),
                  match="Expected hidden[0] size (1, 2, 3), got (1, 3, 3)")
    assert_raises(ValueError, nn.GRU, 4, 3, dropout=1.5, match="dropout should be a number in range [0, 1]")
    assert_raises(ValueError, nn.RNN, 4, 3, nonlinearity="gelu", match="Unknown nonlinearity 'gelu'")
    assert_raises(NotImplementedError, nn.LSTM, 4, 3, proj_size=2, match="proj_size")


class LanguageModel(nn.Module):
    def __init__(self, vocab=20, dim=16, hidden=24):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.rnn = nn.LSTM(dim, hidden, num_layers=2, batch_first=True, dropout=0.1)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, idx):
        out, _ = self.rnn(self.emb(idx))
        return self.head(out)


def train_language_model(compiled, steps=5):
    dt.manual_seed(6)
    model = LanguageModel()
    opt = dt.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    data = dt.randint(0, 20, (4, 9))

    def step(x, y):
        logits = model(x)
        loss = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss.detach()

    run = dt.jit(step, backend="cpu", fullgraph=True) if compiled else step
    return [run(data[:, :-1], data[:, 1:]).item() for _ in range(steps)], model.state_dict()


def test_lstm_language_model_training_step_compiles_whole():
    # Embedding, a 2-layer LSTM with dropout between the layers, a linear head, cross-entropy,
    # SGD with momentum: one graph per step shape (the first step makes the momentum buffers),
    # no break, and the same losses and weights as eager steps (the dropout masks drawn from the
    # same generator in the same order).
    before = dt.stats()
    compiled, compiled_state = train_language_model(True)
    after = dt.stats()
    eager, eager_state = train_language_model(False)
    assert after["graph_breaks"] == before["graph_breaks"] and after["fallbacks"] == before["fallbacks"], \
        after["break_reasons"]
    assert compiled == eager, (compiled, eager)
    assert compiled[-1] < compiled[0]
    for name, value in eager_state.items():
        assert compiled_state[name].tolist() == value.tolist(), name


def test_pad_sequence_and_pretrained_embeddings():
    from dyntrace.nn.utils.rnn import pad_sequence
    seqs = [dt.tensor([[1.0, 1.5], [2.0, 2.5], [3.0, 3.5]]), dt.tensor([[4.0, 4.5]]), dt.tensor([[5.0, 5.5], [6.0, 6.5]])]
    rows = [s.tolist() for s in seqs]

    def padded(left):  # the reference: each row list padded with [-1, -1] to length 3
        fill = [[-1.0, -1.0]]
        return [fill * (3 - len(r)) + r if left else r + fill * (3 - len(r)) for r in rows]

    assert pad_sequence(seqs, batch_first=True, padding_value=-1).tolist() == padded(False)
    time_major = pad_sequence(seqs, padding_value=-1)
    assert tuple(time_major.shape) == (3, 3, 2)
    assert time_major.transpose(0, 1).tolist() == padded(False)
    assert pad_sequence(seqs, True, -1, padding_side="left").tolist() == padded(True)
    assert pad_sequence(seqs, True).tolist()[1] == [[4.0, 4.5], [0.0, 0.0], [0.0, 0.0]]
    assert_raises(RuntimeError, pad_sequence, [dt.ones(2, 2), dt.ones(2, 3)], match="trailing shape")
    assert_raises(RuntimeError, pad_sequence, [], match="empty list")
    # An LSTM over the padded batch: pad_sequence feeds the recurrent layers.
    out, _ = nn.LSTM(2, 4, batch_first=True)(pad_sequence(seqs, batch_first=True))
    assert tuple(out.shape) == (3, 3, 4)
    table = dt.arange(6.0).reshape(3, 2)
    frozen = nn.Embedding.from_pretrained(table)
    assert frozen(dt.tensor([2, 0])).tolist() == [[4.0, 5.0], [0.0, 1.0]] and not frozen.weight.requires_grad
    tuned = nn.Embedding.from_pretrained(table, freeze=False, padding_idx=1)
    tuned(dt.tensor([1, 2, 2])).sum().backward()
    assert tuned.weight.grad.tolist() == [[0.0, 0.0], [0.0, 0.0], [2.0, 2.0]]  # the padding row gets none
    assert tuned.weight.tolist() == table.tolist()  # the pretrained padding row is kept, as PyTorch's
