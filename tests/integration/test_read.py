"""Byte-exact reads and an exact view of the origin's tree and metadata.

One origin tree and one mount (--chunk-size 1M) for the module; the 1 GiB
case has its own mount.
"""

import os
import stat

import pytest

import stoker_testlib as lib
from stoker_testlib import CHUNK, MIB, with_deadline

BOUNDARY_SIZES = {
    "one": 1,
    "4095": 4095,
    "4096": 4096,
    "4097": 4097,
    "chunk-1": CHUNK - 1,
    "chunk": CHUNK,
    "chunk+1": CHUNK + 1,
    "2chunk-1": 2 * CHUNK - 1,
    "2chunk": 2 * CHUNK,
    "2chunk+1": 2 * CHUNK + 1,
    "3chunk+17": 3 * CHUNK + 17,
    "5chunk": 5 * CHUNK,
}
SPARSE_SIZE = 6 * CHUNK + 3
SPARSE_WRITES = [(0, 100), (2 * CHUNK + 12345, 5000), (3 * CHUNK - 10, 20),
                 (SPARSE_SIZE - 7, 7)]
BIGDIR_ENTRIES = 10_000
UNICODE_NAMES = ["with space", " leading space", "trailing space ",
                 "日本語ファイル.txt", "café-ñ", "emoji_🚀.bin", "Ω≈ç√",
                 "a  b\tc"]


def build_origin(root, outside):
    rng = lib.seeded("test_read.origin")
    (root / "empty").write_bytes(b"")
    sizes = root / "sizes"
    for name, size in BOUNDARY_SIZES.items():
        lib.write_random(sizes / name, size, rng)

    # Sparse: holes, small writes, one crossing a chunk boundary, one at EOF.
    with open(root / "sparse", "wb") as f:
        f.truncate(SPARSE_SIZE)
        for off, n in SPARSE_WRITES:
            f.seek(off)
            f.write(rng.randbytes(n))
    with open(root / "holes_only", "wb") as f:
        f.truncate(3 * CHUNK + 1)

    big = root / "bigdir"
    big.mkdir()
    for i in range(BIGDIR_ENTRIES):
        (big / f"entry_{i:05d}").write_bytes(b"%d\n" % i)

    d = root / "nested"
    for depth in range(10):
        d = d / f"level{depth}"
        d.mkdir(parents=True)
        lib.write_random(d / f"file{depth}", 1000 * depth + 1, rng)
    (root / "nested" / "emptydir").mkdir()

    (outside / "target.txt").write_bytes(b"outside the origin\n")
    links = root / "links"
    links.mkdir()
    os.symlink("../sizes/chunk+1", links / "rel_file")
    os.symlink("../nested", links / "rel_dir")
    os.symlink("does/not/exist", links / "dangling")
    os.symlink(str(outside / "target.txt"), links / "abs_outside")
    os.symlink(str(root / "sizes" / "one"), links / "abs_inside")
    os.symlink("rel_file", links / "chain")
    os.symlink("x" * 1000, links / "long_target")

    names = root / "names"
    names.mkdir()
    for i, n in enumerate(UNICODE_NAMES):
        lib.write_random(names / n, 1000 + i, rng)
    (names / "dir with space ü").mkdir()
    lib.write_random(names / "dir with space ü" / "inner file ✓", 4242, rng)

    hard = root / "hard"
    hard.mkdir()
    lib.write_random(hard / "a", CHUNK + 5, rng)
    os.link(hard / "a", hard / "b")
    os.link(hard / "a", root / "nested" / "a_elsewhere")

    modes = root / "modes"
    modes.mkdir()
    for mode in (0o600, 0o644, 0o755, 0o444, 0o000, 0o4755, 0o2750):
        p = modes / f"m{mode:04o}"
        lib.write_random(p, 64, rng)
        os.chmod(p, mode)
    owned = modes / "owned"
    owned.write_bytes(b"owned\n")
    os.chown(owned, 1234, 5678)
    os.utime(owned, ns=(1_000_000_000_123_456_789, 1_234_567_890_987_654_321))
    old = modes / "old"
    old.write_bytes(b"old\n")
    os.utime(old, ns=(0, 86_400 * 1_000_000_000 + 1))
    sticky = modes / "sticky_dir"
    sticky.mkdir()
    os.chmod(sticky, 0o1777)
    os.chown(sticky, 42, 43)
    os.utime(sticky, ns=(1_500_000_000_000_000_001, 1_500_000_000_000_000_001))
    os.utime(links / "chain", ns=(1_600_000_000_000_000_007,) * 2,
             follow_symlinks=False)


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    base = tmp_path_factory.mktemp("read_origin")
    origin, outside = base / "origin", base / "outside"
    origin.mkdir()
    outside.mkdir()
    build_origin(origin, outside)
    return origin


@pytest.fixture(scope="module")
def mnt(module_mounts, tree):
    m = module_mounts.make(tree, args=["--chunk-size", "1M", "--cache-size", "1G"])
    return m


def mp(m, rel):
    return os.path.join(m.mnt, rel)


def test_root_listing_equals_origin_and_hides_control_dir(mnt, tree):
    listed = with_deadline(os.listdir, mnt.mnt)
    assert sorted(listed) == sorted(os.listdir(tree))
    assert ".stoker" not in listed
    st = with_deadline(os.stat, mnt.stats_path)
    assert stat.S_ISREG(st.st_mode)


def test_empty_file(mnt, tree):
    st = with_deadline(os.stat, mp(mnt, "empty"))
    assert st.st_size == 0
    assert with_deadline(lib.read_file, mp(mnt, "empty")) == b""


@pytest.mark.parametrize("name", list(BOUNDARY_SIZES))
def test_boundary_sizes_byte_exact(mnt, tree, name):
    want = (tree / "sizes" / name).read_bytes()
    got = with_deadline(lib.read_file, mp(mnt, f"sizes/{name}"))
    assert len(got) == BOUNDARY_SIZES[name]
    assert got == want


def test_boundary_sizes_reread_from_cache(mnt, tree):
    """Second pass, page cache dropped: served from the SSD tier, still exact."""
    files = [mp(mnt, f"sizes/{n}") for n in BOUNDARY_SIZES]
    with_deadline(lambda: [lib.read_file(f) for f in files])
    lib.drop_caches(files)
    before = mnt.stats()
    bad = lib.check_hashes(mnt.mnt, {f"sizes/{n}": lib.sha256_file(tree / "sizes" / n)
                                     for n in BOUNDARY_SIZES})
    assert not bad
    after = mnt.stats()
    total = sum(BOUNDARY_SIZES.values())
    # Files held whole are read by the kernel from the cache (passthrough).
    hits = after["cache_hit_bytes"] + after["passthrough_bytes"]
    assert hits - before["cache_hit_bytes"] - before["passthrough_bytes"] >= total, (before, after)
    assert after["origin_bytes_read"] == before["origin_bytes_read"], (before, after)


def test_sparse_files(mnt, tree):
    for name in ("sparse", "holes_only"):
        want = (tree / name).read_bytes()
        got = with_deadline(lib.read_file, mp(mnt, name))
        assert len(got) == len(want), name
        assert got == want, name
    rng = lib.seeded("sparse")
    bad = with_deadline(lib.random_preads, tree / "sparse", mp(mnt, "sparse"), 300, rng)
    assert not bad, bad[:10]


def test_random_preads_across_files(mnt, tree):
    rng = lib.seeded("random_preads")
    files = [tree / "sizes" / n for n in BOUNDARY_SIZES] + [tree / "hard" / "a",
                                                           tree / "sparse"]
    bad = []
    for f in files:
        rel = os.path.relpath(f, tree)
        bad += with_deadline(lib.random_preads, f, mp(mnt, rel), 60, rng)
    assert not bad, bad[:10]


def test_interleaved_preads_on_many_open_files(mnt, tree):
    rng = lib.seeded("interleaved")
    names = list(BOUNDARY_SIZES)

    def go():
        fds = {n: (os.open(tree / "sizes" / n, os.O_RDONLY),
                   os.open(mp(mnt, f"sizes/{n}"), os.O_RDONLY)) for n in names}
        bad = []
        try:
            for _ in range(500):
                n = rng.choice(names)
                size = BOUNDARY_SIZES[n]
                off = rng.randrange(0, size + 10)
                ln = rng.randrange(1, 2 * MIB)
                fo, fm = fds[n]
                if os.pread(fo, ln, off) != os.pread(fm, ln, off):
                    bad.append((n, off, ln))
        finally:
            for fo, fm in fds.values():
                os.close(fo)
                os.close(fm)
        return bad

    assert not with_deadline(go)


def test_big_directory_listing(mnt, tree):
    got = with_deadline(os.listdir, mp(mnt, "bigdir"))
    assert len(got) == BIGDIR_ENTRIES
    assert sorted(got) == sorted(os.listdir(tree / "bigdir"))

    def scan():
        return {e.name: (e.is_file(follow_symlinks=False), e.stat(follow_symlinks=False).st_size)
                for e in os.scandir(mp(mnt, "bigdir"))}
    entries = with_deadline(scan)
    assert len(entries) == BIGDIR_ENTRIES
    for i in range(0, BIGDIR_ENTRIES, 97):
        name = f"entry_{i:05d}"
        assert entries[name] == (True, len(b"%d\n" % i)), name
        assert with_deadline(lib.read_file, mp(mnt, f"bigdir/{name}")) == b"%d\n" % i


def test_a_listing_gives_every_entry_a_node(mounts, tmp_path):
    """A loader that lists a directory and then opens its files needs no
    LOOKUP per file: every entry of the listing arrives with its attributes
    and node (READDIRPLUS throughout, not only the first buffer), which the
    daemon's inode table shows right after a plain listdir (no stat)."""
    origin = tmp_path / "origin"
    (origin / "d").mkdir(parents=True)
    n = 4000  # many READDIRPLUS buffers
    for i in range(n):
        (origin / "d" / f"file_{i:05d}").write_bytes(b"%d" % i)
    m = mounts.make(origin)
    before = m.stats()["inodes"]
    names = with_deadline(os.listdir, os.path.join(m.mnt, "d"))
    assert len(names) == n
    assert m.stats()["inodes"] - before >= n
    for name in names[::397]:
        assert with_deadline(lib.read_file, os.path.join(m.mnt, "d", name)) == \
            b"%d" % int(name[5:])
    # And they go again once the kernel forgets them: a million-file dataset
    # does not pile up nodes.
    lib.drop_caches()
    lib.wait_until(lambda: m.stats()["inodes"] < before + n // 10, timeout=60,
                   what="the daemon's nodes freed after the kernel forgot them")


def test_many_files_under_a_low_descriptor_limit(module_mounts, tree):
    """A daemon limited to 1024 descriptors serves all 10k files of bigdir,
    twice (cold, then with kernel caches dropped so FORGETs and fresh
    lookups happen): it must not need a descriptor per file it has seen
    (libfuse's passthrough_ll fails with EMFILE here)."""
    m = module_mounts.new(tree, args=["--chunk-size", "1M", "--cache-size", "1G"])
    m.nofile = 1024
    m.mount()
    names = sorted(os.listdir(tree / "bigdir"))

    def read_all():
        bad = []
        for name in names:
            try:
                got = lib.read_file(mp(m, f"bigdir/{name}"))
            except OSError as e:
                bad.append(f"{name}: {e}")
                continue
            if got != b"%d\n" % int(name.split("_")[1]):
                bad.append(f"{name}: wrong bytes")
        return bad

    for rnd in ("cold", "after drop_caches"):
        bad = with_deadline(read_all, timeout=300)
        assert not bad, f"{rnd}: {len(bad)} failures, e.g. {bad[:5]}"
        n_fds = len(os.listdir(f"/proc/{m.pid}/fd"))
        assert n_fds <= 1024
        lib.drop_caches()
    s = m.stats()
    assert s["errors"] == 0, s
    m.unmount()


def test_nested_tree(mnt, tree):
    diffs = with_deadline(lib.compare_trees, tree / "nested", mp(mnt, "nested"))
    assert not diffs, diffs[:20]


def test_symlinks(mnt, tree):
    links = tree / "links"
    for name in os.listdir(links):
        m = mp(mnt, f"links/{name}")
        st = with_deadline(os.lstat, m)
        assert stat.S_ISLNK(st.st_mode), name
        assert with_deadline(os.readlink, m) == os.readlink(links / name), name
        assert st.st_size == os.lstat(links / name).st_size, name
    # Relative links resolve inside the mount (the kernel follows them).
    assert with_deadline(lib.read_file, mp(mnt, "links/rel_file")) == \
        (tree / "sizes" / "chunk+1").read_bytes()
    assert with_deadline(lib.read_file, mp(mnt, "links/chain")) == \
        (tree / "sizes" / "chunk+1").read_bytes()
    assert sorted(with_deadline(os.listdir, mp(mnt, "links/rel_dir"))) == \
        sorted(os.listdir(tree / "nested"))
    with pytest.raises(FileNotFoundError):
        with_deadline(os.stat, mp(mnt, "links/dangling"))


def test_unicode_and_space_names(mnt, tree):
    got = with_deadline(os.listdir, mp(mnt, "names"))
    assert sorted(got) == sorted(os.listdir(tree / "names"))
    diffs = with_deadline(lib.compare_trees, tree / "names", mp(mnt, "names"))
    assert not diffs, diffs


def test_hard_links(mnt, tree):
    paths = ["hard/a", "hard/b", "nested/a_elsewhere"]
    sts = [with_deadline(os.stat, mp(mnt, p)) for p in paths]
    assert len({s.st_ino for s in sts}) == 1, [s.st_ino for s in sts]
    assert [s.st_nlink for s in sts] == [3, 3, 3]
    want = (tree / "hard" / "a").read_bytes()
    for p in paths:
        assert with_deadline(lib.read_file, mp(mnt, p)) == want, p
    other = with_deadline(os.stat, mp(mnt, "sizes/chunk"))
    assert other.st_ino != sts[0].st_ino


def test_stat_fields_equal_origin(mnt, tree):
    """mode, size, uid, gid, mtime (ns) for files, dirs and symlinks."""
    def go():
        diffs = []
        for sub in ("modes", "links", "sizes", "hard", "."):
            o, m = tree / sub, mp(mnt, sub)
            so, sm = os.lstat(o), os.lstat(m)
            for fld in ("st_mode", "st_uid", "st_gid", "st_mtime_ns"):
                if getattr(so, fld) != getattr(sm, fld):
                    diffs.append(f"{sub}: {fld} {getattr(so, fld)} != {getattr(sm, fld)}")
        for sub in ("modes", "links", "sizes", "hard"):
            diffs += lib.compare_trees(tree / sub, mp(mnt, sub), content=False)
        return diffs
    diffs = with_deadline(go)
    assert not diffs, diffs[:20]


def test_whole_tree_byte_exact(mnt, tree):
    diffs = with_deadline(lib.compare_trees, tree, mnt.mnt, timeout=600)
    assert not diffs, diffs[:20]


@pytest.mark.parametrize("args", [["--no-direct-io"], ["--chunk-size", "4M"],
                                  ["--io-backend", "syscall"]],
                         ids=["buffered", "4M-chunks", "syscall-io"])
def test_sizes_byte_exact_cold_and_remounted(mounts, tree, tmp_path, args):
    """Cold reads (runs read direct from the origin and written direct to the
    cache, or all buffered; through io_uring, or plain syscalls as where
    io_uring is not available), then a remount that reads back and verifies
    what those writes left: the same bytes every time."""
    cache = tmp_path / "cache"
    for attempt in ("cold", "remounted"):
        m = mounts.make(tree, cache=cache, args=args + ["--cache-size", "1G"])
        if "--io-backend" in args:  # the origin's reads and the cache's alike
            s = m.stats()
            assert s["io_backend"] == s["origin_io_backend"] == "syscall", s
        diffs = with_deadline(lib.compare_trees, tree / "sizes", m.mnt / "sizes", timeout=300)
        assert not diffs, (attempt, diffs[:20])
        for rel in ["sparse", "holes_only"]:
            assert (m.mnt / rel).read_bytes() == (tree / rel).read_bytes(), (attempt, rel)
        if attempt == "remounted":
            assert m.stats()["origin_bytes_read"] == 0
        m.unmount()


@pytest.mark.slow
def test_one_gib_file(mounts, tmp_path):
    origin = tmp_path / "origin"
    big = lib.write_random(origin / "big.bin", lib.GIB)
    want = lib.sha256_file(big)
    m = mounts.make(origin, args=["--chunk-size", "1M", "--cache-size", "2G"])
    got = with_deadline(lib.sha256_file, m.mnt / "big.bin", timeout=600)
    assert got == want, "cold read of 1 GiB differs"
    rng = lib.seeded("gib")
    bad = with_deadline(lib.random_preads, big, m.mnt / "big.bin", 300, rng,
                        timeout=300)
    assert not bad, bad[:10]
    lib.drop_caches([m.mnt / "big.bin"])
    before = m.stats()
    got = with_deadline(lib.sha256_file, m.mnt / "big.bin", timeout=600)
    assert got == want, "warm read of 1 GiB differs"
    after = m.stats()
    assert after["origin_bytes_read"] == before["origin_bytes_read"], (before, after)
    m.unmount()
