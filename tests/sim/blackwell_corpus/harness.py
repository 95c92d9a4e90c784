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
import json
import sys
from pathlib import Path

import numpy as np

from ptxgen.sim import lowprec

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
                "tcgen05.mma.cta_group::1.kind::tf32", "tcgen05.mma.cta_group::1.kind::i8", "tcgen05.commit.cta_group::1",
                "tcgen05.ld.",
                "tcgen05.st.", "tcgen05.wait::", "tcgen05.fence::"),
    "tcgen05-f8f6f4": ("tcgen05.mma.cta_group::1.kind::f8f6f4", "tcgen05.mma.cta_group::2.kind::f8f6f4"),
    "tcgen05-block-scale": ("tcgen05.mma.cta_group::1.kind::mxf", "tcgen05.mma.cta_group::2.kind::mxf"),
    "tcgen05-cp": ("tcgen05.cp.", "tcgen05.shift."),
    "tcgen05-cta-pair": ("tcgen05.alloc.cta_group::2", "tcgen05.dealloc.cta_group::2",
                         "tcgen05.relinquish_alloc_permit.cta_group::2", "tcgen05.mma.cta_group::2",
                         "tcgen05.commit.cta_group::2", "tcgen05.cp.cta_group::2",
                         *(f"cp.async.bulk.tensor.{d}d.cta_group::2" for d in range(1, 6))),
    "clc": ("clusterlaunchcontrol.",),
    "b128": (".reg .b128", "mov.b128", "ld.shared.b128", "st.shared.b128"),   # 128-bit registers (CLC responses)
    "brx": (".branchtargets", "brx.idx"),
    "griddepcontrol": ("griddepcontrol.",),
    "lowprec-cvt": ("cvt.rn.satfinite.e2m1x2", "cvt.rn.f16x2.e2m1x2", "cvt.rn.satfinite.e2m3x2",
                    "cvt.rn.satfinite.e3m2x2", "cvt.rn.f16x2.e2m3x2", "cvt.rn.f16x2.e3m2x2",
                    "cvt.rz.satfinite.ue8m0x2", "cvt.rp.satfinite.ue8m0x2", "cvt.rn.bf16x2.ue8m0x2"),
}

#: Features ptxgen.sim models today (Hopper's all; sm_100a's as they land: issue 20).
SUPPORTED: set[str] = set(hopper.SUPPORTED) | {"brx", "clc", "b128", "lowprec-cvt", "griddepcontrol",
                                                 "tma-fp4-padded", "tcgen05", "tcgen05-f8f6f4", "tcgen05-block-scale",
                                                 "tcgen05-cp", "tcgen05-cta-pair",
                                                 "mma-fp4-padded"}


def features_of(ptx: str) -> list[str]:
    """The Blackwell-table features the PTX's instructions use."""
    return hopper.features_of(ptx, FEATURE_OPCODES)


#: Features a json's descriptors imply (no opcode shows them: the operand types of a kind::f8f6f4 /
#: mxf8f6f4 MMA are in its runtime instruction descriptor) -> the PTX lines that use them.
DESCRIPTOR_FEATURE_LINES = {"tma-fp4-padded": (), "mma-fp4-padded": ("tcgen05.mma.cta_group::1.kind::f8f6f4",
                                                                   "tcgen05.mma.cta_group::1.kind::mxf8f6f4",
                                                                   "tcgen05.mma.cta_group::2.kind::f8f6f4",
                                                                   "tcgen05.mma.cta_group::2.kind::mxf8f6f4")}


def descriptor_features(descs: dict) -> list[str]:
    """Features a json's tensor descriptors need: a map of fp4 data padded in shared memory (Gluon's
    fp4_padded; CUtensorMap data type 16U4_ALIGN16B, elem_type 14) needs the TMA to land it padded
    (`tma-fp4-padded`) and the f8f6f4 MMA to read e2m1 from that form (`mma-fp4-padded`)."""
    return ["mma-fp4-padded", "tma-fp4-padded"] if any(d.get("fp4_padded") for d in descs.values()) else []


def entry_features(entry) -> list[str]:
    return sorted(set(features_of(entry.ptx)) | set(descriptor_features(entry.meta["tensor_descriptors"])))


def feature_lines(ptx: str, feature: str) -> set[int]:
    """PTX lines using `feature` (for `tma-fp4-padded` none: its failure is SimFeatureMissing)."""
    if feature in DESCRIPTOR_FEATURE_LINES:
        return hopper.feature_lines(ptx, feature, DESCRIPTOR_FEATURE_LINES) if DESCRIPTOR_FEATURE_LINES[feature] \
            else set()
    return hopper.feature_lines(ptx, feature, FEATURE_OPCODES)


class BlackwellEntry(Entry):
    @property
    def missing(self) -> list[str]:
        """The features this entry needs that the simulator does not model yet."""
        return [f for f in self.meta["needs"] if f not in SUPPORTED]


def load_entries() -> list[BlackwellEntry]:
    return hopper.load_entries(HERE, BlackwellEntry)


#: The never-zero scale exponents the block-scaled entries draw (ue8m0 127 = 2^0).
SCALE_CODES = np.arange(125, 130, dtype=np.uint8)


def scaled_codes(rng: np.random.Generator, shape: tuple[int, int], fmt: str) -> np.ndarray:
    """Random never-zero element codes of `fmt` (e4m3: never_zero values rounded; e2m1: any of
    the 14 non-zero codes)."""
    if fmt == "e2m1":
        return rng.choice(np.array([c for c in range(16) if c not in (0, 8)], np.uint8), shape)
    return lowprec.encode(fmt, never_zero(rng, shape, "float64").astype(np.float64))


def pack_k_pairs(codes: np.ndarray) -> np.ndarray:
    """Two e2m1 codes per byte along the last axis, the lower index in bits 3:0 (the ISA's order;
    a test swaps this to show the corpus checks it)."""
    return lowprec.pack_fp4(codes)


def build_operands(meta: dict, rng: np.random.Generator):
    """The Hopper kinds, plus `scaled_matmul`: tl.dot_scaled's A [M, K] and B [K, N] as bytes
    (e2m1: two per byte along K, the lower K index in bits 3:0, sm100_formats.md §2), and e8m0
    scales a_scale [M, K/32], b_scale [N, K/32]. The reference decodes the codes with
    ptxgen.sim.lowprec and multiplies each 32-element block of K by 2^(scale - 127)."""
    arrays = meta["arrays"]
    if arrays["kind"] == "scaled_matmul_tma":
        return build_scaled_tma_operands(meta, rng)
    if arrays["kind"] == "matmul" and (arrays["a"] == "int8" or arrays.get("inputs") == "tf32"):
        return build_exact_input_operands(meta, rng)
    if arrays["kind"] != "scaled_matmul":
        return hopper.build_operands(meta, rng)
    fmt, p = arrays["format"], meta["problem"]
    m, n, k = p["M"], p["N"], p["K"]
    a_codes, b_codes = scaled_codes(rng, (m, k), fmt), scaled_codes(rng, (k, n), fmt)
    a_scale, b_scale = rng.choice(SCALE_CODES, (m, k // 32)), rng.choice(SCALE_CODES, (n, k // 32))
    a_val = lowprec.decode(fmt, a_codes) * np.repeat(lowprec.scale_values("ue8m0", a_scale), 32, axis=1)
    b_val = lowprec.decode(fmt, b_codes) * np.repeat(lowprec.scale_values("ue8m0", b_scale), 32, axis=1).T
    if fmt == "e2m1":
        a_bytes, b_bytes = pack_k_pairs(a_codes), np.ascontiguousarray(pack_k_pairs(b_codes.T).T)
    else:
        a_bytes, b_bytes = a_codes, b_codes
    c = np.full((m, n), np.nan, dtype=np.float32)
    sizes = dict(M=m, N=n, K=k, stride_am=a_bytes.shape[1], stride_bk=n, stride_cm=n)
    named = {"a_ptr": a_bytes, "a_scale_ptr": np.ascontiguousarray(a_scale), "b_ptr": b_bytes,
             "b_scale_ptr": np.ascontiguousarray(b_scale), "c_ptr": c}
    return named, "c_ptr", a_val @ b_val, sizes


#: Scale codes drawn per format: e8m0 2^-2..2^2; ue4m3 0.5, 1, 2, 4 (e4m3 bits 0x30, 0x38, 0x40, 0x48).
SCALE_DRAW = {"ue8m0": SCALE_CODES, "ue4m3": np.array([0x30, 0x38, 0x40, 0x48], dtype=np.uint8)}


def build_scaled_tma_operands(meta: dict, rng: np.random.Generator):
    """The Gluon tcgen05_mma_scaled entries: A [M, K] and B [N, K] (K-major, e2m1 two per byte
    along K) behind descriptors, scales a_scale [M, K/vec] and b_scale [N, K/vec] in `scale`
    format (ue8m0 or ue4m3), f32 C; reference (A * sa) @ (B * sb).T."""
    arrays, p = meta["arrays"], meta["problem"]
    m, n, k, vec = p["M"], p["N"], p["K"], arrays["vec"]
    a_codes, b_codes = scaled_codes(rng, (m, k), arrays["a_format"]), scaled_codes(rng, (n, k), arrays["b_format"])
    draw = SCALE_DRAW[arrays["scale"]]
    a_scale, b_scale = rng.choice(draw, (m, k // vec)), rng.choice(draw, (n, k // vec))
    a_val = lowprec.decode(arrays["a_format"], a_codes) * np.repeat(lowprec.scale_values(arrays["scale"], a_scale), vec, 1)
    b_val = lowprec.decode(arrays["b_format"], b_codes) * np.repeat(lowprec.scale_values(arrays["scale"], b_scale), vec, 1)
    pack = {"e2m1": pack_k_pairs}
    a_bytes = pack.get(arrays["a_format"], np.asarray)(a_codes)
    b_bytes = pack.get(arrays["b_format"], np.asarray)(b_codes)
    c = np.full((m, n), np.nan, dtype=np.float32)
    named = {"a_desc": a_bytes, "b_desc": b_bytes, "c_desc": c, "a_scale_ptr": a_scale, "b_scale_ptr": b_scale}
    if arrays.get("scale_layout") == "packed_block":
        one = int(lowprec.encode(arrays["scale"], [1.0], rounding="rz")[0])
        named["a_scale_desc"] = packed_block_scales(a_scale, one)
        named["b_scale_desc"] = packed_block_scales(b_scale, one)
    return named, "c_desc", a_val @ b_val.T, dict(M=m, N=n, K=k)


def packed_block_scales(scale: np.ndarray, fill: int) -> np.ndarray:
    """Scales [rows, cols] in the packed-block layout the tcgen05.cp entries load:
    G[a, d, c, b, e] = scale[128a + 32b + c, 4d + e] (rows padded to 128 with `fill`, the code of
    1.0: padded rows meet zero A/B rows, and a NaN scale would poison them), returned as the
    [1, rows/128, cols/4, 2, 256] array the 5-D tensor map describes."""
    rows, cols = scale.shape
    padded = np.full((-(-rows // 128) * 128, cols), fill, dtype=np.uint8)
    padded[:rows] = scale
    g = padded.reshape(-1, 4, 32, cols // 4, 4).transpose(0, 3, 2, 1, 4)
    return np.ascontiguousarray(g).reshape(1, padded.shape[0] // 128, cols // 4, 2, 256)


def build_exact_input_operands(meta: dict, rng: np.random.Generator):
    """The Hopper `matmul` operands with inputs the MMA takes exactly: int8 values in -3..3 without 0
    (int32 C, poisoned with INT32_MIN), or f32 values with tf32's 10 mantissa bits (the MMA's tf32
    conversion keeps them, so the f32 reference applies)."""
    with np.errstate(invalid="ignore"):      # an int32 C "poisoned" with NaN, replaced below
        named, c_name, _, sizes = hopper.build_operands(meta, rng)
    a_name, b_name = [n for n in named if n != c_name]
    if meta["arrays"]["a"] == "int8":
        for name in (a_name, b_name):
            shape = named[name].shape
            named[name] = (rng.integers(1, 4, shape) * rng.choice([-1, 1], shape)).astype(np.int8)
        named[c_name] = np.full(named[c_name].shape, np.iinfo(np.int32).min, dtype=np.int32)
    else:
        for name in (a_name, b_name):
            named[name] = (named[name].view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)
    b = named[b_name].T if meta["arrays"]["b_layout"] == "NxK" else named[b_name]
    return named, c_name, named[a_name].astype(np.float64) @ b.astype(np.float64), sizes


def build_case(entry: Entry, seed: int = 0) -> Case:
    return hopper.build_case(entry, seed, build_operands)


def run_entry(entry: Entry, seed: int = 0):
    """Parse, launch on the entry's grid (clusters from its .reqnctapercluster) and compare."""
    return hopper.run_entry(entry, seed, build_operands)


def refresh_needs() -> list[str]:
    """Rewrite each json's `needs` after FEATURE_OPCODES changed (no Triton needed)."""
    changed = []
    for entry in load_entries():
        needs = entry_features(entry)
        if needs != entry.meta["needs"]:
            entry.meta["needs"] = needs
            (HERE / f"{entry.name}.json").write_text(json.dumps(entry.meta, indent=1) + "\n")
            changed.append(entry.name)
    return changed


if __name__ == "__main__":     # PYTHONPATH=$PWD python tests/sim/blackwell_corpus/harness.py
    print("updated needs of:", ", ".join(refresh_needs()) or "none")
