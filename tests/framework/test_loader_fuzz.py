"""Property: whatever is done to a valid exported graph, meta graph or checkpoint index (a key
dropped, a value swapped for any JSON value or a random string, deep nesting, bytes garbled), the
loaders either load it or raise a dflab (TF) error class: never a raw Python error."""

import copy
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dflab as tf
from dflab.framework.graph_io import graph_def_from_json

_SETTINGS = settings(max_examples=120, deadline=None, derandomize=True,
                     suppress_health_check=[HealthCheck.function_scoped_fixture,
                                            HealthCheck.too_slow])

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                 max_size=3),
    max_leaves=8)


def _paths(obj, prefix=()):
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, prefix + (i,))


_DEEP = "\u0000deep\u0000"  # stands for the nesting until the text is written


def _mutate(obj, data) -> bytes:
    """One random defect in ``obj`` (a deep copy is changed), serialized."""
    obj = copy.deepcopy(obj)
    path = data.draw(st.sampled_from(list(_paths(obj))), label="path")
    kind = data.draw(st.sampled_from(["drop", "replace", "string", "deep", "garble"]),
                     label="kind")
    if kind == "garble":
        text = json.dumps(obj).encode()
        at = data.draw(st.integers(0, len(text) - 1), label="at")
        junk = data.draw(st.binary(min_size=1, max_size=4), label="junk")
        return text[:at] + junk + text[at + len(junk):]
    depth = 0
    if kind == "deep":
        # Just deep, or deeper than the JSON parser's recursion limit.
        depth = data.draw(st.sampled_from([40, 300, 5000]), label="depth")
        value = _DEEP
    elif kind == "string":
        value = data.draw(st.text(max_size=12), label="string")
    else:
        value = data.draw(_json_values, label="value")
    if not path:
        obj = value
    elif kind == "drop":
        parent = obj
        for k in path[:-1]:
            parent = parent[k]
        del parent[path[-1]]
    else:
        parent = obj
        for k in path[:-1]:
            parent = parent[k]
        parent[path[-1]] = value
    return json.dumps(obj).replace(json.dumps(_DEEP), "[" * depth + "]" * depth).encode()


def _example_graph():
    a = tf.constant([[1.0, 2.0], [3.0, 4.0]], name="a")
    b = tf.placeholder(tf.float32, [None, 2], name="b")
    s = tf.add_n([tf.matmul(b, a), b], name="s")
    r = tf.reshape(tf.cast(s, tf.int32, name="c"), [-1], name="r")
    tf.identity(tf.constant(["x", "yz"], name="words"), name="w")
    tf.while_loop(lambda i: i < 3, lambda i: i + 1, [tf.constant(0, name="i")])
    return r


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """A graph, its meta graph and its checkpoint index, exported once."""
    directory = tmp_path_factory.mktemp("fuzz")
    with tf.Graph().as_default() as g:
        _example_graph()
        v = tf.Variable([1.0, 2.0], name="v")
        q = tf.FIFOQueue(3, tf.float32, name="q")
        tf.train.add_queue_runner(tf.train.QueueRunner(q, [q.enqueue([tf.constant(1.0)])]))
        saver = tf.train.Saver(checkpoint_format="safetensors")  # a JSON index to mutate
        with tf.Session() as sess:
            sess.run(v.initializer)
            prefix = saver.save(sess, str(directory / "model"))
        graph = g.as_graph_def().to_json()
    with open(prefix + ".meta") as f:
        meta = json.load(f)
    with open(prefix + ".index") as f:
        index = json.load(f)
    return directory, prefix, graph, meta, index


@_SETTINGS
@given(data=st.data())
def test_graph_loader_raises_only_tf_errors(exported, data):
    graph = exported[2]
    text = _mutate(graph, data)
    try:
        with tf.Graph().as_default():
            tf.import_graph_def(graph_def_from_json(text, source="fuzz.json"))
    except tf.errors.OpError:
        pass


@_SETTINGS
@given(data=st.data())
def test_meta_graph_loader_raises_only_tf_errors(exported, data):
    directory, _, _, meta, _ = exported
    path = directory / "fuzz.meta"
    path.write_bytes(_mutate(meta, data))
    try:
        with tf.Graph().as_default():
            tf.train.import_meta_graph(str(path))
    except tf.errors.OpError:
        pass


@_SETTINGS
@given(data=st.data())
def test_checkpoint_reader_raises_only_tf_errors(exported, data):
    directory, prefix, _, _, index = exported
    fuzz_prefix = str(directory / "fuzz")
    data_file = prefix + ".data-00000-of-00001"
    with open(data_file, "rb") as src, open(fuzz_prefix + ".data-00000-of-00001", "wb") as dst:
        dst.write(src.read())
    with open(fuzz_prefix + ".index", "wb") as f:
        f.write(_mutate(index, data))
    try:
        reader = tf.train.NewCheckpointReader(fuzz_prefix)
        reader.get_variable_to_shape_map()
        reader.get_variable_to_dtype_map()
        for name in reader.tensor_names():
            reader.get_tensor(name)
    except tf.errors.OpError:
        pass
