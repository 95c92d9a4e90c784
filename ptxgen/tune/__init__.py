"""Tuning, above `compile`: candidate schedules, the cost models, the chooser, the measured tuner
and its cache. `compile` never imports this package; `ptxgen.compile(gemm)` without a schedule
asks it for one."""
