"""dyntrace.save / dyntrace.load: state dicts as safetensors files.

The format (https://github.com/huggingface/safetensors): an 8-byte little-endian header length
N, N bytes of JSON, {name: {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]},
"__metadata__": {str: str}} (offsets relative to the byte after the header), then the tensors'
raw little-endian, row-major bytes. PyTorch, Hugging Face's tools and dyntrace read each other's
files. Nothing is executed on load (no pickle): the header is parsed as JSON and checked in full
before any tensor is made, and a file that does not hold together raises ValueError.

A flat dict of str -> Tensor (a Module's state_dict()) is saved as it is, the file any
safetensors reader expects. Nested checkpoints (an optimizer's state_dict(), or {"model": ...,
"optimizer": ..., "epoch": 3}) of dicts (str or int keys), lists, tuples, tensors, numbers,
strings, bools and None are saved too: each tensor under its path ("optimizer.state.0.exp_avg"),
and the structure, as JSON, in the header's metadata under "dyntrace.structure", which
dt.load reads back into the same nesting (int keys and tuples included). Other safetensors
readers see the tensors by path. Any other value is refused with a TypeError naming its path.

dyntrace's dtypes are saved as F16, F32, F64, I32, I64 and BOOL. Files with BF16, I8, U8 or I16
tensors load too, widened exactly to float32 (BF16) or int32 (the integers), since dyntrace's
runtime has no such dtypes; other safetensors dtypes (F8_*, U16, U32, U64) raise ValueError.
"""
import json
import math
import struct
import sys
from array import array

import dyntrace as _dt

_SAVED_DTYPES = {_dt.float16: "F16", _dt.float32: "F32", _dt.float64: "F64", _dt.int32: "I32",
                 _dt.int64: "I64", _dt.bool: "BOOL"}
# name -> (bytes per element in the file, dyntrace dtype it loads as)
_FILE_DTYPES = {"F16": (2, _dt.float16), "F32": (4, _dt.float32), "F64": (8, _dt.float64),
                "I32": (4, _dt.int32), "I64": (8, _dt.int64), "BOOL": (1, _dt.bool),
                "BF16": (2, _dt.float32), "I8": (1, _dt.int32), "U8": (1, _dt.int32), "I16": (2, _dt.int32)}
_UNSUPPORTED_DTYPES = {"F8_E4M3", "F8_E5M2", "U16", "U32", "U64", "F8_E8M0", "F4", "F6_E2M3", "F6_E3M2", "C64"}
_HEADER_LIMIT = 100_000_000  # the reference implementation's limit on a header's size


def _check_little_endian():
    if sys.byteorder != "little":
        raise NotImplementedError("dyntrace.save/load: safetensors bytes are little-endian; this machine is not")


_STRUCTURE_KEY = "dyntrace.structure"


def _flatten(obj):
    """(tensors by path, structure): the structure is JSON with each container and tensor as a
    one-key object ({"dict": [[key, value], ...]}, {"list": [...]}, {"tuple": [...]},
    {"tensor": name}, {"float": "inf"}) and other values as themselves."""
    tensors = {}

    def walk(value, path):
        where = ".".join(path) or "the object"
        if isinstance(value, _dt.Tensor):
            name = ".".join(path) or "tensor"
            if name in tensors or name == "__metadata__":  # keys containing dots can collide
                name = f"{name}#{len(tensors)}"
            tensors[name] = value
            return {"tensor": name}
        if isinstance(value, float) and not math.isfinite(value):
            return {"float": repr(value)}
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        if isinstance(value, dict):
            for k in value:
                if isinstance(k, bool) or not isinstance(k, (str, int)):
                    raise TypeError(f"dyntrace.save(): {where} has a key {k!r}; keys must be str or int")
            return {"dict": [[k, walk(v, path + [str(k)])] for k, v in value.items()]}
        if isinstance(value, (list, tuple)):
            kind = "list" if isinstance(value, list) else "tuple"
            return {kind: [walk(v, path + [str(i)]) for i, v in enumerate(value)]}
        raise TypeError(f"dyntrace.save(): {where} is a {type(value).__name__}; checkpoints hold tensors, "
                        "numbers, strings, bools, None and dicts, lists and tuples of them")

    structure = walk(obj, [])
    return tensors, structure


def _is_state_dict(obj):
    return isinstance(obj, dict) and all(isinstance(k, str) and k != "__metadata__" and isinstance(v, _dt.Tensor)
                                         for k, v in obj.items())


def save(obj, path, metadata=None):
    """Writes `obj` to `path` in the safetensors format: a dict of str -> Tensor as it is, a
    nested checkpoint with its structure in the metadata (see the module's doc). `metadata` (a
    dict of str -> str) goes into the header's "__metadata__"."""
    _check_little_endian()
    header, blobs, offset = {}, [], 0
    if metadata is not None:
        if not isinstance(metadata, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                      for k, v in metadata.items()):
            raise TypeError("dyntrace.save(): metadata must be a dict of str -> str")
        if _STRUCTURE_KEY in metadata:
            raise ValueError(f"dyntrace.save(): the metadata key {_STRUCTURE_KEY!r} is dyntrace's own")
        header["__metadata__"] = dict(metadata)
    tensors = obj
    if not _is_state_dict(obj):
        tensors, structure = _flatten(obj)
        header.setdefault("__metadata__", {})[_STRUCTURE_KEY] = json.dumps(structure, separators=(",", ":"))
    for name in sorted(tensors):
        tensor = tensors[name]
        data = _dt._tensor_bytes(tensor.detach().cpu())
        header[name] = {"dtype": _SAVED_DTYPES[tensor.dtype], "shape": list(tensor.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)  # pad so the data starts 8-byte aligned, as the reference writer does
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for data in blobs:
            f.write(data)


def _bad(path, why):
    return ValueError(f"dyntrace.load({str(path)!r}): not a valid safetensors file: {why}")


def _parse_header(path, data):
    if len(data) < 8:
        raise _bad(path, f"the file is truncated ({len(data)} bytes; the header length alone takes 8)")
    (n,) = struct.unpack_from("<Q", data, 0)
    if n > _HEADER_LIMIT or 8 + n > len(data):
        raise _bad(path, f"the header length {n} goes beyond the file's {len(data)} bytes")
    try:
        header = json.loads(bytes(data[8:8 + n]).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise _bad(path, f"the header is not JSON ({e})") from None
    if not isinstance(header, dict):
        raise _bad(path, "the header is not a JSON object")
    metadata = header.pop("__metadata__", None)
    if metadata is not None and not (isinstance(metadata, dict) and
                                     all(isinstance(v, str) for v in metadata.values())):
        raise _bad(path, "__metadata__ must map strings to strings")
    return 8 + n, header, metadata or {}


def _check_entry(path, name, entry, data_size):
    """(begin, end, file dtype, shape) of one tensor, every field checked."""
    if not isinstance(entry, dict) or set(entry) != {"dtype", "shape", "data_offsets"}:
        raise _bad(path, f"tensor {name!r} must have exactly dtype, shape and data_offsets, got {entry!r}")
    dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
    if dtype in _UNSUPPORTED_DTYPES:
        raise ValueError(f"dyntrace.load({str(path)!r}): tensor {name!r} has dtype {dtype}, which dyntrace has no "
                         f"type for")
    if dtype not in _FILE_DTYPES:
        raise _bad(path, f"tensor {name!r} has an unknown dtype {dtype!r}")

    def is_int(x):
        return isinstance(x, int) and not isinstance(x, bool) and x >= 0

    if not isinstance(shape, list) or not all(is_int(s) for s in shape):
        raise _bad(path, f"tensor {name!r} has a bad shape {shape!r}")
    if not isinstance(offsets, list) or len(offsets) != 2 or not all(is_int(o) for o in offsets):
        raise _bad(path, f"tensor {name!r} has bad data_offsets {offsets!r}")
    begin, end = offsets
    size = math.prod(shape) * _FILE_DTYPES[dtype][0]
    if end < begin or end - begin != size:
        raise _bad(path, f"tensor {name!r}: data_offsets {offsets} hold {end - begin} bytes, but a {dtype} tensor of "
                         f"shape {shape} takes {size}")
    if end > data_size:
        raise _bad(path, f"tensor {name!r}: data_offsets {offsets} go beyond the {data_size} bytes of data")
    return begin, end, dtype, shape


def read_header(path):
    """(entries, metadata): the checked header of a safetensors file; entries maps each name to
    (begin, end, dtype, shape) with absolute byte positions in the file."""
    with open(path, "rb") as f:
        data = f.read()
    return _read(path, data)[1:]


def _read(path, data):
    start, header, metadata = _parse_header(path, data)
    entries = {name: _check_entry(path, name, entry, len(data) - start) for name, entry in header.items()}
    # The ranges must tile the data: no overlap, no gap, nothing after the last one.
    covered = 0
    for name, (begin, end, _, _) in sorted(entries.items(), key=lambda item: (item[1][0], item[1][1])):
        if begin < covered:
            raise _bad(path, f"tensor {name!r}'s bytes [{begin}, {end}) overlap another tensor's")
        if begin > covered:
            raise _bad(path, f"bytes [{covered}, {begin}) of the data belong to no tensor")
        covered = end
    if covered != len(data) - start:
        raise _bad(path, f"the tensors hold {covered} bytes of data, but the file has {len(data) - start} after "
                         "the header")
    return data, {name: (begin + start, end + start, dtype, shape)
                  for name, (begin, end, dtype, shape) in entries.items()}, metadata


def _widened(raw, dtype):
    """BF16 -> F32 and I8/U8/I16 -> I32 bytes, exactly."""
    if dtype == "BF16":  # a bfloat16 is the top half of the float32 with the same value
        out = bytearray(len(raw) * 2)
        out[2::4] = raw[0::2]
        out[3::4] = raw[1::2]
        return bytes(out)
    return array("i", array({"I8": "b", "U8": "B", "I16": "h"}[dtype], raw)).tobytes()


def _unflatten(path, structure, tensors):
    """The object `structure` (from _flatten) describes, its tensors taken from `tensors`."""
    def build(node):
        if node is None or isinstance(node, (bool, int, float, str)):
            return node
        if isinstance(node, dict) and len(node) == 1:
            (kind, body), = node.items()
            if kind == "tensor" and isinstance(body, str) and body in tensors:
                return tensors[body]
            if kind == "float" and body in ("inf", "-inf", "nan"):
                return float(body)
            if kind in ("list", "tuple") and isinstance(body, list):
                items = [build(v) for v in body]
                return items if kind == "list" else tuple(items)
            if kind == "dict" and isinstance(body, list) and all(
                    isinstance(p, list) and len(p) == 2 and isinstance(p[0], (str, int)) for p in body):
                return {k: build(v) for k, v in body}
        raise _bad(path, f"the {_STRUCTURE_KEY} metadata has an entry dyntrace cannot read: {node!r:.200}")

    try:
        parsed = json.loads(structure)
    except json.JSONDecodeError as e:
        raise _bad(path, f"the {_STRUCTURE_KEY} metadata is not JSON ({e})") from None
    return build(parsed)


def load(path, device="cpu"):
    """Reads a safetensors file: a dict of str -> Tensor (on `device`), in the header's order, or
    the nested checkpoint dt.save wrote (its structure in the metadata)."""
    _check_little_endian()
    with open(path, "rb") as f:
        data = f.read()
    data, entries, metadata = _read(path, data)
    out = {}
    for name, (begin, end, dtype, shape) in entries.items():
        itemsize, target = _FILE_DTYPES[dtype]
        if dtype in ("BF16", "I8", "U8", "I16"):
            raw = _widened(data[begin:end], dtype)
            tensor = _dt._tensor_from_bytes(raw, 0, len(raw), target, shape)
        else:
            tensor = _dt._tensor_from_bytes(data, begin, end, target, shape)
        out[name] = tensor if str(device) == "cpu" else tensor.to(device)
    if _STRUCTURE_KEY in metadata:
        return _unflatten(path, metadata[_STRUCTURE_KEY], out)
    return out


# dt.save / dt.load, as torch.save / torch.load (but safetensors only).
_dt.save = save
_dt.load = load
