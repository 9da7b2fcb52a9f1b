"""Remote origins over a slow link: the server (nginx, moto) in a network
namespace of the test's own behind a veth pair, and a 5 ms round trip at
1 Gbit/s made by bench/slowlink.cc (this kernel has no netem; see
slow_link.py).

What is checked is where the reader's bytes came from and how many requests
were in flight, never how long anything took: with prefetch, a sequential
reader finds nearly every chunk already fetched ahead of it (the daemon
counts prefetched chunks), with several ranged GETs on the link at once (the
link counts the connections carrying bytes at the same moment); without
prefetch every chunk is a fetch the reader waits for, one GET at a time.
The reader turns the kernel's own read-ahead off for its file (it would
also run ahead, in parallel FUSE reads), so that what runs ahead of it is
stoker's prefetch alone. Bytes are compared with what the server holds.
"""

import hashlib
import os
import time

import pytest

import remote_servers as rs
import slow_link
import stoker_testlib as lib
from stoker_testlib import CHUNK, MIB, with_deadline

pytestmark = pytest.mark.skipif(not slow_link.can_make_namespaces(),
                                reason="needs root and iproute2 for a network namespace")

SIZE = 48 * MIB + 12345
# moto answers a ranged GET by copying the whole object: the S3 object is smaller.
S3_SIZE = 24 * MIB + 7
ARGS = ["--chunk-size", "1M", "--cache-size", "1G", "--prefetch-files", "0"]


@pytest.fixture(scope="module")
def netns():
    slow_link.clear_stale()
    ns = slow_link.Namespace()
    try:
        yield ns.create()
    finally:
        ns.delete()


@pytest.fixture(scope="module")
def slowlink_bin(tmp_path_factory):
    return slow_link.build(tmp_path_factory.mktemp("slowlink"))


@pytest.fixture(scope="module")
def data():
    return lib.seeded("slow_link.data").randbytes(SIZE)


@pytest.fixture(scope="module")
def nginx(netns, data, tmp_path_factory):
    if not rs.have_nginx():
        pytest.skip("nginx is not installed")
    root = tmp_path_factory.mktemp("slow_tree")
    (root / "stream.tfrecord").write_bytes(data)
    server = rs.Nginx(root, tmp_path_factory.mktemp("nginx"), netns=netns)
    try:
        yield server.start()
    finally:
        server.stop()


@pytest.fixture
def link(slowlink_bin):
    made = []

    def make(server_host, server_port):
        made.append(slow_link.SlowLink(slowlink_bin, server_host, server_port).start())
        return made[-1]
    yield make
    for lk in made:
        lk.stop()


def read_stream(path, block=256 << 10):
    """A TFRecordDataset-like stream: one reader, 256 KiB reads, in order,
    with the kernel's read-ahead off for the file (POSIX_FADV_RANDOM), so
    that each read reaches the daemon as it is made and what runs ahead of
    the reader is stoker's prefetch alone. Returns the bytes' sha256."""
    h = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        while b := os.read(fd, block):
            h.update(b)
    finally:
        os.close(fd)
    return h.hexdigest()


def stream_through(mounts, link, server, mount_args, name, want, prefetch):
    """Mounts through a fresh link to server (mount_args(link URL) gives the
    origin and its flags) and reads `name` once; returns (stats, link
    counts, seconds). The seconds are reported, never checked."""
    lk = link(server.host, server.port)
    origin, extra = mount_args(lk.url)
    m = mounts.make(origin, args=ARGS + ["--prefetch", prefetch, *extra])
    t = time.monotonic()
    got = with_deadline(read_stream, os.path.join(m.mnt, name))
    secs = time.monotonic() - t
    assert got == hashlib.sha256(want).hexdigest()
    stats = m.stats()
    m.unmount()
    return stats, lk.stop(), secs


def check_prefetch_hides_latency(on, off, size, in_flight):
    """in_flight: the fewest GETs that must have been on the link at once
    with prefetch (moto, one Python process, serves fewer at a time than
    nginx)."""
    chunks = -(-size // CHUNK)
    s_on, l_on, t_on = on
    s_off, l_off, t_off = off
    why = (f"prefetch on: {t_on:.2f}s, {l_on}, prefetched {s_on['prefetched_chunks']} of "
           f"{s_on['chunks_fetched']}; off: {t_off:.2f}s, {l_off}")
    # Every byte crossed the link once, either way.
    for s in (s_on, s_off):
        assert s["origin_bytes_read"] == size, why
        assert s["chunks_fetched"] == chunks, why
    # Off: the reader waited for every chunk itself, one GET at a time.
    assert s_off["prefetched_chunks"] == 0, why
    assert l_off["peak_busy_down"] == 1, why
    # On: the reader fetched at most a quarter of the chunks itself (the
    # first, and any it caught up with); the rest came ahead of it.
    demand = s_on["chunks_fetched"] - s_on["prefetched_chunks"]
    assert demand <= chunks // 4, why
    # ... by several ranged GETs on the link at once.
    assert l_on["peak_busy_down"] >= in_flight, why
    print(why)


def test_http_prefetch_keeps_ranged_gets_in_flight(mounts, link, nginx, data):
    manifest = nginx.workdir / "manifest.txt"
    manifest.write_text(f"stream.tfrecord {len(data)}\n")

    def mount_args(link_url):
        return f"{link_url}/plain/", ["--manifest", str(manifest)]
    off = stream_through(mounts, link, nginx, mount_args, "stream.tfrecord", data, "0")
    on = stream_through(mounts, link, nginx, mount_args, "stream.tfrecord", data, "8M")
    check_prefetch_hides_latency(on, off, len(data), in_flight=3)


@pytest.fixture(scope="module")
def moto(netns, data, tmp_path_factory):
    if not rs.have_moto():
        pytest.skip("moto/boto3 are not installed")
    server = rs.Moto(tmp_path_factory.mktemp("moto"), netns=netns)
    with rs.aws_env("AKIASLOWLINK", "slowlink-secret"):
        try:
            server.start()
            c = server.client()
            c.create_bucket(Bucket="slow-bucket")
            c.put_object(Bucket="slow-bucket", Key="shards/stream.tfrecord", Body=data[:S3_SIZE])
            yield server
        finally:
            server.stop()


def test_s3_prefetch_keeps_ranged_gets_in_flight(mounts, link, moto, data):
    def mount_args(link_url):
        return "s3://slow-bucket/shards", ["--s3-endpoint", link_url]
    want = data[:S3_SIZE]
    off = stream_through(mounts, link, moto, mount_args, "stream.tfrecord", want, "0")
    on = stream_through(mounts, link, moto, mount_args, "stream.tfrecord", want, "8M")
    check_prefetch_hides_latency(on, off, len(want), in_flight=2)
