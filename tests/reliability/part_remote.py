"""Remote origins: the same faults as the local parts, over an nginx-served
HTTP origin and a moto S3 origin (tests/integration/remote_servers.py, on
loopback, each our child). Each origin gets a tree of its own:

- w/  mixed sizes, read by comparing readers (streams + random preads)
      while the daemon is killed -9 (2 / 5 cycles); then fsck of what the
      kill left (repaired if it finds anything), a remount on the same
      cache and a full comparison of w/ with the origin's bytes.
- k/, s/  never read before their fault: the server is killed -9 (k/) or
      stopped with SIGSTOP (s/) while readers stream w/ (cached) and k/ or
      s/ (not cached). Cached reads must go on with the right bytes;
      uncached reads must fail with EIO (or return the right bytes, if they
      were fetched before the fault), each under a hang deadline; after the
      server is back (restarted, or SIGCONT) every file reads correctly.
- v/  replaced on the server while 4 readers read them whole, one open at
      a time (HTTP: write a temp file + rename, with a new mtime, hence a
      new ETag; S3: PutObject). Version k of a file is its base bytes XOR
      k, so an open that returns bytes of two versions (or of none) is a
      mismatch; ESTALE is the documented answer for an open file whose
      object changed. After the last replacement new opens must see the
      last version.

The v/ phase mounts with --revalidate 0 (a check on every open); the others
keep the default (60 s): with 0 and a stopped server, uncached reads took
12 s instead of 8, the stopped-server case took 220-260 s instead of 25,
and a reader of cached files (8 preads in one open) was still blocked 60 s
after it was told to stop: opens, and it seems reads, of cached data wait
for the origin's timeouts (not explained yet: perhaps the kernel asking
for attributes again before reads, each a revalidation). A moto restarted after a kill gets its objects back at once
(moto_prefilled.py) but with a new Last-Modified, which is a new version
to the cache. Timeouts are short
(--origin-stall-timeout/--origin-connect-timeout 2, --origin-retries 1) so
that EIO comes fast; the deadlines here only tell a hang from a slow error.
"""

import errno
import os
import random
import signal
import threading
import time

import rel
from part_concurrency import XOR, classify
from rel import ARGS, MIB, lib

import remote_servers as rs

READ_DEADLINE = 60  # a failing read must return; this only tells a hang
MOUNT_ARGS = ARGS + ["--cache-size", "1G", "--origin-stall-timeout", "2",
                     "--origin-connect-timeout", "2", "--origin-retries", "1"]
BUCKET = "stoker-rel"
PREFIX = "data"


def remote(tally, scratch, quick, seed):
    kinds = []
    if rs.have_nginx():
        kinds.append(HttpOrigin)
    else:
        tally.fail("nginx is not installed: the HTTP origin was not tried")
    if rs.have_moto():
        kinds.append(S3Origin)
    else:
        tally.fail("moto/boto3 are not installed: the S3 origin was not tried")
    for i, kind in enumerate(kinds):
        rng = random.Random(seed * 10 + i)
        origin = kind(scratch, make_files(rng, quick))
        scratch.finalizers.append(origin.stop)  # even when the watchdog gives up on the part
        with rs.aws_env("AKIASTOKERREL", "rel-secret-not-shown"):
            origin.start()
            try:
                one_origin(tally, scratch, origin, quick, rng)
            finally:
                origin.stop()


def one_origin(tally, scratch, o, quick, rng):
    w = sorted(r for r in o.files if r.startswith("w/"))
    tally.say(f"{o.kind}: {len(o.files)} files, {sum(map(len, o.files.values())) // MIB} MiB "
              f"at {o.url}")
    m = scratch.stoker_mount(o.url, o.kind, MOUNT_ARGS + o.args() + rel.UNSUPERVISED)
    for cycle in range(1, (2 if quick else 5) + 1):
        daemon_killed(tally, o, m, w, rng, cycle)
    for how in ("kill", "stop"):
        cold = sorted(r for r in o.files if r.startswith(how[0] + "/"))
        server_fault(tally, o, m, w, cold, how, rng)
    # Revalidation on every open from here on, on the same cache.
    m.unmount()
    m = scratch.stoker_mount(o.url, o.kind + "-rv", MOUNT_ARGS + o.args() + ["--revalidate", "0"],
                             cache=m.cache)
    objects_replaced(tally, o, m, sorted(r for r in o.files if r.startswith("v/")), quick, rng)
    m.unmount()
    rc, rep, err = rel.fsck_json(m.cache)
    if rc != 0:
        tally.fail(f"{o.kind}: fsck after a clean unmount: rc={rc} {rel.findings(rep)} {err}")


def make_files(rng, quick):
    """{relative path: bytes}: w/ of mixed sizes, k/ and s/ of a few
    multi-chunk files, v/ of a few files (version 0)."""
    out = {}
    n_w = 16 if quick else 48
    for i in range(n_w):
        size = [rng.randrange(2 * MIB, 5 * MIB), MIB + rng.randrange(-3, 4),
                rng.randrange(0, 200), rng.randrange(1, 600_000)][i % 4]
        out[f"w/d{i % 3}/f{i:03d}"] = rng.randbytes(size)
    for d in ("k", "s"):
        for i in range(6 if quick else 12):
            # a/ is read across the fault, b/ only after it: two directories,
            # so that reading a/ in order does not prefetch b/.
            out[f"{d}/{'ab'[i % 2]}/f{i:02d}"] = rng.randbytes(rng.randrange(MIB, 4 * MIB))
    for i in range(4 if quick else 8):
        out[f"v/f{i}"] = rng.randbytes(rng.choice([rng.randrange(1, 300_000),
                                                   rng.randrange(2 * MIB, 4 * MIB)]))
    return out


# ---------------------------------------------------------------------------
# The two origins: the same interface over nginx and moto. `root` is a local
# directory holding the bytes the origin serves (for HTTP it is what nginx
# serves; for S3 a copy), which the comparing readers read.


class HttpOrigin:
    kind = "http"

    def __init__(self, scratch, files):
        self.files = files
        self.root = scratch.path("http-root")
        for r, data in files.items():
            write_atomically(self.root / r, data)
        self.server = rs.Nginx(self.root, scratch.path("nginx"))
        self.stamp = int(time.time()) + 10  # newer than the files' first mtime

    @property
    def url(self):
        return f"{self.server.url}/json/"

    def args(self):
        return []

    def start(self):
        self.server.start()

    def restart(self):
        """After a kill: the files are on disk, nothing to put again."""
        self.server.start()

    def replace(self, r, data):
        """A new version of r: a temp file, a new mtime (nginx's ETag is
        mtime + size, and the sizes stay the same), rename over the old."""
        self.stamp += 2
        write_atomically(self.root / r, data, mtime=self.stamp)
        self.files[r] = data

    def stop(self):
        self.server.stop()


class S3Origin:
    kind = "s3"

    def __init__(self, scratch, files):
        self.files = files
        self.root = scratch.path("s3-copy")
        for r, data in files.items():
            write_atomically(self.root / r, data)
        # Back after a kill with every object it held (the copy under root),
        # as S3 would be: no window in which it answers 404 for them.
        self.server = rs.PrefilledMoto(scratch.path("moto"), BUCKET, PREFIX, 0,
                                       from_dir=self.root)
        self.client = None

    @property
    def url(self):
        return f"s3://{BUCKET}/{PREFIX}"

    def args(self):
        return ["--s3-endpoint", self.server.endpoint]

    def start(self):
        self.server.start()
        self.client = self.server.client()

    restart = start

    def replace(self, r, data):
        self.client.put_object(Bucket=BUCKET, Key=f"{PREFIX}/{r}", Body=data)
        write_atomically(self.root / r, data)
        self.files[r] = data

    def stop(self):
        self.server.stop()


def write_atomically(path, data, mtime=None):
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".tmp-{path.name}"
    tmp.write_bytes(data)
    if mtime is not None:
        os.utime(tmp, (mtime, mtime))
    os.rename(tmp, path)


# ---------------------------------------------------------------------------
# Faults


def daemon_killed(tally, o, m, rels, rng, cycle):
    """6 comparing readers over rels, kill -9 of the daemon at a random
    moment, fsck, remount on the same cache, full comparison."""
    tally.add(cases=1)
    delay = rel.kill_under_readers(tally, m, o.root, rels, cycle, rng, 2.0)
    rc, rep, repaired = rel.fsck_after_fault(tally, m.cache, f"{o.kind} {cycle}")
    m.mount()  # the same command on the same mountpoint, which the kill left stale
    before = tally.bytes_compared
    rel.compare_everything(tally, o.root, m.mnt, rels)
    tally.say(f"{o.kind} cycle {cycle}: daemon killed after {delay:.2f}s of reads; fsck rc={rc} "
              f"({rel.findings(rep)}{', repaired' if repaired else ''}); remount compared "
              f"{tally.bytes_compared - before} bytes")


def server_fault(tally, o, m, warm, cold, how, rng):
    """The server killed -9 (how="kill") or stopped (SIGSTOP) while readers
    stream warm (cached) files and cold/a/ ones; then each file of cold/b/,
    never read before, is read once while the server is down; then the
    server comes back and everything must read correctly."""
    t0 = time.monotonic()
    tally.add(cases=1)
    cold_a = [r for r in cold if r.split("/")[1] == "a"]
    cold_b = [r for r in cold if r.split("/")[1] == "b"]
    warm_readers = rel.Readers(tally, o.root, m.mnt, warm, 2, seed=rng.randrange(1 << 30)).start()
    cold_readers = rel.Readers(tally, o.root, m.mnt, cold_a, 2, seed=rng.randrange(1 << 30))
    cold_readers.expect_errors.set()  # they end at their first error: the fault is coming
    cold_readers.start()
    time.sleep(rng.uniform(0.05, 0.5))
    pid = o.server.proc.pid
    before = warm_readers.bytes
    os.killpg(pid, signal.SIGKILL if how == "kill" else signal.SIGSTOP)
    if how == "kill":
        o.server.proc.wait(timeout=30)
    tally.add(faults=1)
    try:
        seen, secs = uncached_reads_fail(tally, o, m, cold_b)
        # The cached files are read (and compared) by the readers all along
        # (any error of theirs is a failure), and two of them once more
        # here, whole.
        sample = rng.sample(warm, min(2, len(warm)))
        lib.drop_caches([m.mnt / r for r in sample], system=False)  # served by the daemon
        rel.compare_everything(tally, o.root, m.mnt, sample, timeout=READ_DEADLINE * len(sample))
        # Stopped while the server is still down: a reader holding a file
        # open across a moto restart would rightly get ESTALE (a restarted
        # moto gives its objects a new Last-Modified: a new version).
        stuck = warm_readers.finish(timeout=READ_DEADLINE) + cold_readers.finish(READ_DEADLINE)
        tally.say(f"{o.kind}: server {'killed' if how == 'kill' else 'stopped'}: uncached reads "
                  f"answered {sorted(seen)} after {secs} s; cached files compared while it "
                  f"was down (their readers: {warm_readers.bytes - before} bytes) "
                  f"[{time.monotonic() - t0:.0f}s]")
    finally:
        if how == "kill":
            o.restart()
        else:
            os.killpg(pid, signal.SIGCONT)
    if stuck:
        tally.add(hangs=1)
        tally.say(f"HANG: {o.kind}: readers {stuck} still blocked {READ_DEADLINE}s after they "
                  f"were told to stop")
    if not recovered(o, m, cold):
        tally.fail(f"{o.kind}: uncached files did not read correctly within {READ_DEADLINE}s of "
                   f"the server coming back after {how}")
    rel.compare_everything(tally, o.root, m.mnt, warm + cold)
    tally.say(f"{o.kind}: after the server came back all compared [{time.monotonic() - t0:.0f}s]")


def uncached_reads_fail(tally, o, m, rels):
    """Reads the first 64 KiB of each file once, under a deadline, while
    the server is down: EIO, or the right bytes (fetched ahead before the
    fault). Returns (what was seen, the seconds each read took)."""
    seen, secs = set(), []
    for r in rels:
        t = time.monotonic()
        try:
            data = lib.with_deadline(first_bytes, m.mnt / r, timeout=READ_DEADLINE,
                                     what=f"read {r} from a dead server")
        except lib.Hung:
            tally.add(hangs=1)
            tally.say(f"HANG: {o.kind}: read of uncached {r} did not return within "
                      f"{READ_DEADLINE}s")
            return seen
        except OSError as e:
            name = errno.errorcode.get(e.errno, str(e.errno))
            seen.add(name)
            if e.errno != errno.EIO:
                tally.fail(f"{o.kind}: uncached {r} with the server down: {name}, not EIO")
            continue
        finally:
            secs.append(round(time.monotonic() - t, 1))
        tally.add(bytes_compared=len(data))
        if data == o.files[r][:len(data)] and len(data) == min(len(o.files[r]), 65536):
            seen.add("served: fetched before the fault")
        else:
            tally.mismatch(f"{o.kind}: {r}: {len(data)} wrong bytes read while the server was down")
    return seen, secs


def first_bytes(path, n=65536):
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.pread(fd, n, 0)
    finally:
        os.close(fd)


def recovered(o, m, rels):
    """True once every file of rels reads correctly; a read may fail for a
    while after the server is back (a connection given up, a retry pause),
    so each gets retries until READ_DEADLINE."""
    def one(r):
        deadline = time.monotonic() + READ_DEADLINE
        while True:
            try:
                return lib.read_file(m.mnt / r) == o.files[r]
            except OSError:
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.5)
    return lib.with_deadline(lambda: all([one(r) for r in rels]),
                             timeout=READ_DEADLINE * (len(rels) + 2), what="reads after recovery")


def objects_replaced(tally, o, m, rels, quick, rng):
    """A writer replaces files of rels with their next version while 4
    readers read them whole; every open must return one version (or
    ESTALE); after the writer stops new opens see the last version."""
    tally.add(cases=1)
    bases = {r: o.files[r] for r in rels}
    latest = {r: 0 for r in rels}
    stop = threading.Event()
    counts = {"opens": 0, "ESTALE": 0}

    def reader(i):
        rr = random.Random(i)
        while not stop.is_set():
            r = rr.choice(rels)
            try:
                k = read_one_version(tally, o, m.mnt / r, bases[r])
            except OSError as e:
                tally.fail(f"{o.kind}: read {r} while it is replaced: {e}")
                return
            with tally.lock:
                counts["opens"] += 1
                counts["ESTALE"] += k == "ESTALE"
            if isinstance(k, int) and k > latest[r]:
                tally.mismatch(f"{o.kind}: {r}: version {k} read before it was written")

    threads = [threading.Thread(target=reader, args=(i,), daemon=True, name=f"vreader{i}")
               for i in range(4)]
    for t in threads:
        t.start()
    replacements = 8 if quick else 40
    try:
        for _ in range(replacements):
            time.sleep(rng.uniform(0.05, 0.4))
            r = rng.choice(rels)
            k = latest[r] + 1
            latest[r] = k  # first: a reader may see it as soon as it is put
            o.replace(r, bases[r].translate(XOR[k]))
            tally.add(faults=1)
    finally:
        stop.set()
    for t in threads:
        t.join(READ_DEADLINE)
    stuck = [t.name for t in threads if t.is_alive()]
    if stuck:
        tally.add(hangs=1)
        tally.say(f"HANG: {o.kind}: readers {stuck} still blocked after the last replacement")
    stale = []
    for r in rels:
        if not lib.with_deadline(sees_version, tally, o, m.mnt / r, bases[r], latest[r],
                                 timeout=READ_DEADLINE + 30, what=f"new opens of {r}"):
            stale.append(r)
    if stale:
        tally.fail(f"{o.kind}: new opens of {stale} still see an old version "
                   f"{READ_DEADLINE}s after the last replacement")
    tally.say(f"{o.kind}: {replacements} replacements under {counts['opens']} whole-file opens "
              f"({counts['ESTALE']} ESTALE); versions at the end {sorted(latest.values())}")


def read_one_version(tally, o, path, base):
    """Reads path whole through one descriptor (past the page cache).
    Returns the version k its bytes belong to, "ESTALE" when the file was
    replaced under the descriptor (or during the open), or None after
    counting a mismatch (bytes of no version, or of several)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as e:
        # The kernel retries an open that finds the file changed once; a
        # file replaced again during that retry fails the open (the
        # semantics doc says so).
        if e.errno == errno.ESTALE:
            return "ESTALE"
        raise
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        parts, off = [], 0
        while True:
            try:
                b = os.pread(fd, MIB, off)
            except OSError as e:
                if e.errno == errno.ESTALE:
                    return "ESTALE"
                raise
            if not b:
                break
            parts.append(b)
            off += len(b)
    finally:
        os.close(fd)
    data = b"".join(parts)
    tally.add(bytes_compared=len(data))
    if len(data) != len(base):
        tally.mismatch(f"{o.kind}: {path.name}: {len(data)} bytes, every version has {len(base)}")
        return None
    k = data[0] ^ base[0] if data else 0
    if data != base.translate(XOR[k]):
        tally.mismatch(f"{o.kind}: {path.name}: {classify(base, 0, data)}")
        return None
    return k


def sees_version(tally, o, path, base, want):
    """New opens of path return version `want`, retried (an older version
    is allowed for a while) until READ_DEADLINE."""
    deadline = time.monotonic() + READ_DEADLINE
    while True:
        k = read_one_version(tally, o, path, base)
        if k == want:
            return True
        if time.monotonic() > deadline:
            tally.say(f"{o.kind}: {path.name}: new opens still return {k}, not version {want}")
            return False
        time.sleep(0.2)
