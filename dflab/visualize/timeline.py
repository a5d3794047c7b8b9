"""A traced step as a timeline: lanes (device x thread), bars (op executions), transfer arrows.

``timeline_data`` reads only the step stats (``RunMetadata.step_stats``; see
dflab/runtime/tracing.py): one lane per (device, thread) that ran something, one bar per node
execution (a node inside a loop has one per iteration) with times in microseconds from the start
of the step, and an arrow from each ``_Send`` to the ``_Recv`` that received its tensor. Send and
Recv are matched as dflab.client.timeline matches them, by the transfer their
``timeline_label`` names (tensor, sending device, receiving device) and, inside loops, by frame
iteration. ``timeline_svg`` draws the same data as a static Gantt chart.
"""

from __future__ import annotations

import math

from dflab.client.timeline import parse_timeline_label, transfer_key
from dflab.visualize import style as _style
from dflab.visualize import svg as _svg
from dflab.visualize import text as _text
from dflab.visualize.model import RECV_TYPES, SEND_TYPES


def _start_ns(ns) -> int:
    return ns.all_start_nanos or ns.all_start_micros * 1000


def _duration_ns(ns) -> int:
    return ns.all_end_rel_nanos or ns.all_end_rel_micros * 1000


def _rows(bars: list) -> int:
    """Give each bar of one lane a row so that bars of a row never overlap; returns the count."""
    ends: list = []
    for b in sorted(bars, key=lambda b: (b["start_us"], b["end_us"])):
        for k, end in enumerate(ends):
            if b["start_us"] >= end:
                ends[k] = b["end_us"]
                b["row"] = k
                break
        else:
            b["row"] = len(ends)
            ends.append(b["end_us"])
    return max(len(ends), 1)


def _arrows(bars: list, keys: list) -> list:
    sends: dict = {}
    for k, b in enumerate(bars):
        if keys[k] is not None and b["op_type"] in SEND_TYPES:
            sends.setdefault(keys[k] + (b["frame"], b["iteration"]), k)
            sends.setdefault(keys[k], k)
    arrows = []
    for k, b in enumerate(bars):
        if keys[k] is None or b["op_type"] not in RECV_TYPES:
            continue
        s = sends.get(keys[k] + (b["frame"], b["iteration"]), sends.get(keys[k]))
        if s is None:
            continue
        # A _Send hands its tensor over as it starts; its recorded end can come much later
        # (the receiving side may run on the sending thread first). The value has arrived
        # when the _Recv ends.
        sent = bars[s]["start_us"]
        arrows.append({"from": s, "to": k, "tensor": keys[k][0], "send_device": keys[k][1],
                       "recv_device": keys[k][2], "start_us": sent,
                       "end_us": max(b["end_us"], sent)})
    return arrows


def timeline_data(run_metadata) -> dict:
    """JSON-able lanes, bars and arrows of a traced step (a ``RunMetadata`` or ``StepStats``)."""
    step_stats = getattr(run_metadata, "step_stats", run_metadata)
    entries = [(ds, ns) for ds in step_stats.dev_stats for ns in ds.node_stats]
    step_id = getattr(step_stats, "step_id", 0)
    if not entries:
        return {"step_id": step_id, "duration_us": 0.0, "devices": [], "lanes": [], "bars": [],
                "arrows": []}
    t0 = min(_start_ns(ns) for _, ns in entries)
    lanes: dict = {}
    bars, keys = [], []
    for ds, ns in sorted(entries, key=lambda e: (e[0].device, _start_ns(e[1]))):
        lane_key = (ds.device, ns.thread_id)
        if lane_key not in lanes:
            thread = ds.thread_names.get(ns.thread_id, "") or f"thread {ns.thread_id}"
            lanes[lane_key] = {"id": f"l{len(lanes)}", "device": ds.device,
                               "thread_id": ns.thread_id, "thread_name": thread,
                               "label": f"{_text.short_device(ds.device)} \u00b7 {thread}"}
        _, op_type, inputs, frame, iteration = parse_timeline_label(ns.timeline_label)
        start = (_start_ns(ns) - t0) / 1000
        bars.append({"name": ns.node_name, "op_type": op_type, "family": _style.family(op_type),
                     "lane": lanes[lane_key]["id"], "start_us": start,
                     "end_us": start + _duration_ns(ns) / 1000, "step_id": step_id,
                     "device": ds.device, "thread_id": ns.thread_id, "frame": frame,
                     "iteration": iteration, "label": _text.printable(ns.timeline_label, 300)})
        keys.append(transfer_key(op_type, inputs, ds.device))
    for lane in lanes.values():
        lane["rows"] = _rows([b for b in bars if b["lane"] == lane["id"]])
    return {"step_id": step_id, "duration_us": max(b["end_us"] for b in bars),
            "devices": sorted({ds.device for ds, _ in entries}), "lanes": list(lanes.values()),
            "bars": bars, "arrows": _arrows(bars, keys)}


# --- the Gantt chart -------------------------------------------------------------------------
WIDTH, LABEL_W, RIGHT_PAD = 960.0, 170.0, 16.0
ROW_H, LANE_PAD, HEADER_H = 15.0, 5.0, 40.0


def _ticks(duration: float) -> list[float]:
    if duration <= 0:
        return [0.0]
    raw = duration / 8
    base = 10 ** math.floor(math.log10(raw))
    step = next(m * base for m in (1, 2, 5, 10) if m * base >= raw)
    return [k * step for k in range(int(duration / step) + 1)]


def _draw_axis(root, x_of, duration, top, bottom) -> None:
    axis = _svg.element(root, "g", class_="axis")
    for t in _ticks(duration):
        x = x_of(t)
        _svg.element(axis, "line", x1=x, y1=top - 4, x2=x, y2=bottom, stroke="#e4e7eb")
        _svg.element(axis, "text", _text.format_micros(t), x=x, y=top - 8,
                     text_anchor="middle", font_size=9.5, font_family=_style.FONT,
                     fill=_style.MUTED_TEXT)


def _draw_lanes(root, data, y_of_lane) -> None:
    group = _svg.element(root, "g", class_="lanes")
    last_device = None
    for lane in data["lanes"]:
        y0, h = y_of_lane[lane["id"]]
        if lane["device"] != last_device:
            _svg.element(group, "line", x1=0, y1=y0, x2=WIDTH, y2=y0, stroke="#cbd2d9")
            _svg.element(group, "text", _text.short_device(lane["device"]), x=8, y=y0 + 12,
                         font_size=10.5, font_weight="bold", font_family=_style.FONT,
                         fill=_style.TEXT)
            last_device = lane["device"]
        _svg.element(group, "text", _text.printable(lane["thread_name"], 22), x=LABEL_W - 8,
                     y=y0 + 12, text_anchor="end", font_size=9.5, font_family=_style.FONT,
                     fill=_style.MUTED_TEXT)
        _svg.element(group, "rect", x=LABEL_W, y=y0 + 1, width=WIDTH - LABEL_W - RIGHT_PAD,
                     height=h - 2, fill="#f8f9fb", class_="lane", id=f"tl-{lane['id']}")


def _draw_bars(root, data, x_of, y_of_bar) -> None:
    group = _svg.element(root, "g", class_="bars")
    transfers = {}  # bar index -> "send t:0" / "recv t:0"
    for a in data["arrows"]:
        transfers[a["from"]] = f"send {a['tensor']}"
        transfers[a["to"]] = f"recv {a['tensor']}"
    for k, b in enumerate(data["bars"]):
        x0, x1 = x_of(b["start_us"]), x_of(b["end_us"])
        w = max(x1 - x0, 1.0)
        y = y_of_bar(b)
        fill = _style.family_fill(b["family"])
        g = _svg.element(group, "g", id=f"tl-b{k}", class_=f"bar fam-{b['family']}")
        _svg.element(g, "title", f"{b['name']} ({b['op_type']})\n"
                     f"{_text.format_micros(b['start_us'])} \u2192 "
                     f"{_text.format_micros(b['end_us'])} "
                     f"({_text.format_micros(b['end_us'] - b['start_us'])})\n"
                     f"{b['device']}, {b['thread_id']}")
        _svg.element(g, "rect", x=x0, y=y, width=w, height=ROW_H - 3, rx=2, fill=fill,
                     stroke=_style.darker(fill), stroke_width=0.8)
        label = b["name"].rsplit("/", 1)[-1]
        if k in transfers:
            label = transfers[k]
        if _svg.text_width(label, 9) + 6 < w:
            _svg.element(g, "text", label, x=x0 + 3, y=y + ROW_H - 6.5, font_size=9,
                         font_family=_style.FONT, fill=_style.TEXT)


def _draw_arrows(root, data, x_of, y_of_bar) -> None:
    group = _svg.element(root, "g", class_="arrows")
    defs = _svg.element(root, "defs")
    marker = _svg.element(defs, "marker", id="dflab-tl-arrowhead", viewBox="0 0 8 8", refX=7,
                          refY=4, markerWidth=7, markerHeight=7, orient="auto")
    _svg.element(marker, "path", d="M0,0 L8,4 L0,8 z", fill=_style.TRANSFER_EDGE)
    for a in data["arrows"]:
        src, dst = data["bars"][a["from"]], data["bars"][a["to"]]
        x0, y0 = x_of(a["start_us"]), y_of_bar(src) + (ROW_H - 3) / 2
        x1, y1 = x_of(a["end_us"]), y_of_bar(dst) + (ROW_H - 3) / 2
        g = _svg.element(group, "g", class_="transfer")
        _svg.element(g, "title", f"{a['tensor']}: {_text.short_device(a['send_device'])} "
                     f"\u2192 {_text.short_device(a['recv_device'])}")
        _svg.element(g, "path", d=f"M{x0:.1f},{y0:.1f} L{x1:.1f},{y1:.1f}",
                     stroke=_style.TRANSFER_EDGE, stroke_width=1.3, fill="none",
                     marker_end="url(#dflab-tl-arrowhead)")


def _legend(data) -> _svg.Legend:
    used = {b["family"] for b in data["bars"]}
    lg = _svg.Legend(caption=f"step {data['step_id']} \u00b7 "
                     f"{_text.format_micros(data['duration_us'])}")
    for fam in (f for f in _style.FAMILIES if f in used):
        fill = _style.family_fill(fam)
        lg.swatches.append((fill, _style.darker(fill), _style.FAMILIES[fam][0]))
    if data["arrows"]:
        lg.edges.append((_style.TRANSFER_EDGE, "", "send \u2192 recv"))
    return lg


def timeline_svg(run_metadata) -> str:
    """A static Gantt chart of a traced step: a row per device thread, a bar per op."""
    data = timeline_data(run_metadata)
    if not data["bars"]:
        return _svg.message_svg("no traced ops in this step", "dflab-timeline empty")
    legend, legend_w, legend_h = _svg.draw_legend(_legend(data), WIDTH)
    y_of_lane, y = {}, legend_h + HEADER_H
    for lane in data["lanes"]:
        h = lane["rows"] * ROW_H + 2 * LANE_PAD
        y_of_lane[lane["id"]] = (y, h)
        y += h
    height = y + 10
    duration = data["duration_us"] or 1.0
    plot_w = WIDTH - LABEL_W - RIGHT_PAD

    def x_of(t: float) -> float:
        return LABEL_W + t / duration * plot_w

    def y_of_bar(b) -> float:
        return y_of_lane[b["lane"]][0] + LANE_PAD + b["row"] * ROW_H

    root = _svg.document(max(WIDTH, legend_w), height, "dflab-timeline")
    _svg.element(root, "rect", x=0, y=0, width=max(WIDTH, legend_w), height=height,
                 fill=_style.BACKGROUND, class_="background")
    root.append(legend)
    _draw_axis(root, x_of, duration, legend_h + HEADER_H, y)
    _draw_lanes(root, data, y_of_lane)
    _draw_bars(root, data, x_of, y_of_bar)
    _draw_arrows(root, data, x_of, y_of_bar)
    return _svg.serialize(root)
