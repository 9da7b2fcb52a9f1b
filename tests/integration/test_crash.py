"""kill -9 of the daemon during heavy reads: the stale mountpoint is cleared
by the next `stoker mount`, the cache is usable and correct, and fsck can
check it (and repair whatever the crash left)."""

import os
import signal
import threading

import pytest

import stoker_testlib as lib
from stoker_testlib import CHUNK, MIB

# A kill -9 here must end the mount: no supervisor (test_supervisor.py).
ARGS = ["--chunk-size", "1M", "--cache-size", "1G", "--no-supervise"]


def make_dataset(origin):
    rng = lib.seeded("crash")
    for i in range(24):
        lib.write_random(origin / f"big{i:02d}", 3 * CHUNK + rng.randrange(0, CHUNK), rng)
    for i in range(300):
        lib.write_random(origin / "small" / f"s{i:03d}", rng.randrange(1, 100_000), rng)
    return lib.hashes_of(origin)


def heavy_readers(mnt, names, n_threads, stop):
    """Threads that pread random files at random offsets until stop or the
    mount dies. Returns (threads, counter dict)."""
    progress = {"bytes": 0}
    lock = threading.Lock()

    def reader(seed):
        r = lib.seeded(f"crash-reader-{seed}")
        while not stop.is_set():
            try:
                fd = os.open(os.path.join(mnt, r.choice(names)), os.O_RDONLY)
                try:
                    size = os.fstat(fd).st_size
                    off = r.randrange(0, max(size, 1))
                    b = os.pread(fd, r.randrange(1, 2 * MIB), off)
                finally:
                    os.close(fd)
            except OSError:
                return  # the daemon is gone: ENOTCONN/ECONNABORTED
            with lock:
                progress["bytes"] += len(b)

    threads = [threading.Thread(target=reader, args=(i,), daemon=True)
               for i in range(n_threads)]
    for t in threads:
        t.start()
    return threads, progress


def crash_during_reads(m, names, min_origin_bytes):
    stop = threading.Event()
    threads, progress = heavy_readers(m.mnt, names, 6, stop)
    try:
        lib.wait_until(lambda: m.stats()["origin_bytes_read"] >= min_origin_bytes,
                       120, interval=0.05, what="reads under way")
        os.kill(m.pid, signal.SIGKILL)
        lib.wait_until(lambda: not lib.pid_alive(m.pid), 30, what="daemon death")
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert not any(t.is_alive() for t in threads), "reader threads hung after kill -9"
    assert progress["bytes"] > 0
    # The mount is stale now: still listed, but every access fails.
    assert lib.is_mounted(m.mnt), "the mount vanished by itself after kill -9?"
    with pytest.raises(OSError):
        lib.with_deadline(os.listdir, m.mnt, timeout=10)


@pytest.mark.slow
def test_kill9_during_heavy_reads_then_remount_and_fsck(mounts, tmp_path):
    origin = tmp_path / "origin"
    expected = make_dataset(origin)
    names = sorted(expected)

    m = mounts.make(origin, args=ARGS)
    crash_during_reads(m, names, 8 * MIB)

    # fsck can check what a crash left (0 clean or 1 problems, never 2).
    r = lib.fsck(m.cache, "--json")
    assert r.returncode in (0, 1), "fsck after kill -9:\n" + lib.describe(r)

    # The next mount clears the stale mountpoint and uses the cache.
    m2 = mounts.make(origin, mnt=m.mnt, cache=m.cache, args=ARGS)
    crash_during_reads(m2, names, m2.stats()["origin_bytes_read"] + 8 * MIB)

    m3 = mounts.make(origin, mnt=m.mnt, cache=m.cache, args=ARGS)
    assert not lib.check_hashes(m3.mnt, expected), "wrong bytes after kill -9 + remount"
    s = m3.stats()
    assert s["cache_hit_bytes"] > 0, ("the cache written before the crashes "
                                      f"was not used: {s}")
    # Read again from the SSD tier only.
    lib.drop_caches([m3.mnt / n for n in names])
    before = m3.stats()
    assert not lib.check_hashes(m3.mnt, expected)
    after = m3.stats()
    assert after["origin_bytes_read"] == before["origin_bytes_read"], (before, after)
    m3.unmount()

    r = lib.fsck(m.cache)
    assert r.returncode in (0, 1), lib.describe(r)
    if r.returncode == 1:
        rr = lib.fsck(m.cache, "--repair")
        assert rr.returncode == 1, lib.describe(rr)  # problems found (and repaired)
        r = lib.fsck(m.cache)
    assert r.returncode == 0, "fsck not clean after --repair:\n" + lib.describe(r)


def test_stale_mountpoint_is_cleared_by_next_mount(mounts, tmp_path):
    origin = tmp_path / "origin"
    lib.write_random(origin / "f", CHUNK + 1)
    m = mounts.make(origin, args=ARGS)
    os.kill(m.pid, signal.SIGKILL)
    lib.wait_until(lambda: not lib.pid_alive(m.pid), 30, what="daemon death")
    with pytest.raises(OSError):
        lib.with_deadline(os.stat, m.mnt / "f", timeout=10)
    m2 = mounts.make(origin, mnt=m.mnt, cache=m.cache, args=ARGS)
    assert lib.with_deadline(lib.read_file, m2.mnt / "f") == (origin / "f").read_bytes()
    fuse_mounts = [e for e in lib.mount_table() if e[0] == str(m.mnt)]
    assert len(fuse_mounts) == 1, f"stale mount not cleared, stacked: {fuse_mounts}"
    m2.unmount()
