"""--opens kernel (fs/node_files.h): the daemon answers the first OPEN with
ENOSYS and the kernel opens every file by itself from then on; no OPEN or
RELEASE reaches the daemon, pages stay cached across opens, and reads use one
handle per node. Every promise still holds: right bytes, a changed origin file
is a new node within --revalidate and never mixed into an open file, control
files read as whole documents, a crash of a supervised daemon is survived."""

import errno
import json
import os
import threading

import stoker_testlib as lib
from stoker_testlib import MIB

ARGS = ["--chunk-size", "1M", "--cache-size", "1G", "--opens", "kernel"]


def read_whole(path):
    with open(path, "rb") as f:
        return f.read()


def read_all(m, data):
    """Reads every file of data through m; each must hold its bytes."""
    for name, want in data.items():
        assert read_whole(m.mnt / name) == want, name


def make_tree(root, n=300):
    rng = lib.seeded("kernel-opens")
    data = {}
    for i in range(n):
        name = f"d{i % 4}/f{i:04d}"
        size = rng.choice([0, 1, 4095, 4096, 70_000, 100 * 1024, 300_000])
        lib.write_random(root / name, size, rng)
        data[name] = (root / name).read_bytes()
    lib.write_random(root / "big", 9 * MIB + 123, rng)
    data["big"] = (root / "big").read_bytes()
    return data


def test_cached_files_are_read_without_a_message_to_the_daemon(mounts, tmp_path):
    origin = tmp_path / "origin"
    data = make_tree(origin)
    m = mounts.make(origin, args=ARGS)
    read_all(m, data)
    st = m.stats()
    assert st["opens"] == "kernel"
    assert st["passthrough"] == "off: opens_kernel"
    assert st["fuse_opens"] == 1, "only the first open reaches the daemon (answered ENOSYS)"
    # Epoch 2 from the kernel's page cache: nothing reaches the daemon.
    # Pinned first: the host may take clean pages back at any time.
    with lib.PinnedPages(m.mnt / name for name in data):
        reads = m.stats()["read_requests"]
        read_all(m, data)
        st = m.stats()
    assert st["read_requests"] == reads
    assert st["fuse_opens"] == 1
    assert st["nodes_retired"] == 0
    # From the SSD tier: through the daemon's node handles, right bytes.
    lib.drop_caches()
    rng = lib.seeded("kernel-opens-preads")
    with open(m.mnt / "big", "rb") as f:
        for _ in range(100):
            off = rng.randrange(0, len(data["big"]))
            n = rng.randrange(1, 2 * MIB)
            assert os.pread(f.fileno(), n, off) == data["big"][off:off + n]
    read_all(m, data)
    st = m.stats()
    assert st["read_requests"] > reads
    assert st["origin_bytes_read"] <= sum(len(d) for d in data.values())
    assert st["nodes_retired"] == 0


def test_node_handles_go_when_the_kernel_forgets_the_nodes(mounts, tmp_path):
    origin = tmp_path / "origin"
    data = make_tree(origin, n=200)
    m = mounts.make(origin, args=ARGS)
    read_all(m, data)
    held = m.stats()["node_files"]
    assert held >= len([d for d in data.values() if d]) - 1
    lib.drop_caches()  # the kernel forgets the nodes it does not use
    lib.wait_until(lambda: m.stats()["node_files"] < held // 2, 30,
                   what="node handles dropped with their nodes")


def test_an_origin_change_is_a_new_node_and_never_mixed(mounts, tmp_path):
    origin = tmp_path / "origin"
    origin.mkdir()
    old = os.urandom(3 * MIB)
    new = os.urandom(3 * MIB)  # same size: only mtime and content differ
    (origin / "f").write_bytes(old)
    m = mounts.make(origin, args=ARGS + ["--revalidate", "0"])
    held = open(m.mnt / "f", "rb")
    try:
        assert held.read(MIB) == old[:MIB]
        tmp = origin / "f.tmp"
        tmp.write_bytes(new)
        os.utime(tmp, ns=(1, 10**18))  # another mtime for sure
        os.replace(tmp, origin / "f")
        # The next open sees the new version, from its first byte.
        assert read_whole(m.mnt / "f") == new
        assert m.stats()["nodes_retired"] + m.stats()["origin_changes"] >= 1
        # The file open before never reads the new version: what it reads
        # is the old one, or ESTALE where the old one is gone from the
        # cache (as with --opens daemon: the old version is never served
        # again once the new one is cached).
        for seek in (MIB, 0):
            held.seek(seek)
            try:
                got = held.read()
            except OSError as e:
                assert e.errno == errno.ESTALE, e
            else:
                assert got == old[seek:]
            lib.drop_caches()
        assert read_whole(m.mnt / "f") == new
    finally:
        held.close()
    # Changed in place (same inode number): the node read before is retired.
    with open(origin / "f", "r+b") as f:
        f.write(b"x" * 10)
    os.utime(origin / "f", ns=(1, 2 * 10**18))
    assert read_whole(m.mnt / "f") == b"x" * 10 + new[10:]
    assert m.stats()["nodes_retired"] >= 1


def test_control_files_read_as_whole_documents(mounts, tmp_path):
    """Many readers of stats.json while files are read: each read is one
    JSON document (fs/control_files.h)."""
    origin = tmp_path / "origin"
    data = make_tree(origin, n=100)
    m = mounts.make(origin, args=ARGS)
    stop = threading.Event()
    bad = []
    parsed = [0]

    def stats_reader():
        while not stop.is_set():
            raw = read_whole(m.stats_path)
            try:
                j = json.loads(raw)
            except ValueError:
                bad.append(raw[:200] + b"..." + raw[-200:])
                return
            if j.get("opens") != "kernel":
                bad.append(b"no opens field")
                return
            parsed[0] += 1

    threads = [threading.Thread(target=stats_reader, daemon=True) for _ in range(4)]
    for t in threads:
        t.start()
    try:
        for _ in range(3):
            read_all(m, data)
            lib.drop_caches()
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert not bad, bad[:3]
    assert parsed[0] > 20
    # Fresh values, not the page cache's: a read shows what just happened.
    before = m.stats()["read_requests"]
    lib.drop_caches()
    read_whole(m.mnt / "big")
    assert m.stats()["read_requests"] > before
    assert (m.mnt / ".stoker" / "errors").read_bytes() == b""


def test_kill9_of_a_supervised_daemon_is_survived(mounts, tmp_path):
    origin = tmp_path / "origin"
    data = make_tree(origin, n=60)
    m = mounts.make(origin, args=ARGS)
    read_all(m, data)
    names = sorted(data)

    def read_one(rng):
        name = rng.choice(names)
        if rng.random() < 0.05:
            lib.drop_caches(system=False, files=[m.mnt / name])
        if read_whole(m.mnt / name) != data[name]:
            return f"wrong bytes in {name}"
        return None

    def restarted():
        lib.drop_caches()
        read_all(m, data)
        assert m.stats()["fuse_opens"] == 0, "the kernel still opens by itself"

    errors = lib.readers_across_kill(m, read_one, before=100, after=100,
                                     check_restarted=restarted)
    assert not errors, errors
    lib.unmount_and_fsck(m)


def test_bad_opens_values_are_one_line_errors(tmp_path):
    origin = tmp_path / "origin"
    origin.mkdir()
    for extra, msg in ((["--opens", "user"], "--opens user: must be auto, daemon or kernel"),
                       (["--opens", "kernel", "--passthrough", "on"], "--passthrough on")):
        r = lib.mount_cmd_fails(origin, tmp_path / "m", tmp_path / "c", *extra)
        assert r.returncode == 2, lib.describe(r)
        assert msg in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert not lib.is_mounted(tmp_path / "m")
