"""FUSE passthrough (fs/passthrough.h): a file the cache holds whole and has
verified is read by the kernel straight from its data file, and no READ
reaches the daemon; every promise of the cache still holds (right bytes,
eviction never punches what the kernel reads, a changed origin file is a new
version, a daemon crash is survived), and where passthrough cannot be used
the open falls back to the daemon's reads with the reason counted."""

import json
import mmap
import os
import threading
import time

import pytest

import stoker_testlib as lib
from stoker_testlib import MIB

ARGS = ["--chunk-size", "1M", "--cache-size", "1G"]


def read_whole(path):
    with open(path, "rb") as f:
        return f.read()


def fallbacks(st):
    return st.get("passthrough_fallbacks", {})


def passthrough_on(m):
    st = m.stats()
    if st.get("passthrough") != "on":
        pytest.skip(f"the kernel gives no passthrough here: {st.get('passthrough')}")
    return st


def cached_whole(m, chunks=10):
    """A read's chunks are stored once the reader has its bytes: waits for
    the cache to hold `chunks` (big's 10) before an open that should pass
    them through."""
    lib.wait_until(lambda: m.stats()["chunks"] >= chunks, 30, what="the file cached whole")


@pytest.fixture
def origin(tmp_path):
    o = tmp_path / "origin"
    o.mkdir()
    rng = lib.seeded("passthrough")
    lib.write_random(o / "big", 9 * MIB + 12345, rng)
    lib.write_random(o / "small", 70_000, rng)
    (o / "empty").write_bytes(b"")
    return o


def test_a_cached_file_is_read_by_the_kernel(mounts, origin):
    m = mounts.make(origin, args=ARGS)
    passthrough_on(m)
    want = read_whole(origin / "big")
    # First open: fetched from the origin through the daemon (verified as
    # it is written), so not held whole yet.
    assert read_whole(m.mnt / "big") == want
    st = m.stats()
    assert st["passthrough_opens"] == 0
    assert fallbacks(st).get("not_cached", 0) >= 1
    lib.drop_caches()
    reads = st["read_requests"]
    assert read_whole(m.mnt / "big") == want
    rng = lib.seeded("passthrough-preads")
    with open(m.mnt / "big", "rb") as f, open(origin / "big", "rb") as o:
        for _ in range(200):
            off = rng.randrange(0, len(want))
            n = rng.randrange(1, 3 * MIB)
            assert os.pread(f.fileno(), n, off) == os.pread(o.fileno(), n, off)
        mm = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
        try:
            assert mm[:] == want
        finally:
            mm.close()
    st = m.stats()
    assert st["passthrough_opens"] == 2
    assert st["read_requests"] == reads, "a READ reached the daemon for a passthrough file"
    # One backing file per node; after its last close it stays, idle, for
    # the next open.
    st = m.stats()
    assert st["passthrough_nodes"] == 1 and st["passthrough_idle"] == 1, st


def cached_and_unmounted(mounts, origin, names=("big",), chunks=10):
    """A mount whose cache holds all of the named files, unmounted; their
    bytes by name."""
    m = mounts.make(origin, args=ARGS)
    passthrough_on(m)
    want = {}
    for name in names:
        want[name] = read_whole(origin / name)
        assert read_whole(m.mnt / name) == want[name]
    cached_whole(m, chunks)
    m.unmount()
    return m, want


def test_a_remounted_cache_is_verified_at_the_first_open(mounts, origin):
    m, want = cached_and_unmounted(mounts, origin)
    want = want["big"]
    lib.drop_caches()
    m.mount()
    assert read_whole(m.mnt / "big") == want
    st = m.stats()
    assert st["passthrough_opens"] == 1
    assert st["chunks_verified_at_open"] == 10
    assert st["read_requests"] == 0
    assert st["origin_bytes_read"] == 0


def shards_cached_and_unmounted(mounts, origin, n=6):
    """n shards of 10-11 MiB in origin/shards, cached whole and unmounted:
    larger than what the directory prefetcher reads of each file ahead (8
    MiB, verifying it on the way)."""
    rng = lib.seeded("passthrough-shards")
    (origin / "shards").mkdir()
    names = [f"shards/shard-{i:02d}" for i in range(n)]
    for i, name in enumerate(names):
        lib.write_random(origin / name, 10 * MIB + 1000 * (i + 1), rng)
    return cached_and_unmounted(mounts, origin, names, chunks=11 * n)


def remount_and_read_in_order(m, want):
    """Reads the files in name order from a fresh daemon, as a reader busy
    with the records of each one between its opens; the daemon's stats."""
    lib.drop_caches()
    m.mount()
    for name in sorted(want):
        assert read_whole(m.mnt / name) == want[name]
        time.sleep(0.2)
    return m.stats()


def test_a_scanning_reader_finds_the_next_shard_verified(mounts, origin):
    m, want = shards_cached_and_unmounted(mounts, origin)
    st = remount_and_read_in_order(m, want)
    assert st["passthrough_opens"] == len(want)
    assert st["read_requests"] == 0 and st["origin_bytes_read"] == 0
    # The first two opens make the scan; the next shards are checked before
    # the reader opens them.
    assert st["chunks_verified_ahead"] >= 3 * 3, st
    assert st["chunks_verified"] >= 11 * len(want)


def test_a_corrupt_chunk_found_ahead_is_fetched_again(mounts, origin):
    m, want = shards_cached_and_unmounted(mounts, origin)
    last = want[max(want)]  # the shards differ in size
    [data] = [p for p in lib.cache_data_files(m.cache) if p.stat().st_size == len(last)]
    lib.flip_byte(data, 9 * MIB + 5)
    st = remount_and_read_in_order(m, want)
    assert st["checksum_failures"] == 1, st
    assert st["chunks_verified_ahead"] >= 3 * 3, st
    assert fallbacks(st).get("not_cached", 0) == 1, st  # the bad chunk was dropped ahead
    assert st["origin_bytes_read"] == MIB


def test_a_corrupt_chunk_found_at_open_is_fetched_again(mounts, origin):
    m, want = cached_and_unmounted(mounts, origin)
    want = want["big"]
    [data] = [p for p in lib.cache_data_files(m.cache) if "slab" not in str(p)]
    lib.flip_byte(data, 3 * MIB + 17)
    lib.drop_caches()
    m.mount()
    assert read_whole(m.mnt / "big") == want  # through the daemon, which re-fetches
    st = m.stats()
    assert st["checksum_failures"] == 1
    assert st["passthrough_opens"] == 0
    assert fallbacks(st).get("not_verified") == 1
    assert read_whole(m.mnt / "big") == want
    assert m.stats()["passthrough_opens"] == 1


def test_opens_that_cannot_be_passed_through_fall_back_with_their_reason(mounts, origin):
    m = mounts.make(origin, args=ARGS)
    passthrough_on(m)
    for name in ("small", "empty", "small", "empty"):
        assert read_whole(m.mnt / name) == read_whole(origin / name)
    st = m.stats()
    assert st["passthrough_opens"] == 0
    assert fallbacks(st).get("slab", 0) >= 1
    assert fallbacks(st).get("empty", 0) >= 1
    # Each open fell back; a second open may also find the first one's
    # release not handled yet (the kernel sends RELEASE after close returns).
    assert sum(fallbacks(st).values()) == 4, st
    # A node with a normal open stays in that mode until it is released.
    with open(m.mnt / "big", "rb") as first:
        assert first.read(4096) == read_whole(origin / "big")[:4096]
        assert read_whole(m.mnt / "big") == read_whole(origin / "big")
        assert read_whole(m.mnt / "big") == read_whole(origin / "big")
        st = m.stats()
        assert st["passthrough_opens"] == 0
        assert fallbacks(st).get("node_open_normally", 0) >= 1
    cached_whole(m, chunks=11)  # and small's
    assert read_whole(m.mnt / "big") == read_whole(origin / "big")
    assert m.stats()["passthrough_opens"] == 1


def test_passthrough_off_reads_through_the_daemon(mounts, origin):
    m = mounts.make(origin, args=ARGS + ["--passthrough", "off"])
    for _ in range(3):
        assert read_whole(m.mnt / "big") == read_whole(origin / "big")
    st = m.stats()
    assert st["passthrough"] == "off: off"
    assert st["passthrough_opens"] == 0
    assert fallbacks(st).get("off", 0) == 3


def test_bad_passthrough_value_is_one_line_and_exit_2(mounts, origin, tmp_path):
    r = lib.mount_cmd_fails(origin, tmp_path / "m", tmp_path / "c", *ARGS, "--passthrough", "yes")
    assert r.returncode == 2
    assert "--passthrough yes: must be auto, on or off" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_passthrough_on_mounts_where_the_kernel_allows_it(mounts, origin):
    m = mounts.make(origin, args=ARGS + ["--passthrough", "on"])
    passthrough_on(m)
    read_whole(m.mnt / "big")
    cached_whole(m)
    assert read_whole(m.mnt / "big") == read_whole(origin / "big")
    assert m.stats()["passthrough_opens"] == 1


def test_eviction_never_punches_what_the_kernel_reads(mounts, tmp_path):
    """A 64 MiB cache, two files of 8 MiB read through passthrough while 96
    MiB of other files push everything out: every byte read equals the
    origin's, and the held files' chunks stay."""
    origin = tmp_path / "origin"
    origin.mkdir()
    rng = lib.seeded("passthrough-evict")
    for i in range(14):
        lib.write_random(origin / f"f{i}", 8 * MIB, rng)
    want = {f"f{i}": read_whole(origin / f"f{i}") for i in range(14)}
    m = mounts.make(origin, args=["--chunk-size", "1M", "--cache-size", "64M"])
    passthrough_on(m)
    for i in range(2):  # cached and verified: the next opens are passthrough
        assert read_whole(m.mnt / f"f{i}") == want[f"f{i}"]
    held = [open(m.mnt / f"f{i}", "rb") for i in range(2)]
    try:
        assert m.stats()["passthrough_opens"] == 2
        stop = threading.Event()
        errors = []

        def churn():
            r = lib.seeded("passthrough-churn")
            while not stop.is_set():
                name = f"f{r.randrange(2, 14)}"
                if read_whole(m.mnt / name) != want[name]:
                    errors.append(f"{name} read wrong bytes")

        t = threading.Thread(target=churn, daemon=True)
        t.start()
        try:
            r = lib.seeded("passthrough-held")
            end = time.monotonic() + 8
            rounds = 0
            while time.monotonic() < end or m.stats()["evicted_chunks"] < 8:
                lib.drop_caches()
                for i, f in enumerate(held):
                    off = r.randrange(0, 8 * MIB)
                    n = r.randrange(1, 2 * MIB)
                    got = os.pread(f.fileno(), n, off)
                    assert got == want[f"f{i}"][off:off + n], f"f{i} at {off}: wrong bytes"
                rounds += 1
                assert time.monotonic() < end + 60, "the evictor never ran"
        finally:
            stop.set()
            t.join(60)
        assert not errors, errors
        assert m.stats()["evicted_chunks"] >= 8
    finally:
        for f in held:
            f.close()


def test_an_origin_change_is_seen_by_the_next_open_never_mixed(mounts, origin):
    m = mounts.make(origin, args=ARGS + ["--revalidate", "0"])
    passthrough_on(m)
    old = read_whole(origin / "big")
    assert read_whole(m.mnt / "big") == old
    cached_whole(m)
    f = open(m.mnt / "big", "rb")
    try:
        assert m.stats()["passthrough_opens"] == 1
        new = bytes(b ^ 0xFF for b in old[: 2 * MIB]) + old[2 * MIB:]
        tmp = origin / "big.tmp"
        tmp.write_bytes(new)
        os.utime(tmp, (time.time() + 5, time.time() + 5))
        os.rename(tmp, origin / "big")
        assert read_whole(m.mnt / "big") == new
        lib.drop_caches()
        assert os.pread(f.fileno(), len(old), 0) == old  # the open handle keeps its version
    finally:
        f.close()
    assert read_whole(m.mnt / "big") == new


def test_kill9_while_passthrough_readers_run(mounts, origin, tmp_path):
    """Supervised: the kernel keeps reading what the dead daemon handed it;
    the new daemon inherits the backing file, and its opens share it."""
    m = mounts.make(origin, args=ARGS)
    passthrough_on(m)
    want = read_whole(origin / "big")
    assert read_whole(m.mnt / "big") == want
    cached_whole(m)
    f = open(m.mnt / "big", "rb")
    assert m.stats()["passthrough_opens"] >= 1

    def read_one(rng):
        off = rng.randrange(0, len(want))
        n = rng.randrange(1, MIB)
        if os.pread(f.fileno(), n, off) != want[off:off + n]:
            return f"wrong bytes at {off}"
        return None

    def restarted():
        # New opens of the inherited node share its backing file.
        assert read_whole(m.mnt / "big") == want
        assert m.stats()["passthrough_opens"] >= 1

    try:
        errors = lib.readers_across_kill(m, read_one, check_restarted=restarted)
    finally:
        f.close()
    assert not errors, errors
    lib.unmount_and_fsck(m)


def _as_nobody(cmd, **kw):
    return lib.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *cmd], **kw)


def test_a_daemon_without_cap_sys_admin_reads_through_itself(tmp_path):
    """A user's daemon (mounted through the setuid fusermount3) cannot have
    backing files: auto falls back and says why; on fails the mount with
    one line."""
    base = tmp_path / "user"
    base.mkdir()
    origin, mnt, cache = base / "origin", base / "mnt", base / "cache"
    origin.mkdir()
    lib.write_random(origin / "big", 3 * MIB, lib.seeded("pt-user"))
    mnt.mkdir()
    cache.mkdir(mode=0o700)
    for p in (origin, origin / "big", mnt, cache):
        os.chown(p, 65534, 65534)
    # The way down to base, searchable by the user.
    p = base
    while p != p.parent:
        os.chmod(p, os.stat(p).st_mode | 0o011)
        p = p.parent
    args = [lib.STOKER_BIN, "mount", str(origin), str(mnt), "--cache", str(cache), *ARGS,
            "--no-supervise"]
    # A user opens /dev/fuse itself: Debian's udev rule makes it 0666, this
    # machine may not.
    fuse_mode = os.stat("/dev/fuse").st_mode & 0o7777
    os.chmod("/dev/fuse", 0o666)
    try:
        r = _as_nobody(args + ["--passthrough", "on"])
        assert r.returncode == 1, lib.describe(r)
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert "--passthrough on" in r.stderr and "no_cap_sys_admin" in r.stderr, r.stderr
        assert not lib.is_mounted(mnt)
        r = _as_nobody(args)
        assert r.returncode == 0, lib.describe(r)
        for _ in range(3):
            got = _as_nobody(["sha256sum", str(mnt / "big")])
            assert got.stdout.split()[0] == lib.sha256_file(origin / "big")
        st = json.loads(_as_nobody(["cat", str(mnt / ".stoker" / "stats.json")]).stdout)
        assert st["passthrough"] == "off: no_cap_sys_admin"
        assert st["passthrough_opens"] == 0
        assert st["passthrough_fallbacks"]["no_cap_sys_admin"] == 3
    finally:
        lib.cleanup_under(base)
        os.chmod("/dev/fuse", fuse_mode)
