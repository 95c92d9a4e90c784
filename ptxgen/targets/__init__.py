"""One backend package per GPU target: `sm80/` (mma.sync and wmma, sm_80..sm_90) and `sm90/`
(wgmma + TMA + mbarrier, sm_90a)."""
