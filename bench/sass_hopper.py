"""Static Hopper (sm_90a) analysis of one assembled kernel: the assembler's register/spill report
and performance notes, setmaxnreg, and the SASS loops of a TMA + mbarrier + wgmma kernel.

The consumer loop is the loop issuing the most HGMMA; the producer loop the loop issuing the
most UTMALDG (TMA loads) without any HGMMA. A kernel that is not warp-specialised issues its TMA
loads from the wgmma loop itself, and then has no separate producer loop. Both are found from the
control-flow graph (bench/sass_cfg.py), so nothing here knows a kernel's layout.

ptxas says when it gave up on the wgmma pipeline or on setmaxnreg in `info` lines carrying a
C-number, e.g. (ptxas 13.0 and nvJitLink 13.5, verbatim):

    ptxas info    : (C7511) Potential Performance Loss: wgmma.mma_async instructions are serialized
                    due to insufficient register resources for the wgmma pipeline in the function 'mm'
    ptxas info    : (C7508) Potential Performance Loss: 'setmaxnreg' ignored; unable to determine
                    register count at entry.

The serialisation reason has its own number per cause (issue 13 names C7515; C7511 is the
register-pressure one), so every "wgmma ... serialized" note counts, whatever its number.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from sass_cfg import (Instr, Loop, basic_blocks, busiest_loop, classify, dominators, find_loops, hgmma_shape,
                      parse_functions)

_NOTE = re.compile(r"\((C\d{4})\)\s*(.*?)\s*$")


@dataclass(frozen=True)
class PerfNote:
    """One of ptxas's numbered performance notes."""

    code: str   # "C7511"
    text: str   # the sentence after the number
    kind: str   # "wgmma serialized", "setmaxnreg ignored" or "other"


def perf_notes(log: str) -> list[PerfNote]:
    """The numbered notes of an assembler log, each once (nvJitLink repeats ptxas's lines), with
    the source-line suffix ("in line 704") kept in the text."""
    seen: dict[tuple[str, str], PerfNote] = {}
    for line in log.splitlines():
        m = _NOTE.search(line)
        if not m:
            continue
        code, text = m.group(1), m.group(2)
        low = text.lower()
        if "wgmma" in low and "serialized" in low:
            kind = "wgmma serialized"
        elif "setmaxnreg" in low and "ignored" in low:
            kind = "setmaxnreg ignored"
        else:
            kind = "other"
        key = (code, re.sub(r"\s+in line \d+\.?$", "", text))
        if key not in seen or len(text) > len(seen[key].text):
            seen[key] = PerfNote(code, text, kind)
    return list(seen.values())


def setmaxnreg_values(instrs: list[Instr]) -> list[tuple[str, int]]:
    """(direction, registers) of each USETMAXREG, in address order: ("dealloc", 40) for
    `setmaxnreg.dec ... 40`, ("alloc", 232) for `.inc ... 232` (SASS spells it TRY_ALLOC)."""
    out = []
    for ins in instrs:
        if classify(ins) != "setmaxnreg":
            continue
        m = re.search(r"(0x[0-9a-f]+|\b\d+)\s*$", ins.operands)
        if m:
            out.append(("dealloc" if "DEALLOC" in ins.opcode else "alloc", int(m.group(1), 0)))
    return out


def setmaxnreg_summary(values: list[tuple[str, int]]) -> str:
    """'dec 40, inc 232': each distinct setmaxnreg target once (a warp-specialised kernel repeats
    them on several paths), decreases (the producer's budget) first; '-' when there are none."""
    dec = sorted({v for d, v in values if d == "dealloc"})
    inc = sorted({v for d, v in values if d == "alloc"})
    return ", ".join([*(f"dec {v}" for v in dec), *(f"inc {v}" for v in inc)]) or "-"


def registers_in_loop(instrs: list[Instr], loop: Loop | None) -> int | None:
    """The register budget a loop runs under after setmaxnreg: the last USETMAXREG on the chain of
    blocks that dominate the loop's header (every path into the loop passed it), e.g. 40 for a
    producer that gave registers back, 232 for a consumer that took them; None if none does."""
    if loop is None:
        return None
    blocks = basic_blocks(instrs)
    dom = dominators(blocks)
    value = None
    for b in sorted(dom.get(loop.header, ()), key=lambda d: len(dom[d])):  # entry first, header last
        if b == loop.header:
            break
        for _, v in setmaxnreg_values(blocks[b].instrs):
            value = v
    return value


@dataclass
class HopperSass:
    """What the SASS of one kernel shows of the Hopper machinery."""

    function: str
    counts: Counter          # whole kernel, by class (sass_cfg.classify)
    hgmma_shapes: Counter    # whole kernel
    setmaxnreg: list[tuple[str, int]]
    consumer: Loop | None    # the loop with the most HGMMA
    producer: Loop | None    # the loop with the most UTMALDG and no HGMMA (warp-specialised only)
    consumer_registers: int | None = None  # setmaxnreg budget the consumer loop runs under
    producer_registers: int | None = None

    @property
    def registers_per_role(self) -> str:
        """'producer 40, consumer 232' where setmaxnreg reaches the loops, else the plain summary."""
        if self.consumer_registers is None and self.producer_registers is None:
            return setmaxnreg_summary(self.setmaxnreg)
        return ", ".join(f"{role} {r}" for role, r in (("producer", self.producer_registers),
                                                         ("consumer", self.consumer_registers)) if r is not None)

    @property
    def warp_specialised(self) -> bool:
        return self.producer is not None and self.consumer is not None


def analyse_sass(text: str) -> list[HopperSass]:
    """One HopperSass per function of cuobjdump -sass output."""
    out = []
    for name, instrs in parse_functions(text).items():
        loops = find_loops(instrs)
        consumer = busiest_loop(loops, "hgmma", leaf=True)
        producer = busiest_loop(loops, "tma_load", without="hgmma")
        out.append(HopperSass(
            function=name,
            counts=Counter(classify(i) for i in instrs),
            hgmma_shapes=Counter(s for s in map(hgmma_shape, instrs) if s),
            setmaxnreg=setmaxnreg_values(instrs),
            consumer=consumer,
            producer=producer,
            consumer_registers=registers_in_loop(instrs, consumer),
            producer_registers=registers_in_loop(instrs, producer),
        ))
    return out


def hgmma_per_ktile(block: tuple[int, int, int], shape: str, consumer_warpgroups: int) -> int:
    """HGMMA one consumer warpgroup issues per k-tile of a BMxBNxBK block with HGMMA.MxNxK."""
    bm, bn, bk = block
    m, n, k = (int(x) for x in shape.split("x"))
    return max(1, (bm * bn) // (consumer_warpgroups * m * n) * (bk // k))


def loop_columns(loop: Loop | None, ktiles: float = 1.0) -> dict[str, float | int | str]:
    """A loop's mix per k-tile (instructions of one pass / k-tiles it covers), for report tables."""
    if loop is None:
        return {}
    c = loop.classes
    per = (lambda n: n / ktiles) if ktiles != 1 else (lambda n: n)
    return {
        "hgmma": per(c["hgmma"]), "tma": per(c["tma_load"]), "syncs": per(c["mbarrier"]),
        "wg.arr": per(c["wg_arrive"]), "wg.dep": per(c["wg_depbar"]), "bar": per(c["bar"]),
        "other": per(loop.total - sum(c[k] for k in ("hgmma", "tma_load", "mbarrier", "wg_arrive",
                                                          "wg_depbar", "bar"))),
        "total": per(loop.total),
        "cold": len(loop.cold), "shapes": ",".join(f"{s}x{n}" for s, n in sorted(loop.hgmma_shapes.items())),
    }
