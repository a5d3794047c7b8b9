"""``flatten_up_to`` and ``assert_shallow_structure`` (not in ``tf.nest``'s public names; the
public ones are checked against TF in tests/fixtures/tf_api/cases_misc.py): results and errors
as TF's ``tensorflow.python.util.nest`` gives them."""

import collections

import pytest

from dflab.framework import nest


def test_flatten_up_to_stops_at_the_shallow_leaves():
    assert nest.flatten_up_to([1, [2, 3]], [[4, 5], [6, 7]]) == [[4, 5], 6, 7]
    assert nest.flatten_up_to({"a": 1, "b": 2}, {"b": [1], "a": (3,)}) == [(3,), [1]]
    assert nest.flatten_up_to([1, 2], (3, 4), check_types=False) == [3, 4]


def test_flatten_up_to_accepts_an_equal_namedtuple_and_any_mapping():
    first = collections.namedtuple("P", "a b")
    second = collections.namedtuple("P", "a b")
    assert nest.flatten_up_to(first(1, 2), second([3], 4)) == [[3], 4]
    assert nest.flatten_up_to({"a": 1}, collections.OrderedDict(a=[5])) == [[5]]


@pytest.mark.parametrize("shallow,given,error", [
    ([1, [2, 3]], [[4, 5], 6], TypeError),   # a leaf where the shallow tree nests
    ([1, 2], (3, 4), TypeError),             # list against tuple
    ([1, 2], [3], ValueError),               # lengths differ
    ({"a": 1}, {"b": 2}, ValueError),        # a missing key
])
def test_flatten_up_to_errors(shallow, given, error):
    with pytest.raises(error):
        nest.flatten_up_to(shallow, given)


def test_mapping_rebuilt_in_its_own_key_order():
    ordered = collections.OrderedDict([("z", 1), ("a", 2)])
    assert nest.flatten(ordered) == [2, 1]
    packed = nest.pack_sequence_as(ordered, [10, 20])
    assert list(packed.items()) == [("z", 20), ("a", 10)]
    default = collections.defaultdict(list, {"b": 1, "a": 2})
    packed = nest.pack_sequence_as(default, [10, 20])
    assert isinstance(packed, collections.defaultdict) and packed.default_factory is list
    assert dict(packed) == {"b": 20, "a": 10}
