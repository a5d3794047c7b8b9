"""``tf.train.Optimizer``: the base class that turns a loss into variable-update ops.

``minimize`` = ``compute_gradients`` (symbolic gradients, one per variable, dense tensors or
``IndexedSlices``) + ``apply_gradients``, which creates the optimizer's slot variables once,
then under the name scope ``<name>/`` builds one update per variable in ``update_<var>/``,
colocated with the variable: ``_apply_dense`` for a tensor gradient, ``_apply_sparse`` for
``IndexedSlices``. The returned op groups the updates and, given ``global_step``, increments it
once they have all run. Subclasses implement ``_create_slots``, ``_prepare``, ``_apply_dense``
and ``_apply_sparse``, exactly as in TF1.
"""

from __future__ import annotations

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.ops import GraphKeys
from dflab.ops import array_ops, control_flow_ops, math_ops, state_ops
from dflab.ops import gradients as _gradients
from dflab.ops import variables as _variables
from dflab.ops.gradients import IndexedSlices
from dflab.train import slot_creator


def _var_key(var):
    handle = getattr(var, "handle", None)
    if handle is not None and handle.is_eager:
        # Eager variables share names ("Variable:0"): each is told apart by its own state.
        return ("eager", handle.op.get_attr("shared_name"))
    return (var.op.graph, var.op.name)


def _flatten(var_list):
    if isinstance(var_list, dict):
        var_list = list(var_list.values())
    out = []
    for v in var_list if isinstance(var_list, (list, tuple)) else [var_list]:
        if isinstance(v, (list, tuple, dict)):
            out.extend(_flatten(v))
        else:
            out.append(v)
    return out


def _check_variable(v):
    if not isinstance(v, _variables.Variable):
        raise NotImplementedError(f"Trying to optimize unsupported type {v!r}")
    return v


class Optimizer:
    """Base class for optimizers (TF1 API). Do not use directly; use a subclass."""

    GATE_NONE = 0
    GATE_OP = 1
    GATE_GRAPH = 2

    def __init__(self, use_locking, name):
        if not name:
            raise ValueError("Must specify the optimizer name")
        self._use_locking = use_locking
        self._name = name
        # {slot_name: {(graph, var op name): slot variable}}
        self._slots: dict[str, dict] = {}
        # {(name, graph): variable} for state shared by all variables (Adam's beta powers)
        self._non_slot_dict: dict = {}

    def get_name(self) -> str:
        return self._name

    # --- the public API ------------------------------------------------------------------
    def minimize(self, loss, global_step=None, var_list=None, gate_gradients=GATE_OP,
                 aggregation_method=None, colocate_gradients_with_ops=False, name=None,
                 grad_loss=None):
        """Add ops that update ``var_list`` (default: trainable variables) to reduce ``loss``."""
        grads_and_vars = self.compute_gradients(
            loss, var_list=var_list, gate_gradients=gate_gradients,
            aggregation_method=aggregation_method,
            colocate_gradients_with_ops=colocate_gradients_with_ops, grad_loss=grad_loss)
        vars_with_grad = [v for g, v in grads_and_vars if g is not None]
        if not vars_with_grad:
            raise ValueError(
                "No gradients provided for any variable, check your graph for ops that do not "
                f"support gradients, between variables {[str(v) for _, v in grads_and_vars]} "
                f"and loss {loss}.")
        return self.apply_gradients(grads_and_vars, global_step=global_step, name=name)

    def compute_gradients(self, loss, var_list=None, gate_gradients=GATE_OP,
                          aggregation_method=None, colocate_gradients_with_ops=False,
                          grad_loss=None):
        """[(gradient, variable)] for ``loss``; a gradient is None where loss does not depend
        on the variable, an ``IndexedSlices`` where only some rows are used (``tf.gather``)."""
        if callable(loss) and not isinstance(loss, _ops.Tensor):
            return self._compute_gradients_eagerly(loss, var_list, grad_loss)
        if _ops.executing_eagerly():
            raise RuntimeError("`loss` passed to Optimizer.compute_gradients should be a "
                               "function when eager execution is enabled.")
        if gate_gradients not in (Optimizer.GATE_NONE, Optimizer.GATE_OP,
                                  Optimizer.GATE_GRAPH):
            raise ValueError("gate_gradients must be one of: Optimizer.GATE_NONE, "
                             f"Optimizer.GATE_OP, Optimizer.GATE_GRAPH.  Not {gate_gradients}")
        loss = _ops.convert_to_tensor(loss)
        self._assert_valid_dtypes([loss])
        if grad_loss is not None:
            grad_loss = _ops.convert_to_tensor(grad_loss)
            self._assert_valid_dtypes([grad_loss])
        if var_list is None:
            var_list = _variables.trainable_variables()
        else:
            var_list = _flatten(var_list)
        if not var_list:
            raise ValueError("No variables to optimize.")
        for v in var_list:
            _check_variable(v)
        grads = _gradients.gradients(
            loss, var_list, grad_ys=grad_loss,
            gate_gradients=(gate_gradients == Optimizer.GATE_OP),
            aggregation_method=aggregation_method,
            colocate_gradients_with_ops=colocate_gradients_with_ops)
        if gate_gradients == Optimizer.GATE_GRAPH:
            grads = _gate_all(grads)
        grads_and_vars = list(zip(grads, var_list))
        self._assert_valid_dtypes([v for g, v in grads_and_vars if g is not None])
        return grads_and_vars

    def _compute_gradients_eagerly(self, loss_fn, var_list, grad_loss):
        """A loss function: run it under a gradient tape (TF1's optimizers do the same; in a
        graph the tape differentiates symbolically); without ``var_list``, the trainable
        variables the loss read."""
        from dflab.eager.backprop import GradientTape

        with GradientTape() as tape:
            if var_list is not None:
                var_list = _flatten(var_list)
                tape.watch(var_list)
            loss = loss_fn()
        if var_list is None:
            var_list = list(tape.watched_variables())
        if not var_list:
            raise ValueError("No variables to optimize.")
        for v in var_list:
            _check_variable(v)
        grads = tape.gradient(loss, var_list, output_gradients=grad_loss)
        return list(zip(grads, var_list))

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        """The op that applies ``grads_and_vars`` (and then increments ``global_step``)."""
        grads_and_vars = tuple(grads_and_vars)
        if not grads_and_vars:
            raise ValueError("No variables provided.")
        converted = []
        for g, v in grads_and_vars:
            if g is not None and not isinstance(g, (_ops.Tensor, IndexedSlices)):
                try:
                    g = _ops.convert_to_tensor(g)
                except (TypeError, ValueError):
                    raise TypeError("Gradient must be convertible to a Tensor or "
                                    f"IndexedSlices, or None: {g}") from None
            converted.append((g, _check_variable(v)))
        var_list = [v for g, v in converted if g is not None]
        if not var_list:
            raise ValueError("No gradients provided for any variable: "
                             f"{[str(v) for _, v in converted]}.")
        # Slots are state, not part of this step: no control dependencies around them.
        with _ops.control_dependencies(None):
            self._create_slots(var_list)
        update_ops = []
        with _ops.name_scope(name, self._name) as name:
            self._prepare()
            for grad, var in converted:
                if grad is None:
                    continue
                with _ops.name_scope("update_" + var.op.name), _ops.colocate_with(var.op):
                    update_ops.append(self._update_op(grad, var))
            if global_step is None:
                apply_updates = self._finish(update_ops, name)
            else:
                with _ops.control_dependencies([self._finish(update_ops, "update")]):
                    gs_op = state_ops._ref_of(global_step).op
                    with _ops.colocate_with(gs_op):
                        if getattr(global_step, "_is_resource", False):
                            # TF builds the bare AssignAddVariableOp here: the train op is
                            # the increment itself, with no read after it.
                            apply_updates = global_step.assign_add(1, name=name,
                                                                   read_value=False)
                        else:
                            apply_updates = state_ops.assign_add(global_step, 1, name=name)
            if isinstance(apply_updates, _ops.Tensor):
                apply_updates = apply_updates.op
            train_op = _ops.get_collection_ref(GraphKeys.TRAIN_OP)
            if apply_updates not in train_op:
                train_op.append(apply_updates)
            return apply_updates

    def _update_op(self, grad, var):
        if isinstance(grad, _ops.Tensor):
            update = self._apply_dense(grad, var)
            if var.constraint is not None:
                with _ops.control_dependencies([update]):
                    return var.assign(var.constraint(var.read_value()))
            return update
        if var.constraint is not None:
            raise RuntimeError("Cannot use a constraint function on a sparse variable.")
        return self._apply_sparse_duplicate_indices(grad, var)

    def get_slot(self, var, name):
        """The slot ``name`` created for ``var`` (None if there is none)."""
        named = self._slots.get(name)
        if not named:
            return None
        return named.get(_var_key(var))

    def get_slot_names(self) -> list:
        return sorted(self._slots.keys())

    def variables(self) -> list:
        """This optimizer's variables in the default graph (slots and non-slot state), by
        name."""
        g = _ops.get_default_graph()
        found = [v for v in self._non_slot_variables() if v.op.graph is g]
        for per_var in self._slots.values():
            found.extend(s for s in per_var.values() if s.op.graph is g)
        return sorted(found, key=lambda v: v.name)

    # --- what subclasses implement -------------------------------------------------------
    def _create_slots(self, var_list) -> None:
        pass

    def _prepare(self) -> None:
        pass

    def _apply_dense(self, grad, var):
        raise NotImplementedError()

    def _apply_sparse(self, grad, var):
        raise NotImplementedError()

    def _apply_sparse_duplicate_indices(self, grad, var):
        """Sum gradient rows that share an index, then ``_apply_sparse`` (TF1's default).

        The built-in optimizers skip this: their fused sparse kernels sum repeats themselves.
        """
        unique_indices, positions = array_ops.unique(grad.indices)
        summed = math_ops.unsorted_segment_sum(grad.values, positions,
                                               array_ops.shape(unique_indices)[0])
        return self._apply_sparse(IndexedSlices(summed, unique_indices, grad.dense_shape), var)

    def _finish(self, update_ops, name_scope):
        return control_flow_ops.group(*update_ops, name=name_scope)

    # --- slots ---------------------------------------------------------------------------
    def _slot_dict(self, slot_name) -> dict:
        return self._slots.setdefault(slot_name, {})

    def _get_or_make_slot(self, var, val, slot_name, op_name):
        named = self._slot_dict(slot_name)
        if _var_key(var) not in named:
            named[_var_key(var)] = self._restored(
                slot_name, var, slot_creator.create_slot(var, val, op_name))
        return named[_var_key(var)]

    def _get_or_make_slot_with_initializer(self, var, initializer, shape, dtype, slot_name,
                                           op_name):
        named = self._slot_dict(slot_name)
        if _var_key(var) not in named:
            named[_var_key(var)] = self._restored(
                slot_name, var, slot_creator.create_slot_with_initializer(
                    var, initializer, shape, dtype, op_name))
        return named[_var_key(var)]

    def _zeros_slot(self, var, slot_name, op_name):
        named = self._slot_dict(slot_name)
        if _var_key(var) not in named:
            named[_var_key(var)] = self._restored(
                slot_name, var, slot_creator.create_zeros_slot(var, op_name))
        return named[_var_key(var)]

    def _create_non_slot_variable(self, initial_value, name, colocate_with):
        """A variable shared by all of this optimizer's updates in one graph."""
        key = (name, colocate_with.graph)
        v = self._non_slot_dict.get(key)
        if v is None:
            with _ops.colocate_with(colocate_with.op), _ops.control_dependencies(None):
                # Of the kind of the variable it sits with, as TF makes it.
                v = _variables.Variable(initial_value, name=name, trainable=False,
                                        use_resource=getattr(colocate_with, "_is_resource", False))
            self._non_slot_dict[key] = self._restored(name, None, v)
        return v

    def _restored(self, name, var, made):
        """``made`` (the slot ``name`` of ``var``; ``var`` None: the non-slot variable
        ``name``), given its value from a checkpoint restored before it was made, if one
        holds it (TF's deferred restoration of slots: dflab.train.object_checkpoint)."""
        for restoration, path in list(self.__dict__.get("_dflab_restorations", ())):
            restoration.restore_slot(path, name, var, made)
        return made

    def _get_non_slot_variable(self, name, graph=None):
        # A traced function's graph keeps no state: its variables live in the graph (or eager
        # context) it was traced from, as TF's init_scope puts them.
        while getattr(graph, "is_function_graph", False):
            graph = graph.outer_graph
        return self._non_slot_dict.get((name, graph))

    def _non_slot_variables(self):
        return list(self._non_slot_dict.values())

    # --- helpers -------------------------------------------------------------------------
    @staticmethod
    def _call_if_callable(param):
        return param() if callable(param) else param

    def _valid_dtypes(self):
        return {_dt.float16, _dt.float32, _dt.float64}

    def _assert_valid_dtypes(self, tensors) -> None:
        valid = self._valid_dtypes()
        for t in tensors:
            dtype = t.dtype.base_dtype
            if dtype not in valid:
                raise ValueError(f"Invalid type {dtype.name} for {t.name}, expected: "
                                 f"{sorted(d.name for d in valid)}.")

    def _cast(self, value, var):
        """A hyper-parameter tensor in the variable's dtype."""
        return math_ops.cast(value, var.dtype.base_dtype)


def _gate_all(grads):
    """GATE_GRAPH: no gradient is available before all of them are computed."""
    dense = [g for g in grads if isinstance(g, _ops.Tensor)]
    sparse = [g for g in grads if isinstance(g, IndexedSlices)]
    deps = dense + [g.values for g in sparse] + [g.indices for g in sparse]
    if not deps:
        return grads
    gate = control_flow_ops.group(*deps)
    out = []
    for g in grads:
        if g is None:
            out.append(None)
        elif isinstance(g, IndexedSlices):
            out.append(IndexedSlices(control_flow_ops.with_dependencies([gate], g.values),
                                     control_flow_ops.with_dependencies([gate], g.indices),
                                     g.dense_shape))
        else:
            out.append(control_flow_ops.with_dependencies([gate], g))
    return out
