"""Object-based checkpoints both ways with TF: a tf.train.Checkpoint TF 2.21 wrote
(tests/fixtures/tf/obj_ckpt: a model, a compat.v1 Adam after one step, a step counter)
restores into dflab with every value and slot matched, dflab's one Adam step gives TF's
numbers, dflab writes the object graph TF wrote for the same objects, and TF restores what
dflab writes (where a TF interpreter is found)."""

from __future__ import annotations

import inspect
import json

import numpy as np
import pytest
from tf_interop import FIXTURES, recipe, requires_tf, run_tf

import dflab as tf
from dflab.eager import eager_mode
from dflab.lib import protos
from dflab.train.object_checkpoint import OBJECT_GRAPH_KEY

R = recipe()
TF_CHECKPOINT = str(FIXTURES / "obj_ckpt" / "ckpt")


class Model:
    def __init__(self, w, b):
        self.w = tf.Variable(w, name="w")
        self.layers = [tf.Variable(b, name="b")]


def _stepped(values=None):
    """The fixture's objects in dflab, after one Adam step with the recipe's gradients."""
    v = R.object_checkpoint_values() if values is None else values
    model = Model(v["w"], v["b"])
    optimizer = tf.train.AdamOptimizer(0.1)
    optimizer.apply_gradients([(tf.constant(v["grad_w"]), model.w),
                               (tf.constant(v["grad_b"]), model.layers[0])])
    step = tf.Variable(v["step"], name="step")
    return tf.train.Checkpoint(model=model, optimizer=optimizer, step=step), model, optimizer


@pytest.fixture
def eager():
    with eager_mode():
        yield


def test_a_tf_object_checkpoint_restores_every_value_and_slot(eager):
    zeros = {k: np.zeros_like(v) for k, v in R.object_checkpoint_values().items()}
    ckpt, model, optimizer = _stepped(zeros)
    status = ckpt.restore(TF_CHECKPOINT)
    status.assert_consumed()  # the object graph's own entry is no value to match
    reader = tf.train.load_checkpoint(TF_CHECKPOINT)
    assert OBJECT_GRAPH_KEY in reader.get_variable_to_shape_map()
    # Scalars as TF's reader gives them: a NumPy scalar, a string as bytes.
    assert type(reader.get_tensor("step/.ATTRIBUTES/VARIABLE_VALUE")) is np.int64
    assert type(reader.get_tensor(OBJECT_GRAPH_KEY)) is bytes
    assert len(status.restored) == 9
    for key, variable in {"model/w": model.w, "model/layers/0": model.layers[0],
                          "step": ckpt.step}.items():
        np.testing.assert_array_equal(variable.numpy(),
                                      reader.get_tensor(f"{key}/.ATTRIBUTES/VARIABLE_VALUE"))
    m_slot = optimizer.get_slot(model.w, "m")
    np.testing.assert_array_equal(m_slot.numpy(), reader.get_tensor(
        "model/w/.OPTIMIZER_SLOT/optimizer/m/.ATTRIBUTES/VARIABLE_VALUE"))


def test_one_adam_step_gives_tfs_numbers(eager):
    ckpt, model, optimizer = _stepped()
    reader = tf.train.load_checkpoint(TF_CHECKPOINT)
    for key, value in [("model/w/.ATTRIBUTES/VARIABLE_VALUE", model.w),
                       ("model/layers/0/.OPTIMIZER_SLOT/optimizer/v/.ATTRIBUTES/VARIABLE_VALUE",
                        optimizer.get_slot(model.layers[0], "v")),
                       ("optimizer/beta2_power/.ATTRIBUTES/VARIABLE_VALUE",
                        optimizer._get_beta_accumulators()[1])]:
        np.testing.assert_allclose(value.numpy(), reader.get_tensor(key), rtol=1e-6,
                                   err_msg=key)


def _canonical(serialized: bytes):
    """An object graph as paths from the root: {path: (children, [(attr, key)])} and the
    slots as (optimizer path, variable path, slot name, slot key): node numbering aside."""
    graph = protos.TrackableObjectGraph.FromString(serialized)
    paths, todo = {0: ()}, [0]
    while todo:
        n = todo.pop()
        for child in graph.nodes[n].children:
            if child.node_id not in paths:
                paths[child.node_id] = paths[n] + (child.local_name,)
                todo.append(child.node_id)
    objects = {p: (sorted(c.local_name for c in graph.nodes[n].children),
                   [(a.name, a.checkpoint_key) for a in graph.nodes[n].attributes])
               for n, p in paths.items() if p[:1] != ("save_counter",) and p != ()}
    slots = sorted((paths[n], paths[s.original_variable_node_id], s.slot_name,
                    graph.nodes[s.slot_variable_node_id].attributes[0].checkpoint_key)
                   for n in paths for s in graph.nodes[n].slot_variables)
    assert all(node.has_checkpoint_values.value for node in graph.nodes)
    return objects, slots


def test_dflab_writes_the_object_graph_tf_wrote(eager, tmp_path):
    ckpt, _, _ = _stepped()
    path = ckpt.write(str(tmp_path / "ckpt"))
    ours = tf.train.load_checkpoint(path).get_tensor(OBJECT_GRAPH_KEY)
    theirs = tf.train.load_checkpoint(TF_CHECKPOINT).get_tensor(OBJECT_GRAPH_KEY)
    assert _canonical(ours) == _canonical(theirs)
    graph = protos.TrackableObjectGraph.FromString(ours)
    names = {a.checkpoint_key: a.full_name for n in graph.nodes for a in n.attributes}
    assert names["model/w/.ATTRIBUTES/VARIABLE_VALUE"] == "w"
    # dflab's own restore reads it back whole.
    again, _, _ = _stepped()
    again.restore(path).assert_consumed()


@requires_tf
def test_tf_restores_what_dflab_writes(tmp_path):
    with eager_mode():
        ckpt, model, optimizer = _stepped()
        path = ckpt.save(str(tmp_path / "ckpt"))
        want = {"w": model.w.numpy(), "m": optimizer.get_slot(model.w, "m").numpy()}
    out = run_tf(f"""
        values = recipe.object_checkpoint_values()

        class Model(tf.Module):
            def __init__(self):
                super().__init__()
                self.w = tf.Variable(np.zeros_like(values["w"]), name="w")
                self.layers = [tf.Variable(np.zeros_like(values["b"]), name="b")]

        model = Model()
        optimizer = tf.train.AdamOptimizer(0.1)
        step = tf.Variable(np.int64(0), name="step")
        ckpt = tf.train.Checkpoint(model=model, optimizer=optimizer, step=step)
        status = ckpt.restore({path!r})
        w = model.w.numpy()
        # Slots are made by the first update and take their restored values then.
        optimizer._create_slots([model.w, model.layers[0]])
        status.assert_consumed()
        print(json.dumps({{"w": w.tolist(), "step": int(step.numpy()),
                           "m": optimizer.get_slot(model.w, "m").numpy().tolist(),
                           "counter": int(ckpt.save_counter.numpy())}}))
    """, eager=True)
    got = json.loads(out.strip().splitlines()[-1])
    np.testing.assert_array_equal(np.float32(got["w"]), want["w"])
    np.testing.assert_array_equal(np.float32(got["m"]), want["m"])
    assert got["step"] == 5 and got["counter"] == 1


def _paths_model(tf_module):
    """A tf.Module with a private and a name-mangled attribute, an object reached along two
    paths (and a variable along a third), and dict keys holding '/' and '.'."""

    class Inner(tf_module.Module):
        def __init__(self):
            super().__init__()
            self.v = tf_module.Variable(2.0)

    class Paths(tf_module.Module):
        def __init__(self):
            super().__init__()
            self._w = tf_module.Variable(1.0)
            self.__x = tf_module.Variable(3.0)
            self.a = Inner()
            self.b = self.a
            self.z = [self.a.v]
            self.d = {"k/j": tf_module.Variable(4.0), "p.q": tf_module.Variable(5.0)}

    return Paths()


@requires_tf
def test_object_keys_are_tfs_for_private_shared_and_escaped_names(tmp_path):
    """TF keeps a leading underscore, saves a shared object under its shortest path and
    escapes '/' and '.' in names: both sides write the same keys and restore each other's."""
    out = run_tf(f"""
        exec(compile({inspect.getsource(_paths_model)!r}, "paths", "exec"))
        m = _paths_model(tf)
        path = tf.train.Checkpoint(m=m).write({str(tmp_path / "tf")!r})
        print(json.dumps(sorted(n for n, _ in tf.train.list_variables(path))))
    """, eager=True)
    theirs = json.loads(out.strip().splitlines()[-1])
    with eager_mode():
        m = _paths_model(tf)
        ours_path = tf.train.Checkpoint(m=m).write(str(tmp_path / "ours"))
        ours = sorted(n for n, _ in tf.train.list_variables(ours_path))
        assert [k for k in ours if not k.startswith("save_counter")] == theirs
        assert {"m/d/k.Sj/.ATTRIBUTES/VARIABLE_VALUE", "m/_w/.ATTRIBUTES/VARIABLE_VALUE",
                "m/a/v/.ATTRIBUTES/VARIABLE_VALUE"} <= set(ours)
        # TF's checkpoint restores into dflab's objects, every value matched.
        fresh = _paths_model(tf)
        for v in (fresh._w, fresh.a.v, fresh.d["k/j"]):
            v.assign(0.0)
        tf.train.Checkpoint(m=fresh).restore(str(tmp_path / "tf")).assert_consumed()
        assert [float(v.numpy()) for v in (fresh._w, fresh.a.v, fresh.d["k/j"],
                                           fresh.d["p.q"])] == [1.0, 2.0, 4.0, 5.0]
    out = run_tf(f"""
        exec(compile({inspect.getsource(_paths_model)!r}, "paths", "exec"))
        m = _paths_model(tf)
        for v in m.trainable_variables:
            v.assign(0.0)
        tf.train.Checkpoint(m=m).restore({ours_path!r}).assert_existing_objects_matched()
        print(json.dumps([float(m._w.numpy()), float(m.a.v.numpy()), float(m.d["k/j"].numpy())]))
    """, eager=True)
    assert json.loads(out.strip().splitlines()[-1]) == [1.0, 2.0, 4.0]


def test_a_tf_checkpoint_with_an_iterator_restores_its_variables_and_names_the_rest(eager):
    """TF saves an iterator's state as a variant (``obj_ckpt_iterator``, TF 2.21): its index is
    read, the variables restored, and the iterator entry refused by name (it had made the
    whole index 'corrupted')."""
    path = str(FIXTURES / "obj_ckpt_iterator" / "ckpt")
    assert "iterator/.ATTRIBUTES/ITERATOR_STATE" in dict(tf.train.list_variables(path))
    step = tf.Variable(0, dtype=tf.int64)
    it = iter(tf.data.Dataset.range(10).batch(2))
    with pytest.raises(tf.errors.UnimplementedError,
                       match="iterator/.ATTRIBUTES/ITERATOR_STATE in a dtype dflab does not "
                             "read"):
        tf.train.Checkpoint(step=step, iterator=it).restore(path)
    assert int(step.numpy()) == 3
    assert next(it).numpy().tolist() == [0, 1]  # the iterator as it was
    tf.train.Checkpoint(step=tf.Variable(0, dtype=tf.int64)).restore(path)  # without it: fine
