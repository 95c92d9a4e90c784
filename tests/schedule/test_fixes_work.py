"""Every refusal in the verifier's rules table (tests/schedule/test_verifier.py INVALID) gives a fix
that works: the first fix its message suggests, written as `field=value`, is applied to the Gemm,
Schedule or Epilogue (or the arch), and the verifier then accepts them, every one of the table's
refusals; where part of a fix is the user's data (DATA_PART), the message is checked to say it.
tests/cli/test_cli_fixes.py does the same through the CLI."""
from __future__ import annotations

import ast
import re
from dataclasses import fields, replace

import pytest

import ptxgen
from ptxgen import Epilogue, Gemm, Schedule, ScheduleError
from tests.schedule.test_verifier import INVALID, _built

#: Cases whose fix has a part no field holds, checked in the message besides following the field
#: part: the factor moved out of alpha/beta goes into the data (the user's step: A, B, a scale vector
#: or C, in parts their dtypes hold), and a problem too large for one launch is split into several.
DATA_PART = {
    "alpha underflows to 0": "fold 1e-50 into A, B or a scale vector",
    "alpha overflows": "fold 1e+39 into A, B or a scale vector",
    "beta is an f32 subnormal": "fold -1e-40 into C",
    "m too big": "split the problem into 2 GEMMs",
    "grid x, grouped": "split the problem across several launches",
}
#: Cases whose first fix is accepted only after the verifier's fix for a later rule: M split to
#: 2^30 rows is 8388608 CTA rows, past the grid's y limit, whose fix (raster='grouped') then holds.
LATER_RULE = {"m too big": "schedule.raster"}
#: Fixes followed in a row at most: one rule's fix may uncover another's (8x8 warps -> fewer warps
#: -> the 512x512 block's shared memory), each step suggested by the verifier itself.
STEPS = 3
_ASSIGN = re.compile(r"\b([a-z_]+|BM|BN|BK)=(\([^)]*\)|'[^']*'|[\w.+-]+)")


def first_fix(fix: str) -> dict[str, object]:
    """The `field=value` assignments of the first alternative of a fix."""
    first = re.split(r",? or |; or ", fix)[0]
    return {name: ast.literal_eval(value) for name, value in _ASSIGN.findall(first)}


def apply(g: Gemm, s: Schedule, arch: str, changes: dict[str, object]) -> tuple[Gemm, Schedule, str]:
    gemm_fields = {f.name for f in fields(Gemm)}
    epi_fields = {f.name for f in fields(Epilogue)}
    for name, value in changes.items():
        if name == "arch":
            arch = value
        elif name in ("BM", "BN", "BK"):
            block = list(s.block)
            block["BM BN BK".split().index(name)] = value
            s = replace(s, block=tuple(block))
        elif name in gemm_fields:
            g = replace(g, **{name: value})
        elif name in epi_fields:
            g = replace(g, epilogue=replace(g.epi, **{name: value}))
        else:
            s = replace(s, **{name: value})
    return g, s, arch


@pytest.mark.parametrize("label,gemm,sched,arch,field", INVALID, ids=[c[0] for c in INVALID])
def test_the_first_fix_is_accepted(label, gemm, sched, arch, field):
    try:
        g, s = _built(gemm), _built(sched)
    except ScheduleError:  # a field wrong on its own: tests/common/test_api_inputs.py checks its fix
        pytest.skip("refused when built; the fix for the value given is checked in test_api_inputs")
    fields_refused = []
    for _ in range(STEPS):
        try:
            ptxgen.verify(g, s, arch)
            break
        except ScheduleError as err:
            fields_refused.append(err.field)
            if len(fields_refused) == 1 and label in DATA_PART:
                assert DATA_PART[label] in err.fix, err
            changes = first_fix(err.fix)
            assert changes, f"no field=value to follow in the fix: {err}"
            g, s, arch = apply(g, s, arch, changes)
    ptxgen.verify(g, s, arch)
    if label in LATER_RULE:
        assert fields_refused[1:] == [LATER_RULE[label]], fields_refused
