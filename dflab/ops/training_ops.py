"""Fused optimizer updates (TF's ``training_ops``): one stateful op per optimizer step on a
variable and its slots.

Every op takes the variable and its slot variables (accumulators, moments) as *references*
(``ref_inputs``), then the hyper-parameters as scalars and the gradient; it updates them all in
one kernel (under their locks when ``use_locking``) and outputs the variable's reference. The
``Sparse*`` variants take the gradient as rows ``grad[i]`` for ``var[indices[i]]`` and touch only
those rows (repeated indices are summed first, as TF1's optimizers do before calling them).

``SparseApplyAdam`` is dflab's fused form of TF1 ``AdamOptimizer._apply_sparse``: decay m and v
everywhere, add the gradient terms to the given rows, update the whole variable.
TF1 does not expose these builders at top level, so ``__all__`` is empty.
"""

from __future__ import annotations

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.registry import NotDifferentiable, register_op
from dflab.framework.tensor_shape import TensorShape
from dflab.ops.op_util import variable_dtype_shape
from dflab.ops.state_ops import _ref_of

# op type -> (ref input names, value input names). Value names ending in "grad" are gradients,
# "indices" the sparse rows; every other value input is a scalar hyper-parameter.
_SIGNATURES = {
    "ApplyGradientDescent": (("var",), ("alpha", "delta")),
    "ApplyMomentum": (("var", "accum"), ("lr", "grad", "momentum")),
    "SparseApplyMomentum": (("var", "accum"), ("lr", "grad", "indices", "momentum")),
    "ApplyAdagrad": (("var", "accum"), ("lr", "grad")),
    "SparseApplyAdagrad": (("var", "accum"), ("lr", "grad", "indices")),
    "ApplyRMSProp": (("var", "ms", "mom"), ("lr", "rho", "momentum", "epsilon", "grad")),
    "SparseApplyRMSProp": (("var", "ms", "mom"),
                           ("lr", "rho", "momentum", "epsilon", "grad", "indices")),
    "ApplyCenteredRMSProp": (("var", "mg", "ms", "mom"),
                             ("lr", "rho", "momentum", "epsilon", "grad")),
    "SparseApplyCenteredRMSProp": (("var", "mg", "ms", "mom"),
                                   ("lr", "rho", "momentum", "epsilon", "grad", "indices")),
    "ApplyAdam": (("var", "m", "v"), ("beta1_power", "beta2_power", "lr", "beta1", "beta2",
                                      "epsilon", "grad")),
    "SparseApplyAdam": (("var", "m", "v"), ("beta1_power", "beta2_power", "lr", "beta1",
                                            "beta2", "epsilon", "grad", "indices")),
    "ApplyAdadelta": (("var", "accum", "accum_update"), ("lr", "rho", "epsilon", "grad")),
    "SparseApplyAdadelta": (("var", "accum", "accum_update"),
                            ("lr", "rho", "epsilon", "grad", "indices")),
    "ApplyProximalGradientDescent": (("var",), ("alpha", "l1", "l2", "delta")),
    "SparseApplyProximalGradientDescent": (("var",), ("alpha", "l1", "l2", "grad", "indices")),
    "ApplyProximalAdagrad": (("var", "accum"), ("lr", "l1", "l2", "grad")),
    "SparseApplyProximalAdagrad": (("var", "accum"), ("lr", "l1", "l2", "grad", "indices")),
    "ApplyFtrl": (("var", "accum", "linear"), ("grad", "lr", "l1", "l2", "lr_power")),
    "SparseApplyFtrl": (("var", "accum", "linear"),
                        ("grad", "indices", "lr", "l1", "l2", "lr_power")),
    "ApplyFtrlV2": (("var", "accum", "linear"),
                    ("grad", "lr", "l1", "l2", "l2_shrinkage", "lr_power")),
    "SparseApplyFtrlV2": (("var", "accum", "linear"),
                          ("grad", "indices", "lr", "l1", "l2", "l2_shrinkage", "lr_power")),
    "ApplyAdagradDA": (("var", "gradient_accumulator", "gradient_squared_accumulator"),
                       ("grad", "lr", "l1", "l2", "global_step")),
    "SparseApplyAdagradDA": (("var", "gradient_accumulator", "gradient_squared_accumulator"),
                             ("grad", "indices", "lr", "l1", "l2", "global_step")),
}

# Value inputs whose dtype is fixed rather than the variable's (AdagradDA's step counter).
_FIXED_DTYPES = {"global_step": _dt.int64}

_GRAD_NAMES = ("grad", "delta")


def signature(op_type: str):
    """(ref input names, value input names) of a training op (the kernels read this too)."""
    return _SIGNATURES[op_type]


def _state_of(op, name, t):
    """(dtype, shape) of the variable a training op updates through input ``t``: a reference,
    or (the ``Resource*`` forms) a resource handle, whose variable's are read off its
    ``VarHandleOp`` (None, unknown shape when it cannot be seen)."""
    if op.type.startswith("Resource"):
        if t.dtype.base_dtype is not _dt.resource:
            raise TypeError(f"'{op.type}' Op requires that input '{name}' be a resource handle "
                            f"(a resource variable), got {t.dtype.name}")
        return variable_dtype_shape(t)
    if not t.dtype.is_ref_dtype:
        raise TypeError(f"'{op.type}' Op requires that input '{name}' be a mutable tensor "
                        f"(e.g. a tf.Variable), got {t.dtype.name}")
    return t.dtype.base_dtype, t.shape


def _infer(op):
    """The checks of TF's training ops (both forms); the reference form outputs the variable's
    reference, the resource form nothing."""
    resource = op.type.startswith("Resource")
    refs, values = _SIGNATURES[op.type[len("Resource"):] if resource else op.type]
    names = refs + values
    ins = dict(zip(names, op.inputs))
    states = {r: _state_of(op, r, ins[r]) for r in refs}
    dt = states["var"][0] or ins["delta" if "delta" in ins else "grad"].dtype.base_dtype
    if not (dt.is_floating or dt.is_complex):
        raise TypeError(f"'{op.type}' Op does not support type {dt.name}: "
                        "expected a floating point or complex variable")
    for n in names:
        have = states[n][0] if n in states else ins[n].dtype.base_dtype
        if n in _FIXED_DTYPES:
            if have is not _FIXED_DTYPES[n]:
                raise TypeError(f"Input '{n}' of '{op.type}' Op has type {have.name} that "
                                f"does not match expected type of "
                                f"{_FIXED_DTYPES[n].name}.")
            continue
        if n != "indices" and have is not None and have is not dt:
            raise TypeError(f"Input '{n}' of '{op.type}' Op has type {have.name} that does "
                            f"not match type {dt.name} of argument 'var'.")
    shape = states["var"][1]
    for r in refs[1:]:
        if not shape.is_compatible_with(states[r][1]):
            raise ValueError(f"var and {r} do not have the same shape: {shape} vs "
                             f"{states[r][1]}")
        shape = shape.merge_with(states[r][1])
    for n in values:
        if n in _GRAD_NAMES or n == "indices":
            continue
        if ins[n].shape.ndims not in (None, 0):
            raise ValueError(f"{n} is not a scalar: {ins[n].shape}")
    grad_name = "delta" if "delta" in ins else "grad"
    grad = ins[grad_name]
    if "indices" in ins:
        _check_sparse_shapes(op.type, shape, grad.shape, ins["indices"])
    elif not shape.is_compatible_with(grad.shape):
        raise ValueError(f"var and {grad_name} do not have the same shape: {shape} vs "
                         f"{grad.shape}")
    else:
        shape = shape.merge_with(grad.shape)
    return [] if resource else [(dt._as_ref(), shape)]


def _check_sparse_shapes(op_type, var_shape: TensorShape, grad_shape: TensorShape, indices):
    if indices.dtype.base_dtype not in (_dt.int32, _dt.int64):
        raise TypeError(f"indices of '{op_type}' must be int32 or int64, got "
                        f"{indices.dtype.name}")
    if indices.shape.ndims not in (None, 1):
        raise ValueError(f"indices must be one-dimensional: {indices.shape}")
    if var_shape.ndims == 0:
        raise ValueError("var must be at least 1 dimensional")
    if grad_shape.ndims is not None and var_shape.ndims is not None:
        if grad_shape.ndims != var_shape.ndims:
            raise ValueError(f"var and grad must have the same rank: {var_shape} vs "
                             f"{grad_shape}")
        if not grad_shape[1:].is_compatible_with(var_shape[1:]):
            raise ValueError(f"var and grad must match in dimension 1 and up: {var_shape} vs "
                             f"{grad_shape}")
    if grad_shape.ndims is not None and indices.shape.ndims == 1:
        if not grad_shape[:1].is_compatible_with(indices.shape):
            raise ValueError(f"grad must be the same size as indices in the first dimension: "
                             f"{grad_shape} vs {indices.shape}")


for _op_type, (_refs, _values) in _SIGNATURES.items():
    register_op(_op_type, _infer, stateful=True, ref_inputs=tuple(range(len(_refs))))
    NotDifferentiable(_op_type)
    register_op("Resource" + _op_type, _infer, stateful=True).writes_handle = True
    NotDifferentiable("Resource" + _op_type)


def _apply(op_type, refs, values, attrs, name):
    """Build ``op_type`` on refs (Variables or ref tensors) and values converted to var's dtype."""
    refs = [_ref_of(r) for r in refs]
    if getattr(refs[0], "_is_resource", False):
        # The resource form: the same update on handles; it outputs nothing.
        op_type = "Resource" + op_type
        for r in refs[1:]:
            if not getattr(r, "_is_resource", False):
                # The resource form reads every slot through a handle: a mix is the caller's
                # mistake, as TF's "expected resource" error says.
                raise TypeError(f"'{op_type}' updates resource variables only: {r!r} is not "
                                f"a resource variable (as var is)")
        refs = [r.handle for r in refs]
    dt = (refs[0].op.get_attr("dtype") if op_type.startswith("Resource")
          else refs[0].dtype.base_dtype)
    names = _SIGNATURES[op_type.removeprefix("Resource")][1]
    converted = []
    for n, v in zip(names, values):
        if n == "indices":
            converted.append(_ops.convert_to_tensor(v, dtype=getattr(v, "dtype", None)
                                                    or _dt.int32))
            continue
        want = _FIXED_DTYPES.get(n, dt)
        if isinstance(v, _ops.Tensor) and v.dtype.base_dtype is not want:
            # A tensor is never converted: its type must be the op's (TF's op-building check).
            of = "expected type of" if n in _FIXED_DTYPES else "type"
            tail = "." if n in _FIXED_DTYPES else " of argument 'var'."
            raise TypeError(f"Input '{n}' of '{op_type}' Op has type {v.dtype.base_dtype.name} "
                            f"that does not match {of} {want.name}{tail}")
        converted.append(_ops.convert_to_tensor(v, dtype=want))
    op = _ops.apply_op(op_type, refs + converted, attrs, name)
    return op if op_type.startswith("Resource") else op.outputs[0]


def _locking(use_locking):
    return {"use_locking": bool(use_locking)}


def apply_gradient_descent(var, alpha, delta, use_locking=False, name=None):
    """var -= alpha * delta."""
    return _apply("ApplyGradientDescent", [var], [alpha, delta], _locking(use_locking), name)


def apply_momentum(var, accum, lr, grad, momentum, use_locking=False, use_nesterov=False,
                   name=None):
    """accum = accum * momentum + grad; var -= lr * accum (Nesterov: lr * (grad + momentum *
    accum))."""
    return _apply("ApplyMomentum", [var, accum], [lr, grad, momentum],
                  {**_locking(use_locking), "use_nesterov": bool(use_nesterov)}, name)


def sparse_apply_momentum(var, accum, lr, grad, indices, momentum, use_locking=False,
                          use_nesterov=False, name=None):
    return _apply("SparseApplyMomentum", [var, accum], [lr, grad, indices, momentum],
                  {**_locking(use_locking), "use_nesterov": bool(use_nesterov)}, name)


def apply_adagrad(var, accum, lr, grad, use_locking=False, update_slots=True, name=None):
    """accum += grad^2; var -= lr * grad / sqrt(accum)."""
    return _apply("ApplyAdagrad", [var, accum], [lr, grad],
                  {**_locking(use_locking), "update_slots": bool(update_slots)}, name)


def sparse_apply_adagrad(var, accum, lr, grad, indices, use_locking=False, update_slots=True,
                         name=None):
    return _apply("SparseApplyAdagrad", [var, accum], [lr, grad, indices],
                  {**_locking(use_locking), "update_slots": bool(update_slots)}, name)


def apply_rms_prop(var, ms, mom, lr, rho, momentum, epsilon, grad, use_locking=False,
                   name=None):
    """ms += (grad^2 - ms) * (1 - rho); mom = mom * momentum + lr * grad / sqrt(ms + epsilon);
    var -= mom."""
    return _apply("ApplyRMSProp", [var, ms, mom], [lr, rho, momentum, epsilon, grad],
                  _locking(use_locking), name)


def sparse_apply_rms_prop(var, ms, mom, lr, rho, momentum, epsilon, grad, indices,
                          use_locking=False, name=None):
    return _apply("SparseApplyRMSProp", [var, ms, mom],
                  [lr, rho, momentum, epsilon, grad, indices], _locking(use_locking), name)


def apply_centered_rms_prop(var, mg, ms, mom, lr, rho, momentum, epsilon, grad,
                            use_locking=False, name=None):
    """As RMSProp, with the mean gradient mg subtracted: denominator sqrt(ms - mg^2 + eps)."""
    return _apply("ApplyCenteredRMSProp", [var, mg, ms, mom],
                  [lr, rho, momentum, epsilon, grad], _locking(use_locking), name)


def sparse_apply_centered_rms_prop(var, mg, ms, mom, lr, rho, momentum, epsilon, grad, indices,
                                   use_locking=False, name=None):
    return _apply("SparseApplyCenteredRMSProp", [var, mg, ms, mom],
                  [lr, rho, momentum, epsilon, grad, indices], _locking(use_locking), name)


def apply_adam(var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad,
               use_locking=False, use_nesterov=False, name=None):
    """lr_t = lr * sqrt(1 - beta2^t) / (1 - beta1^t); m += (g - m)(1 - beta1);
    v += (g^2 - v)(1 - beta2); var -= lr_t * m / (sqrt(v) + epsilon)."""
    return _apply("ApplyAdam", [var, m, v],
                  [beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad],
                  {**_locking(use_locking), "use_nesterov": bool(use_nesterov)}, name)


def sparse_apply_adam(var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad,
                      indices, use_locking=False, name=None):
    return _apply("SparseApplyAdam", [var, m, v],
                  [beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad, indices],
                  _locking(use_locking), name)


def apply_adadelta(var, accum, accum_update, lr, rho, epsilon, grad, use_locking=False,
                   name=None):
    """accum = rho * accum + (1 - rho) * grad^2;
    update = sqrt(accum_update + epsilon) / sqrt(accum + epsilon) * grad; var -= lr * update;
    accum_update = rho * accum_update + (1 - rho) * update^2."""
    return _apply("ApplyAdadelta", [var, accum, accum_update], [lr, rho, epsilon, grad],
                  _locking(use_locking), name)


def sparse_apply_adadelta(var, accum, accum_update, lr, rho, epsilon, grad, indices,
                          use_locking=False, name=None):
    return _apply("SparseApplyAdadelta", [var, accum, accum_update],
                  [lr, rho, epsilon, grad, indices], _locking(use_locking), name)


def apply_proximal_gradient_descent(var, alpha, l1, l2, delta, use_locking=False, name=None):
    """prox_v = var - alpha * delta;
    var = sign(prox_v) * max(|prox_v| - alpha * l1, 0) / (1 + alpha * l2)."""
    return _apply("ApplyProximalGradientDescent", [var], [alpha, l1, l2, delta],
                  _locking(use_locking), name)


def sparse_apply_proximal_gradient_descent(var, alpha, l1, l2, grad, indices,
                                           use_locking=False, name=None):
    return _apply("SparseApplyProximalGradientDescent", [var], [alpha, l1, l2, grad, indices],
                  _locking(use_locking), name)


def apply_proximal_adagrad(var, accum, lr, l1, l2, grad, use_locking=False, name=None):
    """accum += grad^2; lr_t = lr / sqrt(accum); prox_v = var - lr_t * grad;
    var = sign(prox_v) * max(|prox_v| - lr_t * l1, 0) / (1 + lr_t * l2)."""
    return _apply("ApplyProximalAdagrad", [var, accum], [lr, l1, l2, grad],
                  _locking(use_locking), name)


def sparse_apply_proximal_adagrad(var, accum, lr, l1, l2, grad, indices, use_locking=False,
                                  name=None):
    return _apply("SparseApplyProximalAdagrad", [var, accum], [lr, l1, l2, grad, indices],
                  _locking(use_locking), name)


def apply_ftrl(var, accum, linear, grad, lr, l1, l2, lr_power, use_locking=False, name=None):
    """accum_new = accum + grad^2;
    linear += grad - (accum_new^-lr_power - accum^-lr_power) / lr * var;
    var = (sign(linear) * l1 - linear) / (accum_new^-lr_power / lr + 2 * l2) where
    |linear| > l1, else 0; accum = accum_new."""
    return _apply("ApplyFtrl", [var, accum, linear], [grad, lr, l1, l2, lr_power],
                  _locking(use_locking), name)


def sparse_apply_ftrl(var, accum, linear, grad, indices, lr, l1, l2, lr_power,
                      use_locking=False, name=None):
    return _apply("SparseApplyFtrl", [var, accum, linear],
                  [grad, indices, lr, l1, l2, lr_power], _locking(use_locking), name)


def apply_ftrl_v2(var, accum, linear, grad, lr, l1, l2, l2_shrinkage, lr_power,
                  use_locking=False, name=None):
    """FTRL with shrinkage: ``linear`` takes grad + 2 * l2_shrinkage * var (accum takes the
    plain gradient's square)."""
    return _apply("ApplyFtrlV2", [var, accum, linear],
                  [grad, lr, l1, l2, l2_shrinkage, lr_power], _locking(use_locking), name)


def sparse_apply_ftrl_v2(var, accum, linear, grad, indices, lr, l1, l2, l2_shrinkage, lr_power,
                         use_locking=False, name=None):
    return _apply("SparseApplyFtrlV2", [var, accum, linear],
                  [grad, indices, lr, l1, l2, l2_shrinkage, lr_power], _locking(use_locking),
                  name)


def apply_adagrad_da(var, gradient_accumulator, gradient_squared_accumulator, grad, lr, l1, l2,
                     global_step, use_locking=False, name=None):
    """g += grad; gg += grad^2 (the accumulators); with T = global_step (int64):
    var = -sign(g) * lr * max(|g| - l1 * T, 0) / (l2 * T * lr + sqrt(gg))."""
    return _apply("ApplyAdagradDA", [var, gradient_accumulator, gradient_squared_accumulator],
                  [grad, lr, l1, l2, global_step], _locking(use_locking), name)


def sparse_apply_adagrad_da(var, gradient_accumulator, gradient_squared_accumulator, grad,
                            indices, lr, l1, l2, global_step, use_locking=False, name=None):
    return _apply("SparseApplyAdagradDA",
                  [var, gradient_accumulator, gradient_squared_accumulator],
                  [grad, indices, lr, l1, l2, global_step], _locking(use_locking), name)


__all__ = []
