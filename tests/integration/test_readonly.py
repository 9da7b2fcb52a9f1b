"""The mount is read-only: every modifying call fails with EROFS and the
origin is left untouched."""

import errno
import json
import os
import sys
from pathlib import Path

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


# ---------------------------------------------------------------------------
# Call by call against the kernel's own read-only file system

CALLS = Path(__file__).with_name("posix_calls.py")
NOBODY = 65534


def searchable_down_to(path):
    p = Path(path)
    while p != p.parent:
        os.chmod(p, os.stat(p).st_mode | 0o011)
        p = p.parent


@pytest.fixture(scope="module")
def twins(module_mounts, tmp_path_factory):
    """The same tree (posix_calls.TREE) in a tmpfs remounted read-only and
    through stoker mounts; (tmpfs tree, mounted tree, origin tree, the tree
    through a mount with --no-default-permissions)."""
    base = tmp_path_factory.mktemp("posix_twins")
    searchable_down_to(base)
    tmpfs, origin = base / "tmpfs", base / "origin"
    tmpfs.mkdir()
    origin.mkdir(mode=0o755)
    r = lib.run(["mount", "-t", "tmpfs", "-o", "mode=0755,size=16m", "tmpfs", tmpfs])
    assert r.returncode == 0, lib.describe(r)
    try:
        for root in (tmpfs, origin):
            (root / "t").mkdir(mode=0o755)
            r = lib.run([sys.executable, CALLS, "make", root / "t"])
            assert r.returncode == 0, lib.describe(r)
        r = lib.run(["mount", "-o", "remount,ro", tmpfs])
        assert r.returncode == 0, lib.describe(r)
        m = module_mounts.make(origin, args=[*module_mounts.DEFAULT_ARGS, "-o", "allow_other"])
        searchable_down_to(m.mnt.parent)  # the mount's root has the origin's mode
        unchecked = module_mounts.make(origin, args=[*module_mounts.DEFAULT_ARGS,
                                                     "--no-default-permissions"])
        yield tmpfs / "t", m.mnt / "t", origin / "t", unchecked.mnt / "t"
    finally:
        lib.run(["umount", "-l", tmpfs])


def answers(root, uid):
    cmd = [sys.executable, CALLS, "calls", root]
    if uid != 0:
        cmd = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *cmd]
    r = with_deadline(lambda: lib.run(cmd), what="the calls")
    assert r.returncode == 0, lib.describe(r)
    return json.loads(r.stdout)


@pytest.mark.parametrize("uid,checked", [(0, True), (NOBODY, True), (0, False)],
                         ids=["root", "nobody", "root-no-default-permissions"])
def test_calls_answer_as_a_readonly_tmpfs_does(twins, uid, checked):
    """Without mode checks the daemon answers access(2) itself: as root, the
    answers are still the kernel's."""
    tmpfs, mounted, _, unchecked = twins
    want, got = answers(tmpfs, uid), answers(mounted if checked else unchecked, uid)
    assert len(want) >= 280
    differ = {k: {"tmpfs": v, "stoker": got.get(k)} for k, v in want.items() if got.get(k) != v}
    assert not differ, json.dumps(differ, indent=1)


def test_stat_shows_the_origins_blocks(mounts, tmp_path):
    origin = tmp_path / "origin"
    origin.mkdir()
    (origin / "small").write_bytes(b"x" * 500)  # one 4 KiB block: 8 sectors, not 1
    lib.write_random(origin / "big", 3 * lib.MIB + 5)
    m = mounts.make(origin)
    for name in ("small", "big"):
        lib.read_file(m.mnt / name)
    lib.wait_until(lambda: m.stats()["chunks"] >= 5, 30, what="both cached")
    m.unmount()
    m.mount()
    for name in ("small", "big"):
        assert os.stat(m.mnt / name).st_blocks == os.stat(origin / name).st_blocks, name
    assert m.stats()["attrs_from_cache"] >= 2  # answered from the cache's records


def test_reading_leaves_the_origins_atime(twins):
    _, mounted, origin, _ = twins
    p = origin / "exec"
    os.utime(p, ns=(1_000_000_000, os.stat(p).st_mtime_ns))  # before mtime: relatime would move it
    lib.drop_caches()
    lib.read_file(mounted / "exec")
    assert os.stat(p).st_atime_ns == 1_000_000_000
