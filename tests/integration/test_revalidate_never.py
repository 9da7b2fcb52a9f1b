"""--revalidate never (docs/semantics.md, "Static datasets"): a file known to
the cache is opened and stat'ed from it, never checked at the origin again,
also after a remount; listings are kept in the index, so a remount lists
nothing; a change seen while reading still makes a new version; `stoker
refresh` makes a subtree be asked again, in the kernel too; an HTTP server
without ETag or Last-Modified is refused."""

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


def test_a_tree_shows_as_first_listed_until_a_mount_that_checks(mounts, tmp_path):
    origin = tmp_path / "origin"
    origin.mkdir()
    (origin / "a").write_bytes(b"a")
    cache = tmp_path / "cache"
    m = mounts.make(origin, cache=cache, args=NEVER)
    assert sorted(os.listdir(m.mnt)) == ["a"]
    (origin / "b").write_bytes(b"b")
    lib.drop_caches()  # the kernel's listing and entries gone: the daemon answers
    assert sorted(os.listdir(m.mnt)) == ["a"]
    assert not (m.mnt / "b").exists()
    m.unmount()
    m2 = mounts.make(origin, cache=cache, args=NEVER)
    assert sorted(os.listdir(m2.mnt)) == ["a"]
    assert m2.stats()["kept_listings"] == 1, m2.stats()
    m2.unmount()
    m3 = mounts.make(origin, cache=cache, args=NEVER[:-1] + ["0"])
    assert sorted(os.listdir(m3.mnt)) == ["a", "b"]
    assert lib.with_deadline(lib.read_file, m3.mnt / "b") == b"b"
    m3.unmount()


def refresh(path):
    r = lib.stoker("refresh", path)
    assert r.returncode == 0, lib.describe(r)
    return r.stdout


def test_a_change_is_seen_after_stoker_refresh_and_not_before(mounts, tmp_path):
    """Nothing is dropped from the kernel's caches by hand here: the refresh
    must make the kernel ask again. Only the refreshed subtree is asked; an
    open file keeps its version or fails, never mixes; a refresh holds across
    a remount; a path the mount does not show yet can be named."""
    origin = tmp_path / "origin"
    for d in ("d", "e"):
        (origin / d).mkdir(parents=True)
    old, new = os.urandom(3 * MIB), os.urandom(3 * MIB + 7)
    (origin / "d" / "f").write_bytes(old)
    (origin / "e" / "g").write_bytes(b"g-old")
    cache = tmp_path / "cache"
    m = mounts.make(origin, cache=cache, args=NEVER)
    assert lib.with_deadline(lib.read_file, m.mnt / "d" / "f") == old
    assert lib.with_deadline(lib.read_file, m.mnt / "e" / "g") == b"g-old"
    assert sorted(os.listdir(m.mnt / "d")) == ["f"]
    assert sorted(os.listdir(m.mnt / "e")) == ["g"]
    held = open(m.mnt / "d" / "f", "rb")
    try:
        assert held.read(MIB) == old[:MIB]
        replace(origin / "d" / "f", new)
        replace(origin / "e" / "g", b"g-new")
        (origin / "d" / "added").write_bytes(b"added")
        assert lib.with_deadline(lib.read_file, m.mnt / "d" / "f") == old, "seen before refresh"
        assert sorted(os.listdir(m.mnt / "d")) == ["f"]

        out = refresh(m.mnt / "d")
        assert "asked of the origin again" in out, out
        assert sorted(os.listdir(m.mnt / "d")) == ["added", "f"]
        assert lib.with_deadline(lib.read_file, m.mnt / "d" / "f") == new
        assert os.stat(m.mnt / "d" / "f").st_size == len(new)
        assert lib.with_deadline(lib.read_file, m.mnt / "d" / "added") == b"added"
        assert lib.with_deadline(lib.read_file, m.mnt / "e" / "g") == b"g-old", "e was refreshed"
        try:
            rest = held.read()
            assert rest == old[MIB:], "an open file mixed versions"
        except OSError as e:
            assert e.errno == errno.ESTALE, e
    finally:
        held.close()
    # A file the kept listing does not have: named by the path it will have.
    (origin / "e" / "h").write_bytes(b"h")
    assert not (m.mnt / "e" / "h").exists()
    refresh(m.mnt / "e" / "h")
    assert lib.with_deadline(lib.read_file, m.mnt / "e" / "h") == b"h"
    assert m.stats()["errors"] == 0, m.stats()
    # Marked, not yet asked: the mark outlives the daemon.
    replace(origin / "e" / "g", b"g-newer")
    refresh(m.mnt / "e" / "g")
    m.unmount()
    m2 = mounts.make(origin, cache=cache, args=NEVER)
    assert lib.with_deadline(lib.read_file, m2.mnt / "e" / "g") == b"g-newer"
    assert lib.with_deadline(lib.read_file, m2.mnt / "d" / "f") == new
    before = m2.stats()["revalidations"]
    assert lib.with_deadline(lib.read_file, m2.mnt / "e" / "g") == b"g-newer"
    assert m2.stats()["revalidations"] == before, "asked again after one answer"
    for bad in (m2.mnt / ".stoker", m2.mnt / ".." / "elsewhere"):
        r = lib.stoker("refresh", bad)
        assert r.returncode == 1 and r.stderr.count("\n") == 1, lib.describe(r)
    m2.unmount()


def test_a_change_seen_while_reading_makes_a_new_version(mounts, tmp_path):
    """A file cached in part, then replaced at the origin: the next read of its
    rest from the origin sees the change. No read mixes the versions, and the
    file is then read whole in its new version."""
    origin = tmp_path / "origin"
    origin.mkdir()
    old, new = os.urandom(8 * MIB), os.urandom(8 * MIB)
    (origin / "f").write_bytes(old)
    m = mounts.make(origin, args=NEVER + ["--prefetch", "0", "--prefetch-files", "0"])
    assert os.listdir(m.mnt) == ["f"]  # kept: the change must not look undone by it
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


def listings_asked(proxy):
    """LIST requests the proxy passed (the mount's one-key probe among them)."""
    return [t for m, t in proxy.targets if "list-type=2" in t]


@pytest.mark.skipif(not rs.have_moto(), reason="moto/boto3 are not installed")
def test_a_remount_lists_nothing_at_an_object_store(mounts, tmp_path):
    """The listings a mount read are kept in the index: a remount walks the
    tree, stats and reads cached files with no LIST; a key added since is not
    seen until a mount without never, which drops them."""
    with rs.aws_env("AKIASTOKERTEST", "never-secret"):
        server = rs.Moto(tmp_path / "moto")
        server.start()
        try:
            client = server.client()
            client.create_bucket(Bucket="never")
            rng = lib.seeded("revalidate-never-s3")
            data = {f"d{i}/f{j:02d}": rng.randbytes(100 + j) for i in range(3) for j in range(20)}
            data["top"] = rng.randbytes(5000)
            for k, body in data.items():
                client.put_object(Bucket="never", Key=f"p/{k}", Body=body)
            cache = tmp_path / "cache"
            with fault_proxy.running(server.port) as proxy:
                args = NEVER + ["--s3-endpoint", proxy.url]

                def walk(mnt):
                    seen = {}
                    for dirpath, _, files in os.walk(mnt):
                        for f in files:
                            p = os.path.join(dirpath, f)
                            seen[os.path.relpath(p, mnt)] = os.stat(p).st_size
                    return seen

                m = mounts.make("s3://never/p", cache=cache, args=args)
                want = {k: len(v) for k, v in data.items()}
                assert lib.with_deadline(walk, m.mnt) == want
                assert lib.with_deadline(lib.read_file, m.mnt / "d1" / "f07") == data["d1/f07"]
                assert m.stats()["kept_listings"] == 4, m.stats()
                m.unmount()
                asked = len(listings_asked(proxy))
                assert asked >= 4, proxy.targets

                client.put_object(Bucket="never", Key="p/d0/added", Body=b"new")
                m2 = mounts.make("s3://never/p", cache=cache, args=args)
                assert lib.with_deadline(walk, m2.mnt) == want, "a key added since shows"
                assert lib.with_deadline(lib.read_file, m2.mnt / "d1" / "f07") == data["d1/f07"]
                assert not (m2.mnt / "d0" / "added").exists()
                assert listings_asked(proxy)[asked:] == [], "the remount listed (or probed)"
                assert m2.stats()["errors"] == 0
                refresh(m2.mnt / "d0")
                assert sorted(os.listdir(m2.mnt / "d0")) == sorted(
                    [f"f{j:02d}" for j in range(20)] + ["added"])
                assert (m2.mnt / "d0" / "added").read_bytes() == b"new"
                listed = listings_asked(proxy)[asked:]
                assert listed, "the refreshed directory was not listed again"
                assert not [t for t in listed if "d1" in t or "d2" in t], listed
                m2.unmount()

                m3 = mounts.make("s3://never/p", cache=cache,
                                 args=NEVER[:-1] + ["60", "--s3-endpoint", proxy.url])
                assert m3.stats()["kept_listings"] == 0, m3.stats()
                assert (m3.mnt / "d0" / "added").read_bytes() == b"new"
                m3.unmount()
        finally:
            server.stop()


@pytest.mark.skipif(not rs.have_moto(), reason="moto/boto3 are not installed")
def test_a_remount_while_the_object_store_is_down_serves_what_is_kept(mounts, tmp_path):
    """With never and the root's listing kept, a mount starts while the
    endpoint is down: the tree as kept, cached files read, an uncached one
    fails with EIO. Without a kept root listing the mount fails as before."""
    with rs.aws_env("AKIASTOKERTEST", "never-secret"):
        server = rs.Moto(tmp_path / "moto")
        server.start()
        rng = lib.seeded("revalidate-never-down")
        data = {"d/cached": rng.randbytes(3000), "d/uncached": rng.randbytes(4000)}
        try:
            client = server.client()
            client.create_bucket(Bucket="never")
            for k, body in data.items():
                client.put_object(Bucket="never", Key=f"p/{k}", Body=body)
            cache = tmp_path / "cache"
            args = NEVER + ["--s3-endpoint", server.endpoint, "--origin-retries", "0",
                            "--origin-connect-timeout", "2"]
            m = mounts.make("s3://never/p", cache=cache, args=args)
            assert os.listdir(m.mnt) == ["d"]  # the root's listing, kept
            assert sorted(os.listdir(m.mnt / "d")) == ["cached", "uncached"]
            assert lib.with_deadline(lib.read_file, m.mnt / "d" / "cached") == data["d/cached"]
            m.unmount()
        finally:
            server.stop()
        m2 = mounts.make("s3://never/p", cache=cache, args=args)
        assert sorted(os.listdir(m2.mnt)) == ["d"]
        assert sorted(os.listdir(m2.mnt / "d")) == ["cached", "uncached"]
        assert os.stat(m2.mnt / "d" / "uncached").st_size == len(data["d/uncached"])
        assert lib.with_deadline(lib.read_file, m2.mnt / "d" / "cached") == data["d/cached"]
        with pytest.raises(OSError) as e:
            lib.with_deadline(lib.read_file, m2.mnt / "d" / "uncached", timeout=120)
        assert e.value.errno == errno.EIO
        assert "the root's listing is kept" in m2.log_path().read_text(errors="replace")
        m2.unmount()
        mnt = tmp_path / "mnt-fresh"
        mnt.mkdir()
        r = lib.mount_cmd_fails("s3://never/p", mnt, tmp_path / "fresh-cache", *args)
        assert r.returncode == 1 and "cannot reach" in r.stderr, lib.describe(r)
