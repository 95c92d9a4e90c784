"""PTX text -> Module: entries, parameters, declarations and instructions with their line numbers.

The parser only understands structure; whether an instruction is supported is decided when the
entry is compiled (program.py), still before anything runs.
"""
from __future__ import annotations

import bisect
import re
import dataclasses
from dataclasses import dataclass, field

from .debuginfo import strip_debug_info
from .errors import HazardError
from .header import HeaderState
from .operands import IDENT, Name, parse_operand, split_top_level
from .ptxtypes import TYPE_BITS, type_bytes


# ---------------------------------------------------------------- statements
@dataclass
class Instr:
    line: int
    opcode: str
    mods: tuple[str, ...]
    operands: tuple
    guard: str | None = None
    guard_negated: bool = False


@dataclass
class Label:
    line: int
    name: str


@dataclass
class ParamDecl:
    name: str
    type: str
    count: int | None  # array length for `.b8 name[N]`, else None
    align: int
    line: int

    @property
    def size(self) -> int:
        return type_bytes(self.type) * (self.count if self.count is not None else 1)


@dataclass
class SharedDecl:
    name: str
    align: int
    elem_bytes: int
    count: int | None  # None for `.extern .shared ... name[]` (dynamic)
    line: int


@dataclass
class RegDecl:
    name: str
    type: str
    line: int


@dataclass
class Entry:
    name: str
    line: int
    params: list[ParamDecl]
    perf: dict[str, tuple[int, ...]]
    regs: list[RegDecl] = field(default_factory=list)
    shared: list[SharedDecl] = field(default_factory=list)
    body: list[Instr | Label] = field(default_factory=list)
    #: `tlist: .branchtargets L0, L1, ...;` lists by name, for brx.idx (ops_brx.py)
    branchtargets: dict[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass
class Module:
    lines: list[str]
    shared: list[SharedDecl]
    entries: dict[str, Entry]
    version: str = ""
    target: str = ""


# ---------------------------------------------------------------- lexing
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_DELIM = re.compile(r"[;{}]")
_LABEL = re.compile(r"\s*([A-Za-z_$%][\w$]*)\s*:(?!:)")
_PERF = {"maxntid", "reqntid", "minnctapersm", "maxnctapersm", "maxnreg", "noreturn", "pragma",
         "reqnctapercluster", "explicitcluster", "maxclusterrank"}
_IGNORED_DIRECTIVES = {"pragma"}


def _blank_comments(text: str) -> str:
    """Replace comments by spaces so that offsets and line numbers stay valid."""
    return _COMMENT.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), text)


class _Source:
    def __init__(self, text: str):
        self.lines = text.split("\n")
        self.clean = _blank_comments(text)
        self.starts = [0]
        for line in self.lines[:-1]:
            self.starts.append(self.starts[-1] + len(line) + 1)

    def line_at(self, offset: int) -> int:
        return bisect.bisect_right(self.starts, offset)

    def fail(self, offset_or_line: int, detail: str, is_line: bool = False) -> HazardError:
        line = offset_or_line if is_line else self.line_at(offset_or_line)
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        return HazardError("unsupported", line, detail, text)


def _chunks(src: _Source) -> list[tuple[str, int, str]]:
    """Split into ("stmt"|"open"|"close", offset of first non-blank char, text) pieces.

    '{' opens a block when the text before it is a directive header or only labels; otherwise it
    starts a vector operand such as {%r1, %r2} and stays inside the statement.
    """
    out: list[tuple[str, int, str]] = []
    text = src.clean
    start = 0
    vec_depth = 0
    for m in _DELIM.finditer(text):
        ch = m.group()
        piece = text[start:m.start()]
        if ch == "{":
            if vec_depth == 0 and _opens_block(piece):
                _emit(out, "stmt", start, piece)
                out.append(("open", m.start(), "{"))
                start = m.end()
            else:
                vec_depth += 1
        elif ch == "}":
            if vec_depth > 0:
                vec_depth -= 1
            else:
                if piece.strip() and not _only_labels(piece):
                    raise src.fail(start + len(piece) - len(piece.lstrip()), "missing ';' before '}'")
                _emit(out, "stmt", start, piece)
                out.append(("close", m.start(), "}"))
                start = m.end()
        else:
            if vec_depth:
                raise src.fail(m.start(), "unbalanced '{' in operand list")
            _emit(out, "stmt", start, piece)
            start = m.end()
    if text[start:].strip():
        raise src.fail(start + len(text[start:]) - len(text[start:].lstrip()), "statement without ';'")
    return out


def _strip_labels(piece: str) -> str:
    """Text after any leading labels and line-based debug directives (.loc/.file)."""
    piece = piece.strip()
    while True:
        if (m := _LABEL.match(piece)) is not None:
            piece = piece[m.end():].strip()
        elif piece.startswith((".loc", ".file")) and piece.split()[0] in (".loc", ".file"):
            piece = piece.partition("\n")[2].strip()
        else:
            return piece


def _only_labels(piece: str) -> bool:
    return _strip_labels(piece) == ""


def _opens_block(piece: str) -> bool:
    rest = _strip_labels(piece)
    return rest == "" or rest.startswith(".")


def _emit(out: list, kind: str, start: int, piece: str) -> None:
    if piece.strip():
        lead = len(piece) - len(piece.lstrip())
        out.append((kind, start + lead, piece.strip()))


# ---------------------------------------------------------------- declarations
_GUARD = re.compile(r"^@(!?)\s*(" + IDENT + r")\s+")


def _parse_instr(src: _Source, offset: int, text: str) -> Instr:
    line = src.line_at(offset)
    guard, negated = None, False
    if (m := _GUARD.match(text)) is not None:
        negated, guard = m.group(1) == "!", m.group(2)
        text = text[m.end():]
    hm = re.match(r"^(\S+)\s*(.*)$", text, re.S)
    head, rest = (hm.group(1), hm.group(2)) if hm else (text, "")
    parts = head.split(".")
    opcode, mods = parts[0], tuple(p for p in parts[1:])
    if not re.match(r"^[a-z][a-z0-9_]*$", opcode) or any(m == "" for m in mods):
        raise src.fail(line, f"cannot parse instruction {text!r}", is_line=True)
    operands = []
    if rest.strip():
        for tok in split_top_level(rest):
            op = parse_operand(tok)
            if op is None:
                raise src.fail(line, f"cannot parse operand {tok!r}", is_line=True)
            operands.append(op)
    return Instr(line, opcode, mods, tuple(operands), guard, negated)


def _parse_regs(src: _Source, line: int, text: str) -> list[RegDecl]:
    m = re.match(r"^\.reg\s+\.(\w+)\s+(.*)$", text, re.S)
    if m is None:
        raise src.fail(line, "cannot parse register declaration (vector registers are not supported)", True)
    typ = m.group(1)
    if (typ not in TYPE_BITS and typ != "b128") or typ == "tf32":     # .b128: two 64-bit slots (ops_clc.py)
        raise src.fail(line, f"register type .{typ} is not supported", True)
    out = []
    for item in split_top_level(m.group(2)):
        rng = re.match(r"^(" + IDENT + r")<(\d+)>$", item)
        if rng is not None:
            out.extend(RegDecl(f"{rng.group(1)}{i}", typ, line) for i in range(int(rng.group(2))))
        elif re.match(r"^" + IDENT + r"$", item):
            out.append(RegDecl(item, typ, line))
        else:
            raise src.fail(line, f"cannot parse register name {item!r}", True)
    return out


def _parse_branchtargets(src: _Source, entry: Entry, line: int, text: str) -> None:
    """`tlist: .branchtargets L0, L1, ...;` (PTX ISA, brx.idx; docs/ptx_facts/sm100_formats.md §5):
    the label just before the directive names the list."""
    owner = entry.body[-1] if entry.body else None
    if not isinstance(owner, Label) or owner.name in entry.branchtargets:
        raise src.fail(line, ".branchtargets needs its own label: write `tlist: .branchtargets L0, L1;`", True)
    names = tuple(n.strip() for n in split_top_level(text[len(".branchtargets"):]))
    if not names or not all(re.fullmatch(IDENT, n) for n in names):
        raise src.fail(line, f".branchtargets {owner.name} needs a comma-separated list of labels", True)
    entry.branchtargets[owner.name] = names


def _parse_shared(src: _Source, line: int, text: str) -> SharedDecl:
    m = re.match(r"^(\.extern\s+)?\.shared\s+(?:\.align\s+(\d+)\s+)?\.(\w+)\s+(" + IDENT
                 + r")\s*(\[\s*(\d*)\s*\])?$", text, re.S)
    if m is None or m.group(3) not in TYPE_BITS or m.group(3) == "pred":
        raise src.fail(line, "cannot parse .shared declaration (initialisers and vectors unsupported)", True)
    elem = TYPE_BITS[m.group(3)] // 8
    align = int(m.group(2)) if m.group(2) else elem
    if align <= 0 or align & (align - 1):
        raise src.fail(line, f".align {align} is not a power of two", True)
    if m.group(1):
        if m.group(5) is None or m.group(6):
            raise src.fail(line, ".extern .shared must be an unsized array name[]", True)
        return SharedDecl(m.group(4), align, elem, None, line)
    if m.group(5) is not None and not m.group(6):
        raise src.fail(line, "unsized .shared array must be .extern", True)
    count = int(m.group(6)) if m.group(5) is not None else 1
    return SharedDecl(m.group(4), align, elem, count, line)


def _parse_header(src: _Source, line: int, text: str) -> Entry:
    m = re.match(r"^(?:\.visible\s+|\.weak\s+)?\.entry\s+(" + IDENT + r")\s*(?:\((.*)\))?(.*)$", text, re.S)
    if m is None:
        raise src.fail(line, "only .entry functions are supported (no .func)", True)
    params = []
    if m.group(2) and m.group(2).strip():
        for item in split_top_level(m.group(2)):
            params.append(_parse_param(src, line, item))
    perf: dict[str, tuple[int, ...]] = {}
    tail = m.group(3).strip()
    for d in re.finditer(r"\.(\w+)\s*((?:\d+\s*,?\s*)*)", tail):
        if d.group(1) not in _PERF:
            raise src.fail(line, f"unsupported entry directive .{d.group(1)}", True)
        perf[d.group(1)] = tuple(int(x) for x in re.findall(r"\d+", d.group(2)))
    if re.sub(r"\.(\w+)\s*((?:\d+\s*,?\s*)*)", "", tail).strip():
        raise src.fail(line, f"cannot parse entry directives {tail!r}", True)
    return Entry(m.group(1), line, params, perf)


def _parse_param(src: _Source, line: int, item: str) -> ParamDecl:
    toks = item.replace("\n", " ").split()
    if not toks or toks[0] != ".param":
        raise src.fail(line, f"cannot parse parameter {item!r}", True)
    typ, align, name, count = None, 0, None, None
    i = 1
    while i < len(toks):
        tok = toks[i]
        if tok == ".align":
            align = int(toks[i + 1])
            i += 2
            continue
        if tok in (".ptr", ".global", ".shared", ".const", ".local"):
            i += 1
            continue
        if tok.startswith(".") and tok[1:] in TYPE_BITS and typ is None:
            typ = tok[1:]
        elif typ is not None and name is None:
            am = re.match(r"^(" + IDENT + r")(?:\[(\d+)\])?$", tok)
            if am is None:
                raise src.fail(line, f"cannot parse parameter name {tok!r}", True)
            name, count = am.group(1), (int(am.group(2)) if am.group(2) else None)
        else:
            raise src.fail(line, f"cannot parse parameter {item!r}", True)
        i += 1
    if typ is None or name is None or typ in ("pred", "tf32", "f16x2", "bf16x2"):
        raise src.fail(line, f"cannot parse parameter {item!r}", True)
    natural = TYPE_BITS[typ] // 8
    return ParamDecl(name, typ, count, max(align, natural), line)


# ---------------------------------------------------------------- module
def parse_module(text: str) -> Module:
    """Parse PTX text; raises HazardError("unsupported") naming the line on anything not understood."""
    src = _Source(strip_debug_info(text))  # .file/.loc/.section: line info only
    module = Module(src.lines, [], {})
    header = HeaderState()
    depth = 0
    entry: Entry | None = None
    pending_header: tuple[int, str] | None = None
    blocks: list[int] = []          # where each open nested { } block starts in entry.body
    for kind, offset, piece in _chunks(src):
        line = src.line_at(offset)
        if kind == "open":
            if depth == 0:
                if pending_header is None:
                    raise src.fail(line, "block outside an .entry", True)
                entry = _parse_header(src, *pending_header)
                if entry.name in module.entries:
                    raise src.fail(line, f"entry {entry.name} defined twice", True)
                module.entries[entry.name] = entry
                pending_header = None
            else:
                blocks.append(len(entry.body))
            depth += 1
            continue
        if kind == "close":
            depth -= 1
            if depth < 0:
                raise src.fail(line, "unbalanced '}'", True)
            if depth == 0:
                entry = None
            else:
                _scope_labels(entry, blocks.pop(), len(blocks) + 1, line)
            continue
        if depth == 0:
            pending_header = _module_statement(src, module, header, offset, line, piece, pending_header)
            continue
        assert entry is not None
        _body_statement(src, entry, offset, piece)
    if depth != 0:
        raise src.fail(len(src.lines), "unterminated block", True)
    if pending_header is not None:
        raise src.fail(pending_header[0], "entry declaration without a body", True)
    if (problem := header.missing()) is not None:
        raise src.fail(1, problem, True)
    return module


def _scope_labels(entry: Entry, start: int, depth: int, line: int) -> None:
    """Labels declared in a nested { } block are local to it (PTX scoping; inline-asm blocks such as
    CUTLASS/Triton's `waitLoop:` mbarrier loops repeat the same name): rename them, and the
    references inside the block, to a name unique in the entry."""
    body = entry.body
    local = {item.name for item in body[start:] if isinstance(item, Label)}
    if not local:
        return
    rename = {name: f"{name}%block{line}.{depth}" for name in local}
    for i in range(start, len(body)):
        item = body[i]
        if isinstance(item, Label):
            body[i] = Label(item.line, rename[item.name])
        elif any(isinstance(op, Name) and op.name in rename for op in item.operands):
            ops = tuple(Name(rename[op.name]) if isinstance(op, Name) and op.name in rename else op
                        for op in item.operands)
            body[i] = dataclasses.replace(item, operands=ops)


_LINE_DIRECTIVES = (".version", ".target", ".address_size", ".file", ".loc")


def _split_line_directive(src: _Source, offset: int, piece: str):
    """Directives that end at the end of their line, not at ';': (line, words, offset, rest) or None."""
    if piece.split()[0] not in _LINE_DIRECTIVES:
        return None
    first, _, rest = piece.partition("\n")
    line = src.line_at(offset)
    rest_offset = offset + len(first) + 1 + len(rest) - len(rest.lstrip())
    return line, first.split(), rest_offset, rest.strip()


def _module_statement(src, module, header, offset, line, piece, pending_header):
    if pending_header is not None:
        raise src.fail(pending_header[0], "entry declaration without a body", True)
    while (split := _split_line_directive(src, offset, piece)) is not None:
        line, words, offset, piece = split
        if len(words) < 2:
            raise src.fail(line, f"{words[0]} needs an argument", True)
        if words[0] in (".version", ".target", ".address_size"):
            if (problem := header.directive(words[0], words[1:])) is not None:
                raise src.fail(line, problem, True)
        elif (problem := header.missing()) is not None:  # .file/.loc before the header
            raise src.fail(line, problem, True)
        if words[0] == ".version":
            module.version = words[1]
        elif words[0] == ".target":
            module.target = " ".join(words[1:])
        if not piece:
            return None
        line = src.line_at(offset)
    if (problem := header.statement()) is not None:
        raise src.fail(line, problem, True)
    word = piece.split()[0]
    if word in (".shared", ".extern") and ".shared" in piece.split():
        module.shared.append(_parse_shared(src, line, piece))
        return None
    if word[1:] in _IGNORED_DIRECTIVES:
        return None
    if re.match(r"^(\.visible\s+|\.weak\s+)?\.entry\b", piece):
        return (line, piece)
    raise src.fail(line, f"unsupported module-level statement {piece.split()[0]!r}", True)


def _body_statement(src: _Source, entry: Entry, offset: int, piece: str) -> None:
    while piece:
        if (m := _LABEL.match(piece)) is not None:
            entry.body.append(Label(src.line_at(offset), m.group(1)))
            rest = piece[m.end():]
            offset += m.end() + len(rest) - len(rest.lstrip())
            piece = rest.strip()
        elif piece.split()[0] in (".loc", ".file"):
            _, _, offset, piece = _split_line_directive(src, offset, piece)  # debug info: no semantics
        else:
            break
    if not piece:
        return
    line = src.line_at(offset)
    if piece.startswith("."):
        word = piece.split()[0]
        if word == ".reg":
            entry.regs.extend(_parse_regs(src, line, piece))
        elif word in (".shared", ".extern") and ".shared" in piece.split():
            entry.shared.append(_parse_shared(src, line, piece))
        elif word[1:] in _IGNORED_DIRECTIVES:
            pass
        elif word == ".branchtargets":
            _parse_branchtargets(src, entry, line, piece)
        else:
            raise src.fail(line, f"unsupported directive {word} in function body", True)
        return
    entry.body.append(_parse_instr(src, offset, piece))
