"""No golden case's PTX spends an instruction on a value the code generator knows: `and` with 0
(a swizzle over one 16-byte chunk) and the shift and add of its 0 are folded away (emit/index.py)."""
from __future__ import annotations

import re

import pytest

import ptxgen
from tests.emit_golden.cases import CASES

KNOWN_ZERO = re.compile(r"^\s*(?:and\.b32\s+%r\d+,\s*%r\d+,\s*0|rem\.u32\s+%r\d+,\s*%r\d+,\s*1);", re.M)


@pytest.mark.parametrize("name,g,s,arch", CASES, ids=[c[0] for c in CASES])
def test_no_instruction_computes_a_known_zero(name, g, s, arch):
    ptx = ptxgen.compile(g, s, arch).ptx
    assert not KNOWN_ZERO.findall(ptx), KNOWN_ZERO.findall(ptx)[:3]


@pytest.mark.parametrize("name,g,s,arch", [c for c in CASES if c[3] == "sm_90a"], ids=[c[0] for c in CASES
                                                                                      if c[3] == "sm_90a"])
def test_hopper_roles_read_as_english(name, g, s, arch):
    """One consumer warpgroup is "warpgroup 0 consumes", not "warpgroups 0..0 consume"."""
    ptx = ptxgen.compile(g, s, arch).ptx
    assert "0..0" not in ptx
