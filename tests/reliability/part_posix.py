"""POSIX behaviour of a read-only filesystem, compared with the origin
directory itself: stat fields, readdir and telldir/seekdir, readlink,
getxattr/listxattr, EROFS for every mutating call, O_DIRECT and mmap
reads, lseek SEEK_DATA/SEEK_HOLE, 255-byte names and deep paths; then fio
writes verify patterns on the origin and verifies them through the mount
(sequential and random reads).

Proves: what a program sees through the mount is what it would see in the
origin, and no call can change anything."""

import ctypes
import errno
import mmap
import os
import random
import shutil
import stat
import subprocess

import rel
from rel import ARGS, MIB, lib


def posix(tally, scratch, quick, seed):
    rng = random.Random(seed)
    origin = scratch.path("origin")
    build_tree(origin, rng)
    m = scratch.stoker_mount(origin, "px", ARGS + ["--cache-size", "1G"])
    for check in (tree_matches, dir_offsets, xattrs, mutations_refused, direct_and_mmap,
                  seek_data_hole, long_names):
        tally.add(cases=1)
        before = (tally.failures, tally.mismatches)
        lib.with_deadline(check, tally, origin, m.mnt, timeout=300, what=check.__name__)
        ok = before == (tally.failures, tally.mismatches)
        tally.say(f"{check.__name__}: {'ok' if ok else 'FAILED'}")
    fio_verify(tally, scratch, origin, m, quick)
    m.unmount()


def build_tree(origin, rng):
    """Files, a sparse file, symlinks (relative, absolute, dangling, out of
    the tree), xattrs, a 255-byte name, a deep path, a big directory."""
    rel.make_tree(origin, rng, 12, 3 * MIB)
    with open(origin / "sparse", "wb") as f:
        f.seek(5 * MIB)
        f.write(b"data in the middle")
        f.truncate(12 * MIB)
    os.symlink("d0/f0000", origin / "link-rel")
    os.symlink("/etc/hostname", origin / "link-abs")
    os.symlink("no/such/file", origin / "link-dangling")
    os.symlink("../../..", origin / "link-up")
    os.setxattr(origin / "d0" / "f0000", "user.stoker_test", b"value-\x00-bin")
    os.setxattr(origin / "d0" / "f0000", "user.other", b"")
    (origin / ("n" * 255)).write_bytes(b"long name")
    deep = origin / "deep"
    for i in range(30):
        deep = deep / (f"{i:02d}" + "x" * 98)
    deep.mkdir(parents=True)
    (deep / "leaf").write_bytes(b"deep leaf")
    big = origin / "bigdir"
    big.mkdir()
    for i in range(2000):
        (big / f"entry-{i:05d}-{'y' * rng.randrange(0, 60)}").write_bytes(b"")
    os.mkfifo(origin / "fifo")


def tree_matches(tally, origin, mnt):
    """lstat fields, listings, link targets and contents, via compare_trees."""
    for d in lib.compare_trees(origin, mnt):
        tally.fail("tree: " + d)


def dir_offsets(tally, origin, mnt):
    """readdir through libc, then seekdir back to every telldir position:
    the entry read there must be the one first read after it."""
    libc = rel.libc
    libc.opendir.restype = ctypes.c_void_p
    libc.readdir.restype = ctypes.c_void_p
    libc.readdir.argtypes = [ctypes.c_void_p]
    libc.telldir.restype = ctypes.c_long
    libc.telldir.argtypes = [ctypes.c_void_p]
    libc.seekdir.argtypes = [ctypes.c_void_p, ctypes.c_long]
    libc.closedir.argtypes = [ctypes.c_void_p]
    name_off = 19  # struct dirent64: d_ino 8, d_off 8, d_reclen 2, d_type 1

    d = libc.opendir(str(mnt / "bigdir").encode())
    if not d:
        tally.fail(f"opendir: errno {ctypes.get_errno()}")
        return
    try:
        seen = []
        while True:
            pos = libc.telldir(d)
            ent = libc.readdir(d)
            if not ent:
                break
            seen.append((pos, ctypes.string_at(ent + name_off).decode()))
        names = sorted(n for _, n in seen if n not in (".", ".."))
        if names != sorted(os.listdir(origin / "bigdir")):
            tally.fail("bigdir: readdir listing differs from the origin")
        for pos, name in random.Random(1).sample(seen, min(200, len(seen))):
            libc.seekdir(d, pos)
            ent = libc.readdir(d)
            got = ctypes.string_at(ent + name_off).decode() if ent else None
            if got != name:
                tally.fail(f"seekdir({pos}) then readdir gave {got!r}, want {name!r}")
                return
    finally:
        libc.closedir(d)
    with os.scandir(mnt / "d0") as it:
        for e in it:
            o = os.lstat(origin / "d0" / e.name)
            if e.inode() == 0 or stat.S_IFMT(o.st_mode) != stat.S_IFMT(e.stat(follow_symlinks=False).st_mode):
                tally.fail(f"scandir {e.name}: inode {e.inode()} / type differs")


def xattrs(tally, origin, mnt):
    """listxattr/getxattr give what the origin has (or ENOTSUP everywhere)."""
    for rel_path in ("d0/f0000", "d1/f0001", "link-rel"):
        o, m = origin / rel_path, mnt / rel_path
        try:
            want = sorted(os.listxattr(o, follow_symlinks=False))
            got = sorted(os.listxattr(m, follow_symlinks=False))
        except OSError as e:
            if e.errno in (errno.ENOTSUP, errno.EOPNOTSUPP):
                continue
            tally.fail(f"listxattr {rel_path}: {e}")
            continue
        want = [a for a in want if a.startswith("user.")]
        got = [a for a in got if a.startswith("user.")]
        if got != want:
            tally.fail(f"listxattr {rel_path}: mount {got}, origin {want}")
        for a in want:
            try:
                if os.getxattr(m, a) != os.getxattr(o, a):
                    tally.fail(f"getxattr {rel_path} {a} differs")
            except OSError as e:
                tally.fail(f"getxattr {rel_path} {a}: {e}")
        try:
            os.getxattr(m, "user.absent")
            tally.fail(f"getxattr of an absent name on {rel_path} succeeded")
        except OSError as e:
            if e.errno != errno.ENODATA:
                tally.fail(f"getxattr of an absent name: {e} (want ENODATA)")


def mutations_refused(tally, origin, mnt):
    """Every call that would change the tree fails with EROFS, and the
    origin is unchanged afterwards."""
    f, d, new = mnt / "d0" / "f0000", mnt / "d0", mnt / "d0" / "new"
    before = snapshot(origin)
    calls = {
        "open O_WRONLY": lambda: os.close(os.open(f, os.O_WRONLY)),
        "open O_RDWR": lambda: os.close(os.open(f, os.O_RDWR)),
        "open O_CREAT": lambda: os.close(os.open(new, os.O_WRONLY | os.O_CREAT, 0o644)),
        "open O_TRUNC": lambda: os.close(os.open(f, os.O_RDONLY | os.O_TRUNC)),
        "mkdir": lambda: os.mkdir(new),
        "rmdir": lambda: os.rmdir(mnt / "d3"),
        "unlink": lambda: os.unlink(f),
        "rename": lambda: os.rename(f, new),
        "link": lambda: os.link(f, new),
        "symlink": lambda: os.symlink("x", new),
        "chmod": lambda: os.chmod(f, 0o600),
        "chown": lambda: os.chown(f, 1, 1),
        "utime": lambda: os.utime(f, (1, 1)),
        "truncate": lambda: os.truncate(f, 0),
        "setxattr": lambda: os.setxattr(f, "user.x", b"y"),
        "removexattr": lambda: os.removexattr(f, "user.stoker_test"),
        "mknod": lambda: os.mknod(new, 0o600 | stat.S_IFIFO),
        "mkfifo": lambda: os.mkfifo(new),
        "chmod dir": lambda: os.chmod(d, 0o700),
    }
    for what, call in calls.items():
        try:
            call()
            tally.fail(f"{what} succeeded on a read-only mount")
        except OSError as e:
            if e.errno != errno.EROFS:
                tally.fail(f"{what}: {errno.errorcode.get(e.errno)} (want EROFS)")
    if snapshot(origin) != before:
        tally.fail("the origin changed under mutating calls")


def snapshot(root):
    return {p: (s.st_mode, s.st_size, s.st_mtime_ns, s.st_uid)
            for p, s in ((p, os.lstat(p)) for p in (str(root / x) for x in os.listdir(root)))}


def direct_and_mmap(tally, origin, mnt):
    """O_DIRECT opens and aligned reads, and mmap reads, equal the origin."""
    for rel_path in lib.regular_files(origin)[:12]:
        r = os.path.relpath(rel_path, origin)
        want = lib.read_file(rel_path)
        try:
            fd = os.open(mnt / r, os.O_RDONLY | os.O_DIRECT)
        except OSError as e:
            tally.fail(f"open O_DIRECT {r}: {e}")
            continue
        try:
            buf = mmap.mmap(-1, max(4096, (len(want) + 4095) // 4096 * 4096 + 4096))
            n = os.preadv(fd, [buf], 0)
            tally.add(bytes_compared=n)
            if bytes(buf[:n]) != want:
                tally.mismatch(f"O_DIRECT read of {r} differs")
        finally:
            os.close(fd)
        if not want:
            continue
        with open(mnt / r, "rb") as fh, mmap.mmap(fh.fileno(), 0, prot=mmap.PROT_READ) as mm:
            tally.add(bytes_compared=len(mm))
            if mm[:] != want:
                tally.mismatch(f"mmap read of {r} differs")


def seek_data_hole(tally, origin, mnt):
    """SEEK_DATA/SEEK_HOLE answers are valid: the bytes between a position
    and the next data are zeros, ENXIO at EOF. (Reporting the whole file as
    data is allowed; the answers are printed next to the origin's.)"""
    for name in ("sparse", "d0/f0000"):
        o, m = origin / name, mnt / name
        size = os.path.getsize(o)
        fd = os.open(m, os.O_RDONLY)
        try:
            for off in (o for o in (0, 4096, 5 * MIB + 3, size - 1) if 0 <= o < size):
                try:
                    data_at = os.lseek(fd, off, os.SEEK_DATA)
                except OSError as e:  # ENXIO: no data after off; fine if only zeros follow
                    if e.errno != errno.ENXIO or os.pread(fd, size - off, off).strip(b"\0"):
                        tally.fail(f"{name}: SEEK_DATA from {off}: {e} but data follows")
                    continue
                hole_at = os.lseek(fd, off, os.SEEK_HOLE)
                if not (off <= data_at <= size and off <= hole_at <= size):
                    tally.fail(f"{name} lseek from {off}: data {data_at}, hole {hole_at}, size {size}")
                if os.pread(fd, data_at - off, off).strip(b"\0"):
                    tally.mismatch(f"{name}: SEEK_DATA from {off} skipped non-zero bytes")
            try:
                os.lseek(fd, size, os.SEEK_DATA)
                tally.fail(f"{name}: SEEK_DATA at EOF did not fail with ENXIO")
            except OSError as e:
                if e.errno != errno.ENXIO:
                    tally.fail(f"{name}: SEEK_DATA at EOF: {e}")
        finally:
            os.close(fd)
    ext_o, ext_m = lib.data_extents(origin / "sparse"), lib.data_extents(mnt / "sparse")
    tally.say(f"sparse file extents: origin {ext_o}, mount {ext_m}")


def long_names(tally, origin, mnt):
    """A 255-byte name and a ~3000-byte deep path read the same; a 256-byte
    name is ENAMETOOLONG."""
    if lib.read_file(mnt / ("n" * 255)) != b"long name":
        tally.mismatch("255-byte name content differs")
    leaf = next(p for p in lib.regular_files(origin / "deep"))
    r = os.path.relpath(leaf, origin)
    if lib.read_file(mnt / r) != b"deep leaf":
        tally.mismatch(f"deep path ({len(r)} bytes) content differs")
    try:
        os.stat(mnt / ("n" * 256))
        tally.fail("stat of a 256-byte name succeeded")
    except OSError as e:
        if e.errno != errno.ENAMETOOLONG:
            tally.fail(f"stat of a 256-byte name: {e} (want ENAMETOOLONG)")


def fio_verify(tally, scratch, origin, m, quick):
    """fio writes crc32c verify blocks on the origin; fio verifies them by
    reading through the mount, sequentially and at random."""
    if not shutil.which("fio"):
        tally.fail("fio is not installed (apt-get install fio)")
        return
    size = "32M" if quick else "256M"
    (origin / "fio").mkdir()
    common = ["--ioengine=psync", "--bs=64k", f"--size={size}", "--verify=crc32c",
              "--numjobs=2", "--group_reporting", "--verify_state_save=0"]
    w = subprocess.run(["fio", "--name=w", f"--directory={origin / 'fio'}", "--rw=write",
                        "--do_verify=0", *common], capture_output=True, text=True, timeout=600,
                       cwd=scratch.root)
    if w.returncode != 0:
        tally.fail(f"fio write on the origin failed: {w.stderr[-500:]}")
        return
    for rw in ("read", "randread"):
        tally.add(cases=1)
        lib.drop_caches()
        r = lib.run(["fio", "--name=w", f"--directory={m.mnt / 'fio'}", f"--rw={rw}",
                     "--verify_only", "--readonly", *common], timeout=600)
        bad = r.returncode != 0 or "verify:" in r.stderr or "bad magic" in r.stderr
        tally.add(bytes_compared=2 * lib_size(size))
        if bad:
            tally.mismatch(f"fio {rw} --verify_only through the mount: rc={r.returncode} "
                           f"{(r.stderr or r.stdout)[-400:]}")
        tally.say(f"fio {rw} verify_only through the mount: rc={r.returncode}")


def lib_size(s):
    return int(s[:-1]) * MIB
