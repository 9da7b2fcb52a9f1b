"""--revalidate never (docs/semantics.md, "Static datasets"): a file known to
the cache is opened and stat'ed from it, never checked at the origin again,
also after a remount; a change seen while reading still makes a new version;
an HTTP server without ETag or Last-Modified is refused."""

import errno
import os
import time

import pytest

import fault_proxy
import remote_servers as rs
import stoker_testlib as lib
from stoker_testlib import MIB

NEVER = ["--chunk-size", "1M", "--cache-size", "1G", "--revalidate", "never"]


def replace(path, data):
    """Replaces a file's content the way a writer would (new inode, new mtime)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.utime(tmp, (time.time() + 5, time.time() + 5))
    os.replace(tmp, path)


def test_a_known_file_is_never_checked_again_across_remounts(mounts, tmp_path):
    origin = tmp_path / "origin"
    origin.mkdir()
    old = os.urandom(MIB + 10)
    (origin / "f").write_bytes(old)
    cache = tmp_path / "cache"
    m = mounts.make(origin, cache=cache, args=NEVER)
    assert lib.with_deadline(lib.read_file, m.mnt / "f") == old
    replace(origin / "f", os.urandom(2 * MIB))
    before = m.stats()["revalidations"]
    assert lib.with_deadline(lib.read_file, m.mnt / "f") == old
    assert os.stat(m.mnt / "f").st_size == len(old)
    assert m.stats()["revalidations"] == before, "an open asked the origin"
    m.unmount()
    lib.drop_caches()
    m2 = mounts.make(origin, cache=cache, args=NEVER)
    assert os.stat(m2.mnt / "f").st_size == len(old), "a remount asked the origin"
    assert lib.with_deadline(lib.read_file, m2.mnt / "f") == old
    assert m2.stats()["revalidations"] == 0, m2.stats()
    assert m2.stats()["errors"] == 0
    m2.unmount()
    # A mount that checks sees the change (with a period: once the last check
    # is older than that).
    m3 = mounts.make(origin, cache=cache, args=NEVER[:-1] + ["0"])
    assert lib.with_deadline(lib.read_file, m3.mnt / "f") == (origin / "f").read_bytes()
    m3.unmount()


def test_a_file_added_to_a_local_directory_shows_at_once(mounts, tmp_path):
    origin = tmp_path / "origin"
    origin.mkdir()
    (origin / "a").write_bytes(b"a")
    m = mounts.make(origin, args=NEVER)
    assert sorted(os.listdir(m.mnt)) == ["a"]
    (origin / "b").write_bytes(b"b")
    assert sorted(os.listdir(m.mnt)) == ["a", "b"]
    assert lib.with_deadline(lib.read_file, m.mnt / "b") == b"b"
    m.unmount()


def test_a_change_seen_while_reading_makes_a_new_version(mounts, tmp_path):
    """A file cached in part, then replaced at the origin: the next read of its
    rest from the origin sees the change. No read mixes the versions, and the
    file is then read whole in its new version."""
    origin = tmp_path / "origin"
    origin.mkdir()
    old, new = os.urandom(8 * MIB), os.urandom(8 * MIB)
    (origin / "f").write_bytes(old)
    m = mounts.make(origin, args=NEVER + ["--prefetch", "0", "--prefetch-files", "0"])
    with open(m.mnt / "f", "rb") as f:
        assert f.read(MIB) == old[:MIB]
    replace(origin / "f", new)
    try:
        assert lib.with_deadline(lib.read_file, m.mnt / "f") in (old, new), "mixed versions"
    except OSError as e:
        assert e.errno == errno.ESTALE, e
    def reads_new():
        try:
            return lib.read_file(m.mnt / "f") == new
        except OSError as e:
            assert e.errno == errno.ESTALE, e
            return False

    lib.wait_until(reads_new, 30, what="the new version served")
    m.unmount()


@pytest.mark.skipif(not rs.have_nginx(), reason="nginx is not installed")
def test_an_http_server_without_validators_is_refused(mounts, tmp_path):
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "f").write_bytes(os.urandom(5000))
    server = rs.Nginx(tree, tmp_path / "nginx").start()
    try:
        with fault_proxy.running(server.port) as proxy:
            proxy.drop_headers = {"etag", "last-modified"}
            mnt = tmp_path / "mnt"
            mnt.mkdir()
            url = f"{proxy.url}/json/"
            r = lib.mount_cmd_fails(url, mnt, tmp_path / "cache", *NEVER)
            assert r.returncode == 2, lib.describe(r)
            lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
            assert len(lines) == 1 and "ETag" in lines[0] and "--revalidate never" in lines[0], \
                lib.describe(r)
            assert not lib.is_mounted(mnt)
            m = mounts.make(url, mnt=mnt, cache=tmp_path / "cache", args=NEVER[:-1] + ["60"])
            assert lib.with_deadline(lib.read_file, m.mnt / "f") == (tree / "f").read_bytes()
            m.unmount()
    finally:
        server.stop()
