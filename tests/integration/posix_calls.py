"""Runs a fixed list of file system calls on a tree (see make_tree) and prints
what each answered, one JSON object: call -> outcome ("ok", a value, or an
errno name). Run as a script (as root, or as another user through setpriv)
by test_readonly.py, once on a read-only tmpfs and once on a stoker mount
holding the same tree; the two must answer alike."""

import ctypes
import errno
import json
import os
import stat
import sys

OWNER = 1000

# (path, kind, mode, content or target); made in this order.
TREE = [
    ("file", "file", 0o644, b"file\n" * 100),
    ("exec", "file", 0o755, b"#!/bin/sh\n"),
    ("secret", "file", 0o600, b"secret\n"),
    ("owned", "file", 0o640, b"owned\n"),
    ("noperm", "file", 0o000, b"none\n"),
    ("dir", "dir", 0o755, None),
    ("dir/inner", "file", 0o644, b"inner\n"),
    ("private", "dir", 0o700, None),
    ("private/inner", "file", 0o644, b"private inner\n"),
    ("emptydir", "dir", 0o755, None),
    ("link", "symlink", None, "file"),
    ("dirlink", "symlink", None, "dir"),
    ("dangling", "symlink", None, "missing"),
    ("fifo", "fifo", 0o644, None),
]
PATHS = [p for p, *_ in TREE] + ["missing", "dir/missing", "private/missing"]


def make_tree(root):
    """The tree under root (as root: it sets owners)."""
    for path, kind, mode, data in TREE:
        p = os.path.join(root, path)
        if kind == "file":
            with open(p, "wb") as f:
                f.write(data)
        elif kind == "dir":
            os.mkdir(p)
        elif kind == "symlink":
            os.symlink(data, p)
        elif kind == "fifo":
            os.mkfifo(p)
        if mode is not None:
            os.chmod(p, mode)
    os.chown(os.path.join(root, "owned"), OWNER, OWNER)


OPEN_FLAGS = {
    "r": os.O_RDONLY,
    "w": os.O_WRONLY,
    "rw": os.O_RDWR,
    "r_append": os.O_RDONLY | os.O_APPEND,
    "w_append": os.O_WRONLY | os.O_APPEND,
    "r_trunc": os.O_RDONLY | os.O_TRUNC,
    "r_directory": os.O_RDONLY | os.O_DIRECTORY,
    "r_nofollow": os.O_RDONLY | os.O_NOFOLLOW,
    "path": os.O_PATH,
    "r_noatime": os.O_RDONLY | os.O_NOATIME,
    "w_creat": os.O_WRONLY | os.O_CREAT,
    "r_creat_excl": os.O_RDONLY | os.O_CREAT | os.O_EXCL,
}
ACCESS = {"f": os.F_OK, "r": os.R_OK, "w": os.W_OK, "x": os.X_OK, "rw": os.R_OK | os.W_OK,
          "rx": os.R_OK | os.X_OK}

_libc = ctypes.CDLL(None, use_errno=True)


def outcome(fn):
    try:
        v = fn()
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
    return "ok" if v is None else v


def stat_of(st):
    # Not times, inode numbers, devices or blocks: those belong to each file system.
    return [stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid,
            st.st_size if not stat.S_ISDIR(st.st_mode) else None, st.st_nlink]


def open_read(p, flags):
    fd = os.open(p, flags | os.O_NONBLOCK, 0o644)  # a FIFO must not block the open
    try:
        if flags & os.O_PATH or flags & os.O_ACCMODE == os.O_WRONLY:
            return "ok"
        st = os.fstat(fd)
        if stat.S_ISREG(st.st_mode):
            return "read %d" % len(os.read(fd, 1 << 16))
        if stat.S_ISDIR(st.st_mode):
            return "dir"
        return "ok"
    finally:
        os.close(fd)


def access(p, mode):
    if _libc.access(p.encode(), mode) == 0:
        return "ok"
    e = ctypes.get_errno()
    return errno.errorcode.get(e, str(e))


def listing(p):
    return sorted((e.name, e.is_dir(follow_symlinks=False), e.is_symlink()) for e in os.scandir(p))


def chdir_to(p):
    here = os.getcwd()
    os.chdir(p)
    os.chdir(here)


def calls(root):
    out = {}
    for rel in PATHS:
        p = os.path.join(root, rel)
        out[f"stat {rel}"] = outcome(lambda: stat_of(os.stat(p)))
        out[f"lstat {rel}"] = outcome(lambda: stat_of(os.lstat(p)))
        for name, flags in OPEN_FLAGS.items():
            out[f"open {name} {rel}"] = outcome(lambda: open_read(p, flags))
        for name, mode in ACCESS.items():
            out[f"access {name} {rel}"] = access(p, mode)
        out[f"listdir {rel}"] = outcome(lambda: listing(p))
        out[f"chdir {rel}"] = outcome(lambda: chdir_to(p))
        out[f"readlink {rel}"] = outcome(lambda: os.readlink(p))
        out[f"listxattr {rel}"] = outcome(lambda: sorted(x for x in os.listxattr(p)
                                                          if x.startswith("user.")))
        out[f"getxattr {rel}"] = outcome(lambda: os.getxattr(p, "user.absent").hex())
        # Every call that would change the tree.
        out[f"mkdir in {rel}"] = outcome(lambda: os.mkdir(os.path.join(p, "new")))
        out[f"create in {rel}"] = outcome(lambda: os.close(os.open(os.path.join(p, "new"),
                                                                    os.O_WRONLY | os.O_CREAT)))
        out[f"unlink {rel}"] = outcome(lambda: os.unlink(p))
        out[f"rmdir {rel}"] = outcome(lambda: os.rmdir(p))
        out[f"rename {rel}"] = outcome(lambda: os.rename(p, p + ".renamed"))
        out[f"chmod {rel}"] = outcome(lambda: os.chmod(p, 0o600))
        out[f"chown {rel}"] = outcome(lambda: os.chown(p, 1, 1))
        out[f"truncate {rel}"] = outcome(lambda: os.truncate(p, 1))
        out[f"utime {rel}"] = outcome(lambda: os.utime(p, ns=(1, 1)))
        out[f"symlink in {rel}"] = outcome(lambda: os.symlink("x", os.path.join(p, "s")))
        out[f"link {rel}"] = outcome(lambda: os.link(p, p + ".link"))
        out[f"setxattr {rel}"] = outcome(lambda: os.setxattr(p, "user.x", b"1"))
        out[f"removexattr {rel}"] = outcome(lambda: os.removexattr(p, "user.x"))
    return out


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make_tree(sys.argv[2])
    else:
        print(json.dumps(calls(sys.argv[2])))
