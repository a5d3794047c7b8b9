"""The pass grouping an optimizer's updates (``dflab.runtime.gpu_passes``), on node defs and
in sessions: what groups, what is left as it is, and where the pass runs."""

import numpy as np

import dflab as tf
from dflab.framework import dtypes
from dflab.framework.graph_io import NodeDef
from dflab.runtime.gpu_passes import group_updates

R, F = dtypes.resource, dtypes.float32


def _apply(name, var, grad, lr="lr:0", extra=()):
    return NodeDef(name, "ResourceApplyGradientDescent", [var, lr, grad, *extra],
                   input_types=(R, F, F))


def _node(name, op, inputs=()):
    return NodeDef(name, op, list(inputs))


def test_updates_sharing_their_scalars_become_one_node_in_the_last_ones_place():
    defs = [_node("lr", "Const"), _node("w", "VarHandleOp"), _node("b", "VarHandleOp"),
            _node("gw", "Neg"), _apply("sgd/w", "w:0", "gw:0"), _node("gb", "Neg"),
            _apply("sgd/b", "b:0", "gb:0", extra=("^gw",)), _node("done", "NoOp",
                                                                   ["^sgd/w", "^sgd/b"])]
    out = group_updates(defs)
    assert [d.op for d in out] == ["Const", "VarHandleOp", "VarHandleOp", "Neg", "Neg",
                                   "_MultiApply", "NoOp"]
    group = out[5]
    assert group.input == ["w:0", "gw:0", "b:0", "gb:0", "lr:0", "^gw"]
    assert group.attr["members"] == ["sgd/w", "sgd/b"]
    assert out[6].input == ["^" + group.name]  # what waited for the members waits for it


def test_updates_are_left_alone_when_something_in_between_waits_for_one():
    defs = [_node("lr", "Const"), _node("w", "VarHandleOp"), _node("b", "VarHandleOp"),
            _apply("sgd/w", "w:0", "gw:0"), _node("after_w", "NoOp", ["^sgd/w"]),
            _apply("sgd/b", "b:0", "gb:0")]
    assert group_updates(defs) == defs


def test_different_scalars_or_a_single_update_do_not_group():
    defs = [_apply("sgd/w", "w:0", "gw:0", lr="lr1:0"), _apply("sgd/b", "b:0", "gb:0",
                                                               lr="lr2:0")]
    assert group_updates(defs) == defs
    assert group_updates(defs[:1]) == defs[:1]


def test_scalars_read_through_reads_and_casts_of_one_variable_are_the_same():
    defs = [_node("p", "VarHandleOp"),
            NodeDef("r1", "ReadVariableOp", ["p:0"]), NodeDef("r2", "ReadVariableOp", ["p:0"]),
            _apply("sgd/w", "w:0", "gw:0", lr="r1:0"), _apply("sgd/b", "b:0", "gb:0",
                                                                lr="r2:0")]
    out = group_updates(defs)
    assert [d.name for d in out] == ["p", "r1", "sgd/_MultiApply"]  # r2 was read by nothing
    assert out[-1].input[-1] == "r1:0"
    assert [d.name for d in group_updates(defs, keep=["r2"])] == [
        "p", "r1", "r2", "sgd/_MultiApply"]


def test_the_pass_runs_on_gpus_only(strict_gpu):
    def plan_types(device, config):
        g = tf.Graph()
        with g.as_default(), tf.device(device):
            ws = [tf.Variable(np.ones(3, np.float32), use_resource=True) for _ in range(3)]
            loss = tf.add_n([tf.reduce_sum(w * w) for w in ws])
            step = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
            init = tf.global_variables_initializer()
        with tf.Session(graph=g, config=config) as s:
            s.run(init)
            s.run(step)
            plan = next(p for p in s._master._plans.values() if step in p.placement)
            return [n.op for spec in plan.specs for n in spec.graph_def.node]

    on = tf.RewriterConfig(remapping=tf.RewriterConfig.ON)
    cpu = plan_types("/cpu:0", tf.ConfigProto(
        graph_options=tf.GraphOptions(rewrite_options=on)))
    gpu = plan_types("/gpu:0", tf.ConfigProto(dflab={"gpu_step_replay": False}))
    assert cpu.count("ResourceApplyGradientDescent") == 3 and "_MultiApply" not in cpu
    assert gpu.count("_MultiApply") == 1 and "ResourceApplyGradientDescent" not in gpu
