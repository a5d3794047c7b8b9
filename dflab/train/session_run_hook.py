"""``tf.train.SessionRunHook`` and the records hooks exchange with a ``MonitoredSession``.

Call order (TF's): ``begin()`` once while the graph can still change; ``after_create_session``
each time a session is (re)created; around every ``run``: ``before_run(run_context)`` may return
``SessionRunArgs`` to fetch and feed alongside the caller's fetches, ``after_run(run_context,
run_values)`` sees their results and may ``run_context.request_stop()``; ``end(session)`` once at
the end of a clean close.
"""

from __future__ import annotations

from collections import namedtuple


class SessionRunHook:
    def begin(self):
        pass

    def after_create_session(self, session, coord):
        pass

    def before_run(self, run_context):
        return None

    def after_run(self, run_context, run_values):
        pass

    def end(self, session):
        pass


class SessionRunArgs(namedtuple("SessionRunArgs", ["fetches", "feed_dict", "options"])):
    """What a hook adds to a run: fetches, feeds, RunOptions."""

    def __new__(cls, fetches, feed_dict=None, options=None):
        return super().__new__(cls, fetches, feed_dict, options)


class SessionRunContext:
    """The run being made: the caller's arguments and the (raw) session; hooks may stop."""

    def __init__(self, original_args, session):
        self._original_args = original_args
        self._session = session
        self._stop_requested = False

    @property
    def original_args(self):
        return self._original_args

    @property
    def session(self):
        return self._session

    @property
    def stop_requested(self) -> bool:
        return self._stop_requested

    def request_stop(self) -> None:
        self._stop_requested = True


SessionRunValues = namedtuple("SessionRunValues", ["results", "options", "run_metadata"])
