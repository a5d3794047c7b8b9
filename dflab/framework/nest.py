"""Nested structures of leaves, flattened and rebuilt by TF's rules (``tf.nest``).

A structure is nested when it is a mapping, a mapping view or a sequence other than a string
(lists, tuples, namedtuples, ``range`` …); anything else — ``None``, strings, bytes, arrays,
tensors, sets — is a leaf. Mappings are visited in sorted key order whatever their own order,
and rebuilt with their own type and key order; mapping views in their iteration order.
Namedtuples of the same name and fields count as the same type, and so do any two mappings.
"""

from __future__ import annotations

import collections
from collections.abc import Mapping, MappingView, Sequence

_VALID_KWARGS = ("check_types", "expand_composites")


def is_nested(seq) -> bool:
    """Whether ``seq`` is a structure (rather than a leaf)."""
    if isinstance(seq, (Mapping, MappingView)):
        return True
    return isinstance(seq, Sequence) and not isinstance(seq, (str, bytes, bytearray))


is_sequence = is_nested  # TF1's name


def _is_namedtuple(x) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def _sorted_keys(mapping) -> list:
    try:
        return sorted(mapping)
    except TypeError as e:
        raise TypeError("nest only supports dicts with sortable keys.") from e


def _children(x) -> list:
    if isinstance(x, Mapping):
        return [x[k] for k in _sorted_keys(x)]
    return list(x)


def flatten(structure, expand_composites: bool = False) -> list:
    """The leaves of ``structure``, depth first (mappings in sorted key order)."""
    if not is_nested(structure):
        return [structure]
    out = []
    for child in _children(structure):
        out.extend(flatten(child))
    return out


def _sequence_like(instance, values: list):
    """A structure of ``instance``'s type holding ``values`` (in flattening order)."""
    if isinstance(instance, Mapping):
        by_key = dict(zip(_sorted_keys(instance), values))
        kind = type(instance)
        result = (collections.defaultdict(instance.default_factory)
                  if kind is collections.defaultdict else kind())
        for key in instance:  # the instance's own key order
            result[key] = by_key[key]
        return result
    if isinstance(instance, MappingView):
        return list(values)
    if _is_namedtuple(instance):
        return type(instance)(*values)
    if isinstance(instance, range):
        return list(values)
    return type(instance)(values)


def pack_sequence_as(structure, flat_sequence, expand_composites: bool = False):
    """``structure`` with its leaves replaced, in order, by the items of ``flat_sequence``."""
    if not is_nested(flat_sequence):
        raise TypeError(f"Attempted to pack value:\n  {flat_sequence!r}\ninto a structure, but "
                        f"found incompatible type `{type(flat_sequence)}` instead.")
    flat = list(flat_sequence)
    if not is_nested(structure):
        if len(flat) != 1:
            raise ValueError(
                f"The target structure is of type `{type(structure)}`\n  {structure!r}\n"
                f"However the input is a sequence ({type(flat_sequence)}) of length "
                f"{len(flat)}.\n  {flat_sequence!r}\nnest cannot guarantee that it is safe "
                "to map one to the other.")
        return flat[0]
    n = len(flatten(structure))
    if n != len(flat):
        raise ValueError(
            f"Could not pack sequence. Structure had {n} atoms, but flat_sequence had "
            f"{len(flat)} items.  Structure: {structure!r}, flat_sequence: {flat!r}.")
    pos = 0

    def build(s):
        nonlocal pos
        if not is_nested(s):
            pos += 1
            return flat[pos - 1]
        return _sequence_like(s, [build(c) for c in _children(s)])

    return build(structure)


def _same_type(x, y) -> bool:
    if isinstance(x, Mapping) and isinstance(y, Mapping):
        return True
    if _is_namedtuple(x) and _is_namedtuple(y):
        return (type(x).__name__ == type(y).__name__
                and tuple(type(x)._fields) == tuple(type(y)._fields))
    return type(x) is type(y)


def _mismatch(a, b, detail: str) -> str:
    return ("The two structures don't have the same nested structure.\n\n"
            f"First structure: type={type(a).__name__} str={a!r}\n\n"
            f"Second structure: type={type(b).__name__} str={b!r}\n\n"
            f"More specifically: {detail}")


def assert_same_structure(nest1, nest2, check_types: bool = True,
                          expand_composites: bool = False) -> None:
    """Raise ``ValueError`` unless the two structures nest alike (``TypeError`` when, with
    ``check_types``, two of their sequences differ in type)."""

    def walk(x, y):
        if is_nested(x) != is_nested(y):
            raise ValueError(_mismatch(nest1, nest2, (
                f"Substructure \"type={type(x).__name__} str={x!r}\" is a sequence, while "
                f"substructure \"type={type(y).__name__} str={y!r}\" is not")
                if is_nested(x) else (
                f"Substructure \"type={type(y).__name__} str={y!r}\" is a sequence, while "
                f"substructure \"type={type(x).__name__} str={x!r}\" is not")))
        if not is_nested(x):
            return
        if check_types and not _same_type(x, y):
            raise TypeError(_mismatch(nest1, nest2, (
                f"The two namedtuples don't have the same sequence type. First structure "
                f"type={type(x).__name__} str={x!r} has type {type(x)}, while second structure "
                f"type={type(y).__name__} str={y!r} has type {type(y)}")))
        if isinstance(x, Mapping) and isinstance(y, Mapping) and set(x) != set(y):
            raise ValueError(_mismatch(nest1, nest2, (
                f"The two dictionaries don't have the same set of keys. First structure has "
                f"keys {sorted(x)}, while second structure has keys {sorted(y)}.")))
        cx, cy = _children(x), _children(y)
        if len(cx) != len(cy):
            raise ValueError(_mismatch(nest1, nest2, (
                f"Substructure \"type={type(x).__name__} str={x!r}\" has length {len(cx)}, "
                f"while substructure \"type={type(y).__name__} str={y!r}\" has length "
                f"{len(cy)}")))
        for a, b in zip(cx, cy):
            walk(a, b)

    walk(nest1, nest2)


def map_structure(func, *structure, **kwargs):
    """``func`` applied to the corresponding leaves of the structures, packed as the first."""
    if not callable(func):
        raise TypeError(f"func must be callable, got: {func}")
    if not structure:
        raise ValueError("Must provide at least one structure")
    for key in kwargs:
        if key not in _VALID_KWARGS:
            raise ValueError("Only valid keyword arguments are `check_types` and "
                             f"`expand_composites`, not: `{key}`")
    check_types = kwargs.get("check_types", True)
    for other in structure[1:]:
        assert_same_structure(structure[0], other, check_types=check_types)
    flats = [flatten(s) for s in structure]
    return pack_sequence_as(structure[0], [func(*xs) for xs in zip(*flats)])


def _shallow_type_ok(shallow, given) -> bool:
    # As TF's: a subclass will do, and so will a namedtuple of the same name and fields or
    # any mapping for a mapping.
    if isinstance(given, type(shallow)):
        return True
    if _is_namedtuple(shallow) and _is_namedtuple(given):
        return _same_type(shallow, given)
    return isinstance(shallow, Mapping) and isinstance(given, Mapping)


def assert_shallow_structure(shallow_tree, input_tree, check_types: bool = True) -> None:
    """Raise unless ``input_tree`` nests at least as deeply as ``shallow_tree``."""
    if not is_nested(shallow_tree):
        return
    if not is_nested(input_tree):
        raise TypeError("If shallow structure is a sequence, input must also be a sequence. "
                        f"Input has type: {type(input_tree)}.")
    if check_types and not _shallow_type_ok(shallow_tree, input_tree):
        raise TypeError("The two structures don't have the same sequence type. Input "
                        f"structure has type {type(input_tree)}, while shallow structure has "
                        f"type {type(shallow_tree)}.")
    if isinstance(shallow_tree, Mapping):
        missing = [k for k in shallow_tree if k not in input_tree]
        if missing:
            raise ValueError("The shallow_tree's keys are not a subset of the input_tree's "
                             "keys. The shallow_tree has the following keys that are not in "
                             f"the input_tree: {missing}.")
        pairs = [(shallow_tree[k], input_tree[k]) for k in _sorted_keys(shallow_tree)]
    else:
        if len(input_tree) != len(shallow_tree):
            raise ValueError("The two structures don't have the same sequence length. Input "
                             f"structure has length {len(input_tree)}, while shallow structure "
                             f"has length {len(shallow_tree)}.")
        pairs = list(zip(_children(shallow_tree), _children(input_tree)))
    for s, i in pairs:
        assert_shallow_structure(s, i, check_types=check_types)


def flatten_up_to(shallow_tree, input_tree, check_types: bool = True,
                  expand_composites: bool = False) -> list:
    """``input_tree`` flattened only as deep as ``shallow_tree`` nests."""
    assert_shallow_structure(shallow_tree, input_tree, check_types=check_types)

    def walk(s, i):
        if not is_nested(s):
            return [i]
        children = ([i[k] for k in _sorted_keys(s)] if isinstance(s, Mapping)
                    else _children(i))
        out = []
        for sc, ic in zip(_children(s), children):
            out.extend(walk(sc, ic))
        return out

    return walk(shallow_tree, input_tree)


__all__ = ["flatten", "pack_sequence_as", "assert_same_structure", "map_structure",
           "is_nested", "is_sequence", "flatten_up_to", "assert_shallow_structure"]
