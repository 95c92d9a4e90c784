"""Planted-bug probes shared by tests/gpu/test_gpu_planted.py (hardware) and
tests/runtime/test_layout_probes.py (assembly + simulator, no GPU)."""
from __future__ import annotations

import numpy as np

HEADER = ".version 7.8\n.target sm_80\n.address_size 64\n\n"
THREADS, CHUNKS = 256, 4  # each thread copies 4 x 16 B; 16 KiB of shared memory in flight


def exchange_ptx(wait: bool, barrier: bool) -> str:
    """Every thread cp.asyncs its chunks into shared memory, then reads the chunks of thread
    (tid + 97) % 256 (another warp) and stores them. Dropping `wait` or `barrier` is the bug."""
    lines = [HEADER + ".visible .entry xchg(.param .u64 psrc, .param .u64 pout)", "{",
             f"    .shared .align 16 .b8 buf[{THREADS * CHUNKS * 16}];",
             "    .reg .b32 %r<16>;", "    .reg .b64 %rd<8>;",
             "    ld.param.u64 %rd1, [psrc];", "    ld.param.u64 %rd2, [pout];",
             "    cvta.to.global.u64 %rd1, %rd1;", "    cvta.to.global.u64 %rd2, %rd2;",
             "    mov.u32 %r1, %tid.x;", "    mov.u32 %r2, buf;",
             f"    mul.lo.u32 %r3, %r1, {CHUNKS * 16};", "    add.u32 %r4, %r2, %r3;",
             "    mul.wide.u32 %rd3, %r3, 1;", "    add.s64 %rd4, %rd1, %rd3;"]
    for i in range(CHUNKS):
        lines.append(f"    cp.async.cg.shared.global [%r4+{16 * i}], [%rd4+{16 * i}], 16;")
    lines.append("    cp.async.commit_group;")
    if wait:
        lines.append("    cp.async.wait_group 0;")
    if barrier:
        lines.append("    bar.sync 0;")
    lines += ["    add.u32 %r5, %r1, 97;", f"    and.b32 %r5, %r5, {THREADS - 1};  // THREADS is a power of two",
              f"    mul.lo.u32 %r6, %r5, {CHUNKS * 16};", "    add.u32 %r7, %r2, %r6;",
              "    add.s64 %rd5, %rd2, %rd3;"]
    for i in range(CHUNKS * 4):
        lines += [f"    ld.shared.u32 %r8, [%r7+{4 * i}];", f"    st.global.u32 [%rd5+{4 * i}], %r8;"]
    if not wait:  # keep the kernel legal at exit: drain the copies before returning
        lines.append("    cp.async.wait_all;")
    lines += ["    ret;", "}", ""]
    return "\n".join(lines)


def exchange_expected(src: np.ndarray) -> np.ndarray:
    per = src.reshape(THREADS, CHUNKS * 4)
    return per[(np.arange(THREADS) + 97) % THREADS].reshape(-1)
