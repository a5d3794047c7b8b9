"""dflab.rl: the PPO agent learns CartPole-v1 on a fixed seed; its pieces (advantages, the
traced learner) are right; the actor-learner runs across an in-process cluster."""

from __future__ import annotations

import numpy as np
import pytest

import dflab as tf
from dflab.eager import eager_mode
from dflab.rl import actor_learner, ppo


def test_gae_against_a_hand_computation():
    b = ppo.Batch(obs=np.zeros((4, 4), np.float32), actions=np.zeros(4, np.int32),
                  logp=np.zeros(4, np.float32), values=np.array([1.0, 2.0, 3.0, 4.0]),
                  rewards=np.array([1.0, 1.0, 1.0, 1.0]),
                  dones=np.array([False, True, False, False]),
                  terminated=np.array([False, True, False, False]), last_value=5.0)
    g, lam = 0.9, 0.5
    adv, ret = ppo.gae(b, g, lam)
    d3 = 1 + g * 5.0 - 4.0
    d2 = 1 + g * 4.0 - 3.0
    d1 = 1 + 0.0 - 2.0  # terminated: no value after it
    d0 = 1 + g * 2.0 - 1.0
    want = [d0 + g * lam * d1, d1, d2 + g * lam * d3, d3]
    np.testing.assert_allclose(adv, want, rtol=1e-6)
    np.testing.assert_allclose(ret, np.array(want) + b.values, rtol=1e-6)


def test_the_learner_is_one_trace_and_lowers_its_loss():
    rng = np.random.default_rng(0)
    with eager_mode():
        model = ppo.ActorCritic(ppo.initial_weights(4, 2, seed=1))
        learner = ppo.PPOLearner(model, learning_rate=1e-2)
        obs = rng.standard_normal((64, 4)).astype(np.float32)
        actions = rng.integers(0, 2, 64).astype(np.int32)
        logits, _ = model(tf.constant(obs))
        old = tf.reduce_sum(tf.one_hot(actions, 2) * tf.nn.log_softmax(logits), 1).numpy()
        ret = rng.standard_normal(64).astype(np.float32)
        adv = (actions * 2.0 - 1.0).astype(np.float32)  # favour action 1
        losses = [float(learner.update(obs, actions, old, ret, adv)) for _ in range(30)]
        assert learner.update.experimental_get_tracing_count() == 1
        assert losses[-1] < losses[0]
        p1 = tf.nn.softmax(model(tf.constant(obs))[0]).numpy()[:, 1].mean()
    assert p1 > 0.55


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_ppo_learns_cartpole_on_a_fixed_seed():
    result = ppo.train(seed=0, time_limit_s=400.0)
    assert result.solved, result.history[-5:]
    assert result.eval_return >= 475.0
    assert result.env_steps <= 60_000
    # The weights it returns are the policy that was judged.
    assert ppo.evaluate(ppo.greedy_policy(result.weights), 20, seed=123) >= 475.0


def test_actor_learner_across_an_in_process_cluster():
    result = actor_learner.run_in_process(n_actors=2, rollout_steps=256, max_updates=4,
                                          time_limit_s=120.0)
    assert result.updates == 4
    # Each update consumed one rollout that an actor enqueued on the ps.
    assert result.env_steps >= 4 * 256
    assert result.steps_per_second > 0
