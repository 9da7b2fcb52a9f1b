"""Full cache disk: the cache lives on a small loop-mounted ext4 and
--cache-size is far larger than that disk, so the disk fills mid-run while
readers go on.

Proves: reads keep succeeding with correct bytes (served from the origin
once the disk is full), the daemon's usage gauge never exceeds the disk,
`stoker stat` and stats.json still answer, the cache leaves its free-space
reserve, and fsck can check the cache (it writes nothing)."""

import json
import os
import random
import threading

import rel
from rel import ARGS, MIB, lib

DISK = 48 * MIB


def full_disk(tally, scratch, quick, seed):
    rng = random.Random(seed)
    origin = scratch.path("origin")
    sizes = rel.make_tree(origin, rng, 60 if quick else 150, 8 * MIB)
    rels = sorted(sizes)
    disk, _ = rel.loop_ext4(scratch, "disk", DISK)
    total = sum(sizes.values())
    tally.say(f"cache on a {DISK // MIB} MiB ext4 with --cache-size 10G; dataset {total // MIB} MiB")
    m = scratch.stoker_mount(origin, "fd", ARGS + ["--cache-size", "10G"], cache=disk / "cache")
    tally.add(faults=1)
    passes = 2 if quick else 4
    with UsagePoller(tally, m, disk) as poller:
        for p in range(passes):
            tally.add(cases=1)
            lib.drop_caches()
            readers = rel.Readers(tally, origin, m.mnt, rels, 4, seed=seed + p).start()
            rel.compare_everything(tally, origin, m.mnt, rels)
            stuck = readers.finish(timeout=120)
            if stuck:
                tally.add(hangs=1)
                tally.say(f"HANG: readers {stuck} did not finish")
            st = os.statvfs(disk)
            tally.say(f"pass {p + 1}: disk free {st.f_bavail * st.f_frsize // MIB} MiB, "
                      f"{poller.summary()}")
    # Filled means down to the reserve (5%) plus the gap the evictor keeps
    # between its watermarks (3-6% of the cache's share).
    if poller.max_free_low > DISK // 5:
        tally.fail(f"the disk never filled (lowest free {poller.max_free_low // MIB} MiB): "
                   "the part did not test what it says")
    m.unmount()
    st = os.statvfs(disk)
    free = st.f_bavail * st.f_frsize
    reserve = st.f_blocks * st.f_frsize // 20  # the daemon's default reserve: 5% of the disk
    tally.say(f"after unmount: disk free {free // 1024} KiB (reserve {reserve // 1024} KiB); "
              f"index {du(m.cache / 'index') // 1024} KiB, data {du(m.cache / 'data') // 1024} KiB")
    # Stores running together each saw room and overran the reserve before
    # they were counted together (DiskClaim); half of it is the slack left
    # for the index's own writes.
    if free < reserve // 2:
        tally.fail(f"the cache filled its disk into the reserve: {free // 1024} KiB free of "
                   f"a {reserve // 1024} KiB reserve")
    rc, rep, err = rel.fsck_json(m.cache)
    tally.say(f"fsck after unmount: rc={rc} ({rel.findings(rep) if rc != 2 else err})")
    if rc == 2:
        tally.fail(f"fsck could not check the cache of a full disk: {err}")


def du(path):
    """Bytes allocated under path."""
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_blocks * 512
            except OSError:
                pass
    return total


class UsagePoller:
    """Samples stats.json, `stoker stat --json` and the disk while the
    readers run; records a failure when usage exceeds the disk or stat
    stops answering."""

    def __init__(self, tally, m, disk):
        self.tally, self.m, self.disk = tally, m, disk
        self.stop = threading.Event()
        self.samples = 0
        self.max_used = 0
        self.max_free_low = DISK
        self.last = {}
        self.thread = threading.Thread(target=self.loop, daemon=True)

    def loop(self):
        size = os.statvfs(self.disk).f_blocks * os.statvfs(self.disk).f_frsize
        while not self.stop.is_set():
            try:
                s = self.m.stats(timeout=30)
                r = lib.stoker("stat", self.m.mnt, "--json", timeout=30)
                json.loads(r.stdout)
            except Exception as e:  # noqa: BLE001 - recorded as a failure
                self.tally.fail(f"stat/stats.json stopped answering: {e}")
                return
            st = os.statvfs(self.disk)
            self.samples += 1
            self.last = s
            self.max_used = max(self.max_used, s["cache_used_bytes"])
            self.max_free_low = min(self.max_free_low, st.f_bavail * st.f_frsize)
            if s["cache_used_bytes"] > size:
                self.tally.fail(f"cache_used_bytes {s['cache_used_bytes']} > disk size {size}")
                return
            self.stop.wait(0.2)

    def summary(self):
        s = self.last
        return (f"{self.samples} samples, max cache_used_bytes {self.max_used // MIB} MiB, "
                f"lowest free {self.max_free_low // MIB} MiB, errors={s.get('errors')}, "
                f"origin_bytes_read={s.get('origin_bytes_read', 0) // MIB} MiB")

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(60)
