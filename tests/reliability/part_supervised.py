"""Supervised crash loop (--supervise): the daemon is killed with -9 at random
moments of heavy reads, raw and decoded, and the mount is never lost. Readers
that opened their files before a kill read on after it, every read must
succeed and every byte match (no error is expected at any point), and the
supervisor must report one restart per kill. Then a clean unmount and fsck.

Proves: a daemon crash costs readers a pause, not an error (the kernel's
node ids, open file and directory handles and the requests taken by the
killed daemon all carry over to the next one)."""

import os
import random
import signal
import time

import rel
from part_crash import VIEW, dataset
from rel import MIB, lib

# The supervisor gives up after 5 restarts within 10 s: kills stay further apart.
MIN_GAP = 2.2


class OpenFileReaders(rel.Readers):
    """Threads that each open a file, then read it to the end in random-size
    steps, comparing with the reference, and start over with another file.
    A file stays open across however many kills happen meanwhile. No error
    is expected: any is a failure."""

    def __init__(self, tally, origin, mnt, rels, n_threads, seed):
        super().__init__(tally, origin, mnt, rels, n_threads, seed)
        self.files = 0

    def _run(self, i, seed):
        rng = random.Random(seed * 100 + i)
        while not self.stop.is_set():
            r = rng.choice(self.rels)
            try:
                with open(self.mnt / r, "rb", buffering=0) as fm, \
                        open(self.origin / r, "rb", buffering=0) as fo:
                    os.posix_fadvise(fm.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
                    off = 0
                    while True:
                        n = rng.choice((4096, 65536, 256 * 1024, MIB + 17))
                        a, b = fm.read(n), fo.read(n)
                        if a != b:
                            self.tally.mismatch(f"open reader: {r} at byte {off}")
                            break
                        if not a:
                            break
                        off += len(a)
                        self.tally.add(bytes_compared=len(a))
                        time.sleep(rng.uniform(0, 0.02))
                with self.tally.lock:
                    self.files += 1
            except OSError as e:
                self.tally.fail(f"open reader: {r}: {e}")
                return


def supervised(tally, scratch, quick, seed):
    kills = 5 if quick else 40
    rng = random.Random(seed)
    origin, rels, view_ref, view_rels, args, what = dataset(scratch, rng, 30 if quick else 100,
                                                            2 if quick else 6)
    tally.say(f"{kills} kills over {what}; --supervise")
    m = scratch.stoker_mount(origin, "s", args + ["--supervise"])
    supervisor = m.stats()["supervisor"]["pid"]
    view_mnt = m.mnt / ("." + VIEW)
    readers = [rel.Readers(tally, origin, m.mnt, rels, 4, seed=seed).start(),
               rel.Readers(tally, view_ref, view_mnt, view_rels, 2, seed=seed + 1).start()]
    open_readers = [OpenFileReaders(tally, origin, m.mnt, rels, 4, seed).start(),
                    OpenFileReaders(tally, view_ref, view_mnt, view_rels, 2, seed + 1).start()]
    pid = m.pid
    last = time.monotonic()
    for k in range(1, kills + 1):
        tally.add(cases=1)
        time.sleep(max(0.0, MIN_GAP - (time.monotonic() - last)) + rng.uniform(0.05, 1.5))
        rel.count_passthrough(tally, m)
        os.kill(pid, signal.SIGKILL)
        last = time.monotonic()
        tally.add(faults=1)
        lib.wait_until(lambda: not lib.pid_alive(pid), 30, what="daemon death after kill -9")

        def next_daemon():
            s = lib.with_deadline(m.stats, what="stats after a kill")
            return s if s["pid"] != pid else None
        s = lib.wait_until(next_daemon, 60, what="a new daemon after kill -9")
        if s["supervisor"]["pid"] != supervisor or s["supervisor"]["restarts"] != k:
            tally.fail(f"kill {k}: supervisor {s['supervisor']} (expected pid {supervisor}, "
                       f"{k} restarts)")
        pid = m.pid = s["pid"]
    stuck = [n for r in readers for n in r.finish(timeout=120)]
    stuck += [n for r in open_readers for n in r.finish(timeout=120)]
    if stuck:
        tally.add(hangs=1)
        tally.say(f"HANG: readers {stuck} still blocked 120s after the last kill")
    files = sum(r.files for r in open_readers)
    before = tally.bytes_compared
    rel.compare_everything(tally, origin, m.mnt, rels)
    rel.compare_everything(tally, view_ref, view_mnt, view_rels)
    s = m.stats()
    tally.say(f"{files} files read whole through open handles across the kills; final "
              f"comparison {tally.bytes_compared - before} bytes; restarts="
              f"{s['supervisor']['restarts']}, errors={s['errors']}, "
              f"checksum_failures={s['checksum_failures']}")
    rel.count_passthrough(tally, m)
    m.unmount()
    lib.wait_until(lambda: not lib.pid_alive(supervisor), lib.EXIT_TIMEOUT,
                   what="supervisor exit after unmount")
    rc, rep, err = rel.fsck_json(m.cache)
    if rc == 1:
        # A kill can leave what fsck repairs (writes in flight); not a failure.
        tally.say(f"fsck after the loop: {rel.findings(rep)}; repairing")
        lib.fsck(m.cache, "--repair")
        rc, rep, err = rel.fsck_json(m.cache)
    if rc != 0:
        tally.fail(f"fsck after the loop not clean: rc={rc} {rel.findings(rep)} {err}")
