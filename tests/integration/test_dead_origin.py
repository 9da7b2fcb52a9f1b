"""A local origin that dies and comes back (issue 6, dead-origin).

Dead: the origin is itself a FUSE mount (a second stoker over a plain
directory) whose daemon is killed with SIGKILL, so every access through it,
even through the descriptors the outer daemon holds, fails with ENOTCONN,
as a dead network or FUSE filesystem does. Cached files must still be
served, uncached reads must fail with EIO (not hang), and once a new origin
is mounted at the same path the running outer mount reads everything again
without a remount.

Moved: the origin is a tmpfs that is copied with `cp -a` (same bytes and
mtimes; new st_dev, st_ino and ctime) to a new tmpfs mounted in its place
between two mounts of the same cache: the first read of a partly cached
file must not be ESTALE, and every byte must be right.
"""

import errno
import os
import signal
import subprocess

import stoker_testlib as lib
from stoker_testlib import CHUNK, MIB, with_deadline

# --no-supervise: the origin NAS (an inner stoker) is killed to die for good.
ARGS = ["--chunk-size", "1M", "--cache-size", "1G", "--prefetch", "0", "--prefetch-files", "0",
        "--no-supervise"]


def make_tree(root, names, size=3 * CHUNK + 5):
    rng = lib.seeded("dead-origin")
    return {n: lib.write_random(root / n, size, rng).read_bytes() for n in names}


def read_outcome(path):
    """The file's bytes, or the errno name its read failed with."""
    try:
        return with_deadline(lib.read_file, path, what=f"read {path} through a dead origin")
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))


def sh(*args):
    r = lib.run(list(args), timeout=60)
    assert r.returncode == 0, lib.describe(r)


def test_running_mount_recovers_a_dead_origin(mounts, tmp_path):
    data = tmp_path / "data"
    want = make_tree(data, [f"d/f{i}" for i in range(8)])
    cached, uncached = sorted(want)[::2], sorted(want)[1::2]
    inner_mnt = tmp_path / "inner"
    inner = mounts.make(data, mnt=inner_mnt, args=ARGS)
    m = mounts.make(inner_mnt, args=ARGS)
    for n in cached:
        assert with_deadline(lib.read_file, m.mnt / n) == want[n], n

    os.kill(inner.pid, signal.SIGKILL)  # SIGTERM would unmount cleanly
    lib.wait_until(lambda: not lib.pid_alive(inner.pid), lib.EXIT_TIMEOUT, what="inner exit")
    assert lib.is_mounted(inner_mnt), "the dead origin stays mounted (ENOTCONN)"
    lib.drop_caches([m.mnt / n for n in cached])
    for n in cached:
        assert read_outcome(m.mnt / n) == want[n], f"{n}: cached data not served while dead"
    for n in uncached:
        assert read_outcome(m.mnt / n) == "EIO", f"{n}: uncached read while dead"
    assert lib.pid_alive(m.pid), "the daemon died with its origin"
    assert m.stats()["origin_errors"] > 0

    lib.lazy_unmount(inner_mnt)
    mounts.make(data, mnt=inner_mnt, args=ARGS)  # the origin is back at its path

    def all_read():
        return all(read_outcome(m.mnt / n) == want[n] for n in uncached)
    lib.wait_until(all_read, timeout=60, interval=0.5,
                   what="the running mount reading a revived origin")
    for n in want:
        assert read_outcome(m.mnt / n) == want[n], n
    m.unmount()
    assert "reopened" in (m.cache / "stoker.log").read_text()


def test_cleanly_unmounted_origin_is_dead_not_empty(mounts, tmp_path):
    """A NAS (a FUSE one: sshfs, rclone, here a stoker) stopped cleanly
    leaves the empty directory beneath its mountpoint, on another filesystem. Bug: the running daemon reopened the
    origin's path, took that empty directory for the origin, and every file
    looked deleted: cached files gave ENOENT and left the index."""
    data = tmp_path / "data"
    want = make_tree(data, [f"d/f{i}" for i in range(6)])
    cached, uncached = sorted(want)[::2], sorted(want)[1::2]
    inner_mnt = tmp_path / "nas"
    inner = mounts.make(data, mnt=inner_mnt, args=ARGS)
    m = mounts.make(inner_mnt, args=ARGS + ["--revalidate", "0"])  # every open asks the origin
    for n in cached:
        assert with_deadline(lib.read_file, m.mnt / n) == want[n], n
    objects = m.stats()["objects"]

    # SIGTERM: the NAS daemon unmounts (lazily, as the outer daemon holds its
    # root open) and exits; the connection ends, the empty mountpoint shows.
    os.kill(inner.pid, signal.SIGTERM)
    lib.wait_until(lambda: not lib.pid_alive(inner.pid), lib.EXIT_TIMEOUT, what="NAS exit")
    assert not lib.is_mounted(inner_mnt) and not any(inner_mnt.iterdir())
    lib.drop_caches([m.mnt / n for n in cached])
    for _ in range(2):
        for n in cached:
            assert read_outcome(m.mnt / n) == want[n], f"{n}: cached data not served while dead"
    for n in uncached:
        assert read_outcome(m.mnt / n) != want[n], n
    s = m.stats()
    assert s["objects"] == objects, "cached files were dropped from the index"

    mounts.make(data, mnt=inner_mnt, args=ARGS)  # the NAS is back

    def all_read():
        return all(read_outcome(m.mnt / n) == want[n] for n in want)
    lib.wait_until(all_read, timeout=60, interval=0.5, what="the running mount reading the NAS again")
    assert m.stats()["objects"] == len(want)


def test_estale_after_remount_on_another_device(mounts, tmp_path):
    """Bug: the first read after a remount was ESTALE when the origin came
    back on another device with the same bytes and mtimes, inside the
    --revalidate window (the new daemon trusted the last validation, the
    fetch compared st_dev/st_ino)."""
    origin, backup = tmp_path / "origin", tmp_path / "backup"
    origin.mkdir()
    sh("mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(origin))
    try:
        want = make_tree(origin, ["a", "b", "sub/c"])
        args = ARGS + ["--revalidate", "3600"]
        m = mounts.make(origin, args=args)
        for n in want:  # cache each file's first chunk only
            fd = os.open(m.mnt / n, os.O_RDONLY)
            try:
                assert with_deadline(os.pread, fd, MIB, 0) == want[n][:MIB], n
            finally:
                os.close(fd)
        m.unmount()

        sh("cp", "-a", f"{origin}/.", str(backup))
        sh("umount", str(origin))
        sh("mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(origin))
        sh("cp", "-a", f"{backup}/.", str(origin))
        before = os.stat(backup / "a")
        after = os.stat(origin / "a")
        assert after.st_mtime_ns == before.st_mtime_ns and after.st_dev != before.st_dev

        m2 = mounts.make(origin, cache=m.cache, args=args)
        for n in want:
            assert read_outcome(m2.mnt / n) == want[n], n
        s = m2.stats()
        assert s["origin_changes"] == 0, s
        assert s["cache_hit_bytes"] >= len(want) * MIB, "the cached first chunks were kept"
        m2.unmount()
    finally:
        subprocess.run(["umount", "-l", str(origin)], timeout=30, check=False)
