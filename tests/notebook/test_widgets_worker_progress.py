"""WorkerProgress: per-worker step counts, step times, dropped gradients, the straggler call,
throttled redraws, escaping, and records from several threads at once."""

import threading

import pytest
from test_widgets_throttle import FakeTime

from dflab.notebook import WorkerProgress
from dflab.notebook.worker_progress import STRAGGLER_RATIO, WINDOW, find_straggler


def make(workers=3, **kwargs):
    fake = FakeTime()
    return fake, WorkerProgress(workers, clock=fake.clock, schedule=fake.schedule, **kwargs)


def test_records_fold_into_each_workers_counts_times_and_stale_gradients():
    _, view = make(3, total_steps=10)
    for k in range(6):
        view.record(0, 0.010)
        view.record(1, 0.012, stale=k % 3 == 2)
    view.record(2, 0.5)
    s0, s1, s2 = (view.stats[f"worker {i}"] for i in range(3))
    assert (s0.steps, s0.stale, s1.steps, s1.stale, s2.steps) == (6, 0, 6, 2, 1)
    assert s1.median_s == pytest.approx(0.012) and s2.last_s == pytest.approx(0.5)
    assert list(s1.marks) == [False, False, True, False, False, True]
    view.flush()
    text = view._html.value
    assert "13 gradients, 2 dropped as stale" in text
    assert text.count("<tr") == 4  # the header and one row per worker
    assert "width:60%" in text  # worker 0: 6 of the 10 planned steps


def test_the_median_follows_the_latest_steps_only():
    _, view = make(1)
    for _ in range(WINDOW):
        view.record(0, 1.0)
    for _ in range(WINDOW // 2 + 1):
        view.record(0, 0.01)
    assert view.stats["worker 0"].median_s == pytest.approx(0.01)


def test_the_straggler_is_the_clearly_slowest_worker_and_only_then():
    _, view = make(3)
    for _ in range(5):
        view.record(0, 0.010)
        view.record(1, 0.010)
        view.record(2, 0.010 * STRAGGLER_RATIO * 0.99)
    assert view.straggler is None  # slowest, but not by the margin
    for _ in range(WINDOW):
        view.record(2, 0.050)
    assert view.straggler == "worker 2"
    view.flush()
    row = next(r for r in view._html.value.split("<tr") if "worker 2" in r)
    assert "straggler" in row and "background:#fff4e5" in row
    assert find_straggler({}) is None


def test_a_single_worker_or_untimed_workers_have_no_straggler():
    _, view = make(2)
    view.record(0, 5.0)
    assert view.straggler is None


def test_redraws_are_throttled_and_the_last_record_is_never_lost():
    fake, view = make(2, max_hz=4.0)
    drawn = []
    view._html.observe(lambda change: drawn.append(change["new"]), names="value")
    for k in range(200):  # 200 records in 0.2 s of fake time
        view.record(k % 2, 0.001)
        fake.advance(0.001)
    fake.advance(1.0)
    assert 1 <= len(drawn) <= 3
    assert "200 gradients" in view._html.value


def test_names_are_escaped_and_bad_workers_are_refused():
    _, view = make(["<b>w0</b>", "w1"], title="<script>")
    view.record("<b>w0</b>", 0.01)
    view.flush()
    text = view._html.value
    assert "&lt;b&gt;w0&lt;/b&gt;" in text and "<script>" not in text
    with pytest.raises(IndexError, match="workers 0..1"):
        view.record(2, 0.01)
    with pytest.raises(KeyError, match="no worker named 'w9'"):
        view.record("w9", 0.01)
    with pytest.raises(ValueError):
        WorkerProgress([])


def test_records_from_many_threads_are_all_counted():
    _, view = make(4)

    def work(i):
        for k in range(500):
            view.record(i, 0.001, stale=k % 5 == 0)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [s.steps for s in view.stats.values()] == [500] * 4
    assert [s.stale for s in view.stats.values()] == [100] * 4
