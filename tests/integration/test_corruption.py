"""A byte flipped in a cache data file (while unmounted) is never served:
the daemon detects it by checksum and re-fetches; fsck reports it (exit 1)
and --repair makes the cache clean (exit 0)."""

import json

import stoker_testlib as lib
from stoker_testlib import CHUNK

ARGS = ["--chunk-size", "1M", "--cache-size", "1G"]


def make_dataset(origin):
    rng = lib.seeded("corruption")
    for i, size in enumerate([CHUNK // 2, 3 * CHUNK + 99, 2 * CHUNK, 5 * CHUNK + 1]):
        lib.write_random(origin / f"f{i}", size, rng)
    return lib.hashes_of(origin)


def corrupt_every_data_file(cache):
    """Flips one byte in a stored region of every data file (in a chunk
    other than the first where there is one). Returns how many it hit."""
    n = 0
    for p in lib.cache_data_files(cache):
        ext = lib.data_extents(p)
        if not ext:
            continue
        start, end = ext[-1]
        if end - start > CHUNK:
            off = min(start + CHUNK + 12345, end - 1)
        else:
            off = start + (end - start) // 2
        lib.flip_byte(p, off)
        n += 1
    return n


def fill_cache(mounts, origin, expected, mnt=None, cache=None):
    m = mounts.make(origin, mnt=mnt, cache=cache, args=ARGS)
    assert not lib.check_hashes(m.mnt, expected)
    m.unmount()
    return m


def test_flipped_byte_is_detected_and_refetched(mounts, tmp_path):
    origin = tmp_path / "origin"
    expected = make_dataset(origin)
    m = fill_cache(mounts, origin, expected)
    files = lib.cache_data_files(m.cache)
    assert files, f"no data files under {m.cache}/data"
    # f0 (half a chunk) is in a slab slot, the others in files of their own:
    # both kinds are corrupted, detected and re-fetched.
    assert any(p.parent.name == "slab" for p in files), files
    assert corrupt_every_data_file(m.cache) >= len(expected)

    m2 = mounts.make(origin, mnt=m.mnt, cache=m.cache, args=ARGS)
    bad = lib.check_hashes(m2.mnt, expected)
    s = m2.stats()
    assert not bad, f"corrupt cache served wrong bytes: {bad}"
    assert s["checksum_failures"] >= len(expected), s
    assert s["origin_bytes_read"] > 0, s
    # Re-fetched chunks replace the bad ones: a re-read is clean and cached.
    lib.drop_caches([m2.mnt / n for n in expected])
    before = m2.stats()
    assert not lib.check_hashes(m2.mnt, expected)
    after = m2.stats()
    assert after["checksum_failures"] == before["checksum_failures"], (before, after)
    assert after["origin_bytes_read"] == before["origin_bytes_read"], (before, after)
    m2.unmount()
    r = lib.fsck(m.cache)
    assert r.returncode == 0, "cache not clean after the daemon re-fetched:\n" + lib.describe(r)


def test_fsck_reports_and_repairs_corruption(mounts, tmp_path):
    origin = tmp_path / "origin"
    expected = make_dataset(origin)
    m = fill_cache(mounts, origin, expected)

    r = lib.fsck(m.cache)
    assert r.returncode == 0, "fresh cache not clean:\n" + lib.describe(r)
    r = lib.fsck(m.cache, "--json")
    assert r.returncode == 0, lib.describe(r)
    clean = json.loads(r.stdout)
    assert clean["chunks"] >= 1 and clean["bad_checksums"] == 0, clean

    hit = corrupt_every_data_file(m.cache)
    r = lib.fsck(m.cache)
    assert r.returncode == 1, "fsck missed flipped bytes:\n" + lib.describe(r)
    assert r.stdout.strip(), "fsck printed no summary"
    r = lib.fsck(m.cache, "--json")
    assert r.returncode == 1, lib.describe(r)
    report = json.loads(r.stdout)
    assert report["bad_checksums"] >= hit, report

    rr = lib.fsck(m.cache, "--repair")
    assert rr.returncode == 1, "--repair must exit 1 when it found (and repaired) problems:\n" + (
        lib.describe(rr))
    r = lib.fsck(m.cache)
    assert r.returncode == 0, "not clean after --repair:\n" + lib.describe(r)

    # The repaired cache mounts and serves correct bytes (dropped chunks are
    # fetched again).
    m2 = mounts.make(origin, mnt=m.mnt, cache=m.cache, args=ARGS)
    assert not lib.check_hashes(m2.mnt, expected)
    s = m2.stats()
    assert s["checksum_failures"] == 0, s
    assert s["origin_bytes_read"] > 0, s
    m2.unmount()


def test_fsck_finds_orphan_and_missing_data(mounts, tmp_path):
    origin = tmp_path / "origin"
    expected = make_dataset(origin)
    m = fill_cache(mounts, origin, expected)
    files = lib.cache_data_files(m.cache)
    assert len(files) >= 2
    # An orphan: a data file no record refers to.
    orphan = files[0].parent / "ffffffffffffffff-1"
    orphan.write_bytes(b"orphan")
    # Missing data: a recorded data file removed.
    files[-1].unlink()
    r = lib.fsck(m.cache, "--json")
    assert r.returncode == 1, lib.describe(r)
    rep = json.loads(r.stdout)
    assert rep["orphan_files"] >= 1, rep
    assert rep["missing_data"] >= 1, rep
    rr = lib.fsck(m.cache, "--repair")
    assert rr.returncode in (0, 1), lib.describe(rr)
    r = lib.fsck(m.cache)
    assert r.returncode == 0, lib.describe(r)
    m2 = mounts.make(origin, mnt=m.mnt, cache=m.cache, args=ARGS)
    assert not lib.check_hashes(m2.mnt, expected)
    m2.unmount()
