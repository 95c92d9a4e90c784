"""Assemble ptxgen's PTX in-process, and load and launch it through the CUDA driver API.

Importing this package needs no GPU and no driver: `cuda.bindings.driver` is imported only
inside the functions that talk to the GPU. `gpu_available()` says whether they can.
"""
from __future__ import annotations

# `assemble` (the function) is deliberately not re-exported: it would shadow the submodule
# `ptxgen.runtime.assemble`. Use `from ptxgen.runtime.assemble import assemble`.
from .assemble import Assembled, AssemblerNotFound, Resources, assembler_version
from .batch import check_batched_operand
from .driver import DeviceArray, DriverError, gpu_available, gpu_unavailable_reason
from .launch import launch_kernel, launch_ptx, prepare_launch
from .operands import OperandView, check_operand

__all__ = [
    "Assembled", "AssemblerNotFound", "Resources", "assembler_version",
    "DeviceArray", "DriverError", "gpu_available", "gpu_unavailable_reason",
    "launch_kernel", "launch_ptx", "prepare_launch", "OperandView", "check_operand",
    "check_batched_operand",
]
