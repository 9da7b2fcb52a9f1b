"""An HTTP(S) origin: nginx from Debian's packages, started by these tests
on loopback, serving a generated tree with range requests and autoindex
(JSON and HTML listings), or without listings and a --manifest.

Covers: byte-exact reads (sha256 and random preads, chunk-boundary sizes,
empty and 1-byte files, names that need URL encoding), both listing
formats and the manifest, 403 -> EACCES and 404 -> ENOENT, a changed file
seen after revalidation, the server killed mid-read and restarted (EIO or
right bytes, never a hang; cached data served while it is down; stat counts
origin errors), the server stopped (SIGSTOP: cached files are not asked
about per open while the origin backs off; recovery after SIGCONT), and bad
input refused at mount time in one line.
"""

import errno
import os
import re
import signal
import subprocess

import pytest

import remote_servers as rs
import stoker_testlib as lib
from stoker_testlib import CHUNK, MIB, with_deadline

pytestmark = pytest.mark.skipif(not rs.have_nginx(), reason="nginx is not installed")

SIZES = {"empty": 0, "one": 1, "4095": 4095, "chunk-1": CHUNK - 1, "chunk": CHUNK,
         "chunk+1": CHUNK + 1, "2chunk+1": 2 * CHUNK + 1, "3chunk+17": 3 * CHUNK + 17}
NAMES = ["with space", "percent%25 and %", "hash#and?query", "plus+amp&eq=",
         "日本語ファイル.txt", "café-ñ", "emoji_🚀.bin", "semi;colon,comma'quote"]
ARGS = ["--chunk-size", "1M", "--cache-size", "1G", "--revalidate", "0"]


def build_tree(root):
    rng = lib.seeded("http_origin.tree")
    for name, size in SIZES.items():
        lib.write_random(root / "sizes" / name, size, rng)
    d = root / "nested"
    for depth in range(5):
        d = d / f"level {depth}"
        lib.write_random(d / f"file{depth}", 1000 * depth + 1, rng)
    for i, n in enumerate(NAMES):
        lib.write_random(root / "names" / n, 1000 + i, rng)
    lib.write_random(root / "names" / "dir ü" / "inner ✓", 4242, rng)
    lib.write_random(root / "big", 12 * CHUNK + 5, rng)
    (root / "denied_file").write_bytes(b"nginx refuses this one\n")
    (root / "emptydir").mkdir()


def files_of(root):
    out = {}
    for dirpath, _, filenames in os.walk(root):
        for n in filenames:
            p = os.path.join(dirpath, n)
            out[os.path.relpath(p, root)] = os.path.getsize(p)
    return out


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("http_tree")
    build_tree(root)
    return root


@pytest.fixture(scope="module")
def nginx(tree, tmp_path_factory):
    server = rs.Nginx(tree, tmp_path_factory.mktemp("nginx"))
    try:
        yield server.start()
    finally:
        server.stop()


@pytest.fixture(scope="module", params=["json", "html"])
def mnt(request, module_mounts, nginx):
    return module_mounts.make(f"{nginx.url}/{request.param}/", args=ARGS)


def listing_of(root):
    """{relative dir: sorted entry names} for every directory under root."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        out[os.path.relpath(dirpath, root)] = sorted(dirnames + filenames)
    return out


def test_tree_listing_sizes_and_bytes(mnt, tree):
    got = with_deadline(listing_of, mnt.mnt)
    want = listing_of(tree)
    got["."] = sorted(n for n in got["."] if n != ".stoker")
    assert got == want

    def sizes():
        return {rel: os.path.getsize(os.path.join(mnt.mnt, rel)) for rel in readable}
    readable = {rel: size for rel, size in files_of(tree).items() if not rel.startswith("denied_")}
    assert with_deadline(sizes) == readable
    expected = {rel: lib.sha256_file(tree / rel) for rel in readable}
    assert not lib.check_hashes(mnt.mnt, expected)


def test_attributes_are_read_only(mnt, tree):
    st = with_deadline(os.stat, os.path.join(mnt.mnt, "sizes", "chunk"))
    assert st.st_mode == 0o100444
    assert st.st_size == CHUNK
    assert st.st_mtime == int((tree / "sizes" / "chunk").stat().st_mtime)
    assert with_deadline(os.stat, os.path.join(mnt.mnt, "nested")).st_mode == 0o40555


@pytest.mark.parametrize("name", list(SIZES))
def test_chunk_boundary_sizes(mnt, tree, name):
    got = with_deadline(lib.read_file, os.path.join(mnt.mnt, "sizes", name))
    assert len(got) == SIZES[name]
    assert got == (tree / "sizes" / name).read_bytes()


def test_random_preads(mnt, tree):
    rng = lib.seeded("http_origin.preads")
    bad = []
    for rel in ["big", "sizes/3chunk+17", "sizes/chunk+1", "sizes/one"]:
        bad += with_deadline(lib.random_preads, tree / rel, os.path.join(mnt.mnt, rel), 80, rng)
    assert not bad, bad[:10]


def test_reread_is_served_from_cache(mnt, tree):
    path = os.path.join(mnt.mnt, "sizes", "3chunk+17")
    with_deadline(lib.read_file, path)
    lib.drop_caches([path])
    before = mnt.stats()
    assert with_deadline(lib.read_file, path) == (tree / "sizes" / "3chunk+17").read_bytes()
    after = mnt.stats()
    assert after["origin_bytes_read"] == before["origin_bytes_read"], (before, after)


def test_403_is_eacces(mnt):
    with pytest.raises(OSError) as e:
        with_deadline(lib.read_file, os.path.join(mnt.mnt, "denied_file"))
    assert e.value.errno == errno.EACCES


def test_missing_is_enoent(mnt):
    with pytest.raises(OSError) as e:
        with_deadline(os.stat, os.path.join(mnt.mnt, "sizes", "no such file"))
    assert e.value.errno == errno.ENOENT


def test_manifest_lists_a_server_without_autoindex(mounts, nginx, tree, tmp_path):
    manifest = tmp_path / "manifest.txt"
    files = {rel: size for rel, size in files_of(tree).items() if not rel.startswith("denied_")}
    manifest.write_text("# made by the test\n" +
                        "".join(f"{rel} {size}\n" for rel, size in sorted(files.items())))
    m = mounts.make(f"{nginx.url}/plain/", args=ARGS + ["--manifest", manifest])
    top = with_deadline(os.listdir, m.mnt)
    assert sorted(n for n in top if n != ".stoker") == sorted(
        {rel.split("/")[0] for rel in files})
    expected = {rel: lib.sha256_file(tree / rel) for rel in files}
    assert not lib.check_hashes(m.mnt, expected)
    with pytest.raises(OSError) as e:
        with_deadline(os.stat, os.path.join(m.mnt, "denied_file"))
    assert e.value.errno == errno.ENOENT  # not in the manifest


def test_changed_file_is_seen_after_revalidation(mounts, nginx, tmp_path):
    # A tree of its own: the module's tree stays as built.
    root = nginx.root / "changing"
    root.mkdir(exist_ok=True)
    f = root / "f"
    lib.write_random(f, 2 * CHUNK + 3, lib.seeded("http_origin.v1"))
    m = mounts.make(f"{nginx.url}/json/changing/", args=ARGS)
    p = os.path.join(m.mnt, "f")
    assert with_deadline(lib.read_file, p) == f.read_bytes()
    v2 = lib.seeded("http_origin.v2").randbytes(3 * CHUNK + 7)
    tmp = root / ".f.new"
    tmp.write_bytes(v2)
    st = f.stat()
    os.utime(tmp, (st.st_atime + 5, st.st_mtime + 5))  # a new ETag even within a second
    os.rename(tmp, f)
    assert with_deadline(lib.read_file, p) == v2
    assert m.stats()["origin_changes"] >= 1
    os.unlink(f)
    with pytest.raises(OSError) as e:
        with_deadline(os.stat, p)
    assert e.value.errno == errno.ENOENT


def test_server_killed_mid_read_and_restarted(mounts, tree, tmp_path):
    server = rs.Nginx(tree, tmp_path / "nginx")
    try:
        server.start()
        m = mounts.make(f"{server.url}/json/", args=ARGS + ["--origin-retries", "2",
                                                           "--prefetch", "0"])
        cached = os.path.join(m.mnt, "sizes", "2chunk+1")
        want_cached = (tree / "sizes" / "2chunk+1").read_bytes()
        assert with_deadline(lib.read_file, cached) == want_cached
        big = os.path.join(m.mnt, "big")
        want = (tree / "big").read_bytes()

        def read_through_kill():
            outcomes = []
            fd = os.open(big, os.O_RDONLY)
            try:
                assert os.pread(fd, MIB, 0) == want[:MIB]
                server.kill()
                for off in range(MIB, len(want), MIB):
                    try:
                        got = os.pread(fd, MIB, off)
                        assert got == want[off:off + MIB], f"wrong bytes at {off}"
                        outcomes.append("data")
                    except OSError as e:
                        assert e.errno == errno.EIO, e
                        outcomes.append("EIO")
            finally:
                os.close(fd)
            return outcomes
        outcomes = with_deadline(read_through_kill)
        assert "EIO" in outcomes  # nothing past the first chunks was fetched yet

        # Down: what is cached is still served, and stat counts the errors.
        lib.drop_caches([cached])
        assert with_deadline(lib.read_file, cached) == want_cached
        assert m.stats()["origin_errors"] > 0

        server.start()
        assert with_deadline(lib.read_file, big) == want
    finally:
        server.stop()


@pytest.mark.parametrize("origin,why", [
    ("http://", "no host"),
    ("http://127.0.0.1:99999/", "bad port"),
    ("ftp://127.0.0.1/x", "unknown scheme"),
    ("http://user:hunter2@127.0.0.1:1/", "credentials in the URL"),
])
def test_bad_urls_are_refused(stoker_bin, tmp_path, origin, why):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = lib.mount_cmd_fails(origin, mnt, tmp_path / "cache")
    assert r.returncode != 0, lib.describe(r)
    assert why in r.stderr, lib.describe(r)
    assert len(r.stderr.strip().splitlines()) == 1, lib.describe(r)
    assert "hunter2" not in r.stderr
    assert not lib.is_mounted(mnt)


def test_unreachable_server_is_refused(stoker_bin, tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    port = rs.free_port()  # nothing listens there
    r = lib.mount_cmd_fails(f"http://127.0.0.1:{port}/", mnt, tmp_path / "cache",
                            "--origin-retries", "1")
    assert r.returncode != 0, lib.describe(r)
    assert "connect" in r.stderr.lower(), lib.describe(r)
    assert len(r.stderr.strip().splitlines()) == 1, lib.describe(r)
    assert not lib.is_mounted(mnt)


@pytest.mark.parametrize("path,why", [
    ("norange/", "range requests"),
    ("plain/", "no directory listing"),
    ("json/sizes/one/", "HTTP 404"),
])
def test_unusable_servers_are_refused(stoker_bin, nginx, tmp_path, path, why):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = lib.mount_cmd_fails(f"{nginx.url}/{path}", mnt, tmp_path / "cache")
    assert r.returncode != 0, lib.describe(r)
    assert why in r.stderr, lib.describe(r)
    assert len(r.stderr.strip().splitlines()) == 1, lib.describe(r)
    assert not lib.is_mounted(mnt)


def test_bad_manifest_is_refused(stoker_bin, nginx, tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    manifest = tmp_path / "manifest.txt"
    manifest.write_text("sizes/one 1\nsizes/one 1\n")
    r = lib.mount_cmd_fails(f"{nginx.url}/plain/", mnt, tmp_path / "cache",
                            "--manifest", manifest)
    assert r.returncode != 0, lib.describe(r)
    assert "manifest line 2" in r.stderr, lib.describe(r)
    assert not lib.is_mounted(mnt)


# --- Faults injected in front of nginx ---------------------------------------

@pytest.fixture
def proxy(nginx):
    from fault_proxy import running
    with running(nginx.port) as p:
        yield p


def test_5xx_and_429_are_retried(mounts, proxy, tree):
    from fault_proxy import Rule
    m = mounts.make(f"{proxy.url}/json/", args=ARGS + ["--prefetch", "0"])
    proxy.add(Rule(r"/sizes/chunk\+1$", 503, times=2, method="GET"))
    proxy.add(Rule(r"/sizes/2chunk\+1$", 429, times=1, method="GET"))
    proxy.add(Rule(r"/sizes/2chunk\+1$", 502, times=1, method="GET"))
    for name in ("chunk+1", "2chunk+1"):
        got = with_deadline(lib.read_file, os.path.join(m.mnt, "sizes", name))
        assert got == (tree / "sizes" / name).read_bytes(), name
    assert proxy.count("/json/sizes/chunk+1") >= 3  # HEADs, two failed GETs, the good ones


def test_persistent_5xx_gives_eio_not_a_hang(mounts, proxy):
    from fault_proxy import Rule
    m = mounts.make(f"{proxy.url}/json/", args=ARGS + ["--origin-retries", "2"])
    proxy.add(Rule(r"/sizes/3chunk\+17$", 500, method="GET"))
    with pytest.raises(OSError) as e:
        with_deadline(lib.read_file, os.path.join(m.mnt, "sizes", "3chunk+17"))
    assert e.value.errno == errno.EIO
    assert m.stats()["origin_errors"] > 0
    assert lib.pid_alive(m.pid)


def test_403_and_404_are_not_retried(mounts, proxy):
    from fault_proxy import Rule
    m = mounts.make(f"{proxy.url}/json/", args=ARGS)
    proxy.add(Rule(r"/sizes/4095$", 403))
    with pytest.raises(OSError) as e:
        with_deadline(os.stat, os.path.join(m.mnt, "sizes", "4095"))
    assert e.value.errno == errno.EACCES
    assert proxy.count("/json/sizes/4095") == 1
    proxy.add(Rule(r"/sizes/one$", 404))
    with pytest.raises(OSError) as e:
        with_deadline(os.stat, os.path.join(m.mnt, "sizes", "one"))
    assert e.value.errno == errno.ENOENT
    assert proxy.count("/json/sizes/one") == 1


def test_sequential_read_uses_ranged_gets_on_kept_alive_connections(mounts, tree, tmp_path):
    """A sequential reader makes the cache fetch ahead (--prefetch) with
    several ranged GETs, over connections that are reused (keep-alive)."""
    server = rs.Nginx(tree, tmp_path / "nginx")
    try:
        server.start()
        m = mounts.make(f"{server.url}/json/", args=ARGS + ["--prefetch", "8M"])
        want = (tree / "big").read_bytes()

        def read_in_order():
            # The kernel's read-ahead off: under load its parallel reads
            # could fetch every chunk as demand before the cache's prefetch
            # ran (prefetched_chunks 0 in a CI rehearsal).
            fd = os.open(os.path.join(m.mnt, "big"), os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
                parts = []
                while b := os.read(fd, 256 << 10):
                    parts.append(b)
                return b"".join(parts)
            finally:
                os.close(fd)
        assert with_deadline(read_in_order) == want
        gets = [e for e in server.access_log() if e[3] == "GET" and e[4] == "/json/big"]
        assert gets, server.access_log()
        assert all(status == 206 for _, _, status, _, _, _ in gets), gets
        assert all(rng.startswith("bytes=") for *_, rng in gets), gets
        assert len(gets) > 1
        everything = server.access_log()
        connections = {conn for conn, *_ in everything}
        assert len(connections) < len(everything), everything  # kept alive
        assert m.stats()["prefetched_chunks"] > 0
    finally:
        server.stop()


def test_stalled_transfer_gives_eio_not_a_hang(mounts, proxy, tree):
    from fault_proxy import Rule
    m = mounts.make(f"{proxy.url}/json/", args=ARGS + ["--origin-stall-timeout", "1",
                                                      "--origin-retries", "1",
                                                      "--prefetch", "0"])
    proxy.add(Rule(r"/sizes/2chunk\+1$", stall=True, method="GET"))

    def pread_first_page():
        fd = os.open(os.path.join(m.mnt, "sizes", "2chunk+1"), os.O_RDONLY)
        try:
            return os.pread(fd, 4096, 0)
        finally:
            os.close(fd)
    with pytest.raises(OSError) as e:
        with_deadline(pread_first_page, timeout=60)
    assert e.value.errno == errno.EIO
    proxy.rules.clear()  # the server answers again: the same file reads right
    got = with_deadline(lib.read_file, os.path.join(m.mnt, "sizes", "2chunk+1"))
    assert got == (tree / "sizes" / "2chunk+1").read_bytes()


def test_warm_wait_interrupted_leaves_the_warm_running(mounts, proxy, tree):
    """Ctrl-C on `stoker warm --wait` stops the waiting, not the warm: exit
    130, one line per daemon saying so, the job still running in --status,
    and finishing there (with the stalled file failed) on its own."""
    from fault_proxy import Rule
    m = mounts.make(f"{proxy.url}/json/", args=ARGS + ["--origin-stall-timeout", "8",
                                                      "--origin-retries", "0",
                                                      "--prefetch", "0"])
    stalled = Rule(r"/sizes/2chunk\+1$", stall=True, method="GET")
    proxy.add(stalled)
    waiter = subprocess.Popen([lib.STOKER_BIN, "warm", "--wait", str(m.mnt / "sizes")],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lib.wait_until(lambda: stalled.hits > 0, 60, what="the warm reaching the stalled file")
        waiter.send_signal(signal.SIGINT)
        out, err = waiter.communicate(timeout=60)
    finally:
        if waiter.poll() is None:
            waiter.kill()
            waiter.wait()
    assert waiter.returncode == 130, (out, err)
    assert "the warm goes on in the daemon" in err and "stoker warm --status" in err, err
    r = lib.stoker("warm", "--status", m.mnt)
    assert r.returncode == 0 and re.search(r"^job 1\s+running", r.stdout, re.M), lib.describe(r)
    # The daemon finishes the job by itself: the stalled file fails after the
    # stall timeout, every other file is warmed.
    lib.wait_until(lambda: re.search(r"^job 1\s+done", lib.stoker("warm", "--status", m.mnt).stdout,
                                     re.M), 60, what="the warm job done in the daemon")
    r = lib.stoker("warm", "--status", m.mnt)
    n = len(SIZES)
    assert f" {n - 1}/{n} files" in r.stdout and "1 not warmed" in r.stdout, lib.describe(r)
    assert "ETA" not in r.stdout, lib.describe(r)  # a finished job has none


class StoppableNginx(rs.Nginx):
    """An nginx of its own over d/{cached,uncached,changing}, stopped and
    continued with SIGSTOP/SIGCONT (stopped, it neither answers nor refuses)."""

    def __init__(self, tmp_path):
        root = tmp_path / "tree"
        rng = lib.seeded("http_origin.stopped")
        for name in ("cached", "uncached", "changing"):
            lib.write_random(root / "d" / name, 2 * CHUNK + 3, rng)
        super().__init__(root, tmp_path / "nginx")
        self.stopped = False

    def signal(self, sig):
        os.killpg(self.proc.pid, sig)
        self.stopped = sig == signal.SIGSTOP

    def change(self, name, data):
        f = self.root / "d" / name
        tmp = f.with_name("." + f.name + ".new")
        tmp.write_bytes(data)
        st = f.stat()
        os.utime(tmp, (st.st_atime + 5, st.st_mtime + 5))  # a new ETag even within a second
        os.rename(tmp, f)


@pytest.fixture
def stoppable(tmp_path):
    server = StoppableNginx(tmp_path)
    try:
        yield server.start()
    finally:
        if server.stopped:
            server.signal(signal.SIGCONT)
        server.stop()


STOPPED_ARGS = ARGS + ["--origin-stall-timeout", "1", "--origin-retries", "1", "--prefetch", "0",
                       "--prefetch-files", "0"]
PROBE_ARGS = ["--origin-stall-timeout", "30", "--origin-retries", "1", "--origin-backoff", "1",
              "--prefetch", "0", "--prefetch-files", "0"]
V2 = lib.seeded("http_origin.stopped.v2").randbytes(3 * CHUNK + 7)


def test_stopped_server_is_not_asked_per_open_of_a_cached_file(mounts, stoppable):
    """The first request that times out starts the origin's back-off; then
    lookups, opens and listings of what the cache holds are answered
    without a request each (counted at a proxy in front of the server),
    while an uncached read still asks and ends in EIO. The first answer
    after SIGCONT ends the back-off, and a file changed meanwhile is read
    new."""
    from fault_proxy import running
    root = stoppable.root
    with running(stoppable.port) as proxy:
        # A back-off longer than the test: no probe, so the counts are exact.
        m = mounts.make(f"{proxy.url}/json/", args=STOPPED_ARGS + ["--origin-backoff", "3600"])
        d = os.path.join(m.mnt, "d")
        cached, uncached, changing = (os.path.join(d, n)
                                      for n in ("cached", "uncached", "changing"))
        want = (root / "d" / "cached").read_bytes()
        old = (root / "d" / "changing").read_bytes()
        names = sorted(with_deadline(os.listdir, d))
        assert with_deadline(lib.read_file, cached) == want
        assert with_deadline(lib.read_file, changing) == old

        stoppable.signal(signal.SIGSTOP)
        # The first lookup waits out the timeouts, then is served from the cache.
        assert with_deadline(lib.read_file, cached, timeout=120) == want
        asked = sum(proxy.seen.values())
        for _ in range(20):
            assert with_deadline(lib.read_file, cached, timeout=120) == want
            assert with_deadline(os.stat, cached, timeout=120).st_size == len(want)
            assert sorted(with_deadline(os.listdir, d, timeout=120)) == names
        assert sum(proxy.seen.values()) == asked, proxy.seen
        stats = m.stats()
        assert stats["origin_unreachable"] is True
        assert stats["revalidations_skipped"] >= 40

        with pytest.raises(OSError) as e:  # nothing cached: it asks, and fails
            with_deadline(lib.read_file, uncached, timeout=120)
        assert e.value.errno == errno.EIO
        assert sum(proxy.seen.values()) > asked

        stoppable.change("changing", V2)
        assert with_deadline(lib.read_file, changing, timeout=120) == old  # the held version

        stoppable.signal(signal.SIGCONT)
        # An uncached read reaches the server: the back-off ends at once.
        assert with_deadline(lib.read_file, uncached) == (root / "d" / "uncached").read_bytes()
        assert m.stats()["origin_unreachable"] is False
        assert with_deadline(lib.read_file, changing) == V2
        assert m.stats()["origin_unreachable_episodes"] == 1


def test_backoff_probe_finds_a_stopped_server_back(mounts, stoppable):
    """Only cached files are read while the server is stopped and after it
    is back: once a back-off has passed one open asks again (a probe), so a
    file changed meanwhile is read new after SIGCONT without any other
    traffic ending the back-off."""
    m = mounts.make(f"{stoppable.url}/json/", args=STOPPED_ARGS + ["--origin-backoff", "1"])
    changing = os.path.join(m.mnt, "d", "changing")
    old = (stoppable.root / "d" / "changing").read_bytes()
    assert with_deadline(lib.read_file, changing) == old
    stoppable.signal(signal.SIGSTOP)
    assert with_deadline(lib.read_file, changing, timeout=120) == old
    stoppable.change("changing", V2)
    stoppable.signal(signal.SIGCONT)
    lib.wait_until(lambda: with_deadline(lib.read_file, changing) == V2, timeout=120,
                   interval=0.5, what="the changed file read new")
    assert m.stats()["origin_unreachable"] is False


def test_no_reader_waits_on_a_probe_of_a_stalled_server(mounts, stoppable):
    """While the server is unreachable, each back-off ends with a probe,
    which stoker sends from a thread of its own (see
    fault_proxy.check_no_reader_waits_on_a_probe)."""
    from fault_proxy import check_no_reader_waits_on_a_probe, running
    with running(stoppable.port) as proxy:
        m = mounts.make(f"{proxy.url}/json/", args=ARGS + PROBE_ARGS)
        check_no_reader_waits_on_a_probe(proxy, m, os.path.join(m.mnt, "d", "cached"),
                                         (stoppable.root / "d" / "cached").read_bytes())


def test_server_that_never_answers_is_refused_at_mount(stoker_bin, tmp_path):
    import socket
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)  # accepts connections (the kernel does), never answers
    try:
        mnt = tmp_path / "mnt"
        mnt.mkdir()
        r = lib.mount_cmd_fails(f"http://127.0.0.1:{listener.getsockname()[1]}/", mnt,
                                tmp_path / "cache", "--origin-stall-timeout", "1")
        assert r.returncode != 0, lib.describe(r)
        assert "timed out" in r.stderr.lower() or "timeout" in r.stderr.lower(), lib.describe(r)
        assert len(r.stderr.strip().splitlines()) == 1, lib.describe(r)
        assert not lib.is_mounted(mnt)
    finally:
        listener.close()
