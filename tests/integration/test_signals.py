"""SIGTERM/SIGINT to the daemon and `stoker unmount` take the mount down
cleanly: the mount is gone, the daemon exits (0, where we can see its exit
status), the index is consistent (fsck 0) and the next mount reuses it."""

import os
import signal

import pytest

import stoker_testlib as lib
from stoker_testlib import CHUNK


def make_origin(origin):
    rng = lib.seeded("signals")
    for i in range(8):
        lib.write_random(origin / f"f{i}", CHUNK * (i % 3 + 1) + i, rng)
    return lib.hashes_of(origin)


def reuse_check(mounts, m, origin, expected):
    r = lib.fsck(m.cache)
    assert r.returncode == 0, lib.describe(r)
    m2 = mounts.make(origin, mnt=m.mnt, cache=m.cache)
    lib.drop_caches()
    assert not lib.check_hashes(m2.mnt, expected)
    assert m2.stats()["origin_bytes_read"] == 0
    m2.unmount()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_to_background_daemon_unmounts(mounts, tmp_path, sig):
    origin = tmp_path / "origin"
    expected = make_origin(origin)
    m = mounts.make(origin)
    assert not lib.check_hashes(m.mnt, expected)
    os.kill(m.pid, sig)
    lib.wait_until(lambda: not lib.pid_alive(m.pid), lib.EXIT_TIMEOUT,
                   what=f"daemon exit after {sig.name}")
    assert not lib.is_mounted(m.mnt), f"mount still there after {sig.name}"
    assert os.listdir(m.mnt) == []
    reuse_check(mounts, m, origin, expected)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_to_foreground_daemon_exits_zero(mounts, tmp_path, sig):
    origin = tmp_path / "origin"
    expected = make_origin(origin)
    m = mounts.new(origin)
    proc = m.mount_foreground()
    assert not lib.check_hashes(m.mnt, expected)
    proc.send_signal(sig)
    rc = proc.wait(timeout=lib.EXIT_TIMEOUT)
    assert rc == 0, f"foreground daemon exited {rc} on {sig.name}\n{m.log_tail()}"
    assert not lib.is_mounted(m.mnt)
    reuse_check(mounts, m, origin, expected)


def test_signal_while_files_are_open(mounts, tmp_path):
    """A reader holding files open must not keep the daemon alive forever
    or leave a broken mount on SIGTERM."""
    origin = tmp_path / "origin"
    expected = make_origin(origin)
    m = mounts.new(origin)
    proc = m.mount_foreground()
    fds = [lib.with_deadline(os.open, m.mnt / n, os.O_RDONLY) for n in expected]
    try:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=lib.EXIT_TIMEOUT)
        assert rc == 0, f"exit {rc}\n{m.log_tail()}"
        assert not lib.is_mounted(m.mnt)
    finally:
        for fd in fds:
            os.close(fd)
    r = lib.fsck(m.cache)
    assert r.returncode == 0, lib.describe(r)


def test_unmount_command(mounts, tmp_path):
    origin = tmp_path / "origin"
    expected = make_origin(origin)
    m = mounts.make(origin)
    assert not lib.check_hashes(m.mnt, expected)
    m.unmount()  # asserts the mount is gone and the daemon exited
    r = lib.stoker("unmount", m.mnt)
    assert r.returncode != 0, "second unmount succeeded\n" + lib.describe(r)
    reuse_check(mounts, m, origin, expected)


def test_fusermount_unmount(mounts, tmp_path):
    origin = tmp_path / "origin"
    expected = make_origin(origin)
    m = mounts.make(origin)
    assert not lib.check_hashes(m.mnt, expected)
    r = lib.run(["fusermount3", "-u", m.mnt])
    assert r.returncode == 0, lib.describe(r)
    lib.wait_until(lambda: not lib.pid_alive(m.pid), lib.EXIT_TIMEOUT,
                   what="daemon exit after fusermount3 -u")
    reuse_check(mounts, m, origin, expected)
