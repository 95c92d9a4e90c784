"""Every refusal in the verifier's rules table (tests/schedule/test_verifier.py INVALID) gives a fix
that works: the first fix its message suggests, written as `field=value`, is applied to the Gemm,
Schedule or Epilogue, and the verifier then accepts them. Fixes that are not a field's value (split
the problem, use another arch) are listed in PROSE with why; tests/cli/test_cli_fixes.py does the
same through the CLI."""
from __future__ import annotations

import ast
import re
from dataclasses import fields, replace

import pytest

import ptxgen
from ptxgen import Epilogue, Gemm, Schedule, ScheduleError
from tests.schedule.test_verifier import INVALID, _built

#: Cases whose fix is not (yet) a field's value, and why; everything else must be followable.
PROSE = {
    "arch": "names the supported archs (sm_70 has no ptxgen target)",
    "m too big": "split the problem into smaller GEMMs",
    "grid y": "the suggested raster='grouped' makes the x grid too large at this M: split the problem",
    "grid x, grouped": "split the problem across several launches",
    "warp tile / mma": "no warp grid of the sm_80 rules tiles a 40-row block: BM must change (prose)",
    "chunks / threads": "'grow the block tile or use fewer warps': not yet a value (issue 22, open)",
    "non-uniform copy map": "'use power-of-two tile widths': not yet a value (issue 22, open)",
    "2-byte copy map not uniform": "'use power-of-two tile widths': not yet a value (issue 22, open)",
    "swizzle needs 2^n": "'use a power-of-two tile width or ...': not yet a value (issue 22, open)",
    "registers": "'use more warps': not yet a value (issue 22, open)",
    "registers per thread at 512 threads": "'use more warps': not yet a value (issue 22, open)",
    "alpha underflows to 0": "rescale the operands: a change of data, not of a field",
    "alpha overflows": "rescale the operands: a change of data, not of a field",
    "beta is an f32 subnormal": "rescale the operands: a change of data, not of a field",
    "alpha NaN": "give a finite number: which one is the user's",
    "beta inf": "give a finite number: which one is the user's",
}
#: Fixes followed in a row at most: one rule's fix may uncover another's (8x8 warps -> fewer warps
#: -> the 512x512 block's shared memory), each step suggested by the verifier itself.
STEPS = 3
_ASSIGN = re.compile(r"\b([a-z_]+|BM|BN|BK)=(\([^)]*\)|'[^']*'|[\w.+-]+)")


def first_fix(fix: str) -> dict[str, object]:
    """The `field=value` assignments of the first alternative of a fix."""
    first = re.split(r",? or |; or ", fix)[0]
    return {name: ast.literal_eval(value) for name, value in _ASSIGN.findall(first)}


def apply(g: Gemm, s: Schedule, changes: dict[str, object]) -> tuple[Gemm, Schedule]:
    gemm_fields = {f.name for f in fields(Gemm)}
    epi_fields = {f.name for f in fields(Epilogue)}
    for name, value in changes.items():
        if name in ("BM", "BN", "BK"):
            block = list(s.block)
            block["BM BN BK".split().index(name)] = value
            s = replace(s, block=tuple(block))
        elif name in gemm_fields:
            g = replace(g, **{name: value})
        elif name in epi_fields:
            g = replace(g, epilogue=replace(g.epi, **{name: value}))
        else:
            s = replace(s, **{name: value})
    return g, s


@pytest.mark.parametrize("label,gemm,sched,arch,field", INVALID, ids=[c[0] for c in INVALID])
def test_the_first_fix_is_accepted(label, gemm, sched, arch, field):
    if label in PROSE:
        pytest.skip(PROSE[label])
    try:
        g, s = _built(gemm), _built(sched)
    except ScheduleError:  # a field wrong on its own: tests/common/test_api_inputs.py checks its fix
        pytest.skip("refused when built; the fix for the value given is checked in test_api_inputs")
    for _ in range(STEPS):
        try:
            ptxgen.verify(g, s, arch)
            return
        except ScheduleError as err:
            changes = first_fix(err.fix)
            assert changes, f"no field=value to follow in the fix: {err}"
            g, s = apply(g, s, changes)
    ptxgen.verify(g, s, arch)
