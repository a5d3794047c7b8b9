"""``tf.VariableSynchronization`` and ``tf.VariableAggregation``: how a variable is kept in step
across replicas and how its replicas' updates combine, as TF's enums.

dflab runs no distribution strategy, so the values only travel with the variable
(``Variable.synchronization``/``.aggregation``) for code that reads them; the one effect they
have here is TF's: an ``ON_READ`` variable is not trainable unless asked to be.
"""

from __future__ import annotations

import enum


class VariableSynchronization(enum.Enum):
    """When a distributed variable is synchronized (TF's values)."""

    AUTO = 0
    NONE = 1
    ON_WRITE = 2
    ON_READ = 3


class VariableAggregationV2(enum.Enum):
    """How the updates of a distributed variable's replicas combine (TF 2's enum)."""

    NONE = 0
    SUM = 1
    MEAN = 2
    ONLY_FIRST_REPLICA = 3

    def __hash__(self):
        return hash(self.value)

    def __eq__(self, other):
        if self is other:
            return True
        if isinstance(other, VariableAggregation):
            return other.value == self.value
        return False


class VariableAggregation(enum.Enum):
    """TF1's ``tf.VariableAggregation``: TF 2's values and the old ``ONLY_FIRST_TOWER``."""

    NONE = 0
    SUM = 1
    MEAN = 2
    ONLY_FIRST_REPLICA = 3
    ONLY_FIRST_TOWER = 3  # deprecated alias of ONLY_FIRST_REPLICA

    def __hash__(self):
        return hash(self.value)


def validate_synchronization_aggregation_trainable(synchronization, aggregation, trainable,
                                                   name):
    """The (synchronization, aggregation, trainable) a new variable gets: defaults filled in,
    plain values turned into the enums, and ``trainable`` off by default for ``ON_READ``."""
    if aggregation is None:
        aggregation = VariableAggregation.NONE
    elif not isinstance(aggregation, (VariableAggregation, VariableAggregationV2)):
        try:
            aggregation = VariableAggregationV2(aggregation)
        except ValueError:
            raise ValueError(f"Invalid variable aggregation mode: {aggregation} for variable: "
                             f"{name}") from None
    if synchronization is None:
        synchronization = VariableSynchronization.AUTO
    else:
        try:
            synchronization = VariableSynchronization(synchronization)
        except ValueError:
            raise ValueError(f"Invalid variable synchronization mode: {synchronization} for "
                             f"variable: {name}") from None
    if trainable is None:
        trainable = synchronization != VariableSynchronization.ON_READ
    return synchronization, aggregation, trainable


__all__ = ["VariableSynchronization", "VariableAggregation"]
