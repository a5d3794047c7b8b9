"""Deep reinforcement learning on dflab (``pip install dflab[rl]``): the dynamic side of the
paper's open problem, small and real.

``ppo``: an actor-critic (PPO) agent for Gymnasium's CartPole-v1 — eager acting, a traced
learner. ``actor_learner``: the same agent across a cluster — actors on worker tasks collecting
experience with the latest weights, the learner on the ps, weights and experience moving through
the cluster runtime (in process, or on Ray with ``dflab.distributed.launch``).
"""
