"""An S3 origin: moto's standalone S3 server (PyPI), started by these tests
on loopback; boto3 only puts the objects there.

Covers: byte-exact reads (sha256 and random preads, chunk-boundary sizes,
empty and 1-byte objects, keys with blanks, unicode and characters that need
URL encoding), nested prefixes and keys no path can name, listings of more
keys than one page (1000 by default, and a page size of 7), an object
changed between revalidations (new ETag, new content) and deleted (ENOENT),
the server killed mid-read and restarted, the server stopped (SIGSTOP:
cached objects are not asked about per open while the origin backs off),
and bad input refused at mount
time in one line (no bucket, no prefix, no server, bad URL, unknown keys),
with the secret key in no message, log or stat output.
"""

import errno
import io
import json
import os
import signal
import time

import pytest

import remote_servers as rs
import stoker_testlib as lib
from stoker_testlib import CHUNK, MIB, with_deadline

pytestmark = pytest.mark.skipif(not rs.have_moto(), reason="moto/boto3 are not installed")

BUCKET = "stoker-data"
PREFIX = "datasets/v1"
SECRET = "secret-never-shown-0123456789"
SIZES = {"empty": 0, "one": 1, "4097": 4097, "chunk-1": CHUNK - 1, "chunk": CHUNK,
         "chunk+1": CHUNK + 1, "2chunk": 2 * CHUNK, "3chunk+17": 3 * CHUNK + 17}
NAMES = ["with space", "plus+and&amp", "percent%20not-an-escape", "hash#q?x=1",
         "日本語ファイル.txt", "café-ñ", "emoji_🚀.bin", "quote'\"<tag>"]
MANY = 1100  # more than one ListObjectsV2 page of 1000
ARGS = ["--chunk-size", "1M", "--cache-size", "1G", "--revalidate", "0"]


def objects():
    """{key below PREFIX: bytes} of the visible tree."""
    rng = lib.seeded("s3_origin.objects")
    out = {}
    for name, size in SIZES.items():
        out[f"sizes/{name}"] = rng.randbytes(size)
    out["nested/a/b/c/d/deep"] = rng.randbytes(5000)
    out["nested/a/side"] = rng.randbytes(10)
    for i, n in enumerate(NAMES):
        out[f"names/{n}"] = rng.randbytes(100 + i)
    out["names/dir ü/inner ✓"] = rng.randbytes(4242)
    for i in range(MANY):
        out[f"many/k{i:05d}"] = b"%d\n" % i
    out["big"] = rng.randbytes(12 * CHUNK + 5)
    out["withmarker/f"] = b"f\n"
    return out


# Keys that no path can name: stoker leaves them out of listings (a '..'
# key must never become a name that walks out of the tree).
HIDDEN_KEYS = ["withmarker/", "odd//double-slash", "dots/./x", "dots/../escape", "dotdot/..",
               "up/../../outside"]


def put_all(client, objs):
    client.create_bucket(Bucket=BUCKET)
    for key, data in objs.items():
        client.put_object(Bucket=BUCKET, Key=f"{PREFIX}/{key}", Body=data)
    for key in HIDDEN_KEYS:
        client.put_object(Bucket=BUCKET, Key=f"{PREFIX}/{key}", Body=b"hidden")
    client.put_object(Bucket=BUCKET, Key="outside-the-prefix", Body=b"not shown")


@pytest.fixture(scope="module")
def aws_env():
    with rs.aws_env("AKIASTOKERTEST", SECRET):
        yield


@pytest.fixture(scope="module")
def objs():
    return objects()


@pytest.fixture(scope="module")
def moto(aws_env, objs, tmp_path_factory):
    server = rs.Moto(tmp_path_factory.mktemp("moto"))
    try:
        server.start()
        put_all(server.client(), objs)
        yield server
    finally:
        server.stop()


def s3_args(server, *extra):
    return ARGS + ["--s3-endpoint", server.endpoint, *extra]


@pytest.fixture(scope="module", params=["page1000", "page7"])
def mnt(request, module_mounts, moto):
    extra = ["--s3-page-size", "7"] if request.param == "page7" else []
    return module_mounts.make(f"s3://{BUCKET}/{PREFIX}", args=s3_args(moto, *extra))


def expected_listing(objs):
    dirs = {".": set()}
    for key in objs:
        parts = key.split("/")
        for i in range(len(parts)):
            d = "/".join(parts[:i]) or "."
            dirs.setdefault(d, set()).add(parts[i])
    return {d: sorted(names) for d, names in dirs.items()}


def listing_of(root):
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        out[rel] = sorted(n for n in dirnames + filenames if not (rel == "." and n == ".stoker"))
    return out


def sha(data):
    import hashlib
    return hashlib.sha256(data).hexdigest()


def test_listing_is_the_prefix_tree(mnt, objs):
    want = expected_listing(objs)
    # The directories of the hidden keys exist; the keys themselves do not.
    hidden_dirs = ["odd", "dots", "dotdot", "up"]
    want["."] = sorted(want["."] + hidden_dirs)
    for d in hidden_dirs:
        want[d] = []
    assert with_deadline(listing_of, mnt.mnt) == want


def test_many_keys_list_across_pages(mnt):
    names = with_deadline(os.listdir, os.path.join(mnt.mnt, "many"))
    assert sorted(names) == [f"k{i:05d}" for i in range(MANY)]


def test_sizes_and_bytes(mnt, objs):
    def sizes():
        return {k: os.path.getsize(os.path.join(mnt.mnt, k)) for k in objs}
    assert with_deadline(sizes) == {k: len(v) for k, v in objs.items()}
    bad = lib.check_hashes(mnt.mnt, {k: sha(v) for k, v in objs.items()
                                     if not k.startswith("many/")})
    assert not bad, bad[:10]


@pytest.mark.parametrize("name", list(SIZES))
def test_chunk_boundary_sizes(mnt, objs, name):
    got = with_deadline(lib.read_file, os.path.join(mnt.mnt, "sizes", name))
    assert got == objs[f"sizes/{name}"]


def test_random_preads(mnt, objs, tmp_path):
    rng = lib.seeded("s3_origin.preads")
    bad = []
    for key in ["big", "sizes/3chunk+17", "sizes/chunk+1", "sizes/one"]:
        local = tmp_path / key.replace("/", "_")
        local.write_bytes(objs[key])
        bad += with_deadline(lib.random_preads, local, os.path.join(mnt.mnt, key), 80, rng)
    assert not bad, bad[:10]


def test_attributes(mnt, objs):
    st = with_deadline(os.stat, os.path.join(mnt.mnt, "sizes", "chunk"))
    assert st.st_mode == 0o100444
    assert st.st_size == CHUNK
    assert st.st_mtime > 0
    assert with_deadline(os.stat, os.path.join(mnt.mnt, "nested", "a")).st_mode == 0o40555


def test_missing_key_is_enoent(mnt):
    for rel in ["sizes/nope", "nope/deeper", "withmarker/nope"]:
        with pytest.raises(OSError) as e:
            with_deadline(os.stat, os.path.join(mnt.mnt, rel))
        assert e.value.errno == errno.ENOENT, rel


def test_secret_is_in_no_output(mnt):
    with_deadline(lib.read_file, os.path.join(mnt.mnt, "sizes", "chunk+1"))
    raw = with_deadline(lib.read_file, mnt.stats_path)
    assert SECRET.encode() not in raw
    assert SECRET not in mnt.log_path().read_text(errors="replace")
    assert json.loads(raw)["origin"].startswith(f"s3://{BUCKET}/{PREFIX}/")


def test_changed_object_is_seen_after_revalidation(mounts, moto):
    client = moto.client()
    key = f"{PREFIX}/changing/f"
    v1 = lib.seeded("s3.v1").randbytes(2 * CHUNK + 3)
    client.put_object(Bucket=BUCKET, Key=key, Body=v1)
    m = mounts.make(f"s3://{BUCKET}/{PREFIX}/changing", args=s3_args(moto))
    p = os.path.join(m.mnt, "f")
    assert with_deadline(lib.read_file, p) == v1
    v2 = lib.seeded("s3.v2").randbytes(2 * CHUNK + 3)  # same size: only the ETag tells
    client.put_object(Bucket=BUCKET, Key=key, Body=v2)
    assert with_deadline(lib.read_file, p) == v2
    assert m.stats()["origin_changes"] >= 1
    client.delete_object(Bucket=BUCKET, Key=key)
    with pytest.raises(OSError) as e:
        with_deadline(os.stat, p)
    assert e.value.errno == errno.ENOENT


def test_keys_xml_cannot_carry_are_listed_and_read(mounts, moto, proxy):
    """Listings ask for encoding-type=url: a key holding a control character
    (which XML 1.0 cannot carry), '+' or a space is listed and read as it is."""
    client = moto.client()
    names = ["ctl\x01char", "plus+sign", "two  spaces", "pct%41"]
    for i, n in enumerate(names):
        client.put_object(Bucket=BUCKET, Key=f"{PREFIX}/odd/{n}", Body=f"body {i}".encode())
    m = mounts.make(f"s3://{BUCKET}/{PREFIX}/odd", args=ARGS + ["--s3-endpoint", proxy.url])
    assert sorted(with_deadline(os.listdir, m.mnt)) == sorted(names)
    for i, n in enumerate(names):
        assert with_deadline(lib.read_file, os.path.join(m.mnt, n)) == f"body {i}".encode(), n
    # Every listing the proxy saw asked for it.
    listings = [t for method, t in proxy.targets if method == "GET" and "list-type=2" in t]
    assert listings and all("encoding-type=url" in t for t in listings), listings


def test_a_view_of_a_reuploaded_object_is_decoded_again(mounts, moto):
    """Same size and (most likely) the same Last-Modified second: only the
    ETag tells the raw versions apart, and so the view file's (bug: a view
    file's identity compared no ETag, and the old pixels were served)."""
    np = pytest.importorskip("numpy")
    pytest.importorskip("PIL")
    import view_data as vd
    client = moto.client()
    key = f"{PREFIX}/viewed/img.jpg"
    a = vd.jpeg_bytes(vd.make_image(64, 48, seed=1), quality=90)
    b = vd.jpeg_bytes(vd.make_image(64, 48, seed=2), quality=90)
    n = max(len(a), len(b))
    a, b = a + b"\0" * (n - len(a)), b + b"\0" * (n - len(b))  # after EOI: ignored
    client.put_object(Bucket=BUCKET, Key=f"{PREFIX}/viewed/other", Body=b"x")
    m = mounts.make(f"s3://{BUCKET}/{PREFIX}/viewed",
                    args=s3_args(moto, "--view", "d:dct=accurate", "--decoder", "cpu",
                                 "--prefetch-files", "0"))
    # Both versions within one second (Last-Modified has seconds): from the
    # start of one, the upload, a read of its view and the next upload take
    # a fraction of it.
    time.sleep(1 - time.time() % 1)
    client.put_object(Bucket=BUCKET, Key=key, Body=a)
    p = os.path.join(m.mnt, ".d", "img.jpg.npy")
    got = np.load(io.BytesIO(with_deadline(lib.read_file, p)))
    assert np.array_equal(got, vd.decode_like_libjpeg(a))
    client.put_object(Bucket=BUCKET, Key=key, Body=b)
    got = np.load(io.BytesIO(with_deadline(lib.read_file, p)))
    assert np.array_equal(got, vd.decode_like_libjpeg(b))
    assert with_deadline(lib.read_file, os.path.join(m.mnt, "img.jpg")) == b


def test_object_changed_under_an_open_file_never_mixes_versions(mounts, moto):
    client = moto.client()
    key = f"{PREFIX}/midread/f"
    v1 = lib.seeded("s3.mid.v1").randbytes(16 * CHUNK)
    v2 = lib.seeded("s3.mid.v2").randbytes(16 * CHUNK)
    client.put_object(Bucket=BUCKET, Key=key, Body=v1)
    m = mounts.make(f"s3://{BUCKET}/{PREFIX}/midread", args=s3_args(moto, "--prefetch", "0"))
    p = os.path.join(m.mnt, "f")

    def read_across_change():
        fd = os.open(p, os.O_RDONLY)
        try:
            assert os.pread(fd, CHUNK, 0) == v1[:CHUNK]
            client.put_object(Bucket=BUCKET, Key=key, Body=v2)
            for off in range(CHUNK, len(v1), CHUNK):
                try:
                    got = os.pread(fd, CHUNK, off)
                except OSError as e:
                    assert e.errno == errno.ESTALE, e
                    return "ESTALE"
                assert got == v1[off:off + CHUNK], f"bytes of another version at {off}"
            return "old"
        finally:
            os.close(fd)
    # Old bytes (what kernel read-ahead fetched before the change) or ESTALE,
    # never new ones; with 16 chunks the read reaches an unfetched one.
    assert with_deadline(read_across_change) in ("ESTALE", "old")
    assert with_deadline(lib.read_file, p) == v2


def test_server_killed_mid_read_and_restarted(aws_env, mounts, objs, tmp_path):
    server = rs.Moto(tmp_path / "moto")
    try:
        server.start()
        subset = {k: v for k, v in objs.items() if k in ("big", "sizes/2chunk")}
        put_all(server.client(), subset)
        m = mounts.make(f"s3://{BUCKET}/{PREFIX}",
                        args=s3_args(server, "--origin-retries", "2", "--prefetch", "0"))
        cached = os.path.join(m.mnt, "sizes", "2chunk")
        assert with_deadline(lib.read_file, cached) == objs["sizes/2chunk"]
        big = os.path.join(m.mnt, "big")
        want = objs["big"]

        def read_through_kill():
            outcomes = []
            fd = os.open(big, os.O_RDONLY)
            try:
                assert os.pread(fd, MIB, 0) == want[:MIB]
                server.kill()
                for off in range(MIB, len(want), MIB):
                    try:
                        assert os.pread(fd, MIB, off) == want[off:off + MIB], off
                        outcomes.append("data")
                    except OSError as e:
                        assert e.errno == errno.EIO, e
                        outcomes.append("EIO")
            finally:
                os.close(fd)
            return outcomes
        assert "EIO" in with_deadline(read_through_kill)

        lib.drop_caches([cached])
        assert with_deadline(lib.read_file, cached) == objs["sizes/2chunk"]
        assert m.stats()["origin_errors"] > 0

        # moto keeps objects in memory: the restarted server gets them again
        # (same bytes, new Last-Modified: a new version to the cache).
        server.start()
        put_all(server.client(), subset)
        assert with_deadline(lib.read_file, big) == want
    finally:
        server.stop()


@pytest.mark.parametrize("origin,why", [
    ("s3://", "no host"),
    ("s3://ab/x", "not a bucket name"),
    (f"s3://no-such-bucket/{PREFIX}", "does not exist"),
    (f"s3://{BUCKET}/no/such/prefix", "no objects under the prefix"),
])
def test_bad_input_is_refused(stoker_bin, moto, tmp_path, origin, why):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = lib.mount_cmd_fails(origin, mnt, tmp_path / "cache", "--s3-endpoint", moto.endpoint)
    assert r.returncode != 0, lib.describe(r)
    assert why in r.stderr, lib.describe(r)
    assert len(r.stderr.strip().splitlines()) == 1, lib.describe(r)
    assert SECRET not in r.stderr
    assert not lib.is_mounted(mnt)


def test_endpoint_not_answering_is_refused(stoker_bin, aws_env, tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = lib.mount_cmd_fails(f"s3://{BUCKET}/x", mnt, tmp_path / "cache", "--s3-endpoint",
                            f"http://127.0.0.1:{rs.free_port()}", "--origin-retries", "1")
    assert r.returncode != 0, lib.describe(r)
    assert "cannot reach" in r.stderr, lib.describe(r)
    assert len(r.stderr.strip().splitlines()) == 1, lib.describe(r)
    assert not lib.is_mounted(mnt)


def test_unknown_keys_are_refused(stoker_bin, aws_env, tmp_path):
    """moto with its IAM checks on: keys it never issued get 403."""
    server = rs.Moto(tmp_path / "moto", auth=True)
    try:
        server.start()
        mnt = tmp_path / "mnt"
        mnt.mkdir()
        # A refused mount removes the cache dir it made, and its log with it:
        # this one logs elsewhere.
        log_file = tmp_path / "mount.log"
        r = lib.mount_cmd_fails(f"s3://{BUCKET}/x", mnt, tmp_path / "cache",
                                "--s3-endpoint", server.endpoint, "--log-file", log_file)
        assert r.returncode != 0, lib.describe(r)
        assert "access denied" in r.stderr, lib.describe(r)
        assert "check the credentials (environment)" in r.stderr, lib.describe(r)
        assert SECRET not in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, lib.describe(r)
        assert not lib.is_mounted(mnt)
        log = log_file.read_text(errors="replace")
        assert "access denied" in log and SECRET not in log
    finally:
        server.stop()


# --- Faults injected in front of moto ----------------------------------------

SLOW_DOWN = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
             b"<Message>Please reduce your request rate.</Message></Error>")
ACCESS_DENIED = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code>'
                 b"<Message>Access Denied</Message></Error>")


@pytest.fixture
def proxy(moto):
    from fault_proxy import running
    with running(moto.port) as p:
        yield p


def test_slow_down_and_5xx_are_retried(mounts, proxy, objs):
    from fault_proxy import Rule
    m = mounts.make(f"s3://{BUCKET}/{PREFIX}",
                    args=ARGS + ["--s3-endpoint", proxy.url, "--prefetch", "0"])
    proxy.add(Rule(r"/sizes/chunk\+1$", 503, times=2, body=SLOW_DOWN, method="GET"))
    proxy.add(Rule(r"/sizes/2chunk$", 500, times=1, method="GET"))
    proxy.add(Rule(r"/nested/a$", 503, times=1, body=SLOW_DOWN))  # a listing or HEAD
    for key in ("sizes/chunk+1", "sizes/2chunk", "nested/a/side"):
        assert with_deadline(lib.read_file, os.path.join(m.mnt, key)) == objs[key], key
    assert proxy.count(f"/{BUCKET}/{PREFIX}/sizes/chunk+1") >= 3


def test_no_reader_waits_on_a_probe_of_a_stalled_endpoint(mounts, proxy, objs):
    """While the endpoint is unreachable, each back-off ends with a probe (a
    one-key listing, signed when sent), from a thread of stoker's own (see
    fault_proxy.check_no_reader_waits_on_a_probe)."""
    from fault_proxy import check_no_reader_waits_on_a_probe
    m = mounts.make(f"s3://{BUCKET}/{PREFIX}", args=ARGS + [
        "--s3-endpoint", proxy.url, "--origin-stall-timeout", "30", "--origin-retries", "1",
        "--origin-backoff", "1", "--prefetch", "0", "--prefetch-files", "0"])
    check_no_reader_waits_on_a_probe(proxy, m, os.path.join(m.mnt, "sizes", "4097"),
                                     objs["sizes/4097"])


def test_403_is_eacces_and_not_retried(mounts, proxy):
    from fault_proxy import Rule
    m = mounts.make(f"s3://{BUCKET}/{PREFIX}", args=ARGS + ["--s3-endpoint", proxy.url])
    proxy.add(Rule(r"/sizes/4097$", 403, body=ACCESS_DENIED))
    with pytest.raises(OSError) as e:
        with_deadline(os.stat, os.path.join(m.mnt, "sizes", "4097"))
    assert e.value.errno == errno.EACCES
    assert proxy.count(f"/{BUCKET}/{PREFIX}/sizes/4097") == 1


def test_persistent_slow_down_gives_eio_not_a_hang(mounts, proxy):
    from fault_proxy import Rule
    m = mounts.make(f"s3://{BUCKET}/{PREFIX}",
                    args=ARGS + ["--s3-endpoint", proxy.url, "--origin-retries", "2"])
    proxy.add(Rule(r"/big$", 503, body=SLOW_DOWN, method="GET"))
    with pytest.raises(OSError) as e:
        with_deadline(lib.read_file, os.path.join(m.mnt, "big"))
    assert e.value.errno == errno.EIO
    assert m.stats()["origin_errors"] > 0
    assert lib.pid_alive(m.pid)


def test_stalling_server_gives_eio_while_cached_data_is_served(mounts, proxy, objs):
    """A server that answers every GET with headers and then nothing (a hung
    S3 endpoint): cached objects are still served, uncached reads fail
    with EIO after --origin-stall-timeout instead of hanging, and reads work
    again once it answers."""
    from fault_proxy import Rule
    m = mounts.make(f"s3://{BUCKET}/{PREFIX}",
                    args=ARGS + ["--s3-endpoint", proxy.url, "--origin-stall-timeout", "1",
                                 "--origin-retries", "1", "--prefetch", "0"])
    cached = os.path.join(m.mnt, "sizes", "2chunk")
    assert with_deadline(lib.read_file, cached) == objs["sizes/2chunk"]
    big = os.path.join(m.mnt, "big")
    with_deadline(os.stat, big)  # known, not cached
    # Every GET (objects and listings) stalls. HEADs are left alone: the
    # proxy's stall sends the headers, which is a whole answer to a HEAD.
    proxy.add(Rule(r".", stall=True, method="GET"))
    lib.drop_caches([cached])
    assert with_deadline(lib.read_file, cached) == objs["sizes/2chunk"]
    with pytest.raises(OSError) as e:
        with_deadline(lib.read_file, big)
    assert e.value.errno == errno.EIO
    assert m.stats()["origin_errors"] > 0
    proxy.rules.clear()
    assert with_deadline(lib.read_file, big) == objs["big"]


def test_stopped_server_is_not_asked_per_open_of_a_cached_object(aws_env, mounts, tmp_path):
    """moto stopped (SIGSTOP): after the first request that times out,
    lookups, opens and listings of what the cache holds are answered
    without a request each (counted at a proxy in front of moto); an
    uncached object still ends in EIO; after SIGCONT it reads right."""
    from fault_proxy import running
    server = rs.Moto(tmp_path / "moto")
    rng = lib.seeded("s3_origin.stopped")
    data = {"d/cached": rng.randbytes(2 * CHUNK + 3), "d/uncached": rng.randbytes(CHUNK + 1)}
    stopped = False
    try:
        server.start()
        client = server.client()
        client.create_bucket(Bucket=BUCKET)
        for key, body in data.items():
            client.put_object(Bucket=BUCKET, Key=f"{PREFIX}/{key}", Body=body)
        with running(server.port) as proxy:
            m = mounts.make(f"s3://{BUCKET}/{PREFIX}", args=ARGS + [
                "--s3-endpoint", proxy.url, "--origin-stall-timeout", "1", "--origin-retries",
                "1", "--prefetch", "0", "--prefetch-files", "0", "--origin-backoff", "3600"])
            d = os.path.join(m.mnt, "d")
            cached, uncached = os.path.join(d, "cached"), os.path.join(d, "uncached")
            names = sorted(with_deadline(os.listdir, d))
            assert with_deadline(lib.read_file, cached) == data["d/cached"]

            os.killpg(server.proc.pid, signal.SIGSTOP)
            stopped = True
            assert with_deadline(lib.read_file, cached, timeout=120) == data["d/cached"]
            asked = sum(proxy.seen.values())
            for _ in range(10):
                assert with_deadline(lib.read_file, cached, timeout=120) == data["d/cached"]
                assert sorted(with_deadline(os.listdir, d, timeout=120)) == names
            assert sum(proxy.seen.values()) == asked, proxy.seen
            assert m.stats()["origin_unreachable"] is True
            with pytest.raises(OSError) as e:
                with_deadline(lib.read_file, uncached, timeout=120)
            assert e.value.errno == errno.EIO

            os.killpg(server.proc.pid, signal.SIGCONT)
            stopped = False
            assert with_deadline(lib.read_file, uncached) == data["d/uncached"]
            assert m.stats()["origin_unreachable"] is False
    finally:
        if stopped:
            os.killpg(server.proc.pid, signal.SIGCONT)
        server.stop()
