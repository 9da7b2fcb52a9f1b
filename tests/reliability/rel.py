"""Shared pieces of the reliability suite: the per-part tally, the part's
scratch space (which always cleans up its mounts, loop devices and daemons),
readers that compare every byte they read with the origin, and small
filesystem fixtures (loop-mounted ext4, tmpfs).

The integration tests' stoker_testlib is imported by path: it holds the
mount/unmount, deadline and comparison helpers both suites share.
"""

import ctypes
import ctypes.util
import errno
import fcntl
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "integration"))
import stoker_testlib as lib  # noqa: E402  (needs the path above)

MIB = lib.MIB
ARGS = ["--chunk-size", "1M"]
# For parts whose fault is a kill -9 of the daemon that must end the mount:
# without it the supervisor (on by default) would start another daemon.
UNSUPERVISED = ["--no-supervise"]


class Tally:
    """What one part tried and found; one row of the final table."""

    COLUMNS = ("cases", "faults", "bytes_compared", "mismatches", "hangs", "failures",
               "passthrough_opens")

    def __init__(self, name):
        self.name = name
        self.cases = 0
        self.faults = 0
        self.bytes_compared = 0
        self.mismatches = 0
        self.hangs = 0
        self.failures = 0
        self.passthrough_opens = 0  # opens the kernel read from the cache by itself
        self.notes = []
        self.lock = threading.Lock()

    def add(self, **kw):
        with self.lock:
            for k, v in kw.items():
                setattr(self, k, getattr(self, k) + v)

    def say(self, msg):
        """Prints what the part tried or found (and keeps it for the report)."""
        print(f"  [{self.name}] {msg}", flush=True)

    def fail(self, msg):
        """A check other than byte equality failed (wrong errno, a read that
        should have worked, usage over the disk, ...)."""
        self.add(failures=1)
        self.say("FAIL: " + msg)
        self.notes.append(msg)

    def mismatch(self, msg, n=1):
        self.add(mismatches=n)
        self.say("MISMATCH: " + msg)
        self.notes.append(msg)

    def ok(self):
        return self.mismatches == 0 and self.hangs == 0 and self.failures == 0


class Scratch:
    """A part's temporary directory. cleanup() lazily unmounts every mount
    under it (FUSE, loop, tmpfs), kills stoker daemons that name a path in
    it, detaches loop devices it set up, runs the part's finalizers (which
    stop the servers it started), and removes it."""

    def __init__(self, name):
        self.root = Path(tempfile.mkdtemp(prefix=f"stoker-rel-{name}-"))
        self.mounts = []
        self.loops = []
        self.finalizers = []  # callables, run last-in first-out; each may raise

    def path(self, *parts):
        p = self.root.joinpath(*parts)
        return p

    def stoker_mount(self, origin, name, args, cache=None):
        """Mounts stoker over origin at scratch/NAME.mnt with cache
        scratch/NAME.cache (or the given cache), adding the words of
        $STOKER_REL_MOUNT_ARGS (to bisect a finding, e.g. --no-direct-io).
        Returns the StokerMount."""
        extra = os.environ.get("STOKER_REL_MOUNT_ARGS", "").split()
        m = lib.StokerMount(origin, self.path(name + ".mnt"),
                            cache or self.path(name + ".cache"), list(args) + extra)
        self.mounts.append(m)
        m.mount()
        return m

    def cleanup(self):
        for m in reversed(self.mounts):
            m.cleanup()
        lib.cleanup_under(self.root)
        for mp, _, _ in sorted(lib.mount_table(), key=lambda e: -len(e[0])):
            if mp.startswith(str(self.root) + "/"):
                subprocess.run(["umount", "-l", mp], capture_output=True, timeout=30)
        for dev in self.loops:
            subprocess.run(["losetup", "-d", dev], capture_output=True, timeout=30)
        for fn in reversed(self.finalizers):
            try:
                fn()
            except Exception as e:  # noqa: BLE001 - the rest must still be cleaned up
                print(f"  cleanup: {fn}: {e}", flush=True)
        shutil.rmtree(self.root, ignore_errors=True)


def sh(*args, timeout=60):
    """Runs a command that must work (mkfs, mount, losetup)."""
    r = lib.run(list(args), timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(lib.describe(r))
    return r.stdout


def loop_ext4(scratch, name, size):
    """A fresh ext4 of `size` bytes, loop-mounted at scratch/NAME. Returns
    (mount point, loop device)."""
    img = scratch.path(name + ".img")
    mp = scratch.path(name)
    mp.mkdir()
    with open(img, "wb") as f:
        f.truncate(size)
    sh("mkfs.ext4", "-q", "-F", "-m", "0", str(img))
    dev = sh("losetup", "-f", "--show", str(img)).strip()
    scratch.loops.append(dev)
    sh("mount", dev, str(mp))
    return mp, dev


EXT4_IOC_SHUTDOWN = 0x8004587D  # _IOR('X', 125, __u32)
EXT4_GOING_FLAGS_NOLOGFLUSH = 2


def shutdown_fs(mount_point):
    """Makes every access to an ext4 (even through open descriptors) fail
    with EIO, as a dead disk or a lost NAS would."""
    fd = os.open(mount_point, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.ioctl(fd, EXT4_IOC_SHUTDOWN,
                    EXT4_GOING_FLAGS_NOLOGFLUSH.to_bytes(4, "little"))
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------
# Data and comparing readers


def make_tree(root, rng, n_files, max_size, big_every=5):
    """A tree of mixed sizes: empty, tiny, chunk-straddling and multi-chunk
    files, in a few sub-directories. Returns {relative path: size}."""
    sizes = {}
    for i in range(n_files):
        kind = i % big_every
        if kind == 0:
            size = rng.randrange(2 * MIB, max_size + 1)
        elif kind == 1:
            size = MIB + rng.randrange(-3, 4)
        elif kind == 2:
            size = rng.randrange(0, 200)
        else:
            size = rng.randrange(1, 600_000)
        rel = f"d{i % 4}/f{i:04d}"
        lib.write_random(Path(root) / rel, size, rng)
        sizes[rel] = size
    return sizes


def compare_file(origin_path, mount_path, bufsize=MIB, uncached=False, cut_ok=None):
    """Streams both files; returns (bytes compared, first differing offset
    or None). uncached: drop the mount file's page cache first, so that the
    reads reach the daemon. cut_ok(got, want): True when a short read is
    explained (the daemon was killed); it then raises like a failed read.
    Raises OSError from the mount side."""
    n = 0
    with open(mount_path, "rb", buffering=0) as fm, open(origin_path, "rb", buffering=0) as fo:
        if uncached:
            os.posix_fadvise(fm.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        while True:
            a, b = fm.read(bufsize), fo.read(bufsize)
            if a != b and cut_ok and cut_ok(a, b):
                raise OSError(errno.ECONNABORTED, "short read: the daemon was killed")
            if a != b:
                for i in range(min(len(a), len(b))):
                    if a[i] != b[i]:
                        return n + i, n + i
                return n + min(len(a), len(b)), n + min(len(a), len(b))
            if not a:
                return n, None
            n += len(a)


def compare_everything(tally, origin, mnt, rels, timeout=600):
    """Reads every file of rels through the mount and compares it with the
    origin under a deadline; counts bytes and mismatches in tally."""
    def go():
        for rel in rels:
            try:
                n, bad = compare_file(Path(origin) / rel, Path(mnt) / rel)
            except OSError as e:
                tally.fail(f"{rel}: read through the mount failed: {e}")
                continue
            tally.add(bytes_compared=n)
            if bad is not None:
                tally.mismatch(f"{rel}: differs from the origin at byte {bad}")
    lib.with_deadline(go, timeout=timeout, what=f"compare all under {mnt}")


class Readers:
    """Threads reading through a mount and comparing with the origin until
    stopped: half stream whole files, half do random preads. A read that
    fails after `expect_errors` is set is not a failure (the daemon was
    killed on purpose); before it, it is."""

    def __init__(self, tally, origin, mnt, rels, n_threads, seed):
        self.tally, self.origin, self.mnt = tally, Path(origin), Path(mnt)
        self.rels = list(rels)
        self.stop = threading.Event()
        self.expect_errors = threading.Event()
        self.bytes = 0
        self.threads = [threading.Thread(target=self._run, args=(i, seed), daemon=True,
                                         name=f"reader{i}") for i in range(n_threads)]

    def start(self):
        for t in self.threads:
            t.start()
        return self

    def _run(self, i, seed):
        rng = random.Random(seed * 1000 + i)
        while not self.stop.is_set():
            rel = rng.choice(self.rels)
            try:
                if i % 2 == 0:
                    n, bad = compare_file(self.origin / rel, self.mnt / rel, uncached=True,
                                          cut_ok=self._cut_by_kill)
                    where = f"stream {rel} at byte {bad}"
                else:
                    n, bad = self._preads(rel, rng)
                    where = f"pread {rel} {bad}"
            except OSError as e:
                if not self.expect_errors.is_set():
                    self.tally.fail(f"reader {i}: {rel}: {e}")
                return
            self.tally.add(bytes_compared=n)
            with self.tally.lock:
                self.bytes += n
            if bad is not None:
                self.tally.mismatch(where)

    def _preads(self, rel, rng, count=8):
        fo = os.open(self.origin / rel, os.O_RDONLY)
        try:
            fm = os.open(self.mnt / rel, os.O_RDONLY)
            try:
                size = os.fstat(fo).st_size
                total = 0
                for _ in range(count):
                    off = rng.randrange(0, size + 2)
                    length = rng.randrange(1, 2 * MIB)
                    got = os.pread(fm, length, off)
                    want = os.pread(fo, length, off)
                    if got != want and self._cut_by_kill(got, want):
                        raise OSError(errno.ECONNABORTED, "short read: the daemon was killed")
                    total += len(want)
                    if got != want:
                        return total, f"(off={off}, len={length}: got {len(got)} bytes, want {len(want)})"
                return total, None
            finally:
                os.close(fm)
        finally:
            os.close(fo)

    def _cut_by_kill(self, got, want):
        """A read split into several FUSE requests returns the bytes of the
        ones done before the daemon died: a right prefix is not a mismatch
        once the kill is under way."""
        return self.expect_errors.is_set() and len(got) < len(want) and want.startswith(got)

    def finish(self, timeout=60):
        """Stops the threads; returns the names of those still stuck."""
        self.stop.set()
        stuck = []
        for t in self.threads:
            t.join(timeout)
            if t.is_alive():
                stuck.append(t.name)
        return stuck


def count_passthrough(tally, m):
    """Adds the opens m's daemon passed through to the kernel so far (docs/passthrough.md): call it
    before the daemon is killed or unmounted, as its counters go with it."""
    try:
        tally.add(passthrough_opens=m.stats(timeout=10).get("passthrough_opens", 0))
    except (OSError, AssertionError, lib.Hung):
        pass


def kill_under_readers(tally, m, origin, rels, seed, rng, max_delay, before_kill=None,
                       what="kill -9"):
    """6 comparing readers over rels; after a random delay (up to
    max_delay s) before_kill() if given, then SIGKILL of m's daemon (mounted
    with UNSUPERVISED); checks
    every reader returns (else a hang). Returns the delay."""
    readers = Readers(tally, origin, m.mnt, rels, 6, seed=seed).start()
    delay = rng.uniform(0.1, max_delay)
    threading.Event().wait(delay)
    readers.expect_errors.set()
    count_passthrough(tally, m)
    if before_kill:
        before_kill()
    os.kill(m.pid, signal.SIGKILL)
    lib.wait_until(lambda: not lib.pid_alive(m.pid), 30, what=f"daemon death after {what}")
    tally.add(faults=1)
    stuck = readers.finish(timeout=60)
    if stuck:
        tally.add(hangs=1)
        tally.say(f"HANG: readers {stuck} still blocked 60s after {what}")
    return delay


def fsck_json(cache):
    """Runs `stoker fsck --json`; returns (rc, report dict or None, stderr)."""
    import json
    r = lib.fsck(cache, "--json")
    try:
        rep = json.loads(r.stdout) if r.stdout.strip() else None
    except ValueError:
        rep = None
    return r.returncode, rep, r.stderr.strip()


def fsck_after_fault(tally, cache, cycle):
    """fsck of a cache a fault left (a kill, a power cut): it must be
    checkable (exit 0 or 1), and problems are repaired. Returns (rc, report,
    whether --repair ran)."""
    rc, rep, err = fsck_json(cache)
    if rc not in (0, 1):
        tally.fail(f"cycle {cycle}: fsck could not check the cache (rc={rc}): {err}")
    elif rc == 1:
        r = lib.fsck(cache, "--repair")
        if r.returncode not in (0, 1):
            tally.fail(f"cycle {cycle}: fsck --repair rc={r.returncode}: {r.stderr.strip()}")
    return rc, rep, rc == 1


def findings(rep):
    """The non-zero problem counters of an fsck report, as a short string."""
    if not rep:
        return "no report"
    keys = ("index_damage", "index_repair", "bad_checksums", "missing_data", "orphan_files",
            "pending_writes", "bad_records", "usage_mismatch")
    got = [f"{k}={rep[k]}" for k in keys if rep.get(k)]
    return ", ".join(got) or "clean"


def vm_hwm_kib(pid):
    """Peak resident set size of a process (VmHWM), in KiB, or 0."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
