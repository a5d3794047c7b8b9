"""``_MultiApply``: all of one optimizer's dense resource-variable updates on a GPU in one
launch, as PyTorch's fused/foreach optimizers (``dflab.runtime.gpu_passes`` makes these nodes,
grouping the ``ResourceApply*`` nodes of one partition that share their scalars: learning rate,
decay powers, ...).

The node takes each member's variable and slot handles and its gradient, then the shared
scalars; its kernel holds every member's variable lock (in one order, by id, as the shared
kernels do), and launches one program whose blocks' second grid dimension picks the member:
the per-variable program's body (``optimizers``) over that member's buffers. Where a member's
buffers or gradient do not suit the program, each member runs its own kernel instead.

Like ``_FusedElementwise`` it is an op of plans only, never of a user's graph; its schema is
registered here with its kernel.
"""

from __future__ import annotations

import contextlib
import threading

import numpy as np

from dflab.framework.graph_io import NodeDef
from dflab.framework.registry import NotDifferentiable, register_op
from dflab.kernels.cuda import optimizers as O
from dflab.kernels.cuda import program as P
from dflab.kernels.registry import get_kernel_def, kernel
from dflab.kernels.state_kernels import unshare_locked
from dflab.ops.training_ops import signature

MULTI_APPLY = "_MultiApply"
# Resource update ops that group, with their per-variable programs and integer flags.
GROUPS = {
    "ResourceApplyGradientDescent": (O.SGD, lambda a: ()),
    "ResourceApplyMomentum": (O.MOMENTUM, lambda a: (bool(a.get("use_nesterov", False)),)),
    "ResourceApplyAdagrad": (O.ADAGRAD, lambda a: (bool(a.get("update_slots", True)),)),
    "ResourceApplyRMSProp": (O.RMS_PROP, lambda a: ()),
    "ResourceApplyAdam": (O.ADAM, lambda a: (bool(a.get("use_nesterov", False)),)),
}


def _infer(op):
    raise TypeError("_MultiApply nodes are made by the GPU's update-grouping pass, not built in "
                    "a graph")


register_op(MULTI_APPLY, _infer, stateful=True)
NotDifferentiable(MULTI_APPLY)


def layout(apply_type: str) -> tuple[int, int]:
    """(handles per member, scalars) of ``apply_type``'s inputs."""
    refs, values = signature(apply_type.removeprefix("Resource"))
    return len(refs), len(values) - 1  # every value but the gradient is a shared scalar


# --- the program ---------------------------------------------------------------------------
_PROGRAMS: dict[tuple, P.CudaProgram] = {}
_LOCK = threading.Lock()


def multi_program(single: P.CudaProgram, n_refs: int, members: int) -> P.CudaProgram:
    """``single`` (a per-variable update program: its ``n_refs`` buffers and the gradient, the
    scalars, ``n``, flags) over ``members`` variables at once."""
    key = (single.source, members)
    prog = _PROGRAMS.get(key)
    if prog is None:
        with _LOCK:
            prog = _PROGRAMS.get(key)
            if prog is None:
                prog = _PROGRAMS[key] = _make(single, n_refs, members)
    return prog


def _make(single, n_refs, members):
    per = single.params[:n_refs + 1]  # the variable, its slots, the gradient
    rest = single.params[n_refs + 1:]
    scalars = [p for p in rest if p.is_pointer]
    flags = [p for p in rest if not p.is_pointer and p.name != "n"]
    params = [P.Param(p.ctype, f"{p.name}_{k}") for k in range(members) for p in per]
    params += [P.Param("int", f"n_{k}") for k in range(members)]
    params += scalars + flags
    cases = "".join(
        f"    case {k}: " + " ".join(f"{p.name} = {p.name}_{k};" for p in per)
        + f" n = n_{k}; break;\n" for k in range(members))
    decls = "".join(f"  {p.ctype} {p.name};\n" for p in per)
    body = (decls + "  int n;\n  switch (blockIdx.y) {\n" + cases
            + "    default: return;\n  }\n" + single.body)
    width = n_refs + 1

    def reference(*args):
        tensors = args[:members * width]
        sizes = args[members * width:members * (width + 1)]
        tail = args[members * (width + 1):]
        for k in range(members):
            mine = tensors[k * width:(k + 1) * width]
            single.reference(*mine, *tail[:len(scalars)], sizes[k], *tail[len(scalars):])

    name = f"{single.name}_x{members}"
    return P.CudaProgram(name, tuple(params), body, reference, single.preamble)


# --- the kernel ----------------------------------------------------------------------------
@contextlib.contextmanager
def _locked(states):
    with contextlib.ExitStack() as stack:
        for s in sorted({id(s): s for s in states}.values(), key=id):
            stack.enter_context(s.lock)
        yield


def member_defs(node) -> list[NodeDef]:
    """The node defs of the updates ``node`` groups (what runs where the program cannot)."""
    apply_type = node.attr["apply_type"]
    n_refs, n_scalars = layout(apply_type)
    members = node.attr["members"]
    width = n_refs + 1
    scalar_types = node.input_types[len(members) * width:]
    refs, values = signature(apply_type.removeprefix("Resource"))
    grad_at = values.index("delta" if "delta" in values else "grad")
    out = []
    for k, name in enumerate(members):
        mine = node.input_types[k * width:(k + 1) * width]
        value_types = list(scalar_types)
        value_types.insert(grad_at, mine[-1])
        out.append(NodeDef(name, apply_type, attr=node.attr["member_attr"], site=node.site,
                           input_types=tuple(mine[:-1]) + tuple(value_types)))
    return out


@kernel(MULTI_APPLY, "GPU")
def _multi_apply_gpu(node, ctx):
    xp = ctx.xp
    apply_type = node.attr["apply_type"]
    family, flags_of = GROUPS[apply_type]
    n_refs, n_scalars = layout(apply_type)
    members = len(node.attr["members"])
    width = n_refs + 1
    flags = tuple(np.int32(f) for f in flags_of(node.attr["member_attr"]))
    defs = member_defs(node)
    _, values = signature(apply_type.removeprefix("Resource"))
    grad_at = values.index("delta" if "delta" in values else "grad")
    singles = [get_kernel_def(d, "GPU").factory(d, ctx) for d in defs]

    def one_by_one(inputs):
        scalars = list(inputs[members * width:])
        for k, run in enumerate(singles):
            mine = inputs[k * width:(k + 1) * width]
            values_k = list(scalars)
            values_k.insert(grad_at, mine[-1])
            run(*mine[:-1], *values_k)

    def multi_apply(*inputs):
        states = [inputs[k * width + j] for k in range(members) for j in range(n_refs)]
        grads = [inputs[k * width + n_refs] for k in range(members)]
        scalars = inputs[members * width:]
        with _locked(states):
            for s in states:
                unshare_locked(s, xp)
            arrays = [s.read() for s in states]
            var = arrays[0]
            prog = family.get(np.dtype(var.dtype).name)
            ok = prog is not None and all(
                isinstance(a, xp.ndarray) and a.flags.c_contiguous and a.dtype == var.dtype
                for a in arrays) and all(
                isinstance(g, xp.ndarray) and g.dtype == var.dtype
                and g.shape == arrays[k * n_refs].shape for k, g in enumerate(grads)) and all(
                np.ndim(s) == 0 for s in scalars)
            sizes = [int(arrays[k * n_refs].size) for k in range(members)]
            ok = ok and P.fits_int32(max(sizes, default=0) + P.MAX_BLOCKS * P.BLOCK)
            if ok:
                args = []
                for k in range(members):
                    args += arrays[k * n_refs:(k + 1) * n_refs]
                    g = grads[k]
                    args.append(g if g.flags.c_contiguous else xp.ascontiguousarray(g))
                args += [np.int32(s) for s in sizes]
                args += [O.device_scalar(xp, s, var.dtype) for s in scalars]
                args += flags
                multi = multi_program(prog, n_refs, members)
                grid = (P.grid_for(max(max(sizes), 1)), members)
                multi.compiled(xp)(grid, (P.BLOCK,), tuple(args))
                return
        one_by_one(inputs)

    return multi_apply
