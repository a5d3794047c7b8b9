"""Element structures of ``tf.data``: nested tuples and dicts of components.

``tf.data`` has its own rule for what is a structure (unlike ``tf.nest``): tuples (namedtuples
included) and dicts nest; a *list* is one component (``from_tensor_slices([1, 2, 3])`` slices one
tensor). Dict entries are visited in sorted key order. A structure is kept as a template (the
nested value with any leaves) plus the flat list of components' dtypes and shapes.
"""

from __future__ import annotations

from collections.abc import Mapping

from dflab.framework.composite import CompositeArgument
from dflab.framework.ops import Tensor
from dflab.framework.tensor_shape import TensorShape


def is_nested(x) -> bool:
    return isinstance(x, (tuple, Mapping))


def flatten(structure) -> list:
    if isinstance(structure, Mapping):
        return [leaf for k in sorted(structure) for leaf in flatten(structure[k])]
    if isinstance(structure, tuple):
        return [leaf for child in structure for leaf in flatten(child)]
    return [structure]


def count(structure) -> int:
    return len(flatten(structure))


def pack(structure, flat):
    """``flat`` rebuilt into the shape of ``structure``."""
    flat = list(flat)
    if len(flat) != count(structure):
        raise ValueError(f"Structure has {count(structure)} components, got {len(flat)} values")
    out, rest = _pack(structure, flat)
    return out


def _pack(structure, flat):
    if isinstance(structure, Mapping):
        items = {}
        for k in sorted(structure):
            items[k], flat = _pack(structure[k], flat)
        return (dict(items) if type(structure) is dict else type(structure)(items)), flat
    if isinstance(structure, tuple):
        children = []
        for child in structure:
            value, flat = _pack(child, flat)
            children.append(value)
        if hasattr(structure, "_fields"):
            return type(structure)(*children), flat
        return tuple(children), flat
    return flat[0], flat[1:]


def same_structure(a, b) -> bool:
    if isinstance(a, Mapping) or isinstance(b, Mapping):
        return isinstance(a, Mapping) and isinstance(b, Mapping) and \
            sorted(a) == sorted(b) and all(same_structure(a[k], b[k]) for k in a)
    if isinstance(a, tuple) or isinstance(b, tuple):
        return isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b) and \
            all(same_structure(x, y) for x, y in zip(a, b))
    return True


def flatten_up_to(structure, value, what: str) -> list:
    """``value``'s components in the order of ``structure``; ``TypeError`` if it does not fit
    (a list counts as a tuple here, as TF accepts generator lists for tuple structures)."""
    if isinstance(structure, Mapping):
        if not isinstance(value, Mapping) or sorted(value) != sorted(structure):
            raise TypeError(f"{what}: expected a dict with keys {sorted(structure)}, got "
                            f"{value!r}")
        return [leaf for k in sorted(structure)
                for leaf in flatten_up_to(structure[k], value[k], what)]
    if isinstance(structure, tuple):
        if not isinstance(value, (tuple, list)) or len(value) != len(structure):
            raise TypeError(f"{what}: expected a tuple of {len(structure)} components, got "
                            f"{value!r}")
        return [leaf for s, v in zip(structure, value) for leaf in flatten_up_to(s, v, what)]
    return [value]


class DatasetSpec:
    """A component of an element that is itself a dataset (``window``'s elements): its
    elements' nesting and flat dtypes and static shapes. The component is one scalar variant
    tensor; where elements are packed for a user (a function's arguments, ``get_next``) it is
    a ``Dataset`` over that tensor, and TF 1.x's ``output_types``, ``output_shapes`` and
    ``output_classes`` give this spec for it (TF's)."""

    def __init__(self, structure, types, shapes):
        self.structure, self.types, self.shapes = structure, list(types), list(shapes)

    def __eq__(self, other):
        return isinstance(other, DatasetSpec) and same_structure(self.structure,
                                                                 other.structure) and \
            self.types == other.types and [s.as_list() if s.ndims is not None else None
                                           for s in self.shapes] == \
            [s.as_list() if s.ndims is not None else None for s in other.shapes]

    def __hash__(self):
        return hash(tuple(self.types))

    def __repr__(self):
        from dflab.eager.function import TensorSpec

        specs = pack(self.structure, [TensorSpec(s, t) for t, s in zip(self.types,
                                                                       self.shapes)])
        return f"DatasetSpec({specs!r}, TensorShape([]))"


# ``Dataset``, registered by ``dflab.data.dataset`` (which imports this module).
_DATASET_CLASS: list = []


def register_dataset_class(cls) -> None:
    _DATASET_CLASS[:] = [cls]


def pack_element(structure, flat):
    """``flat`` rebuilt into ``structure``, a component whose spec is a ``DatasetSpec`` as a
    ``Dataset`` over its variant tensor."""
    specs = flatten(structure)
    if any(isinstance(s, DatasetSpec) for s in specs):
        dataset = _DATASET_CLASS[0]
        flat = [dataset(t, s.structure, s.types, s.shapes) if isinstance(s, DatasetSpec)
                else t for s, t in zip(specs, flat)]
    return pack(structure, flat)


def _legacy(structure, values) -> list:
    """``values`` (one per component), a ``DatasetSpec`` in a dataset component's place."""
    return [s if isinstance(s, DatasetSpec) else v for s, v in zip(flatten(structure), values)]


class HasElementStructure:
    """What datasets and iterators say about their elements, from ``_structure`` (the nesting),
    ``_types`` and ``_shapes`` (one per flattened component), as TF1's properties."""

    @property
    def output_types(self):
        return pack(self._structure, _legacy(self._structure, self._types))

    @property
    def output_shapes(self):
        return pack(self._structure, _legacy(self._structure, self._shapes))

    @property
    def output_classes(self):
        return pack(self._structure, _legacy(self._structure, [Tensor] * len(self._types)))


class ElementsArgument(HasElementStructure, CompositeArgument):
    """A dataset or an iterator as a traced function's argument: its one scalar tensor
    (``_component()``, of ``_COMPONENT_DTYPE``: a variant, a handle), traced by the elements'
    nesting, dtypes and static shapes (a new epoch's dataset or iterator reuses the trace)."""

    _KIND = ""
    _COMPONENT_DTYPE = None

    def _component(self):
        raise NotImplementedError

    def _flat_tensors(self) -> list:
        return [self._component()]

    def _placeholder_specs(self) -> list:
        return [(self._COMPONENT_DTYPE, TensorShape([]))]

    def _trace_key(self) -> tuple:
        return (self._KIND, repr(pack(self._structure, [0] * len(self._types))),
                tuple(self._types), tuple(s.as_tuple() for s in self._shapes))
