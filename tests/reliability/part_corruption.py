"""Corruption injection: each case starts from a copy of one filled cache,
damages it (bytes flipped, zeroed or truncated in data files; data files
deleted under a live index; RocksDB SST, MANIFEST, WAL or CURRENT corrupted
or deleted while unmounted), runs fsck, mounts and reads everything.

Proves: damage is never served (every byte read equals the origin), and it
is detected: by the read checksum (checksum_failures), by fsck (exit 1), or
by a mount that refuses with a clear one-line error naming the fix, after
which `stoker fsck --repair` must give a clean cache that mounts and serves
every byte right."""

import os
import random
import shutil

import rel
from rel import ARGS, MIB, lib

MOUNT_ARGS = ARGS + ["--cache-size", "1G"]


def data_cases(rng):
    """(name, fn(cache)) for damage to chunk data files."""
    def flip(cache):
        for p in rng.sample(data_files(cache), k=min(6, len(data_files(cache)))):
            for start, end in lib.data_extents(p)[:3]:
                lib.flip_byte(p, rng.randrange(start, end))

    def zero(cache):
        for p in rng.sample(data_files(cache), k=min(4, len(data_files(cache)))):
            ext = lib.data_extents(p)
            if ext:
                start, end = rng.choice(ext)
                off = rng.randrange(start, end)
                with open(p, "r+b") as f:
                    f.seek(off)
                    f.write(bytes(min(4096, end - off)))

    def truncate(cache):
        for p in rng.sample(data_files(cache), k=min(4, len(data_files(cache)))):
            os.truncate(p, rng.randrange(0, max(1, os.path.getsize(p))))

    return [("flip bytes in data files", flip), ("zero a range of data files", zero),
            ("truncate data files", truncate)]


def index_cases(rng):
    """(name, fn(cache)) for damage to the RocksDB index."""
    def files(cache, pred):
        return [p for p in sorted((cache / "index").iterdir()) if pred(p.name)]

    def corrupt(pred):
        def go(cache):
            hit = files(cache, pred)
            for p in hit:
                size = p.stat().st_size
                with open(p, "r+b") as f:
                    for _ in range(8):
                        if size:
                            f.seek(rng.randrange(0, size))
                            f.write(os.urandom(16))
            return len(hit)
        return go

    def delete(pred):
        def go(cache):
            hit = files(cache, pred)
            for p in hit:
                p.unlink()
            return len(hit)
        return go

    sst = lambda n: n.endswith(".sst")  # noqa: E731
    manifest = lambda n: n.startswith("MANIFEST-")  # noqa: E731
    wal = lambda n: n.endswith(".log")  # noqa: E731
    return [("corrupt index SST files", corrupt(sst)), ("delete index SST files", delete(sst)),
            ("corrupt index MANIFEST", corrupt(manifest)), ("delete index MANIFEST", delete(manifest)),
            ("corrupt index WAL", corrupt(wal)), ("delete index WAL", delete(wal)),
            ("delete index CURRENT", delete(lambda n: n == "CURRENT"))]


def data_files(cache):
    return lib.cache_data_files(cache)


def corruption(tally, scratch, quick, seed):
    rng = random.Random(seed)
    origin = scratch.path("origin")
    sizes = rel.make_tree(origin, rng, 24 if quick else 80, 4 * MIB)
    rels = sorted(sizes)
    wal, pristine = fill_cache(scratch, origin, rels)
    for c in (wal, pristine):
        listing = sorted(p.name for p in (c / "index").iterdir())
        tally.say(f"filled cache {c.name}: {len(data_files(c))} data files; index holds {listing}")
    rounds = 1 if quick else 3
    for r in range(rounds):
        for name, damage in data_cases(rng) + index_cases(rng):
            base = wal if "WAL" in name else pristine
            run_case(tally, scratch, origin, rels, base, f"{name} (round {r + 1})", damage)
        live_delete_case(tally, scratch, origin, rels, pristine, rng, r)


def fill_cache(scratch, origin, rels):
    """Mounts, reads every file once (the cache keeps them) and unmounts.
    Returns two copies: one whose records are still in the WAL, and one
    mounted once more, so that RocksDB has turned its WAL into an SST."""
    m = scratch.stoker_mount(origin, "fill", MOUNT_ARGS)
    lib.with_deadline(lambda: [lib.read_file(m.mnt / r) for r in rels], what="fill")
    m.unmount()
    wal = scratch.path("fill-wal.cache")
    shutil.copytree(m.cache, wal)
    m = scratch.stoker_mount(origin, "fill", MOUNT_ARGS, cache=m.cache)
    m.unmount()
    return wal, m.cache


def run_case(tally, scratch, origin, rels, pristine, name, damage):
    """Copies the pristine cache, damages it, fscks, mounts and compares."""
    tally.add(cases=1)
    cache = scratch.path(f"case{tally.cases}.cache")
    shutil.copytree(pristine, cache)
    (cache / "stoker.log").unlink(missing_ok=True)
    if damage(cache) == 0:
        tally.say(f"{name}: no such file in this cache, nothing damaged")
        return
    tally.add(faults=1)
    rc, rep, err = rel.fsck_json(cache)
    fsck_says = f"fsck rc={rc} ({rel.findings(rep) if rc != 2 else err.splitlines()[-1:]})"
    m = lib.StokerMount(origin, scratch.path(f"case{tally.cases}.mnt"), cache, MOUNT_ARGS)
    scratch.mounts.append(m)
    r = lib.run(m.command(), timeout=lib.MOUNT_TIMEOUT)
    if r.returncode != 0:
        msg = (r.stderr.strip() or r.stdout.strip()).splitlines()
        if lib.is_mounted(m.mnt):
            tally.fail(f"{name}: mount exited {r.returncode} but left a mount")
        elif len(msg) != 1 or "stoker fsck --repair" not in msg[0]:
            tally.fail(f"{name}: mount refused without one clear line naming the fix: {msg}")
        tally.say(f"{name}: {fsck_says}; mount refused: {msg[:1]}")
        r = lib.fsck(cache, "--repair")
        rc2, rep2, _ = rel.fsck_json(cache)
        tally.say(f"  fsck --repair rc={r.returncode}; fsck after it: rc={rc2} ({rel.findings(rep2)})")
        if rc2 != 0:
            tally.fail(f"{name}: fsck --repair left a cache that is not clean")
            return
        r = lib.run(m.command(), timeout=lib.MOUNT_TIMEOUT)
        if r.returncode != 0:
            tally.fail(f"{name}: the repaired cache does not mount: {lib.describe(r)}")
            return
    m.pid = int(m.stats()["pid"])
    rel.compare_everything(tally, origin, m.mnt, rels)
    s = m.stats()
    detected = s["checksum_failures"] > 0 or rc in (1, 2)
    tally.say(f"{name}: {fsck_says}; mounted, read all: checksum_failures="
              f"{s['checksum_failures']}, origin_bytes_read={s['origin_bytes_read']}"
              f"{'' if detected else ' (damage not seen: nothing it hit was needed)'}")
    m.unmount()
    shutil.rmtree(cache, ignore_errors=True)


def live_delete_case(tally, scratch, origin, rels, pristine, rng, r):
    """Deletes data files while the daemon runs on the index that names
    them, then reads everything (after dropping the page cache)."""
    tally.add(cases=1)
    cache = scratch.path(f"live{r}.cache")
    shutil.copytree(pristine, cache)
    m = scratch.stoker_mount(origin, f"live{r}", MOUNT_ARGS, cache=cache)
    victims = rng.sample(data_files(cache), k=len(data_files(cache)) // 2)
    for p in victims:
        p.unlink()
    tally.add(faults=len(victims))
    lib.drop_caches()
    rel.compare_everything(tally, origin, m.mnt, rels)
    s = m.stats()
    tally.say(f"deleted {len(victims)} data files under a live index: read all, "
              f"errors={s['errors']}, checksum_failures={s['checksum_failures']}, "
              f"origin_bytes_read={s['origin_bytes_read']}")
    m.unmount()
    rc, rep, err = rel.fsck_json(cache)
    tally.say(f"  fsck afterwards: rc={rc} ({rel.findings(rep)})")
    shutil.rmtree(cache, ignore_errors=True)
