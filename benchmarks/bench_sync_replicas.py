"""Benchmark 13: synchronous replication, measured like the paper, on both transports.

Every configuration runs on an in-process cluster and on the Ray transport (every task a Ray
actor of a local Ray instance; skipped when Ray is not installed), the two alternated run by
run so that a busy neighbour on a shared machine slows both alike (``DFLAB_BENCH_NO_RAY=1``
leaves Ray out; ``DFLAB_BENCH_PART=a`` or ``b`` runs one part). Workers are threads of this
process, each its own client graph (between-graph replication).

(a) The paper's null-model microbenchmark, scaled down: 1, 2 or 3 workers train with
``SyncReplicasOptimizer(m = n = workers)`` on a model whose gradient is free to compute, so a
step is only the synchronization: gradients to the accumulators on the ps, the chief's
update, the tokens back. Models: a scalar (1 ps); a dense 16 MB variable on 1 ps, and split in
two 8 MB shards over 2 ps tasks; a sparse lookup of 32 rows of an embedding table split over
2 ps tasks, for a 10 MB and a 100 MB table. Target (the paper's): the sparse step time does
not grow with the table (ratio 100 MB / 10 MB <= 1.5x), as only the touched rows move.

(b) Backup workers under stragglers, as in the paper's experiment: every update aggregates
``m`` gradients (m = 3, and m = 12, nearer the paper's 50), run by ``n = m + b`` workers for
b = 0..3 backup workers; each worker step is delayed by a seeded heavy-tailed draw (scale x
(1 + Pareto(1.5)); scale 10 ms in-process, on Ray 50 ms at m = 3 and 150 ms at m = 12, about
each transport's own null step or more; ``DFLAB_BENCH_REPLICAS=12`` runs one m). Median and
90th percentile of the time between updates, the share of computed gradients that no update
used (the late ones, dropped as stale), and the speedup per worker
(speedup x m / n, the paper's trade-off between faster steps and the extra workers). Beside
each, the *ideal*: the same protocol on the same draws with free coordination
(:func:`ideal_gaps`), what the straggler law allows any runtime. Target: at m = 12, one backup
worker cuts the median by >= 25%.
"""

from __future__ import annotations

import collections
import heapq
import os
import threading
import time
import uuid

import _harness as h
import numpy as np
from bench_convergence import start_ray
from threadpoolctl import threadpool_limits

import dflab as tf

STEPS_A = 24
STEPS_B = 40
M_B = tuple(int(m) for m in os.environ.get("DFLAB_BENCH_REPLICAS", "3,12").split(","))
PARETO_SHAPE = 1.5  # the stragglers' delays: scale x (1 + Pareto(shape)), heavy-tailed
IN_PROCESS, RAY = "in-process", "Ray"
# The delays' scale per transport and m: about the transport's own null step or more, so that
# the stragglers, not the coordination, set the pace (as for the paper's seconds-long steps).
# A Ray update of 12 gradients from 12-15 worker actors on two cores costs ~200 ms by itself.
DELAY_S = {(IN_PROCESS, 3): 0.01, (IN_PROCESS, 12): 0.01, (RAY, 3): 0.05, (RAY, 12): 0.15}
TABLE_MB = (10, 100)


def _cluster(n_workers, n_ps, transport):
    tag = uuid.uuid4().hex[:8]
    spec = tf.train.ClusterSpec({"ps": [f"b{tag}-ps{i}:0" for i in range(n_ps)],
                                 "worker": [f"b{tag}-w{i}:0" for i in range(n_workers)]})
    kw = {}
    if transport == RAY:
        kw = {"protocol": "ray", "config": tf.ConfigProto(dflab={"ray_namespace": f"b{tag}"})}
    tasks = [("ps", i) for i in range(n_ps)] + [("worker", i) for i in range(n_workers)]
    return spec, [tf.train.Server(spec, job_name=j, task_index=i, **kw) for j, i in tasks]


def _model(kind, table_rows):
    """A loss whose gradient costs nothing to compute (the variable itself or its rows)."""
    if kind == "scalar":
        w = tf.get_variable("w", [], initializer=tf.zeros_initializer())
        return w * 1.0
    if kind in ("dense", "dense2"):
        split = tf.fixed_size_partitioner(2) if kind == "dense2" else None
        w = tf.get_variable("w", [4 * 1024 * 1024], initializer=tf.zeros_initializer(),
                            partitioner=split)
        return tf.reduce_sum(tf.convert_to_tensor(w))
    table = tf.get_variable("table", [table_rows, 64], initializer=tf.zeros_initializer(),
                            partitioner=tf.fixed_size_partitioner(2))
    ids = tf.constant(np.arange(0, table_rows, table_rows // 32)[:32])
    return tf.reduce_sum(tf.nn.embedding_lookup(table, ids, partition_strategy="div"))


def _replica(job, index):
    """One worker's client: build, train until ``job['steps']`` updates, count its gradients."""
    g = tf.Graph()
    with g.as_default():
        with tf.device(tf.train.replica_device_setter(
                cluster=job["spec"], worker_device=f"/job:worker/task:{index}")):
            gs = tf.train.get_or_create_global_step()
            loss = _model(job["kind"], job["rows"])
            opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.01),
                                                 job["m"], job["n"])
            train = opt.minimize(loss, global_step=gs)
            stop_tokens = opt._sync_token_queue.close(cancel_pending_enqueues=True)
            gs_now = tf.identity(gs)
        hooks = [opt.make_session_run_hook(is_chief=index == 0),
                 tf.train.StopAtStepHook(last_step=job["steps"])]
        with tf.train.MonitoredTrainingSession(
                master=job["servers"][-job["n"] + index].target, is_chief=index == 0,
                hooks=hooks, stop_grace_period_secs=2, log_step_count_steps=0,
                config=tf.ConfigProto(operation_timeout_in_ms=120000)) as s:
            job["barrier"].wait(300)
            if index == 0:
                _watch_updates(s, gs_now, job)
            delays = job["delays"]
            k = 0
            try:
                while not s.should_stop():
                    if delays is not None:
                        time.sleep(delays[index][k % len(delays[index])])
                    s.run(train)
                    k += 1
            except tf.errors.OutOfRangeError:
                pass
            job["gradients"][index] = k
            s.run(stop_tokens)


def _watch_updates(sess, gs_now, job) -> None:
    """A thread polling the global step (every 0.2 ms, or 1 ms on Ray, where a read is an actor
    call): when each update landed."""
    raw = sess.raw_session() if hasattr(sess, "raw_session") else sess
    pause = 0.001 if job["transport"] == RAY else 0.0002

    def watch():
        last = 0
        while last < job["steps"]:
            try:
                step = int(raw.run(gs_now))
            except Exception:  # noqa: BLE001 - the session ended
                return
            if step > last:
                job["updates"].append((step, time.perf_counter()))
                last = step
            time.sleep(pause)

    threading.Thread(target=watch, daemon=True).start()


def _run(transport, n, m, kind, table_rows=0, delays=None, steps=STEPS_A) -> dict:
    """Seconds between successive updates seen by the chief (the first three dropped) and the
    gradients every worker computed."""
    n_ps = 2 if kind in ("sparse", "dense2") else 1
    spec, servers = _cluster(n, n_ps, transport)
    job = {"spec": spec, "servers": servers, "kind": kind, "rows": table_rows, "m": m, "n": n,
           "steps": steps, "delays": delays, "transport": transport, "updates": [],
           "gradients": {}, "barrier": threading.Barrier(n)}
    h.run_workers(n, lambda i: _replica(job, i), servers)
    gaps = np.diff([t for _, t in job["updates"]])
    return {"gaps": list(gaps[3:]) if len(gaps) > 6 else list(gaps),
            "gradients": sum(job["gradients"].values()), "updates": len(job["updates"])}


def ideal_gaps(delays, m, n, updates):
    """Times between updates of ``SyncReplicasOptimizer(m, n)`` when coordination is free and
    worker ``w``'s k-th step takes ``delays[w][k % len]``: TF's token protocol replayed as
    events. The chief starts the queue with m tokens and adds n tokens of the new global step
    at each update; a worker takes a token (waiting while there is none), computes, and its
    gradient counts only if its token's step is still the global step. A late worker is not
    interrupted, so a straggler's stale step delays its next one: why a backup worker buys
    less than the order statistics of one step's draws suggest."""
    tokens = collections.deque([0] * m)
    events, idle, done = [], [], [0] * n
    step, fresh, times = 0, 0, [0.0]

    def start(w, t):
        d = delays[w][done[w] % len(delays[w])]
        done[w] += 1
        heapq.heappush(events, (t + d, w, tokens.popleft()))

    for w in range(n):
        start(w, 0.0) if tokens else idle.append(w)
    while step < updates:
        t, w, token = heapq.heappop(events)
        fresh += token == step
        if fresh == m:
            step, fresh = step + 1, 0
            times.append(t)
            tokens.extend([step] * n)
            for v in idle:
                start(v, t)
            idle = []
        start(w, t) if tokens else idle.append(w)
    return list(np.diff(times))


def _label(kind, rows):
    if kind == "sparse":
        return f"sparse 32 rows of {rows * 256 // (1024 * 1024)} MB, 2 ps"
    return {"scalar": "scalar, 1 ps", "dense": "dense 16 MB, 1 ps",
            "dense2": "dense 16 MB in 2 shards, 2 ps"}[kind]


def _part_a(result, args, transports):
    cases = [("scalar", 0), ("dense", 0), ("dense2", 0)]
    cases += [("sparse", mb * 1024 * 1024 // 256) for mb in TABLE_MB]
    workers = (1, 2) if args.quick else (1, 2, 3)
    rounds = 1 if args.quick else 2
    gaps = {(t, kind, rows, n): [] for t in transports for kind, rows in cases for n in workers}
    for _ in range(rounds):  # every configuration once per round: a busy spell hits all alike
        for kind, rows in cases:
            for n in workers:
                for t in transports:
                    gaps[(t, kind, rows, n)] += _run(t, n, n, kind, rows)["gaps"]
    medians = {key: float(np.median(g)) for key, g in gaps.items()}
    for kind, rows in cases:
        for n in workers:
            local = medians[(IN_PROCESS, kind, rows, n)]
            note = "" if len(transports) < 2 else (
                f"Ray {medians[(RAY, kind, rows, n)] * 1e3:.1f} ms "
                f"({medians[(RAY, kind, rows, n)] / local:.1f}x)")
            result.add(f"{_label(kind, rows)}, {n} worker(s)", local * 1e3, "ms/step", note)
    return medians


def _part_b(result, args, transports, rng):
    backups = (0, 1, 2, 3)
    rounds = 1 if args.quick else 3
    stats = {}
    for m in M_B:
        runs = {(t, b): [] for t in transports for b in backups}
        ideal = {b: [] for b in backups}
        for _ in range(rounds):
            # Fresh seeded draws each round; within a round every configuration gets the same.
            draws = [list(rng.pareto(PARETO_SHAPE, 64) + 1) for _ in range(m + max(backups))]
            for b in backups:
                ideal[b] += ideal_gaps(draws, m, m + b, STEPS_B)[3:]
                for t in transports:
                    delays = [[DELAY_S[(t, m)] * d for d in worker] for worker in draws]
                    runs[(t, b)].append(_run(t, m + b, m, "scalar", delays=delays,
                                             steps=STEPS_B))
        for t in transports:
            for b in backups:
                stats[(t, m, b)] = _backup_stats(runs[(t, b)], m, ideal[b], DELAY_S[(t, m)])
            _report_backups(result, stats, t, m, backups)
    return stats


def _backup_stats(runs, m, ideal, scale) -> dict:
    gaps = [g for r in runs for g in r["gaps"]]
    computed = sum(r["gradients"] for r in runs)
    used = sum(m * r["updates"] for r in runs)
    return {"median": float(np.median(gaps)), "p90": float(np.percentile(gaps, 90)),
            "dropped": max(0, computed - used) / computed,
            "ideal_median": float(np.median(ideal)) * scale,
            "ideal_p90": float(np.percentile(ideal, 90)) * scale}


def _report_backups(result, stats, t, m, backups) -> None:
    base, ideal_base = stats[(t, m, 0)]["median"], stats[(t, m, 0)]["ideal_median"]
    for b in backups:
        s = stats[(t, m, b)]
        speedup = base / s["median"]
        result.add(f"{t}: m={m} of n={m + b} workers ({b} backup)", s["median"] * 1e3,
                   "ms/step", f"p90 {s['p90'] * 1e3:.1f} ms; {s['dropped'] * 100:.0f}% of "
                              f"gradients unused; speedup {speedup:.2f}x, per worker "
                              f"{speedup * m / (m + b):.2f}x; ideal {s['ideal_median'] * 1e3:.0f}"
                              f" / {s['ideal_p90'] * 1e3:.0f} ms, cut "
                              f"{(1 - s['ideal_median'] / ideal_base) * 100:.0f}%")


def main() -> h.Result:
    args = h.parse_args(__doc__.splitlines()[0])
    result = h.Result("sync_replicas", "13. Synchronous replication: null model step time, "
                                       "backup workers under stragglers")
    ray = start_ray(result)
    transports = (IN_PROCESS, RAY) if ray is not None else (IN_PROCESS,)
    parts = os.environ.get("DFLAB_BENCH_PART", "ab")
    medians = backups = None
    try:
        with threadpool_limits(1):
            if "a" in parts:
                medians = _part_a(result, args, transports)
            if "b" in parts:
                backups = _part_b(result, args, transports, np.random.default_rng(0))
    finally:
        if ray is not None:
            ray.shutdown()
    _judge(result, args, transports, medians, backups)
    h.report(result, args)
    return result


def _judge(result, args, transports, medians, backups) -> None:
    """The targets of the parts that ran."""
    targets, measured, met = [], [], True
    if medians is not None:
        n = 2 if args.quick else 3
        small, big = (mb * 1024 * 1024 // 256 for mb in TABLE_MB)
        sparse = {t: medians[(t, "sparse", big, n)] / medians[(t, "sparse", small, n)]
                  for t in transports}
        targets.append("sparse step 100 MB / 10 MB table <= 1.5x")
        measured += [f"{t}: sparse {sparse[t]:.2f}x" for t in transports]
        met = all(v <= 1.5 for v in sparse.values())
    if backups is not None:
        m = max(M_B)

        def cut(t, b, m=m):
            return 1 - backups[(t, m, b)]["median"] / backups[(t, m, 0)]["median"]

        targets.append(f"at m = {m}, one backup worker cuts the median step >= 25%")
        measured += [f"{t}: one backup {cut(t, 1) * 100:.0f}% (2 backups "
                     f"{cut(t, 2) * 100:.0f}%, 3 backups {cut(t, 3) * 100:.0f}%"
                     + "".join(f"; at m = {k}: {cut(t, 1, k) * 100:.0f}%" for k in M_B if k != m)
                     + ")" for t in transports]
        met = met and all(cut(t, 1) >= 0.25 for t in transports)
    result.target, result.measured, result.met = "; ".join(targets), "; ".join(measured), met


if __name__ == "__main__":
    main()
