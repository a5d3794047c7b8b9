"""``tf.compat.v1``: dflab *is* the v1 API, so ``v1`` is the package itself."""

import sys


class _V1:
    def __getattr__(self, name):
        return getattr(sys.modules["dflab"], name)

    def disable_eager_execution(self):
        """Graph mode is dflab's only mode; kept so TF2-era scripts run unchanged."""

    def disable_v2_behavior(self):
        """See ``disable_eager_execution``."""


v1 = _V1()
