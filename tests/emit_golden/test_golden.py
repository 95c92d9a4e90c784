"""The emitted PTX of every golden case is byte-for-byte what golden.txt recorded.

On a mismatch, `PYTHONPATH=$PWD python tests/emit_golden/diff_golden.py CASE [REV]` shows the
first differing lines against the PTX that git revision REV emits."""
from __future__ import annotations

import pytest

import ptxgen
from tests.emit_golden.cases import CASES
from tests.emit_golden.make_golden import digest, recorded

GOLDEN = recorded()


def test_every_case_is_recorded():
    assert sorted(GOLDEN) == sorted(n for n, *_ in CASES)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_ptx_unchanged(case):
    name, g, s, arch = case
    got = digest(ptxgen.compile(g, s, arch).ptx)
    assert got == GOLDEN[name], (f"PTX of golden case {name} changed; see the first difference with "
                                 f"`PYTHONPATH=$PWD python tests/emit_golden/diff_golden.py {name}`")
