"""The per-task step gate behind consistent checkpoints on a cluster: admission, closing,
the holder's pass, writer priority, and timeouts that name the task."""

import threading
import time

import pytest

import dflab as tf
from dflab.distributed.stub import Done
from dflab.distributed.task_gate import TaskGate, admit, tasks_of_devices
from dflab.framework.device_spec import DeviceSpec

PS0 = "/job:ps/replica:0/task:0"


class _Stub:
    """The gate calls of a task stub, made on a gate of this process."""

    def __init__(self, gate):
        self.gate, self.task = gate, gate.task

    def gate_try_enter(self, holder):
        return Done(self.gate.try_enter(holder))

    def gate_exit(self):
        self.gate.exit()

    def gate_wait_open(self, timeout):
        return self.gate.wait_open(timeout)


def test_a_close_waits_for_admitted_steps_and_refuses_new_ones_until_opened():
    gate = TaskGate(PS0)
    assert gate.try_enter("client") is True
    closed = threading.Event()
    closer = threading.Thread(target=lambda: (gate.close("saver", 10), closed.set()))
    closer.start()
    time.sleep(0.05)
    assert not closed.is_set()  # a step is in flight
    assert gate.try_enter("client") is False  # a waiting save has priority
    gate.exit()
    closer.join(10)
    assert closed.is_set() and gate.closed
    assert gate.try_enter("other") is False
    assert gate.try_enter("saver") is None  # the holder's own restore passes, uncounted
    gate.open("someone else")  # only the holder opens it
    assert gate.closed
    gate.open("saver")
    assert not gate.closed and gate.try_enter("other") is True


def test_closing_is_reentrant_for_its_holder():
    gate = TaskGate(PS0)
    gate.close("saver", 1)
    gate.close("saver", 1)
    gate.open("saver")
    assert gate.closed
    gate.open("saver")
    assert not gate.closed


def test_timeouts_name_the_task():
    gate = TaskGate(PS0)
    assert gate.try_enter() is True
    with pytest.raises(tf.errors.DeadlineExceededError, match="task:0.*checkpoint"):
        gate.close("saver", 0.05)
    assert not gate.closed and gate.try_enter() is True  # the failed close left it open
    gate.exit()
    gate.exit()
    gate.close("saver", 1)
    with pytest.raises(tf.errors.DeadlineExceededError, match="/job:ps/replica:0/task:0"):
        gate.enter("client", 0.05)
    with pytest.raises(tf.errors.DeadlineExceededError, match="waited for a checkpoint"):
        admit([_Stub(TaskGate("/job:ps/replica:0/task:1")), _Stub(gate)], "client", 0.05)


def test_a_step_refused_by_one_task_lets_the_others_go_and_is_admitted_once_it_opens():
    first, second = TaskGate("a"), TaskGate("b")
    second.close("saver", 1)
    got = []
    stubs = [_Stub(first), _Stub(second)]
    stepper = threading.Thread(target=lambda: got.append(admit(stubs, "c", 10)))
    stepper.start()
    time.sleep(0.05)
    assert first.steps_in_flight == 0  # not held while waiting: a save of `first` can close
    first.close("saver2", 1)
    first.open("saver2")
    second.open("saver")
    stepper.join(10)
    assert got == [stubs]
    assert first.steps_in_flight == second.steps_in_flight == 1


def test_gates_close_in_task_order():
    devices = ["/job:ps/task:1/device:CPU:0", "/job:ps/replica:0/task:0/device:CPU:0", ""]
    assert tasks_of_devices(devices, "/job:worker/replica:0/task:0") == [
        "/job:ps/replica:0/task:0", "/job:ps/replica:0/task:1",
        "/job:worker/replica:0/task:0"]


def test_a_partial_device_name_stands_for_every_task_it_matches():
    class Dev:
        def __init__(self, name):
            self.name, self.spec = name, DeviceSpec.from_string(name)

    devices = [Dev(f"/job:{j}/replica:0/task:{i}/device:CPU:0")
               for j, i in [("ps", 0), ("ps", 1), ("worker", 0)]]
    assert tasks_of_devices(["/job:ps"], "/job:worker/replica:0/task:0", devices) == [
        "/job:ps/replica:0/task:0", "/job:ps/replica:0/task:1"]
