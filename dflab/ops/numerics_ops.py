"""``CheckNumerics`` and the checks built on it: ``check_numerics``,
``verify_tensor_all_finite`` (``tf.debugging.assert_all_finite``) and
``add_check_numerics_ops``.

``CheckNumerics`` passes its float input through and fails the step with
``InvalidArgumentError`` ("<message> : Tensor had NaN values") when it holds a NaN or an
infinity; its gradient checks the gradient the same way, as TF's does. Kernel in
``dflab.kernels.logging_kernels``.
"""

from __future__ import annotations

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.registry import RegisterGradient, register_op
from dflab.ops import control_flow_ops

_FLOATS = (_dt.float16, _dt.float32, _dt.float64)


def _check_numerics_infer(op):
    x = op.inputs[0]
    if x.dtype.base_dtype not in _FLOATS:
        raise TypeError(f"Value passed to parameter 'tensor' has DataType "
                        f"{x.dtype.base_dtype.name} not in list of allowed values: float16, "
                        "float32, float64")
    return [(x.dtype.base_dtype, x.shape)]


# Stateful, as in TF: a check must never be folded away or merged with another.
register_op("CheckNumerics", _check_numerics_infer, stateful=True)


@RegisterGradient("CheckNumerics")
def _check_numerics_grad(op, grad):
    message = op.get_attr("message")
    return [check_numerics(grad, "Not a number (NaN) or infinity (Inf) values detected in "
                                 f"gradient. {message}")]


def check_numerics(tensor, message, name=None):
    """``tensor``, failing the step when it holds a NaN or an infinity."""
    if isinstance(message, bytes):
        message = message.decode()
    return _ops.apply_op_output("CheckNumerics", [tensor], {"message": str(message)}, name)


def verify_tensor_all_finite(t=None, msg=None, name=None, x=None, message=None):
    """``t`` after a ``check_numerics`` of it (a control dependency): the same tensor, with
    a step that fails when it holds a NaN or an infinity."""
    t = x if t is None else t
    msg = message if msg is None else msg
    with _ops.name_scope(name, "VerifyFinite", [t]):
        t = _ops.convert_to_tensor(t, name="x")
        with _ops.colocate_with(t):
            check = check_numerics(t, message=msg)
            return control_flow_ops.with_dependencies([check], t)


def add_check_numerics_ops():
    """A ``check_numerics`` on every half, float and double tensor of the default graph,
    chained by control dependencies in the order the ops were made (so a tensor's inputs are
    checked before it); returns the group that runs them all."""
    checks = []
    for op in _ops.get_default_graph().get_operations():
        for output in op.outputs:
            if output.dtype.base_dtype not in _FLOATS:
                continue
            if op.control_flow_context is not None:
                raise ValueError("`tf.add_check_numerics_ops() is not compatible with "
                                 "TensorFlow control flow operations such as `tf.cond()` or "
                                 "`tf.while_loop()`.")
            with _ops.control_dependencies(checks):
                checks = [check_numerics(output, message=f"{op.name}:{output.value_index}")]
    return control_flow_ops.group(*checks)


__all__ = ["check_numerics", "verify_tensor_all_finite", "add_check_numerics_ops"]
