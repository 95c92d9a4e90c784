"""The sm_100a (Blackwell) target: tcgen05.mma with tensor-memory accumulators (backend.py)."""
