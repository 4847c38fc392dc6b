"""Lists and tuples whose length changes between calls (issue 17): once a caller's list changed
length, only `len >= 1` is guarded, and len(), sum()/min()/max() of numbers and append() work
without its items (interpreter/trace_run_sequence.cc). A list in the state of a segment that
starts mid-function (a loop that collects outputs across a graph break) is treated so at once.
Any other use needs the items, and guards the exact length as before.

Every call runs an unmarked copy under plain CPython and the compiled function on equal inputs
(jitlib.run_differential): results, printed output and the inputs afterwards (the lists the code
appended to) must match, tensors bit for bit (both backends promise eager's results).
"""
import dyntrace as dt
from jitlib import jitted_copy, run_differential, stats
from testlib import rand_tensor

BACKENDS = ("eager", "cpu")


def _check(fn, factory, calls, max_traces, backends=BACKENDS, **options):
    for backend in backends:
        dt.reset()
        jfn = jitted_copy(fn, backend=backend, **options)
        run_differential(fn, jfn, factory, calls, seed_base=17, exact=True)
        s = stats()
        assert s["fallbacks"] == 0, (fn.__name__, backend, s["fallback_reasons"])
        assert s["frames_traced"] <= max_traces, (fn.__name__, backend, s["frames_traced"], s["recompile_reasons"])
    return s


def weighted_by_history(x, history):
    return x * len(history) + sum(history)


def test_a_list_argument_that_grows_traces_at_most_twice():
    _check(weighted_by_history, lambda i: (rand_tensor((4,)), list(range(i + 1))), 12, max_traces=2)


def float_statistics(x, losses):
    return x * (sum(losses) / len(losses)) + max(losses) - min(losses)


def test_sum_min_max_of_floats_and_a_growing_tuple():
    _check(float_statistics, lambda i: (rand_tensor((3,)), [0.5 * k - 1.25 for k in range(i + 1)]), 10, max_traces=2)
    _check(float_statistics, lambda i: (rand_tensor((3,)), tuple(0.25 * k for k in range(i + 2))), 10, max_traces=2)


def appends_and_counts(x, log):
    log.append(x * 2)
    if log:
        log.append(len(log))
    return x + len(log)


def test_appending_to_a_growing_list_of_the_caller():
    # The caller's list ends with the tensor and the count, as in CPython (compared after each call).
    _check(appends_and_counts, lambda i: (rand_tensor((2,)), [k for k in range(i)]), 8, max_traces=3)


def _helper_appends(log, value):
    log.append(value)
    return len(log)


def passes_it_on(x, log):
    n = _helper_appends(log, 1.5)
    return x * n


def test_a_growing_list_passed_to_a_followed_function():
    _check(passes_it_on, lambda i: (rand_tensor((2,)), [0.5] * (i + 1)), 8, max_traces=2)


def reads_the_last_item(x, history):
    return x * history[-1] + len(history)


def test_a_use_that_needs_the_items_stays_correct():
    # history[-1] needs the items: each length is its own trace, and every result is right.
    _check(reads_the_last_item, lambda i: (rand_tensor((3,)), [float(k) for k in range(i + 1)]), 6, max_traces=6)


def sum_of_mixed(x, values):
    return x + sum(values)


def test_item_types_that_change_retrace():
    # ints, then floats, then a mix: the fold's result type follows its items, so each is guarded.
    cases = [[1, 2], [1, 2, 3], [1.5, 2.5, 3.5, 4.5], [1, 2.5, 3, 4, 5], [7, 8, 9, 10, 11, 12]]
    _check(sum_of_mixed, lambda i: (rand_tensor((2,)), cases[i]), len(cases), max_traces=5)


def empty_is_special(x, history):
    if history:
        return x * len(history)
    return x - 1


def test_an_empty_list_after_a_run_time_length():
    lengths = [1, 2, 5, 0, 3, 0]
    _check(empty_is_special, lambda i: (rand_tensor((2,)), list(range(lengths[i]))), len(lengths), max_traces=3)


def collects_across_a_break(x, n):
    outs = []
    for i in range(n):
        x = x * 0.5 + 1
        if x.sum() > 1e9:  # an escape every iteration: the loop continues in a segment
            break
        outs.append(x)
    return dt.stack(outs).sum(0), len(outs)


def test_a_loop_collecting_outputs_across_a_break_does_not_exhaust_the_cache():
    s = _check(collects_across_a_break, lambda i: (rand_tensor((4,)), 12), 2, max_traces=8)
    assert s["recompiles"] <= 4, s["recompile_reasons"]


def test_dynamic_false_keeps_lengths_specialised():
    dt.reset()
    jfn = jitted_copy(weighted_by_history, backend="eager", dynamic=False)
    for n in (1, 2, 3):
        jfn(rand_tensor((2,)), list(range(n)))
    assert stats()["frames_traced"] == 3


def test_the_guard_says_len_at_least_one():
    dt.reset()
    jfn = jitted_copy(weighted_by_history, backend="eager")
    for n in (2, 3):
        jfn(rand_tensor((2,)), list(range(n)))
    lines = "\n".join(dt.guards(jfn))
    assert "len(L['history']) >= 1" in lines, lines
    assert "every item of L['history'] is a int" in lines, lines
