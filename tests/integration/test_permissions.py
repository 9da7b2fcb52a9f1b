"""Permissions: whoever the mount lets in, the kernel checks the origin's
mode bits, owner and group for every reader (FUSE default_permissions, on by
default, also with allow_other alone); --no-default-permissions is the
explicit, logged opt-out. A mode change at the origin is enforced from the
next revalidation on."""

import os

import stoker_testlib as lib

NOBODY = 65534
OWNER = 1000  # owns "owned"; in no group of the others


def as_user(uid, cmd):
    return lib.run(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *cmd])


def readable(uid, path):
    r = as_user(uid, ["cat", str(path)])
    if r.returncode != 0:
        assert "Permission denied" in r.stderr, lib.describe(r)
    return r.returncode == 0


def searchable_down_to(path):
    """The way down to path, searchable by every user (pytest's tmp dirs are 0700)."""
    p = path
    while p != p.parent:
        os.chmod(p, os.stat(p).st_mode | 0o011)
        p = p.parent


def make_origin(tmp_path):
    origin = tmp_path / "origin"
    origin.mkdir()
    for name, mode in (("public", 0o644), ("secret", 0o600), ("owned", 0o600)):
        (origin / name).write_bytes(name.encode() * 1000)
        os.chmod(origin / name, mode)
    os.chown(origin / "owned", OWNER, OWNER)
    (origin / "private").mkdir(mode=0o700)
    (origin / "private" / "inside").write_bytes(b"inside\n")
    os.chmod(origin / "private" / "inside", 0o644)
    searchable_down_to(tmp_path)
    return origin


NAMES = ["public", "secret", "owned", "private/inside"]
# Who reads what on a kernel file system holding the origin's tree.
EXPECTED = {
    0: set(NAMES),
    OWNER: {"public", "owned"},
    NOBODY: {"public"},
}


def mount_shared(mounts, origin, *extra):
    m = mounts.new(origin, args=["--chunk-size", "1M", "--cache-size", "1G", "-o", "allow_other",
                                 *extra])
    m.mnt.mkdir(parents=True, exist_ok=True)
    searchable_down_to(m.mnt)
    m.mount()
    return m


def test_allow_other_alone_enforces_the_origin_modes(mounts, tmp_path):
    origin = make_origin(tmp_path)
    m = mount_shared(mounts, origin)
    assert "default_permissions" in lib.mount_entry(m.mnt)[2].split(",")
    for uid, allowed in EXPECTED.items():
        for name in NAMES:
            # Twice: the second read may come from the cache or the page cache.
            for _ in range(2):
                assert readable(uid, m.mnt / name) == (name in allowed), (uid, name)
    # Listing a directory needs its r bit, entering it its x bit.
    r = as_user(NOBODY, ["ls", str(m.mnt / "private")])
    assert r.returncode != 0 and "Permission denied" in r.stderr, lib.describe(r)
    assert as_user(OWNER, ["ls", str(m.mnt)]).returncode == 0
    # The control files are for every user the mount lets in (docs/operations.md).
    assert readable(NOBODY, m.mnt / ".stoker" / "stats.json")


def test_no_default_permissions_lets_every_user_read_every_file(mounts, tmp_path):
    origin = make_origin(tmp_path)
    m = mount_shared(mounts, origin, "--no-default-permissions")
    assert "default_permissions" not in lib.mount_entry(m.mnt)[2].split(",")
    for name in NAMES:
        assert readable(NOBODY, m.mnt / name), name
    assert "--no-default-permissions" in m.log_tail()


def test_a_mode_change_at_the_origin_is_enforced_after_revalidation(mounts, tmp_path):
    origin = make_origin(tmp_path)
    m = mount_shared(mounts, origin, "--revalidate", "1")
    assert not readable(NOBODY, m.mnt / "secret")
    assert readable(0, m.mnt / "secret")  # cached now
    os.chmod(origin / "secret", 0o644)
    lib.wait_until(lambda: readable(NOBODY, m.mnt / "secret"), 30, what="the new mode seen")
    os.chmod(origin / "secret", 0o600)
    lib.wait_until(lambda: not readable(NOBODY, m.mnt / "secret"), 30, what="the old mode seen")
    os.chown(origin / "secret", OWNER, OWNER)
    lib.wait_until(lambda: readable(OWNER, m.mnt / "secret"), 30, what="the new owner seen")
    assert not readable(NOBODY, m.mnt / "secret")


def test_the_opt_out_and_default_permissions_together_is_one_line(mounts, tmp_path):
    origin = make_origin(tmp_path)
    mnt = tmp_path / "mnt-bad"
    mnt.mkdir()
    r = lib.run([lib.STOKER_BIN, "mount", origin, mnt, "--cache", tmp_path / "cache-bad",
                 "--no-default-permissions", "-o", "allow_other,default_permissions"])
    assert r.returncode == 2, lib.describe(r)
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "--no-default-permissions" in r.stderr
    assert not lib.is_mounted(mnt)
