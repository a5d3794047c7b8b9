"""TF's tables and tensor bundles (dflab.lib.io.table, tensor_bundle) below the Saver: big
tables span blocks, every tensor round-trips, and damaged bytes only ever raise TF errors."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tf_interop import FIXTURES

import dflab as tf
from dflab.lib.io import table, tensor_bundle


def test_a_table_of_many_blocks_reads_back_in_order():
    rows = [(f"key{i:06d}".encode(), bytes([i % 251]) * (i % 700)) for i in range(3000)]
    data = table.build_table(reversed(rows))
    assert len(data) > 3 * table.BLOCK_SIZE  # several data blocks and index entries
    assert table.read_table(data, "t") == rows
    assert table.read_table(table.build_table([]), "t") == []


def test_separator_keys_follow_tfs_rules():
    assert table._shortest_separator(b"abcd", b"abzz") == b"abd"
    assert table._shortest_separator(b"abc", b"abd") == b"abc"  # no room between
    assert table._shortest_separator(b"ab", b"abc") == b"ab"  # a prefix: unchanged
    assert table._short_successor(b"\xff\xffa") == b"\xff\xffb"
    assert table._short_successor(b"\xff\xff") == b"\xff\xff"


@pytest.mark.parametrize("value", [
    np.float32(2.5), np.arange(6, dtype=np.float64).reshape(2, 3), np.array([], np.int32),
    np.array([True, False]), np.array([1 + 1j], np.complex128), np.arange(4, dtype=np.uint64),
    np.array([[b"a", b""], [b"\x00" * 300, "é".encode()]], dtype=object),
    np.array(b"scalar", dtype=object)])
def test_every_dtype_round_trips_through_a_bundle(tmp_path, value):
    files = {}
    prefix = str(tmp_path / "b")
    entries = tensor_bundle.write_data_file(prefix, ["x"], [value], files.__setitem__)
    tensor_bundle.write_index(prefix, entries, 1, files.__setitem__)
    for path, data in files.items():
        open(path, "wb").write(data)
    reader = tensor_bundle.BundleReader(prefix, files[prefix + ".index"])
    got = reader.get_tensor("x")
    assert got.shape == np.shape(value)
    assert list(np.asarray(got).reshape(-1)) == list(np.asarray(value).reshape(-1))


def test_a_bundle_cannot_hold_resources():
    with pytest.raises(tf.errors.InvalidArgumentError, match="resource"):
        tensor_bundle.dtype_enum(tf.resource)


INDEX = (FIXTURES / "ckpt" / "model-7.index").read_bytes()


@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(cuts=st.lists(st.tuples(st.integers(0, len(INDEX) - 1), st.integers(1, 255)),
                     min_size=1, max_size=4),
       truncate=st.one_of(st.none(), st.integers(0, len(INDEX))))
def test_damaged_index_bytes_raise_only_tf_errors(cuts, truncate):
    data = bytearray(INDEX)
    for where, flip in cuts:
        data[where] ^= flip
    data = bytes(data[:truncate] if truncate is not None else data)
    prefix = str(FIXTURES / "ckpt" / "model-7")
    try:
        reader = tensor_bundle.BundleReader(prefix, data)
        for name in reader.entries:
            if reader.dtype(name) is not None:
                reader.get_tensor(name)
    except tf.errors.OpError:
        pass


# A busy machine must not fail the test on Hypothesis's own timing check (as its sibling).
@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(entry=st.binary(max_size=40), header=st.one_of(st.none(), st.binary(max_size=12)))
def test_any_entry_bytes_in_a_valid_table_raise_only_tf_errors(entry, header):
    good_header = tensor_bundle.index_bytes({}, 1)
    rows = table.read_table(good_header, "h")
    data = table.build_table([(b"", rows[0][1] if header is None else header), (b"w", entry)])
    try:
        reader = tensor_bundle.BundleReader(str(FIXTURES / "ckpt" / "model-7"), data)
        if reader.dtype("w") is not None:
            reader.get_tensor("w")
    except tf.errors.OpError:
        pass
