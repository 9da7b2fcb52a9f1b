"""Reading ahead: a reader going through a directory's files in listing or
name order gets the next files fetched ahead of it; a shuffled reader does
not; and a change that a background open (prefetch, warm) notices still
reaches the reader, kernel page cache included."""

import os
import time

import stoker_testlib as lib
from stoker_testlib import CHUNK, with_deadline

FILES = 48
SIZE = 20 * 1024


def make_tree(origin, rng):
    data = {}
    for i in range(FILES):
        name = f"img-{rng.randrange(10**9):09d}.jpg"  # listing order != name order
        data[name] = rng.randbytes(SIZE + i)
        (origin / "d").mkdir(parents=True, exist_ok=True)
        (origin / "d" / name).write_bytes(data[name])
    return data


def read_in(mnt, names, data):
    for n in names:
        got = with_deadline(lib.read_file, mnt / "d" / n)
        assert got == data[n], f"{n}: wrong bytes"


def no_successors(order, listing):
    """True if no name in `order` directly follows its predecessor in the
    listing order or in name order."""
    for ranked in (listing, sorted(listing)):
        pos = {n: i for i, n in enumerate(ranked)}
        if any(pos[b] == pos[a] + 1 for a, b in zip(order, order[1:])):
            return False
    return True


def test_files_ahead_of_a_directory_scan_are_fetched(mounts, tmp_path):
    for order in ("listing", "name"):
        origin = tmp_path / order / "origin"
        rng = lib.seeded(f"dirscan-{order}")
        data = make_tree(origin, rng)
        m = mounts.make(origin, args=["--cache-size", "1G", "--prefetch-files", "8"])
        names = os.listdir(origin / "d") if order == "listing" else sorted(data)
        read_in(m.mnt, names, data)
        s = m.stats()
        assert s["dir_prefetched_files"] >= FILES // 2, (order, s)
        # A cold cache served files from what was fetched ahead of the reader.
        assert s["cache_hit_bytes"] > 0, (order, s)
        assert s["origin_bytes_read"] == sum(len(v) for v in data.values()), (order, s)
        m.unmount()
        r = lib.fsck(m.cache)
        assert r.returncode == 0, lib.describe(r)


def test_shuffled_reader_gets_nothing_fetched_ahead(mounts, tmp_path):
    origin = tmp_path / "origin"
    rng = lib.seeded("dirscan-shuffled")
    data = make_tree(origin, rng)
    listing = os.listdir(origin / "d")
    order = list(data)
    while True:
        rng.shuffle(order)
        if no_successors(order, listing):
            break
    m = mounts.make(origin, args=["--cache-size", "1G"])
    read_in(m.mnt, order, data)
    s = m.stats()
    assert s["dir_prefetched_files"] == 0, s
    assert s["origin_bytes_read"] == sum(len(v) for v in data.values()), s


def test_prefetch_files_zero_turns_it_off(mounts, tmp_path):
    origin = tmp_path / "origin"
    data = make_tree(origin, lib.seeded("dirscan-off"))
    m = mounts.make(origin, args=["--cache-size", "1G", "--prefetch-files", "0"])
    read_in(m.mnt, os.listdir(origin / "d"), data)
    assert m.stats()["dir_prefetched_files"] == 0


def rewrite_same_size(path, data):
    """New content of the same size, with a later mtime."""
    new = bytes(b ^ 0x5A for b in data)
    with open(path, "r+b") as f:
        f.write(new)
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    return new


def test_a_change_seen_by_warm_reaches_the_reader(mounts, tmp_path):
    origin = tmp_path / "origin"
    origin.mkdir()
    old = lib.seeded("warm-change").randbytes(2 * CHUNK + 5)
    (origin / "f").write_bytes(old)
    m = mounts.make(origin, args=["--cache-size", "1G", "--revalidate", "0"])
    assert with_deadline(lib.read_file, m.mnt / "f") == old
    assert with_deadline(lib.read_file, m.mnt / "f") == old  # kernel pages kept
    new = rewrite_same_size(origin / "f", old)
    done = m.stats()["warm_files_done"]
    r = lib.stoker("warm", str(m.mnt / "f"))
    assert r.returncode == 0, lib.describe(r)
    lib.wait_until(lambda: m.stats()["warm_files_done"] > done, 30, what="warm to finish")
    assert m.stats()["origin_changes"] >= 1
    assert with_deadline(lib.read_file, m.mnt / "f") == new, "stale kernel pages served"


def test_a_change_seen_by_prefetch_reaches_the_reader(mounts, tmp_path):
    origin = tmp_path / "origin"
    rng = lib.seeded("prefetch-change")
    data = make_tree(origin, rng)
    names = sorted(data)
    m = mounts.make(origin, args=["--cache-size", "1G", "--revalidate", "0"])
    read_in(m.mnt, names, data)
    read_in(m.mnt, names, data)  # cached, and in the kernel's page cache
    target = names[2]
    data[target] = rewrite_same_size(origin / "d" / target, data[target])
    changes = m.stats()["origin_changes"]
    # Opening the two files before it makes it be fetched ahead, by a
    # background open that is the first to see the change.
    read_in(m.mnt, names[:2], data)
    lib.wait_until(lambda: m.stats()["origin_changes"] > changes, 30,
                   what="prefetch to notice the change")
    time.sleep(0.2)
    read_in(m.mnt, [target], data)
