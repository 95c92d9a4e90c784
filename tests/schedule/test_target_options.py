"""A target's own schedule fields live in its options object (issue 19): `Schedule` has no field
that is None on every other target, yet a schedule written for the flat API builds, reads,
replaces, compares, prints and is cached exactly as before, and a second target's options
(as sm_100a's will be) slot in the same way."""
from __future__ import annotations

import copy
import dataclasses
import pickle
from dataclasses import fields

import pytest

import ptxgen
from ptxgen import Gemm, Schedule, ScheduleError
from ptxgen.targets.sm90.options import HOPPER_FIELDS, Sm90Options
from ptxgen.tune import cache

HOPPER = Schedule(block=(128, 256, 64), instruction="wgmma", consumers=2, cluster=(2, 1), stages=3)
#: What these schedules printed and how the tuning cache stored them before the fields moved
#: (recorded from the previous Schedule, which had the eight wgmma fields as its own).
REPR_BEFORE = ("Schedule(block=(128, 256, 64), warps=(8, 1), instruction='wgmma', stages=3, smem_layout='swizzle', "
               "raster='row', group_m=8, frag_double_buffer=True, split_k=1, split_k_mode='workspace', "
               "epilogue_via_smem=None, decomposition='tiles', sms=None, consumers=2, warp_specialized=True, "
               "producer_regs=40, consumer_regs=232, persistent=True, cluster=(2, 1), multicast=True, swizzle=None, "
               "cta_group=None, tile_scheduler=None)")  # sm_100a's fields (targets/sm100/options.py) print flat
JSON_BEFORE = [
    (HOPPER, {"block": [128, 256, 64], "warps": [8, 1], "instruction": "wgmma", "smem_layout": "swizzle",
              "consumers": 2, "warp_specialized": True, "producer_regs": 40, "consumer_regs": 232,
              "persistent": True, "cluster": [2, 1], "multicast": True}),
    (Schedule(block=(64, 128, 64), instruction="wgmma", warp_specialized=False, persistent=False, swizzle=64),
     {"block": [64, 128, 64], "warps": [4, 1], "instruction": "wgmma", "smem_layout": "swizzle", "consumers": 1,
      "warp_specialized": False, "persistent": False, "cluster": [1, 1], "multicast": False, "swizzle": 64}),
    (Schedule(block=(128, 128, 32)), {"block": [128, 128, 32], "warps": [2, 2], "smem_layout": "swizzle"}),
    (Schedule(block=(128, 128, 64), instruction="wmma", split_k=2),
     {"block": [128, 128, 64], "warps": [2, 4], "instruction": "wmma", "smem_layout": "pad", "split_k": 2}),
]


def test_schedule_has_no_target_fields_of_its_own():
    names = {f.name for f in fields(Schedule)}
    assert not names & set(HOPPER_FIELDS)
    assert HOPPER.options == Sm90Options(consumers=2, warp_specialized=True, producer_regs=40, consumer_regs=232,
                                         persistent=True, cluster=(2, 1), multicast=True, swizzle=None)
    assert Schedule(block=(128, 128, 32)).options is None


def test_flat_fields_read_replace_compare_and_print_as_before():
    assert (HOPPER.consumers, HOPPER.cluster, HOPPER.warps, HOPPER.producer_warpgroups) == (2, (2, 1), (8, 1), 1)
    assert Schedule(block=(128, 128, 32)).consumers is None and Schedule(block=(128, 128, 32)).producer_warpgroups == 0
    one = dataclasses.replace(HOPPER, consumers=1)
    assert one.consumers == 1 and one.cluster == (2, 1) and one != HOPPER
    assert dataclasses.replace(one, consumers=2) == HOPPER and hash(dataclasses.replace(one, consumers=2)) == hash(HOPPER)
    assert HOPPER == Schedule(block=[128, 256, 64], instruction="wgmma", stages=3, cluster=[2, 1])  # defaults filled
    assert Schedule(block=(128, 128, 32)) == Schedule(block=(128, 128, 32), consumers=None)
    assert repr(HOPPER) == REPR_BEFORE
    assert repr(Schedule(block=(128, 128, 32))).endswith("sms=None, consumers=None, warp_specialized=None, "
                                                         "producer_regs=None, consumer_regs=None, persistent=None, "
                                                         "cluster=None, multicast=None, swizzle=None, cta_group=None, "
                                                         "tile_scheduler=None)")
    for same in (pickle.loads(pickle.dumps(HOPPER)), copy.deepcopy(HOPPER)):
        assert same == HOPPER and same.consumers == 2
    with pytest.raises(AttributeError):
        HOPPER.no_such_field


def test_tuning_cache_entries_and_keys_unchanged():
    for s, stored in JSON_BEFORE:
        assert cache.schedule_to_json(s) == stored
        assert cache.schedule_from_json(stored) == s
    # the key names no schedule: the digests recorded before the change (version pinned)
    from ptxgen import version

    old, version.__version__ = version.__version__, "0.test"
    try:
        assert cache._digest(cache.make_key(Gemm(4096, 4096, 4096), "sm_90a", "NVIDIA H100", "nvJitLink 13.5")) == \
            "cc37884520d590b513b4415f2622aa42345b01c9f095e6627e155076a375e146"
        assert cache._digest(cache.make_key(Gemm(1000, 512, 64, dtype="bf16"), "sm_80", "A100", "x")) == \
            "896eac6224e00d38f8fa6bb8bf487d722b39cd5543e8fcd02a0359bc4308bf2a"
    finally:
        version.__version__ = old


@pytest.mark.parametrize("name, value", [("consumers", 2), ("cluster", (2, 1)), ("warp_specialized", False)])
def test_a_wgmma_field_on_another_schedule_is_refused_by_name(name, value):
    s = Schedule(block=(128, 128, 32), **{name: value})
    with pytest.raises(ScheduleError) as e:
        ptxgen.verify(Gemm(512, 512, 256), s, "sm_90")
    assert e.value.field == f"schedule.{name}" and f"remove {name}" in str(e.value) and "instruction='wgmma'" in str(e.value)
    with pytest.raises(ScheduleError, match="schedule.consumers"):  # kept through replace(), named by the verifier
        ptxgen.verify(Gemm(512, 512, 256), dataclasses.replace(HOPPER, instruction="m16n8k16", warps=(2, 2)), "sm_90")


def test_unknown_names_are_type_errors():
    with pytest.raises(TypeError, match="unexpected keyword argument 'consumer'"):
        Schedule(block=(128, 128, 32), consumer=2)
    with pytest.raises(TypeError, match="multiple values for argument 'block'"):
        Schedule((128, 128, 32), block=(64, 64, 32))


def test_a_second_target_registers_its_options_the_same_way():
    """sm_100a's `Sm100Options` (targets/sm100/options.py), registered by its backend."""
    from ptxgen.targets.sm100.options import Sm100Options

    s = Schedule(block=(128, 256, 64), instruction="tcgen05", cta_group=2)
    assert s.options == Sm100Options(2, "static", (2, 1)) and s.cta_group == 2 and s.consumers is None  # the pair is the cluster
    assert Schedule(block=(128, 256, 64), instruction="tcgen05").cta_group == 1
    assert HOPPER.cta_group is None and repr(HOPPER).endswith("swizzle=None, cta_group=None, tile_scheduler=None)")
    with pytest.raises(TypeError, match="different targets"):
        Schedule(block=(128, 128, 32), consumers=2, cta_group=2)
    with pytest.raises(TypeError, match="cta_group"):
        Schedule(block=(128, 128, 64), instruction="wgmma", cta_group=2)
