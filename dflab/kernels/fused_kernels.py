"""Fused elementwise kernels: one kernel for a whole group of elementwise ops.

The fusion pass (``dflab.runtime.fusion``) describes each group it fuses as a
``FusedExpression``: numbered inputs, *steps* that each apply one elementwise op type to inputs or
to earlier steps (a DAG: a step may be read several times, as in ``x * sigmoid(x)``), and
optionally a final reduction of the last step. From that one description this module builds

* a **NumPy evaluator**, the ``_FusedElementwise`` kernel of CPU devices and the reference the
  tests check the pass and the GPU kernels against. Each step calls exactly the NumPy function
  the unfused op's CPU kernel calls, so fused and unfused results are bit-identical; a step whose
  function is a ufunc writes into a temporary of an earlier step that dies there when shapes and
  dtypes allow, so a chain of n ops allocates about one array instead of n;
* **CUDA C source**: the steps become a ``__device__`` function computing in ``float`` (with
  ``expf`` and the other float math functions; ``double`` for float64), which the GPU's kernel
  (``dflab.kernels.cuda.fused``) maps over the inputs in an NVRTC program of its own, or a CuPy
  ``ElementwiseKernel`` (``ReductionKernel`` when the group ends in a reduction) where the
  inputs broadcast in other ways. Kernels are compiled once per structure and dtypes and
  cached (``kernel_cache_key``).

Only floating-point groups are fused (every input and step of one dtype), which keeps C
arithmetic and NumPy's type rules the same. The source is generated from the table below and
integer indices only: no name, attribute or string from a graph reaches the CUDA compiler.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass

import numpy as np

from dflab.framework import errors
from dflab.framework.dtypes import as_dtype, int32
from dflab.framework.graph_io import NodeDef
from dflab.kernels.registry import get_kernel_def, kernel, registered_fn


@dataclass(frozen=True)
class ElementwiseOp:
    """How one elementwise op type is evaluated in a fused kernel."""

    arity: int
    cuda: str  # a C expression over {0}, {1} (the arguments, already in the compute type)
    ufunc: np.ufunc | None = None  # the CPU kernel *is* this ufunc: it may write in place


# NaN handling follows NumPy (the CPU kernels): maximum/minimum/relu propagate NaN.
ELEMENTWISE: dict[str, ElementwiseOp] = {
    "AddV2": ElementwiseOp(2, "({0} + {1})", np.add),
    "BiasAdd": ElementwiseOp(2, "({0} + {1})", np.add),  # fused only where it is a trailing add
    "Sub": ElementwiseOp(2, "({0} - {1})", np.subtract),
    "Mul": ElementwiseOp(2, "({0} * {1})", np.multiply),
    "RealDiv": ElementwiseOp(2, "({0} / {1})"),
    "Maximum": ElementwiseOp(2, "(({0} > {1} || isnan({0})) ? {0} : {1})", np.maximum),
    "Minimum": ElementwiseOp(2, "(({0} < {1} || isnan({0})) ? {0} : {1})", np.minimum),
    "Pow": ElementwiseOp(2, "pow({0}, {1})"),
    "SquaredDifference": ElementwiseOp(2, "(({0} - {1}) * ({0} - {1}))"),
    "ReluGrad": ElementwiseOp(2, "({0} * ({1} > 0))"),
    "SigmoidGrad": ElementwiseOp(2, "({1} * {0} * (1 - {0}))"),
    "TanhGrad": ElementwiseOp(2, "({1} * (1 - {0} * {0}))"),
    "Neg": ElementwiseOp(1, "(-{0})", np.negative),
    "Abs": ElementwiseOp(1, "fabs({0})", np.abs),
    "Sign": ElementwiseOp(1, "({0} > 0 ? 1 : ({0} < 0 ? -1 : {0}))", np.sign),
    "Square": ElementwiseOp(1, "({0} * {0})", np.square),
    "Floor": ElementwiseOp(1, "floor({0})", np.floor),
    "Ceil": ElementwiseOp(1, "ceil({0})", np.ceil),
    "Round": ElementwiseOp(1, "rint({0})"),
    "Sin": ElementwiseOp(1, "sin({0})", np.sin),
    "Cos": ElementwiseOp(1, "cos({0})", np.cos),
    "Tanh": ElementwiseOp(1, "tanh({0})", np.tanh),
    "Sqrt": ElementwiseOp(1, "sqrt({0})"),
    "Rsqrt": ElementwiseOp(1, "rsqrt({0})"),
    "Reciprocal": ElementwiseOp(1, "(1 / {0})"),
    "Exp": ElementwiseOp(1, "exp({0})"),
    "Log": ElementwiseOp(1, "log({0})"),
    "Log1p": ElementwiseOp(1, "log1p({0})"),
    "Sigmoid": ElementwiseOp(1, "(1 / (1 + exp(-{0})))"),
    "Relu": ElementwiseOp(1, "({0} < 0 ? 0 : {0})"),
    "Relu6": ElementwiseOp(1, "({0} < 0 ? 0 : ({0} > 6 ? 6 : {0}))"),
    "Elu": ElementwiseOp(1, "({0} > 0 ? {0} : expm1({0}))"),
    "Softplus": ElementwiseOp(1, "(fmax({0}, 0) + log1p(exp(-fabs({0}))))"),
    "Softsign": ElementwiseOp(1, "({0} / (fabs({0}) + 1))"),
}

# Reductions a fused group may end in: (CUDA reduce expression, identity, post-map expression).
# Max and Min start from -inf/+inf (CUDA's math_constants.h, per compute type, see _INF): an
# empty identity would make CuPy start from 0, and TF's value of an empty max is -inf.
REDUCTIONS: dict[str, tuple[str, str, str]] = {
    "Sum": ("a + b", "0", "out0 = a"),
    "Prod": ("a * b", "1", "out0 = a"),
    "Max": ("(a > b || isnan(a)) ? a : b", "-{inf}", "out0 = a"),
    "Min": ("(a < b || isnan(a)) ? a : b", "{inf}", "out0 = a"),
    "Mean": ("a + b", "0", "out0 = a / (_type_reduce)(_in_ind.size() / _out_ind.size())"),
}

FUSIBLE_DTYPES = ("float16", "float32", "float64")
_C_TYPE = {"float16": "float", "float32": "float", "float64": "double"}
_ARRAY_C_TYPE = {"float16": "float16", "float32": "float", "float64": "double"}
_INF = {"float": "CUDART_INF_F", "double": "CUDART_INF"}


@dataclass(frozen=True)
class FusedExpression:
    """A fused group's computation, independent of any graph.

    ``steps[j] = (op_type, args)``; an argument ``a < n_inputs`` is input ``a``, otherwise the
    result of step ``a - n_inputs``. The last step is the result, reduced by ``reduction``
    (``(op_type, keep_dims)``) if set; a reduction's axes are the input after the elementwise
    ones.
    """

    n_inputs: int
    steps: tuple
    dtype: str
    reduction: tuple | None = None

    def __post_init__(self):
        for j, (op_type, args) in enumerate(self.steps):
            spec = ELEMENTWISE.get(op_type)
            if spec is None or len(args) != spec.arity:
                raise ValueError(f"step {j}: {op_type} with {len(args)} arguments cannot be fused")
            if any(not 0 <= a < self.n_inputs + j for a in args):
                raise ValueError(f"step {j} reads a value that is not computed before it")
        if self.reduction is not None and self.reduction[0] not in REDUCTIONS:
            raise ValueError(f"{self.reduction[0]} cannot end a fused group")
        if self.dtype not in FUSIBLE_DTYPES:
            raise ValueError(f"fused kernels compute in floating point, not {self.dtype}")

    @property
    def kernel_cache_key(self) -> tuple:
        """Equal for groups that compile to the same kernel (structure and dtypes)."""
        return (self.n_inputs, self.steps, self.dtype,
                self.reduction[0] if self.reduction else None)

    def to_attr(self) -> dict:
        """This expression as plain attribute values (lists, strings, ints)."""
        return {"n_inputs": self.n_inputs, "dtype": self.dtype,
                "steps": [[op_type, list(args)] for op_type, args in self.steps],
                "reduction": list(self.reduction) if self.reduction else None}

    @classmethod
    def from_attr(cls, data: dict) -> FusedExpression:
        """The inverse of ``to_attr``; a malformed definition raises ``ValueError``."""
        try:
            red = data["reduction"]
            return cls(int(data["n_inputs"]),
                       tuple((str(t), tuple(int(a) for a in args)) for t, args in data["steps"]),
                       str(data["dtype"]), (str(red[0]), bool(red[1])) if red else None)
        except (KeyError, IndexError, TypeError) as e:
            raise ValueError(f"malformed fused expression: {e!r}") from None

    def describe(self) -> str:
        """One line per step, as the graph views and traces show a fused node's body."""
        def ref(a):
            return f"in{a}" if a < self.n_inputs else f"t{a - self.n_inputs}"

        lines = [f"t{j} = {t}({', '.join(map(ref, args))})" for j, (t, args) in
                 enumerate(self.steps)]
        if self.reduction:
            lines.append(f"out = {self.reduction[0]}(t{len(self.steps) - 1}, "
                         f"axes=in{self.n_inputs}, keep_dims={self.reduction[1]})")
        return "; ".join(lines)


def fused_members(attrs: dict) -> list[NodeDef]:
    """The node defs of the ops a fused node replaced (name, type, creation site), from its
    attributes: what its errors name where the user's graph is not at hand."""
    names = attrs.get("fused_ops") or ()
    sites = attrs.get("_fused_sites") or [""] * len(names)
    return [NodeDef(n, t, site=s) for n, t, s in zip(names, attrs.get("fused_types", ()), sites)]


def _reduction_def(member: NodeDef, expr: FusedExpression) -> NodeDef:
    """The typed node def of a fused group's final reduction, for its own kernel."""
    op_type, keep_dims = expr.reduction
    return NodeDef(member.name, op_type, attr={"keep_dims": keep_dims}, site=member.site,
                   input_types=(as_dtype(expr.dtype), int32))


# --- NumPy evaluator --------------------------------------------------------------------------
def _numpy_fn(op_type: str):
    spec = ELEMENTWISE[op_type]
    return spec.ufunc if spec.ufunc is not None else registered_fn(op_type)


def _last_uses(expr: FusedExpression) -> list[tuple]:
    """Per step, the earlier steps (as value indices) whose last reader it is."""
    last: dict[int, int] = {}
    for j, (_, args) in enumerate(expr.steps):
        for a in args:
            if a >= expr.n_inputs:
                last[a] = j
    dying: list[list[int]] = [[] for _ in expr.steps]
    for a, j in last.items():
        dying[j].append(a)
    return [tuple(d) for d in dying]


def _out_buffer(values, owned, dying, args):
    """A temporary of this step's arguments that dies here and can hold the result, or None."""
    for a in dying:
        buf = values[a]
        if not owned[a] or a not in args:
            continue
        others = [values[b] for b in args if b != a]
        if all(np.ndim(o) <= buf.ndim and np.broadcast_shapes(buf.shape, np.shape(o)) == buf.shape
               for o in others):
            return buf
    return None


class FusedStepError(Exception):
    """Step ``step`` of a fused evaluation failed with ``error`` (e.g. shapes that do not
    broadcast): the kernel reports it as the error of the op that step stands for."""

    def __init__(self, step: int, error: Exception):
        super().__init__(step, error)
        self.step = step
        self.error = error


def numpy_evaluator(expr: FusedExpression, reduce=None):
    """``fn(*inputs)`` computing ``expr`` with NumPy; ``reduce(x, axes)`` is the reduction's
    CPU kernel when the group ends in one."""
    n = expr.n_inputs
    plan = []
    for (op_type, args), dying in zip(expr.steps, _last_uses(expr)):
        spec = ELEMENTWISE[op_type]
        plan.append((_numpy_fn(op_type), spec.ufunc is not None, args, dying))
    last = n + len(expr.steps) - 1

    def evaluate(*inputs):
        values = list(inputs[:n]) + [None] * len(plan)
        owned = [False] * len(values)
        with np.errstate(all="ignore"):  # TF returns inf/NaN silently, as the CPU kernels do
            for j, (fn, is_ufunc, args, dying) in enumerate(plan):
                argv = [values[a] for a in args]
                out = _out_buffer(values, owned, dying, args) if is_ufunc else None
                try:
                    if out is not None:
                        result = fn(*argv, out=out)
                    else:
                        result = fn(*argv)
                except (ValueError, TypeError) as e:
                    raise FusedStepError(j, e) from None
                # Only a ufunc's result is certainly a fresh array (never an input's view).
                owned[n + j] = out is not None or (is_ufunc and isinstance(result, np.ndarray))
                values[n + j] = result
                for a in dying:  # release what no later step reads
                    values[a] = None
            result = values[last]
            if reduce is not None:
                return reduce(result, inputs[n])
        return result if isinstance(result, np.ndarray) else np.asarray(result)

    return evaluate


def reduction_axes_input(node_def) -> tuple[int, ...]:
    """A group ending in a reduction reads the reduction's axes, its last input, in host
    memory (TF keeps reduction indices there); a plain group reads nothing on the host."""
    expr = FusedExpression.from_attr(node_def.attr["_fused_expression"])
    return (expr.n_inputs,) if expr.reduction is not None else ()


@kernel("_FusedElementwise", host_memory_inputs=reduction_axes_input)
def _fused_cpu(node, ctx):
    expr = FusedExpression.from_attr(node.attr["_fused_expression"])
    members = fused_members(node.attr)
    reduce = None
    if expr.reduction is not None:
        red = _reduction_def(members[-1], expr)
        reduce = get_kernel_def(red, "CPU").factory(red, ctx)
    evaluate = numpy_evaluator(expr, reduce)

    def fused(*inputs):
        try:
            return evaluate(*inputs)
        except FusedStepError as e:
            member = members[e.step]  # the runtime points this at the user's op
            raise errors.InvalidArgumentError(
                None, member, f"{type(e.error).__name__}: {e.error} (in fused node {node.name})"
            ) from None

    return fused


# --- CUDA source and CuPy kernels ---------------------------------------------------------------
# float versions of the math functions the table uses: float code never goes through double.
_FLOAT_MATH = re.compile(r"\b(exp|expm1|log|log1p|tanh|sin|cos|sqrt|rsqrt|floor|ceil|rint|fabs|"
                         r"fmax|fmin|pow)\(")


def _float_math(text: str) -> str:
    """``text`` with float math: ``expf`` for ``exp``, and integer literals are exact."""
    return _FLOAT_MATH.sub(lambda m: f"{m.group(1)}f(", text)


def cuda_function(expr: FusedExpression, name: str = "fused") -> str:
    """The steps as one ``__device__`` function of the inputs, in the compute type (float for
    float32 and float16 data, with the float math functions: ``expf``, ``tanhf``...)."""
    ct = _C_TYPE[expr.dtype]
    params = ", ".join(f"{ct} in{k}" for k in range(expr.n_inputs))
    body = []
    for j, (op_type, args) in enumerate(expr.steps):
        refs = [f"in{a}" if a < expr.n_inputs else f"t{a - expr.n_inputs}" for a in args]
        text = ELEMENTWISE[op_type].cuda.format(*refs)
        if ct == "float":
            text = _float_math(text)
        body.append(f"  const {ct} t{j} = {text};")
    body.append(f"  return t{len(expr.steps) - 1};")
    return f"__device__ {ct} {name}({params}) {{\n" + "\n".join(body) + "\n}\n"


def cuda_kernel_args(expr: FusedExpression) -> dict:
    """Keyword arguments of the CuPy ``ElementwiseKernel``/``ReductionKernel`` for ``expr``."""
    ct = _C_TYPE[expr.dtype]
    in_params = ", ".join(f"{expr.dtype} in{k}" for k in range(expr.n_inputs))
    call = f"fused({', '.join(f'({ct})in{k}' for k in range(expr.n_inputs))})"
    args = {"in_params": in_params, "out_params": f"{expr.dtype} out0",
            "preamble": cuda_function(expr), "name": "dflab_fused"}
    if expr.reduction is None:
        args["operation"] = f"out0 = {call}"
        return args
    reduce_expr, identity, post_map = REDUCTIONS[expr.reduction[0]]
    # CuPy reduces one contiguous input through CUB (its default accelerator) with a template
    # that names the input's and output's types as its own simple reductions declare them;
    # declared here too (C++ allows a typedef repeated with the same type). The arrays' element
    # type, not the compute type: a float16 array holds CuPy's float16.
    raw = _ARRAY_C_TYPE[expr.dtype]
    args["preamble"] += f"typedef {raw} type_in0_raw;\ntypedef {raw} type_out0_raw;\n"
    args.update(map_expr=call, reduce_expr=reduce_expr, post_map_expr=post_map,
                identity=identity.format(inf=_INF[ct]), reduce_type=ct)
    return args


_CUPY_KERNELS: dict[tuple, object] = {}
_CUPY_LOCK = threading.Lock()
# Generated device functions and the expression each computes: what a stand-in for CuPy runs
# in place of the CUDA C (``expression_for``).
_EXPRESSIONS: dict[str, FusedExpression] = {}


def expression_for(preamble: str) -> FusedExpression | None:
    """The expression whose generated ``__device__`` function is ``preamble``."""
    return _EXPRESSIONS.get(preamble)


def cupy_kernel(expr: FusedExpression, cupy):
    """The compiled CuPy kernel of ``expr``, shared by every group of the same structure."""
    key = expr.kernel_cache_key
    k = _CUPY_KERNELS.get(key)
    if k is None:
        with _CUPY_LOCK:
            k = _CUPY_KERNELS.get(key)
            if k is None:
                args = cuda_kernel_args(expr)
                _EXPRESSIONS[args["preamble"]] = expr
                cls = cupy.ElementwiseKernel if expr.reduction is None else cupy.ReductionKernel
                k = _CUPY_KERNELS[key] = cls(**args)
    return k
