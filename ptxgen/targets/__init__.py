"""One backend package per GPU target, behind `base.Backend`: `sm80/` (mma.sync and wmma for
sm_80, sm_86, sm_89 and sm_90) and `sm90/` (wgmma + TMA + mbarrier for sm_90a). `registry`
picks one from (arch, schedule.instruction); docs/architecture.md says how to add a target."""
