"""A first static cost model for tcgen05 schedules on B200 (schedule/devices.py `B200`): the
larger of the tensor time (whole waves of persistent tiles at the per-SM MMA rate, edge tiles
computed in full) and the DRAM time (`schedule.cost.dram_bytes`), plus the launch. No pipeline or
epilogue terms yet: a ranking aid until a Blackwell GPU measures the candidates."""
from __future__ import annotations

from ...schedule.cost import Prediction, ceil_div, dram_bytes
from ...schedule.devices import device_model
from ...schedule.problem import Gemm
from ...schedule.schedule import Schedule
from .plan import persistent_ctas


def predict_blackwell(g: Gemm, s: Schedule, arch: str) -> Prediction:
    dev = device_model(arch)
    tiles = ceil_div(g.m, s.bm) * ceil_div(g.n, s.bn) * g.batch
    ctas = persistent_ctas(g, s, dev.sms)
    # cluster launch control launches one CTA per tile, of which one per SM runs at a time (each
    # then takes further tiles): the waves are those of min(tiles, SMs) resident CTAs
    resident = min(ctas, dev.sms) if s.tile_scheduler == "clc" else ctas
    per_cta = ceil_div(tiles, resident)
    k = ceil_div(g.k, s.bk) * s.bk
    rate = dev.tensor_flops_per_clk_sm[g.dtype] * dev.clock_hz
    tensor = per_cta * 2 * s.bm * s.bn * k / rate
    dram_b = dram_bytes(g, s, dev, resident)
    dram = dram_b / dev.dram_bytes_per_s
    time = max(tensor, dram) + dev.launch_s
    flops = 2 * g.m * g.n * g.k * g.batch
    computed = 2 * tiles * s.bm * s.bn * k
    return Prediction(time_s=time, efficiency=flops / (time * dev.peak_flops(g.dtype, instruction_share=False)),
                      ctas=ctas, ctas_per_sm=1, limiter="persistent grid", registers=80,
                      waves=tiles / resident,
                      edge_waste=1 - flops / computed if computed else 0.0, dram_bytes=dram_b, l2_bytes=0,
                      bound="tensor" if tensor >= dram else "dram",
                      terms={"tensor": tensor, "dram": dram, "launch": dev.launch_s})
