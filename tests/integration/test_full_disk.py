"""The cache's filesystem filled by someone else (another tenant of the SSD,
a runaway log), below --cache-size: reads go on from the origin with right
bytes and no errors, the cache gives its free-space floor back to the disk,
caching comes back by itself once there is room, and a
mount on a full disk is refused with one line instead of a crash.

The cache lives on its own small tmpfs, filled to the last block by a
filler file. stoker's own bound (--cache-size, its 5% free-space floor)
never fills a disk; only someone else does, and then the index's writes
(RocksDB) fail with ENOSPC as well as the chunk writes. The cache then
evicts until its floor is free again: its share of the disk shrinks, and
grows back to --cache-size when the filler goes.
"""

import errno
import os
import subprocess

import pytest

import stoker_testlib as lib
from stoker_testlib import MIB, with_deadline

ARGS = ["--chunk-size", "1M", "--cache-size", "24M"]
FILES = 40
SIZE = 200 * 1024


def sh(*args):
    subprocess.run(args, check=True, timeout=60)


def fill(path):
    """Writes path until the filesystem has no block left."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        for block in (MIB, 4096):
            try:
                while True:
                    os.write(fd, b"\0" * block)
            except OSError as e:
                assert e.errno == errno.ENOSPC, e
    finally:
        os.close(fd)


def free_bytes(path):
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


@pytest.fixture
def small_disk(tmp_path):
    disk = tmp_path / "ssd"
    disk.mkdir()
    sh("mount", "-t", "tmpfs", "-o", "size=32m", "tmpfs", str(disk))
    made = []
    yield disk, made
    for m in made:
        m.cleanup()
    sh("umount", "-l", str(disk))


def read_all(mnt, names, want):
    for n in names:
        got = with_deadline(lib.read_file, mnt / n, what=f"read {n}")
        assert got == want[n], f"{n}: wrong bytes"


def test_a_disk_filled_by_others_serves_from_the_origin_then_caches_again(tmp_path, small_disk):
    disk, made = small_disk
    origin = tmp_path / "origin"
    origin.mkdir()
    rng = lib.seeded("full-disk")
    names = [f"f{i:02d}" for i in range(FILES)]
    want = {}
    for n in names:
        want[n] = rng.randbytes(SIZE)
        (origin / n).write_bytes(want[n])
    m = lib.StokerMount(origin, tmp_path / "mnt", disk / "cache", ARGS)
    made.append(m)
    m.mount()

    read_all(m.mnt, names[:10], want)
    # A chunk is stored after its read is answered: wait for the last ones.
    lib.wait_until(lambda: m.stats()["chunks_written"] >= 10, timeout=30,
                   what="the first ten files cached")
    before = m.stats()

    fill(disk / "filler")
    # Files never seen need an index record first, which cannot be written
    # until the cache has given some room back.
    read_all(m.mnt, names[10:], want)
    read_all(m.mnt, names[:10], want)  # cached or evicted, still served
    full = m.stats()
    assert full["errors"] == before["errors"], full
    assert full["chunks_not_cached"] > before["chunks_not_cached"], full
    # Read ahead of the reader only what can be kept: each byte from the
    # origin at most once (the first ten again if they were evicted).
    origin_read = full["origin_bytes_read"] - before["origin_bytes_read"]
    assert origin_read <= FILES * SIZE + MIB, full
    # The cache's share shrinks to what it holds less its free-space reserve
    # (5% of the disk): it evicts to give the reserve back to the disk.
    reserve = os.statvfs(disk).f_blocks * os.statvfs(disk).f_frsize // 20
    # Within about 30 s: the limit is not lowered again for that long after an
    # eviction (space freed on btrfs shows only when it commits).
    lib.wait_until(lambda: free_bytes(disk) >= reserve, timeout=120, interval=0.5,
                   what="the cache giving its reserve back")
    gave = m.stats()
    assert gave["evicted_bytes"] > before["evicted_bytes"], gave
    assert gave["cache_limit_bytes"] < gave["cache_capacity_bytes"], gave
    read_all(m.mnt, names, want)

    os.unlink(disk / "filler")
    # Room again: the share is the whole --cache-size once more.
    lib.wait_until(lambda: m.stats()["cache_limit_bytes"] == 24 * MIB, timeout=30,
                   interval=0.5, what="the cache's share growing back")
    # RocksDB takes writes again once it finds the room (it polls for it).
    def caching_again():
        lib.drop_caches([m.mnt / n for n in names[10:]], system=False)
        read_all(m.mnt, names[10:], want)
        return m.stats()["chunks_written"] > full["chunks_written"]

    lib.wait_until(caching_again, timeout=60, interval=1, what="caching after the disk had room")
    assert m.stats()["errors"] == before["errors"]
    m.unmount()

    # A full disk at mount: one line that says so, no crash, nothing mounted.
    fill(disk / "filler")
    r = lib.mount_cmd_fails(origin, m.mnt, m.cache, *ARGS)
    assert r.returncode != 0
    err = r.stderr.strip()
    assert len(err.splitlines()) == 1 and "free" in err and "signal" not in err, err
    assert not lib.is_mounted(m.mnt)
    # A check writes nothing, so it runs on the full disk; a repair may write
    # and is refused the same way as the mount.
    r = lib.fsck(m.cache)
    assert r.returncode == 0 and "clean" in r.stdout, lib.describe(r)
    r = lib.fsck(m.cache, "--repair")
    err = r.stderr.strip()
    assert r.returncode == 2 and len(err.splitlines()) == 1 and "free" in err, lib.describe(r)

    os.unlink(disk / "filler")
    m.mount()
    read_all(m.mnt, names, want)
    m.unmount()
    r = lib.fsck(m.cache)
    assert r.returncode == 0, lib.describe(r)


def test_a_file_changed_while_the_disk_is_full_is_never_served_stale(tmp_path, small_disk):
    """A read finds the origin file changed (within --revalidate, so only the
    read can tell), and the index cannot record the new version: every open
    after that serves the new bytes, never the cached old ones."""
    disk, made = small_disk
    origin = tmp_path / "origin"
    origin.mkdir()
    rng = lib.seeded("full-disk-change")
    old, new = rng.randbytes(3 * MIB), rng.randbytes(3 * MIB)
    (origin / "big").write_bytes(old)
    m = lib.StokerMount(origin, tmp_path / "mnt", disk / "cache",
                        ARGS + ["--revalidate", "3600", "--prefetch", "0"])
    made.append(m)
    m.mount()
    fd = os.open(m.mnt / "big", os.O_RDONLY)
    try:
        assert with_deadline(os.pread, fd, MIB, 0) == old[:MIB]  # chunk 0 cached
    finally:
        os.close(fd)
    # The chunk is stored after the read is answered.
    lib.wait_until(lambda: m.stats()["chunks_written"] >= 1, timeout=30, what="chunk 0 cached")

    fill(disk / "filler")
    (origin / "big.new").write_bytes(new)
    os.rename(origin / "big.new", origin / "big")
    lib.drop_caches([m.mnt / "big"], system=False)
    fd = os.open(m.mnt / "big", os.O_RDONLY)
    try:
        try:  # chunk 1 is not cached: its fetch finds the origin file changed
            got = with_deadline(os.pread, fd, MIB, MIB)
            assert got in (old[MIB:2 * MIB], new[MIB:2 * MIB])
        except OSError as e:
            assert e.errno in (errno.ESTALE, errno.EIO), e
    finally:
        os.close(fd)
    # The read above may have been served the old bytes through the origin
    # file stoker still held open; then this open (within --revalidate, so
    # it asks no one) is the old version's, and its read of a chunk not
    # cached finds the change and fails with ESTALE: the old bytes are gone,
    # and one handle never gets two versions. The opens after it ask the
    # origin (the read marked the file changed) and get a new node.
    try:
        with_deadline(lib.read_file, m.mnt / "big")
    except OSError as e:
        assert e.errno == errno.ESTALE, e
    for attempt in range(3):
        lib.drop_caches([m.mnt / "big"], system=False)
        got = with_deadline(lib.read_file, m.mnt / "big")
        assert got == new, f"open {attempt + 1} after the change: old bytes served"
    assert m.stats()["origin_changes"] >= 1
