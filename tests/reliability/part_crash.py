"""Crash loop: kill -9 of the daemon at a random moment of heavy concurrent
reads (streams + random preads, every byte compared with the origin) over a
tree twice the cache size (so fetches, chunk writes and eviction are under
way when the kill lands), then fsck of what the crash left, a remount on
the same cache (which clears the stale mount) and a full comparison of the
tree against the origin.

Proves: no crash point makes the cache serve a wrong byte afterwards, fsck
can always check a crashed cache (exit 0/1, never 2), and a remount on a
stale mountpoint works."""

import os
import random
import signal
import time

import rel
from rel import ARGS, MIB, lib


def crash(tally, scratch, quick, seed):
    cycles = 5 if quick else 50
    rng = random.Random(seed)
    origin = scratch.path("origin")
    sizes = rel.make_tree(origin, rng, 40 if quick else 120, 6 * MIB)
    rels = sorted(sizes)
    # A cache smaller than the tree: every cycle fetches, writes and evicts,
    # so the kill lands in those paths, not only in cache hits.
    capacity = sum(sizes.values()) // 2 // MIB * MIB
    tally.say(f"{cycles} cycles over {len(rels)} files, {sum(sizes.values()) // MIB} MiB, "
              f"--cache-size {capacity // MIB} MiB")
    args = ARGS + ["--cache-size", str(capacity)]
    m = scratch.stoker_mount(origin, "c", args)
    repairs = 0
    for cycle in range(1, cycles + 1):
        tally.add(cases=1)
        killed_after = kill_during_reads(tally, m, origin, rels, rng, cycle)
        rc, rep, err = rel.fsck_json(m.cache)
        if rc not in (0, 1):
            tally.fail(f"cycle {cycle}: fsck could not check the crashed cache (rc={rc}): {err}")
        elif rc == 1:
            r = lib.fsck(m.cache, "--repair")
            repairs += 1
            if r.returncode not in (0, 1):
                tally.fail(f"cycle {cycle}: fsck --repair rc={r.returncode}: {r.stderr.strip()}")
        m = scratch.stoker_mount(origin, "c", args, cache=m.cache)
        before = tally.bytes_compared
        rel.compare_everything(tally, origin, m.mnt, rels)
        tally.say(f"cycle {cycle}: killed after {killed_after:.2f}s of reads; fsck rc={rc} "
                  f"({rel.findings(rep)}); remount compared {tally.bytes_compared - before} bytes")
    s = m.stats()
    tally.say(f"fsck repairs run: {repairs}; last mount: cache_hit_bytes={s['cache_hit_bytes']}, "
              f"evicted_bytes={s['evicted_bytes']}, checksum_failures={s['checksum_failures']}, "
              f"errors={s['errors']}")
    m.unmount()
    rc, rep, err = rel.fsck_json(m.cache)
    if rc == 1:
        lib.fsck(m.cache, "--repair")
        rc, rep, err = rel.fsck_json(m.cache)
    if rc != 0:
        tally.fail(f"final fsck after a clean unmount (+repair) not clean: rc={rc} {rel.findings(rep)} {err}")


def kill_during_reads(tally, m, origin, rels, rng, cycle):
    """Starts 6 comparing readers, SIGKILLs the daemon after a random delay,
    checks every reader returns. Returns the delay."""
    readers = rel.Readers(tally, origin, m.mnt, rels, 6, seed=cycle).start()
    delay = rng.uniform(0.05, 3.0)
    time.sleep(delay)
    readers.expect_errors.set()
    os.kill(m.pid, signal.SIGKILL)
    lib.wait_until(lambda: not lib.pid_alive(m.pid), 30, what="daemon death after kill -9")
    tally.add(faults=1)
    stuck = readers.finish(timeout=60)
    if stuck:
        tally.add(hangs=1)
        tally.say(f"HANG: readers {stuck} still blocked 60s after kill -9")
    return delay
