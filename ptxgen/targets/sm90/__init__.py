"""Hopper (sm_90a) ISA wrappers as data tables, apart from the pipelines that use them.

As CuTe keeps `cute/arch/mma_sm90_gmma.hpp` (the raw instruction) apart from
`cute/atom/mma_traits_sm90_gmma.hpp` (its layouts), this package holds
- `wgmma_isa`: the legal wgmma shapes and types, operand counts, the instruction builder;
- `wgmma_layouts`: accumulator and register-A fragments as (thread, register) -> (row, col);
- `descriptors`: the 64-bit shared-memory matrix descriptor and the canonical layouts it names;
- `tma_isa`: cp.async.bulk.tensor and bulk-group instructions;
- `../../emit/mbarrier_isa` (shared with later targets): mbarrier, proxy fences, elect.sync, setmaxnreg, cluster helpers.
Every fact is written up, with its PTX ISA section, under docs/ptx_facts/.
"""
