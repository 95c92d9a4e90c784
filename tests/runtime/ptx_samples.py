"""Small hand-written PTX modules for the runtime tests (no GPU needed to assemble them)."""
from __future__ import annotations

HEADER = ".version {version}\n.target {target}\n.address_size 64\n\n"


def add_one(target: str = "sm_80", version: str = "7.8") -> str:
    """`add1(p, n)`: p[tid] += 1.0f for tid < n."""
    return HEADER.format(version=version, target=target) + """\
.visible .entry add1(
    .param .u64 p,
    .param .u32 n
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    .reg .f32 %f<3>;
    ld.param.u64 %rd1, [p];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %tid.x;
    setp.lt.u32 %p1, %r2, %r1;
    cvta.to.global.u64 %rd1, %rd1;
    mul.wide.u32 %rd2, %r2, 4;
    add.s64 %rd3, %rd1, %rd2;
    // predicated, not branched: ptxgen's simulator (and the sim driver) needs uniform branches
    @%p1 ld.global.f32 %f1, [%rd3];
    add.f32 %f2, %f1, 0f3F800000;
    @%p1 st.global.f32 [%rd3], %f2;
DONE:
    ret;
}
"""


#: (line number, text) of the two lines `broken()` breaks, 1-based.
BROKEN_LINES = {23: "    add.f32 %f2, %f1, %r9;", 24: "    bogus.op %r1;"}


def broken(target: str = "sm_80") -> str:
    """add_one with an operand-type error on line 23 and an unknown instruction on line 24."""
    lines = add_one(target).splitlines()
    assert lines[22].strip() == "add.f32 %f2, %f1, 0f3F800000;", lines[22]
    lines[22] = BROKEN_LINES[23]
    lines.insert(23, BROKEN_LINES[24])
    return "\n".join(lines) + "\n"


def spiller(live: int = 96, maxnreg: int = 32, target: str = "sm_80") -> str:
    """`spill(p)`: `live` values loaded, all live at once, under `.maxnreg` -> register spills."""
    out = [HEADER.format(version="7.8", target=target),
           ".visible .entry spill(.param .u64 p)", f".maxnreg {maxnreg}", "{",
           f"    .reg .f32 %f<{live + 1}>;", "    .reg .b64 %rd<2>;",
           "    ld.param.u64 %rd1, [p];", "    cvta.to.global.u64 %rd1, %rd1;"]
    out += [f"    ld.global.volatile.f32 %f{i}, [%rd1+{4 * i}];" for i in range(live)]
    out += [f"    st.global.f32 [%rd1+{4 * (live - 1 - i)}], %f{i};" for i in range(live)]
    out += ["    ret;", "}", ""]
    return "\n".join(out)


def stacker(target: str = "sm_80") -> str:
    """`stack(p, i)`: a dynamically indexed 256-byte local array -> a stack frame."""
    return HEADER.format(version="7.8", target=target) + """\
.visible .entry stack(.param .u64 p, .param .u32 i)
{
    .local .align 4 .b8 arr[256];
    .reg .b32 %r<4>;
    .reg .b64 %rd<8>;
    .reg .f32 %f<3>;
    ld.param.u64 %rd1, [p];
    cvta.to.global.u64 %rd1, %rd1;
    ld.param.u32 %r1, [i];
    mov.u64 %rd2, arr;
    ld.global.f32 %f1, [%rd1];
    mul.wide.u32 %rd3, %r1, 4;
    add.u64 %rd4, %rd2, %rd3;
    st.local.f32 [%rd4], %f1;
    and.b32 %r2, %r1, 7;
    mul.wide.u32 %rd5, %r2, 4;
    add.u64 %rd6, %rd2, %rd5;
    ld.local.f32 %f2, [%rd6];
    st.global.f32 [%rd1], %f2;
    ret;
}
"""


def smem_user(nbytes: int = 4096, target: str = "sm_80") -> str:
    """`shm(p)`: `nbytes` of static shared memory and a barrier."""
    return HEADER.format(version="7.8", target=target) + f"""\
.visible .entry shm(.param .u64 p)
{{
    .shared .align 16 .b8 buf[{nbytes}];
    .reg .b32 %r<2>;
    .reg .b64 %rd<2>;
    .reg .f32 %f<3>;
    ld.param.u64 %rd1, [p];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r1, buf;
    ld.global.f32 %f1, [%rd1];
    st.shared.f32 [%r1], %f1;
    bar.sync 0;
    ld.shared.f32 %f2, [%r1+4];
    st.global.f32 [%rd1], %f2;
    ret;
}}
"""


def gemm_stub(entry: str = "gemm", target: str = "sm_80") -> str:
    """An entry with ptxgen's GEMM parameter list and an empty body (for launch plumbing tests)."""
    return HEADER.format(version="7.8", target=target) + f"""\
.visible .entry {entry}(
    .param .u64 A, .param .u64 B, .param .u64 C,
    .param .u32 M, .param .u32 N, .param .u32 K,
    .param .u32 lda, .param .u32 ldb, .param .u32 ldc
)
{{
    ret;
}}
"""


def dyn_smem_touch(target: str = "sm_80") -> str:
    """`touch(p, nbytes)`: writes pi into the last word of `nbytes` of dynamic shared memory,
    reads it back after a barrier and stores it to p[0] (needs the >48 KiB opt-in when big)."""
    return HEADER.format(version="7.8", target=target) + """\
.extern .shared .align 16 .b8 dyn[];
.visible .entry touch(.param .u64 p, .param .u32 nbytes)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<2>;
    .reg .f32 %f<2>;
    ld.param.u64 %rd1, [p];
    cvta.to.global.u64 %rd1, %rd1;
    ld.param.u32 %r1, [nbytes];
    mov.u32 %r2, dyn;
    add.u32 %r3, %r2, %r1;
    sub.u32 %r3, %r3, 4;
    mov.f32 %f1, 0f40490FDB;
    st.shared.f32 [%r3], %f1;
    bar.sync 0;
    ld.shared.f32 %f1, [%r3];
    st.global.f32 [%rd1], %f1;
    ret;
}
"""
