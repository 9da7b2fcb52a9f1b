"""Power cut: the cache lives on its own loop ext4. During heavy concurrent
reads (every byte compared with the origin) the cache filesystem is shut
down with EXT4_IOC_SHUTDOWN(NOLOGFLUSH), which drops every write not yet on
the disk (page cache and the journal's uncommitted transactions), and the
daemon is killed -9 at the same moment, as a power cut does to both. Then
the filesystem is unmounted and mounted again (journal replay: the state a
reboot would find), fsck checks it, and a remount on that cache compares
the whole tree with the origin.

Proves: whatever subset of the cache's writes (data files, RocksDB WAL,
SST, MANIFEST) survived the cut, the cache never serves a wrong byte, fsck
can always check it, and a remount works."""

import random

import rel
from rel import ARGS, MIB, lib


def power_cut(tally, scratch, quick, seed):
    cycles = 3 if quick else 20
    rng = random.Random(seed)
    origin = scratch.path("origin")
    sizes = rel.make_tree(origin, rng, 30 if quick else 80, 6 * MIB)
    rels = sorted(sizes)
    disk, dev = rel.loop_ext4(scratch, "ssd", 512 * MIB)
    cache = disk / "cache"
    capacity = sum(sizes.values()) // 2 // MIB * MIB
    args = ARGS + rel.UNSUPERVISED + ["--cache-size", str(capacity)]
    tally.say(f"{cycles} cycles over {len(rels)} files, {sum(sizes.values()) // MIB} MiB, "
              f"cache on {dev}, --cache-size {capacity // MIB} MiB")
    m = scratch.stoker_mount(origin, "p", args, cache=cache)
    repairs = 0
    for cycle in range(1, cycles + 1):
        tally.add(cases=1)
        # The disk loses what it had not made durable, then the daemon dies.
        delay = rel.kill_under_readers(tally, m, origin, rels, cycle, rng, 3.0,
                                       before_kill=lambda: rel.shutdown_fs(disk), what="the cut")
        # "Reboot": the FUSE mount is stale, the cache filesystem is
        # unmounted and mounted again, replaying its journal.
        lib.lazy_unmount(m.mnt)
        rel.sh("umount", str(disk), timeout=120)
        rel.sh("mount", dev, str(disk), timeout=120)
        rc, rep, repaired = rel.fsck_after_fault(tally, cache, cycle)
        repairs += repaired
        m = scratch.stoker_mount(origin, "p", args, cache=cache)
        before = tally.bytes_compared
        rel.compare_everything(tally, origin, m.mnt, rels)
        tally.say(f"cycle {cycle}: cut after {delay:.2f}s of reads; fsck rc={rc} "
                  f"({rel.findings(rep)}); remount compared {tally.bytes_compared - before} bytes")
    s = m.stats()
    tally.say(f"fsck repairs run: {repairs}; last mount: checksum_failures={s['checksum_failures']}, "
              f"errors={s['errors']}")
    rel.count_passthrough(tally, m)
    m.unmount()
