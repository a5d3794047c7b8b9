"""The kernel registry: what a kernel declares where it is registered, and mirroring."""

import pytest

from dflab.framework.graph_io import NodeDef
from dflab.kernels import registry
from dflab.kernels.registry import get_kernel_def, kernel, mirror_kernels, register_kernel


@pytest.fixture
def scratch_registry(monkeypatch):
    """The registry's kernels as they are, on a copy the test may add to."""
    monkeypatch.setattr(registry, "_KERNELS", dict(registry._KERNELS))


def _node(op, n_inputs, n_outputs=1, **attr):
    return NodeDef("n", op, [f"x{i}" for i in range(n_inputs)] + ["^c"], attr=attr,
                   output_types=(None,) * n_outputs)


def test_a_duplicate_decorated_kernel_names_the_line_of_the_first(scratch_registry):
    @kernel("TestTwice")
    def first(node, ctx):
        return lambda: None

    line = first.__code__.co_firstlineno  # a decorated function starts at its decorator
    with pytest.raises(KeyError, match=rf"test_registry\.py:{line}"):
        register_kernel("TestTwice", fn=lambda: None)


def test_host_memory_is_declared_by_position_or_by_a_function_of_the_node(scratch_registry):
    register_kernel("TestByPosition", fn=lambda *a: a, host_memory_inputs=(0, -1),
                    host_memory_outputs=(1,))
    register_kernel("TestByNode", fn=lambda *a: a,
                    host_memory_inputs=lambda nd: range(nd.attr["k"]))
    by_position = get_kernel_def(_node("TestByPosition", 4, 2), "CPU")
    assert by_position.host_inputs(_node("TestByPosition", 4)) == {0, 3}
    assert by_position.host_outputs(_node("TestByPosition", 4, 2)) == {1}
    by_node = get_kernel_def(_node("TestByNode", 3), "CPU")
    assert by_node.host_inputs(_node("TestByNode", 3, k=2)) == {0, 1}
    assert by_node.host_outputs(_node("TestByNode", 3)) == frozenset()


def test_host_memory_must_be_positions(scratch_registry):
    with pytest.raises(TypeError, match="TestBadHostMemory: host memory"):
        register_kernel("TestBadHostMemory", fn=lambda x: x, host_memory_inputs=("shape",))


def test_mirroring_skips_host_only_kernels_and_keeps_declarations(scratch_registry):
    register_kernel("TestMirrored", fn=lambda x, s: x, host_memory_inputs=(1,))
    register_kernel("TestHostOnly", fn=lambda x: x, host_only=True)
    register_kernel("TestOwnAccel", fn=lambda x: x)
    register_kernel("TestOwnAccel", "TESTACCEL", fn=lambda x: -x)
    added = mirror_kernels("CPU", "TESTACCEL")
    assert "TestMirrored" in added and "TestHostOnly" not in added
    assert "TestOwnAccel" not in added
    mirrored = get_kernel_def(_node("TestMirrored", 2), "TESTACCEL")
    assert mirrored.device_type == "TESTACCEL"
    assert mirrored.host_inputs(_node("TestMirrored", 2)) == {1}
    assert not registry.has_kernel("TestHostOnly", "TESTACCEL")
    assert registry.is_host_only("TestHostOnly") and not registry.is_host_only("TestMirrored")
    own = get_kernel_def(_node("TestOwnAccel", 1), "TESTACCEL")
    assert own.factory(None, None)(2) == -2


# --- small host arguments --------------------------------------------------------------------
def test_host_ints_remember_constants_and_reread_every_other_array():
    import numpy as np

    from dflab.framework.constant_op import make_ndarray
    from dflab.kernels import context

    constant = make_ndarray([2, -1], np.int32)
    assert context.host_ints(constant) == (2, -1)
    assert context._KNOWN_INTS[id(constant)][0] is constant  # remembered, and held
    held = np.array([3, 4], np.int64)  # frozen as a variable's value is, and written in place
    held.flags.writeable = False  # by an update that unfreezes it
    assert context.host_ints(held) == (3, 4)
    held.flags.writeable = True
    held[0] = 5
    assert context.host_ints(held) == (5, 4) and id(held) not in context._KNOWN_INTS
    fed = np.array([1, 2, 3], np.int32)
    assert context.host_ints(fed[:2]) == (1, 2)
    fed[0] = 9
    assert context.host_ints(fed[:2]) == (9, 2)
    assert context.host_ints(np.array([[1.0, 2.0]])) == (1, 2) and context.host_ints(7) == (7,)
