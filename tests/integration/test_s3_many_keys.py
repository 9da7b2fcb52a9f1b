"""A prefix with 100k objects lists completely through the mount
(ListObjectsV2, 1000 keys a page, continuation tokens), and a second listing
and stats of its entries are answered from the listing kept in memory: no
request reaches the server (counted by a proxy in front of moto).

The objects are put into moto's backend before it serves
(moto_prefilled.py). STOKER_MANY_KEYS sets the count (default 100000).
Nearly all of the time is moto's: it filters the whole bucket for each
page, so the listing grows with the square of the count (100k: about 90 s
on this project's 2-core machine, 10 s to start moto).
"""

import os

import pytest

import remote_servers as rs
import stoker_testlib as lib
from stoker_testlib import with_deadline

pytestmark = [pytest.mark.skipif(not rs.have_moto(), reason="moto/boto3 are not installed"),
              pytest.mark.slow]

BUCKET = "many-keys"
PREFIX = "train/shards"
COUNT = int(os.environ.get("STOKER_MANY_KEYS", "100000"))


@pytest.fixture(scope="module")
def moto(tmp_path_factory):
    server = rs.PrefilledMoto(tmp_path_factory.mktemp("moto"), BUCKET, PREFIX, COUNT)
    with rs.aws_env("AKIAMANYKEYS", "many-keys-secret"):
        try:
            yield server.start()
        finally:
            server.stop()


@pytest.fixture
def proxy(moto):
    from fault_proxy import running
    with running(moto.port) as p:
        yield p


def test_prefix_with_many_keys_lists_completely(mounts, proxy):
    m = mounts.make(f"s3://{BUCKET}/{PREFIX}",
                    args=["--chunk-size", "1M", "--cache-size", "1G", "--revalidate", "3600",
                          "--s3-endpoint", proxy.url])
    want = [f"k{i:06d}" for i in range(COUNT)]
    names = with_deadline(os.listdir, m.mnt, timeout=900)
    assert sorted(n for n in names if n != ".stoker") == want
    pages = proxy.count(f"/{BUCKET}")
    # 1000 keys a page: the listing took every page, and no page twice
    # (the mount's own check at start is one more request).
    assert pages >= -(-COUNT // 1000), pages
    assert pages <= -(-COUNT // 1000) + 2, pages

    # Kept: listing again and stat-ing entries asks the server nothing.
    requests = sum(proxy.seen.values())
    assert sorted(n for n in with_deadline(os.listdir, m.mnt) if n != ".stoker") == want
    rng = lib.seeded("many_keys.stat")
    for i in rng.sample(range(COUNT), 200):
        st = with_deadline(os.stat, os.path.join(m.mnt, f"k{i:06d}"))
        assert st.st_size == len(b"%d\n" % i)
    assert sum(proxy.seen.values()) == requests
    # And the bytes are the objects'.
    for i in (0, COUNT // 2, COUNT - 1):
        assert with_deadline(lib.read_file, os.path.join(m.mnt, f"k{i:06d}")) == b"%d\n" % i
