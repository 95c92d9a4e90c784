"""Run the Triton-written Hopper PTX corpus on ptxgen.sim and check it against float64 numpy.

Each entry is <name>.ptx + <name>.json (make_corpus.py writes both; see README.md). The json
names every kernel parameter's role, so the launch arguments are built here without Triton:

    pointer:<arg>       a numpy array (the operand <arg>)
    scalar:<arg>        a problem size or a stride, in elements
    tensormap:<arg>     the 128-byte CUtensorMap of descriptor <arg>: sim.TensorMap(array, box, swizzle)
    shape:<arg>:<d>     that descriptor's global shape, dimension d (outermost first), u32
    stride:<arg>:<d>    its stride in elements, dimension d, u64
    scratch:global|profile   Triton's scratch pointers (a small zero array; unused by the corpus)

`SUPPORTED` lists the Hopper features ptxgen.sim models; an entry whose json `needs` one outside
it is expected to fail (tests/sim/test_hopper_corpus.py marks it xfail, strictly). Whoever adds a
feature to the simulator adds its name here, and the entries it completes must then pass.
"""
from __future__ import annotations

import inspect
import json
from dataclasses import dataclass
from pathlib import Path

import ml_dtypes
import numpy as np

from ptxgen import check, sim
from ptxgen.sim.machine import compile_entry

HERE = Path(__file__).resolve().parent

#: Hopper features ptxgen.sim models today (extend as the simulator learns them).
SUPPORTED: set[str] = {"warp-sync", "wgmma", "elect", "stmatrix", "tma", "mbarrier", "async-proxy", "shfl", "fp8-cvt",
                       "debug-info", "cluster"}

#: feature -> the opcode prefixes that use it. make_corpus.py derives each entry's `needs` from
#: these, and a failing entry must fail on one of them (an unsupported-instruction HazardError).
FEATURE_OPCODES: dict[str, tuple[str, ...]] = {
    "wgmma": ("wgmma.",),
    "tma": ("cp.async.bulk.", "cvta.param", "prefetch.tensormap", "fence.proxy.tensormap"),
    "mbarrier": ("mbarrier.",),
    "async-proxy": ("fence.proxy.async",),
    "elect": ("elect.sync",),
    "stmatrix": ("stmatrix.",),
    "shfl": ("shfl.sync",),
    "warp-sync": ("bar.warp.sync",),
    "fp8-cvt": ("cvt.rn.f16x2.e4m3x2", "cvt.rn.f16x2.e5m2x2", "cvt.rn.satfinite.e4m3x2",
                "cvt.rn.satfinite.e5m2x2"),
    "debug-info": (".section", ".loc", ".file"),   # DWARF line info, which ptxas accepts
    "cluster": ("barrier.cluster", "mapa", "getctarank", ".reqnctapercluster", ".explicitcluster"),
}

#: numpy dtype name (json) -> ptxgen.check dtype name, for the tolerance of an output.
CHECK_DTYPE = {"float16": "f16", "bfloat16": "bf16", "float32": "f32", "int32": "s32"}


class SimFeatureMissing(NotImplementedError):
    """The simulator lacks an API the entry needs (sim.TensorMap before TMA lands)."""


def tensor_map_arg(array: np.ndarray, block: list[int], swizzle: str, fp4_padded: bool = False):
    """The launch argument for a `.param .align 64 .b8 map[128]` tensor-map parameter; fp4_padded:
    `array` holds two e2m1 per byte and the map lands them padded in shared memory (sm_100a)."""
    make = getattr(sim, "TensorMap", None)
    if make is None:
        raise SimFeatureMissing("ptxgen.sim.TensorMap does not exist yet: the simulator does not model "
                                "TMA tensor maps")
    if fp4_padded:
        if "data_type" not in inspect.signature(make).parameters:
            raise SimFeatureMissing("sim.TensorMap has no padded fp4 data type (CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B)"
                                    " yet")
        return make(array, tuple(block), swizzle=swizzle, data_type="16U4_ALIGN16B")
    return make(array, tuple(block), swizzle=swizzle)


@dataclass
class Entry:
    name: str
    ptx: str
    meta: dict

    @property
    def missing(self) -> list[str]:
        """The features this entry needs that the simulator does not model yet."""
        return [f for f in self.meta["needs"] if f not in SUPPORTED]


def load_entries(directory: Path = HERE, entry_type: type = Entry) -> list[Entry]:
    """Every <name>.json + <name>.ptx pair in `directory` (the Blackwell corpus passes its own)."""
    return [entry_type(p.stem, p.with_suffix(".ptx").read_text(), json.loads(p.read_text()))
            for p in sorted(directory.glob("*.json"))]


def features_of(ptx: str, table: dict[str, tuple[str, ...]] | None = None) -> list[str]:
    """The features (`table`, FEATURE_OPCODES by default) the PTX's instructions use."""
    found = set()
    for line in ptx.splitlines():
        body = line.strip()
        if body.startswith("@"):
            body = body.split(None, 1)[1] if " " in body else ""
        for feature, prefixes in (table or FEATURE_OPCODES).items():
            if body.startswith(prefixes):
                found.add(feature)
    return sorted(found)


def feature_lines(ptx: str, feature: str, table: dict[str, tuple[str, ...]] | None = None) -> set[int]:
    """1-based lines of `ptx` that use `feature`; for debug-info also every line inside a
    `.section { ... }` block (the DWARF data)."""
    prefixes = (table or FEATURE_OPCODES)[feature]
    lines, in_section = set(), False
    for number, line in enumerate(ptx.splitlines(), 1):
        body = line.strip()
        if body.startswith("@"):
            body = body.split(None, 1)[1] if " " in body else ""
        if feature == "debug-info" and body.startswith(".section"):
            in_section = True
        if in_section or body.startswith(prefixes):
            lines.add(number)
        if in_section and body.startswith("}"):
            in_section = False
    return lines


def never_zero(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """Random values of both signs with |x| in [0.5, 1.5), rounded to `dtype` (none rounds to 0)."""
    x = rng.uniform(0.5, 1.5, shape) * rng.choice([-1.0, 1.0], shape)
    return x.astype(np.dtype(getattr(ml_dtypes, dtype, None) or dtype))


@dataclass
class Case:
    """A concrete launch of one entry: its arguments, the output to check and its reference."""
    args: list
    out: np.ndarray
    ref: np.ndarray
    out_dtype: str


def build_operands(meta: dict, rng: np.random.Generator) -> tuple[dict[str, np.ndarray], str, np.ndarray, dict]:
    """Named arrays (by kernel argument), the output's name, the float64 reference and the
    scalars (by name) for the entry's kind of kernel."""
    kind, p, arrays = meta["arrays"]["kind"], meta["problem"], meta["arrays"]
    if kind == "vadd":
        n = p["n"]
        x, y = never_zero(rng, (n,), arrays["dtype"]), never_zero(rng, (n,), arrays["dtype"])
        out = np.full(n, np.nan, dtype=arrays["dtype"])
        ref = x.astype(np.float64) + y.astype(np.float64)
        return {"x_ptr": x, "y_ptr": y, "out_ptr": out}, "out_ptr", ref, {"n": n}
    if kind == "copy_plus_one":
        x = never_zero(rng, (p["M"], p["N"]), arrays["dtype"])
        out = np.full_like(x, np.nan)
        return {"in_desc": x, "out_desc": out}, "out_desc", x.astype(np.float64) + 1.0, {}
    if kind == "matmul":
        m, n, k = p["M"], p["N"], p["K"]
        a = never_zero(rng, (m, k), arrays["a"])
        b = never_zero(rng, (k, n), arrays["b"])
        c = np.full((m, n), np.nan, dtype=np.dtype(getattr(ml_dtypes, arrays["c"], None) or arrays["c"]))
        ref = a.astype(np.float64) @ b.astype(np.float64)
        b_arg = np.ascontiguousarray(b.T) if arrays["b_layout"] == "NxK" else b
        names = [n_ for n_ in meta["signature"] if not meta["signature"][n_].startswith(("i32", "i64"))]
        a_name, b_name, c_name = names
        sizes = dict(M=m, N=n, K=k, stride_am=k, stride_ak=1, stride_bk=n, stride_bn=1, stride_cm=n, stride_cn=1)
        return {a_name: a, b_name: b_arg, c_name: c}, c_name, ref, sizes
    raise ValueError(f"unknown corpus entry kind {kind!r}")


def build_case(entry: Entry, seed: int = 0, operands=None) -> Case:
    """Inputs for the entry's problem shape (which no tile divides) and its launch arguments;
    `operands` replaces build_operands (the Blackwell harness adds kinds of kernel)."""
    meta = entry.meta
    arrays, out_name, ref, scalars = (operands or build_operands)(meta, np.random.default_rng(seed))
    descs = meta["tensor_descriptors"]
    args: list = []
    for param in meta["params"]:
        role = param["role"].split(":")
        if role[0] == "pointer":
            args.append(arrays[role[1]])
        elif role[0] == "scalar":
            args.append(int(scalars[role[1]]))
        elif role[0] == "tensormap":
            d = descs[role[1]]
            args.append(tensor_map_arg(arrays[role[1]], d["block_size"], d["swizzle"], d.get("fp4_padded", False)))
        elif role[0] == "shape":
            args.append(int(arrays[role[1]].shape[int(role[2])]))
        elif role[0] == "stride":
            arr = arrays[role[1]]
            args.append(int(arr.strides[int(role[2])] // arr.itemsize))
        elif role[0] == "scratch":
            args.append(np.zeros(max(16, meta.get("global_scratch_size", 0)), dtype=np.uint8))
        else:
            raise ValueError(f"{entry.name}: parameter {param['name']} has unknown role {param['role']!r}")
    out = arrays[out_name]
    return Case(args, out, ref, CHECK_DTYPE[str(out.dtype)])


def run_entry(entry: Entry, seed: int = 0, operands=None) -> check.Comparison:
    """Parse the PTX (an unsupported instruction fails here, naming it), launch it on the
    entry's grid and compare the output with the float64 reference."""
    meta = entry.meta
    compile_entry(entry.ptx, meta["entry"])
    case = build_case(entry, seed, operands)
    sim.launch(entry.ptx, meta["entry"], grid=tuple(meta["grid"]), block=tuple(meta["block"]),
               args=case.args, dynamic_smem=meta["shared"])
    return check.compare(case.out.astype(np.float64), case.ref, case.out_dtype)


def refresh_needs(directory: Path = HERE, table: dict[str, tuple[str, ...]] | None = None) -> list[str]:
    """Rewrite each json's `needs` from its PTX after the feature table changed (no Triton needed);
    returns the names of the entries that changed."""
    changed = []
    for entry in load_entries(directory):
        needs = features_of(entry.ptx, table)
        if needs != entry.meta["needs"]:
            entry.meta["needs"] = needs
            (directory / f"{entry.name}.json").write_text(json.dumps(entry.meta, indent=1) + "\n")
            changed.append(entry.name)
    return changed


if __name__ == "__main__":     # PYTHONPATH=$PWD python tests/sim/hopper_corpus/harness.py
    print("updated needs of:", ", ".join(refresh_needs()) or "none")
