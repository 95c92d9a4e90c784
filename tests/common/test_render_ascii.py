"""Emitted PTX is plain ASCII: ptxas rejects a module at its first non-ASCII byte ("Unexpected
non-ASCII character"), comments included, so the renderer refuses one with the line it is on."""
from __future__ import annotations

import pytest

import ptxgen
from ptxgen import Gemm, Schedule
from ptxgen.ir import Builder
from ptxgen.ir.render import render
from ptxgen.schedule.targets import TARGETS
from tests.emit_golden.cases import CASES


def _plain(fn, header):
    return render(fn, TARGETS["sm_80"], header, [], lambda v: f"%r{v.id}")


def test_every_golden_kernel_is_ascii():
    for name, g, s, arch in CASES[::9]:
        assert ptxgen.compile(g, s, arch).ptx.isascii(), name


def test_a_non_ascii_comment_is_refused_with_its_line():
    b = Builder("k", [])
    b.comment("tma.md \u00a79d")  # the section sign a docs citation might carry
    with pytest.raises(ValueError, match=r"line \d+ holds the non-ASCII character '\u00a7'.*ASCII"):
        _plain(b.function, ["header"])
    ok = Builder("k", [])
    ok.comment("tma.md section 9d")
    assert _plain(ok.function, ["header"]).isascii()


def test_a_non_ascii_header_is_refused():
    with pytest.raises(ValueError, match="non-ASCII"):
        _plain(Builder("k", []).function, ["A x B \u2192 C"])
    assert ptxgen.compile(Gemm(64, 64, 64), Schedule(block=(64, 64, 32))).ptx.isascii()
