"""The global step: an int64 scalar variable named ``global_step`` counting training steps.

It lives in ``GLOBAL_VARIABLES`` and ``GLOBAL_STEP`` (never trainable); ``apply_gradients``
increments it after each step's updates when given one. Executing eagerly, TF finds it in the
eager graph's ``GLOBAL_STEP`` collection; dflab's eager context keeps no collections, so the
step made there is kept here, one per context (``_EAGER_STEPS``): ``get_or_create_global_step``
returns the same variable every time, and ``get_global_step`` finds it.
"""

from __future__ import annotations

import weakref

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.ops import GraphKeys
from dflab.ops import init_ops
from dflab.ops import variable_scope as _vs
from dflab.ops import variables as _variables

# {eager context: its global step variable}
_EAGER_STEPS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def global_step(sess, global_step_tensor) -> int:
    """The current value of ``global_step_tensor`` as a Python int (eagerly, its value now:
    ``sess`` is not used, as in TF)."""
    if _ops.executing_eagerly():
        return int(global_step_tensor.numpy())
    return int(sess.run(global_step_tensor))


def _eager_chain(graph) -> list:
    """``graph`` and the function graphs around it up to the eager context they trace for,
    innermost first (TF's function graphs see the collections of the graphs around them, so
    a trace finds the eager step); empty unless that outermost graph is an eager context."""
    chain = [graph]
    while getattr(chain[-1], "is_function_graph", False):
        chain.append(chain[-1].outer_graph)
    return chain if getattr(chain[-1], "executes_eagerly", False) else []


def get_global_step(graph=None):
    """The graph's global step variable (or tensor named ``global_step:0``), or None."""
    graph = graph or _ops.get_default_graph()
    chain = _eager_chain(graph)
    if chain:
        return _EAGER_STEPS.get(chain[-1])
    found = graph.get_collection(GraphKeys.GLOBAL_STEP)
    if len(found) == 1:
        step = found[0]
    elif not found:
        try:
            step = graph.get_tensor_by_name("global_step:0")
        except KeyError:
            return None
    else:
        return None  # TF1 logs "Multiple tensors in global_step collection." and gives up
    assert_global_step(step)
    return step


def create_global_step(graph=None):
    """Create the global step (a ValueError if the graph already has one).

    As in TF1 the name scope is cleared but the variable scope is not, so inside
    ``variable_scope("s")`` the variable is ``s/global_step``.
    """
    graph = graph or _ops.get_default_graph()
    if get_global_step(graph) is not None:
        raise ValueError('"global_step" already exists.')
    chain = _eager_chain(graph)
    if chain:
        # TF's eager branch: on the CPU, the name scope kept (no op is named by it). One
        # made while a function is traced is kept for the eager context too, so that a
        # retrace finds it (TF keeps it in the trace's own collection only).
        with _ops.device("cpu:0"):
            step = _vs.get_variable(GraphKeys.GLOBAL_STEP, shape=[], dtype=_dt.int64,
                                    initializer=init_ops.zeros_initializer(),
                                    trainable=False, collections=[])
        _EAGER_STEPS[chain[-1]] = step
        return step
    with graph.as_default(), graph.name_scope(None):
        return _vs.get_variable(GraphKeys.GLOBAL_STEP, shape=[], dtype=_dt.int64,
                                initializer=init_ops.zeros_initializer(), trainable=False,
                                collections=[GraphKeys.GLOBAL_VARIABLES, GraphKeys.GLOBAL_STEP])


def get_or_create_global_step(graph=None):
    graph = graph or _ops.get_default_graph()
    step = get_global_step(graph)
    if step is None:
        step = create_global_step(graph)
    return step


def assert_global_step(global_step_tensor) -> None:
    """TypeError unless the argument is an integer scalar Variable or Tensor."""
    if not isinstance(global_step_tensor, (_variables.Variable, _ops.Tensor)):
        raise TypeError(f'Existing "global_step" must be a Variable or Tensor: '
                        f"{global_step_tensor}.")
    if not global_step_tensor.dtype.base_dtype.is_integer:
        raise TypeError('Existing "global_step" does not have integer type: '
                        f"{global_step_tensor.dtype}")
    shape = global_step_tensor.get_shape()
    if shape.ndims != 0 and shape.is_fully_defined():
        raise TypeError(f'Existing "global_step" is not scalar: {shape}')
