"""Security: what a hostile origin, another user or a careless setup could
do to the daemon, checked on a real mount.

- A symlink in the origin that points outside it is shown as a symlink
  (same target) and never followed by the daemon itself: a directory that an
  attacker swaps for a symlink to a secret directory after the kernel looked
  it up must not let the daemon open the secret through it (all origin
  access is relative to the origin root, RESOLVE_BENEATH|NO_SYMLINKS).
- The cache dir is created 0700 (data/ too), and a cache dir that group or
  others may write is refused at mount with one line, nothing mounted.
- Control files (.stoker/) cannot be written, created, chmod'ed or removed.
- allow_other is off by default: another uid cannot even stat the mount.
Names with '..', '//' or './' from an S3 listing (against a real S3 server)
and secrets in logs are covered by tests/integration/test_s3_origin.py;
HTTP listings and manifests by the remote_listing fuzz target."""

import errno
import os
import stat
import subprocess

from rel import ARGS, lib

SECRET = b"the secret outside the origin\n"


def security(tally, scratch, quick, seed):
    origin = scratch.path("origin")
    outside = scratch.path("outside")
    (origin / "sub").mkdir(parents=True)
    outside.mkdir()
    (outside / "f").write_bytes(SECRET)
    (origin / "sub" / "f").write_bytes(b"inside\n")
    (origin / "sub" / "g").write_bytes(b"inside too\n")
    (origin / "plain").write_bytes(b"plain\n")
    os.symlink(str(outside), origin / "abs-out")
    os.symlink("../outside/f", origin / "rel-out")
    cache = scratch.path("sec.cache")
    m = scratch.stoker_mount(origin, "sec", ARGS + ["--cache-size", "256M", "--revalidate", "0"],
                             cache=cache)
    for check in (symlinks_shown_not_followed, swapped_dir_not_followed, cache_dir_private,
                  control_files_readonly, other_users_refused):
        tally.add(cases=1)
        before = (tally.failures, tally.mismatches)
        lib.with_deadline(check, tally, origin, m, timeout=120, what=check.__name__)
        ok = before == (tally.failures, tally.mismatches)
        tally.say(f"{check.__name__}: {'ok' if ok else 'FAILED'}")
    m.unmount()
    tally.add(cases=1)
    open_cache_dir_refused(tally, scratch, origin, cache)


def symlinks_shown_not_followed(tally, origin, m):
    for name in ("abs-out", "rel-out"):
        st = os.lstat(m.mnt / name)
        if not stat.S_ISLNK(st.st_mode):
            tally.fail(f"{name} is not shown as a symlink (mode {oct(st.st_mode)})")
        elif os.readlink(m.mnt / name) != os.readlink(origin / name):
            tally.fail(f"{name} reads as {os.readlink(m.mnt / name)!r}")


def swapped_dir_not_followed(tally, origin, m):
    """A reader holds sub/ open (a directory descriptor: the kernel keeps its
    node); then sub/ becomes a symlink to a directory outside the origin.
    Opening f relative to the held descriptor asks the daemon for 'f' in the
    node it knows as sub/: it must fail, not serve the secret. (A fresh path
    walk would see the symlink and follow it in the kernel, outside the
    mount, as for any symlink: that is not the daemon's doing.)"""
    if lib.read_file(m.mnt / "sub" / "g") != b"inside too\n":
        tally.mismatch("sub/g before the swap")
    dfd = os.open(m.mnt / "sub", os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.rename(origin / "sub", origin / "sub.old")
        os.symlink(str(origin.parent / "outside"), origin / "sub")
        tally.add(faults=1)
        data = None
        try:
            fd = os.open("f", os.O_RDONLY, dir_fd=dfd)
            try:
                data = os.read(fd, 1 << 16)
            finally:
                os.close(fd)
        except OSError as e:
            if e.errno not in (errno.ENOENT, errno.ELOOP, errno.ESTALE, errno.ENOTDIR, errno.EIO):
                tally.fail(f"sub/f after the swap: unexpected {errno.errorcode.get(e.errno, e.errno)}")
        if data is not None and SECRET in data:
            tally.mismatch("the daemon followed a swapped-in symlink out of the origin")
        elif data is not None:
            tally.fail(f"sub/f after the swap read {data!r}")
    finally:
        os.close(dfd)
        os.unlink(origin / "sub")
        os.rename(origin / "sub.old", origin / "sub")


def cache_dir_private(tally, origin, m):
    for d in (m.cache, m.cache / "data"):
        if not d.is_dir():
            tally.fail(f"{d} is missing: cannot check its mode")
            continue
        mode = stat.S_IMODE(os.stat(d).st_mode)
        if mode != 0o700:
            tally.fail(f"{d} has mode {oct(mode)}, expected 0700")


def control_files_readonly(tally, origin, m):
    ctl = m.mnt / ".stoker"
    attempts = {
        "open stats.json for writing": lambda: os.open(ctl / "stats.json", os.O_WRONLY),
        "create .stoker/new": lambda: os.open(ctl / "new", os.O_WRONLY | os.O_CREAT, 0o644),
        "chmod stats.json": lambda: os.chmod(ctl / "stats.json", 0o666),
        "unlink stats.json": lambda: os.unlink(ctl / "stats.json"),
        "truncate stats.json": lambda: os.truncate(ctl / "stats.json", 0),
    }
    for what, fn in attempts.items():
        tally.add(faults=1)
        try:
            fd = fn()
        except OSError as e:
            if e.errno not in (errno.EROFS, errno.EACCES, errno.EPERM):
                tally.fail(f"{what}: {errno.errorcode.get(e.errno, e.errno)}, expected EROFS")
            continue
        if isinstance(fd, int):
            os.close(fd)
        tally.fail(f"{what} succeeded")
    if b"pid" not in lib.read_file(ctl / "stats.json"):
        tally.fail("stats.json unreadable after the attempts")


def as_nobody(*argv):
    return subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *argv],
                          capture_output=True, text=True, timeout=30)


def other_users_refused(tally, origin, m):
    """Without allow_other another uid is refused by FUSE itself; the control:
    with -o allow_other the same read works (so the refusal is not the path's
    modes: the scratch dir is made searchable for this)."""
    entry = lib.mount_entry(m.mnt)
    if entry and "allow_other" in entry[2].split(","):
        tally.fail(f"the mount has allow_other by default: {entry[2]}")
    scratch_root = m.mnt.parent
    os.chmod(scratch_root, 0o711)
    try:
        tally.add(faults=1)
        r = as_nobody("cat", str(m.mnt / "plain"))
        if r.returncode == 0:
            tally.fail("uid 65534 read a file of a mount without allow_other")
        elif "Permission denied" not in r.stderr:
            tally.fail(f"uid 65534: expected 'Permission denied', got {r.stderr.strip()!r}")
        other = lib.StokerMount(origin, scratch_root / "sec-ao.mnt", scratch_root / "sec-ao.cache",
                                ARGS + ["--cache-size", "64M", "-o", "allow_other"])
        try:
            other.mount()
            r = as_nobody("cat", str(other.mnt / "plain"))
            if r.returncode != 0 or r.stdout != "plain\n":
                tally.fail(f"control: uid 65534 could not read with allow_other: {r.stderr.strip()!r}")
            other.unmount()
        finally:
            other.cleanup()
    finally:
        os.chmod(scratch_root, 0o700)


def open_cache_dir_refused(tally, scratch, origin, cache):
    os.chmod(cache, 0o777)
    tally.add(faults=1)
    mnt = scratch.path("sec2.mnt")
    mnt.mkdir()
    r = lib.mount_cmd_fails(origin, mnt, cache, *ARGS)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    if r.returncode == 0 or lib.is_mounted(mnt):
        tally.fail("mount over a world-writable cache dir succeeded")
        lib.lazy_unmount(mnt)
    elif len(lines) != 1 or "writable" not in lines[0]:
        tally.fail(f"world-writable cache dir: expected one line about it, got {r.stderr!r}")
    else:
        tally.say(f"world-writable cache dir refused: {lines[0]}")
    os.chmod(cache, 0o700)
