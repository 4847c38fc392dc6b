"""dyntrace.nn's recurrent layers, as torch.nn's: RNN (tanh or relu), LSTM and GRU, with
num_layers, bias, batch_first, dropout between layers and bidirectional; PyTorch's parameter
names (weight_ih_l0, weight_hh_l0_reverse, ...), shapes, gate order and initialisation.

Each layer projects the whole input sequence at once (one matmul over all time steps), then
runs the cell step by step; each step is a few registry ops, so dt.jit traces a forward
through every step into one graph (the steps unrolled: the sequence length is part of what the
graph is compiled for)."""
import math

import dyntrace as _dt
from dyntrace.nn import init
from dyntrace.nn.module import Module
from dyntrace.nn.parameter import Parameter


def _functional():
    return _dt.nn.functional


class _RNNBase(Module):
    _gate_count = 1

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__()
        if not isinstance(hidden_size, int) or hidden_size <= 0:
            raise ValueError(f"hidden_size must be a positive integer, got {hidden_size!r}")
        if not isinstance(num_layers, int) or num_layers <= 0:
            raise ValueError(f"num_layers must be a positive integer, got {num_layers!r}")
        if isinstance(dropout, bool) or not 0.0 <= dropout <= 1.0:
            raise ValueError(f"dropout should be a number in range [0, 1] representing the probability of an "
                             f"element being zeroed, got {dropout!r}")
        if proj_size:
            raise NotImplementedError(f"{type(self).__name__}(proj_size={proj_size}) is not supported")
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout, self.bidirectional = bias, batch_first, float(dropout), bidirectional
        self.proj_size = 0
        directions = 2 if bidirectional else 1
        gates = self._gate_count * hidden_size
        dtype = dtype or _dt.float32
        for layer in range(num_layers):
            width = input_size if layer == 0 else hidden_size * directions
            for direction in range(directions):
                suffix = f"_l{layer}" + ("_reverse" if direction else "")
                setattr(self, "weight_ih" + suffix, Parameter(_dt.empty(gates, width, device=device, dtype=dtype)))
                setattr(self, "weight_hh" + suffix, Parameter(_dt.empty(gates, hidden_size, device=device, dtype=dtype)))
                for name in ("bias_ih" + suffix, "bias_hh" + suffix):
                    if bias:
                        setattr(self, name, Parameter(_dt.empty(gates, device=device, dtype=dtype)))
                    else:
                        self.register_parameter(name, None)
        self.reset_parameters()

    def reset_parameters(self):
        bound = 1.0 / math.sqrt(self.hidden_size)
        for p in self.parameters():
            init.uniform_(p, -bound, bound)

    def _weights(self, layer, direction):
        # Read by name on every call (not kept in a list): parameters replaced later (load_state_dict
        # with assign=True, .to()) are the ones used.
        suffix = f"_l{layer}" + ("_reverse" if direction else "")
        return tuple(getattr(self, kind + suffix) for kind in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"))

    def _state_shape(self, batch):
        return ((2 if self.bidirectional else 1) * self.num_layers, batch, self.hidden_size)

    def _run(self, x, states):
        """x: [T, B, F]; states: per (layer, direction), the cell's state (a tuple). Returns the
        last layer's [T, B, D*H] outputs and the final states in the same order."""
        F = _functional()
        directions = 2 if self.bidirectional else 1
        finals = []
        steps = x.shape[0]
        for layer in range(self.num_layers):
            outs = []
            for direction in range(directions):
                w_ih, w_hh, b_ih, b_hh = self._weights(layer, direction)
                projected = F.linear(x, w_ih, b_ih)  # every step's input projection at once
                state = states[layer * directions + direction]
                ys = [None] * steps
                order = range(steps - 1, -1, -1) if direction else range(steps)
                for t in order:
                    state = self._cell(projected[t], state, w_hh, b_hh)
                    ys[t] = state[0]
                outs.append(_dt.stack(ys))
                finals.append(state)
            x = outs[0] if directions == 1 else _dt.cat(outs, 2)
            if self.dropout > 0 and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, True)
        return x, finals

    def _prepare(self, input):
        if input.dim() not in (2, 3):
            raise ValueError(f"{type(self).__name__}: Expected input to be 2D or 3D, got {input.dim()}D instead")
        unbatched = input.dim() == 2
        if unbatched:
            input = input.unsqueeze(1)
        elif self.batch_first:
            input = input.transpose(0, 1)
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, "
                               f"got {input.shape[-1]}")
        return input, unbatched

    def _initial(self, given, batch, unbatched, like, what):
        shape = self._state_shape(batch)
        if given is None:
            return _dt.zeros(*shape, dtype=like.dtype, device=like.device)
        if unbatched:
            if given.dim() != 2:
                raise RuntimeError(f"For unbatched 2-D input, {what} should also be 2-D but got {given.dim()}-D tensor")
            given = given.unsqueeze(1)
        if tuple(given.shape) != shape:
            raise RuntimeError(f"Expected {what} size {shape}, got {tuple(given.shape)}")
        return given

    def _finish(self, output, unbatched):
        if unbatched:
            return output.squeeze(1)
        return output.transpose(0, 1) if self.batch_first else output

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if not self.bias:
            s += ", bias=False"
        if self.batch_first:
            s += ", batch_first=True"
        if self.dropout:
            s += f", dropout={self.dropout}"
        if self.bidirectional:
            s += ", bidirectional=True"
        return s


class _HiddenStateRNN(_RNNBase):
    """RNN and GRU: the state is h alone."""

    def forward(self, input, hx=None):
        x, unbatched = self._prepare(input)
        h0 = self._initial(hx, x.shape[1], unbatched, x, "hidden")
        output, finals = self._run(x, [(h0[i],) for i in range(h0.shape[0])])
        h_n = _dt.stack([s[0] for s in finals])
        return self._finish(output, unbatched), (h_n.squeeze(1) if unbatched else h_n)


class RNN(_HiddenStateRNN):
    """h' = tanh(W_ih x + b_ih + W_hh h + b_hh) (or relu with nonlinearity='relu')."""

    def __init__(self, *args, nonlinearity="tanh", **kwargs):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
        super().__init__(*args, **kwargs)
        self.nonlinearity = nonlinearity

    def _cell(self, projected, state, w_hh, b_hh):
        pre = projected + _functional().linear(state[0], w_hh, b_hh)
        return ((_dt.tanh(pre) if self.nonlinearity == "tanh" else _dt.relu(pre)),)


class LSTM(_RNNBase):
    """Gates i, f, g, o from W_ih x + b_ih + W_hh h + b_hh (in that order along the weights'
    first dim); c' = f c + i g, h' = o tanh(c')."""
    _gate_count = 4

    def _cell(self, projected, state, w_hh, b_hh):
        h, c = state
        gates = projected + _functional().linear(h, w_hh, b_hh)
        i, f, g, o = gates.chunk(4, -1)
        c = _dt.sigmoid(f) * c + _dt.sigmoid(i) * _dt.tanh(g)
        return _dt.sigmoid(o) * _dt.tanh(c), c

    def forward(self, input, hx=None):
        x, unbatched = self._prepare(input)
        h0, c0 = (None, None) if hx is None else hx
        h0 = self._initial(h0, x.shape[1], unbatched, x, "hidden[0]")
        c0 = self._initial(c0, x.shape[1], unbatched, x, "hidden[1]")
        output, finals = self._run(x, [(h0[i], c0[i]) for i in range(h0.shape[0])])
        h_n, c_n = _dt.stack([s[0] for s in finals]), _dt.stack([s[1] for s in finals])
        if unbatched:
            h_n, c_n = h_n.squeeze(1), c_n.squeeze(1)
        return self._finish(output, unbatched), (h_n, c_n)


class GRU(_HiddenStateRNN):
    """Gates r, z, n: r = sigmoid(x_r + h_r), z = sigmoid(x_z + h_z), n = tanh(x_n + r h_n) with
    x_* from W_ih x + b_ih and h_* from W_hh h + b_hh; h' = (1 - z) n + z h."""
    _gate_count = 3

    def _cell(self, projected, state, w_hh, b_hh):
        h = state[0]
        x_r, x_z, x_n = projected.chunk(3, -1)
        h_r, h_z, h_n = _functional().linear(h, w_hh, b_hh).chunk(3, -1)
        r = _dt.sigmoid(x_r + h_r)
        z = _dt.sigmoid(x_z + h_z)
        n = _dt.tanh(x_n + r * h_n)
        return ((1 - z) * n + z * h,)
