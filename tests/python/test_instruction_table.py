"""The tracer's instruction table (interpreter/bytecode.cc) against the running CPython's `dis`.

Every row names instructions of this version, and the stack effect the tracer's handler declares
(which builds with assertions enforce on every traced instruction) is CPython's own, from
`dis.stack_effect`, for every argument the instruction's encoding allows that matters. Where the
tracer's handler does the work of two CPython instructions, the two effects are added up:
- 3.11's CALL also does PRECALL's part (PRECALL itself is a no-op for the tracer);
- 3.12's FOR_ITER, when the loop ends, also does the END_FOR it skips;
- RETURN_GENERATOR pushes the None a generator's first resumption receives (CPython pushes it
  when resuming the frame; the tracer runs a consumed generator's body straight through).
"""
import dis
import sys

import dyntrace as dt

PY312 = sys.version_info >= (3, 12)

# Arguments worth checking per instruction (the bits each one's encoding uses).
ARGS = {
    "COPY": range(1, 5), "SWAP": range(2, 5),
    "MAKE_FUNCTION": [a for a in range(16) if not a & 0x04] + [0x04],
    "FORMAT_VALUE": range(8), "UNPACK_EX": [0, 1, 2, 0x100, 0x101, 0x203],
    "LOAD_GLOBAL": range(6), "LOAD_ATTR": range(6), "CALL_FUNCTION_EX": [0, 1],
    "BUILD_SLICE": [2, 3],
}
DEFAULT_ARGS = range(0, 5)


def rows():
    return dt._instruction_table()


def names_here(row):
    return row["names_312"] if PY312 else row["names_311"]


def dis_effect(name, arg, jump):
    op = dis.opmap[name]
    if op < dis.HAVE_ARGUMENT:
        return dis.stack_effect(op, jump=jump)
    return dis.stack_effect(op, arg, jump=jump)


def expected_effect(name, arg, jump):
    if name == "PRECALL":
        return 0
    effect = dis_effect(name, arg, jump)
    if name == "CALL" and not PY312:
        effect += dis_effect("PRECALL", arg, jump)
    if name == "FOR_ITER" and PY312 and jump:
        effect += dis_effect("END_FOR", 0, False)
    if name == "RETURN_GENERATOR":
        effect += 1
    return effect


def test_every_name_is_an_instruction_of_this_version():
    seen = set()
    for row in rows():
        for name in names_here(row):
            assert name in dis.opmap, (name, sys.version_info[:2])
            assert name not in seen, f"{name} has two rows"
            seen.add(name)
    assert len(seen) >= 60, len(seen)


def test_stack_effects_match_dis():
    checked = 0
    for row in rows():
        for name in names_here(row):
            op = dis.opmap[name]
            args = [0] if op < dis.HAVE_ARGUMENT else ARGS.get(name, DEFAULT_ARGS)
            for arg in args:
                for jump in (False, True):
                    pops, pushes = dt._stack_effect(name, arg, jump)
                    assert pops >= 0 and pushes >= 0, (name, arg, pops, pushes)
                    want = expected_effect(name, arg, jump)
                    assert pushes - pops == want, (
                        f"{name} arg={arg} jump={jump}: the row says -{pops}+{pushes}, dis says {want:+d}")
                    checked += 1
    assert checked > 300, checked


def test_flow_matches_dis_jump_tables():
    jumps = set(dis.hasjrel) | set(dis.hasjabs)
    for row in rows():
        for name in names_here(row):
            jumping = dis.opmap[name] in jumps
            assert jumping == (row["flow"] in ("jump", "branch")), (name, row["flow"])
            if row["flow"] == "return":
                assert name.startswith("RETURN_"), name
            assert (row["flow"] == "raise") == (name in ("RAISE_VARARGS", "RERAISE")), (name, row["flow"])


def test_escapes_are_where_the_hook_can_resume():
    exits = {name: row["exit"] for row in rows() for name in names_here(row)}
    assert exits["CALL"] == "escape call"
    assert exits["FOR_ITER"] == "escape for-iter"
    branch_names = ["POP_JUMP_IF_FALSE", "POP_JUMP_IF_TRUE"] if PY312 else [
        "POP_JUMP_FORWARD_IF_FALSE", "POP_JUMP_BACKWARD_IF_FALSE", "POP_JUMP_FORWARD_IF_TRUE",
        "POP_JUMP_BACKWARD_IF_TRUE"]
    for name in branch_names:
        assert exits[name] == "escape jump", name
    escaping = {n for n, e in exits.items() if e != "hand back"}
    assert escaping == set(branch_names) | {"CALL", "FOR_ITER"}, escaping


def test_unknown_instructions_have_no_row():
    assert dt._stack_effect("SETUP_ANNOTATIONS", 0, False) is None
    assert dt._stack_effect("NOT_AN_INSTRUCTION", 0, False) is None
