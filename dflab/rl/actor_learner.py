"""The PPO agent across a cluster: actors on worker tasks, the learner on the ps.

The cluster graph (``ClusterGraph``, built by every client with the same names, as TF's
between-graph replication has it) puts on the ps task the policy and value variables, a
``FIFOQueue`` of rollouts (``shared_name="experience"``) and a ``stop`` flag. An **actor**
(worker task 1…N) loops: fetch the latest weights from the ps (one ``Session.run``: the weights
move through the cluster runtime), act eagerly in its own environment with them for a rollout,
and enqueue the rollout on the ps (the experience moves the other way). The **learner**
(worker task 0) dequeues rollouts and runs PPO updates: a traced function called in the cluster
graph, whose call op is placed on the ps with the variables it updates.

``run_in_process(n_actors)`` starts the tasks as in-process servers with one thread per actor
(the embedded default: same code, one process); ``run_on_ray(n_actors)`` starts them as Ray
actors through ``dflab.distributed.launch`` (each actor its own process). Both return an
``ActorLearnerResult``: whether the greedy policy reached the target, the environment steps
taken and their rate.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import numpy as np
from threadpoolctl import threadpool_limits

import dflab as tf
from dflab.eager import eager_mode
from dflab.rl import ppo

PS = "/job:ps/task:0"


class ClusterGraph:
    """The graph every client builds (see the module docstring)."""

    def __init__(self, weights: dict, rollout_steps: int, obs_dim: int = 4,
                 learner: bool = False, learning_rate: float = 1e-3, capacity: int = 4):
        self.graph = tf.Graph()
        with self.graph.as_default(), tf.device(PS):
            self.model = ppo.ActorCritic(weights)
            self.stop = tf.Variable(False, name="stop")
            self.updates = tf.Variable(0, dtype=tf.int64, name="updates")
            t = rollout_steps
            self.queue = tf.FIFOQueue(
                capacity, [tf.float32, tf.int32, tf.float32, tf.float32, tf.float32,
                           tf.bool, tf.bool, tf.float32, tf.float32],
                shapes=[[t, obs_dim], [t], [t], [t], [t], [t], [t], [], []],
                shared_name="experience", name="experience")
            self.rollout = [tf.placeholder(dt, sh) for dt, sh in zip(
                self.queue.dtypes, [[t, obs_dim], [t], [t], [t], [t], [t], [t], [], []])]
            self.enqueue = self.queue.enqueue(self.rollout)
            self.dequeue = self.queue.dequeue()
            self.close = self.queue.close(cancel_pending_enqueues=True)
            self.set_stop = self.stop.assign(True)
            self.weights = self.model.variables
            if learner:
                self.learner = ppo.PPOLearner(self.model, learning_rate, obs_dim)
                self.batch = [tf.placeholder(tf.float32, [None, obs_dim]),
                              tf.placeholder(tf.int32, [None]),
                              tf.placeholder(tf.float32, [None]),
                              tf.placeholder(tf.float32, [None]),
                              tf.placeholder(tf.float32, [None])]
                # The traced update, called from this graph: a call op on the ps.
                self.update_loss = self.learner.update(*self.batch)
                self.count_update = self.updates.assign_add(1)
                self.init = tf.global_variables_initializer()


def _weights_dict(values) -> dict:
    return dict(zip(ppo.WEIGHT_NAMES, values))


def actor_main(target: str, weights: dict, seed: int, rollout_steps: int,
               max_rollouts: int = 10_000, stats: dict | None = None) -> int:
    """An actor's loop on the task behind ``target``; returns the environment steps taken."""
    cg = ClusterGraph(weights, rollout_steps)
    env = ppo.make_env()
    with threadpool_limits(1, "blas"), tf.Session(target, graph=cg.graph) as sess:
        with eager_mode():
            local = ppo.ActorCritic(weights)
            actor = ppo.Actor(env, ppo.policy_function(local), seed)
        _wait_initialized(sess, cg)
        for _ in range(max_rollouts):
            *values, stop = sess.run(cg.weights + [cg.stop])
            if stop:
                break
            with eager_mode():
                local.set_weights(_weights_dict(values))
                b = actor.rollout(rollout_steps)
            mean = float(np.mean(b.episode_returns)) if b.episode_returns else np.nan
            try:
                sess.run(cg.enqueue, dict(zip(cg.rollout, [
                    b.obs, b.actions, b.logp, b.values, b.rewards, b.dones, b.terminated,
                    np.float32(b.last_value), np.float32(mean)])))
            except (tf.errors.CancelledError, tf.errors.AbortedError):
                break  # the learner closed the queue: training is over
            if stats is not None:
                stats["steps"] = stats.get("steps", 0) + rollout_steps
    env.close()
    return actor.steps


def _wait_initialized(sess, cg, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            sess.run(cg.stop)
            return
        except tf.errors.FailedPreconditionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


@dataclass
class ActorLearnerResult:
    solved: bool
    eval_return: float
    updates: int
    env_steps: int
    seconds: float
    steps_per_second: float


def learner_main(target: str, weights: dict, rollout_steps: int, max_updates: int,
                 target_return: float = 475.0, seed: int = 0, eval_every: int = 2,
                 time_limit_s: float = 600.0) -> tuple:
    """The learner's loop: dequeue rollouts, update, check the greedy policy now and then;
    returns (solved, eval return, updates, seconds)."""
    cg = ClusterGraph(weights, rollout_steps, learner=True)
    rng = np.random.default_rng(seed + 3)
    start = time.perf_counter()
    solved, eval_return, n = False, 0.0, 0
    with threadpool_limits(1, "blas"), tf.Session(target, graph=cg.graph) as sess:
        sess.run(cg.init)
        with eager_mode():
            judge = ppo.ActorCritic(weights)
            policy = ppo.policy_function(judge)
        recent: list = []
        for n in range(1, max_updates + 1):
            obs, act, logp, values, rewards, dones, term, last_value, mean = sess.run(
                cg.dequeue)
            if not np.isnan(mean):
                recent = (recent + [float(mean)])[-8:]
            batch = ppo.Batch(obs, act, logp, values, rewards, dones, term, float(last_value))
            _update(sess, cg, batch, rng)
            if n % eval_every == 0 and recent and np.mean(recent) >= 150.0:
                with eager_mode():
                    judge.set_weights(_weights_dict(sess.run(cg.weights)))
                    if ppo.evaluate(policy, 10, seed=seed * 1000 + n) >= target_return:
                        eval_return = ppo.evaluate(policy, 100)
                        solved = eval_return >= target_return
            if solved or time.perf_counter() - start > time_limit_s:
                break
        sess.run(cg.set_stop)
        sess.run(cg.close)
    return solved, eval_return, n, time.perf_counter() - start


def _update(sess, cg, batch, rng, epochs: int = 10, minibatch: int = 256) -> None:
    adv, ret = ppo.gae(batch)
    adv = ((adv - adv.mean()) / (adv.std() + 1e-8)).astype(np.float32)
    ret = ret.astype(np.float32)
    n = len(adv)
    for _ in range(epochs):
        order = rng.permutation(n)
        for s in range(0, n, minibatch):
            idx = order[s:s + minibatch]
            sess.run(cg.update_loss, dict(zip(cg.batch, [
                batch.obs[idx], batch.actions[idx], batch.logp[idx], ret[idx], adv[idx]])))
    sess.run(cg.count_update)


def run_in_process(n_actors: int = 2, seed: int = 0, rollout_steps: int = 512,
                   max_updates: int = 400, time_limit_s: float = 600.0) -> ActorLearnerResult:
    """The cluster as in-process servers: one ps, the learner and ``n_actors`` actor tasks,
    the actors on threads of this process."""
    cluster = tf.train.ClusterSpec({"ps": ["ps0:2222"],
                                    "worker": [f"w{i}:2222" for i in range(n_actors + 1)]})
    servers = [tf.train.Server(cluster, job_name="ps", task_index=0)]
    servers += [tf.train.Server(cluster, job_name="worker", task_index=i)
                for i in range(n_actors + 1)]
    weights = ppo.initial_weights(4, 2, seed=seed)
    stats: dict = {}
    errors: list = []

    def actor(i):
        try:
            actor_main(servers[i + 2].target, weights, seed + 17 * (i + 1), rollout_steps,
                       stats=stats)
        except Exception as e:  # noqa: BLE001 - reported by the learner's thread below
            errors.append(e)

    threads = [threading.Thread(target=actor, args=(i,), daemon=True) for i in range(n_actors)]
    for t in threads:
        t.start()
    try:
        solved, ret, updates, seconds = learner_main(servers[1].target, weights, rollout_steps,
                                                     max_updates, seed=seed,
                                                     time_limit_s=time_limit_s)
        for t in threads:
            t.join(timeout=60)
    finally:
        for s in servers:
            s.stop()
    if errors:
        raise errors[0]
    steps = stats.get("steps", 0)
    return ActorLearnerResult(solved, ret, updates, steps, seconds, steps / seconds)


def _ray_main(task):
    """One worker task of ``run_on_ray``'s cluster: the learner (task 0) or an actor."""
    cfg = task_config()
    if task.task_index == 0:
        return learner_main(task.target, cfg["weights"], cfg["rollout_steps"],
                            cfg["max_updates"], seed=cfg["seed"],
                            time_limit_s=cfg["time_limit_s"])
    return actor_main(task.target, cfg["weights"], cfg["seed"] + 17 * task.task_index,
                      cfg["rollout_steps"])


_CONFIG: dict = {}


def task_config() -> dict:
    return _CONFIG


def _start_ray(tasks: int, attempts: int = 3) -> None:
    """A local Ray instance with a CPU slot per task, unless one is running (or
    ``RAY_ADDRESS`` names one). Ray's agents get a fixed time to start, which a loaded
    machine can miss: starting again is safe."""
    import os

    import ray

    if ray.is_initialized() or os.environ.get("RAY_ADDRESS"):
        return
    for attempt in range(attempts):
        try:
            ray.init(num_cpus=tasks, include_dashboard=False, log_to_driver=False,
                     configure_logging=False)
            return
        except Exception as e:  # noqa: BLE001 - Ray raises a bare Exception here
            ray.shutdown()
            if "timed out during startup" not in str(e) or attempt + 1 == attempts:
                raise


def run_on_ray(n_actors: int = 4, seed: int = 0, rollout_steps: int = 512,
               max_updates: int = 400, time_limit_s: float = 600.0) -> ActorLearnerResult:
    """The same cluster as Ray actors (``dflab.distributed.launch``): each task a process."""
    from dflab.distributed import launch

    _start_ray(n_actors + 2)
    _CONFIG.update(weights=ppo.initial_weights(4, 2, seed=seed), rollout_steps=rollout_steps,
                   max_updates=max_updates, seed=seed, time_limit_s=time_limit_s)
    config = dict(_CONFIG)

    def main(task):
        from dflab.rl import actor_learner

        actor_learner.task_config().update(config)
        return actor_learner._ray_main(task)

    results = launch(main, {"ps": 1, "worker": n_actors + 1})
    solved, ret, updates, learn_s = results[0]
    steps = int(sum(results[1:]))
    return ActorLearnerResult(solved, ret, updates, steps, learn_s, steps / learn_s)
