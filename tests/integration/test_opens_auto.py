"""--opens auto, the default (fs/opens_policy.h, docs/opens.md): a mount
starts with daemon opens and moves to kernel opens once 900 of the last
1000 opens were of small files (no data file of their own); a tree of
shards, or a mixed tree, keeps daemon opens (and passthrough); --passthrough
on never moves; a supervised restart after the move keeps it."""

import os
import signal

import pytest

import stoker_testlib as lib
from stoker_testlib import MIB

ARGS = ["--chunk-size", "1M", "--cache-size", "1G", "--opens", "auto"]
WINDOW = 1000


def small_tree(origin, n, size=4096):
    rng = lib.seeded("opens-auto-small")
    want = {}
    for i in range(n):
        d = origin / f"d{i // 500:02d}"
        d.mkdir(parents=True, exist_ok=True)
        want[f"d{i // 500:02d}/f{i:05d}"] = rng.randbytes(size)
        (d / f"f{i:05d}").write_bytes(want[f"d{i // 500:02d}/f{i:05d}"])
    return want


def large_files(origin, n, size=MIB + 4096):
    rng = lib.seeded("opens-auto-large")
    want = {}
    (origin / "shards").mkdir(parents=True, exist_ok=True)
    for i in range(n):
        want[f"shards/s{i:02d}"] = rng.randbytes(size)
        (origin / "shards" / f"s{i:02d}").write_bytes(want[f"shards/s{i:02d}"])
    return want


def read_all(mnt, names, want):
    for n in names:
        assert lib.with_deadline(lib.read_file, mnt / n, what=f"read {n}") == want[n], n


def test_a_tree_of_small_files_moves_to_kernel_opens(mounts, tmp_path):
    origin = tmp_path / "origin"
    want = small_tree(origin, WINDOW + 200)
    m = mounts.make(origin, args=ARGS)
    st = m.stats()
    assert st["opens"] == "daemon" and st["opens_asked"] == "auto", st
    names = sorted(want)
    read_all(m.mnt, names[:WINDOW - 1], want)
    assert m.stats()["opens"] == "daemon", "not before a whole window of opens"
    read_all(m.mnt, names[WINDOW - 1:], want)
    st = m.stats()
    assert st["opens"] == "kernel", st
    assert st["opens_decision"]["after_opens"] == WINDOW, st
    assert "small files" in st["opens_decision"]["why"], st
    # The OPENs counted: the window's, the reads of stats.json before the move,
    # and the one after the decision, answered ENOSYS. None since.
    opens = st["fuse_opens"]
    assert WINDOW + 1 <= opens <= WINDOW + 8, st
    assert "opens_kernel" in st["passthrough"], st
    lib.drop_caches()
    read_all(m.mnt, names, want)
    assert m.stats()["fuse_opens"] == opens
    r = lib.stoker("stat", str(m.mnt))
    assert "--opens auto moved there after 1000 opens" in r.stdout, r.stdout
    assert m.stats()["errors"] == 0
    m.unmount()


@pytest.mark.parametrize("share_large", [1.0, 0.15])
def test_shards_and_mixed_trees_keep_daemon_opens(mounts, tmp_path, share_large):
    """Shards only, and 15 opens in 100 of large files: daemon opens, and the
    large files are passed through once cached."""
    origin = tmp_path / "origin"
    want = large_files(origin, 8)
    want.update(small_tree(origin, 200) if share_large < 1 else {})
    large = sorted(n for n in want if n.startswith("shards/"))
    small = sorted(n for n in want if not n.startswith("shards/"))
    m = mounts.make(origin, args=ARGS)
    order = []
    for i in range(WINDOW + 300):
        if share_large >= 1 or i % 100 < 15:
            order.append(large[i % len(large)])
        else:
            order.append(small[i % len(small)])
    read_all(m.mnt, order, want)
    st = m.stats()
    assert st["opens"] == "daemon", st
    assert "opens_decision" not in st, st
    assert st["fuse_opens"] >= WINDOW + 300, st
    if st["passthrough"].startswith("on"):
        assert st["passthrough_opens"] > 0, st
    m.unmount()


def test_passthrough_on_keeps_daemon_opens(mounts, tmp_path):
    origin = tmp_path / "origin"
    want = small_tree(origin, WINDOW + 100)
    probe = mounts.make(origin, args=ARGS)
    if not probe.stats()["passthrough"].startswith("on"):
        pytest.skip(f"the kernel gives no passthrough here: {probe.stats()['passthrough']}")
    probe.unmount()
    m = mounts.make(origin, args=ARGS + ["--passthrough", "on"])
    read_all(m.mnt, sorted(want), want)
    st = m.stats()
    assert st["opens"] == "daemon" and st["opens_asked"] == "daemon", st
    m.unmount()


def test_a_restarted_daemon_keeps_kernel_opens(mounts, tmp_path):
    origin = tmp_path / "origin"
    want = small_tree(origin, WINDOW + 50)
    m = mounts.make(origin, args=ARGS)
    names = sorted(want)
    read_all(m.mnt, names, want)
    st = m.stats()
    assert st["opens"] == "kernel", st
    pid = st["pid"]
    os.kill(pid, signal.SIGKILL)
    lib.wait_until(lambda: not lib.pid_alive(pid), 30, what=f"daemon {pid} gone")
    lib.wait_until(lambda: m.stats()["pid"] != pid, 60, what="a new daemon serving")
    m.pid = m.stats()["pid"]
    lib.drop_caches()
    read_all(m.mnt, names, want)
    st = m.stats()
    assert st["opens"] == "kernel", st
    assert st["opens_decision"]["why"] == "decided before a restart of the daemon", st
    assert st["fuse_opens"] == 0, "the kernel opens by itself: no OPEN reaches the new daemon"
    assert st["errors"] == 0
    m.unmount()
