"""``tf.train.SyncReplicasOptimizer``: synchronous data-parallel training with backup workers,
the paper's answer to stragglers (TF1's design, op for op).

Each of ``total_num_replicas`` workers computes gradients on its own batch and *applies* them to
one ``ConditionalAccumulator`` per variable, living on the variable's ps task, tagged with the
worker's ``local_step``. The chief's queue runner takes ``replicas_to_aggregate`` gradients from
each accumulator (the first that arrive), applies their mean with the wrapped optimizer, advances
the global step and puts ``total_num_replicas`` tokens — the new global step — into the token
queue. A worker's train op applies its gradients, then waits for a token and sets its
``local_step`` to it. With more replicas than gradients aggregated (``n > m``), the ``n - m``
slowest gradients of a step arrive after the take: their ``local_step`` is now older than the
accumulator's global step, so the accumulator drops them (stale) — backup workers.

``make_session_run_hook(is_chief)`` does the start-up: the chief initializes the accumulators'
global step and the local step, fills the token queue, and starts the queue runner; the others
set their local step once the chief has initialized the model.
"""

from __future__ import annotations

import logging
import time

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.ops import GraphKeys
from dflab.ops import array_ops, control_flow_ops, state_ops
from dflab.ops import variables as _variables
from dflab.ops.accumulator_ops import ConditionalAccumulator, SparseConditionalAccumulator
from dflab.ops.data_flow_ops import FIFOQueue
from dflab.ops.gradients import IndexedSlices
from dflab.train.optimizer import Optimizer
from dflab.train.queue_runner import QueueRunner
from dflab.train.session_run_hook import SessionRunHook

logger = logging.getLogger("dflab.train")


class SyncReplicasOptimizer(Optimizer):
    """Wraps ``opt`` so that ``replicas_to_aggregate`` of ``total_num_replicas`` workers'
    gradients make one update (see the module docstring)."""

    def __init__(self, opt, replicas_to_aggregate, total_num_replicas=None,
                 variable_averages=None, variables_to_average=None, use_locking=False,
                 name="sync_replicas"):
        if total_num_replicas is None:
            total_num_replicas = replicas_to_aggregate
        if int(replicas_to_aggregate) < 1 or int(total_num_replicas) < 1:
            raise ValueError(f"replicas_to_aggregate ({replicas_to_aggregate}) and "
                             f"total_num_replicas ({total_num_replicas}) must be positive")
        if variable_averages is not None:
            raise NotImplementedError("SyncReplicasOptimizer(variable_averages=...) is not "
                                      "supported")
        super().__init__(use_locking, name)
        logger.info("SyncReplicas: replicas_to_aggregate=%s; total_num_replicas=%s",
                    replicas_to_aggregate, total_num_replicas)
        self._opt = opt
        self._replicas_to_aggregate = int(replicas_to_aggregate)
        self._total_num_replicas = int(total_num_replicas)
        # Fewer replicas than gradients per step: each replica runs several steps per update.
        self._tokens_per_step = max(self._total_num_replicas, self._replicas_to_aggregate)
        self._gradients_applied = False
        self._global_step = None
        self._sync_token_queue = None
        self._chief_queue_runner = None
        self._accumulator_list = []
        self._local_step = None
        self.local_step_init_op = None
        self.chief_init_op = None
        self.ready_for_local_init_op = None

    def compute_gradients(self, *args, **kwargs):
        return self._opt.compute_gradients(*args, **kwargs)

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        """This worker's train op: apply its gradients to the accumulators, then wait for the
        chief's token (the new global step). Builds the chief's update and token ops too."""
        grads_and_vars = list(grads_and_vars)
        if not grads_and_vars:
            raise ValueError("Must supply at least one variable")
        if global_step is None:
            raise ValueError("Global step is required to check staleness")
        if self._gradients_applied:
            raise ValueError("apply_gradients of a SyncReplicasOptimizer may be called once")
        self._global_step = global_step
        step_dtype = global_step.dtype.base_dtype
        local_anchor = control_flow_ops.no_op()
        # On this worker (with the anchor), never on a ps: each replica has its own.
        with _ops.colocate_with(local_anchor):
            self._local_step = _variables.Variable(
                initial_value=_ops.convert_to_tensor(0, dtype=step_dtype), trainable=False,
                collections=[GraphKeys.LOCAL_VARIABLES], name="sync_rep_local_step")
        self.local_step_init_op = state_ops.assign(self._local_step, global_step)
        chief_init_ops = [self.local_step_init_op]
        self.ready_for_local_init_op = _variables.report_uninitialized_variables(
            _variables.global_variables())

        train_ops, aggregated, var_list = [], [], []
        local_step = _ops.convert_to_tensor(self._local_step, dtype=step_dtype)
        if step_dtype is not _dt.int64:
            from dflab.ops import math_ops

            local_step = math_ops.cast(local_step, _dt.int64)
        with _ops.name_scope(None, self._name):
            for grad, var in grads_and_vars:
                var_list.append(var)
                with _ops.device(var.device):
                    if grad is None:
                        aggregated.append(None)
                        continue
                    shared = var.name + "/grad_accum"
                    if isinstance(grad, IndexedSlices):
                        accum = SparseConditionalAccumulator(grad.dtype, shape=(),
                                                             shared_name=shared)
                        train_ops.append(accum.apply_indexed_slices_grad(
                            grad, local_step=local_step))
                        aggregated.append(accum.take_indexed_slices_grad(
                            self._replicas_to_aggregate))
                    else:
                        accum = ConditionalAccumulator(grad.dtype, shape=var.get_shape(),
                                                       shared_name=shared)
                        train_ops.append(accum.apply_grad(grad, local_step=local_step))
                        aggregated.append(accum.take_grad(self._replicas_to_aggregate))
                    self._accumulator_list.append((accum, var.device))

            with _ops.device(global_step.device), _ops.name_scope(""):
                update_op = self._opt.apply_gradients(list(zip(aggregated, var_list)),
                                                      global_step)
                self._sync_token_queue = FIFOQueue(-1, step_dtype, shapes=(),
                                                   name="sync_token_q",
                                                   shared_name="sync_token_q")
                with _ops.control_dependencies(train_ops):
                    token = self._sync_token_queue.dequeue()
                train_op = state_ops.assign(self._local_step, token)
                with _ops.control_dependencies([update_op]):
                    # Read after the update: TF's Identity of a ref aliases the variable's
                    # buffer, which its in-place AssignAdd changes; a dflab read is a snapshot.
                    new_step = global_step.read_value()
                    tokens = array_ops.fill([self._tokens_per_step], new_step)
                    sync_op = self._sync_token_queue.enqueue_many((tokens,))
                self._chief_queue_runner = QueueRunner(self._sync_token_queue, [sync_op])
            for accum, device in self._accumulator_list:
                with _ops.device(device):
                    chief_init_ops.append(accum.set_global_step(global_step,
                                                                name="SetGlobalStep"))
            self.chief_init_op = control_flow_ops.group(*chief_init_ops)
        self._gradients_applied = True
        return train_op

    def get_chief_queue_runner(self):
        if not self._gradients_applied:
            raise ValueError("Should be called after apply_gradients().")
        return self._chief_queue_runner

    def get_slot(self, *args, **kwargs):
        return self._opt.get_slot(*args, **kwargs)

    def get_slot_names(self, *args, **kwargs):
        return self._opt.get_slot_names(*args, **kwargs)

    def variables(self):
        return self._opt.variables()

    def get_init_tokens_op(self, num_tokens=-1):
        """Tokens for the first step (``replicas_to_aggregate`` by default: the first
        gradients of that many workers make the first update)."""
        if not self._gradients_applied:
            raise ValueError("get_init_tokens_op() should be called after apply_gradients().")
        tokens_needed = self._replicas_to_aggregate - self._total_num_replicas
        if num_tokens == -1:
            num_tokens = self._replicas_to_aggregate
        elif num_tokens < tokens_needed:
            raise ValueError(f"Too few tokens to finish the first step: {num_tokens} (given) "
                             f"vs {tokens_needed} (needed)")
        if num_tokens <= 0:
            return control_flow_ops.no_op(name="no_init_tokens")
        with _ops.device(self._global_step.device), _ops.name_scope(""):
            tokens = array_ops.fill([num_tokens], self._global_step)
            return self._sync_token_queue.enqueue_many((tokens,))

    def make_session_run_hook(self, is_chief, num_tokens=-1):
        return _SyncReplicasOptimizerHook(self, is_chief, num_tokens)


class _SyncReplicasOptimizerHook(SessionRunHook):
    """Start-up of a replica (see the module docstring)."""

    # How long a worker waits for the chief to initialize the model.
    READY_TIMEOUT_S = 120.0

    def __init__(self, sync_optimizer, is_chief, num_tokens):
        self._sync_optimizer = sync_optimizer
        self._is_chief = is_chief
        self._num_tokens = num_tokens

    def begin(self):
        opt = self._sync_optimizer
        if not opt._gradients_applied:
            raise ValueError("SyncReplicasOptimizer.apply_gradient should be called before "
                             "using the hook.")
        self._ready_for_local_init_op = opt.ready_for_local_init_op
        if self._is_chief:
            self._local_init_op = opt.chief_init_op
            self._q_runner = opt.get_chief_queue_runner()
            self._init_tokens_op = opt.get_init_tokens_op(self._num_tokens)
        else:
            self._local_init_op = opt.local_step_init_op
            self._q_runner = None
            self._init_tokens_op = None

    def after_create_session(self, session, coord):
        deadline = time.monotonic() + self.READY_TIMEOUT_S
        while True:
            not_ready = session.run(self._ready_for_local_init_op)
            if not len(not_ready):
                break
            if time.monotonic() > deadline:
                names = ", ".join(n.decode() if isinstance(n, bytes) else str(n)
                                  for n in not_ready)
                raise RuntimeError("Model is not ready for SyncReplicasOptimizer local init: "
                                   f"variables not initialized: {names}")
            time.sleep(0.05)
        session.run(self._local_init_op)
        if self._init_tokens_op is not None:
            session.run(self._init_tokens_op)
        if self._q_runner is not None:
            self._q_runner.create_threads(session, coord=coord, daemon=True, start=True)
