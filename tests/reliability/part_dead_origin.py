"""Dead origin: the origin lives on its own loop-mounted ext4; half of the
tree is read (cached), then that filesystem is shut down (EXT4_IOC_SHUTDOWN:
every access, even through descriptors the daemon already holds, fails
with EIO, as a dead disk or NAS would).

Proves: cached files are still served with correct bytes, uncached reads
fail with an error (EIO/ENOENT/ESTALE/ENOTCONN...) instead of hanging
(each under a deadline) and the daemon stays up; after the origin
filesystem comes back (an identical copy of its image mounted at the same
path), everything reads correctly again: first on the running mount; if
the daemon cannot recover by itself, that is a failed check, and a stoker
remount on the same cache must then serve everything.

Then the origin hangs instead (another stoker mount over the tree whose
daemon is stopped with SIGSTOP: every call into it waits, as calls into a
hard NFS mount whose server is gone do). Proves: once a call has stalled for
--origin-stall-timeout, 6 readers compare cached files for a while with no
error and no hang, uncached reads fail without hanging, and everything reads
right once the origin answers again."""

import errno
import os
import random
import signal
import threading
import time

import rel
from rel import ARGS, MIB, lib

READ_DEADLINE = 60  # a failing read must return; this only tells a hang


def dead_origin(tally, scratch, quick, seed):
    rng = random.Random(seed)
    odir, dev = rel.loop_ext4(scratch, "origin", 160 * MIB)
    sizes = rel.make_tree(odir / "tree", rng, 24 if quick else 60, 3 * MIB)
    rels = sorted(sizes)
    cached, uncached = rels[::2], rels[1::2]
    keep = scratch.path("expected")  # a copy to compare with once the origin is dead
    for r in rels:
        lib.write_random(keep / r, 0)
        (keep / r).write_bytes((odir / "tree" / r).read_bytes())
    os.sync()
    lib.run(["umount", str(odir)], timeout=60)
    spare = scratch.path("origin-spare.img")  # the origin that "comes back"
    spare.write_bytes(scratch.path("origin.img").read_bytes())
    rel.sh("mount", dev, str(odir))
    args = ARGS + ["--cache-size", "1G"]
    m = scratch.stoker_mount(odir / "tree", "do", args)
    rel.compare_everything(tally, keep, m.mnt, cached)
    lib.drop_caches()
    rel.shutdown_fs(odir)
    tally.add(faults=1)
    tally.say(f"origin ext4 shut down after caching {len(cached)} of {len(rels)} files")

    tally.add(cases=1)
    rel.compare_everything(tally, keep, m.mnt, cached)
    errors = uncached_reads_fail(tally, m, keep, uncached)
    tally.say(f"while dead: cached files compared; uncached reads failed with {sorted(errors)}")
    if not lib.pid_alive(m.pid):
        tally.fail("the daemon died when the origin did")
        return

    tally.add(cases=1)
    lib.run(["umount", "-l", str(odir)], timeout=30)
    dev2 = rel.sh("losetup", "-f", "--show", str(spare)).strip()
    scratch.loops.append(dev2)
    rel.sh("mount", dev2, str(odir))
    tally.say("origin filesystem back (a copy of its image) at the same path")
    lib.drop_caches()
    if recovered(m, keep, uncached):
        tally.say("the running mount recovered by itself")
    else:
        tally.fail("the running mount did not recover when the origin came back "
                   "(it keeps the dead filesystem's root descriptor); remounting stoker")
        m.unmount()
        m = scratch.stoker_mount(odir / "tree", "do", args, cache=m.cache)
    rel.compare_everything(tally, keep, m.mnt, rels)
    m.unmount()
    hung_origin(tally, scratch, quick, seed)


def hung_origin(tally, scratch, quick, seed):
    rng = random.Random(seed + 1)
    tree = scratch.path("hung-tree")
    rels = sorted(rel.make_tree(tree, rng, 24 if quick else 60, 3 * MIB))
    cached, uncached = rels[::2], rels[1::2]
    # --revalidate 0 on both: the kernel keeps no attributes of the inner
    # mount, and the outer one asks its origin at every open.
    inner = scratch.stoker_mount(tree, "hung-inner", ARGS + ["--revalidate", "0"])
    stall = 2
    outer = scratch.stoker_mount(inner.mnt, "hung-outer",
                                 ARGS + ["--revalidate", "0", "--cache-size", "1G",
                                         "--origin-stall-timeout", str(stall)])
    rel.compare_everything(tally, tree, outer.mnt, cached)
    os.kill(inner.pid, signal.SIGSTOP)
    tally.add(faults=1, cases=1)
    try:
        # A first call stalls; the readers start once it has been seen.
        first = threading.Thread(target=lambda: os.stat(outer.mnt / cached[0]), daemon=True)
        first.start()
        time.sleep(stall + 1.5)
        readers = rel.Readers(tally, tree, outer.mnt, cached, 6, seed).start()
        time.sleep(8 if quick else 40)
        stuck = readers.finish(timeout=READ_DEADLINE)
        if stuck:
            tally.add(hangs=len(stuck))
            tally.say(f"HANG: readers {stuck} of cached files stuck while the origin hung")
        errors = uncached_reads_fail(tally, outer, tree, uncached)
        tally.say(f"origin hung: 6 readers compared {readers.bytes} bytes of cached files; "
                  f"uncached reads: {sorted(errors)}")
    finally:
        os.kill(inner.pid, signal.SIGCONT)
    first.join(READ_DEADLINE)
    if first.is_alive():
        tally.add(hangs=1)
        tally.say("HANG: the stalled call did not return once the origin answered")
    tally.add(cases=1)
    if not recovered(outer, tree, uncached):
        tally.fail("uncached files did not read right once the origin answered again")
    rel.compare_everything(tally, tree, outer.mnt, rels)
    outer.unmount()
    inner.unmount()


def uncached_reads_fail(tally, m, keep, rels):
    """Reads each uncached file under a deadline; each must fail, not hang
    and not return wrong bytes (right ones: the daemon prefetched them).
    Returns the set of errno names seen."""
    seen = set()
    for r in rels:
        try:
            data = lib.with_deadline(lib.read_file, m.mnt / r, timeout=READ_DEADLINE,
                                     what=f"read {r} from a dead origin")
        except lib.Hung:
            tally.add(hangs=1)
            tally.say(f"HANG: read of uncached {r} did not return within {READ_DEADLINE}s")
            return seen
        except OSError as e:
            seen.add(errno.errorcode.get(e.errno, str(e.errno)))
            continue
        if data == (keep / r).read_bytes():
            seen.add("served: prefetched before the origin died")
        else:
            tally.mismatch(f"{r}: {len(data)} wrong bytes read while the origin was dead")
    return seen


def recovered(m, keep, rels):
    """True when the running mount reads the uncached files correctly. The
    daemon tries to reopen a dead origin at most once a second, so a read
    right after the origin came back may still fail: each file gets retries
    until READ_DEADLINE."""
    def one(r):
        deadline = time.monotonic() + READ_DEADLINE
        while True:
            try:
                return lib.read_file(m.mnt / r) == (keep / r).read_bytes()
            except OSError:
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.5)

    def go():
        return all([one(r) for r in rels])
    return lib.with_deadline(go, timeout=READ_DEADLINE * (len(rels) + 2),
                             what="reads after recovery")
