"""Planted bugs the grouped kernels' tests share (sm_90a and sm_100a): each takes the IR builder
and a walk's tile record (anything with `tile.bm0` and `rows_end`) and returns it changed, as the
kernel's own walk would have produced it wrongly."""
from __future__ import annotations

import dataclasses

from ptxgen.ir import Imm
from ptxgen.ir import ops as ptx
from ptxgen.ir.ops import U32


def shift_rows(b, walked):
    """The group's rows start one row late (and end one late): a wrong row origin."""
    tile = dataclasses.replace(walked.tile, bm0=ptx.add(b, U32, walked.tile.bm0, Imm("1")))
    return dataclasses.replace(walked, tile=tile, rows_end=ptx.add(b, U32, walked.rows_end, Imm("1")))


def one_more_row(b, walked):
    """The group's row guard lets one row past its end through (masked: a row that must stay)."""
    return dataclasses.replace(walked, rows_end=ptx.add(b, U32, walked.rows_end, Imm("1")))
