"""``tf.train.basic_train_loop``: the simplest training loop over a ``Supervisor``'s managed
session, started again whenever a task of the cluster restarted (``AbortedError``)."""

from __future__ import annotations

from dflab.framework import errors


def basic_train_loop(supervisor, train_step_fn, args=None, kwargs=None, master=""):
    """Call ``train_step_fn(session, *args, **kwargs)`` until ``supervisor.should_stop()``."""
    args = [] if args is None else args
    kwargs = {} if kwargs is None else kwargs
    should_retry = True
    while should_retry:
        try:
            should_retry = False
            with supervisor.managed_session(master) as sess:
                while not supervisor.should_stop():
                    train_step_fn(sess, *args, **kwargs)
        except errors.AbortedError:
            # A server of the cluster restarted: start over from its checkpoint.
            should_retry = True
