"""What the CUDA driver's PTX JIT writes to its verbose info log on this machine (a GPU is needed).

Why: ptxgen reads that log to say whether a kernel's setmaxnreg register split was kept
(runtime/assemble_setmaxnreg.py). On a lent H200 (driver 580, bench/results/2026-11-26-on-device-6080041)
the log came back empty for a kernel that earlier tests had already loaded. This loads one sm_90a
warp-specialised kernel four ways and prints, as JSON, each log's length and lines:
  fresh      the PTX with a unique comment (text the driver's compute cache cannot have seen)
  again      the same text loaded a second time in the same process
  uncapped   fresh text without the .maxnreg/.maxntid cap (ptxas drops setmaxnreg: C7508)
  no-cache   `fresh` in a child process with CUDA_CACHE_DISABLE=1

    PYTHONPATH=. python bench/driver_jit_log.py [--out FILE.json]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import uuid


def _kernel():
    import ptxgen

    g = ptxgen.Gemm(64, 64, 128, dtype="f16", out_dtype="f32", a_layout="row", b_layout="col")
    return ptxgen.compile(g, ptxgen.Schedule(block=(64, 64, 64), instruction="wgmma", stages=2), arch="sm_90a")


def _load(ptx: str, entry: str) -> dict:
    from ptxgen.runtime.driver import context
    from ptxgen.runtime.driver_jit import jit_load

    context()
    _, log = jit_load(ptx, entry, "sm_90a")
    return {"chars": len(log), "lines": log.splitlines()[:12]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)  # a PTX file to load and report
    args = ap.parse_args(argv)
    k = _kernel()
    if args.child:
        print(json.dumps(_load(open(args.child).read(), k.entry)))
        return 0
    fresh = k.ptx + f"\n// driver_jit_log probe {uuid.uuid4().hex}\n"
    report = {"fresh": _load(fresh, k.entry), "again": _load(fresh, k.entry)}
    uncapped = re.sub(r"^\.(maxnreg|maxntid)\b.*$", "", k.ptx, flags=re.MULTILINE)
    report["uncapped"] = _load(uncapped + f"\n// probe {uuid.uuid4().hex}\n", k.entry)
    path = f"/tmp/driver_jit_log_{uuid.uuid4().hex}.ptx"
    with open(path, "w") as f:
        f.write(k.ptx + f"\n// probe {uuid.uuid4().hex}\n")
    child = subprocess.run([sys.executable, __file__, "--child", path], capture_output=True, text=True,
                           env=dict(os.environ, CUDA_CACHE_DISABLE="1"), timeout=300)
    report["no-cache"] = json.loads(child.stdout) if child.returncode == 0 else {"error": child.stderr[-800:]}
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
