"""Flag parsing helpers for the CLI, and the one table that turns Python field names into flags.

The Python API names fields (`epilogue_via_smem=False`); a CLI user typed flags
(`--epilogue-via registers`), so every ScheduleError and warning the CLI prints goes through
`flag_text`, which rewrites field assignments with `FIELD_FLAGS`. The API keeps its field names.
"""
from __future__ import annotations

import argparse
import re
import sys
from typing import Callable

from ..errors import ScheduleError
from ..schedule.problem import Epilogue

#: Python field -> the CLI flag that sets it. Fields without a flag of their own say which flags
#: decide them (lda: the row length follows from --shape and --a-layout).
FIELD_FLAGS: dict[str, str] = {
    "m": "--shape", "n": "--shape", "k": "--shape", "dtype": "--dtype", "out_dtype": "--out",
    "acc_dtype": "--acc", "bias_dtype": "--bias-dtype", "fast_accum": "--fast-accum", "block_scale": "--block-scale", "batch": "--batch", "align": "--align", "a_layout": "--a-layout",
    "groups": "--groups", "grouping": "--grouping",
    "b_layout": "--b-layout", "epilogue": "--epilogue", "alpha": "--epilogue alpha",
    "beta": "--epilogue beta", "bias": "--epilogue bias", "scale": "--epilogue scale",
    "activation": "--epilogue act", "block": "--block", "warps": "--warps", "stages": "--stages",
    "instruction": "--instruction", "smem_layout": "--smem-layout", "raster": "--raster",
    "group_m": "--group-m", "frag_double_buffer": "--no-frag-double-buffer",
    "epilogue_via_smem": "--epilogue-via", "split_k": "--split-k", "split_k_mode": "--split-k-mode",
    "decomposition": "--stream-k", "sms": "--sms", "swap_ab": "--swap-ab", "arch": "--arch",
    "consumers": "--consumers", "warp_specialized": "--warp-specialized", "persistent": "--persistent",
    "cluster": "--cluster", "swizzle": "--swizzle",
    "cta_group": "--cta-group", "tile_scheduler": "--tile-scheduler",
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
    if field == "fast_accum":
        return flag if value == "True" else f"without {flag}"
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


#: Python-only words in the verifier's fixes and how a CLI user reads them (a flag left out is None).
_PYTHON_ONLY = ((re.compile(r",? or None\b(?: for [a-z ]+| to [a-z ]+)?"), ""),
                (re.compile(r" \(None [a-z ]+\)"), " (leave the flag out to let ptxgen choose)"),
                (re.compile(r"\bNone\b"), "left out"))


def _as_layout_letters(fix: str, letters: str) -> str:
    """"--a-layout row, --b-layout col" in a fix -> "--layout tn" for a user who typed --layout nn."""
    changes = dict(re.findall(r"--([ab])-layout (row|col)", fix))
    if not changes:
        return fix
    new = "".join({"row": "t", "col": "n"}[changes[w]] if w in changes else letters[i] for i, w in enumerate("ab"))
    fix = re.sub(r"--([ab])-layout (row|col)(?:, --([ab])-layout (row|col))?", f"--layout {new}", fix)
    return fix


def schedule_error_text(e: ScheduleError) -> str:
    """A ScheduleError as the CLI shows it: what is wrong ("invalid problem" or "invalid
    schedule"), the flag and value, the rule and the fix, in flags. Where the field was a default
    the user never typed (`e.typed_flags`, set by `build.build`), the flags typed are named and the
    default is said to be one."""
    what = "invalid problem" if e.field.startswith(("gemm.", "epilogue.")) else "invalid schedule"
    head = flag_text(f"{e.field}={e.value!r}")
    rule, fix = flag_text(e.rule), flag_text(e.fix)
    for pattern, repl in _PYTHON_ONLY:
        fix = pattern.sub(repl, fix)
        rule = pattern.sub(repl, rule)
    letters = getattr(e, "layout_letters", None)
    if letters:  # the user typed --layout: the fix changes its letters, not --a-layout/--b-layout
        fix = _as_layout_letters(fix, letters)
    typed = getattr(e, "typed_flags", None)
    if typed:
        return f"{what}: {typed}: {rule} (with the default {head}): {fix}"
    return f"{what}: {head}: {rule}: {fix}"


# -- argument types ------------------------------------------------------------------------

def dims(text: str, count: int, what: str) -> tuple[int, ...]:
    parts = text.lower().split("x")
    if len(parts) != count or not all(p.isdigit() and int(p) > 0 for p in parts):
        example = {"shape": "4096x4096x4096", "cluster": "2x1"}.get(what, "x".join(["128", "128", "32"][:count]))
        raise argparse.ArgumentTypeError(f"{what} must be {count} positive integers joined by 'x', e.g. {example}")
    return tuple(int(p) for p in parts)


def block_scale(text: str) -> object:
    """--block-scale AxK,KxN[,dtype]: the group shapes of A's and B's scales (built: 1x128,128x128;
    sm_100a: 1x32,32x1,ue8m0 and 1x16,16x1,ue4m3) and optionally their dtype (f32 by default), as a
    ptxgen.BlockScale."""
    from ..schedule.block_scale import BlockScale, SCALE_DTYPES

    parts = text.lower().split(",")
    dtype = parts.pop() if len(parts) == 3 else "f32"
    if len(parts) != 2 or dtype not in SCALE_DTYPES:
        raise argparse.ArgumentTypeError("block-scale must be A's group, B's group and optionally the scale dtype, "
                                         "e.g. 1x128,128x128 or 1x128,128x128,ue8m0")
    a, b = (dims(p, 2, "block-scale group") for p in parts)
    try:
        return BlockScale(a=a, b=b, dtype=dtype)
    except ScheduleError as e:
        raise argparse.ArgumentTypeError(f"{e.field}={e.value}: {e.rule}; built: --block-scale 1x128,128x128 "
                                         "(optionally ,ue8m0), and on sm_100a 1x32,32x1,ue8m0 or 1x16,16x1,ue4m3"
                                         ) from None


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
                f"unknown epilogue field {key!r}: use bias=, scale=, act=, alpha= or beta=, e.g. --epilogue bias=col")
        accepted = EPILOGUE_FIELDS["act" if key == "activation" else key]
        if not eq or not value:
            hint = " or ".join(f"{key}={v}" for v in accepted) if accepted else f"{key}=<number>, e.g. {key}=0.5"
            raise argparse.ArgumentTypeError(f"epilogue field {key!r} needs a value: use {hint}")
        if accepted is not None and value not in accepted:
            raise argparse.ArgumentTypeError(f"{key}={value} is not one of {', '.join(accepted)}: e.g. --epilogue "
                                             f"{key}={accepted[0]}")
        if accepted is None:
            try:
                fields[key] = float(value)
            except ValueError:
                raise argparse.ArgumentTypeError(f"epilogue {key} must be a number, got {value!r}") from None
        else:
            fields["activation" if key == "act" else key] = value
    return Epilogue(**fields)


class Parser(argparse.ArgumentParser):
    """argparse that says what is wrong in one line (`ptxgen: --shape: ...`) and points at
    --help, instead of printing the whole usage block before every mistake."""

    def error(self, message: str):  # type: ignore[override]
        message = re.sub(r"^argument ([-\w/]+): ", r"\1: ", message)
        print(f"ptxgen: {message} (`{self.prog} --help` lists the flags)", file=sys.stderr)
        raise SystemExit(2)


def join_negative_values(argv: list[str]) -> list[str]:
    """`--shape -4x8x8` as `--shape=-4x8x8`, so that the flag's own check names the bad value
    (argparse would take "-4x8x8" for a flag and say only "expected one argument")."""
    out: list[str] = []
    for token in argv:
        if out and re.match(r"^-\d", token) and out[-1].startswith("--") and "=" not in out[-1]:
            out[-1] = f"{out[-1]}={token}"
        else:
            out.append(token)
    return out
