"""Crash tests with real processes: a trainer that checkpoints after every step is SIGKILLed at
random moments (many times, so kills land inside saves); after each kill the latest checkpoint
must load, be internally consistent, and training must resume from exactly its step."""

import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import dflab as tf
from dflab.train.saver import checkpoint_values

TRAINER = textwrap.dedent("""
    import sys
    import numpy as np
    import dflab as tf

    ckpt_dir, last_step, sharded = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
    gs = tf.train.get_or_create_global_step()
    # Big enough (2 x 4 MB) that a save takes a while, so random kills land inside saves.
    with tf.device("/cpu:0"):
        a = tf.Variable(tf.zeros([1_000_000]), name="a")
    with tf.device("/cpu:1" if sharded else "/cpu:0"):
        b = tf.Variable(tf.zeros([1_000_000]), name="b")
    step = tf.group(tf.assign_add(a, tf.ones([1_000_000])),
                    tf.assign_add(b, tf.ones([1_000_000])), tf.assign_add(gs, 1))
    saver = tf.train.Saver(max_to_keep=3, sharded=sharded)
    with tf.Session(config=tf.ConfigProto(device_count={"CPU": 2})) as sess:
        latest = tf.train.latest_checkpoint(ckpt_dir)
        if latest:
            saver.restore(sess, latest)
            saver.recover_last_checkpoints(
                tf.train.get_checkpoint_state(ckpt_dir).all_model_checkpoint_paths)
        else:
            sess.run(tf.global_variables_initializer())
        start = int(sess.run(gs))
        print("START", start, flush=True)
        while int(sess.run(gs)) < last_step:
            sess.run(step)
            saver.save(sess, ckpt_dir + "/model", global_step=gs)
        print("DONE", int(sess.run(gs)), flush=True)
""")


def _check_checkpoint(path):
    """The checkpoint loads and all its variables agree with its step."""
    vals = checkpoint_values(path)
    step = int(vals["global_step"])
    assert path.endswith(f"-{step}")
    np.testing.assert_array_equal(vals["a"], np.full(1_000_000, step, np.float32))
    np.testing.assert_array_equal(vals["b"], np.full(1_000_000, step, np.float32))
    return step


def _start(script, ckpt_dir, last_step, sharded):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.Popen([sys.executable, str(script), ckpt_dir, str(last_step),
                             "1" if sharded else "0"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def _wait_started(proc) -> int:
    line = proc.stdout.readline()
    assert line.startswith("START"), (line, proc.stderr.read() if proc.poll() else "")
    return int(line.split()[1])


@pytest.mark.slow
@pytest.mark.parametrize("sharded", [False, True])
def test_sigkill_during_saves_leaves_a_loadable_consistent_checkpoint(tmp_path, sharded):
    tf.reset_default_graph()
    script = tmp_path / "trainer.py"
    script.write_text(TRAINER)
    ckpt_dir = str(tmp_path / "ckpt")
    os.makedirs(ckpt_dir)
    rng = random.Random(1234 + sharded)
    last_step = 10_000  # never reached: every run below is killed
    prev = 0
    for _ in range(6):
        proc = _start(script, ckpt_dir, last_step, sharded)
        started = _wait_started(proc)
        # Training resumes from exactly the step of the latest complete checkpoint.
        latest = tf.train.latest_checkpoint(ckpt_dir)
        assert started == (_check_checkpoint(latest) if latest else 0)
        assert started >= prev
        time.sleep(rng.uniform(0.05, 0.6))
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        proc.stdout.close()
        proc.stderr.close()
        latest = tf.train.latest_checkpoint(ckpt_dir)
        if latest is not None:
            prev = _check_checkpoint(latest)
            # Every checkpoint the state file lists is complete too.
            for p in tf.train.get_checkpoint_state(ckpt_dir).all_model_checkpoint_paths:
                if tf.train.checkpoint_exists(p):
                    _check_checkpoint(p)
    assert prev > 0, "no checkpoint was ever completed"
    # Finally let one run finish: it resumes from the last checkpoint and reaches the goal.
    proc = _start(script, ckpt_dir, prev + 2, sharded)
    assert _wait_started(proc) == prev
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert out.strip() == f"DONE {prev + 2}"
    assert _check_checkpoint(tf.train.latest_checkpoint(ckpt_dir)) == prev + 2
