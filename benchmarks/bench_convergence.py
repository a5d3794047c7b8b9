"""Benchmark 16: asynchronous against synchronous training, loss vs steps and vs wall time.

A small real problem, seeded so that every run sees the same data: a synthetic set shaped like
scikit-learn's digits (64 features, 10 classes, Gaussian classes with overlapping means;
4,000 training and 1,000 held-out examples), learned by a 64-32-10 ReLU network whose
variables live on one ps task. Three workers (threads of this process, one client graph each:
between-graph replication) each compute the same number of gradients on batches of 32 from
their own shard of the data:

* **async**: each worker applies its gradient as soon as it has it (plain
  ``GradientDescentOptimizer``), so every gradient is one update, computed on parameters that
  other workers may have changed meanwhile;
* **sync**: ``SyncReplicasOptimizer(m = n = 3)``, so every update is the mean of one gradient
  per worker, and each worker waits for the update before its next step.

A watcher thread reads the global step and the parameters every 10 ms while training runs;
the held-out loss of each snapshot is computed afterwards with NumPy, so measuring costs the
training almost nothing. Reported: the held-out loss after the same number of updates and
after the same wall time, the time to come within 20% of the best final loss seen on the
transport, and the final loss. Runs on the
in-process cluster and on Ray (when installed and not left out with ``DFLAB_BENCH_NO_RAY=1``),
modes and transports alternated run by run.
No target: the paper's point is the trade-off (async: more updates a second, each from
staler parameters; sync: fewer, better updates), which the table shows.
"""

from __future__ import annotations

import os
import threading
import time
import uuid

import _harness as h
import numpy as np
from threadpoolctl import threadpool_limits

import dflab as tf

WORKERS = 3
BATCH = 32
LEARNING_RATE = 0.1
TARGET_OVER_BEST = 1.2  # "converged": within 20% of the best final loss on the transport
SNAPSHOT_S = 0.01
FEATURES, CLASSES, HIDDEN = 64, 10, 32
IN_PROCESS, RAY = "in-process", "Ray"
MODES = ("async", "sync")


def make_data(seed: int = 0):
    """A digits-like classification set: (x_train, y_train, x_test, y_test), float32/int64."""
    rng = np.random.default_rng(seed)
    means = rng.normal(0.0, 1.0, (CLASSES, FEATURES)).astype(np.float32)

    def draw(count):
        y = rng.integers(0, CLASSES, count)
        x = means[y] + rng.normal(0.0, 3.0, (count, FEATURES)).astype(np.float32)
        return x.astype(np.float32), y.astype(np.int64)

    return (*draw(4000), *draw(1000))


def heldout_loss(params: dict, x: np.ndarray, y: np.ndarray) -> float:
    """Mean softmax cross-entropy of the network with ``params`` on (x, y), in NumPy."""
    hidden = np.maximum(x @ params["w1"] + params["b1"], 0.0)
    logits = hidden @ params["w2"] + params["b2"]
    logits = logits - logits.max(axis=1, keepdims=True)
    log_p = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    return float(-log_p[np.arange(len(y)), y].mean())


def _network(x):
    init = tf.glorot_uniform_initializer(seed=3)
    params = {"w1": tf.get_variable("w1", [FEATURES, HIDDEN], initializer=init),
              "b1": tf.get_variable("b1", [HIDDEN], initializer=tf.zeros_initializer()),
              "w2": tf.get_variable("w2", [HIDDEN, CLASSES], initializer=init),
              "b2": tf.get_variable("b2", [CLASSES], initializer=tf.zeros_initializer())}
    hidden = tf.nn.relu(tf.matmul(x, params["w1"]) + params["b1"])
    return params, tf.matmul(hidden, params["w2"]) + params["b2"]


def _cluster(transport):
    tag = uuid.uuid4().hex[:8]
    spec = tf.train.ClusterSpec({"ps": [f"c{tag}-ps:0"],
                                 "worker": [f"c{tag}-w{i}:0" for i in range(WORKERS)]})
    kw = {}
    if transport == RAY:
        kw = {"protocol": "ray", "config": tf.ConfigProto(dflab={"ray_namespace": f"c{tag}"})}
    tasks = [("ps", 0)] + [("worker", i) for i in range(WORKERS)]
    return spec, [tf.train.Server(spec, job_name=j, task_index=i, **kw) for j, i in tasks]


def _replica(job, index):
    """One worker's client: ``job['steps']`` gradients on its shard, async or sync."""
    sync = job["mode"] == "sync"
    g = tf.Graph()
    with g.as_default():
        with tf.device(tf.train.replica_device_setter(
                cluster=job["spec"], worker_device=f"/job:worker/task:{index}")):
            gs = tf.train.get_or_create_global_step()
            x = tf.placeholder(tf.float32, [None, FEATURES])
            y = tf.placeholder(tf.int64, [None])
            params, logits = _network(x)
            loss = tf.reduce_mean(
                tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
            opt = tf.train.GradientDescentOptimizer(LEARNING_RATE)
            if sync:
                opt = tf.train.SyncReplicasOptimizer(opt, WORKERS, WORKERS)
            train = opt.minimize(loss, global_step=gs)
            stop_tokens = opt._sync_token_queue.close(cancel_pending_enqueues=True) \
                if sync else None
            watched = {"step": tf.identity(gs)} | {k: tf.identity(v) for k, v in params.items()}
        hooks = [opt.make_session_run_hook(is_chief=index == 0)] if sync else []
        if sync:
            hooks.append(tf.train.StopAtStepHook(last_step=job["steps"]))
        xs, ys = job["shards"][index]
        rng = np.random.default_rng(100 + index)
        with tf.train.MonitoredTrainingSession(
                master=job["servers"][1 + index].target, is_chief=index == 0, hooks=hooks,
                stop_grace_period_secs=2, log_step_count_steps=0,
                config=tf.ConfigProto(operation_timeout_in_ms=120000)) as s:
            job["barrier"].wait(300)
            if index == 0:
                job["start"] = time.perf_counter()
                _watch(s, watched, job)
            k = 0
            try:
                while (sync or k < job["steps"]) and not s.should_stop():
                    pick = rng.integers(0, len(ys), BATCH)
                    s.run(train, {x: xs[pick], y: ys[pick]})
                    k += 1
            except tf.errors.OutOfRangeError:
                pass  # sync: the chief reached the last step and closed the token queue
            if sync:  # release the replicas still waiting for a token
                s.run(stop_tokens)
            if index != 0:
                job["done"].set()
                return
            job["done"].wait(300)
            job["stop"].set()
            job["watcher"].join(30)


def _watch(sess, watched, job) -> None:
    """Snapshot (time, global step, parameters) every SNAPSHOT_S until training ends."""
    raw = sess.raw_session() if hasattr(sess, "raw_session") else sess

    def watch():
        while True:
            try:
                values = raw.run(watched)
            except Exception:  # noqa: BLE001 - the session ended
                return
            job["snapshots"].append((time.perf_counter() - job["start"], values))
            if job["stop"].is_set():
                return
            time.sleep(SNAPSHOT_S)

    job["watcher"] = threading.Thread(target=watch, daemon=True)
    job["watcher"].start()


def _train(transport, mode, steps, data) -> list:
    """[(seconds since start, global step, held-out loss)] of one training run."""
    x_train, y_train, x_test, y_test = data
    shards = [(x_train[i::WORKERS], y_train[i::WORKERS]) for i in range(WORKERS)]
    spec, servers = _cluster(transport)
    done = threading.Event()
    job = {"spec": spec, "servers": servers, "mode": mode, "steps": steps, "shards": shards,
           "barrier": threading.Barrier(WORKERS), "snapshots": [], "stop": threading.Event(),
           "done": _AllDone(WORKERS - 1, done)}
    h.run_workers(WORKERS, lambda i: _replica(job, i), servers, on_failure=job["done"].set)
    return [(t, int(v["step"]), heldout_loss(v, x_test, y_test)) for t, v in job["snapshots"]]


class _AllDone:
    """The chief waits for the other workers' loops to end before it stops the watcher (async
    workers each run their own number of steps; the chief may finish first)."""

    def __init__(self, others: int, event: threading.Event):
        self._left, self._event, self._lock = others, event, threading.Lock()
        if others == 0:
            event.set()

    def set(self) -> None:
        with self._lock:
            self._left -= 1
            if self._left <= 0:
                self._event.set()

    def wait(self, timeout: float) -> bool:
        return self._event.wait(timeout)


def start_ray(result: h.Result, tries: int = 4):
    """A local Ray instance (2 CPUs, no dashboard), or None, said in the result's notes, when
    Ray is not installed or does not start (a loaded machine can time its start-up out), or
    when ``$DFLAB_BENCH_NO_RAY`` is set (the in-process columns alone, in minutes)."""
    if os.environ.get("DFLAB_BENCH_NO_RAY"):
        result.notes.append("Ray skipped ($DFLAB_BENCH_NO_RAY): in-process transport only")
        return None
    try:
        import ray
    except ImportError:
        result.notes.append("Ray is not installed: in-process transport only")
        return None
    for attempt in range(tries):
        try:
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                     object_store_memory=512 * 1024 * 1024, configure_logging=False)
            return ray
        except Exception as e:  # noqa: BLE001 - Ray raises a bare Exception on a timeout
            error = e
            ray.shutdown()
            time.sleep(5 * (attempt + 1))
    result.notes.append(f"Ray did not start ({error}): in-process transport only")
    return None


def _at_step(curve, step):
    """Held-out loss of the first snapshot at or past global step ``step`` (None if never)."""
    return next((loss for _, s, loss in curve if s >= step), None)


def _at_time(curve, seconds):
    """Held-out loss of the last snapshot taken by ``seconds`` (None if none yet)."""
    before = [loss for t, _, loss in curve if t <= seconds]
    return before[-1] if before else None


def _time_to(curve, loss):
    return next((t for t, _, value in curve if value <= loss), None)


def _median(values):
    values = [v for v in values if v is not None]
    return float(np.median(values)) if values else None


def main() -> h.Result:
    args = h.parse_args(__doc__.splitlines()[0])
    result = h.Result("convergence", "16. Async vs sync training of a 64-32-10 network on 3 "
                                     "workers: held-out loss vs updates and vs wall time")
    data = make_data()
    steps = 60 if args.quick else 300  # gradients per worker
    rounds = 1 if args.quick else 3
    ray = start_ray(result)
    transports = (IN_PROCESS, RAY) if ray is not None else (IN_PROCESS,)
    curves = {(t, m): [] for t in transports for m in MODES}
    try:
        with threadpool_limits(1):
            for _ in range(rounds):
                for t in transports:
                    for mode in MODES:
                        curves[(t, mode)].append(_train(t, mode, steps, data))
    finally:
        if ray is not None:
            ray.shutdown()
    first = heldout_loss_at_start(curves)
    result.notes.append(f"held-out loss before training: {first:.3f}")
    marks = [steps // 6, steps // 2, steps]
    reach = {}
    for t in transports:
        goal = TARGET_OVER_BEST * min(c[-1][2] for m in MODES for c in curves[(t, m)])
        result.notes.append(f"{t}: converged = held-out loss <= {goal:.3f} "
                            f"({TARGET_OVER_BEST:g}x the best final loss)")
        for mode in MODES:
            runs = curves[(t, mode)]
            wall = _median([c[-1][0] for c in runs])
            updates = _median([c[-1][1] for c in runs])
            for s in marks:
                result.add(f"{t} {mode}: loss after {s} updates",
                           _median([_at_step(c, s) for c in runs]), "")
            for secs in _time_marks(curves, t):
                result.add(f"{t} {mode}: loss after {secs:g} s",
                           _median([_at_time(c, secs) for c in runs]), "")
            times = [_time_to(c, goal) for c in runs]
            reach[(t, mode)] = _median(times) if None not in times else None
            result.add(f"{t} {mode}: time to converge", reach[(t, mode)], "s",
                       "" if reach[(t, mode)] is not None else "not reached in every run")
            result.add(f"{t} {mode}: final loss", _median([c[-1][2] for c in runs]), "",
                       f"{updates:.0f} updates in {wall:.2f} s "
                       f"({updates / wall:.0f} updates/s)")
    result.target = "reported (no target): loss vs updates and vs wall time, async and sync"
    result.measured = "; ".join(
        f"{t}: time to converge async {_fmt_s(reach[(t, 'async')])}, "
        f"sync {_fmt_s(reach[(t, 'sync')])}" for t in transports)
    h.report(result, args)
    return result


def heldout_loss_at_start(curves) -> float:
    """The loss of the very first snapshot (the seeded initial parameters, the same for all)."""
    return _median([c[0][2] for runs in curves.values() for c in runs])


def _time_marks(curves, transport):
    """Three wall times, fractions of the slower mode's median run on ``transport``."""
    longest = max(_median([c[-1][0] for c in curves[(transport, m)]]) for m in MODES)
    return [round(longest * f, 2) for f in (0.1, 0.3, 0.6)]


def _fmt_s(seconds):
    return "not reached" if seconds is None else f"{seconds:.2f} s"


if __name__ == "__main__":
    main()
