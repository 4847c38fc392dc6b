"""dyntrace.save / dyntrace.load: state dicts as safetensors files.

The format (https://github.com/huggingface/safetensors): an 8-byte little-endian header length
N, N bytes of JSON, {name: {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]},
"__metadata__": {str: str}} (offsets relative to the byte after the header), then the tensors'
raw little-endian, row-major bytes. PyTorch, Hugging Face's tools and dyntrace read each other's
files. Nothing is executed on load (no pickle): the header is parsed as JSON and checked in full
before any tensor is made, and a file that does not hold together raises ValueError.

What is saved is a flat dict of str -> Tensor (a Module's state_dict()). Anything else,
including an optimizer's state_dict() (nested dicts, numbers, lists), is refused with a
TypeError: safetensors has no place for non-tensor values.

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


def save(obj, path, metadata=None):
    """Writes `obj`, a dict of str -> Tensor, to `path` in the safetensors format; `metadata`
    (a dict of str -> str) goes into the header's "__metadata__"."""
    _check_little_endian()
    if not isinstance(obj, dict):
        raise TypeError(f"dyntrace.save(): expected a dict of str -> Tensor (a state dict), got {type(obj).__name__}")
    header, blobs, offset = {}, [], 0
    if metadata is not None:
        if not isinstance(metadata, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                      for k, v in metadata.items()):
            raise TypeError("dyntrace.save(): metadata must be a dict of str -> str")
        header["__metadata__"] = dict(metadata)
    for name in sorted(obj):
        tensor = obj[name]
        if not isinstance(name, str) or name == "__metadata__":
            raise TypeError(f"dyntrace.save(): keys must be str other than '__metadata__', got {name!r}")
        if not isinstance(tensor, _dt.Tensor):
            raise TypeError(f"dyntrace.save(): the value for {name!r} is a {type(tensor).__name__}; safetensors "
                            "files hold only tensors (an optimizer's state_dict, with its nested dicts and numbers, "
                            "cannot be saved this way)")
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


def load(path, device="cpu"):
    """Reads a safetensors file into a dict of str -> Tensor (on `device`), in the header's order."""
    _check_little_endian()
    with open(path, "rb") as f:
        data = f.read()
    data, entries, _ = _read(path, data)
    out = {}
    for name, (begin, end, dtype, shape) in entries.items():
        itemsize, target = _FILE_DTYPES[dtype]
        if dtype in ("BF16", "I8", "U8", "I16"):
            raw = _widened(data[begin:end], dtype)
            tensor = _dt._tensor_from_bytes(raw, 0, len(raw), target, shape)
        else:
            tensor = _dt._tensor_from_bytes(data, begin, end, target, shape)
        out[name] = tensor if str(device) == "cpu" else tensor.to(device)
    return out


# dt.save / dt.load, as torch.save / torch.load (but safetensors only).
_dt.save = save
_dt.load = load
