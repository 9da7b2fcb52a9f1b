"""Helpers for stoker's integration tests: running the CLI with deadlines,
mounting and always unmounting, reading through a mount without hanging,
building origin trees and comparing them with what the mount shows.

Every call that can block on a FUSE mount (a subprocess, a read, a stat, a
readdir) runs under a deadline: a hung daemon fails the test, never hangs CI.
"""

import errno
import hashlib
import json
import os
import random
import signal
import stat
import subprocess
import threading
import time
import zlib
from pathlib import Path

from fanotify_guard import OriginReadGuard

__all__ = ["OriginReadGuard"]  # re-exported: tests use lib.OriginReadGuard

REPO = Path(__file__).resolve().parents[2]
STOKER_BIN = os.path.abspath(os.environ.get("STOKER_BIN", str(REPO / "build" / "stoker")))

MIB = 1 << 20
GIB = 1 << 30
CHUNK = MIB  # every mount in this suite passes --chunk-size 1M

CMD_TIMEOUT = 60      # one CLI call
MOUNT_TIMEOUT = 60    # `stoker mount` until it returns
IO_TIMEOUT = 180      # one batch of reads through a mount
EXIT_TIMEOUT = 30     # a daemon's exit after unmount/SIGTERM


class Hung(AssertionError):
    """A call through the mount (or a CLI call) ran past its deadline."""


# ---------------------------------------------------------------------------
# Deadlines


def with_deadline(fn, *args, timeout=IO_TIMEOUT, what=None, **kwargs):
    """Runs fn in a daemon thread; raises Hung if it is not done in time.

    A thread stuck in a FUSE request cannot be killed, but it is a daemon
    thread: teardown's lazy unmount + kill of the daemon aborts the request,
    and the interpreter never waits for it.
    """
    box = {}

    def target():
        try:
            box["value"] = fn(*args, **kwargs)
        except BaseException as e:  # re-raised in the caller's thread
            box["error"] = e

    t = threading.Thread(target=target, daemon=True,
                         name=f"deadline:{what or getattr(fn, '__name__', fn)}")
    t.start()
    t.join(timeout)
    if t.is_alive():
        raise Hung(f"{what or getattr(fn, '__name__', fn)} did not finish "
                   f"within {timeout}s (hung mount?)")
    if "error" in box:
        raise box["error"]
    return box.get("value")


def run(args, timeout=CMD_TIMEOUT, input=None, env=None, preexec_fn=None):
    """Runs a command, captures text output. Raises Hung on timeout."""
    args = [str(a) for a in args]
    try:
        return subprocess.run(args, capture_output=True, text=True,
                              timeout=timeout, input=input, env=env,
                              errors="replace", preexec_fn=preexec_fn)
    except subprocess.TimeoutExpired as e:
        raise Hung(f"{' '.join(args)} did not finish within {timeout}s; "
                   f"stdout={e.stdout!r} stderr={e.stderr!r}") from None


def stoker(*args, timeout=CMD_TIMEOUT):
    return run([STOKER_BIN, *args], timeout=timeout)


def describe(r):
    return (f"$ {' '.join(r.args)}\nrc={r.returncode}\n"
            f"stdout: {r.stdout!r}\nstderr: {r.stderr!r}")


def wait_until(cond, timeout, interval=0.1, what="condition"):
    """Polls cond() until it is truthy; returns its value or raises Hung.
    Used for eventual states (a daemon exiting, warm finishing), never for
    speed: deadlines are generous."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise Hung(f"{what} not reached within {timeout}s")
        time.sleep(interval)


# ---------------------------------------------------------------------------
# Mount table and processes


def _unescape_mountinfo(s):
    out, i = [], 0
    while i < len(s):
        if s[i] == "\\" and i + 3 < len(s) and s[i + 1:i + 4].isdigit():
            out.append(chr(int(s[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(s[i])
            i += 1
    return "".join(out)


def mount_table():
    """[(mount_point, fstype, options)] from /proc/self/mountinfo."""
    entries = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields = left.split()
            rfields = right.split()
            if len(fields) < 6 or len(rfields) < 1:
                continue
            opts = fields[5] + "," + (rfields[2] if len(rfields) > 2 else "")
            entries.append((_unescape_mountinfo(fields[4]), rfields[0], opts))
    return entries


def mount_entry(path):
    path = str(path)
    found = None
    for mp, fstype, opts in mount_table():
        if mp == path:
            found = (mp, fstype, opts)
    return found


def is_mounted(path):
    return mount_entry(path) is not None


def mounts_under(root):
    root = str(root).rstrip("/")
    return [mp for mp, _, _ in mount_table()
            if mp == root or mp.startswith(root + "/")]


def _stat_alive(path):
    try:
        with open(path) as f:
            data = f.read()
    except OSError:
        return False
    return data.rpartition(")")[2].split()[0] not in ("Z", "X")


def stop_process(pid, timeout=30):
    """SIGSTOP, then waits until every thread of pid is stopped. kill(2)
    returns before they are: a thread woken from read(/dev/fuse) by the
    signal takes a request that arrived meanwhile before it stops, and a
    request taken by a stopped daemon is never answered, not even to a
    killed reader (the kernel waits for it uninterruptibly)."""
    os.kill(pid, signal.SIGSTOP)

    def all_stopped():
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            return True
        for t in tasks:
            try:
                with open(f"/proc/{pid}/task/{t}/stat") as f:
                    state = f.read().rpartition(")")[2].split()[0]
            except OSError:
                continue
            if state not in ("T", "t", "Z", "X"):
                return False
        return True

    wait_until(all_stopped, timeout, interval=0.01, what=f"every thread of {pid} stopped")


def pid_alive(pid):
    """True while any thread of pid has not exited. A killed daemon's main
    thread may be a zombie while its other threads still exit, holding the
    process's files (the cache dir's lock) until the last one has."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return _stat_alive(f"/proc/{pid}/stat")
    return any(_stat_alive(f"/proc/{pid}/task/{t}/stat") for t in tasks)


def daemon_pids_for(path):
    """Pids of stoker processes whose command line names `path` (a unique
    tmp path, so only processes this suite started)."""
    path = str(path)
    bin_name = os.path.basename(STOKER_BIN)
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        argv = [a.decode(errors="replace") for a in argv if a]
        if not argv or os.path.basename(argv[0]) != bin_name:
            continue
        if any(a == path or a.startswith(path + "/") for a in argv[1:]):
            if pid_alive(int(d)):
                pids.append(int(d))
    return pids


def lazy_unmount(path):
    r = run(["fusermount3", "-u", "-z", path], timeout=15)
    if r.returncode != 0 and is_mounted(path):
        run(["umount", "-l", path], timeout=15)


def kill_and_reap(pid, grace=5.0):
    if not pid_alive(pid):
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if pid_alive(pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def cleanup_under(root):
    """Lazily unmounts everything under root and kills stoker daemons that
    name a path under root. Returns the mount points it found."""
    found = mounts_under(root)
    for mp in sorted(found, key=len, reverse=True):
        lazy_unmount(mp)
    for pid in daemon_pids_for(root):
        kill_and_reap(pid)
    return found


# ---------------------------------------------------------------------------
# Page cache


def drop_caches(files=(), system=True):
    """Makes the next reads reach the daemon: drop the kernel page cache
    (root), and also fadvise(DONTNEED) each given file, which works where
    /proc/sys/vm/drop_caches cannot be written (some containers).
    system=False: the files alone (a dead ext4 answers ENOENT for every name
    once its dentries are dropped, which would look like deleted files)."""
    os.sync()
    try:
        if system:
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("3\n")
    except OSError:
        pass

    def fadvise_all():
        for p in files:
            fd = os.open(p, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)

    if files:
        with_deadline(fadvise_all, what="fadvise(DONTNEED)")


class PinnedPages:
    """Holds every page of the given files in the kernel's page cache until
    close(): each file is mapped shared and mlock'ed, which reads in what is
    missing. The page cache alone keeps no page for sure: this VM's host
    takes clean pages back within seconds (a tree read and left for 4 s
    here lost some pages of about 40% of its files)."""

    def __init__(self, paths):
        import ctypes
        self._libc = ctypes.CDLL(None, use_errno=True)
        self._libc.mmap.restype = ctypes.c_void_p
        self._libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                                    ctypes.c_int, ctypes.c_int, ctypes.c_long]
        self._libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        self._libc.mlock.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        self._maps = []
        try:
            for p in paths:
                self._pin(p)
        except BaseException:
            self.close()
            raise

    def _pin(self, path):
        import ctypes
        import mmap
        fd = os.open(path, os.O_RDONLY)
        try:
            n = os.fstat(fd).st_size
            if n == 0:
                return
            addr = self._libc.mmap(None, n, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
            if addr is None or addr == ctypes.c_void_p(-1).value:
                raise OSError(ctypes.get_errno(), f"mmap {path}")
            self._maps.append((addr, n))
            if self._libc.mlock(addr, n) != 0:
                raise OSError(ctypes.get_errno(), f"mlock {path}")
        finally:
            os.close(fd)

    def close(self):
        for addr, n in self._maps:
            self._libc.munmap(addr, n)
        self._maps = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# ---------------------------------------------------------------------------
# Mounts


ALL_MOUNTS = []  # every StokerMount made in this session, for log tails


class StokerMount:
    """One `stoker mount`. mount() asserts success; cleanup() always leaves
    nothing mounted and no daemon alive."""

    def __init__(self, origin, mnt, cache, args=()):
        # A URL (s3://, http://) stays a string: Path would fold its '//'.
        self.origin = origin if "://" in str(origin) else Path(origin)
        self.mnt = Path(mnt)
        self.cache = Path(cache)
        self.args = [str(a) for a in args]
        self.pid = None
        self.proc = None  # Popen for --foreground mounts
        self.foreground_log = None
        self.created = time.monotonic()
        self.mounted_once = False
        self.nofile = None  # RLIMIT_NOFILE for the daemon, if set
        self.mnt.mkdir(parents=True, exist_ok=True)
        ALL_MOUNTS.append(self)

    # -- lifecycle ---------------------------------------------------------

    def command(self):
        return [STOKER_BIN, "mount", str(self.origin), str(self.mnt),
                "--cache", str(self.cache), *self.args]

    def foreground_command(self):
        return self.command() + ["--foreground"]

    def _limits(self):
        if self.nofile is not None:
            import resource
            resource.setrlimit(resource.RLIMIT_NOFILE, (self.nofile, self.nofile))

    def mount(self, timeout=MOUNT_TIMEOUT):
        self.created = time.monotonic()
        r = run(self.command(), timeout=timeout, preexec_fn=self._limits)
        self.mounted_once = True
        assert r.returncode == 0, "stoker mount failed\n" + describe(r)
        assert is_mounted(self.mnt), (
            "stoker mount exited 0 but nothing is mounted at "
            f"{self.mnt}\n" + describe(r))
        self.pid = int(self.stats()["pid"])
        assert pid_alive(self.pid), f"stats.json pid {self.pid} is not alive"
        return r

    def mount_foreground(self, timeout=MOUNT_TIMEOUT):
        """Starts `stoker mount --foreground` as our child; returns once the
        mount answers stats.json."""
        self.created = time.monotonic()
        self.mounted_once = True
        self.foreground_log = open(self.cache.parent / (self.cache.name + ".fg.log"), "w+")
        self.proc = subprocess.Popen(self.foreground_command(),
                                     stdout=self.foreground_log,
                                     stderr=subprocess.STDOUT)

        def live():
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"foreground daemon exited rc={self.proc.returncode}: "
                    f"{self.log_tail()}")
            if not is_mounted(self.mnt):
                return False
            try:
                return self.stats(timeout=5)
            except (OSError, ValueError, Hung):
                return False

        wait_until(live, timeout, what="foreground mount live")
        s = self.stats()
        # Our child serves, or supervises the daemon that does.
        assert self.proc.pid in (int(s["pid"]), s.get("supervisor", {}).get("pid")), s
        self.pid = int(s["pid"])
        return self.proc

    def unmount(self, timeout=CMD_TIMEOUT):
        """`stoker unmount`, asserting it worked and the daemon exited."""
        r = stoker("unmount", self.mnt, timeout=timeout)
        assert r.returncode == 0, "stoker unmount failed\n" + describe(r)
        assert not is_mounted(self.mnt), (
            "stoker unmount exited 0 but the mount is still there\n" + describe(r))
        if self.pid is not None:
            wait_until(lambda: not pid_alive(self.pid), EXIT_TIMEOUT,
                       what=f"daemon {self.pid} exit after unmount")
        if self.proc is not None:
            self.proc.wait(timeout=EXIT_TIMEOUT)
        return r

    def cleanup(self):
        """Teardown: never fails, always leaves nothing behind."""
        try:
            if is_mounted(self.mnt):
                lazy_unmount(self.mnt)
            pids = set(daemon_pids_for(self.mnt))
            if self.pid is not None and pid_alive(self.pid):
                pids.add(self.pid)
            for pid in pids:
                deadline = time.monotonic() + 5
                while pid_alive(pid) and time.monotonic() < deadline:
                    time.sleep(0.05)
                kill_and_reap(pid)
            if self.proc is not None:
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
        finally:
            if self.foreground_log is not None:
                self.foreground_log.close()
                self.foreground_log = None

    # -- introspection -----------------------------------------------------

    @property
    def stats_path(self):
        return self.mnt / ".stoker" / "stats.json"

    def stats(self, timeout=30):
        def read():
            with open(self.stats_path, "rb") as f:
                return f.read()
        raw = with_deadline(read, timeout=timeout, what="read stats.json")
        try:
            return json.loads(raw)
        except ValueError as e:
            raise AssertionError(f"stats.json is not JSON: {raw[:500]!r}") from e

    def log_path(self):
        return self.cache / "stoker.log"

    def log_tail(self, lines=60):
        chunks = []
        p = self.log_path()
        if p.exists():
            with open(p, errors="replace") as f:
                chunks.append("".join(f.readlines()[-lines:]))
        if self.foreground_log is not None:
            self.foreground_log.flush()
            with open(self.foreground_log.name, errors="replace") as f:
                chunks.append("[foreground output]\n" + "".join(f.readlines()[-lines:]))
        return "\n".join(chunks) or f"(no log at {p})"


def mount_cmd_fails(origin, mnt, cache, *args, timeout=MOUNT_TIMEOUT):
    """Runs a mount that is expected to fail; returns the CompletedProcess."""
    return run([STOKER_BIN, "mount", str(origin), str(mnt), "--cache", str(cache),
                *map(str, args)], timeout=timeout)


# ---------------------------------------------------------------------------
# Data


def write_random(path, size, rng=None, block=4 * MIB):
    """Writes `size` random bytes (urandom by default; an rng for
    reproducible content)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        left = size
        while left:
            n = min(block, left)
            f.write(rng.randbytes(n) if rng else os.urandom(n))
            left -= n
    return path


def sha256_file(path, bufsize=MIB):
    h = hashlib.sha256()
    with open(path, "rb", buffering=0) as f:
        while True:
            b = f.read(bufsize)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


def read_file(path):
    with open(path, "rb", buffering=0) as f:
        return f.read()


def regular_files(root):
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for n in sorted(filenames):
            p = os.path.join(dirpath, n)
            if stat.S_ISREG(os.lstat(p).st_mode):
                out.append(p)
    return out


def hashes_of(root):
    """{relative path: sha256} for every regular file under root."""
    return {os.path.relpath(p, root): sha256_file(p) for p in regular_files(root)}


def check_hashes(mnt, expected, timeout=IO_TIMEOUT):
    """Reads every file through the mount; returns [mismatch messages]."""
    def go():
        bad = []
        for rel, h in expected.items():
            try:
                got = sha256_file(os.path.join(mnt, rel))
            except OSError as e:
                bad.append(f"{rel}: {e}")
                continue
            if got != h:
                bad.append(f"{rel}: sha256 differs")
        return bad
    return with_deadline(go, timeout=timeout, what=f"read all under {mnt}")


def random_preads(origin_file, mount_file, count, rng, max_len=3 * MIB):
    """Compares `count` random preads (including ones that cross chunk
    boundaries and ones at or past EOF). Returns [mismatch messages]."""
    size = os.path.getsize(origin_file)
    bad = []
    fo = os.open(origin_file, os.O_RDONLY)
    fm = os.open(mount_file, os.O_RDONLY)
    try:
        for i in range(count):
            kind = rng.random()
            if kind < 0.2 and size > 0:      # straddle a chunk boundary
                b = rng.randrange(0, size // CHUNK + 1) * CHUNK
                off = max(0, b - rng.randrange(1, 4097))
                length = rng.randrange(1, 8193)
            elif kind < 0.3:                 # at/after EOF
                off = size + rng.randrange(0, 3) * rng.randrange(0, 5000)
                length = rng.randrange(1, 5000)
            elif kind < 0.4:                 # tail
                off = max(0, size - rng.randrange(1, 10000))
                length = rng.randrange(1, 20000)
            else:
                off = rng.randrange(0, max(size, 1))
                length = rng.randrange(1, max_len)
            want = os.pread(fo, length, off)
            got = os.pread(fm, length, off)
            if got != want:
                bad.append(f"{mount_file} pread(off={off}, len={length}): got "
                           f"{len(got)} bytes, want {len(want)}"
                           + ("" if len(got) != len(want) else " (contents differ)"))
    finally:
        os.close(fo)
        os.close(fm)
    return bad


STAT_FIELDS = ("st_mode", "st_size", "st_uid", "st_gid", "st_mtime_ns")


def compare_trees(origin, mnt, content=True, nlink=True):
    """Walks origin; for every entry compares lstat fields, dir listings,
    symlink targets and (content=True) file bytes with the mount.
    Returns [difference messages]. Call it under with_deadline."""
    origin, mnt = str(origin), str(mnt)
    diffs = []
    for dirpath, dirnames, filenames in os.walk(origin):
        rel_dir = os.path.relpath(dirpath, origin)
        mdir = os.path.normpath(os.path.join(mnt, rel_dir))
        try:
            listed = sorted(os.listdir(mdir))
        except OSError as e:
            diffs.append(f"{rel_dir}: listdir: {e}")
            continue
        want = sorted(os.listdir(dirpath))
        if listed != want:
            extra = sorted(set(listed) - set(want))[:10]
            missing = sorted(set(want) - set(listed))[:10]
            diffs.append(f"{rel_dir}: listing differs; extra={extra} missing={missing}")
        for name in [""] + dirnames + filenames:
            rel = os.path.normpath(os.path.join(rel_dir, name))
            o = os.path.join(origin, rel)
            m = os.path.normpath(os.path.join(mnt, rel))
            try:
                so = os.lstat(o)
                sm = os.lstat(m)
            except OSError as e:
                diffs.append(f"{rel}: lstat: {e}")
                continue
            fields = STAT_FIELDS
            if stat.S_ISDIR(so.st_mode):
                fields = ("st_mode", "st_uid", "st_gid", "st_mtime_ns")
            for fld in fields:
                if getattr(so, fld) != getattr(sm, fld):
                    diffs.append(f"{rel}: {fld} origin={getattr(so, fld)!r} "
                                 f"mount={getattr(sm, fld)!r}")
            if nlink and stat.S_ISREG(so.st_mode) and so.st_nlink != sm.st_nlink:
                diffs.append(f"{rel}: st_nlink origin={so.st_nlink} mount={sm.st_nlink}")
            if stat.S_ISLNK(so.st_mode):
                try:
                    if os.readlink(o) != os.readlink(m):
                        diffs.append(f"{rel}: readlink origin={os.readlink(o)!r} "
                                     f"mount={os.readlink(m)!r}")
                except OSError as e:
                    diffs.append(f"{rel}: readlink: {e}")
            elif content and stat.S_ISREG(so.st_mode):
                try:
                    if sha256_file(o) != sha256_file(m):
                        diffs.append(f"{rel}: content differs")
                except OSError as e:
                    diffs.append(f"{rel}: read: {e}")
    return diffs


# ---------------------------------------------------------------------------
# Cache directory


def cache_data_files(cache):
    d = Path(cache) / "data"
    if not d.exists():
        return []
    return sorted(p for p in d.rglob("*") if p.is_file())


def allocated_bytes(root, include=None):
    """Sum of allocated blocks (st_blocks * 512) of regular files under root
    (optionally only under the given sub-folders)."""
    total = 0
    roots = [Path(root) / s for s in include] if include else [Path(root)]
    for r in roots:
        for dirpath, _, filenames in os.walk(r):
            for n in filenames:
                try:
                    st = os.lstat(os.path.join(dirpath, n))
                except FileNotFoundError:  # evicted while we walk
                    continue
                if stat.S_ISREG(st.st_mode):
                    total += st.st_blocks * 512
    return total


def data_extents(path):
    """[(start, end)] of the data (non-hole) ranges of a sparse file."""
    out = []
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        off = 0
        while off < size:
            try:
                start = os.lseek(fd, off, os.SEEK_DATA)
            except OSError as e:
                if e.errno == errno.ENXIO:
                    break
                raise
            end = os.lseek(fd, start, os.SEEK_HOLE)
            out.append((start, end))
            off = end
    finally:
        os.close(fd)
    return out


def flip_byte(path, offset):
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0xFF]))
        f.flush()
        os.fsync(f.fileno())


def fsck(cache, *args, timeout=300):
    return stoker("fsck", cache, *args, timeout=timeout)


def readers_across_kill(m, read_one, threads=4, before=50, after=50, check_restarted=None):
    """Runs `threads` readers, each calling read_one(rng) in a loop (it returns
    an error string or None), while the supervised daemon of m is killed
    with -9; returns once the new daemon served `after` more reads (m.pid
    updated), after check_restarted() if given, with the readers' errors."""
    stop = threading.Event()
    errors = []
    done = [0]

    def reader(seed):
        rng = seeded(f"readers-across-kill-{seed}")
        while not stop.is_set():
            try:
                err = read_one(rng)
            except OSError as e:
                err = f"{e}"
            if err:
                errors.append(err)
                return
            done[0] += 1

    ts = [threading.Thread(target=reader, args=(i,), daemon=True) for i in range(threads)]
    for t in ts:
        t.start()
    try:
        wait_until(lambda: done[0] > before, 30, what="readers started")
        old_pid = m.pid
        os.kill(old_pid, signal.SIGKILL)
        wait_until(lambda: m.stats().get("pid") not in (None, old_pid), 30, what="a new daemon")
        m.pid = int(m.stats()["pid"])
        now = done[0]
        wait_until(lambda: done[0] > now + after, 30, what="reads after the restart")
        if check_restarted is not None:
            check_restarted()
    finally:
        stop.set()
        for t in ts:
            t.join(30)
    return errors


def unmount_and_fsck(m):
    """Unmounts m; fsck must find its cache clean."""
    m.unmount()
    r = fsck(m.cache)
    assert r.returncode == 0, describe(r)


def seeded(name):
    """A reproducible rng per test name (stable across runs)."""
    return random.Random(zlib.crc32(name.encode()))

