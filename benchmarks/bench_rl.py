"""Benchmark 18: deep RL on dflab (needs ``pip install dflab[rl]``).

18a. CartPole-v1 solved: wall time for ``dflab.rl.ppo.train(seed=0)`` to reach a greedy mean
     return of 475 over 100 episodes. Target: within 3 minutes on 2 CPU cores.
18b. Actor-learner environment steps per second: one actor in one process (acting eagerly, no
     cluster), the actor-learner with 4 actors on an in-process cluster (threads), and with 4
     actors on Ray (one process per task; skipped with ``--no-ray``). Target: Ray >= 3x one
     process. Each run trains for a fixed number of learner updates.
"""

from __future__ import annotations

import sys
import time

import _harness as h
from threadpoolctl import threadpool_limits

from dflab.eager import eager_mode
from dflab.rl import actor_learner, ppo


def _one_process_steps_per_s(steps: int = 8192, rollout: int = 512) -> float:
    with threadpool_limits(1, "blas"), eager_mode():
        env = ppo.make_env()
        model = ppo.ActorCritic(ppo.initial_weights(4, 2))
        actor = ppo.Actor(env, ppo.policy_function(model))
        actor.rollout(64)
        t0 = time.perf_counter()
        for _ in range(steps // rollout):
            actor.rollout(rollout)
        return steps / (time.perf_counter() - t0)


def main() -> list:
    no_ray = "--no-ray" in sys.argv
    if no_ray:
        sys.argv.remove("--no-ray")
    args = h.parse_args(__doc__.splitlines()[0])
    updates = 6 if args.quick else 24
    r_solve = h.Result("cartpole_solved", "18a. CartPole-v1 solved (PPO, seed 0)")
    t0 = time.perf_counter()
    result = ppo.train(seed=0)
    seconds = time.perf_counter() - t0
    r_solve.add("dflab PPO, seed 0", seconds, "s", f"{result.env_steps} env steps, "
                f"greedy mean {result.eval_return:.1f} over 100 episodes")
    r_solve.target = "mean return >= 475 over 100 episodes within 180 s"
    r_solve.measured = f"{seconds:.0f} s ({'solved' if result.solved else 'not solved'})"
    r_solve.met = result.solved and seconds <= 180
    h.report(r_solve, args)

    r_steps = h.Result("actor_learner_steps", "18b. Actor-learner environment steps per second")
    one = _one_process_steps_per_s()
    r_steps.add("one process, one actor", one, "steps/s")
    local = actor_learner.run_in_process(n_actors=4, max_updates=updates, time_limit_s=600)
    r_steps.add("in-process cluster, 4 actor threads", local.steps_per_second, "steps/s",
                f"{local.updates} updates")
    ray_rate = None
    if not no_ray:
        try:
            remote = actor_learner.run_on_ray(n_actors=4, max_updates=updates,
                                              time_limit_s=600)
            ray_rate = remote.steps_per_second
            r_steps.add("Ray cluster, 4 actor processes", ray_rate, "steps/s",
                        f"{remote.updates} updates")
        except Exception as e:  # noqa: BLE001 - reported as the row's note
            r_steps.add("Ray cluster, 4 actor processes", None, "steps/s",
                        f"{type(e).__name__}: {e}")
    r_steps.target = "Ray (4 actors) >= 3x one process"
    if ray_rate is not None:
        r_steps.measured = f"{ray_rate / one:.2f}x"
        r_steps.met = ray_rate / one >= 3.0
    r_steps.notes.append(f"{h.machine_info().get('cores', '?')} cores: actors beyond the "
                         "core count share them")
    h.report(r_steps, args)
    return [r_solve, r_steps]


if __name__ == "__main__":
    sys.exit(main() and 0)
