"""Flag parsing helpers for the CLI, and the one table that turns Python field names into flags.

The Python API names fields (`epilogue_via_smem=False`); a CLI user typed flags
(`--epilogue-via registers`), so every ScheduleError and warning the CLI prints goes through
`flag_text`, which rewrites field assignments with `FIELD_FLAGS`. The API keeps its field names.
"""
from __future__ import annotations

import argparse
import re
from typing import Callable

from ..errors import ScheduleError
from ..schedule.problem import Epilogue

#: Python field -> the CLI flag that sets it. Fields without a flag of their own say which flags
#: decide them (lda: the row length follows from --shape and --a-layout).
FIELD_FLAGS: dict[str, str] = {
    "m": "--shape", "n": "--shape", "k": "--shape", "dtype": "--dtype", "out_dtype": "--out",
    "acc_dtype": "--acc", "batch": "--batch", "align": "--align", "a_layout": "--a-layout",
    "b_layout": "--b-layout", "epilogue": "--epilogue", "alpha": "--epilogue alpha",
    "beta": "--epilogue beta", "bias": "--epilogue bias", "scale": "--epilogue scale",
    "activation": "--epilogue act", "block": "--block", "warps": "--warps", "stages": "--stages",
    "instruction": "--instruction", "smem_layout": "--smem-layout", "raster": "--raster",
    "group_m": "--group-m", "frag_double_buffer": "--no-frag-double-buffer",
    "epilogue_via_smem": "--epilogue-via", "split_k": "--split-k", "split_k_mode": "--split-k-mode",
    "decomposition": "--stream-k", "sms": "--sms", "arch": "--arch",
    "consumers": "--consumers", "warp_specialized": "--warp-specialized", "persistent": "--persistent",
    "cluster": "--cluster", "swizzle": "--swizzle",
}
#: Boolean fields set by a --X / --no-X flag pair: `field=False` reads as `--no-X`.
BOOLEAN_FLAGS = ("warp_specialized", "persistent")
#: Single-letter fields, translated only when named as gemm.m/n/k (prose says "k=16" of instructions).
DIMENSIONS = ("m", "n", "k")
#: How a field's Python value reads as the flag's value, where the spelling differs.
FLAG_VALUES: dict[str, Callable[[str], str]] = {
    "epilogue_via_smem": lambda v: {"False": "registers", "True": "smem", "None": "auto"}.get(v, v),
    "decomposition": lambda v: {"stream-k": "hybrid", "stream-k-pure": "pure"}.get(v, v),
    "block": lambda v: "x".join(re.findall(r"\d+", v)) if v.startswith("(") else v,
    "warps": lambda v: "x".join(re.findall(r"\d+", v)) if v.startswith("(") else v,
    "cluster": lambda v: "x".join(re.findall(r"\d+", v)) if v.startswith("(") else v,
}
_ASSIGN = re.compile(r"\b(?:(?:gemm|schedule|epilogue)\.)?([a-z_]+)(?:\.(BM|BN|BK|WM|WN))?=(Epilogue\([^)]*\)|'[^']*'|\([^)]*\)|[\w.+-]+)")
_DOTTED = re.compile(r"\b(?:gemm|schedule|epilogue)\.([a-z_]+)\b(?!=)")  # "set epilogue.scale to ..."
_QUOTED = re.compile(r"\b([a-z]+_[a-z_]+) (?='[^']*')")   # "use out_dtype 'f32', 'f16' or 'bf16'"
_BARE = re.compile(r"(?<![-\w.'])([a-z]+_[a-z_]+)\b(?![=(])")  # "use acc_dtype='f32' with split_k"


def _flag_assignment(field: str, part: str | None, value: str) -> str | None:
    flag = FIELD_FLAGS.get(field)
    if flag is None:
        return None
    if field == "epilogue" and value.startswith("Epilogue("):
        return f"--epilogue {epilogue_flag_value(value)}"
    if field == "decomposition" and value.strip("'") == "tiles":
        return f"no {flag}"
    if field == "frag_double_buffer":
        return flag if value == "False" else f"without {flag}"
    if field in BOOLEAN_FLAGS and value in ("True", "False"):
        return flag if value == "True" else f"--no-{flag[2:]}"
    plain = value.strip("'")
    plain = FLAG_VALUES.get(field, lambda v: v)(plain)
    if part:  # schedule.block.BK=24: one dimension of the flag's value
        return f"{flag} {part}={plain}"
    if flag.startswith("--epilogue "):
        return f"{flag}={plain}"
    return f"{flag} {plain}"


def epilogue_flag_value(text: str) -> str:
    """`Epilogue(alpha=1.0, beta=0.0, bias=None, activation=None, scale='col')` -> `scale=col`:
    the --epilogue spelling of the fields that differ from the defaults."""
    defaults = {"alpha": "1.0", "beta": "0.0", "bias": "None", "activation": "None", "scale": "None"}
    items = []
    for name, value in re.findall(r"(\w+)=('[^']*'|[^,)]+)", text):
        if defaults.get(name) != value:
            items.append(f"{'act' if name == 'activation' else name}={value.strip(chr(39))}")
    return ",".join(items) or "(none)"


def flag_text(message: str) -> str:
    """Rewrite Python field assignments in an error or warning as the CLI flags that set them."""
    def assign(m: re.Match) -> str:
        whole = m.group(0)
        prefixed = whole.startswith(("gemm.", "schedule.", "epilogue."))
        if m.group(1) in DIMENSIONS and not prefixed:
            return whole  # "the instruction's k=16" is not the problem's K
        flagged = _flag_assignment(m.group(1), m.group(2), m.group(3))
        return flagged or (whole.split(".", 1)[1] if whole.startswith(("gemm.", "schedule.", "epilogue.")) else whole)
    text = _ASSIGN.sub(assign, message)
    text = _DOTTED.sub(lambda m: FIELD_FLAGS.get(m.group(1), m.group(1)), text)
    text = _QUOTED.sub(lambda m: f"{FIELD_FLAGS[m.group(1)]} " if m.group(1) in FIELD_FLAGS else m.group(0), text)
    return _BARE.sub(lambda m: FIELD_FLAGS.get(m.group(1), m.group(1)), text)


def schedule_error_text(e: ScheduleError) -> str:
    """A ScheduleError as the CLI shows it: the flag and value first, then the rule and the fix."""
    return flag_text(str(e))


# -- argument types ------------------------------------------------------------------------

def dims(text: str, count: int, what: str) -> tuple[int, ...]:
    parts = text.lower().split("x")
    if len(parts) != count or not all(p.isdigit() and int(p) > 0 for p in parts):
        example = {"shape": "4096x4096x4096", "cluster": "2x1"}.get(what, "x".join(["128", "128", "32"][:count]))
        raise argparse.ArgumentTypeError(f"{what} must be {count} positive integers joined by 'x', e.g. {example}")
    return tuple(int(p) for p in parts)


def positive(flag: str) -> Callable[[str], int]:
    """An argparse type for a count of at least 1, naming the flag in its error."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = 0
        if value < 1:
            raise argparse.ArgumentTypeError(f"{flag} must be a positive integer, got {text!r}: e.g. {flag} 2")
        return value
    return parse


def non_negative(flag: str) -> Callable[[str], int]:
    """An argparse type for a count that may be 0, naming the flag in its error."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = -1
        if value < 0:
            raise argparse.ArgumentTypeError(f"{flag} must be a non-negative integer, got {text!r}: e.g. {flag} 0")
        return value
    return parse


#: --epilogue's fields and the values each accepts (None: a number).
EPILOGUE_FIELDS: dict[str, tuple[str, ...] | None] = {
    "bias": ("col", "row"), "scale": ("col", "row"), "act": ("relu", "gelu", "silu"), "alpha": None, "beta": None}


def epilogue(text: str) -> Epilogue:
    """`bias=col,act=relu,alpha=1,beta=0` -> Epilogue. A field without its value is an error
    naming the accepted values, never silently dropped."""
    fields: dict = {}
    for item in filter(None, (i.strip() for i in text.split(","))):
        key, eq, value = (s.strip() for s in item.partition("="))
        if key not in EPILOGUE_FIELDS and key != "activation":
            raise argparse.ArgumentTypeError(
                f"unknown epilogue field {key!r}: use bias=, scale=, act=, alpha=, beta=")
        accepted = EPILOGUE_FIELDS["act" if key == "activation" else key]
        if not eq or not value:
            hint = " or ".join(f"{key}={v}" for v in accepted) if accepted else f"{key}=<number>, e.g. {key}=0.5"
            raise argparse.ArgumentTypeError(f"epilogue field {key!r} needs a value: use {hint}")
        if accepted is None:
            try:
                fields[key] = float(value)
            except ValueError:
                raise argparse.ArgumentTypeError(f"epilogue {key} must be a number, got {value!r}") from None
        else:
            fields["activation" if key == "act" else key] = value
    return Epilogue(**fields)
