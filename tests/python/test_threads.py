"""Several threads calling the same jit'd functions at once, one of them switching dtypes to force
recompiles: every result is right (against the same function run plainly), and the cache holds
exactly one entry per guard set (no entry lost, none traced twice for the same guards).

The GIL serialises Python, but tracing runs Python code (dis) and the eager graph releases the
GIL, so a thread can enter the hook while another is tracing the same code; a tiny switch
interval makes that happen often.
"""
import sys
import threading

import dyntrace as dt
from jitlib import fresh_copy
from testlib import assert_close


def affine(x, w):
    h = dt.tanh(x @ w + 1.0)
    return h.sum(dim=-1) * 0.5


def branchy(x):
    if x.sum() > 0:
        return x * 2.0
    return x - 1.0


def test_threads_share_cache_with_dtype_recompiles():
    jit_affine = dt.jit(fresh_copy(affine))
    jit_branchy = dt.jit(fresh_copy(branchy))
    errors = []
    barrier = threading.Barrier(4)

    def worker(index):
        try:
            barrier.wait()
            for i in range(60):
                # Thread 0 alternates float32 and float64 inputs: recompiles under contention.
                dtype = dt.float64 if index == 0 and i % 2 else dt.float32
                dt.manual_seed(index * 1000 + i)
                x = dt.randn(3 + index, 4).to(dtype)
                w = dt.randn(4, 5).to(dtype)
                assert_close(jit_affine(x, w), affine(x, w), rtol=1e-5, atol=1e-5)
                assert_close(jit_branchy(x), branchy(x), rtol=0, atol=0)
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append((index, repr(e)))

    old_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old_interval)
    assert not errors, errors
    for fn in (jit_affine, jit_branchy):
        guards = dt.guards(fn)
        assert len(guards) == len(set(guards)), "an entry was traced twice:\n" + "\n\n".join(guards)
    # affine: one entry per dtype; neither was lost.
    affine_guards = dt.guards(jit_affine)
    assert len(affine_guards) == 2, affine_guards
    assert any("float64" in g for g in affine_guards) and any("float32" in g for g in affine_guards)
