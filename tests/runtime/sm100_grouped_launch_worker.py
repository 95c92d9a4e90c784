"""Run in a fresh process by test_grouped_sm100_launch.py (the stand-in's device model is fixed when
it first loads, so the B200 model needs a process of its own): launch a contiguous and a masked
grouped sm_100a kernel through the driver path and print one verdict line each."""
from __future__ import annotations

import numpy as np

import ptxgen
from ptxgen.check import check_kernel, random_operands

S = ptxgen.Schedule(block=(64, 64, 32), instruction="tcgen05", sms=2)

for grouping, counts, b_layout in (("contiguous", [20, 20, 90], "row"), ("masked", [70, 0, 9], "col")):
    g = ptxgen.Gemm(100 if grouping == "contiguous" else 70, 64, 80, dtype="bf16", b_layout=b_layout, groups=3,
                    grouping=grouping)
    k = ptxgen.compile(g, S, arch="sm_100a")
    a, b = random_operands(g)
    kw = {"offs" if grouping == "contiguous" else "masked_m": np.array(counts, np.int32)}
    res = check_kernel(k, a, b, run=k, **kw)
    print(f"{grouping}: {'PASS' if res.ok else 'FAIL'} {res}")
