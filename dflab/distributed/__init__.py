"""Distributed execution: clusters of tasks, their servers, and the transports between them
(docs/distributed.md)."""
