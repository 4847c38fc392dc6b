"""dt.save / dt.load in the safetensors format: round trips of every dtype, files built byte by
byte from the format's description (as PyTorch and Hugging Face's tools write them) and headers
read back independently with json/struct, the refusals (truncated, header past the end, bad
JSON, unknown dtype, offsets that do not match or overlap), Module.load_state_dict on loaded
tensors, and files exchanged with PyTorch where it is importable."""
import atexit
import json
import os
import shutil
import struct
import tempfile

import dyntrace as dt
from dyntrace import nn
from testlib import assert_raises, skip

try:
    import torch
except ImportError:  # CPython 3.12 here has no torch
    torch = None


def tmp(name):
    directory = tempfile.mkdtemp(prefix="dt_ckpt_")
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    return os.path.join(directory, name)


def write_file(path, header, data):
    text = json.dumps(header).encode("utf-8")
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)
    return path


def test_round_trip_of_every_dtype_and_views():
    tensors = {
        "f32": dt.randn(3, 4),
        "f64": dt.randn(2, dtype=dt.float64),
        "f16": dt.randn(5, dtype=dt.float16),
        "i64": dt.tensor([-(2 ** 40), 7]),
        "i32": dt.tensor([[1, -2]], dtype=dt.int32),
        "b": dt.tensor([True, False, True]),
        "scalar": dt.tensor(2.5),
        "empty": dt.zeros(0, 3),
        "transposed": dt.arange(6).view(2, 3).T,
    }
    path = tmp("all.safetensors")
    dt.save(tensors, path, metadata={"format": "pt"})
    loaded = dt.load(path)
    assert sorted(loaded) == sorted(tensors)
    for name, t in tensors.items():
        got = loaded[name]
        assert got.dtype == t.dtype and tuple(got.shape) == tuple(t.shape) and got.tolist() == t.tolist(), name


def test_saved_header_reads_back_with_json_and_struct():
    path = tmp("h.safetensors")
    dt.save({"w": dt.tensor([[1.0, 2.0], [3.0, 4.0]]), "b": dt.tensor([1, 2], dtype=dt.int64)}, path,
            metadata={"epoch": "3"})
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    assert header["__metadata__"] == {"epoch": "3"}
    assert header["w"] == {"dtype": "F32", "shape": [2, 2], "data_offsets": header["w"]["data_offsets"]}
    assert header["b"]["dtype"] == "I64" and header["b"]["shape"] == [2]
    data = raw[8 + n:]
    begin, end = header["w"]["data_offsets"]
    assert list(struct.unpack("<4f", data[begin:end])) == [1.0, 2.0, 3.0, 4.0]
    begin, end = header["b"]["data_offsets"]
    assert list(struct.unpack("<2q", data[begin:end])) == [1, 2]
    assert (8 + n) % 8 == 0  # the data starts aligned, as the reference writer pads the header


def test_loads_a_file_built_byte_by_byte():
    data = struct.pack("<3f", 1.5, -2.0, 0.25) + struct.pack("<2h", -3, 300) + struct.pack("<2B", 0, 255) + \
        struct.pack("<2H", 0x3F80, 0xC040) + struct.pack("<2b", -128, 5) + struct.pack("<e", 0.5) + b"\x01\x00"
    header = {
        "__metadata__": {"source": "by hand"},
        "x": {"dtype": "F32", "shape": [3], "data_offsets": [0, 12]},
        "s": {"dtype": "I16", "shape": [2, 1], "data_offsets": [12, 16]},
        "u": {"dtype": "U8", "shape": [2], "data_offsets": [16, 18]},
        "bf": {"dtype": "BF16", "shape": [2], "data_offsets": [18, 22]},
        "i8": {"dtype": "I8", "shape": [2], "data_offsets": [22, 24]},
        "h": {"dtype": "F16", "shape": [], "data_offsets": [24, 26]},
        "m": {"dtype": "BOOL", "shape": [2], "data_offsets": [26, 28]},
    }
    got = dt.load(write_file(tmp("hand.safetensors"), header, data))
    assert got["x"].tolist() == [1.5, -2.0, 0.25] and got["x"].dtype == dt.float32
    # Types dyntrace lacks widen exactly: integers to int32, bfloat16 to float32.
    assert got["s"].tolist() == [[-3], [300]] and got["s"].dtype == dt.int32
    assert got["u"].tolist() == [0, 255] and got["i8"].tolist() == [-128, 5]
    assert got["bf"].tolist() == [1.0, -3.0] and got["bf"].dtype == dt.float32
    assert got["h"].item() == 0.5 and got["h"].dtype == dt.float16
    assert got["m"].tolist() == [True, False]


def test_refuses_files_that_do_not_hold_together():
    f32 = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}
    good = write_file(tmp("ok.safetensors"), {"a": f32}, b"\0" * 8)
    dt.load(good)
    raw = open(good, "rb").read()
    cases = []

    def case(name, content, *match):
        path = tmp(name)
        with open(path, "wb") as f:
            f.write(content)
        cases.append((path, match))

    case("short", raw[:5], "truncated")
    case("cut", raw[:-3], "go beyond")
    case("huge", struct.pack("<Q", 10 ** 6) + raw[8:], "beyond the file")
    bad_json = b"{not json" + b" " * 7
    case("json", struct.pack("<Q", len(bad_json)) + bad_json, "not JSON")
    case("list", struct.pack("<Q", 2) + b"[]", "not a JSON object")

    def with_header(name, header, data, *match):
        cases.append((write_file(tmp(name), header, data), match))

    with_header("dtype", {"a": dict(f32, dtype="Q7")}, b"\0" * 8, "unknown dtype", "Q7")
    with_header("u64", {"a": dict(f32, dtype="U64", data_offsets=[0, 16])}, b"\0" * 16, "U64")
    with_header("size", {"a": dict(f32, data_offsets=[0, 4])}, b"\0" * 4, "takes 8")
    with_header("past", {"a": dict(f32, data_offsets=[4, 12])}, b"\0" * 8, "beyond")
    with_header("overlap", {"a": f32, "b": dict(f32, data_offsets=[4, 12])}, b"\0" * 12, "overlap")
    with_header("gap", {"a": dict(f32, data_offsets=[4, 12])}, b"\0" * 12, "belong to no tensor")
    with_header("trailing", {"a": f32}, b"\0" * 12, "after the header")
    with_header("negative", {"a": dict(f32, shape=[-2])}, b"\0" * 8, "bad shape")
    with_header("fields", {"a": dict(f32, extra=1)}, b"\0" * 8, "exactly")
    with_header("meta", {"__metadata__": {"k": 1}, "a": f32}, b"\0" * 8, "__metadata__")
    for path, match in cases:
        assert_raises(ValueError, lambda: dt.load(path), match=match)


def test_save_refuses_what_a_checkpoint_cannot_hold():
    path = tmp("x.safetensors")
    assert_raises(TypeError, lambda: dt.save({"a": [1, object()]}, path), match=["a.1", "object"])
    assert_raises(TypeError, lambda: dt.save({(1, 2): dt.zeros(1)}, path), match="keys must be str or int")
    assert_raises(TypeError, lambda: dt.save({"a": dt.zeros(1)}, path, metadata={"a": 1}), match="metadata")
    assert_raises(ValueError, lambda: dt.save({"a": 1}, path, metadata={"dyntrace.structure": "{}"}),
                  match="dyntrace's own")


def train(model, opt, steps, seed):
    dt.manual_seed(seed)
    for _ in range(steps):
        opt.zero_grad()
        model(dt.randn(5, 4)).square().mean().backward()
        opt.step()


def test_a_training_checkpoint_with_optimizer_state_resumes_exactly():
    # A nested checkpoint: the optimizer's state_dict (int keys, tuples, 0-d step tensors,
    # amsgrad's extra buffers), numbers and None beside the model's. Resuming from it continues
    # exactly as the run that never stopped.
    def make():
        dt.manual_seed(1)
        model = nn.Sequential(nn.Linear(4, 8), nn.LayerNorm(8), nn.Linear(8, 2))
        return model, dt.optim.AdamW(model.parameters(), lr=1e-2, betas=(0.8, 0.95), amsgrad=True)

    model, opt = make()
    train(model, opt, 3, seed=2)
    path = tmp("ckpt.safetensors")
    checkpoint = {"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": 3,
                  "best": float("inf"), "note": None, "flags": [True, "x"]}
    dt.save(checkpoint, path)
    loaded = dt.load(path)
    assert sorted(loaded) == sorted(checkpoint) and loaded["epoch"] == 3 and loaded["note"] is None
    assert loaded["best"] == float("inf") and loaded["flags"] == [True, "x"]
    groups = loaded["optimizer"]["param_groups"]
    assert groups[0]["betas"] == (0.8, 0.95) and groups == opt.state_dict()["param_groups"]
    state = loaded["optimizer"]["state"]
    assert sorted(state) == sorted(opt.state_dict()["state"]) and all(isinstance(k, int) for k in state)
    assert state[0]["step"].shape == () and state[0]["step"].item() == 3.0
    # Other safetensors readers see the tensors by path.
    entries, metadata = dt.serialization.read_header(path)
    assert "optimizer.state.0.exp_avg" in entries and "model.0.weight" in entries
    assert "dyntrace.structure" in metadata
    resumed_model, resumed_opt = make()
    resumed_model.load_state_dict(loaded["model"])
    resumed_opt.load_state_dict(loaded["optimizer"])
    train(model, opt, 2, seed=5)
    train(resumed_model, resumed_opt, 2, seed=5)
    for (name, p), q in zip(model.named_parameters(), resumed_model.parameters()):
        assert p.tolist() == q.tolist(), name


def test_a_damaged_structure_is_refused():
    path = tmp("bad.safetensors")
    dt.save({"x": [dt.ones(2)]}, path)
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8:8 + n])
    header["__metadata__"]["dyntrace.structure"] = json.dumps({"dict": [["x", {"tensor": "missing"}]]})
    write_file(path, header, data[8 + n:])
    assert_raises(ValueError, lambda: dt.load(path), match="dyntrace.structure")


def test_a_module_loads_its_saved_state_dict():
    def make():
        return nn.Sequential(nn.Linear(4, 8), nn.LayerNorm(8), nn.GELU(), nn.Linear(8, 2))

    a, b = make(), make()
    path = tmp("model.safetensors")
    dt.save(a.state_dict(), path)
    result = b.load_state_dict(dt.load(path))
    assert list(result.missing_keys) == [] and list(result.unexpected_keys) == []
    x = dt.randn(3, 4)
    assert a(x).tolist() == b(x).tolist()
    assert all(p.requires_grad for p in b.parameters())


def test_files_move_to_and_from_pytorch():
    if torch is None:
        skip("PyTorch is not importable in this interpreter (Debian's python3 has python3-torch); the exchange "
             "with PyTorch did not run")
    # PyTorch 1.13 has no safetensors package here: its tensors' bytes go through the same layout
    # by hand (the header and each tensor's .numpy().tobytes()).
    theirs = {"w": torch.randn(3, 2), "i": torch.arange(4, dtype=torch.int64), "h": torch.randn(2).half()}
    names = {torch.float32: "F32", torch.int64: "I64", torch.float16: "F16"}
    header, data = {}, b""
    for name, t in theirs.items():
        raw = t.numpy().tobytes()
        header[name] = {"dtype": names[t.dtype], "shape": list(t.shape),
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    ours = dt.load(write_file(tmp("from_torch.safetensors"), header, data))
    for name, t in theirs.items():
        assert ours[name].tolist() == t.tolist(), name
    path = tmp("to_torch.safetensors")
    dt.save(ours, path)
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    for name, entry in json.loads(raw[8:8 + n]).items():
        begin, end = entry["data_offsets"]
        dtype = {"F32": torch.float32, "I64": torch.int64, "F16": torch.float16}[entry["dtype"]]
        back = torch.frombuffer(bytearray(raw[8 + n + begin:8 + n + end]), dtype=dtype).reshape(entry["shape"])
        assert torch.equal(back, theirs[name]), name
