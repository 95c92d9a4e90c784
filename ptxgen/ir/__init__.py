"""The PTX IR: instructions over typed virtual registers, the builder that appends them, and the
renderer that prints a Function as PTX text once registers are allocated.

It sits below both `ptxgen.emit` (which lowers a GEMM to it) and `ptxgen.regalloc` (which maps its
virtual registers to physical ones), and knows nothing of GEMMs.
"""
from .builder import Builder
from .nodes import (REG_CLASSES, Addr, Comment, Function, Imm, Instr, Item, Label, Operand, Param, RegPair, Sym,
                    TensorRef, Vec, VReg, operand_regs)
from .render import render

__all__ = ["REG_CLASSES", "Addr", "Builder", "Comment", "Function", "Imm", "Instr", "Item", "Label", "Operand",
           "TensorRef", "Param", "RegPair", "Sym", "Vec", "VReg", "operand_regs", "render"]
