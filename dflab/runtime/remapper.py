"""Contraction fusion, TF's *remapper* for oneDNN: a graph optimization pass over one device's
part of a plan.

A MatMul or Conv2D whose result only gets a bias added (``BiasAdd``, or ``Add``/``AddV2`` of a
vector along the channel axis), optionally followed by an activation of the sum (Relu, Relu6,
LeakyRelu, Elu, Tanh, Sigmoid), becomes one ``_FusedMatMul`` or ``_FusedConv2D`` node, whose
kernel (``dflab.kernels.contraction_kernels``) adds the bias and applies the activation as the
contraction writes its result: oneDNN's post-ops, one pass over the output instead of three. TF's
CPU build does the same (its ``_MklFusedConv2D`` and ``_MklFusedMatMul``); a model's dense and
convolution layers are exactly this pattern, forward.

Backward, an unrolled RNN's weight gradient is an ``AddN`` of one MatMul per time step. Where
MatMuls fuse, an AddN whose every input is a MatMul read by it alone becomes one
``_FusedMatMulSum``: the first product is computed, each next one added into it as oneDNN
writes it (a sum post-op), so the terms are never stored and the sum makes no pass of its own.
It adds in the AddN's order, one rounding per term, as the AddN does.

A pattern fuses only where nothing else needs the intermediate values: the contraction's output
is read by the bias add alone and the sum by the activation alone (a gradient that reads the
sum, as LeakyRelu's does, keeps the activation out); neither is fetched or fed, nor a control
input of anything. The fused node takes the last member's name (as TF names it), its outputs
and creation site, the contraction's attributes, and the members in ``fused_ops`` /
``fused_types`` as the elementwise fusion pass records them, so graph views, traces, the
stepper and errors see the ops it stands for. Only float32 fuses: what oneDNN computes.

When it runs (``RewriterConfig.remapping``): by default on the host's CPU devices whose kernels
run on oneDNN (installed, and not turned off by the session's ``onednn`` option: matrix
products only with ``onednn_products``); ``ON`` on every CPU-kernel device, oneDNN or not (the
kernel then computes the members one after another, as unfused: how the fallback is tested);
``OFF`` never.
"""

from __future__ import annotations

from dflab.ops import fused_ops as _fused_ops  # noqa: F401 - registers the fused op types
from dflab.runtime.fusion import NodeUses, member_controls, replacing_node

# The contractions that fuse, and the op each becomes.
CONTRACTIONS = {"MatMul": "_FusedMatMul", "Conv2D": "_FusedConv2D"}
# What an AddN of MatMuls becomes: the products accumulated into one result.
SUM_OF_PRODUCTS = "_FusedMatMulSum"
BIAS_ADDS = frozenset({"BiasAdd", "Add", "AddV2"})
ACTIVATIONS = frozenset({"Relu", "Relu6", "LeakyRelu", "Elu", "Tanh", "Sigmoid"})
DTYPE = "float32"

# The contraction's attributes a fused node keeps (TF's ``_FusedConv2D``/``_FusedMatMul``
# have the same), what its kernel reads to compute the contraction.
_KEPT_ATTRS = {
    "MatMul": ("T", "transpose_a", "transpose_b"),
    "Conv2D": ("T", "strides", "padding", "explicit_paddings", "data_format", "dilations",
               "use_cudnn_on_gpu"),
}


def _float32(node) -> bool:
    return all(t.dtype.base_dtype.name == DTYPE for t in (*node.inputs, *node.outputs[:1]))


def _channels_last(contraction) -> bool:
    """Whether the contraction's output has its channels on the last axis (where an added
    vector broadcasts)."""
    return contraction.type == "MatMul" or contraction.attrs.get("data_format", "NHWC") == "NHWC"


def _bias_of(add, contraction):
    """The bias ``add`` adds to the contraction's output, or None where ``add`` is not a bias
    add of it: BiasAdd in the contraction's layout, or an Add/AddV2 of a vector as long as
    the output's last axis when that axis is the channels."""
    out = contraction.outputs[0]
    if add.type == "BiasAdd":
        if add.inputs[0] is not out or add.inputs[1] is out:
            return None
        # A MatMul's channels are its last axis: NCHW would add along axis 1 of a batched
        # operand of unknown rank.
        fmt = add.attrs.get("data_format", "NHWC")
        layout = "NHWC" if contraction.type == "MatMul" else \
            contraction.attrs.get("data_format", "NHWC")
        return add.inputs[1] if fmt == layout else None
    x, y = add.inputs
    if (x is out) == (y is out) or not _channels_last(contraction):
        return None
    bias = y if x is out else x
    dims, channels = bias.shape.dims, out.shape.dims
    if dims is None or len(dims) != 1 or not channels or dims[0] is None or \
            dims[0] != channels[-1]:
        return None
    return bias


def _pattern(uses: NodeUses, contraction):
    """(members, bias) of the fusion starting at ``contraction``, or None."""
    if not uses.replaceable(contraction) or not _float32(contraction):
        return None
    add = uses.sole_reader(contraction.outputs[0])
    if add is None or add.type not in BIAS_ADDS or not uses.replaceable(add) or \
            not _float32(add):
        return None
    bias = _bias_of(add, contraction)
    if bias is None:
        return None
    members = [contraction, add]
    act = uses.sole_reader(add.outputs[0])
    if act is not None and act.type in ACTIVATIONS and uses.replaceable(act) and _float32(act):
        members.append(act)
    return members, bias


def _fused(members, bias, device):
    contraction = members[0]
    attrs = {k: contraction.attrs[k] for k in _KEPT_ATTRS[contraction.type]
             if k in contraction.attrs}
    attrs["num_args"] = 1
    act = members[2] if len(members) == 3 else None
    if act is not None and act.type == "LeakyRelu":
        attrs["leakyrelu_alpha"] = float(act.attrs.get("alpha", 0.2))
    # The body as graph views show a fused node's (elementwise fusion's ``expression``).
    body = f"BiasAdd({contraction.type}(in0, in1), in2)"
    attrs["expression"] = f"{act.type}({body})" if act is not None else body
    inputs = [*contraction.inputs, bias]
    return replacing_node(CONTRACTIONS[contraction.type], members, inputs,
                          member_controls(members), device, attrs)


def _product_sum(uses: NodeUses, add_n):
    """The MatMuls an AddN sums, each read by it alone, or None: a sum of products only."""
    if not _float32(add_n) or not uses.replaceable(add_n) or len(add_n.inputs) < 2:
        return None
    products = []
    for t in add_n.inputs:
        p = t.op
        if p.type != "MatMul" or uses.sole_reader(t) is not add_n or \
                not uses.replaceable(p) or not _float32(p):
            return None
        products.append(p)
    return products


def _fused_sum(products, add_n, device):
    attrs = {"T": add_n.attrs.get("T"), "N": len(products),
             "transpose_a": [bool(p.attrs.get("transpose_a", False)) for p in products],
             "transpose_b": [bool(p.attrs.get("transpose_b", False)) for p in products],
             "expression": "AddN(" + ", ".join(
                 f"MatMul(in{2 * k}, in{2 * k + 1})" for k in range(len(products))) + ")"}
    members = [*products, add_n]
    inputs = [t for p in products for t in p.inputs]
    return replacing_node(SUM_OF_PRODUCTS, members, inputs, member_controls(members), device,
                          attrs)


def _match(uses: NodeUses, node, device):
    """(members, fused node) of the fusion ``node`` starts (a contraction) or ends (an AddN
    of products), or None."""
    if node.type == "AddN":
        products = _product_sum(uses, node)
        if products is None:
            return None
        return [*products, node], _fused_sum(products, node, device)
    found = _pattern(uses, node)
    if found is None:
        return None
    members, bias = found
    return members, _fused(members, bias, device)


def fuse_contractions(nodes, device: str, keep=(), contractions=tuple(CONTRACTIONS)):
    """Fuse each contraction of ``nodes`` (``device``'s nodes in topological order) with its
    bias add and activation, and each sum of MatMuls where MatMuls fuse (see the module
    docstring); ``contractions``: the op types that may fuse. ``keep``: tensors that must stay
    computed as they are (fetched or fed ones). Returns the new node list, in topological
    order, and the fused nodes made."""
    uses = NodeUses(nodes, {id(t) for t in keep})
    replaced, gone, fused = {}, set(), []
    candidates = set(contractions) | ({"AddN"} if "MatMul" in contractions else set())
    # Patterns never overlap: each member after the first is the sole reader of another's
    # output, and a contraction read by a bias add is no AddN's term.
    for node in nodes:
        if node.type not in candidates:
            continue
        found = _match(uses, node, device)
        if found is None:
            continue
        members, f = found
        gone.update(id(m) for m in members)
        replaced[id(members[-1])] = f
        fused.append(f)
    if not fused:
        return list(nodes), []
    # The fused node runs where its sink was: after every input of every member.
    out = [replaced.get(id(n), n) for n in nodes if id(n) in replaced or id(n) not in gone]
    return out, fused


def has_contraction(nodes, contractions=tuple(CONTRACTIONS)) -> bool:
    """Whether ``nodes`` hold an op the pass may fuse (before asking whether it runs)."""
    return any(n.type in contractions for n in nodes)
