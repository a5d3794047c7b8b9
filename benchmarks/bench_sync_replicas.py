"""Benchmark 13: synchronous replication on an in-process cluster, measured like the paper.

(a) The paper's null-model microbenchmark, scaled down: workers (1, 2, 3; threads of this
process, each its own client graph, between-graph replication) train with
``SyncReplicasOptimizer(m = n = workers)`` on a model whose gradient is free to compute, so a
step is only the synchronization: gradients to the accumulators on the ps, the chief's
update, the tokens back. Three models: a scalar, a dense 16 MB variable, and a sparse lookup
of 32 rows of an embedding table split over 2 ps tasks, for a 10 MB and a 100 MB table.
Target (the paper's): the sparse step time does not grow with the table (ratio 100 MB / 10 MB
<= 1.5x), as only the touched rows move.

(b) Backup workers under stragglers: 4 workers, each step delayed by a seeded heavy-tailed
draw (Pareto, 5 ms scale), synchronous updates of ``m = 4 - b`` gradients for b = 0..2 backup
workers; median and 90th-percentile time between updates. Target: one backup worker cuts the
median by >= 25%.
"""

from __future__ import annotations

import threading
import time

import _harness as h
import numpy as np
from threadpoolctl import threadpool_limits

import dflab as tf

STEPS = 24


def _cluster(n_workers, n_ps, tag):
    spec = tf.train.ClusterSpec({"ps": [f"{tag}-ps{i}:0" for i in range(n_ps)],
                                 "worker": [f"{tag}-w{i}:0" for i in range(n_workers)]})
    servers = [tf.train.Server(spec, job_name="ps", task_index=i) for i in range(n_ps)]
    servers += [tf.train.Server(spec, job_name="worker", task_index=i) for i in range(n_workers)]
    return spec, servers


def _model(kind, table_rows):
    """A loss whose gradient costs nothing to compute (the variable itself or its rows)."""
    if kind == "scalar":
        w = tf.get_variable("w", [], initializer=tf.zeros_initializer())
        return w * 1.0
    if kind == "dense":
        w = tf.get_variable("w", [4 * 1024 * 1024], initializer=tf.zeros_initializer())
        return tf.reduce_sum(w)
    table = tf.get_variable("table", [table_rows, 64], initializer=tf.zeros_initializer(),
                            partitioner=tf.fixed_size_partitioner(2))
    ids = tf.constant(np.arange(0, table_rows, table_rows // 32)[:32])
    return tf.reduce_sum(tf.nn.embedding_lookup(table, ids, partition_strategy="div"))


def _replica(spec, server, index, n, m, kind, table_rows, delays, barrier, out):
    g = tf.Graph()
    with g.as_default():
        with tf.device(tf.train.replica_device_setter(
                cluster=spec, worker_device=f"/job:worker/task:{index}")):
            gs = tf.train.get_or_create_global_step()
            loss = _model(kind, table_rows)
            opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.01), m, n)
            train = opt.minimize(loss, global_step=gs)
            stop_tokens = opt._sync_token_queue.close(cancel_pending_enqueues=True)
            gs_now = tf.identity(gs)
        hooks = [opt.make_session_run_hook(is_chief=index == 0),
                 tf.train.StopAtStepHook(last_step=STEPS)]
        with tf.train.MonitoredTrainingSession(
                master=server.target, is_chief=index == 0, hooks=hooks,
                stop_grace_period_secs=2, log_step_count_steps=0,
                config=tf.ConfigProto(operation_timeout_in_ms=120000)) as s:
            barrier.wait(120)
            if index == 0:
                _watch_updates(s, gs_now, out)
            try:
                k = 0
                while not s.should_stop():
                    if delays is not None:
                        time.sleep(delays[index][k % len(delays[index])])
                    s.run(train)
                    k += 1
            except tf.errors.OutOfRangeError:
                pass
            s.run(stop_tokens)


def _watch_updates(sess, gs_now, out) -> None:
    """A thread reading the global step every 0.2 ms: when each update landed."""
    raw = sess.raw_session() if hasattr(sess, "raw_session") else sess
    out["updates"] = []

    def watch():
        last = 0
        while last < STEPS:
            try:
                step = int(raw.run(gs_now))
            except Exception:  # noqa: BLE001 - the session ended
                return
            if step > last:
                out["updates"].append((step, time.perf_counter()))
                last = step
            time.sleep(0.0002)

    threading.Thread(target=watch, daemon=True).start()


def _run(n, m, kind, table_rows=0, delays=None) -> list:
    """Seconds between successive updates seen by the chief (the first few dropped)."""
    spec, servers = _cluster(n, 2 if kind == "sparse" else 1, f"{kind}{n}{m}{table_rows}")
    out, failures, barrier = {}, [], threading.Barrier(n)

    def run(i):
        try:
            _replica(spec, servers[-n + i], i, n, m, kind, table_rows, delays, barrier, out)
        except BaseException as e:  # noqa: BLE001 - re-raised below
            failures.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(600)
    finally:
        for s in servers:
            s.stop()
    if failures:
        raise failures[0]
    times = [t for _, t in out["updates"]]
    gaps = np.diff(times)
    return list(gaps[3:]) if len(gaps) > 6 else list(gaps)


def _part_a(result, args):
    cases = [("scalar", 0), ("dense", 0), ("sparse", 10 * 1024 * 1024 // 256),
             ("sparse", 100 * 1024 * 1024 // 256)]
    medians = {}
    for kind, rows in cases:
        label = {"scalar": "scalar", "dense": "dense 16 MB"}.get(
            kind, f"sparse 32 rows of {rows * 256 // (1024 * 1024)} MB")
        for n in ((1, 2, 3) if not args.quick else (1, 2)):
            med = float(np.median(_run(n, n, kind, rows)))
            medians[(label, n)] = med
            result.add(f"{label}, {n} worker(s)", med * 1e3, "ms/step")
    return medians


def _part_b(result, args, rng):
    n = 4
    draws = [list(0.005 * (rng.pareto(2.0, 64) + 1)) for _ in range(n)]
    stats = {}
    for backups in (0, 1, 2):
        gaps = _run(n, n - backups, "scalar", delays=draws)
        med, p90 = float(np.median(gaps)), float(np.percentile(gaps, 90))
        stats[backups] = med
        result.add(f"4 workers, {backups} backup", med * 1e3, "ms/step",
                   f"p90 {p90 * 1e3:.1f} ms")
    return stats


def main() -> h.Result:
    args = h.parse_args(__doc__.splitlines()[0])
    result = h.Result("sync_replicas", "13. Synchronous replication: null model step time, "
                                       "backup workers under stragglers")
    with threadpool_limits(1):
        medians = _part_a(result, args)
        backups = _part_b(result, args, np.random.default_rng(0))
    n = 2 if args.quick else 3
    sparse = medians[("sparse 32 rows of 100 MB", n)] / medians[("sparse 32 rows of 10 MB", n)]
    cut = 1 - backups[1] / backups[0]
    result.target = ("sparse step 100 MB / 10 MB table <= 1.5x; one backup worker cuts the "
                     "median step >= 25%")
    result.measured = f"{sparse:.2f}x; {cut * 100:.0f}% (two backups: " \
                      f"{(1 - backups[2] / backups[0]) * 100:.0f}%)"
    result.met = sparse <= 1.5 and cut >= 0.25
    h.report(result, args)
    return result


if __name__ == "__main__":
    main()
