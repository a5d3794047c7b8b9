"""Benchmark 11: per-step coordination cost of a cluster (in-process transport).

A *null step* across 1 ps + N workers (N = 1, 2, 4): every task adds one to a scalar and
worker 0 sums them, so each step runs one partition per task and N + 1 cross-task transfers
but almost no arithmetic. It is timed on an in-process cluster (``tf.train.Server`` per task,
``tf.Session(server.target)``) and on the same graph in one session over N + 1 CPU devices,
which partitions it the same way: the ratio is what the cluster layer costs on top of
partitioning (target: <= 1.5x). For scale, the same ops on one device (no partitions, no
transfers) are timed too. The Ray transport is benchmark 12 (bench_ray.py).
"""

from __future__ import annotations

import _harness as h
import numpy as np
from threadpoolctl import threadpool_limits

import dflab as tf

TARGET_X = 1.5


def _null_step(tasks):
    """One scalar add per device in ``tasks``, summed on the first."""
    parts = []
    for device in tasks:
        with tf.device(device):
            parts.append(tf.constant(np.float32(1.0)) + 1.0)
    with tf.device(tasks[0]):
        return tf.add_n(parts)


def _cluster(n_workers):
    spec = tf.train.ClusterSpec({"ps": [f"bench-ps:{n_workers}"],
                                 "worker": [f"bench-w{i}:{n_workers}" for i in range(n_workers)]})
    servers = [tf.train.Server(spec, job_name="ps", task_index=0)]
    servers += [tf.train.Server(spec, job_name="worker", task_index=i) for i in range(n_workers)]
    return servers


def main() -> h.Result:
    args = h.parse_args(__doc__.splitlines()[0])
    result = h.Result("cluster", "11. Null step across 1 ps + N workers (in-process cluster)")
    ratios = {}
    with threadpool_limits(1):
        for n in (1, 2, 4):
            servers = _cluster(n)
            try:
                g = tf.Graph()
                with g.as_default():
                    step = _null_step(["/job:worker/task:0", "/job:ps/task:0"] +
                                      [f"/job:worker/task:{i}" for i in range(1, n)])
                cluster_sess = tf.Session(servers[1].target, graph=g)
                local = tf.Graph()
                with local.as_default():
                    local_step = _null_step([f"/cpu:{i}" for i in range(n + 1)])
                local_sess = tf.Session(graph=local,
                                        config=tf.ConfigProto(device_count={"CPU": n + 1}))
                flat = tf.Graph()
                with flat.as_default():
                    flat_step = _null_step(["/cpu:0"] * (n + 1))
                flat_sess = tf.Session(graph=flat)
                assert cluster_sess.run(step) == local_sess.run(local_step) == 2.0 * (n + 1)
                times = h.compare({
                    f"one process, 1 device ({n + 1} adds)":
                        lambda s=flat_sess, t=flat_step: s.run(t),
                    f"one process, {n + 1} devices": lambda s=local_sess, t=local_step: s.run(t),
                    f"cluster, 1 ps + {n} workers": lambda s=cluster_sess, t=step: s.run(t),
                }, repeat=h.repeats(args, 15))
                for sess in (cluster_sess, local_sess, flat_sess):
                    sess.close()
            finally:
                for s in servers:
                    s.stop()
            base = times[f"one process, {n + 1} devices"]
            for label, seconds in times.items():
                result.add(label, seconds * 1e6, "us/step", f"{seconds / base:.2f}x one process")
            ratios[n] = times[f"cluster, 1 ps + {n} workers"] / base
    worst = max(ratios.values())
    result.target = f"in-process cluster / one process <= {TARGET_X:g}x"
    result.measured = ", ".join(f"N={n}: {r:.2f}x" for n, r in ratios.items())
    result.met = worst <= TARGET_X
    h.report(result, args)
    return result


if __name__ == "__main__":
    main()
