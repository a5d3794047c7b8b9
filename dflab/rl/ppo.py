"""A small, real deep-RL agent on dflab: actor-critic with PPO's clipped objective.

The environment runs in Python (Gymnasium's ``CartPole-v1``); the policy and value networks are
dflab variables; acting is a traced function called eagerly once per step (one graph call, no
retracing), and the learner's update — loss, ``GradientTape`` gradients and Adam — is one
traced function with a pinned input signature, so each minibatch update is a single call op
running one graph. ``train(seed=...)`` learns CartPole-v1 to a greedy mean return of 475+ over
100 episodes in about 50,000 environment steps; everything is seeded, so a seed gives the same
run on one machine.

``ActorCritic`` keeps the weights; ``rollout`` collects experience with the current weights;
``gae`` computes advantages; ``PPOLearner`` updates. The cluster version of the same agent
(actors on worker tasks, the learner on the ps) is ``dflab.rl.actor_learner``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from threadpoolctl import threadpool_limits

import dflab as tf
from dflab.eager import eager_mode


def make_env(name: str = "CartPole-v1"):
    """A Gymnasium environment (``pip install dflab[rl]``)."""
    try:
        import gymnasium as gym
    except ImportError as e:
        raise ImportError("dflab.rl needs Gymnasium: pip install 'dflab[rl]'") from e
    return gym.make(name)


def initial_weights(obs_dim: int, n_actions: int, hidden: int = 64, seed: int = 0) -> dict:
    """NumPy initial weights (scaled normal; a small policy head, as PPO implementations
    start from a nearly uniform policy)."""
    rng = np.random.default_rng(seed)

    def dense(n_in, n_out, scale):
        return (rng.standard_normal((n_in, n_out)) * scale / np.sqrt(n_in)).astype(np.float32)

    return {"w1": dense(obs_dim, hidden, np.sqrt(2)), "b1": np.zeros(hidden, np.float32),
            "w2": dense(hidden, hidden, np.sqrt(2)), "b2": np.zeros(hidden, np.float32),
            "wp": dense(hidden, n_actions, 0.01), "bp": np.zeros(n_actions, np.float32),
            "v1": dense(obs_dim, hidden, np.sqrt(2)), "c1": np.zeros(hidden, np.float32),
            "v2": dense(hidden, hidden, np.sqrt(2)), "c2": np.zeros(hidden, np.float32),
            "wv": dense(hidden, 1, 1.0), "bv": np.zeros(1, np.float32)}


WEIGHT_NAMES = ("w1", "b1", "w2", "b2", "wp", "bp", "v1", "c1", "v2", "c2", "wv", "bv")


class ActorCritic:
    """Policy logits and value: two two-layer tanh networks (separate ones, so that the
    value's large early errors do not swamp the policy's features)."""

    def __init__(self, weights: dict):
        self.vars = {k: tf.Variable(weights[k], name=k) for k in WEIGHT_NAMES}

    @property
    def variables(self) -> list:
        return [self.vars[k] for k in WEIGHT_NAMES]

    def __call__(self, obs):
        v = self.vars
        h = tf.tanh(tf.matmul(obs, v["w1"]) + v["b1"])
        h = tf.tanh(tf.matmul(h, v["w2"]) + v["b2"])
        logits = tf.matmul(h, v["wp"]) + v["bp"]
        g = tf.tanh(tf.matmul(obs, v["v1"]) + v["c1"])
        g = tf.tanh(tf.matmul(g, v["v2"]) + v["c2"])
        value = tf.squeeze(tf.matmul(g, v["wv"]) + v["bv"], [1])
        return logits, value

    def get_weights(self) -> dict:
        return {k: var.numpy() for k, var in self.vars.items()}

    def set_weights(self, weights: dict) -> None:
        for k, var in self.vars.items():
            var.assign(weights[k])


def ppo_loss(model, obs, actions, old_logp, returns, advantages, clip=0.2, value_coef=0.5,
             entropy_coef=0.0):
    """PPO's clipped surrogate plus the value loss (and an entropy bonus)."""
    logits, value = model(obs)
    logp_all = tf.nn.log_softmax(logits)
    logp = tf.reduce_sum(tf.one_hot(actions, tf.shape(logits)[1]) * logp_all, 1)
    ratio = tf.exp(logp - old_logp)
    clipped = tf.clip_by_value(ratio, 1.0 - clip, 1.0 + clip)
    policy_loss = -tf.reduce_mean(tf.minimum(ratio * advantages, clipped * advantages))
    value_loss = tf.reduce_mean(tf.square(value - returns))
    entropy = -tf.reduce_mean(tf.reduce_sum(tf.exp(logp_all) * logp_all, 1))
    return policy_loss + value_coef * value_loss - entropy_coef * entropy


class PPOLearner:
    """One traced update per minibatch: loss, tape gradients, global-norm clip, Adam."""

    def __init__(self, model: ActorCritic, learning_rate: float = 1e-3, obs_dim: int = 4,
                 max_grad_norm: float = 0.5):
        self.model = model
        self.optimizer = tf.train.AdamOptimizer(learning_rate, epsilon=1e-5)
        self.max_grad_norm = max_grad_norm
        spec = [tf.TensorSpec([None, obs_dim], tf.float32), tf.TensorSpec([None], tf.int32),
                tf.TensorSpec([None], tf.float32), tf.TensorSpec([None], tf.float32),
                tf.TensorSpec([None], tf.float32)]
        self.update = tf.function(self._update, input_signature=spec)

    def _update(self, obs, actions, old_logp, returns, advantages):
        variables = self.model.variables
        with tf.GradientTape() as tape:
            loss = ppo_loss(self.model, obs, actions, old_logp, returns, advantages)
        grads = tape.gradient(loss, variables)
        grads, _ = tf.clip_by_global_norm(grads, self.max_grad_norm)
        self.optimizer.apply_gradients(zip(grads, variables))
        return loss


@dataclass
class Batch:
    obs: np.ndarray
    actions: np.ndarray
    logp: np.ndarray
    values: np.ndarray
    rewards: np.ndarray
    dones: np.ndarray  # the episode ended after this step (terminated or truncated)
    terminated: np.ndarray  # ended by failing: no value after it
    last_value: float
    episode_returns: list = field(default_factory=list)


def gae(batch: Batch, gamma: float = 0.99, lam: float = 0.95):
    """Generalized advantage estimates and returns of a rollout."""
    n = len(batch.rewards)
    adv = np.zeros(n, np.float32)
    last = 0.0
    for t in reversed(range(n)):
        next_value = batch.last_value if t == n - 1 else batch.values[t + 1]
        if batch.terminated[t]:
            next_value = 0.0
        if batch.dones[t] and not batch.terminated[t] and t < n - 1:
            next_value = batch.values[t]  # truncated: bootstrap from the state's own value
        delta = batch.rewards[t] + gamma * next_value - batch.values[t]
        last = delta + gamma * lam * (0.0 if batch.dones[t] else last)
        adv[t] = last
    return adv, adv + batch.values


class Actor:
    """Collects experience in one environment with a policy function of observations."""

    def __init__(self, env, policy, seed: int = 0):
        self.env = env
        self.policy = policy  # obs [1, d] float32 -> (logits [1, A], value [1]) as NumPy
        self.rng = np.random.default_rng(seed + 1)
        self.obs, _ = env.reset(seed=seed)
        self.episode_return = 0.0
        self.steps = 0

    def rollout(self, n_steps: int) -> Batch:
        d = len(self.obs)
        obs = np.zeros((n_steps, d), np.float32)
        actions = np.zeros(n_steps, np.int32)
        logp = np.zeros(n_steps, np.float32)
        values = np.zeros(n_steps, np.float32)
        rewards = np.zeros(n_steps, np.float32)
        dones = np.zeros(n_steps, bool)
        terminated = np.zeros(n_steps, bool)
        finished = []
        for t in range(n_steps):
            obs[t] = self.obs
            logits, value = self.policy(self.obs[None].astype(np.float32))
            p = np.exp(logits[0] - logits[0].max())
            p /= p.sum()
            a = int(self.rng.choice(len(p), p=p))
            actions[t], logp[t], values[t] = a, np.log(p[a] + 1e-12), value[0]
            self.obs, r, term, trunc, _ = self.env.step(a)
            rewards[t], terminated[t], dones[t] = r, term, term or trunc
            self.episode_return += r
            if term or trunc:
                finished.append(self.episode_return)
                self.episode_return = 0.0
                self.obs, _ = self.env.reset()
        self.steps += n_steps
        _, last_value = self.policy(self.obs[None].astype(np.float32))
        return Batch(obs, actions, logp, values, rewards, dones, terminated,
                     float(last_value[0]), finished)


def evaluate(policy, episodes: int = 100, seed: int = 10_000, env_name="CartPole-v1") -> float:
    """Mean return of the greedy policy over ``episodes`` seeded episodes."""
    env = make_env(env_name)
    total = 0.0
    for k in range(episodes):
        obs, _ = env.reset(seed=seed + k)
        done = False
        while not done:
            logits, _ = policy(obs[None].astype(np.float32))
            obs, r, term, trunc, _ = env.step(int(np.argmax(logits[0])))
            total += r
            done = term or trunc
    env.close()
    return total / episodes


@dataclass
class TrainResult:
    solved: bool
    eval_return: float
    env_steps: int
    seconds: float
    iterations: int
    history: list  # (env steps, mean training return of finished episodes, seconds)
    weights: dict


def policy_function(model: ActorCritic):
    """The acting function: one traced graph call per step, NumPy in and out."""
    forward = tf.function(lambda obs: model(obs),
                          input_signature=[tf.TensorSpec([None, model.vars["w1"].shape[0]])])

    def policy(obs):
        logits, value = forward(obs)
        return logits.numpy(), value.numpy()

    return policy


def greedy_policy(weights: dict):
    """An acting function for ``weights`` (e.g. ``TrainResult.weights``), in the eager
    context: ``evaluate(greedy_policy(w))``."""
    with eager_mode():
        model = ActorCritic(weights)
        forward = policy_function(model)

    def policy(obs):
        with eager_mode():
            return forward(obs)

    return policy


def update_epochs(learner: PPOLearner, batch: Batch, rng, epochs: int = 10,
                  minibatch: int = 256) -> float:
    adv, ret = gae(batch)
    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    n = len(adv)
    loss = 0.0
    for _ in range(epochs):
        order = rng.permutation(n)
        for start in range(0, n, minibatch):
            idx = order[start:start + minibatch]
            loss = learner.update(batch.obs[idx], batch.actions[idx], batch.logp[idx],
                                  ret[idx].astype(np.float32), adv[idx])
    return float(loss)


def train(seed: int = 0, max_env_steps: int = 200_000, rollout_steps: int = 2048,
          target: float = 475.0, eval_episodes: int = 100, time_limit_s: float = 170.0,
          log=None) -> TrainResult:
    """Train PPO on CartPole-v1 until the greedy policy's mean return over
    ``eval_episodes`` episodes reaches ``target`` (checked on 10 episodes first)."""
    start = time.perf_counter()
    # Small products: BLAS on one thread (its worker threads only wait on matrices this size).
    with threadpool_limits(1, "blas"), eager_mode():
        env = make_env()
        model = ActorCritic(initial_weights(env.observation_space.shape[0],
                                            env.action_space.n, seed=seed))
        learner = PPOLearner(model, obs_dim=env.observation_space.shape[0])
        policy = policy_function(model)
        actor = Actor(env, policy, seed)
        rng = np.random.default_rng(seed + 2)
        history, recent = [], []
        eval_return, solved, it = 0.0, False, 0
        while actor.steps < max_env_steps and time.perf_counter() - start < time_limit_s:
            it += 1
            batch = actor.rollout(rollout_steps)
            recent = (recent + batch.episode_returns)[-20:]
            update_epochs(learner, batch, rng)
            mean_train = float(np.mean(recent)) if recent else 0.0
            history.append((actor.steps, mean_train, time.perf_counter() - start))
            if log is not None:
                log(f"iteration {it}: {actor.steps} steps, mean return {mean_train:.1f}")
            if mean_train >= 200.0 and evaluate(policy, 10, seed=seed * 1000 + it) >= target:
                eval_return = evaluate(policy, eval_episodes)
                if eval_return >= target:
                    solved = True
                    break
        env.close()
        return TrainResult(solved, eval_return, actor.steps, time.perf_counter() - start, it,
                           history, model.get_weights())
