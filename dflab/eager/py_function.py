"""``tf.py_function``: a Python function run eagerly as one op of a graph (``EagerPyFunc``).

Unlike ``py_func``'s NumPy arrays, the function receives eager tensors and may use any op on
them; what it returns is converted to the declared dtypes (``Tout``). The op is
differentiable once, as TF's: when ``tf.gradients`` builds its gradient, each later run of the
function records its ops on a ``GradientTape``, kept under the op's token until the gradient op
(another ``EagerPyFunc``, run after the forward op) pops it and asks the tape for the
gradients of the inputs. Ops and kernels live below this layer (``ops/script_ops.py``,
``kernels/script_kernels.py``); the eager half of the op is here.
"""

from __future__ import annotations

import functools
import threading

from dflab.eager import context as _context
from dflab.eager.backprop import GradientTape
from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.registry import RegisterGradient
from dflab.ops import array_ops as _array_ops
from dflab.ops import resource_variable_ops as _rv
from dflab.ops import script_ops as _script_ops

# token -> (tape, eager inputs, eager outputs) of the function's latest run, for its gradient.
_tape_cache: dict = {}
_tape_lock = threading.Lock()


class _EagerFunc:
    """What the kernel calls: ``func`` run eagerly on the inputs' values."""

    def __init__(self, func, tout: list, is_grad_func: bool):
        self._func = func
        self._tout = tout
        self._is_grad_func = is_grad_func
        self.token = None  # set once the op exists
        self.record_tape = False  # set when a gradient of the op is built

    def __call__(self, *values):
        with _context.eager_mode():
            ctx = _ops.get_default_graph()
            args = [ctx.from_numpy(v) for v in values]
            if not (self.record_tape or _eager_tape_recording()):
                return self._outputs(self._func(*args))
            with GradientTape() as tape:
                for a in args:
                    if a.dtype.is_floating or a.dtype.is_complex:
                        tape.watch(a)
                result = self._func(*args)
            outputs = self._convert_all(result)
            with _tape_lock:
                _tape_cache[self.token] = (tape, args, outputs)
            return self._values(outputs)

    def _convert(self, value, dtype):
        if _rv.is_resource_variable(value):
            raise RuntimeError(
                "Attempting to return a variable from an eagerly executed py_func. Only "
                "numeric data structures like Tensors or NumPy arrays should be returned; to "
                "return the value of a variable, make sure to obtain the Tensor backing it by "
                f"calling `.read_value()` on the variable in question: {value}")
        if value is None and self._is_grad_func:
            # A gradient function may return None for an input it does not reach: zeros.
            return _ops.convert_to_tensor(0, dtype=dtype)
        return _ops.convert_to_tensor(value, dtype=dtype)

    def _convert_all(self, result):
        if isinstance(result, (list, tuple)):
            return [self._convert(v, dt) for v, dt in zip(result, self._tout)]
        if result is None:
            return None
        return self._convert(result, self._tout[0])

    def _outputs(self, result):
        return self._values(self._convert_all(result))

    @staticmethod
    def _values(outputs):
        if outputs is None:
            return None
        if isinstance(outputs, list):
            return [t._numpy() for t in outputs]  # the values themselves: no copy
        return outputs._numpy()


def _eager_tape_recording() -> bool:
    """Whether a ``GradientTape`` records eager ops (which may want this op's gradient)."""
    return any(getattr(t, "_graph", True) is None for t in list(_context._TAPES))


def _build(func, inp, tout, name, is_grad_func=False):
    single = not isinstance(tout, (list, tuple))
    dtypes = [_dt.as_dtype(t) for t in ([tout] if single else tout)]
    if not callable(func):
        raise ValueError(f"Expected func to be callable. Received func={func} of type "
                         f"{type(func)}.")
    wrapper = _EagerFunc(func, dtypes, is_grad_func)

    def on_token(token):
        wrapper.token = token

    return _script_ops.script_op("EagerPyFunc", wrapper, inp,
                                 dtypes if not single else dtypes[0], name or "EagerPyFunc",
                                 on_token=on_token)


def py_function(func=None, inp=None, Tout=None, name=None):  # noqa: N803 - TF's argument name
    """Wrap ``func`` (called with eager tensors) as an op of the graph (TF's
    ``tf.py_function``). ``Tout`` is a dtype (one output), a list of dtypes, or ``[]`` (the op
    is returned). Without ``func`` it is a decorator."""
    if Tout is None:
        raise TypeError("Missing required argument: 'Tout'\n  If using tf.py_function as a "
                        "decorator, set `Tout`:\n  `@tf.py_function(Tout=tout)`")
    if func is None:
        if inp is not None:
            raise TypeError("Don't set the `inp` argument when using tf.py_function as a "
                            "decorator (`func=None`).")

        def decorator(fun):
            @functools.wraps(fun)
            def wrapper(*args):
                return py_function(fun, inp=args, Tout=Tout, name=name)

            return wrapper

        return decorator
    if inp is None:
        raise TypeError("Missing argument `inp`:\n  You must set the `inp` argument (the list "
                        "of arguments to the\n  function), unless you use `tf.py_function` as "
                        "a decorator(`func=None`).")
    return _build(func, inp, Tout, name)


eager_py_func = py_function


@RegisterGradient("EagerPyFunc")
def _eager_py_func_grad(op, *dy):
    token = op.get_attr("token")
    forward = _script_ops.registered_function(token)
    if isinstance(forward, _EagerFunc):
        forward.record_tape = True

    def eagerly_executed_grad(*grads):
        with _tape_lock:
            tape, inputs, outputs = _tape_cache.pop(token)
        return tape.gradient(outputs, inputs, output_gradients=list(grads))

    # An output nothing differentiates gets no gradient: zeros, as the tape wants a value.
    dy = [g if g is not None else _array_ops.zeros_like(y) for g, y in zip(dy, op.outputs)]
    with _ops.control_dependencies(op.outputs):
        return _build(eagerly_executed_grad, dy, [t.dtype for t in op.inputs],
                      None, is_grad_func=True)


__all__ = ["py_function"]
