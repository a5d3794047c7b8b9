"""Cleanup of checkpoint temp files and sharded-save temp directories left by saves that did not
finish: a save removes those whose writer is gone (a dead pid on this host, or untouched for a
day when written elsewhere), keeps those of live writers (other processes, other threads), and
never touches anything not named as our temp files."""

import os
import subprocess
import sys
import textwrap
import threading
import time
import uuid

import numpy as np
import pytest

import dflab as tf
from dflab.kernels import io_kernels

VALUES = np.array([1.0, 2.0, 3.0], np.float32)
OTHER_HOST = "00000000" if io_kernels.host_tag() != "00000000" else "11111111"
DAY = 24 * 3600.0


# --- helpers --------------------------------------------------------------------------------------
def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()  # reaped: the pid names no process (not even a zombie)
    return proc.pid


@pytest.fixture
def live_pid():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    yield proc.pid
    proc.kill()
    proc.wait()


def _temp_file(directory, target, pid, host=None):
    """A temp file as ``atomic_write`` names it, for ``target``, written by ``pid``."""
    name = io_kernels.temp_file_prefix(os.path.join(directory, target), pid) + "k3j_9x2q"
    if host is not None:
        name = name.replace(f".tmp-{io_kernels.host_tag()}-", f".tmp-{host}-")
    path = os.path.join(directory, name)
    with open(path, "wb") as f:
        f.write(b"partial")
    return path


def _temp_dir(directory, pid, host=None, prefix="model-5", half_written=True):
    """A sharded save's temp directory with a finished part and (``half_written``) one being
    written."""
    path = os.path.join(directory, f"{prefix}{io_kernels.TEMP_DIR_INFIX}{uuid.uuid4().hex}")
    os.makedirs(path)
    mark = io_kernels.writer_mark_name(pid)
    if host is not None:
        mark = mark.replace(io_kernels.host_tag(), host)
    open(os.path.join(path, mark), "wb").close()
    for name in ("part-00000-of-00002.data-00000-of-00001", "part-00000-of-00002.index"):
        with open(os.path.join(path, name), "wb") as f:
            f.write(b"done")
    if half_written:
        _temp_file(path, "part-00001-of-00002.data-00000-of-00001", pid, host)
    return path


def _age(path, seconds):
    """Make ``path`` (and everything in it) look ``seconds`` old."""
    stamp = time.time() - seconds
    for root, _dirs, files in os.walk(path):
        for name in files:
            os.utime(os.path.join(root, name), (stamp, stamp))
    os.utime(path, (stamp, stamp))


def _save_and_check_restore(ckpt_dir, sharded=False, step=7):
    """Save a small model into ``ckpt_dir``; the checkpoint restores the saved values."""
    tf.reset_default_graph()
    w = tf.Variable(VALUES, name="w")
    saver = tf.train.Saver(sharded=sharded)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        path = saver.save(sess, os.path.join(str(ckpt_dir), "model"), global_step=step)
        sess.run(tf.assign(w, np.zeros(3, np.float32)))
        saver.restore(sess, path)
        np.testing.assert_array_equal(sess.run(w), VALUES)
    assert tf.train.latest_checkpoint(str(ckpt_dir)) == path
    return path


def _listing(directory):
    return sorted(os.listdir(directory))


# --- entries this host wrote ----------------------------------------------------------------------
@pytest.mark.parametrize("sharded", [False, True])
def test_leftovers_of_a_dead_writer_are_removed_by_the_next_save(tmp_path, sharded):
    dead = _dead_pid()
    files = [_temp_file(str(tmp_path), t, dead)
             for t in ("model-5.index", "model-5.data-00000-of-00001", "model-5.meta",
                       "checkpoint")]
    directory = _temp_dir(str(tmp_path), dead)
    _save_and_check_restore(tmp_path, sharded)
    for path in files + [directory]:
        assert not os.path.lexists(path), path
    assert not [n for n in _listing(tmp_path) if ".tmp" in n or "_temp_" in n]


def test_a_temp_dir_of_finished_parts_goes_once_its_writer_is_dead(tmp_path):
    # Killed after writing its parts, before merging them: only its writer mark names it.
    directory = _temp_dir(str(tmp_path), _dead_pid(), half_written=False)
    _save_and_check_restore(tmp_path)
    assert not os.path.lexists(directory)


def test_leftovers_of_a_live_process_are_kept_until_it_is_gone(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        file = _temp_file(str(tmp_path), "model-5.index", proc.pid)
        directory = _temp_dir(str(tmp_path), proc.pid)
        _save_and_check_restore(tmp_path, step=1)
        assert os.path.exists(file) and os.path.isdir(directory)
        assert len(os.listdir(directory)) == 4
    finally:
        proc.kill()
        proc.wait()
    _save_and_check_restore(tmp_path, step=2)
    assert not os.path.lexists(file) and not os.path.lexists(directory)


def test_temp_files_of_this_process_are_kept(tmp_path):
    # Another thread of this process may be writing them right now.
    file = _temp_file(str(tmp_path), "model-5.index", os.getpid())
    directory = _temp_dir(str(tmp_path), os.getpid())
    _save_and_check_restore(tmp_path)
    assert os.path.exists(file) and os.path.isdir(directory)


def test_a_temp_dir_with_any_live_writer_is_kept(tmp_path, live_pid):
    directory = _temp_dir(str(tmp_path), _dead_pid())
    open(os.path.join(directory, io_kernels.writer_mark_name(live_pid)), "wb").close()
    _save_and_check_restore(tmp_path)
    assert os.path.isdir(directory)


def test_a_temp_dir_naming_no_writer_is_judged_by_age(tmp_path):
    fresh = os.path.join(str(tmp_path), f"model-1_temp_{uuid.uuid4().hex}")
    old = os.path.join(str(tmp_path), f"model-2_temp_{uuid.uuid4().hex}")
    for path in (fresh, old):
        os.makedirs(path)
        open(os.path.join(path, "part-00000-of-00001.index"), "wb").close()
    _age(old, DAY + 60)
    _save_and_check_restore(tmp_path)
    assert os.path.isdir(fresh)  # may have been made a moment ago, its writer mark to come
    assert not os.path.lexists(old)


# --- entries written elsewhere --------------------------------------------------------------------
def test_leftovers_from_another_host_are_removed_only_when_a_day_old(tmp_path):
    pid = os.getpid()  # alive here, but a pid from another host says nothing
    fresh_file = _temp_file(str(tmp_path), "model-5.index", pid, OTHER_HOST)
    old_file = _temp_file(str(tmp_path), "model-6.index", pid, OTHER_HOST)
    fresh_dir = _temp_dir(str(tmp_path), pid, OTHER_HOST, prefix="model-5")
    old_dir = _temp_dir(str(tmp_path), pid, OTHER_HOST, prefix="model-6")
    touched_dir = _temp_dir(str(tmp_path), pid, OTHER_HOST, prefix="model-7")
    _age(old_file, DAY + 60)
    _age(old_dir, DAY + 60)
    _age(touched_dir, DAY + 60)
    os.utime(os.path.join(touched_dir, "part-00000-of-00002.index"))  # still being written
    _save_and_check_restore(tmp_path)
    assert os.path.exists(fresh_file) and os.path.isdir(fresh_dir) and os.path.isdir(touched_dir)
    assert not os.path.lexists(old_file) and not os.path.lexists(old_dir)


# --- what is never touched ------------------------------------------------------------------------
def test_files_not_named_as_our_temp_files_are_never_touched(tmp_path):
    d = str(tmp_path)
    dead, tag = _dead_pid(), io_kernels.host_tag()
    plain = ["notes.txt", "model-1.index.tmpab12cd34",  # the older temp naming
             f"model-1.index.tmp-{tag}-{dead}-UPPER", f"model-1.index.tmp-{tag[:6]}-{dead}-abc",
             f"model-1.index.tmp-{tag}-x{dead}-abc", f"model-1.index.tmp-{tag}-{dead}-"]
    for name in plain:
        with open(os.path.join(d, name), "wb") as f:
            f.write(b"keep")
    # A directory named like a temp file, and one named like a temp directory holding
    # something the Saver never puts there.
    os.makedirs(os.path.join(d, f"model-1.index.tmp-{tag}-{dead}-abc"))
    foreign = _temp_dir(d, dead, prefix="data")
    with open(os.path.join(foreign, "mine.txt"), "wb") as f:
        f.write(b"keep")
    # Links named as ours (to a dead writer's temp dir and file elsewhere) are links, not ours.
    outside = tmp_path / "outside"
    outside.mkdir()
    target_dir = _temp_dir(str(outside), dead)
    target_file = _temp_file(str(outside), "model-1.index", dead)
    os.symlink(target_dir, os.path.join(d, os.path.basename(target_dir)))
    os.symlink(target_file, os.path.join(d, os.path.basename(target_file)))
    before = _listing(d)
    _save_and_check_restore(tmp_path)
    after = _listing(d)
    assert set(before) <= set(after)
    assert len(os.listdir(foreign)) == 5
    assert os.path.isdir(target_dir) and os.path.exists(target_file)
    for name in plain:
        assert (tmp_path / name).read_bytes() == b"keep"


def test_only_the_save_directory_is_cleaned(tmp_path):
    dead = _dead_pid()
    sub = tmp_path / "sub"
    sub.mkdir()
    elsewhere = _temp_file(str(sub), "model-5.index", dead)
    _save_and_check_restore(tmp_path)
    assert os.path.exists(elsewhere)


# --- live writers for real ------------------------------------------------------------------------
@pytest.mark.parametrize("sharded", [False, True])
def test_a_save_blocked_midway_in_another_thread_is_left_alone(tmp_path, monkeypatch, sharded):
    """A thread stopped inside a save (temp written, not yet renamed) while another thread saves
    into the same directory: its temp entries survive, and its save then completes."""
    w = tf.Variable(VALUES, name="w")
    writer_saver = tf.train.Saver(sharded=sharded)
    other_saver = tf.train.Saver(sharded=not sharded)
    blocked, release = threading.Event(), threading.Event()
    real_replace = os.replace
    writer = {}

    def replace(src, dst):
        # Kernels may run on executor threads: recognise the writer's save by its file names.
        if os.path.relpath(dst, tmp_path).startswith("a-1") and not release.is_set():
            blocked.set()
            release.wait(60)
        return real_replace(src, dst)

    monkeypatch.setattr(io_kernels.os, "replace", replace)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())

        def save():
            writer["path"] = writer_saver.save(sess, str(tmp_path / "a"), global_step=1)

        thread = threading.Thread(target=save)
        thread.start()
        assert blocked.wait(60)
        in_flight = [n for n in _listing(tmp_path) if ".tmp-" in n or "_temp_" in n]
        assert in_flight
        other_saver.save(sess, str(tmp_path / "b"), global_step=1)
        assert set(in_flight) <= set(_listing(tmp_path))
        release.set()
        thread.join(60)
        assert writer["path"] == str(tmp_path / "a-1")
        sess.run(tf.assign(w, np.zeros(3, np.float32)))
        writer_saver.restore(sess, writer["path"])
        np.testing.assert_array_equal(sess.run(w), VALUES)
    assert not [n for n in _listing(tmp_path) if ".tmp-" in n or "_temp_" in n]


CHILD = textwrap.dedent("""
    import os
    import sys
    import time

    import dflab as tf

    ckpt_dir, sharded = sys.argv[1], sys.argv[2] == "1"
    real_replace = os.replace

    def replace(src, dst):
        # Stop for good right before the first temp file is renamed: the save is midway.
        if ".tmp-" in os.path.basename(src):
            print("BLOCKED", flush=True)
            time.sleep(600)
        return real_replace(src, dst)

    os.replace = replace
    v = tf.Variable([9.0, 9.0, 9.0], name="w")
    saver = tf.train.Saver(sharded=sharded)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        saver.save(sess, os.path.join(ckpt_dir, "model"), global_step=100)
""")


@pytest.mark.slow
@pytest.mark.parametrize("sharded", [False, True])
def test_a_process_killed_mid_save_leaves_temps_that_the_next_save_removes(tmp_path, sharded):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    ckpt_dir = tmp_path / "ckpt"
    ckpt_dir.mkdir()
    proc = subprocess.Popen([sys.executable, str(script), str(ckpt_dir), "1" if sharded else "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.strip() == "BLOCKED", proc.stderr.read() if proc.poll() is not None else line
        left = _listing(ckpt_dir)
        tag = f"{io_kernels.host_tag()}-{proc.pid}"
        if sharded:
            (temp_dir,) = left
            assert "_temp_" in temp_dir
            inside = os.listdir(ckpt_dir / temp_dir)
            assert f".writer-{tag}" in inside
            assert any(n.startswith("part-") and f".tmp-{tag}-" in n for n in inside)
        else:
            (temp,) = left
            assert temp.startswith(f"model-100.data-00000-of-00001.tmp-{tag}-")
        # The writer is alive (only stopped): a save beside it keeps its temps.
        _save_and_check_restore(ckpt_dir, sharded, step=1)
        assert set(left) <= set(_listing(ckpt_dir))
    finally:
        proc.kill()
        proc.wait(30)
        proc.stdout.close()
        proc.stderr.close()
    # Killed: the next save removes what it left, and the checkpoints restore.
    path = _save_and_check_restore(ckpt_dir, sharded, step=2)
    assert not set(left) & set(_listing(ckpt_dir))
    assert not [n for n in _listing(ckpt_dir) if ".tmp" in n or "_temp_" in n]
    assert tf.train.get_checkpoint_state(str(ckpt_dir)).all_model_checkpoint_paths[-1] == path
