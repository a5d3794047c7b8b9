"""The package's layering (docs/architecture.md), checked by reading every import in dflab/.

Layers, lowest first: framework (graph IR) <- lib (TF's file formats) <- ops (schemas,
gradients, builders) <- kernels, runtime <- train, client, distributed <- notebook. A module
may import its own layer and the layers below it, nothing above; nobody imports the notebook
layer (it observes the runtime).
Kernels sit above ops so that a kernel can share a pure helper with its op's shape function
(one definition of, say, strided-slice or convolution geometry); ops never import kernels, so
schemas, shapes and gradients stay usable without any implementation.
The few lazy upward imports the design accepts are listed in ``EXCEPTIONS`` with their reason;
an exception that no longer matches any import fails too, so the list cannot rot.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

PKG_ROOT = Path(__file__).resolve().parents[1] / "dflab"

# What each layer may import from dflab (besides itself). "api" is the package facade:
# dflab/__init__.py and the top-level modules that mirror TF's namespaces (tf.nn, tf.layers…).
ALLOWED = {
    "framework": {"framework"},
    # TF's file formats and protos (TFRecord, tables, tensor bundles): plain data, no graph.
    "lib": {"framework", "lib"},
    "ops": {"framework", "lib", "ops"},
    "kernels": {"framework", "lib", "ops", "kernels"},
    "runtime": {"framework", "lib", "ops", "kernels", "runtime"},
    # Eager execution, tapes and traced functions: ops run on a worker's devices at once.
    "autograph": {"framework", "ops", "autograph"},
    "eager": {"framework", "lib", "ops", "kernels", "runtime", "autograph", "eager"},
    "train": {"framework", "lib", "ops", "kernels", "runtime", "eager", "train"},
    "client": {"framework", "runtime", "client"},
    "distributed": {"framework", "lib", "ops", "kernels", "runtime", "eager", "train",
                    "distributed"},
    # Drawing (DOT, Graphviz layout, SVG): what rich display and the widgets share.
    "visualize": {"framework", "ops", "runtime", "client", "visualize"},
    "api": {"framework", "lib", "ops", "kernels", "runtime", "autograph", "eager", "train",
            "client", "distributed", "visualize", "api"},
    "notebook": {"framework", "lib", "ops", "kernels", "runtime", "autograph", "eager", "train",
                 "client", "distributed", "visualize", "api", "notebook"},
}

# (importing module, enclosing function qualname, imported module): why it is acceptable.
EXCEPTIONS = {
    ("dflab", "load_ipython_extension", "dflab.notebook.magics"):
        "%load_ext dflab imports the package and calls this; the magics load only then.",
}

# Modules that `import dflab` must not pull in: the UI stack stays optional.
UI_MODULES = ("IPython", "ipywidgets", "anywidget", "traitlets", "dflab.notebook")


@dataclass(frozen=True)
class Import:
    module: str  # the importing module, e.g. dflab.ops.math_ops
    target: str  # the imported dflab module, e.g. dflab.framework.ops
    func: str  # qualname of the enclosing function/class ("" at module level)
    lineno: int

    def where(self) -> str:
        return f"{self.module}:{self.lineno} ({self.func or 'module level'})"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG_ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_dflab_module(name: str) -> bool:
    rel = name.split(".")[1:]
    base = PKG_ROOT.joinpath(*rel)
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _resolve_from(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _is_type_checking_block(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")
    )


def _imports_of(path: Path) -> list[Import]:
    module = _module_name(path)
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[Import] = []

    def add(target: str, scope: list[str], lineno: int) -> None:
        if target == "dflab" or target.startswith("dflab."):
            found.append(Import(module, target, ".".join(scope), lineno))

    def visit(node: ast.AST, scope: list[str]) -> None:
        for child in ast.iter_child_nodes(node):
            if _is_type_checking_block(child):
                continue  # annotations only; never executed
            if isinstance(child, ast.Import):
                for alias in child.names:
                    add(alias.name, scope, child.lineno)
            elif isinstance(child, ast.ImportFrom):
                base = _resolve_from(module, is_package, child)
                for alias in child.names:
                    # `from dflab import nn` imports the module dflab.nn; `from dflab.ops
                    # import math_ops` likewise. Otherwise the name is an attribute.
                    sub = f"{base}.{alias.name}"
                    add(sub if _is_dflab_module(sub) else base, scope, child.lineno)
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                visit(child, scope + [child.name])
            else:
                visit(child, scope)

    visit(tree, [])
    return found


def _layer(module: str) -> str:
    parts = module.split(".")
    if len(parts) >= 2 and parts[1] in ALLOWED and (PKG_ROOT / parts[1]).is_dir():
        return parts[1]
    return "api"  # dflab itself and its top-level modules


def _all_imports() -> list[Import]:
    found = []
    for path in sorted(PKG_ROOT.rglob("*.py")):
        found.extend(_imports_of(path))
    return found


ALL_IMPORTS = _all_imports()


def test_scanner_sees_the_package():
    # Guard against a scanner that silently finds nothing (wrong root, parse changes).
    modules = {imp.module for imp in ALL_IMPORTS}
    assert {"dflab", "dflab.framework.ops", "dflab.runtime.session"} <= modules
    assert any(imp.target == "dflab.framework.ops" for imp in ALL_IMPORTS)


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_layer_imports_only_layers_below(layer):
    violations = []
    for imp in ALL_IMPORTS:
        if _layer(imp.module) != layer:
            continue
        target_layer = _layer(imp.target)
        if target_layer in ALLOWED[layer]:
            continue
        if (imp.module, imp.func, imp.target) in EXCEPTIONS:
            continue
        violations.append(f"{imp.where()} imports {imp.target} ({target_layer} layer)")
    assert not violations, (
        f"the {layer} layer may import only {sorted(ALLOWED[layer])}:\n  "
        + "\n  ".join(violations)
    )


def test_nothing_imports_the_notebook_layer():
    offenders = [
        f"{imp.where()} imports {imp.target}"
        for imp in ALL_IMPORTS
        if _layer(imp.target) == "notebook" and _layer(imp.module) != "notebook"
        and (imp.module, imp.func, imp.target) not in EXCEPTIONS
    ]
    assert not offenders, "the notebook layer observes the runtime; nobody imports it:\n  " + (
        "\n  ".join(offenders)
    )


@pytest.mark.parametrize("key", sorted(EXCEPTIONS), ids=lambda k: f"{k[0]}:{k[1]}")
def test_listed_exceptions_still_exist(key):
    module, func, target = key
    matches = [i for i in ALL_IMPORTS if (i.module, i.func, i.target) == key]
    assert matches, (
        f"exception {module} ({func}) -> {target} matches no import any more; "
        "remove it from EXCEPTIONS"
    )


def test_exceptions_are_lazy_function_level_imports():
    # An upward import is tolerable only when deferred to call time inside a function.
    for module, func, target in EXCEPTIONS:
        assert func, f"{module} -> {target}: module-level upward imports are never allowed"


def test_import_dflab_does_not_load_ui_modules():
    # A fresh interpreter: this test process may already have IPython loaded by plugins.
    code = (
        "import sys, dflab\n"
        f"bad = [m for m in {UI_MODULES!r} if m in sys.modules]\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=str(PKG_ROOT.parent),
    ).stdout.strip()
    assert out == "", f"`import dflab` loaded UI modules: {out}"


# --- import cycles -------------------------------------------------------------------------------
# Every import counts here, function-level ones too: a lazy import only hides a cycle. Cycles
# between packages (layers) are never allowed; the ones below stay inside one package, are
# known, and may only shrink (an entry that no longer matches a cycle fails, like EXCEPTIONS).
KNOWN_CYCLES = {
    frozenset({"dflab.framework.graph", "dflab.framework.graph_io", "dflab.framework.operation",
               "dflab.framework.ops", "dflab.framework.tensor"}):
        "the IR core: Graph makes Operations and Tensors, which name their Graph and print "
        "through graph_io; kept apart by call-time imports",
    frozenset({"dflab.ops.array_ops", "dflab.ops.clip_ops", "dflab.ops.control_flow_grad",
               "dflab.ops.control_flow_ops", "dflab.ops.gradients", "dflab.ops.indexing_ops",
               "dflab.ops.linalg_ops", "dflab.ops.manip_ops", "dflab.ops.math_ops",
               "dflab.ops.reduction_ops", "dflab.ops.sequence_ops", "dflab.ops.slicing_ops"}):
        "op families whose builders and gradients use each other (math_ops and array_ops also "
        "re-export the modules split out of them)",
}


def _import_cycles() -> list[frozenset]:
    """Strongly connected components (of more than one module) of dflab's import graph."""
    graph: dict[str, set] = {}
    for imp in ALL_IMPORTS:
        if imp.target != imp.module:
            graph.setdefault(imp.module, set()).add(imp.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(v):  # Tarjan's algorithm; the package's import graph is shallow enough to recurse
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for v in list(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle_crosses_packages_and_only_known_ones_remain():
    cycles = _import_cycles()
    for cycle in cycles:
        layers = {_layer(m) for m in cycle}
        assert len(layers) == 1, f"an import cycle crosses layers {sorted(layers)}: {sorted(cycle)}"
    unknown = [sorted(c) for c in cycles if c not in KNOWN_CYCLES]
    assert not unknown, f"new import cycles: {unknown}"
    gone = [sorted(c) for c in KNOWN_CYCLES if c not in cycles]
    assert not gone, f"known cycles that changed or are gone (update KNOWN_CYCLES): {gone}"


def test_cycle_finder_finds_a_cycle():
    # The finder itself: a two-module cycle among made-up imports is reported.
    saved = list(ALL_IMPORTS)
    try:
        ALL_IMPORTS.append(Import("dflab.runtime.a", "dflab.runtime.b", "", 1))
        ALL_IMPORTS.append(Import("dflab.runtime.b", "dflab.runtime.a", "f", 2))
        assert frozenset({"dflab.runtime.a", "dflab.runtime.b"}) in _import_cycles()
    finally:
        ALL_IMPORTS[:] = saved


# --- private members of the graph IR -------------------------------------------------------------
# Outside dflab/framework/, code reads and edits Operation, Tensor and Graph only through public
# members: the node interface (dflab.framework.node_protocol) and the documented edits and graph
# members the builders use (add_control_input, update_input, control_flow_context, create_op…).
# Named like private members, public by IPython's convention (its display protocol).
_DISPLAY_PROTOCOL = re.compile(r"^_(repr_\w+|ipython_\w+)_$")


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _ir_private_names() -> frozenset[str]:
    """Single-underscore members of Operation, Tensor and Graph: methods, slots and the
    instance attributes of a fresh Graph."""
    from dflab.framework.graph import Graph
    from dflab.framework.operation import Operation
    from dflab.framework.tensor import Tensor

    names = {n for cls in (Operation, Tensor, Graph) for n in dir(cls) if _is_private(n)}
    names |= {n for n in vars(Graph()) if _is_private(n)}
    return frozenset(n for n in names if not _DISPLAY_PROTOCOL.match(n))


def _private_accesses(source: str, where: str, names: frozenset) -> list[str]:
    """``where:line: X._name`` for each attribute access of a private IR member on anything
    but ``self``/``cls``."""
    found = []
    for node in ast.walk(ast.parse(source, filename=where)):
        if not isinstance(node, ast.Attribute) or node.attr not in names:
            continue
        if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            continue
        found.append((node.lineno, node.col_offset, f"{where}:{node.lineno}: {ast.unparse(node)}"))
    return [text for _, _, text in sorted(found)]


def test_only_the_framework_touches_private_members_of_the_ir():
    names = _ir_private_names()
    offences = []
    for path in sorted(PKG_ROOT.rglob("*.py")):
        where = path.relative_to(PKG_ROOT.parent).as_posix()
        if where.startswith("dflab/framework/"):
            continue
        offences += _private_accesses(path.read_text(encoding="utf-8"), where, names)
    assert not offences, (
        "use the public node interface (dflab/framework/node_protocol.py) or a public member "
        "of Operation, Tensor or Graph instead of:\n  " + "\n  ".join(offences)
    )


def test_private_member_scan_names_file_and_line_of_each_offence():
    names = _ir_private_names()
    assert {"_inputs", "_control_inputs", "_attrs", "_op_def", "_site", "_outputs",
            "_create_op", "_lock", "_plan_epoch", "_ops_by_name", "_consumers"} <= names
    assert not any(_DISPLAY_PROTOCOL.match(n) for n in names)
    source = ("def f(op, g):\n"
              "    return op.inputs, self._attrs\n"
              "def h(op):\n"
              "    return op._attrs['x'], op.graph._ops_by_name, op._private_of_another_class\n")
    assert _private_accesses(source, "dflab/ops/x.py", names) == [
        "dflab/ops/x.py:4: op._attrs", "dflab/ops/x.py:4: op.graph._ops_by_name"]


def test_no_module_of_the_distributed_layer_outgrows_one_concern():
    # The transports were once one 960-line module holding actor, launcher, client and
    # discovery; the split into the stub seam keeps each file to one concern.
    long = [f"{p.relative_to(PKG_ROOT.parent).as_posix()}: {n} lines"
            for p in sorted((PKG_ROOT / "distributed").rglob("*.py"))
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 500]
    assert not long, "split by concern: " + ", ".join(long)
