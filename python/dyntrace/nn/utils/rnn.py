"""dyntrace.nn.utils.rnn: pad_sequence, as torch.nn.utils.rnn's (packed sequences are not
supported: the recurrent layers take padded batches)."""
import dyntrace as _dt


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Sequences of shapes [L_i, *] stacked into [L_max, B, *] ([B, L_max, *] with batch_first),
    each padded with `padding_value` after its end (before it with padding_side="left")."""
    if isinstance(sequences, _dt.Tensor):
        sequences = list(sequences.unbind(0))
    sequences = list(sequences)
    if not sequences:
        raise RuntimeError("received an empty list of sequences")
    if padding_side not in ("left", "right"):
        raise ValueError(f"padding_side should be either 'right' or 'left', but got {padding_side}")
    trailing = tuple(sequences[0].shape[1:])
    longest = max(s.shape[0] for s in sequences)
    rows = []
    for s in sequences:
        if tuple(s.shape[1:]) != trailing:
            raise RuntimeError(f"pad_sequence: every sequence must have the trailing shape {trailing}, got "
                               f"{tuple(s.shape[1:])}")
        missing = longest - s.shape[0]
        if missing:
            pad = _dt.full((missing,) + trailing, padding_value, dtype=s.dtype, device=s.device)
            s = _dt.cat([s, pad] if padding_side == "right" else [pad, s])
        rows.append(s)
    return _dt.stack(rows, 0 if batch_first else 1)
