"""Device names: ``/job:J/replica:R/task:T/device:TYPE:N``, partial specs, and merging.

Parsed once into a ``DeviceSpec``; short forms ``/cpu:0`` and ``/gpu:1`` are accepted in any case
and normalised to ``/device:CPU:0``. ``merge_from`` overwrites this spec's fields with the ones the
other spec sets, which is how nested ``tf.device`` scopes combine (the inner scope wins).

Deviations from TF1's Python ``DeviceSpec``, both in the direction of TF's C++ name parser: the
device type is upper-cased everywhere (TF keeps ``/device:gpu:0`` lower-case until the C++ side
canonicalises it), and a device index without a type is kept as ``/device:*:N`` instead of being
dropped by ``to_string``.
"""

from __future__ import annotations

import re

_FIELDS = ("job", "replica", "task", "device_type", "device_index")
_SHORT_TYPES = ("cpu", "gpu")  # TF1 accepts the legacy "/cpu:0" form for these two only


class DeviceSpec:
    __slots__ = _FIELDS

    def __init__(self, job=None, replica=None, task=None, device_type=None, device_index=None):
        self.job = job
        self.replica = None if replica is None else int(replica)
        self.task = None if task is None else int(task)
        self.device_type = None if device_type is None else str(device_type).upper()
        if self.device_type == "*":
            self.device_type = None
        self.device_index = None if device_index in (None, "*") else int(device_index)

    @classmethod
    def from_string(cls, spec: str) -> DeviceSpec:
        return cls().parse_from_string(spec)

    def parse_from_string(self, spec: str) -> DeviceSpec:
        """TF1's in-place parse: sets the fields ``spec`` names, resets the others; returns self."""
        for f in _FIELDS:
            setattr(self, f, None)
        if not spec:
            return self
        seen_type = False
        for part in spec.split("/"):
            if not part:
                continue
            key, _, rest = part.partition(":")
            low = key.lower()
            try:
                if low == "job":
                    self.job = rest
                elif low == "replica":
                    self.replica = int(rest)
                elif low == "task":
                    self.task = int(rest)
                elif low == "device" or (low in _SHORT_TYPES
                                         and re.fullmatch(r"(\d+|\*)?", rest)):
                    if seen_type:
                        raise ValueError("Cannot specify multiple device types")
                    seen_type = True
                    dtype, idx = rest.partition(":")[::2] if low == "device" else (key, rest)
                    self.device_type = dtype.upper() if dtype and dtype != "*" else None
                    self.device_index = int(idx) if idx and idx != "*" else None
                else:
                    raise ValueError(f"Unknown attribute: {key!r}")
            except ValueError as e:
                raise ValueError(f"Invalid device specification {spec!r}: {e}") from None
        return self

    def merge_from(self, other: DeviceSpec) -> None:
        """Fields set in ``other`` override this spec's (TF semantics)."""
        for f in _FIELDS:
            v = getattr(other, f)
            if v is not None:
                setattr(self, f, v)

    def make_merged_spec(self, other: DeviceSpec) -> DeviceSpec:
        out = DeviceSpec(*[getattr(self, f) for f in _FIELDS])
        out.merge_from(other)
        return out

    def replace(self, **kwargs) -> DeviceSpec:
        vals = {f: getattr(self, f) for f in _FIELDS}
        vals.update(kwargs)
        return DeviceSpec(**vals)

    def to_string(self) -> str:
        s = ""
        if self.job is not None:
            s += f"/job:{self.job}"
        if self.replica is not None:
            s += f"/replica:{self.replica}"
        if self.task is not None:
            s += f"/task:{self.task}"
        if self.device_type is not None or self.device_index is not None:
            idx = "*" if self.device_index is None else self.device_index
            s += f"/device:{self.device_type or '*'}:{idx}"
        return s

    def is_compatible_with(self, other: DeviceSpec) -> bool:
        return all(
            getattr(self, f) is None or getattr(other, f) is None
            or getattr(self, f) == getattr(other, f)
            for f in _FIELDS
        )

    def __eq__(self, other):
        return isinstance(other, DeviceSpec) and self.to_string() == other.to_string()

    def __hash__(self):
        return hash(self.to_string())

    def __repr__(self):
        return f"DeviceSpec({self.to_string()!r})"

    __str__ = to_string


def canonical_name(spec) -> str:
    if spec is None:
        return ""
    if isinstance(spec, DeviceSpec):
        return spec.to_string()
    return DeviceSpec.from_string(spec).to_string()
