"""Run by the dyntrace command (`dyntrace --stats tests/gpu/cli_smoke.py`): every frame is traced,
so the function below is compiled (for CUDA tensors when a GPU works, else for CPU ones); its
result is checked against plain Python arithmetic on the same numbers."""
import math
import sys

import dyntrace as dt


def scaled_softplus(x, y):
    return dt.log1p((x * y).exp()) * 0.5


def main():
    device = "cuda" if dt.cuda.is_available() else "cpu"
    dt.manual_seed(5)
    x, y = dt.randn(1000), dt.randn(1000)
    got = scaled_softplus(x.to(device), y.to(device)).cpu().tolist()
    want = [math.log1p(math.exp(a * b)) * 0.5 for a, b in zip(x.tolist(), y.tolist())]
    worst = max(abs(g - w) / (1e-6 + abs(w)) for g, w in zip(got, want))
    print("cli_smoke: %s, worst relative error %.2g" % (device, worst))
    return 0 if worst < 1e-5 else 1


sys.exit(main())
