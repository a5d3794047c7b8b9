"""Graph-level and op-level random seeds, combined by TF1's ``get_seed`` rules.

A random op's kernel is seeded from the pair ``(seed, seed2)`` that ``get_seed`` returns when
the op is built:

* graph seed set, op seed given   -> (graph seed, op seed);
* graph seed set, op seed None    -> (graph seed, number of ops created so far), so a graph built
  the same way twice draws the same numbers while its random ops still differ from each other
  (eagerly: the next number of a sequence ``set_random_seed`` starts);
* graph seed None, op seed given  -> (DEFAULT_GRAPH_SEED, op seed);
* neither                         -> (None, None): the kernel seeds itself from OS entropy.

Kernels read ``(0, 0)`` as "nondeterministic" (as TF's C++ kernels do), so a real seed pair of
``(0, 0)`` is moved to ``(0, 2**31 - 1)``.
"""

from __future__ import annotations

from dflab.framework import ops as _ops

DEFAULT_GRAPH_SEED = 87654321
_MAXINT32 = 2**31 - 1


def _truncate_seed(seed) -> int:
    return int(seed) % _MAXINT32


def get_seed(op_seed):
    """The ``(seed, seed2)`` pair for an op built now in the default graph (TF1's rules)."""
    graph = _ops.get_default_graph()
    global_seed = graph.seed
    if global_seed is not None:
        if op_seed is None:
            # TF uses the id of the last op created: a count that is the same whenever the
            # graph is built by the same code. Eagerly, the next of a sequence the global seed
            # starts (TF's ``internal_operation_seed``).
            op_seed = graph.internal_op_seed() if graph.executes_eagerly else graph._next_id
        seeds = _truncate_seed(global_seed), _truncate_seed(op_seed)
    elif op_seed is not None:
        seeds = DEFAULT_GRAPH_SEED, _truncate_seed(op_seed)
    else:
        seeds = None, None
    if seeds == (0, 0):
        return 0, _MAXINT32
    return seeds


def set_random_seed(seed) -> None:
    """Set the graph-level seed of the default graph (``tf.set_random_seed``); eagerly, also
    start the op seeds' sequence and every random op's stream again, so that the same seed
    gives the same numbers again (TF's ``context.set_global_seed``)."""
    graph = _ops.get_default_graph()
    graph.seed = None if seed is None else int(seed)
    if graph.executes_eagerly:
        graph.reset_random_streams(graph.seed)


__all__ = ["get_seed", "set_random_seed", "DEFAULT_GRAPH_SEED"]
