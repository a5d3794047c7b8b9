"""TF-compatible client helpers (``from dflab.client import timeline``, as TF code imports
``tensorflow.python.client.timeline``). Submodules are imported on demand."""
