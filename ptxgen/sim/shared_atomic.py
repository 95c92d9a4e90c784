"""atom / red on shared memory: this CTA's window (.shared::cta) and, through mapa addresses,
another cluster CTA's window (.shared::cluster, distributed shared memory).

Lanes of one instruction on the same bytes are serialised (ops_atomic.serialize), never a race.
Atomics race only with plain loads and stores: of another thread of the CTA in the same barrier
epoch (memory.SharedMemory.atomic), or of another cluster CTA not ordered by barrier.cluster
(cluster.CrossTags.atomic). Their .acquire/.release semantics order nothing beyond that: the
shared-memory model orders threads by barriers only.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from .cluster import own_offsets, remote_atomic
from .cluster import targets as cluster_targets
from .memory import SHARED_GENERIC_BASE, bank_wavefronts
from .ops_mem import in_peer_window, lanes_per_phase, split_generic
from .state import CtaState

Serializer = Callable[..., tuple[np.ndarray, bool]]


def split_spaces(cta: CtaState, space: str, addrs: np.ndarray) -> list[tuple[str, np.ndarray | None, np.ndarray]]:
    """[(space, lane selection or None, addresses in that space)]: generic addresses go to this
    CTA's shared window, a peer's (cluster) or global memory."""
    if space != "generic":
        return [(space, None, addrs)]
    remote = in_peer_window(cta, addrs)
    local = split_generic(cta, addrs) & ~remote
    glob = ~(remote | local)
    parts = [("cluster", remote, addrs[remote] - SHARED_GENERIC_BASE),
             ("shared", local, addrs[local] - SHARED_GENERIC_BASE), ("global", glob, addrs[glob])]
    live = [p for p in parts if p[1].any()]
    return [(live[0][0], None, live[0][2])] if len(live) == 1 else live


def shared_rmw(cta: CtaState, space: str, tids: np.ndarray, addrs: np.ndarray, b: np.ndarray, c: np.ndarray,
               size: int, what: str, line: int, serialize: Serializer) -> tuple[np.ndarray, bool]:
    """Apply an atomic to shared bytes ("shared": this CTA's offsets, "cluster": .shared::cluster
    addresses); (old values in lane order, whether any byte changed)."""
    groups = ([(cta, None, own_offsets(cta, addrs, what))] if space == "shared"
              else cluster_targets(cta, addrs, size, what))
    old, changed = None, False
    for peer, sel, offs in groups:
        t, bb, cc = (tids, b, c) if sel is None else (tids[sel], b[sel], c[sel])
        if peer is cta:
            idx = cta.smem.atomic(t, offs, size, cta.epoch, what)
            cta.add_smem_stat(line, *bank_wavefronts(t >> 5, t & 31, offs, size, lanes_per_phase(size)))
        else:
            idx = remote_atomic(cta, peer, t, offs, size, what)
        rows, data = idx.reshape(-1, size), peer.smem.data

        def read(pos: np.ndarray) -> np.ndarray:
            return data[rows[pos]]

        def write(pos: np.ndarray, new: np.ndarray) -> None:
            data[rows[pos]] = new

        part, ch = serialize(t, offs, bb, cc, read, write)
        changed = changed or ch
        if sel is None:
            return part, changed
        if old is None:
            old = np.empty(len(tids), dtype=part.dtype)
        old[sel] = part
    return old, changed
