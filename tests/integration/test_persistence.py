"""The cache survives unmount/remount: a second daemon serves everything
from the SSD tier without reading the origin.

How "without reading the origin" is proven: after the remount every origin
file gets a fanotify FAN_ACCESS_PERM mark whose listener answers FAN_DENY
(see OriginReadGuard). That makes the origin's bytes unreadable for every
process, root included, while its metadata (stat, readdir, open) stays
exactly the same, so the daemon sees an unchanged origin. If the daemon read
a single byte from the origin the read would fail and the listener would
record it. On top of that the daemon's own counter origin_bytes_read must
stay 0. (chmod 000 proves nothing for root; replacing the origin changes its
identity; an overmount does not affect a daemon holding directory fds.)
"""

import os

import pytest

import stoker_testlib as lib
from stoker_testlib import CHUNK


def make_dataset(origin):
    rng = lib.seeded("persistence")
    sizes = [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 5, 8 * CHUNK]
    for i, s in enumerate(sizes):
        lib.write_random(origin / f"f{i}", s, rng)
    for i in range(200):
        lib.write_random(origin / "small" / f"s{i:03d}", rng.randrange(1, 200_000), rng)
    with open(origin / "sparse", "wb") as f:
        f.truncate(4 * CHUNK)
        f.seek(CHUNK + 7)
        f.write(b"data in the middle")
    return lib.hashes_of(origin)


def test_remount_serves_everything_from_cache(mounts, tmp_path):
    origin = tmp_path / "origin"
    expected = make_dataset(origin)
    total = sum(os.path.getsize(origin / rel) for rel in expected)
    args = ["--chunk-size", "1M", "--cache-size", "1G", "--revalidate", "3600"]

    m = mounts.make(origin, args=args)
    assert not lib.check_hashes(m.mnt, expected)
    first = m.stats()
    assert first["origin_bytes_read"] > 0, first
    m.unmount()

    m2 = mounts.make(origin, mnt=m.mnt, cache=m.cache, args=args)
    assert m2.pid != m.pid
    files = [m2.mnt / rel for rel in expected]
    with lib.OriginReadGuard(lib.regular_files(origin)) as guard:
        lib.drop_caches(files)
        bad = lib.check_hashes(m2.mnt, expected)
        # A second pass with the page cache dropped again: still no origin.
        lib.drop_caches(files)
        bad += lib.check_hashes(m2.mnt, expected)
    stats = m2.stats()
    assert not bad, bad[:10]
    assert guard.events == [], f"origin was read after remount: {guard.events[:10]}"
    if not guard.available:
        print(f"fanotify guard unavailable ({guard.reason}); relying on stats")
    assert stats["origin_bytes_read"] == 0, stats
    assert stats["cache_hit_bytes"] >= total, stats
    assert stats["errors"] == 0, stats
    assert stats["objects"] >= len([r for r in expected if os.path.getsize(origin / r)]), stats
    m2.unmount()
    r = lib.fsck(m.cache)
    assert r.returncode == 0, lib.describe(r)


def test_guard_really_blocks_origin_reads(tmp_path):
    """The proof above is only a proof if the guard bites: check it does."""
    f = lib.write_random(tmp_path / "x", 4096)
    with lib.OriginReadGuard([f]) as guard:
        if not guard.available:
            pytest.skip(f"fanotify unavailable: {guard.reason}")
        with pytest.raises(PermissionError):
            lib.with_deadline(lib.read_file, f, timeout=10)
    assert len(guard.events) >= 1
    assert lib.read_file(f)  # readable again once the guard is gone
