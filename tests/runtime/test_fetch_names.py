"""Fetching by name: what TF raises for names that do not resolve (a ValueError naming the
fetch), for junk (a TypeError), and that a name given as bytes works."""

import pytest

import dflab as tf


@pytest.fixture
def sess():
    tf.constant(1.0, name="x")
    with tf.Session() as s:
        yield s


@pytest.mark.parametrize("fetch,words", [
    ("no_such:0", "operation, 'no_such', does not exist"),
    ("no_such", "refers to an Operation not in the graph"),
    ("x:5", "only has 1 outputs"),
    ("x:a", "looks a like a Tensor name, but is not a valid one"),
    (["x:0", "nope:0"], "'nope:0'"),
    ({"k": "nope"}, "'nope'"),
])
def test_names_that_do_not_resolve_are_value_errors_naming_the_fetch(sess, fetch, words):
    with pytest.raises(ValueError, match="cannot be interpreted as a Tensor") as info:
        sess.run(fetch)
    assert not isinstance(info.value, KeyError)
    assert words in str(info.value)


@pytest.mark.parametrize("fetch", [5, 2.5, object()], ids=["int", "float", "object"])
def test_junk_fetches_are_type_errors(sess, fetch):
    with pytest.raises(TypeError, match="has invalid type"):
        sess.run(fetch)


def test_bytes_name_is_fetched(sess):
    assert sess.run(b"x:0") == 1.0
