"""Names on a Ray cluster: a task's actor and a session target (imports no Ray)."""

from __future__ import annotations

from dflab.framework import errors

TARGET_PREFIX = "dflab+ray://"
DEFAULT_NAMESPACE = "dflab"


def actor_name(job: str, index: int) -> str:
    """The name of a task's actor in its Ray namespace."""
    return f"dflab/{job}/{index}"


def target_of(namespace: str, job: str, index: int) -> str:
    """What ``tf.Session`` takes to run on the cluster of that task."""
    return f"{TARGET_PREFIX}{namespace}/{job}/{index}"


def parse_target(target: str) -> tuple[str, str, int]:
    """``dflab+ray://<namespace>/<job>/<index>`` -> (namespace, job, index)."""
    rest = target[len(TARGET_PREFIX):]
    parts = rest.rsplit("/", 2)
    if len(parts) != 3 or not all(parts) or not parts[2].isdigit():
        raise errors.InvalidArgumentError(
            None, None, f"Malformed Ray target {target!r}: expected "
            f"{TARGET_PREFIX}<namespace>/<job>/<task index>")
    return parts[0], parts[1], int(parts[2])
