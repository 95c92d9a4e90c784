"""Run the Triton/Gluon-written Blackwell (sm_100a) PTX corpus on ptxgen.sim against float64 numpy.

The json format, the parameter roles and the launch are the Hopper corpus's
(tests/sim/hopper_corpus/harness.py, imported here, not copied); this module adds the Blackwell
feature table, the block-scaled operands (mx formats with e8m0 scales) and its own `SUPPORTED`.

`SUPPORTED` lists the features ptxgen.sim models; an entry whose json `needs` one outside it is a
strict xfail (tests/sim/test_blackwell_corpus.py). Whoever teaches the simulator a feature adds
its name here, and the entries it completes must then pass.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import ml_dtypes
import numpy as np

HERE = Path(__file__).resolve().parent


def _load_hopper_harness():
    """hopper_corpus/harness.py under a name no test module shadows (both corpora share it)."""
    name = "hopper_corpus_harness"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, HERE.parent / "hopper_corpus" / "harness.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module     # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


hopper = _load_hopper_harness()
Entry, Case, SimFeatureMissing, never_zero = hopper.Entry, hopper.Case, hopper.SimFeatureMissing, hopper.never_zero

#: feature -> opcode prefixes (Triton's exact spellings; Hopper's table plus sm_100a's). The
#: tcgen05 groups follow what lands in the simulator separately: the core (TMEM, alloc, f16/tf32
#: MMA, ld/st, commit, fences, waits), the f8f6f4 kind, the block-scaled kinds, CTA pairs.
FEATURE_OPCODES: dict[str, tuple[str, ...]] = {
    **hopper.FEATURE_OPCODES,
    "tcgen05": ("tcgen05.alloc.cta_group::1", "tcgen05.dealloc.cta_group::1",
                "tcgen05.relinquish_alloc_permit.cta_group::1", "tcgen05.mma.cta_group::1.kind::f16",
                "tcgen05.mma.cta_group::1.kind::tf32", "tcgen05.commit.cta_group::1", "tcgen05.ld.",
                "tcgen05.st.", "tcgen05.wait::", "tcgen05.fence::"),
    "tcgen05-f8f6f4": ("tcgen05.mma.cta_group::1.kind::f8f6f4", "tcgen05.mma.cta_group::2.kind::f8f6f4"),
    "tcgen05-block-scale": ("tcgen05.mma.cta_group::1.kind::mxf", "tcgen05.mma.cta_group::2.kind::mxf"),
    "tcgen05-cp": ("tcgen05.cp.", "tcgen05.shift."),
    "tcgen05-cta-pair": ("tcgen05.alloc.cta_group::2", "tcgen05.dealloc.cta_group::2",
                         "tcgen05.relinquish_alloc_permit.cta_group::2", "tcgen05.mma.cta_group::2",
                         "tcgen05.commit.cta_group::2", "tcgen05.cp.cta_group::2"),
    "clc": ("clusterlaunchcontrol.",),
    "b128": ("mov.b128", "ld.shared.b128", "st.shared.b128"),     # 128-bit registers (CLC responses)
    "brx": (".branchtargets", "brx.idx"),
    "griddepcontrol": ("griddepcontrol.",),
    "lowprec-cvt": ("cvt.rn.satfinite.e2m1x2", "cvt.rn.f16x2.e2m1x2", "cvt.rn.satfinite.e2m3x2",
                    "cvt.rn.satfinite.e3m2x2", "cvt.rn.f16x2.e2m3x2", "cvt.rn.f16x2.e3m2x2",
                    "cvt.rz.satfinite.ue8m0x2", "cvt.rp.satfinite.ue8m0x2", "cvt.rn.bf16x2.ue8m0x2"),
}

#: Features ptxgen.sim models today (Hopper's all; sm_100a's as they land: issue 20).
SUPPORTED: set[str] = set(hopper.SUPPORTED)


def features_of(ptx: str) -> list[str]:
    """The Blackwell-table features the PTX's instructions use."""
    return hopper.features_of(ptx, FEATURE_OPCODES)


def feature_lines(ptx: str, feature: str) -> set[int]:
    return hopper.feature_lines(ptx, feature, FEATURE_OPCODES)


class BlackwellEntry(Entry):
    @property
    def missing(self) -> list[str]:
        """The features this entry needs that the simulator does not model yet."""
        return [f for f in self.meta["needs"] if f not in SUPPORTED]


def load_entries() -> list[BlackwellEntry]:
    return hopper.load_entries(HERE, BlackwellEntry)


if __name__ == "__main__":     # PYTHONPATH=$PWD python tests/sim/blackwell_corpus/harness.py
    print("updated needs of:", ", ".join(hopper.refresh_needs(HERE, FEATURE_OPCODES)) or "none")
