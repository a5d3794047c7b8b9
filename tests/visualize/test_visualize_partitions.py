"""Partition drawings after a real partitioned run: one cluster per device, each _Send joined to
its _Recv across clusters."""

from __future__ import annotations

from visualize_helpers import CPU0, CPU1, SVG_NS, classes, groups_by_id, parse_svg

import dflab as tf
from dflab.visualize import layout_graph


def _partition_nodes(md):
    return {nd.name: nd for gd in md.partition_graphs for nd in gd.node}


def test_each_partition_is_a_cluster_holding_its_nodes(two_cpu_run):
    run = two_cpu_run
    assert len(run.md.partition_graphs) == 2
    layout = layout_graph(run.graph, color_by="partition", run_metadata=run.md)
    partitions = {c["name"]: c for c in layout.clusters if c["kind"] == "partition"}
    assert set(partitions) == {CPU0, CPU1}
    assert {c["label"] for c in partitions.values()} == {"CPU:0", "CPU:1"}

    def cluster_of(node_id):
        parent = layout.nodes[node_id]["parent"]
        while parent is not None and parent not in {c["id"] for c in partitions.values()}:
            parent = layout.nodes[parent]["parent"]
        return layout.nodes[parent]["name"]

    nodes = _partition_nodes(run.md)
    assert set(layout.name_to_id) == set(nodes)
    for name, nd in nodes.items():
        assert cluster_of(layout.name_to_id[name]) == nd.device, name
    groups = groups_by_id(parse_svg(layout.svg))
    for c in partitions.values():
        assert {"cluster", "partition"} <= classes(groups[c["id"]])


def test_every_send_is_joined_to_its_recv_by_a_cross_cluster_edge(two_cpu_run):
    run = two_cpu_run
    layout = layout_graph(run.graph, color_by="partition", run_metadata=run.md)
    nodes = _partition_nodes(run.md)
    sends = {n: nd for n, nd in nodes.items() if nd.op == "_Send"}
    recvs = {n: nd for n, nd in nodes.items() if nd.op == "_Recv"}
    assert len(sends) == len(recvs) == 2  # h to CPU:1, branch/s back to CPU:0
    transfers = [e for e in layout.edges if e["kind"] == "transfer"]
    assert len(transfers) == len(sends)
    ids = layout.name_to_id
    for e in transfers:
        send = layout.nodes[e["source"]]["name"]
        recv = layout.nodes[e["target"]]["name"]
        s, r = nodes[send].attr, nodes[recv].attr
        assert nodes[send].op == "_Send" and nodes[recv].op == "_Recv"
        assert (s["tensor_name"], s["send_device"], s["recv_device"]) == \
            (r["tensor_name"], r["send_device"], r["recv_device"])
        assert nodes[send].device != nodes[recv].device
        assert e["tensors"] == [s["tensor_name"]]
    assert {layout.nodes[e["source"]]["name"] for e in transfers} == set(sends)
    groups = groups_by_id(parse_svg(layout.svg))
    for e in transfers:
        assert {"edge", "transfer"} <= classes(groups[e["id"]])
    # The transfer of h is labelled with what it carries.
    (h_edge,) = [e for e in transfers if e["tensors"] == ["h:0"]]
    assert h_edge["label"] == "float32 [?,16]"
    assert ids["_send/h/0/to/CPU_1"] == h_edge["source"]


def test_partition_graphs_argument_draws_the_same_as_run_metadata(two_cpu_run):
    run = two_cpu_run
    a = layout_graph(run.graph, color_by="partition", run_metadata=run.md)
    b = layout_graph(run.graph, color_by="partition", partition_graphs=run.md.partition_graphs)
    assert a.name_to_id == b.name_to_id
    assert [(e["source"], e["target"], e["kind"]) for e in a.edges] == \
        [(e["source"], e["target"], e["kind"]) for e in b.edges]


def test_partition_graphs_draw_without_the_graph_from_observed_shapes(two_cpu_run):
    run = two_cpu_run
    layout = layout_graph(None, color_by="partition", run_metadata=run.md)
    info = layout.nodes[layout.name_to_id["h"]]
    assert info["output_shapes"] == ["[4,16]"]  # the run's actual shape, not [?,16]
    assert any(e["kind"] == "transfer" for e in layout.edges)


def test_partition_mode_without_partition_graphs_groups_ops_by_assigned_device(two_cpu_run):
    run = two_cpu_run
    traced_only = tf.RunMetadata(step_stats=run.md.step_stats)
    layout = layout_graph(run.graph, color_by="partition", run_metadata=traced_only)
    partitions = {c["id"]: c["name"] for c in layout.clusters if c["kind"] == "partition"}
    assert CPU0 in partitions.values() and CPU1 in partitions.values()
    tanh = layout.nodes[layout.name_to_id["branch/a"]]
    parent = tanh["parent"]
    while parent not in partitions:
        parent = layout.nodes[parent]["parent"]
    assert partitions[parent] == CPU1
    assert not any(e["kind"] == "transfer" for e in layout.edges)


def test_color_by_device_reads_assigned_devices_from_a_traced_run(two_cpu_run):
    run = two_cpu_run
    layout = layout_graph(run.graph, color_by="device", run_metadata=run.md)
    assert layout.nodes[layout.name_to_id["branch/a"]]["assigned_device"] == CPU1
    assert layout.nodes[layout.name_to_id["h"]]["assigned_device"] == CPU0
    root = parse_svg(layout.svg)
    groups = groups_by_id(root)

    def fill(name):
        g = groups[layout.name_to_id[name]]
        return next(el.get("fill") for el in g if el.tag in (SVG_NS + "path",
                                                              SVG_NS + "polygon"))

    assert fill("branch/a") != fill("h") and fill("h") == fill("out")
