"""A changed origin file is noticed after --revalidate seconds and its new
content is served; old and new bytes are never mixed in one read."""

import errno
import os
import threading
import time

import pytest

import stoker_testlib as lib
from stoker_testlib import CHUNK, with_deadline

ARGS = ["--chunk-size", "1M", "--cache-size", "1G", "--revalidate", "1"]


def read_fresh(path):
    """Open + read all: a new open is what triggers revalidation."""
    return with_deadline(lib.read_file, path)


def wait_for_content(path, want, timeout=30):
    """Re-opens until the mount shows `want`. Every intermediate result must
    be either the old content or `want` (checked by the caller via the
    returned list of distinct observations)."""
    seen = []
    deadline = time.monotonic() + timeout
    while True:
        got = read_fresh(path)
        if not seen or seen[-1] != got:
            seen.append(got)
        if got == want:
            return seen
        if time.monotonic() > deadline:
            return seen
        time.sleep(0.2)


def test_origin_change_is_served_after_revalidation(mounts, tmp_path):
    origin = tmp_path / "origin"
    rng = lib.seeded("revalidate")
    old = {
        "same_size_inplace": rng.randbytes(3 * CHUNK + 11),
        "grow_inplace": rng.randbytes(2 * CHUNK + 1),
        "shrink_inplace": rng.randbytes(4 * CHUNK),
        "replaced_by_rename": rng.randbytes(CHUNK + 3),
        "small_same_size": rng.randbytes(100),
    }
    for n, data in old.items():
        (origin / n).parent.mkdir(parents=True, exist_ok=True)
        (origin / n).write_bytes(data)
    m = mounts.make(origin, args=ARGS)
    for n, data in old.items():
        assert read_fresh(m.mnt / n) == data, n
    # Read twice so the old version is certainly cached and in page cache.
    for n, data in old.items():
        assert read_fresh(m.mnt / n) == data, n
    before = m.stats()

    new = {}
    # Same size, in place: only mtime/ctime tell the change.
    new["same_size_inplace"] = bytes(b ^ 0x5A for b in old["same_size_inplace"])
    new["small_same_size"] = bytes(b ^ 0xA5 for b in old["small_same_size"])
    new["grow_inplace"] = rng.randbytes(3 * CHUNK + 77)
    new["shrink_inplace"] = rng.randbytes(CHUNK - 1)
    for n in ("same_size_inplace", "small_same_size", "grow_inplace", "shrink_inplace"):
        with open(origin / n, "r+b") as f:
            f.write(new[n])
            f.truncate(len(new[n]))
    new["replaced_by_rename"] = rng.randbytes(5 * CHUNK + 9)
    (origin / "tmp.new").write_bytes(new["replaced_by_rename"])
    os.rename(origin / "tmp.new", origin / "replaced_by_rename")

    time.sleep(2)
    for n, want in new.items():
        seen = wait_for_content(m.mnt / n, want)
        assert seen[-1] == want, (
            f"{n}: new content not served after revalidation "
            f"(got {len(seen[-1])} bytes, want {len(want)}; old was {len(old[n])})")
        for got in seen:
            assert got in (old[n], want), f"{n}: a read mixed old and new content"
    after = m.stats()
    assert after["origin_changes"] - before["origin_changes"] >= 1, (before, after)
    assert after["revalidations"] > before["revalidations"], (before, after)
    # And the new content is what gets cached: a pass with page cache dropped.
    lib.drop_caches([m.mnt / n for n in new])
    for n, want in new.items():
        assert read_fresh(m.mnt / n) == want, n
    m.unmount()
    r = lib.fsck(m.cache)
    assert r.returncode == 0, lib.describe(r)


def test_reads_never_mix_versions_while_origin_is_replaced(mounts, tmp_path):
    """Readers re-open and pread while the origin file is atomically
    replaced by its bitwise complement; every byte of every single pread
    must come from one version (old XOR new == 0xFF everywhere, so each byte
    says which version it came from)."""
    origin = tmp_path / "origin"
    rng = lib.seeded("mix")
    size = 6 * CHUNK + 123
    v0 = rng.randbytes(size)
    v1 = bytes(b ^ 0xFF for b in v0)
    (origin).mkdir()
    (origin / "f").write_bytes(v0)
    m = mounts.make(origin, args=ARGS)
    assert read_fresh(m.mnt / "f") == v0

    stop = threading.Event()
    problems, saw_new, stale = [], [], []
    lock = threading.Lock()

    def classify(got, off):
        if got == v0[off:off + len(got)]:
            return "old"
        if got == v1[off:off + len(got)]:
            return "new"
        return None

    def reader(seed):
        r = lib.seeded(f"mix-reader-{seed}")
        while not stop.is_set():
            try:
                fd = os.open(m.mnt / "f", os.O_RDONLY)
            except OSError as e:
                with lock:
                    problems.append(f"open: {e}")
                return
            try:
                for _ in range(8):
                    off = r.randrange(0, size)
                    ln = r.randrange(1, 3 * CHUNK)
                    want_len = min(ln, size - off)
                    try:
                        got = os.pread(fd, ln, off)
                    except OSError as e:
                        # A handle opened before the change may be told to
                        # reopen (ESTALE): not a mix. Anything else is.
                        with lock:
                            (stale if e.errno == errno.ESTALE else problems).append(
                                f"pread(off={off}, len={ln}): {e}")
                        break
                    which = classify(got, off)
                    if which is None:
                        with lock:
                            problems.append(f"pread(off={off}, len={ln}) mixes versions or is garbage")
                        continue
                    if which == "new":
                        with lock:
                            saw_new.append(1)
                    if len(got) != want_len:
                        # The kernel returns what it got before a later
                        # request of the same read failed (ESTALE): one
                        # version's bytes, but short.
                        with lock:
                            stale.append(f"short read {len(got)} of {want_len} at {off}")
            finally:
                os.close(fd)

    threads = [threading.Thread(target=reader, args=(i,), daemon=True) for i in range(3)]
    for t in threads:
        t.start()
    try:
        time.sleep(1.5)
        for version in (v1, v0, v1):
            (origin / "f.tmp").write_bytes(version)
            os.rename(origin / "f.tmp", origin / "f")
            time.sleep(2.5)
        lib.wait_until(lambda: saw_new, 30, what="new version observed by readers")
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    assert not any(t.is_alive() for t in threads), "a reader hung"
    assert not problems, problems[:10]
    if stale:
        print(f"{len(stale)} reads on handles opened before a change ended early "
              f"(ESTALE / short): {stale[:5]}")
    assert read_fresh(m.mnt / "f") == v1 or lib.wait_until(
        lambda: read_fresh(m.mnt / "f") == v1, 30, what="final version served")
    m.unmount()


def test_lookups_within_the_window_are_answered_from_the_cache(mounts, tmp_path):
    """A lookup of a cached file less than --revalidate after the origin was
    asked about it is answered from the cache (attrs_from_cache), also by the
    next daemon on the same cache, whose kernel holds no entry yet. With
    --revalidate 0 every lookup asks the origin, and a deleted file is gone."""
    origin = tmp_path / "origin"
    origin.mkdir()
    rng = lib.seeded("lookups-in-window")
    data = {f"f{i:02d}": rng.randbytes(1000 + i) for i in range(20)}
    for n, d in data.items():
        (origin / n).write_bytes(d)
    window = ["--chunk-size", "1M", "--cache-size", "1G", "--revalidate", "3600"]

    m = mounts.make(origin, args=window)
    for n, d in data.items():
        assert read_fresh(m.mnt / n) == d, n
    m.unmount()

    m2 = mounts.make(origin, mnt=m.mnt, cache=m.cache, args=window)
    before = m2.stats()
    for n, d in data.items():  # by name, no readdir: one lookup each
        assert os.stat(m2.mnt / n).st_size == len(d), n
    after = m2.stats()
    assert after["attrs_from_cache"] - before["attrs_from_cache"] == len(data), after
    assert after["revalidations"] == before["revalidations"], after
    assert os.stat(m2.mnt / "f00").st_mtime_ns == os.stat(origin / "f00").st_mtime_ns
    m2.unmount()

    always = ["--chunk-size", "1M", "--cache-size", "1G", "--revalidate", "0"]
    m3 = mounts.make(origin, mnt=m.mnt, cache=m.cache, args=always)
    for n, d in data.items():
        assert os.stat(m3.mnt / n).st_size == len(d), n
    (origin / "f00").unlink()
    with pytest.raises(FileNotFoundError):
        os.stat(m3.mnt / "f00")
    assert m3.stats()["attrs_from_cache"] == 0
    m3.unmount()


def test_the_kernel_keeps_a_listing_until_the_directory_changes(mounts, tmp_path):
    """An opendir within --revalidate of the last listing, of a directory
    whose attributes did not change, lets the kernel keep the listing it
    cached (listings_kept); an entry added or removed changes the directory's
    mtime, and the next listing shows it. With --revalidate 0 nothing is kept."""
    origin = tmp_path / "origin"
    (origin / "d").mkdir(parents=True)
    for i in range(300):
        (origin / "d" / f"f{i:03d}").write_bytes(b"x" * i)
    want = sorted(os.listdir(origin / "d"))
    m = mounts.make(origin, args=["--chunk-size", "1M", "--cache-size", "1G", "--revalidate", "3600"])
    for _ in range(3):
        assert sorted(os.listdir(m.mnt / "d")) == want
    assert m.stats()["listings_kept"] >= 2
    (origin / "d" / "new").write_bytes(b"new")
    assert sorted(os.listdir(m.mnt / "d")) == sorted(want + ["new"])
    (origin / "d" / "f000").unlink()
    (origin / "d" / "f001").rename(origin / "d" / "g001")
    assert sorted(os.listdir(m.mnt / "d")) == sorted(os.listdir(origin / "d"))
    # The next daemon has no record of what the kernel listed: it lists again.
    m.unmount()
    m = mounts.make(origin, mnt=m.mnt, cache=m.cache,
                    args=["--chunk-size", "1M", "--cache-size", "1G", "--revalidate", "0"])
    for _ in range(3):
        assert sorted(os.listdir(m.mnt / "d")) == sorted(os.listdir(origin / "d"))
    assert m.stats()["listings_kept"] == 0
