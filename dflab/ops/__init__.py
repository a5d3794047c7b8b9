"""Op families: schema, shape rule, gradient and builder of each op, side by side.

``array_ops`` and ``math_ops`` are the families' front doors: the modules split off them
(``slicing_ops``, ``indexing_ops``, ``manip_ops``, ``reduction_ops``, ``sequence_ops``,
``clip_ops``, ``linalg_ops``) and the two import each other's names, the parents importing
their children at their end. Importing the parents here makes every import of this package
enter that cycle from a parent, whichever module a caller names first.
"""

from dflab.ops import array_ops, math_ops  # noqa: F401 - the order the cycle needs
