"""Prefetch in a sampler's order (docs/prefetch-order.md): given an epoch's
file order (`stoker order`, or mount-tools/stoker_order.py), the daemon
fetches the files of it a bounded window ahead of the reader, a new order
cancels the old one, a bad order gets a one-line error, and the Python helper
sets orders from a list of files and from a PyTorch sampler.

No timing thresholds: the reader waits for the counters (stats.json) to say
the window was fetched before it reads, then the counters say whether every
read was served from the cache."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import stoker_testlib as lib
from stoker_testlib import with_deadline

REPO = Path(__file__).resolve().parents[2]
HELPER = REPO / "mount-tools" / "stoker_order.py"
CLASSES = 4
PER_CLASS = 10
AHEAD = 4
WAIT = 60  # seconds, for eventual states only


def make_tree(origin, rng):
    """An ImageFolder-like tree: class folders of small files."""
    sizes = {}
    for c in range(CLASSES):
        d = origin / f"class{c}"
        d.mkdir(parents=True)
        for i in range(PER_CLASS):
            rel = f"class{c}/img{i:03d}.jpg"
            data = rng.randbytes(20000 + 97 * i + c)
            (origin / rel).write_bytes(data)
            sizes[rel] = len(data)
    return sizes


def set_order(m, tmp_path, paths, name="order.txt"):
    f = tmp_path / name
    f.write_text("".join(p + "\n" for p in paths))
    r = lib.stoker("order", f, m.mnt)
    assert r.returncode == 0, lib.describe(r)
    return r


def wait_prefetched(m, n):
    return lib.wait_until(lambda: m.stats()["order_prefetched_files"] >= n and m.stats(), WAIT,
                          what=f"{n} files fetched ahead")


@pytest.fixture
def tree(tmp_path):
    origin = tmp_path / "origin"
    sizes = make_tree(origin, lib.seeded("order-tree"))
    order = sorted(sizes)
    lib.seeded("order-shuffle").shuffle(order)
    return origin, sizes, order


# The directory prefetch off: only the order fetches ahead.
ARGS = ["--cache-size", "1G", "--order-ahead", str(AHEAD), "--prefetch-files", "0"]


def test_files_ahead_of_the_reader_are_cached_before_it_reads_them(mounts, tmp_path, tree):
    origin, sizes, order = tree
    m = mounts.make(origin, args=ARGS)
    set_order(m, tmp_path, order)
    s = wait_prefetched(m, AHEAD)
    time.sleep(0.5)  # the window is bounded: nothing more comes without a reader
    s = m.stats()
    assert s["order_prefetched_files"] == AHEAD, s
    assert s["order_files"] == len(order) and s["order_position"] == 0, s
    for k, rel in enumerate(order):
        wait_prefetched(m, min(len(order), k + AHEAD))
        got = with_deadline(lib.read_file, m.mnt / rel)
        assert got == (origin / rel).read_bytes(), rel
    s = m.stats()
    total = sum(sizes.values())
    assert s["order_hits"] == len(order), s
    assert s["order_position"] == len(order), s
    assert s["order_prefetched_files"] == len(order), s
    # Every byte read came from the cache, each file fetched once.
    assert s["cache_hit_bytes"] == total, s
    assert s["origin_bytes_read"] == total, s
    prom = lib.stoker("stat", "--prometheus", m.mnt)
    assert "stoker_order_hits_total" in prom.stdout or "stoker_order_hits" in prom.stdout, prom.stdout
    lib.unmount_and_fsck(m)


def test_a_new_order_cancels_the_old_one(mounts, tmp_path, tree):
    origin, sizes, order = tree
    first = [p for p in order if not p.startswith("class0/")]
    second = [p for p in order if p.startswith("class0/")]
    m = mounts.make(origin, args=ARGS)
    set_order(m, tmp_path, first, "a.txt")
    wait_prefetched(m, AHEAD)
    for rel in first[:2]:
        with_deadline(lib.read_file, m.mnt / rel)
    wait_prefetched(m, AHEAD + 2)
    set_order(m, tmp_path, second, "b.txt")
    s = wait_prefetched(m, AHEAD + 2 + AHEAD)
    assert s["orders_set"] == 2 and s["order_files"] == len(second), s
    time.sleep(0.5)
    before = m.stats()
    # The old order's reader goes on: nothing of it is fetched ahead any more.
    later = first[AHEAD + 4:AHEAD + 8]
    for rel in later:
        with_deadline(lib.read_file, m.mnt / rel)
    time.sleep(0.5)
    after = m.stats()
    assert after["order_prefetched_files"] == before["order_prefetched_files"], (before, after)
    assert after["origin_bytes_read"] - before["origin_bytes_read"] == sum(sizes[p] for p in later)
    assert after["order_position"] == 0, after
    # The new order's window is there for its reader.
    for rel in second[:AHEAD]:
        with_deadline(lib.read_file, m.mnt / rel)
    assert m.stats()["order_hits"] == 2 + AHEAD, m.stats()
    r = lib.stoker("order", "--clear", m.mnt)
    assert r.returncode == 0, lib.describe(r)
    assert m.stats()["order_files"] == 0
    lib.unmount_and_fsck(m)


def test_a_bad_order_gets_a_one_line_error(mounts, tmp_path, tree):
    origin, sizes, order = tree
    m = mounts.make(origin, args=["--cache-size", "1G"])
    cases = {
        "empty": ("# nothing\n\n", 2),
        "missing": ("class0/nope.jpg\n" + order[0] + "\n", 1),
        "directory": ("class1\n", 1),
        "outside": ("/etc/passwd\n", 1),
        "climbs": ("../origin/" + order[0] + "\n", 1),
        "control": (".stoker/stats.json\n", 1),
    }
    for name, (text, rc) in cases.items():
        f = tmp_path / f"{name}.txt"
        f.write_text(text)
        r = lib.stoker("order", f, m.mnt)
        assert r.returncode == rc, (name, lib.describe(r))
        assert r.stderr.count("\n") == 1 and r.stderr.startswith("stoker: error: "), (name, r.stderr)
    r = lib.stoker("order", tmp_path / "no-such-file", m.mnt)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, lib.describe(r)
    r = lib.stoker("order", tmp_path / "missing.txt", tmp_path)  # not a stoker mount
    assert r.returncode != 0 and r.stderr.count("\n") == 1, lib.describe(r)
    # The arguments swapped: said so, with the usage.
    r = lib.stoker("order", m.mnt, tmp_path / "missing.txt")
    assert r.returncode == 2 and r.stderr.count("\n") == 1, lib.describe(r)
    assert "is a stoker mount" in r.stderr and "usage: stoker order FILE MOUNTPOINT" in r.stderr, (
        lib.describe(r))
    s = m.stats()
    assert s["orders_set"] == 0 and s["order_files"] == 0, s
    # The daemon goes on, and takes a good order.
    set_order(m, tmp_path, order)
    assert m.stats()["order_files"] == len(order)
    lib.unmount_and_fsck(m)


def run_helper_script(python, code, *args):
    env = dict(os.environ, PYTHONPATH=str(HELPER.parent))
    r = lib.run([python, "-c", code, *map(str, args)], timeout=300, env=env)
    assert r.returncode == 0, lib.describe(r)
    return r


def test_python_helper_with_a_list_of_files(mounts, tmp_path, tree):
    origin, sizes, order = tree
    m = mounts.make(origin, args=["--cache-size", "1G", "--order-ahead", str(AHEAD)])
    # As a command.
    f = tmp_path / "order.txt"
    f.write_text("".join(str(m.mnt / p) + "\n" for p in order))
    r = lib.run([sys.executable, HELPER, m.mnt, f])  # swapped: refused, saying so
    assert r.returncode == 2 and r.stderr.count("\n") == 1, lib.describe(r)
    assert "usage: stoker_order.py FILE MOUNTPOINT" in r.stderr, lib.describe(r)
    assert m.stats()["orders_set"] == 0
    r = lib.run([sys.executable, HELPER, f, m.mnt])  # the order of `stoker order`
    assert r.returncode == 0, lib.describe(r)
    assert m.stats()["order_files"] == len(order)
    # As a module: write_order, and OrderedSampler over a list (no torch).
    code = """
import sys, stoker_order
mnt, paths = sys.argv[1], sys.argv[2:]
stoker_order.write_order(mnt, paths[:5])
sampler = stoker_order.OrderedSampler(list(reversed(range(len(paths)))), [mnt + "/" + p for p in paths])
got = list(sampler)
assert got == list(reversed(range(len(paths)))), got
try:
    stoker_order.write_order("/", ["x"])
    raise SystemExit("no error outside a mount")
except stoker_order.OrderError as e:
    print("refused:", e)
try:
    stoker_order.write_order(mnt, ["class0/none.jpg"])
    raise SystemExit("no error for a missing file")
except stoker_order.OrderError as e:
    print("refused:", e)
"""
    run_helper_script(sys.executable, code, m.mnt, *order)
    s = m.stats()
    assert s["orders_set"] == 3, s  # the command's, write_order's, the sampler's
    assert s["order_files"] == 0, s  # the refused last one dropped it
    lib.unmount_and_fsck(m)


@pytest.fixture(scope="module")
def torch_python():
    for exe in dict.fromkeys([sys.executable, "/usr/bin/python3"]):
        if os.access(exe, os.X_OK) and lib.run([exe, "-c", "import torch"], timeout=120).returncode == 0:
            return exe
    pytest.skip("no interpreter imports torch (apt-get install python3-torch)")


def test_python_helper_with_a_pytorch_sampler(mounts, tmp_path, tree, torch_python):
    origin, sizes, order = tree
    m = mounts.make(origin, args=["--cache-size", "1G", "--order-ahead", str(AHEAD)])
    code = """
import os, sys, torch
from torch.utils.data import DataLoader, Dataset, RandomSampler
import stoker_order

class Folder(Dataset):  # an ImageFolder's .samples, without torchvision
    def __init__(self, root):
        classes = sorted(os.listdir(root))
        self.samples = [(os.path.join(root, c, f), i) for i, c in enumerate(classes)
                        for f in sorted(os.listdir(os.path.join(root, c)))]
    def __len__(self):
        return len(self.samples)
    def __getitem__(self, i):
        with open(self.samples[i][0], "rb") as f:
            return len(f.read())

ds = Folder(sys.argv[1])
sampler = stoker_order.OrderedSampler(RandomSampler(ds, generator=torch.Generator().manual_seed(1)), ds)
for epoch in range(2):
    n = sum(int(b.sum()) for b in DataLoader(ds, sampler=sampler, batch_size=4, num_workers=2))
    print("epoch", epoch, n)
"""
    run_helper_script(torch_python, code, m.mnt)
    s = m.stats()
    assert s["orders_set"] == 2, s
    assert s["order_files"] == len(order) and s["order_position"] == len(order), s
    lib.unmount_and_fsck(m)
