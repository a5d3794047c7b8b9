"""variable_scope (being written)."""

__all__ = []
