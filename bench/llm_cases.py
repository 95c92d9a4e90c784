"""The LLM-serving problems of bench/gemm.py (issue 24): decode against a large weight, and the
mixture-of-experts expert GEMMs as grouped problems (`Gemm(groups=, grouping=)`).

Decode: M = 1, 8, 64 tokens against the 4096x4096 and 11008x4096 (N x K) weights of a 7B-class
layer; these run through gemm.py's dense path (`DECODE_SHAPES`, group "decode"), where the
chooser's pick (swap-AB for M <= 64 when the model prefers it) is one of the candidates.

Mixture of experts, from the public model configs (hidden size, per-expert intermediate size):
* DeepSeek-V3 (hidden 7168, moe_intermediate_size 2048, 256 routed experts, 8 per token): the
  fused gate/up projection is N = 2 x 2048 = 4096, K = 7168; the down projection N = 7168, K = 2048.
* Qwen3-30B-A3B (hidden 2048, moe_intermediate_size 768, 128 experts, 8 per token): gate/up
  N = 1536, K = 2048; down N = 2048, K = 768.
Each runs as a prefill ("contiguous": the tokens of 8 local experts concatenated, uneven sizes
that straddle tiles) and as a decode step ("masked": 32 local experts, a fixed slot of 64 rows,
uneven valid counts), the two layouts DeepGEMM's grouped kernels take. Baselines: torch's
`_grouped_mm` (contiguous, sm_90+) and a batched matmul over the masked slots, and DeepGEMM's
grouped bf16 kernels where `deep_gemm` is importable. Without a GPU, `--dry-run` plans them: the
chooser's schedule (prediction only, nothing assembled) or the reason none applies.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

#: Decode weights (N, K) and token counts.
DECODE_NK = [(4096, 4096), (11008, 4096)]
DECODE_M = (1, 8, 64)
DECODE_SHAPES = [(m, n, k, "decode") for m in DECODE_M for n, k in DECODE_NK]


@dataclass(frozen=True)
class ExpertLayer:
    """One expert projection of a public MoE model: the weight is N x K per expert."""

    model: str
    layer: str
    n: int
    k: int


EXPERT_LAYERS = [
    ExpertLayer("DeepSeek-V3", "gate_up", 4096, 7168),
    ExpertLayer("DeepSeek-V3", "down", 7168, 2048),
    ExpertLayer("Qwen3-30B-A3B", "gate_up", 1536, 2048),
    ExpertLayer("Qwen3-30B-A3B", "down", 2048, 768),
]
#: (grouping, local experts G, rows: M_total for contiguous, max_m per slot for masked).
GROUPINGS = [("contiguous", 8, 8 * 512), ("masked", 32, 64)]
#: Input dtypes the grouped kernels build (schedule/grouping.py GROUPED_INPUTS); out = input.
MOE_DTYPES = ("bf16",)


@dataclass
class MoeJob:
    layer: ExpertLayer
    grouping: str
    groups: int
    m: int
    dtype: str
    schedule: str = ""        # the chooser's pick, as CLI flags ("" when none)
    predicted_us: float = 0.0
    verdict: str = "ok"       # "ok", or why ptxgen has no kernel for it on this arch

    @property
    def name(self) -> str:
        return f"{self.layer.model} {self.layer.layer} {self.grouping} G={self.groups} m={self.m} {self.dtype}"

    def gemm(self):
        import ptxgen

        return ptxgen.Gemm(self.m, self.layer.n, self.layer.k, dtype=self.dtype, out_dtype=self.dtype,
                           a_layout="row", b_layout="col", groups=self.groups, grouping=self.grouping)

    def counts(self):
        """Fixed uneven sizes (seeded), group 1 empty: contiguous offs whose groups straddle tiles,
        masked valid counts from 0 to max_m (group 0 full)."""
        import numpy as np

        rng = np.random.default_rng(24)
        if self.grouping == "masked":
            counts = rng.integers(0, self.m + 1, size=self.groups)
            counts[0], counts[1] = self.m, 0  # a full slot and an idle expert
            return counts.astype(np.int32)
        sizes = rng.integers(0, 2 * self.m // self.groups, size=self.groups)
        sizes[1] = 0
        return np.minimum(np.cumsum(sizes), self.m).astype(np.int32)

    @property
    def flops(self) -> int:
        """2 N K per valid row."""
        counts = self.counts()
        rows = int(counts[-1]) if self.grouping == "contiguous" else int(counts.sum())
        return 2 * rows * self.layer.n * self.layer.k


def plan_moe(arch: str, dtypes=MOE_DTYPES) -> list[MoeJob]:
    """Every expert layer x grouping x dtype, with the chooser's best-predicted schedule (the cost
    model's ranking, nothing assembled, so it runs on any machine) or the reason there is none."""
    import ptxgen
    from ptxgen.tune.choose import describe_schedule, rank

    jobs = []
    for layer in EXPERT_LAYERS:
        for grouping, groups, m in GROUPINGS:
            for dt in (d for d in dtypes if d in MOE_DTYPES):
                job = MoeJob(layer, grouping, groups, m, dt)
                try:
                    best = rank(job.gemm(), arch)[0]
                    job.schedule, job.predicted_us = describe_schedule(best.schedule), best.prediction.time_s * 1e6
                except (ptxgen.ScheduleError, IndexError) as e:
                    job.verdict = str(e) or "no legal schedule"
                jobs.append(job)
    return jobs


def print_moe_plan(jobs: list[MoeJob], arch: str) -> None:
    """The grouped plan, one line per problem (nothing for no problems: a `--max-problems` run)."""
    if not jobs:
        return
    print(f"grouped (mixture-of-experts) plan for {arch}: {len(jobs)} problems (+ torch._grouped_mm / batched "
          "matmul, DeepGEMM where importable)")
    for i, j in enumerate(jobs):
        what = (f"{j.schedule} ({j.predicted_us:.1f} us predicted)" if j.verdict == "ok"
                else f"unsupported: {j.verdict}")
        print(f"{i:3d}  {j.name:48s} N={j.layer.n} K={j.layer.k}: {what}")


def baselines(dev, job: MoeJob) -> dict:
    """name -> make(a, b, offs_or_counts, out) -> launch, for the baselines this machine has:
    torch._grouped_mm (contiguous; B as (G, N, K) transposed, the K-major layout it takes), a
    batched matmul over the masked slots (computes every row of every slot), DeepGEMM's grouped
    bf16 kernels where the installed `deep_gemm` has them."""
    torch, out = dev.torch, {}
    if torch is None:
        return out
    if job.grouping == "contiguous" and hasattr(torch, "_grouped_mm"):
        out["torch._grouped_mm"] = lambda a, b, offs, c: (lambda: c.copy_(torch._grouped_mm(a, b, offs=offs)))
    if job.grouping == "masked":
        out["torch.bmm (every slot row)"] = lambda a, b, counts, c: (lambda: torch.bmm(a, b, out=c))
    try:
        import deep_gemm
    except Exception:  # noqa: BLE001 - not installed, or built for another CUDA
        return out
    name = {"contiguous": "m_grouped_bf16_gemm_nt_contiguous", "masked": "m_grouped_bf16_gemm_nt_masked"}[job.grouping]
    fn = getattr(deep_gemm, name, None)
    if fn is not None:  # D = A @ B^T with B (G, N, K): our column-major B's storage
        if job.grouping == "contiguous":  # its groups want rows padded to 128: uneven ones may be refused
            out[f"deep_gemm.{name}"] = lambda a, b, offs, c: (
                lambda: fn(a, b.transpose(1, 2), c, group_index(torch, offs, a.shape[0])))
        else:
            out[f"deep_gemm.{name}"] = lambda a, b, counts, c: (lambda: fn(a, b.transpose(1, 2), c, counts, job.m))
    return out


def group_index(torch, offs, rows: int):
    """DeepGEMM's contiguous layout names each row's group (-1: no group) instead of offs."""
    ends = offs.long()
    return torch.searchsorted(ends, torch.arange(rows, device=offs.device), right=True).int().masked_fill(
        torch.arange(rows, device=offs.device) >= ends[-1], -1)


def run_moe_jobs(dev, jobs: list[MoeJob], arch: str, systems: list[str], runs: int, timer) -> list[dict]:
    """Time each planned job (ptxgen's chosen kernel and every baseline), after checking each
    once against an f32 per-group reference; `timer(dev, fns, runs)` is gemm.py's `time_launches`."""
    import ptxgen
    from ptxgen.runtime import prepare_launch

    rows = []
    for job in jobs:
        base = {"problem": job.name, "n": job.layer.n, "k": job.layer.k, "groups": job.groups, "m": job.m,
                "grouping": job.grouping, "dtype": job.dtype, "flops": job.flops}
        if dev.torch is None:
            rows.append(dict(base, system="all", status="unavailable", reason="the grouped run needs torch"))
            continue
        torch, g = dev.torch, job.gemm()
        counts = torch.tensor(job.counts(), device="cuda")
        a_shape = (job.m, g.k) if job.grouping == "contiguous" else (job.groups, job.m, g.k)
        c_shape = a_shape[:-1] + (g.n,)
        a = dev.randn(a_shape, job.dtype, seed=1)
        b = dev.randn((job.groups, g.n, g.k), job.dtype, seed=2).transpose(1, 2)  # (G, K, N), K-major
        ref = reference(torch, job, a, b, counts)
        makers = {}
        if "ptxgen" in systems and job.verdict == "ok":
            kern = ptxgen.compile(g, arch=arch)
            key = "offs" if job.grouping == "contiguous" else "masked_m"
            makers["ptxgen " + job.schedule] = lambda a, b, n, c: prepare_launch(
                kern, a, b, c, stream=dev.stream_handle(), **{key: n})
        makers.update(baselines(dev, job))
        for system, make in makers.items():
            row = dict(base, system=system)
            try:
                c = torch.full(c_shape, float("nan"), device="cuda", dtype=dev.dt(job.dtype))
                make(a, b, counts, c)()
                dev.sync()
                want = valid(torch, job, ref, counts)
                err = float((valid(torch, job, c, counts).float() - want).norm() / want.norm())
                row["rel_err"] = err
                if not err < 1e-2 or math.isnan(err):
                    rows.append(dict(row, status="wrong"))
                    continue
                ms = timer(dev, [make(a, b, counts, c)], runs)
                rows.append(dict(row, ms=ms, tflops=job.flops / ms / 1e9))
            except Exception as e:  # noqa: BLE001 - a failing system must not sink the run
                rows.append(dict(row, status="error", reason=f"{type(e).__name__}: {e}"[:300]))
        print(f"{job.name}: " + ", ".join(f"{r['system']} {r['tflops']:.0f}" if r.get("tflops") else
                                          f"{r['system']} {r.get('status')}" for r in rows if r["problem"] == job.name),
              flush=True)
        dev.free()
    return rows


def reference(torch, job: MoeJob, a, b, counts):
    """f32 C group by group (rows outside every group: zero, and not compared)."""
    af, bf = a.float(), b.float()
    if job.grouping == "masked":
        return torch.bmm(af, bf)
    out = torch.zeros((a.shape[0], b.shape[2]), device="cuda")
    start = 0
    for g, end in enumerate(counts.tolist()):
        out[start:end] = af[start:end] @ bf[g]
        start = end
    return out


def valid(torch, job: MoeJob, c, counts):
    """The rows of C the groups own, stacked (masked: each slot's first masked_m rows)."""
    if job.grouping == "contiguous":
        return c[:int(counts[-1])]
    return torch.cat([c[g, :int(n)] for g, n in enumerate(counts.tolist())])
