"""tf.Module as TF 2.21's (the expected names and orders are what the same program printed
under TF): default names, name scopes opened once and re-entered, variables and submodules
walked in TF's order, TF's refusal of bad names; a module trained eagerly through its
trainable_variables and saved/restored by tf.train.Checkpoint."""

from __future__ import annotations

import numpy as np
import pytest

import dflab as tf
from dflab.eager import eager_mode


class Dense(tf.Module):
    def __init__(self, n, name=None):
        super().__init__(name=name)
        self.w = tf.Variable(tf.ones([2, n]), name="w")
        self.b = tf.Variable(tf.zeros([n]), name="b", trainable=False)

    @tf.Module.with_name_scope
    def __call__(self, x):
        return tf.matmul(x, self.w) + self.b


class MLP(tf.Module):
    def __init__(self):
        super().__init__()
        self.layers = [Dense(3), Dense(2, name="out")]
        self.scale = tf.Variable(2.0, name="scale")
        self.extra = {"z": tf.Variable(1.0, name="z"), "a": tf.Variable(1.0, name="a")}


def test_names_and_the_order_of_variables_are_tfs():
    with eager_mode():
        m = MLP()
        assert (m.name, m.name_scope.name) == ("mlp", "mlp/")
        assert [layer.name for layer in m.layers] == ["dense", "out"]
        # Own attributes sorted (extra: a, z; scale), then the submodules', breadth first.
        assert [v.name for v in m.variables] == ["a:0", "z:0", "scale:0", "b:0", "w:0", "b:0",
                                                 "w:0"]
        assert [v.name for v in m.trainable_variables] == ["a:0", "z:0", "scale:0", "w:0",
                                                           "w:0"]
        assert [v.name for v in m.non_trainable_variables] == ["b:0", "b:0"]
        assert m.submodules == tuple(m.layers)
        assert m.variables[3] is m.layers[0].b


def test_a_graph_module_opens_its_scope_once_and_reenters_it():
    with tf.Graph().as_default():
        d = Dense(2)
        assert d.name_scope.name == "dense/" and d.w.name == "w:0"
        assert d(tf.ones([1, 2])).name == "dense/add:0"
        assert d(tf.ones([1, 2])).name == "dense/add_1:0"  # the same scope, re-entered
        with tf.name_scope("outer"):
            d2 = Dense(2)
        assert d2.name_scope.name == "outer/dense/" and d2.w.name == "outer/w:0"
        assert d2(tf.ones([1, 2])).name == "outer/dense/add:0"
        assert Dense(1).name_scope.name == "dense_1/"


@pytest.mark.parametrize("bad", ["1x", "a b", "a/b", ""])
def test_a_name_must_be_an_identifier(bad):
    with pytest.raises(ValueError, match="not a valid module name"):
        tf.Module(name=bad)


def test_a_module_trains_and_checkpoints(tmp_path):
    with eager_mode():
        rng = np.random.default_rng(0)
        x = rng.normal(size=(16, 2)).astype(np.float32)
        y = (x @ np.array([[1.0], [-2.0]], np.float32)).astype(np.float32)
        model = Dense(1)
        opt = tf.train.GradientDescentOptimizer(0.1)
        losses = []
        for _ in range(30):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(model(tf.constant(x)) - y))
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            losses.append(float(loss))
        assert losses[-1] < losses[0] / 10
        path = tf.train.Checkpoint(model=model).save(str(tmp_path / "ckpt"))
        again = Dense(1)
        tf.train.Checkpoint(model=again).restore(path).assert_consumed()
        np.testing.assert_array_equal(again.w.numpy(), model.w.numpy())
        keys = {k for k, _ in tf.train.list_variables(path)}
        assert {"model/w/.ATTRIBUTES/VARIABLE_VALUE", "model/b/.ATTRIBUTES/VARIABLE_VALUE"} <= keys


def test_variables_walk_each_submodule_whole_before_the_next():
    """TF's order beyond one level: own variables, then the first submodule's (its own, then
    its submodules'), then the next submodule's."""

    class Leaf(tf.Module):
        def __init__(self, tag):
            super().__init__()
            self.v = tf.Variable(0.0, name=f"{tag}_own")

    class Branch(tf.Module):
        def __init__(self, tag):
            super().__init__()
            self.own = tf.Variable(0.0, name=f"{tag}_own")
            self.child = Leaf(f"{tag}_child")

    class Root(tf.Module):
        def __init__(self):
            super().__init__()
            self.a = Branch("a")
            self.b = Branch("b")
            self.c = tf.Variable(0.0, name="c")

    with eager_mode():
        root = Root()
        assert [v.name for v in root.variables] == [
            "c:0", "a_own:0", "a_child_own:0", "b_own:0", "b_child_own:0"]
        assert [type(m).__name__ for m in root.submodules] == ["Branch", "Branch", "Leaf",
                                                               "Leaf"]


def test_a_module_sees_the_layers_it_holds():
    """TF's layers are modules: a module's variables include its layers' (own attributes
    first, then each layer's, each sorted), and its submodules list the layers."""
    with eager_mode():
        class Net(tf.Module):
            def __init__(self):
                super().__init__()
                self.d1 = tf.layers.Dense(4, name="d1")
                self.d2 = tf.layers.Dense(2, name="d2")
                self.scale = tf.Variable(1.0, name="scale")

            def __call__(self, x):
                return self.d2(self.d1(x)) * self.scale

        net = Net()
        net(tf.zeros([1, 3]))
        assert [v.name for v in net.trainable_variables] == [
            "scale:0", "d1/bias:0", "d1/kernel:0", "d2/bias:0", "d2/kernel:0"]
        assert net.submodules == (net.d1, net.d2)
        assert isinstance(net.d1, tf.Module)
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(net(tf.ones([2, 3])))
        grads = tape.gradient(loss, net.trainable_variables)
        assert all(g is not None for g in grads)
