"""The runtime: devices, placement, partitioning, execution, sessions (see docs/architecture.md).

Importing it registers the CuPy GPU backend (``dflab.runtime.gpu``), which imports CuPy only
when a session first counts GPUs.
"""

from dflab.runtime import gpu as _gpu  # noqa: F401 - registers the "GPU" device backend
