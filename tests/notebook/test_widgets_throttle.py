"""The throttle shared by the live widgets: rate limit, batching, nothing lost (fake clock)."""

import threading

import pytest

from dflab.notebook._throttle import Throttle


class FakeTime:
    """A clock and a scheduler that only move when the test says so."""

    def __init__(self):
        self.now = 100.0
        self.timers = []  # [due, fn, cancelled]

    def clock(self):
        return self.now

    def schedule(self, delay, fn):
        timer = FakeTimer(self, self.now + delay, fn)
        self.timers.append(timer)
        return timer

    def advance(self, seconds):
        end = self.now + seconds
        while True:
            due = [x for x in self.timers if not x.cancelled and x.due <= end]
            if not due:
                break
            first = min(due, key=lambda x: x.due)
            self.timers.remove(first)
            self.now = first.due
            first.fn()
        self.now = end


class FakeTimer:
    def __init__(self, fake, due, fn):
        self.due, self.fn, self.cancelled = due, fn, False

    def cancel(self):
        self.cancelled = True


def make(max_hz=30.0):
    fake = FakeTime()
    batches = []
    throttle = Throttle(batches.append, max_hz, clock=fake.clock, schedule=fake.schedule)
    return fake, throttle, batches


def test_first_push_is_delivered_at_once():
    fake, throttle, batches = make()
    throttle.push("a")
    assert batches == [["a"]]
    assert fake.timers == []


def test_a_burst_is_batched_into_one_deferred_flush_at_the_interval():
    fake, throttle, batches = make(max_hz=30)
    throttle.push(0)
    for i in range(1, 100):  # 99 more pushes within the same instant
        throttle.push(i)
    assert batches == [[0]]
    assert len([t for t in fake.timers if not t.cancelled]) == 1  # one timer, not 99
    fake.advance(1 / 30 - 1e-6)
    assert len(batches) == 1  # not before the interval is over
    fake.advance(2e-6)
    assert batches[1] == list(range(1, 100))  # every item, in order, in one batch


def test_rate_never_exceeds_max_hz_under_a_steady_stream():
    fake, throttle, batches = make(max_hz=30)
    flush_times = []
    throttle._flush = lambda batch: (flush_times.append(fake.now), batches.append(batch))
    pushed = 0
    for _ in range(10_000):  # 1000 pushes a second for 10 s
        throttle.push(pushed)
        pushed += 1
        fake.advance(0.001)
    fake.advance(1.0)
    gaps = [b - a for a, b in zip(flush_times, flush_times[1:])]
    assert min(gaps) >= 1 / 30 - 1e-9
    assert 295 <= len(flush_times) <= 301  # ~30 per second over 10 s
    delivered = [x for b in batches for x in b]
    assert delivered == list(range(pushed))  # nothing lost, nothing duplicated


def test_slow_pushes_are_each_delivered_immediately():
    fake, throttle, batches = make(max_hz=30)
    for i in range(5):
        throttle.push(i)
        fake.advance(0.5)
    assert batches == [[0], [1], [2], [3], [4]]
    assert throttle.flushes == 5


def test_flush_delivers_pending_now_and_cancels_the_timer():
    fake, throttle, batches = make()
    throttle.push(1)
    throttle.push(2)
    throttle.push(3)
    throttle.flush()
    assert batches == [[1], [2, 3]]
    assert throttle.pending == 0
    fake.advance(1.0)
    assert batches == [[1], [2, 3]]  # the cancelled timer delivers nothing again
    throttle.flush()
    assert len(batches) == 2  # nothing pending: no empty batch


def test_invalid_rate_is_rejected():
    with pytest.raises(ValueError, match="max_hz"):
        Throttle(lambda b: None, 0)


def test_real_timer_delivers_the_tail_of_a_burst():
    done = threading.Event()
    batches = []

    def flush(batch):
        batches.append(batch)
        if sum(map(len, batches)) == 50:
            done.set()

    throttle = Throttle(flush, max_hz=50)
    for i in range(50):
        throttle.push(i)
    assert done.wait(5), batches
    assert [x for b in batches for x in b] == list(range(50))
    assert len(batches) == 2
