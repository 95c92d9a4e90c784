"""Resource and error parsing on logs recorded from ptxas 13.0 and nvJitLink 13.5."""
from __future__ import annotations

import pytest

from ptxgen.errors import AssembleError
from ptxgen.runtime.ptxlog import Resources, functions_in_log, parse_errors, parse_resources

# nvJitLink 13.5 -verbose, sm_90: embedded ptxas lines, then nvJitLink's summary.
NVJ_SM90 = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'shm' for 'sm_90'
ptxas info    : Function properties for shm
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 8 registers, used 1 barriers, 4096 bytes smem
ptxas info    : Compile time = 2.899 ms
ptxas info    : Compiling entry function 'spill' for 'sm_90'
ptxas info    : Function properties for spill
ptxas         .     112 bytes stack frame, 108 bytes spill stores, 108 bytes spill loads
ptxas info    : Used 32 registers, used 0 barriers
ptxas info    : Compile time = 27.507 ms
info    : 0 bytes gmem
info    : Function properties for 'spill':
info    : used 32 registers, used 9 barriers, 112 stack, 0 bytes smem, 536 bytes cmem[0], 0 bytes lmem
info    : Function properties for 'shm':
info    : used 8 registers, used 1 barriers, 0 stack, 5120 bytes smem, 536 bytes cmem[0], 0 bytes lmem
"""

# standalone ptxas 13.0 -v, sm_80, an entry that calls a (here inlined) .func
PTXAS_SM80 = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'kcall' for 'sm_80'
ptxas info    : Function properties for kcall
    64 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 12 registers, used 0 barriers, 64 bytes cumulative stack size, 360 bytes cmem[0], 8 bytes cmem[2]
ptxas info    : Compile time = 28.751 ms
ptxas info    : Function properties for helper
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
"""

# nvJitLink with a non-inlined callee: the callee's block comes before the entry's.
NVJ_CALLEE = """\
ptxas info    : 0 bytes gmem
ptxas info    : Function properties for helper
ptxas         .     64 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compile time = 12.070 ms
ptxas info    : Compiling entry function 'kcall' for 'sm_80'
ptxas info    : Function properties for kcall
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 24 registers, used 0 barriers, 360 bytes cmem[0]
ptxas info    : Compile time = 2.834 ms
info    : 0 bytes gmem
info    : Function properties for 'kcall':
info    : used 24 registers, used 6 barriers, 64 stack, 0 bytes smem, 360 bytes cmem[0], 0 bytes lmem
"""

NVJ_ERRORS = """\
ptxas application ptx input, line 23; error   : Arguments mismatch for instruction 'add'
ptxas application ptx input, line 24; error   : Unknown modifier '.op'
ptxas application ptx input, line 24; error   : Not a name of any known instruction: 'bogus'
ptxas application ptx input, line 23; error   : Unknown symbol '%r9'
ptxas fatal   : Ptx assembly aborted due to errors
ERROR NVJITLINK_ERROR_PTX_COMPILE: JIT the PTX (ptxgen.ptx)
"""

PTXAS_ERRORS = """\
ptxas /tmp/x.ptx, line 12; error   : Unknown symbol 'smem'
ptxas /tmp/x.ptx, line 3; warning : something harmless
ptxas fatal   : Ptx assembly aborted due to errors
"""


def test_ptxas_lines_win_over_nvjitlink_summary():
    r = parse_resources(NVJ_SM90, "shm")
    assert r == Resources(registers=8, shared_bytes=4096, constant_bytes=536)
    s = parse_resources(NVJ_SM90, "spill")
    assert (s.registers, s.spill_store_bytes, s.spill_load_bytes, s.stack_bytes) == (32, 108, 108, 112)
    assert s.spill_bytes == 216


def test_sm90_reserved_smem_is_not_reported_as_static():
    log = ("ptxas info    : Compiling entry function 'g' for 'sm_90'\n"
           "ptxas info    : Function properties for g\n"
           "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
           "ptxas info    : Used 208 registers, used 1 barriers\n"
           "info    : Function properties for 'g':\n"
           "info    : used 208 registers, used 1 barriers, 0 stack, 1024 bytes smem, 576 bytes cmem[0], 0 bytes lmem\n")
    assert parse_resources(log, "g") == Resources(registers=208, shared_bytes=0, constant_bytes=576)


def test_standalone_ptxas_sums_cmem_and_uses_cumulative_stack():
    r = parse_resources(PTXAS_SM80, "kcall")
    assert r == Resources(registers=12, stack_bytes=64, constant_bytes=368)


def test_callee_block_does_not_leak_into_entry():
    r = parse_resources(NVJ_CALLEE, "kcall")
    assert r.registers == 24
    assert r.stack_bytes == 64  # nvJitLink's cumulative figure, larger than the entry's own frame
    assert set(functions_in_log(NVJ_CALLEE)) == {"helper", "kcall"}


def test_nvjitlink_summary_alone():
    log = "info    : Function properties for 'k':\ninfo    : used 40 registers, 16 stack, 2048 bytes smem\n"
    assert parse_resources(log, "k") == Resources(registers=40, shared_bytes=2048, stack_bytes=16)


def test_ptxas_alone_missing_numbers_default_to_zero():
    log = "ptxas info    : Compiling entry function 'k' for 'sm_80'\nptxas info    : Used 7 registers\n"
    assert parse_resources(log, "k") == Resources(registers=7)


def test_missing_register_count_is_an_error():
    with pytest.raises(AssembleError, match="no register count for entry 'helper'"):
        parse_resources(NVJ_CALLEE, "helper")
    with pytest.raises(AssembleError, match="functions reported: none"):
        parse_resources("", "gemm")


def test_similar_names_are_not_confused():
    log = ("ptxas info    : Compiling entry function 'gemm_2' for 'sm_80'\n"
           "ptxas info    : Used 99 registers\n"
           "ptxas info    : Compiling entry function 'gemm' for 'sm_80'\n"
           "ptxas info    : Used 11 registers\n")
    assert parse_resources(log, "gemm").registers == 11
    assert parse_resources(log, "gemm_2").registers == 99


def test_error_lines_both_dialects():
    assert parse_errors(NVJ_ERRORS) == ([23, 24], "line 23: Arguments mismatch for instruction 'add'")
    assert parse_errors(PTXAS_ERRORS) == ([12], "line 12: Unknown symbol 'smem'")


def test_fatal_without_line():
    lines, first = parse_errors("ptxas fatal   : Value 'sm_12' is not defined for option 'gpu-name'\n")
    assert lines == [] and "sm_12" in first
