"""ResourceMgr: an eager variable's state removed by a finalizer, wherever the collector runs it;
resources kept per container and cleared per container."""

from __future__ import annotations

import threading

from dflab.runtime.resources import ResourceMgr


def _in_thread(fn, timeout=10.0) -> bool:
    """Run ``fn`` on a thread; whether it finished within ``timeout`` (False: it hangs)."""
    t = threading.Thread(target=fn, daemon=True)
    t.start()
    t.join(timeout)
    return not t.is_alive()


def test_destroy_variable_removes_its_state():
    mgr = ResourceMgr("/cpu:0")
    mgr.variable("a")
    mgr.variable("b")
    mgr.destroy_variable("a")
    assert set(mgr.variables()) == {"b"}


def test_destroy_variable_while_the_same_thread_holds_the_lock_does_not_hang():
    # What the garbage collector does when an allocation inside variable() (lock held) runs a
    # dropped eager variable's finalizer on the same thread: before, it waited on its own lock.
    mgr = ResourceMgr("/cpu:0")
    mgr.variable("dropped")

    def finalizer_inside_variable():
        with mgr._lock:
            mgr.destroy_variable("dropped")

    assert _in_thread(finalizer_inside_variable), "destroy_variable waited on its own lock"
    # Left to the next caller that takes the lock: gone once anyone looks.
    assert "dropped" not in mgr.variables()


def test_a_deferred_removal_happens_at_the_next_variable_created():
    mgr = ResourceMgr("/cpu:0")
    mgr.variable("dropped")
    with mgr._lock:
        mgr.destroy_variable("dropped")
    state = mgr.variable("new")
    assert ("localhost", "dropped") not in mgr._vars and mgr._vars[("localhost", "new")] is state


def test_containers_keep_apart_and_clear_apart():
    mgr = ResourceMgr("/cpu:0")
    default, named = mgr.variable("v"), mgr.variable("v", "exp")
    assert default is not named and mgr.variable("v", "") is default
    default.set(1.0)
    named.set(2.0)
    queues = [mgr.lookup_or_create("queue", "q", object, c) for c in ("", "exp")]
    mgr.clear_containers(["exp"])
    assert default.read() == 1.0 and not named.initialized
    assert mgr.variable("v", "exp") is not named and not mgr.variable("v", "exp").initialized
    assert mgr.lookup_or_create("queue", "q", object) is queues[0]
    assert mgr.lookup_or_create("queue", "q", object, "exp") is not queues[1]
    mgr.clear_containers([])  # none named: the default container ("localhost")
    assert not mgr.variable("v").initialized
