"""A file read once is read from memory the second time (issue: every epoch
after the first at memory speed). The cold open is answered FOPEN_DIRECT_IO,
so its bytes are kept once, as the pages of the cache's data file (written
through the page cache); the next open is passed through to that file and
reads those pages. Checked by what the block layer was asked: each process's
/proc/PID/io read_bytes (a passthrough read is charged to the reader, a
daemon's read to the daemon), and by fincore of the data file."""

import mmap
import os
import subprocess
import sys

import pytest

import stoker_testlib as lib
from stoker_testlib import MIB

SIZE = 48 * MIB + 4321
ARGS = ["--chunk-size", "1M", "--cache-size", "1G"]

READER = r"""
import os, sys
def io():
    with open("/proc/self/io") as f:
        return {k: int(v) for k, v in (l.split(": ") for l in f)}
before = io()
with open(sys.argv[1], "rb", buffering=0) as f:
    data = f.read()
after = io()
sys.stdout.write(f"{after['read_bytes'] - before['read_bytes']} {len(data)}\n")
sys.stdout.flush()
"""


def proc_read_bytes(pid):
    with open(f"/proc/{pid}/io") as f:
        for line in f:
            if line.startswith("read_bytes:"):
                return int(line.split()[1])
    raise AssertionError("no read_bytes in /proc/PID/io")


def read_in_new_process(path):
    """Reads path whole in a new process: (bytes it made the block layer
    read, bytes it got)."""
    r = subprocess.run([sys.executable, "-c", READER, str(path)], capture_output=True,
                       text=True, timeout=120, check=True)
    disk, got = (int(x) for x in r.stdout.split())
    return disk, got


def resident_bytes(path):
    r = subprocess.run(["fincore", "--bytes", "--noheadings", "--raw", "-o", "RES", str(path)],
                       capture_output=True, text=True, timeout=30, check=True)
    return int(r.stdout.split()[0])


def data_file_of(cache_dir, size):
    """The cache's data file of the one object of `size` bytes."""
    found = [p for p in (cache_dir / "data").rglob("*") if p.is_file() and
             p.stat().st_size == size]
    assert len(found) == 1, found
    return found[0]


@pytest.fixture
def origin(tmp_path):
    o = tmp_path / "origin"
    o.mkdir()
    lib.write_random(o / "big", SIZE, lib.seeded("second-read"))
    return o


def passthrough_on(m):
    st = m.stats()
    if st.get("passthrough") != "on":
        pytest.skip(f"the kernel gives no passthrough here: {st.get('passthrough')}")


def test_a_file_read_twice_is_read_from_memory_the_second_time(mounts, origin):
    m = mounts.make(origin, args=ARGS)
    passthrough_on(m)
    want = (origin / "big").read_bytes()
    lib.drop_caches()
    # Epoch 1: from the origin, through the daemon.
    assert lib.read_file(m.mnt / "big") == want
    lib.wait_until(lambda: m.stats()["chunks"] >= 49, 30, what="the file cached whole")
    data = data_file_of(m.cache, SIZE)
    held = resident_bytes(data)
    assert held >= SIZE * 9 // 10, f"{held} of {SIZE} bytes of the data file in memory"
    st = m.stats()
    # Epoch 2, a new open in a new process: passed through, from memory.
    daemon_before = proc_read_bytes(m.pid)
    disk, got = read_in_new_process(m.mnt / "big")
    assert got == SIZE
    assert disk < SIZE // 10, f"the second read made the disk read {disk} bytes"
    assert proc_read_bytes(m.pid) - daemon_before < SIZE // 10
    after = m.stats()
    assert after["passthrough_opens"] > st["passthrough_opens"], after
    assert after["origin_bytes_read"] == st["origin_bytes_read"]
    assert lib.read_file(m.mnt / "big") == want


def test_the_same_open_reads_again_from_memory(mounts, origin):
    """One descriptor reads the file twice: the second pass goes through
    the daemon (the open was not passed through) and is served from the
    data file's pages."""
    m = mounts.make(origin, args=ARGS)
    passthrough_on(m)
    want = (origin / "big").read_bytes()
    lib.drop_caches()
    fd = os.open(m.mnt / "big", os.O_RDONLY)
    try:
        assert lib.with_deadline(os.pread, fd, SIZE, 0) == want
        lib.wait_until(lambda: m.stats()["chunks"] >= 49, 30, what="the file cached whole")
        before = m.stats()
        daemon_before = proc_read_bytes(m.pid)
        assert lib.with_deadline(os.pread, fd, SIZE, 0) == want
        assert proc_read_bytes(m.pid) - daemon_before < SIZE // 10
        after = m.stats()
        assert after["origin_bytes_read"] == before["origin_bytes_read"]
        # Its reads reached the daemon (no FUSE pages were kept).
        assert after["bytes_read"] - before["bytes_read"] >= SIZE, after
    finally:
        os.close(fd)


def test_a_shared_mmap_of_a_cold_open_reads_the_file(mounts, origin):
    """The cold open is FOPEN_DIRECT_IO; a shared mapping of it still works
    (FUSE_DIRECT_IO_ALLOW_MMAP) and gives the file's bytes."""
    m = mounts.make(origin, args=ARGS)
    passthrough_on(m)
    want = (origin / "big").read_bytes()
    with open(m.mnt / "big", "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
        try:
            assert mm[:] == want
        finally:
            mm.close()
    # And once it is held whole, the next open is passed through.
    lib.wait_until(lambda: m.stats()["chunks"] >= 49, 30, what="the file cached whole")
    st = m.stats()
    assert lib.read_file(m.mnt / "big") == want
    assert m.stats()["passthrough_opens"] > st["passthrough_opens"]
