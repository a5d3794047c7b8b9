"""Concurrent updates of one shared variable on the GPU device (its own kernel code, on the
strict CuPy stand-in) lose nothing: the table of ``tests/concurrent_updates_util.py``, with the
variables and their updates placed on ``/gpu:0``, where dense updates write into the
variable's buffer and resource reads are copies."""

import pytest
from concurrent_updates_util import CASES, LOCKED_RUNS, check_case, check_unlocked_case

from dflab.runtime.config import ConfigProto, GraphOptions, RewriterConfig


def _unfused():
    # The stand-in cannot run CUDA C: the fused elementwise kernel stays off.
    return ConfigProto(graph_options=GraphOptions(rewrite_options=RewriterConfig(
        remapping=RewriterConfig.OFF)))


@pytest.mark.parametrize("case, use_resource", LOCKED_RUNS)
def test_concurrent_updates_on_the_gpu_lose_nothing(strict_gpu, case, use_resource):
    check_case(case, use_resource, device="/gpu:0", config=_unfused())


@pytest.mark.parametrize("case", [c for c in CASES if not c.resource_only],
                         ids=lambda c: c.name)
def test_unlocked_reference_updates_on_the_gpu_keep_shapes(strict_gpu, case):
    check_unlocked_case(case, device="/gpu:0", config=_unfused())
