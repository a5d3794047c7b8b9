"""Benchmark 12: the Ray transport — per-step coordination cost and a 64 MB transfer.

(a) The null step of benchmark 11 (one scalar add per task, summed on worker 0) across 1 ps +
N workers (N = 1, 2, 4), every task a Ray actor of a local Ray instance, timed from the
client against the same graph on an in-process cluster: what a step's Ray calls (one
``run_step`` per task, one pull per cross-task tensor, the step's cleanup) cost.

(b) A 64 MB float32 tensor held by one task (a variable on the ps) pulled by another (worker
0, which returns one element of it), against raw Ray doing the same: one actor returning
the array, another ``ray.get``-ing it and returning one element. Both move the array through
Ray's object store once; the ratio is raw time / dflab time (target: >= 0.8x raw Ray).

For scale, raw Ray's own floor is timed alongside: one call to an async actor (as each task's
actor is), and a call to an actor that itself calls another and awaits it, which is the
least a step in which one task pulls a tensor from another can cost.

Needs ``pip install dflab[ray]``; starts (and stops) its own local Ray instance.
"""

from __future__ import annotations

import uuid

import _harness as h
import numpy as np
from threadpoolctl import threadpool_limits

import dflab as tf

TARGET_X = 0.8
BIG = 16 * 1024 * 1024  # float32 elements: 64 MB


def _null_step(tasks):
    parts = []
    for device in tasks:
        with tf.device(device):
            parts.append(tf.constant(np.float32(1.0)) + 1.0)
    with tf.device(tasks[0]):
        return tf.add_n(parts)


def _servers(n_workers, protocol, namespace):
    spec = tf.train.ClusterSpec({"ps": [f"rb-ps:{n_workers}"],
                                 "worker": [f"rb-w{i}:{n_workers}" for i in range(n_workers)]})
    config = tf.ConfigProto(dflab={"ray_namespace": namespace})
    tasks = [("ps", 0)] + [("worker", i) for i in range(n_workers)]
    return [tf.train.Server(spec, job_name=j, task_index=i, protocol=protocol, config=config)
            for j, i in tasks]


def _null_steps(result, args):
    ratios = {}
    for n in (1, 2, 4):
        namespace = f"bench-{uuid.uuid4().hex[:8]}"
        ray_servers = _servers(n, "ray", namespace)
        local_servers = _servers(n, None, namespace)
        try:
            g = tf.Graph()
            with g.as_default():
                step = _null_step(["/job:worker/task:0", "/job:ps/task:0"] +
                                  [f"/job:worker/task:{i}" for i in range(1, n)])
            ray_sess = tf.Session(ray_servers[1].target, graph=g)
            local_sess = tf.Session(local_servers[1].target, graph=g)
            assert ray_sess.run(step) == local_sess.run(step) == 2.0 * (n + 1)
            times = h.compare({
                f"in-process cluster, 1 ps + {n} workers": lambda s=local_sess: s.run(step),
                f"Ray, 1 ps + {n} workers": lambda s=ray_sess: s.run(step),
            }, repeat=h.repeats(args, 7), sample_s=0.3, warmup=5)
            ray_sess.close()
            local_sess.close()
        finally:
            for s in ray_servers + local_servers:
                s.stop()
        base = times[f"in-process cluster, 1 ps + {n} workers"]
        for label, seconds in times.items():
            result.add(label, seconds * 1e3, "ms/step", f"{seconds / base:.1f}x in-process")
        ratios[n] = times[f"Ray, 1 ps + {n} workers"]
    return ratios


def _raw_ray_floor(result, args) -> float:
    """Raw Ray's round trips, as a step uses them; the time of an actor call that calls
    another actor."""
    import ray

    @ray.remote(num_cpus=0)
    class Hop:
        async def ping(self):
            return 1

        async def relay(self, other):
            return await other.ping.remote()

    a, b = Hop.remote(), Hop.remote()
    assert ray.get(a.relay.remote(b)) == 1
    chain = "raw Ray: a call to an actor that calls another"
    times = h.compare({"raw Ray: one call to an async actor": lambda: ray.get(a.ping.remote()),
                       chain: lambda: ray.get(a.relay.remote(b))},
                      repeat=h.repeats(args, 7), sample_s=0.3, warmup=5)
    for actor in (a, b):
        ray.kill(actor)
    for label, seconds in times.items():
        result.add(label, seconds * 1e3, "ms/call")
    return times[chain]


def _raw_ray_pull():
    import ray

    @ray.remote(num_cpus=0)
    class Holder:
        def __init__(self):
            self.value = np.ones(BIG, np.float32)

        def get(self):
            return self.value

    @ray.remote(num_cpus=0)
    class Puller:
        def pull(self, holder):
            return float(ray.get(holder.get.remote())[7])

    holder, puller = Holder.remote(), Puller.remote()
    assert ray.get(puller.pull.remote(holder)) == 1.0
    return lambda: ray.get(puller.pull.remote(holder)), (holder, puller)


def _transfer(result, args):
    import ray

    namespace = f"bench-{uuid.uuid4().hex[:8]}"
    servers = _servers(1, "ray", namespace)
    try:
        g = tf.Graph()
        with g.as_default():
            with tf.device("/job:ps/task:0"):
                w = tf.Variable(tf.ones([BIG]), name="big")
            with tf.device("/job:worker/task:0"):
                one = tf.identity(w)[7]
        sess = tf.Session(servers[1].target, graph=g)
        sess.run(w.initializer)
        assert sess.run(one) == 1.0
        raw, actors = _raw_ray_pull()
        times = h.compare({"raw Ray: actor ray.get()s another's 64 MB array": raw,
                           "dflab on Ray: worker task pulls a 64 MB variable from the ps":
                               lambda: sess.run(one)},
                          repeat=h.repeats(args, 9), sample_s=0.5, warmup=3)
        sess.close()
        for a in actors:
            ray.kill(a)
    finally:
        for s in servers:
            s.stop()
    raw_s = times["raw Ray: actor ray.get()s another's 64 MB array"]
    for label, seconds in times.items():
        result.add(label, seconds * 1e3, "ms",
                   f"{64 / 1024 / seconds:.2f} GB/s, {raw_s / seconds:.2f}x raw Ray")
    return raw_s / times["dflab on Ray: worker task pulls a 64 MB variable from the ps"]


def main() -> h.Result:
    args = h.parse_args(__doc__.splitlines()[0])
    result = h.Result("ray", "12. Ray transport: null step across 1 ps + N workers, 64 MB "
                             "between two tasks")
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             object_store_memory=512 * 1024 * 1024, configure_logging=False)
    try:
        with threadpool_limits(1):
            steps = _null_steps(result, args)
            floor = _raw_ray_floor(result, args)
            speed = _transfer(result, args)
    finally:
        ray.shutdown()
    result.target = f"64 MB between two Ray tasks >= {TARGET_X:g}x raw Ray"
    result.measured = f"{speed:.2f}x; null step " + ", ".join(
        f"N={n}: {s * 1e3:.1f} ms" for n, s in steps.items()) + \
        f" (raw Ray's actor-to-actor call {floor * 1e3:.1f} ms)"
    result.met = speed >= TARGET_X
    h.report(result, args)
    return result


if __name__ == "__main__":
    main()
