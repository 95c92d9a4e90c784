"""SASS text -> instructions -> basic blocks -> loops, for bench/sass.py, bench/triton_hopper.py and
bench/sass_blackwell.py (tcgen05: the MMA warp's loop, the producer's, the epilogue's TMEM drain).

Loops come from the control-flow graph, not from addresses or a kernel's known layout: a back
edge is a branch to a block that dominates it, and its natural loop is the header plus every
block that reaches the back edge without passing the header. That finds both loops of a
warp-specialised kernel (the producer's TMA loop and the consumer's wgmma loop live in different
branches of one function) and keeps out-of-line slow paths (ptxas moves an mbarrier's retry
spin below the exit) apart from the hot body.

Per loop, `hot` is one pass through the loop's blocks laid out between its header and its last
back edge (what an iteration executes when every wait succeeds at once: per k-tile when the loop
is not unrolled), and `cold` the loop's blocks outside that span (the retry paths).
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

#: One disassembled instruction: `/*0530*/  @!P0 HGMMA.64x128x16.F32 R24, gdesc[UR8], R24 ;`
_LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Za-z0-9_.]*)\s*([^;]*);")
_FUNCTION = re.compile(r"^\s*Function\s*:\s*(\S+)", re.M)
_HGMMA_SHAPE = re.compile(r"^[HQI]GMMA\.(\d+x\d+x\d+)")

#: Instruction classes by opcode family (the part before the first dot) or full-opcode prefix.
#: Prefixes are tried longest first, so WARPGROUP.ARRIVE beats a plain WARPGROUP entry.
CLASS_OF_PREFIX = {
    "HGMMA": "hgmma",              # wgmma.mma_async (sm_90a): f16/bf16/tf32 operands
    "QGMMA": "hgmma",              # ... fp8 (e4m3/e5m2) operands, e.g. QGMMA.64x256x32.F32.E4M3.E4M3
    "IGMMA": "hgmma",              # ... 8-bit integer operands, e.g. IGMMA.64x256x32.S8.S8
    "HMMA": "mma", "IMMA": "mma",  # mma.sync / wmma
    # tcgen05 (sm_100a), as cuobjdump 13.5 names them (seen on tests/sim/blackwell_corpus/ under
    # ptxas 13.5): the MMA by kind (H: f16/bf16/tf32, Q: fp8 and block-scaled mxf8f6f4, O:
    # block-scaled e2m1, I: int8; `.2CTA` for a CTA pair), `gdesc[..], gdesc[..], tmem[..]` operands
    "UTCHMMA": "utcmma", "UTCQMMA": "utcmma", "UTCOMMA": "utcmma", "UTCIMMA": "utcmma",
    "UTCBAR": "tc_commit",         # tcgen05.commit ... mbarrier::arrive::one
    "LDTM": "tmem_load",           # tcgen05.ld (e.g. LDTM.x32: 32 columns of 32 bits per thread)
    "STTM": "tmem_store",          # tcgen05.st
    "UTCCP": "tmem_copy",          # tcgen05.cp (shared memory -> tensor memory: block scales)
    "UTCATOMSWS": "tmem_alloc",    # tcgen05.alloc / dealloc / relinquish_alloc_permit
    "UTMALDG": "tma_load",         # cp.async.bulk.tensor global -> shared
    "UTMASTG": "tma_store",        # cp.async.bulk.tensor shared -> global
    "UTMAPF": "tma_prefetch",
    "UBLKCP": "bulk_copy",         # cp.async.bulk (no tensor map)
    "SYNCS": "mbarrier",           # mbarrier arrive / expect_tx / try_wait / inval
    "WARPGROUP.ARRIVE": "wg_arrive",  # wgmma.fence
    "WARPGROUP.DEPBAR": "wg_depbar",  # wgmma.wait_group
    "WARPSYNC": "warpsync",
    "USETMAXREG": "setmaxnreg",
    "LDSM": "ldsm", "STSM": "stsm", "LDS": "lds", "STS": "sts",
    "LDGSTS": "cp_async", "LDGDEPBAR": "cp_async_wait", "DEPBAR": "depbar",
    "BAR": "bar", "BRA": "branch", "NOP": "nop",
}
_PREFIXES = sorted(CLASS_OF_PREFIX, key=len, reverse=True)


@dataclass(frozen=True)
class Instr:
    """One instruction that can execute (`@!PT` padding is dropped by the parser)."""

    addr: int
    pred: str      # "" when unconditional, else e.g. "@!P0" or "@UP3"
    opcode: str    # full opcode with modifiers, e.g. "HGMMA.64x128x16.F32"
    operands: str

    @property
    def family(self) -> str:
        return self.opcode.split(".")[0]

    @property
    def conditional(self) -> bool:
        """Predicated, or a branch on an operand predicate (`BRA.U !UP0, 0x..`, `BRA.DIV UR4, 0x..`)."""
        return self.pred not in ("", "@PT", "@UPT") or (self.family == "BRA" and "," in self.operands)

    @property
    def target(self) -> int | None:
        """A direct branch's target address (BRA only; BRX/JMX are indirect)."""
        if self.family != "BRA":
            return None
        m = re.search(r"0x([0-9a-f]+)\s*$", self.operands)
        return int(m.group(1), 16) if m else None


def classify(ins: Instr) -> str:
    """The instruction's class (CLASS_OF_PREFIX), or "other" for ALU, address and control work."""
    for p in _PREFIXES:
        if ins.opcode == p or ins.opcode.startswith(p + "."):
            return CLASS_OF_PREFIX[p]
    return "other"


def hgmma_shape(ins: Instr) -> str | None:
    """'64x128x16' for HGMMA.64x128x16.F32 (and QGMMA/IGMMA, fp8/int8 wgmma), else None."""
    m = _HGMMA_SHAPE.match(ins.opcode)
    return m.group(1) if m else None


def parse_instructions(text: str) -> list[Instr]:
    """Every instruction of one function's SASS text, in address order."""
    out = []
    for m in _LINE.finditer(text):
        pred = (m.group(2) or "").strip()
        if pred in ("@!PT", "@!UPT"):
            continue  # never executes: the assembler's padding
        out.append(Instr(int(m.group(1), 16), pred, m.group(3), m.group(4).strip()))
    return out


def parse_functions(text: str) -> dict[str, list[Instr]]:
    """cuobjdump -sass output split per function (addresses restart in each)."""
    heads = list(_FUNCTION.finditer(text))
    if not heads:
        return {"": parse_instructions(text)}
    return {h.group(1): parse_instructions(text[h.end():(heads[i + 1].start() if i + 1 < len(heads) else None)])
            for i, h in enumerate(heads)}


@dataclass
class Block:
    """A basic block: straight-line instructions, entered at the top, left at the bottom."""

    instrs: list[Instr]
    succs: list[int] = field(default_factory=list)  # start addresses of successor blocks

    @property
    def start(self) -> int:
        return self.instrs[0].addr

    @property
    def end(self) -> int:
        return self.instrs[-1].addr


def basic_blocks(instrs: list[Instr]) -> dict[int, Block]:
    """Blocks keyed by start address. A block ends at a branch or EXIT; an unconditional BRA or
    EXIT does not fall through, a predicated one does."""
    if not instrs:
        return {}
    addrs = {i.addr for i in instrs}
    leaders = {instrs[0].addr}
    for k, ins in enumerate(instrs):
        if ins.target is not None and ins.target in addrs:
            leaders.add(ins.target)
        if ins.family in ("BRA", "EXIT", "RET", "BRX", "JMX") and k + 1 < len(instrs):
            leaders.add(instrs[k + 1].addr)
    blocks: dict[int, Block] = {}
    cur: list[Instr] = []
    for ins in instrs:
        if ins.addr in leaders and cur:
            blocks[cur[0].addr] = Block(cur)
            cur = []
        cur.append(ins)
    blocks[cur[0].addr] = Block(cur)
    starts = sorted(blocks)
    for n, s in enumerate(starts):
        last = blocks[s].instrs[-1]
        nxt = starts[n + 1] if n + 1 < len(starts) else None
        if last.target is not None and last.target in blocks:
            blocks[s].succs.append(last.target)
        stops = last.family in ("BRA", "EXIT", "RET", "BRX", "JMX") and not last.conditional
        if not stops and nxt is not None and nxt not in blocks[s].succs:
            blocks[s].succs.append(nxt)
    return blocks


def dominators(blocks: dict[int, Block]) -> dict[int, set[int]]:
    """dom[b] = the blocks every path from the entry to b passes (iterative data flow)."""
    if not blocks:
        return {}
    entry = min(blocks)
    preds: dict[int, list[int]] = {b: [] for b in blocks}
    for b, blk in blocks.items():
        for s in blk.succs:
            preds[s].append(b)
    everything = set(blocks)
    dom = {b: set(everything) for b in blocks}
    dom[entry] = {entry}
    changed = True
    while changed:
        changed = False
        for b in sorted(blocks):
            if b == entry:
                continue
            ps = [dom[p] for p in preds[b]]
            new = (set.intersection(*ps) if ps else set()) | {b}
            if new != dom[b]:
                dom[b], changed = new, True
    return dom


@dataclass
class Loop:
    """A natural loop: its header, its blocks, and the instructions of one pass."""

    header: int
    blocks: set[int]
    hot: list[Instr]    # loop blocks between the header and the last back edge, in address order
    cold: list[Instr]   # loop blocks outside that span (out-of-line retry paths)
    inner: int = 0      # how many other loops this one contains

    @property
    def counts(self) -> Counter:
        """Hot instructions by opcode family (HMMA, LDSM, BRA, ...)."""
        return Counter(i.family for i in self.hot)

    @property
    def classes(self) -> Counter:
        """Hot instructions by class (classify)."""
        return Counter(classify(i) for i in self.hot)

    @property
    def hgmma_shapes(self) -> Counter:
        return Counter(s for s in map(hgmma_shape, self.hot) if s)

    @property
    def total(self) -> int:
        return len(self.hot)


def find_loops(instrs: list[Instr]) -> list[Loop]:
    """Every natural loop of one function (back edges to one header merged), in header order."""
    blocks = basic_blocks(instrs)
    dom = dominators(blocks)
    preds: dict[int, list[int]] = {b: [] for b in blocks}
    for b, blk in blocks.items():
        for s in blk.succs:
            preds[s].append(b)
    latches: dict[int, list[int]] = {}
    for b, blk in blocks.items():
        for s in blk.succs:
            if s in dom[b]:  # the target dominates the source: a back edge
                latches.setdefault(s, []).append(b)
    loops = []
    for header in sorted(latches):
        body, work = {header}, [t for t in latches[header] if t != header]
        body.update(work)
        while work:
            for p in preds[work.pop()]:
                if p not in body:
                    body.add(p)
                    work.append(p)
        span_end = max(blocks[t].end for t in latches[header])
        hot, cold = [], []
        for b in sorted(body):
            (hot if header <= b <= span_end else cold).extend(blocks[b].instrs)
        loops.append(Loop(header, body, hot, cold))
    for lp in loops:
        lp.inner = sum(1 for o in loops if o is not lp and o.blocks < lp.blocks)
    return loops


def busiest_loop(loops: list[Loop], cls: str | tuple[str, ...], without: str | None = None,
                 leaf: bool = False) -> Loop | None:
    """The loop with the most instructions of class(es) `cls` (and none of class `without`) among
    those with no such loop inside them when `leaf`, the innermost on a tie (an outer tile loop
    holds the same wgmma as its k loop); None if none has any. `leaf` is for the tensor loop: a
    tile loop around a k loop whose first k-tile is peeled holds more wgmma than the k loop. (Not
    for the producer: ptxas wraps each UTMALDG of a tid-chosen thread in a small ELECT loop.)"""
    classes = (cls,) if isinstance(cls, str) else cls

    def n(lp: Loop) -> int:
        return sum(lp.classes[c] for c in classes)

    fits = [lp for lp in loops if n(lp) and not (without and lp.classes[without])]
    # an outer loop around a fitting loop is not "the" loop even when it holds more (a tile loop
    # around a k loop whose first k-tile is peeled out of it holds the k loop's wgmma and the peel's)
    leaves = [lp for lp in fits if not (leaf and any(o is not lp and o.blocks < lp.blocks for o in fits))]
    return max(leaves, key=lambda lp: (n(lp), -lp.inner, -lp.total), default=None)
