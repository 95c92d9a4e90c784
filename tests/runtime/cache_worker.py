"""Worker for the concurrent-cache test (a separate module so spawned processes can import it)."""
from __future__ import annotations

import random
import time


def assemble_many(args: tuple[list[str], int]) -> list[tuple[str, int, int]]:
    """Assemble each PTX in a shuffled order, several rounds; returns (entry, regs, cubin size)."""
    from ptxgen.runtime import cache
    from ptxgen.runtime.assemble import assemble

    ptxs, seed = args
    rng = random.Random(seed)
    out = []
    for _ in range(3):
        order = list(range(len(ptxs)))
        rng.shuffle(order)
        for i in order:
            time.sleep(rng.random() * 0.01)
            entry = "add1" if "add1" in ptxs[i] else "shm"
            a = assemble(ptxs[i], "sm_80", entry)
            assert a.cubin[:4] == b"\x7fELF"
            out.append((f"{i}:{entry}", a.resources.registers, len(a.cubin)))
    assert cache.stats.corrupt == 0, cache.stats
    return out
