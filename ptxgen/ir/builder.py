"""The explicit builder that lowering threads through every emitter: no global state."""
from __future__ import annotations

from .nodes import REG_CLASSES, Comment, Function, Imm, Instr, Item, Label, Operand, Param, VReg


class Builder:
    """Creates virtual registers and appends items to one function body."""

    def __init__(self, name: str, params: list[Param]):
        self.function = Function(name=name, params=params)
        self._next_id = 0
        self._label_uses: dict[str, int] = {}

    @property
    def body(self) -> list[Item]:
        return self.function.body

    def reg(self, cls: str) -> VReg:
        if cls not in REG_CLASSES:
            raise ValueError(f"unknown register class {cls!r}; expected one of {sorted(REG_CLASSES)}")
        self._next_id += 1
        return VReg(cls, self._next_id)

    def regs(self, cls: str, n: int) -> tuple[VReg, ...]:
        return tuple(self.reg(cls) for _ in range(n))

    def emit(
        self,
        op: str,
        *operands: Operand | int,
        ndefs: int = 0,
        guard: VReg | None = None,
        negate: bool = False,
        comment: str | None = None,
    ) -> Instr:
        ops = tuple(Imm(str(o)) if isinstance(o, int) else o for o in operands)
        ins = Instr(op, ops, ndefs, guard, negate, comment)
        self.body.append(ins)
        return ins

    def label(self, role: str) -> str:
        """A fresh label named by its role (`$L_main_loop`, `$L_main_loop_1`, ...)."""
        n = self._label_uses.get(role, 0)
        self._label_uses[role] = n + 1
        return f"$L_{role}" if n == 0 else f"$L_{role}_{n}"

    def place(self, label: str) -> None:
        self.body.append(Label(label))

    def comment(self, text: str) -> None:
        self.body.append(Comment(text))

    def banner(self, text: str) -> None:
        self.body.append(Comment(text, banner=True))
