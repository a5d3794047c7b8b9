"""The ideal backup-worker model that benchmark 13b compares the runtime with: TF's token
protocol replayed as events, checked on cases whose update times can be worked out by hand."""

import importlib.util
import pathlib

import numpy as np
import pytest

_BENCH = pathlib.Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def ideal_gaps():
    import sys
    sys.path.insert(0, str(_BENCH))
    try:
        spec = importlib.util.spec_from_file_location("bench_sync_replicas",
                                                      _BENCH / "bench_sync_replicas.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(_BENCH))
    return module.ideal_gaps


def test_equal_workers_update_once_per_step(ideal_gaps):
    assert ideal_gaps([[1.0], [1.0]], 2, 2, 10) == [1.0] * 10


def test_without_backups_the_slowest_worker_sets_the_pace(ideal_gaps):
    delays = [[1.0], [1.0], [10.0]]
    assert ideal_gaps(delays, 3, 3, 5) == [10.0] * 5


def test_one_backup_absorbs_a_steady_straggler(ideal_gaps):
    # The straggler's gradients are always stale, the two others make every update. Worked
    # out by hand: each update adds n = 3 tokens and the fast workers take two, so a token is
    # left over; at t = 3 worker 0 takes it (step 2, already done), its gradient at t = 4 is
    # stale, and update 4 waits until t = 5: TF's queue lets leftover tokens start stale work.
    delays = [[1.0], [1.0], [10.0]]
    gaps = ideal_gaps(delays, 2, 3, 20)
    assert gaps[:5] == [1.0, 1.0, 1.0, 2.0, 1.0]
    assert set(gaps) == {1.0, 2.0}


def test_a_late_worker_costs_the_update_it_is_waited_for(ideal_gaps):
    delays = [[1.0], [1.0], [5.0] + [1.0] * 15]  # worker 2 is slow on its first step only
    assert ideal_gaps(delays, 3, 3, 4) == [5.0, 1.0, 1.0, 1.0]
    assert max(ideal_gaps(delays, 2, 3, 8)) == 2.0


def test_a_backup_cuts_the_tail_of_heavy_tailed_steps(ideal_gaps):
    rng = np.random.default_rng(0)
    draws = [list(rng.pareto(1.5, 64) + 1) for _ in range(13)]
    base = ideal_gaps(draws, 12, 12, 200)
    backup = ideal_gaps(draws, 12, 13, 200)
    assert np.percentile(backup, 90) < 0.6 * np.percentile(base, 90)
    assert np.median(backup) < np.median(base)
