"""Dynamic computation in the notebook: a traced function's graphs, and eager against traced.

``FunctionView(f)`` shows a ``tf.function``'s traces — one row per concrete function with its
signature, *why* it was traced (first call, a new shape, a new Python value…), its op count —
and each concrete function's graph, drawn as any graph is (``GraphView`` where the widgets are
installed, the static SVG otherwise). ``%dflab function NAME`` shows it for a function in the
notebook.

``compare_eager_traced(fn, *args)`` runs ``fn`` once eagerly (recording every op) and once as
a traced function (with the executor's step tracer) and shows both timelines, and per op type
what it cost each way: eager pays Python and dispatch around every kernel, the traced graph
runs the same kernels from one plan.
"""

from __future__ import annotations

import html

from dflab.eager import eager_mode
from dflab.eager.function import Function
from dflab.eager.profile import graph_op_costs, record_eager_ops, trace_function


def _escape(s) -> str:
    return html.escape(str(s), quote=True)


class FunctionView:
    """The traces of a ``tf.function`` (see the module docstring)."""

    def __init__(self, function: Function, draw: bool = True):
        if not isinstance(function, Function):
            raise TypeError(f"FunctionView shows a tf.function, not {function!r}")
        self.function = function
        self.draw = draw

    def rows(self) -> list[dict]:
        """One dict per trace: signature, reason, op count, graph name."""
        out = []
        concretes = self.function.concrete_functions()
        for k, (signature, reason) in enumerate(self.function.traces):
            concrete = concretes[k] if k < len(concretes) else None
            out.append({"trace": k + 1, "signature": signature, "reason": reason,
                        "ops": len(concrete.graph.get_operations()) if concrete else 0,
                        "graph": concrete.name if concrete else ""})
        return out

    def _table(self) -> str:
        head = "".join(f"<th style='text-align:left;padding:2px 8px'>{h}</th>"
                       for h in ("#", "signature", "why it was traced", "ops", "graph"))
        body = "".join(
            "<tr>" + "".join(f"<td style='padding:2px 8px'>{_escape(r[k])}</td>" for k in (
                "trace", "signature", "reason", "ops", "graph")) + "</tr>"
            for r in self.rows())
        name = _escape(getattr(self.function, "__name__", "function"))
        return (f"<div><b>{name}</b>: {len(self.function.traces)} trace(s)"
                f"<table>{head}{body}</table></div>")

    def graphs(self) -> list:
        """The concrete functions' graphs, oldest first."""
        return [c.graph for c in self.function.concrete_functions()]

    def _repr_mimebundle_(self, include=None, exclude=None):
        parts = [self._table()]
        if self.draw:
            for c in self.function.concrete_functions():
                svg = _svg_of(c.graph)
                parts.append(f"<div><i>{_escape(c.pretty_printed_signature())}</i></div>"
                             + (svg or ""))
        return {"text/html": "".join(parts), "text/plain": self._text()}

    def _text(self) -> str:
        lines = [f"{getattr(self.function, '__name__', 'function')}: "
                 f"{len(self.function.traces)} trace(s)"]
        for r in self.rows():
            lines.append(f"  {r['trace']}. {r['signature']} -- {r['reason']} "
                         f"({r['ops']} ops, {r['graph']})")
        return "\n".join(lines)

    def __repr__(self):
        return self._text()


def _svg_of(graph) -> str | None:
    try:
        bundle = graph._repr_mimebundle_(include=["image/svg+xml"])
    except Exception:  # noqa: BLE001 - a drawing is optional: the table stays
        return None
    return bundle.get("image/svg+xml")


class EagerVsTraced:
    """One function run eagerly and traced: timelines and per-op costs side by side."""

    def __init__(self, fn, *args, repeat: int = 1):
        self.function = fn if isinstance(fn, Function) else Function(fn)
        python_fn = self.function.python_function
        with eager_mode():
            self.function(*args)  # trace (and warm up) first
            with record_eager_ops() as eager:
                for _ in range(repeat):
                    python_fn(*args)
            self.eager = eager
            self.traced = trace_function(self.function, *args)
        self.eager_metadata = eager.run_metadata()

    def cost_rows(self) -> list[dict]:
        eager = {c.op_type: c for c in self.eager.op_costs()}
        graph = {c.op_type: c for c in graph_op_costs(self.traced)}
        rows = []
        for op_type in sorted(set(eager) | set(graph),
                              key=lambda t: -(eager[t].total_s if t in eager else 0)):
            e, g = eager.get(op_type), graph.get(op_type)
            rows.append({"op": op_type, "eager_count": e.count if e else 0,
                         "eager_us": round(e.mean_us, 1) if e else None,
                         "graph_count": g.count if g else 0,
                         "graph_us": round(g.mean_us, 1) if g else None})
        return rows

    def timelines(self):
        """(eager, traced) ``Timeline`` widgets (the run metadata where widgets are absent)."""
        try:
            from dflab.notebook.timeline import Timeline
        except ImportError:
            return self.eager_metadata, self.traced
        return Timeline(self.eager_metadata), Timeline(self.traced)

    def _repr_mimebundle_(self, include=None, exclude=None):
        head = "".join(f"<th style='padding:2px 8px'>{h}</th>" for h in (
            "op", "eager runs", "eager µs/op", "graph runs", "graph µs/op"))
        body = "".join("<tr>" + "".join(
            f"<td style='padding:2px 8px'>{_escape('' if r[k] is None else r[k])}</td>"
            for k in ("op", "eager_count", "eager_us", "graph_count", "graph_us")) + "</tr>"
            for r in self.cost_rows())
        summary = (f"<div>eager: {self.eager.wall_s * 1e3:.2f} ms wall, "
                   f"{self.eager.kernel_s * 1e3:.2f} ms in kernels "
                   f"({len(self.eager.records)} ops)</div>")
        return {"text/html": summary + f"<table>{head}{body}</table>",
                "text/plain": repr(self.cost_rows())}


def compare_eager_traced(fn, *args, repeat: int = 1) -> EagerVsTraced:
    return EagerVsTraced(fn, *args, repeat=repeat)
