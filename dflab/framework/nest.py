"""Nested structures (lists, tuples, namedtuples, dicts) of leaves: flatten and rebuild.

Dict entries are visited in sorted key order, as in ``tf.nest``. ``None`` is a leaf.
"""

from __future__ import annotations

from collections.abc import Mapping


def is_sequence(x) -> bool:
    return isinstance(x, (list, tuple, Mapping))


def _children(x):
    if isinstance(x, Mapping):
        return [x[k] for k in sorted(x)]
    return list(x)


def flatten(structure) -> list:
    if not is_sequence(structure):
        return [structure]
    out = []
    for child in _children(structure):
        out.extend(flatten(child))
    return out


def _rebuild(like, values):
    if isinstance(like, Mapping):
        return type(like)(zip(sorted(like), values)) if type(like) is not dict else \
            dict(zip(sorted(like), values))
    if isinstance(like, tuple) and hasattr(like, "_fields"):
        return type(like)(*values)
    return type(like)(values)


def pack_sequence_as(structure, flat_sequence):
    flat = list(flat_sequence)
    n = len(flatten(structure))
    if n != len(flat):
        raise ValueError(f"Structure had {n} elements, but flat_sequence had {len(flat)}.")
    pos = [0]

    def build(s):
        if not is_sequence(s):
            v = flat[pos[0]]
            pos[0] += 1
            return v
        return _rebuild(s, [build(c) for c in _children(s)])

    return build(structure)


def assert_same_structure(a, b, check_types=True) -> None:
    def kind(x):
        if isinstance(x, Mapping):
            return ("dict", tuple(sorted(x)))
        if isinstance(x, tuple) and hasattr(x, "_fields"):
            return (type(x).__name__, len(x))
        if isinstance(x, (list, tuple)):
            return (type(x).__name__ if check_types else "seq", len(x))
        return "leaf"

    def walk(x, y):
        kx, ky = kind(x), kind(y)
        if kx != ky:
            raise ValueError(
                f"The two structures don't have the same nested structure: {a!r} and {b!r}")
        if kx != "leaf":
            for cx, cy in zip(_children(x), _children(y)):
                walk(cx, cy)

    walk(a, b)


def map_structure(fn, *structures):
    for s in structures[1:]:
        assert_same_structure(structures[0], s)
    flats = [flatten(s) for s in structures]
    return pack_sequence_as(structures[0], [fn(*xs) for xs in zip(*flats)])


__all__ = ["flatten", "pack_sequence_as", "assert_same_structure", "map_structure",
           "is_sequence"]
