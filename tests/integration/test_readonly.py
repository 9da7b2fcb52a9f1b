"""The mount is read-only: every modifying call fails with EROFS and the
origin is left untouched."""

import errno
import os

import pytest

import stoker_testlib as lib
from stoker_testlib import with_deadline


@pytest.fixture(scope="module")
def ro(module_mounts, tmp_path_factory):
    origin = tmp_path_factory.mktemp("ro_origin")
    lib.write_random(origin / "file", 3 * lib.MIB + 1)
    (origin / "dir").mkdir()
    (origin / "emptydir").mkdir()
    (origin / "dir" / "inner").write_bytes(b"inner\n")
    os.symlink("file", origin / "link")
    before = snapshot(origin)
    m = module_mounts.make(origin)
    yield m, origin
    assert snapshot(origin) == before, "the origin changed under a read-only mount"


def snapshot(root):
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames + [""]:
            p = os.path.join(dirpath, n)
            st = os.lstat(p)
            out[os.path.relpath(p, root)] = (
                st.st_mode, st.st_size, st.st_mtime_ns, st.st_uid, st.st_gid,
                st.st_nlink, lib.sha256_file(p) if os.path.isfile(p) and not os.path.islink(p) else None)
    return out


OPS = {
    "open_wronly": lambda m: os.open(m / "file", os.O_WRONLY),
    "open_rdwr": lambda m: os.open(m / "file", os.O_RDWR),
    "open_append": lambda m: os.open(m / "file", os.O_WRONLY | os.O_APPEND),
    "open_rdonly_trunc": lambda m: os.open(m / "file", os.O_RDONLY | os.O_TRUNC),
    "create_new": lambda m: os.open(m / "new", os.O_WRONLY | os.O_CREAT, 0o644),
    "create_excl": lambda m: os.open(m / "dir" / "new", os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600),
    "mkdir": lambda m: os.mkdir(m / "newdir"),
    "rmdir": lambda m: os.rmdir(m / "emptydir"),
    "rename_file": lambda m: os.rename(m / "file", m / "file2"),
    "rename_dir": lambda m: os.rename(m / "dir", m / "dir2"),
    "rename_over": lambda m: os.rename(m / "dir" / "inner", m / "file"),
    "unlink": lambda m: os.unlink(m / "file"),
    "unlink_symlink": lambda m: os.unlink(m / "link"),
    "chmod": lambda m: os.chmod(m / "file", 0o600),
    "chown": lambda m: os.chown(m / "file", 1, 1),
    "truncate": lambda m: os.truncate(m / "file", 10),
    "utime": lambda m: os.utime(m / "file", ns=(1, 1)),
    "symlink": lambda m: os.symlink("file", m / "newlink"),
    "link": lambda m: os.link(m / "file", m / "hardlink"),
    "mkfifo": lambda m: os.mkfifo(m / "fifo"),
    "setxattr": lambda m: os.setxattr(m / "file", "user.test", b"x"),
}


@pytest.mark.parametrize("op", list(OPS))
def test_modification_fails_with_erofs(ro, op):
    m, origin = ro
    with pytest.raises(OSError) as ei:
        fd = with_deadline(OPS[op], m.mnt, what=op)
        if isinstance(fd, int):  # an open that should not have succeeded
            os.close(fd)
    assert ei.value.errno == errno.EROFS, (
        f"{op}: errno {errno.errorcode.get(ei.value.errno)} ({ei.value}), want EROFS")


def test_write_through_readonly_fd_fails(ro):
    m, _ = ro

    def go():
        fd = os.open(m.mnt / "file", os.O_RDONLY)
        try:
            os.write(fd, b"x")
        finally:
            os.close(fd)
    with pytest.raises(OSError) as ei:
        with_deadline(go)
    assert ei.value.errno in (errno.EBADF, errno.EROFS)


def test_still_readable_after_refused_writes(ro):
    m, origin = ro
    assert with_deadline(lib.read_file, m.mnt / "file") == (origin / "file").read_bytes()
    assert sorted(with_deadline(os.listdir, m.mnt)) == sorted(os.listdir(origin))
