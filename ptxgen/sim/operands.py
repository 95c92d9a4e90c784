"""Operands of PTX instructions: what they are (names, literals, vectors, addresses) and how to read them."""
from __future__ import annotations

import re
from dataclasses import dataclass

IDENT = r"[A-Za-z_$%][\w$]*"


# ---------------------------------------------------------------- operands
@dataclass(frozen=True)
class Name:
    """A register, special register, symbol or label name (resolved later)."""
    name: str


@dataclass(frozen=True)
class Lit:
    """An immediate: kind in {"int", "float", "fbits32", "fbits64"} (see ptxtypes.immediate_array)."""
    kind: str
    value: int | float


@dataclass(frozen=True)
class Vec:
    items: tuple


@dataclass(frozen=True)
class Mem:
    """[base+offset]; base is a Name or None (absolute address)."""
    base: Name | None
    offset: int


@dataclass(frozen=True)
class TensorRef:
    """[tmap, {c0, c1, ...}]: a tensor map address and coordinates (cp.async.bulk.tensor)."""
    base: Mem
    coords: tuple


@dataclass(frozen=True)
class PredPair:
    """setp's `p|q` destination."""
    first: Name | None
    second: Name | None


@dataclass(frozen=True)
class NotPred:
    """`!p` as an operand (setp's combining predicate)."""
    name: Name


Operand = Name | Lit | Vec | Mem | TensorRef | PredPair | NotPred


# ---------------------------------------------------------------- operand parsing
_INT = re.compile(r"^(-?)(0[xX][0-9a-fA-F]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)[uU]?$")
_FBITS = re.compile(r"^0([fFdD])([0-9a-fA-F]+)$")
_FLOAT = re.compile(r"^-?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?$")
_NAME = re.compile(r"^" + IDENT + r"(\.[xyz])?$")


def split_top_level(text: str, sep: str = ",") -> list[str]:
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p.strip() for p in parts]


def parse_literal(tok: str) -> Lit | None:
    if (m := _FBITS.match(tok)) is not None:
        width = 32 if m.group(1) in "fF" else 64
        if len(m.group(2)) != width // 4:
            return None
        return Lit("fbits32" if width == 32 else "fbits64", int(m.group(2), 16))
    if (m := _INT.match(tok)) is not None:
        sign, body = m.group(1), m.group(2)
        if body[:2] in ("0x", "0X"):
            value = int(body, 16)
        elif body[:2] in ("0b", "0B"):
            value = int(body[2:], 2)
        elif body.startswith("0") and len(body) > 1:
            value = int(body, 8)
        else:
            value = int(body)
        return Lit("int", -value if sign else value)
    if _FLOAT.match(tok) is not None:
        return Lit("float", float(tok))
    return None


def _parse_address(inner: str) -> Mem | None:
    inner = re.sub(r"\s+", "", inner)
    m = re.match(r"^(" + IDENT + r")?(?:([+-])(-?)(\w+))?$", inner)
    if m is None or (m.group(1) is None and m.group(4) is None):
        lit = parse_literal(inner)
        return Mem(None, int(lit.value)) if lit is not None and lit.kind == "int" else None
    base = Name(m.group(1)) if m.group(1) else None
    offset = 0
    if m.group(4) is not None:
        lit = parse_literal(m.group(4))
        if lit is None or lit.kind != "int":
            return None
        offset = int(lit.value)
        if (m.group(2) == "-") != (m.group(3) == "-"):
            offset = -offset
    if base is None and m.group(2) == "-":
        return None
    return Mem(base, offset)


def parse_operand(tok: str) -> Operand | None:
    tok = tok.strip()
    if tok.startswith("{") and tok.endswith("}"):
        items = [parse_operand(t) for t in split_top_level(tok[1:-1])]
        return None if any(i is None for i in items) else Vec(tuple(items))
    if tok.startswith("[") and tok.endswith("]"):
        parts = split_top_level(tok[1:-1])
        if len(parts) == 2 and parts[1].startswith("{"):
            base, coords = _parse_address(parts[0]), parse_operand(parts[1])
            return None if base is None or not isinstance(coords, Vec) else TensorRef(base, coords.items)
        return _parse_address(tok[1:-1])
    if "|" in tok:
        a, b = (t.strip() for t in tok.split("|", 1))
        first = None if a == "_" else Name(a)
        second = None if b == "_" else Name(b)
        return PredPair(first, second)
    if tok.startswith("!") and _NAME.match(tok[1:].strip()):
        return NotPred(Name(tok[1:].strip()))
    lit = parse_literal(tok)
    if lit is not None:
        return lit
    if tok == "_" or _NAME.match(tok):
        return Name(tok)
    return None
