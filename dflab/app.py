"""``tf.app``: ``run`` (absl's ``app.run`` with TF's tolerant flag parsing) and ``flags``."""

from __future__ import annotations

import sys as _sys

from absl.app import run as _absl_run

from dflab import flags


def _parse_flags_tolerate_undef(argv):
    """Parse the flags dflab's program defined, handing the others on to ``main`` (absl
    stops at an unknown flag; TF 1.x's ``tf.app.run`` did not)."""
    return flags.FLAGS(_sys.argv if argv is None else argv, known_only=True)


def run(main=None, argv=None):
    """Parse the flags, call ``main(argv)`` (``__main__.main`` by default) and exit with its
    return value, as ``tf.app.run`` does."""
    main = main or _sys.modules["__main__"].main
    _absl_run(main=main, argv=argv, flags_parser=_parse_flags_tolerate_undef)


__all__ = ["flags", "run"]
