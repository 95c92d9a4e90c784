"""Render a lowered Function with its register allocation as readable PTX text."""
from __future__ import annotations

from ..schedule.targets import Target
from .nodes import Addr, Comment, Function, Imm, Instr, Label, Operand, RegPair, Sym, TensorRef, Vec, VReg

INDENT = "    "
BANNER_WIDTH = 78


def _operand(o: Operand, name) -> str:
    if isinstance(o, VReg):
        return name(o)
    if isinstance(o, Vec):
        return "{" + ", ".join(name(r) for r in o.regs) + "}"
    if isinstance(o, RegPair):  # `d|p`, `_` for a discarded half
        return "|".join("_" if r is None else name(r) for r in (o.first, o.second))
    if isinstance(o, Addr):
        base = name(o.base) if isinstance(o.base, VReg) else o.base.name
        return f"[{base}]" if o.offset == 0 else f"[{base}+{o.offset}]"
    if isinstance(o, TensorRef):
        coords = ", ".join(name(c) if isinstance(c, VReg) else str(c) for c in o.coords)
        return f"[{name(o.tmap)}, {{{coords}}}]"
    assert isinstance(o, (Imm, Sym))
    return str(o)


def render_instr(ins: Instr, name) -> str:
    guard = ""
    if ins.guard is not None:
        guard = f"@{'!' if ins.guard_negated else ''}{name(ins.guard)} "
    ops = ", ".join(_operand(o, name) for o in ins.operands)
    text = f"{guard}{ins.op}" + (f" {ops}" if ops else "") + ";"
    if ins.comment:
        text = f"{text:<60} // {ins.comment}"
    return INDENT + text


def render(fn: Function, target: Target, header: list[str], declarations: list[str], name) -> str:
    """PTX module text: header comment, .version/.target from the target, then the entry."""
    major, minor = max(target.ptx_version, fn.min_ptx_version or target.ptx_version)
    out = [f"// {line}" if line else "//" for line in header]
    out += [f".version {major}.{minor}", f".target {target.arch}", ".address_size 64", ""]
    for sym, align, size in fn.shared:
        if size is None:
            out.append(f".extern .shared .align {align} .b8 {sym}[];")
        else:
            out.append(f".shared .align {align} .b8 {sym}[{size}];")
    out.append("")
    params = ",\n".join(f"{INDENT}.param {p.ptx_type} {p.name}" for p in fn.params)
    out.append(f".visible .entry {fn.name}(\n{params}\n)")
    out.extend(fn.directives)
    out.append("{")
    out.extend(INDENT + d for d in declarations)
    for item in fn.body:
        if isinstance(item, Instr):
            out.append(render_instr(item, name))
        elif isinstance(item, Label):
            out.append(f"{item.name}:")
        elif isinstance(item, Comment):
            if item.banner:
                rule = INDENT + "// " + "=" * (BANNER_WIDTH - 7)
                out += ["", rule, f"{INDENT}// {item.text}", rule]
            else:
                out.append(f"{INDENT}// {item.text}")
    out.append("}")
    text = "\n".join(out) + "\n"
    if not text.isascii():  # ptxas stops at the first non-ASCII byte, comments included
        no, line = next((i, ln) for i, ln in enumerate(text.split("\n"), 1) if not ln.isascii())
        bad = next(ch for ch in line if not ch.isascii())
        raise ValueError(f"PTX line {no} holds the non-ASCII character {bad!r} (ptxas rejects any): "
                         f"{line.strip()!r}; spell it in ASCII in the comment or header that wrote it")
    return text
