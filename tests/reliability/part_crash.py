"""Crash loop: kill -9 of the daemon at a random moment of heavy concurrent
reads (streams + random preads, every byte compared with the origin) over a
tree twice the cache size (so fetches, chunk writes and eviction are under
way when the kill lands), then fsck of what the crash left, a remount on
the same cache (which clears the stale mount) and a full comparison of the
tree against the origin. The tree holds TFRecord shards and JPEGs too, and
the mount a decoded view (--view decoded): readers of the view's files run
beside the raw ones, compared with the view's bytes as a separate clean
mount made them before the loop, so kills land while the pool decodes.

Proves: no crash point makes the cache serve a wrong byte afterwards, raw or
decoded, fsck can always check a crashed cache (exit 0/1, never 2), and a
remount on a stale mountpoint works."""

import os
import random
import shutil
import signal
import time

import rel
from rel import ARGS, MIB, lib

VIEW = "decoded"


def crash(tally, scratch, quick, seed):
    cycles = 5 if quick else 50
    rng = random.Random(seed)
    origin, rels, view_ref, view_rels, args, what = dataset(scratch, rng, 40 if quick else 120,
                                                            3 if quick else 6)
    tally.say(f"{cycles} cycles over {what}")
    args = args + rel.UNSUPERVISED  # each kill must end the mount
    m = scratch.stoker_mount(origin, "c", args)
    repairs = 0
    for cycle in range(1, cycles + 1):
        tally.add(cases=1)
        killed_after = kill_during_reads(tally, m, origin, rels, view_ref, view_rels, rng, cycle)
        rc, rep, repaired = rel.fsck_after_fault(tally, m.cache, cycle)
        repairs += repaired
        m = scratch.stoker_mount(origin, "c", args, cache=m.cache)
        before = tally.bytes_compared
        rel.compare_everything(tally, origin, m.mnt, rels)
        rel.compare_everything(tally, view_ref, m.mnt / ("." + VIEW), view_rels)
        tally.say(f"cycle {cycle}: killed after {killed_after:.2f}s of reads; fsck rc={rc} "
                  f"({rel.findings(rep)}); remount compared {tally.bytes_compared - before} bytes")
    s = m.stats()
    tally.say(f"fsck repairs run: {repairs}; last mount: cache_hit_bytes={s['cache_hit_bytes']}, "
              f"evicted_bytes={s['evicted_bytes']}, checksum_failures={s['checksum_failures']}, "
              f"errors={s['errors']}")
    m.unmount()
    rc, rep, err = rel.fsck_json(m.cache)
    if rc == 1:
        lib.fsck(m.cache, "--repair")
        rc, rep, err = rel.fsck_json(m.cache)
    if rc != 0:
        tally.fail(f"final fsck after a clean unmount (+repair) not clean: rc={rc} {rel.findings(rep)} {err}")


def dataset(scratch, rng, n_files, shards):
    """The crash loops' tree, with view data, and mount args whose cache is
    half its size (so every cycle fetches, writes and evicts, and a kill
    lands in those paths, not only in cache hits). Returns (origin, rels,
    view reference dir, view rels, args, a description)."""
    origin = scratch.path("origin")
    sizes = rel.make_tree(origin, rng, n_files, 6 * MIB)
    view_rels = add_view_data(origin, rng, shards=shards)
    capacity = sum(sizes.values()) // 2 // MIB * MIB
    args = ARGS + ["--cache-size", str(capacity), "--view", VIEW]
    view_ref = reference_view(scratch, origin, view_rels, args)
    what = (f"{len(sizes)} files, {sum(sizes.values()) // MIB} MiB, and {len(view_rels)} view "
            f"files; --cache-size {capacity // MIB} MiB")
    return origin, sorted(sizes), view_ref, view_rels, args, what


def kill_during_reads(tally, m, origin, rels, view_ref, view_rels, rng, cycle):
    """Starts 6 comparing readers of raw files and 2 of view files, SIGKILLs
    the daemon after a random delay, checks every reader returns. Returns
    the delay."""
    readers = [rel.Readers(tally, origin, m.mnt, rels, 6, seed=cycle).start(),
               rel.Readers(tally, view_ref, m.mnt / ("." + VIEW), view_rels, 2,
                           seed=1000 + cycle).start()]
    delay = rng.uniform(0.05, 3.0)
    time.sleep(delay)
    for r in readers:
        r.expect_errors.set()
    rel.count_passthrough(tally, m)
    os.kill(m.pid, signal.SIGKILL)
    lib.wait_until(lambda: not lib.pid_alive(m.pid), 30, what="daemon death after kill -9")
    tally.add(faults=1)
    stuck = [name for r in readers for name in r.finish(timeout=60)]
    if stuck:
        tally.add(hangs=1)
        tally.say(f"HANG: readers {stuck} still blocked 60s after kill -9")
    return delay


def add_view_data(origin, rng, shards):
    """TFRecord shards of JPEGs and a few JPEG files under origin/views/.
    Returns the view's relative paths (JPEG files as NAME.npy)."""
    import view_data as vd  # needs numpy and Pillow, like the view tests
    root = origin / "views"
    root.mkdir()
    out = []
    for s in range(shards):
        payloads = []
        for i in range(12):
            w, h = rng.randrange(64, 400), rng.randrange(64, 300)
            jpeg = vd.jpeg_bytes(vd.make_image(w, h, "RGB", seed=rng.randrange(1 << 30)),
                                 quality=85, subsampling=i % 3)
            payloads.append(vd.imagenet_example(jpeg, i, w, h, f"s{s}_{i}.jpg"))
            if s == 0 and i < 4:
                (root / f"img{i}.jpg").write_bytes(jpeg)
                out.append(f"views/img{i}.jpg.npy")
        vd.write_tfrecord(root / f"shard-{s:05d}", payloads)
        out.append(f"views/shard-{s:05d}")
    return sorted(out)


def reference_view(scratch, origin, view_rels, args):
    """The view's bytes as a clean mount with its own cache makes them,
    copied to scratch/view-ref/ (same relative paths)."""
    ref = scratch.path("view-ref")
    m = scratch.stoker_mount(origin, "ref", args)
    for r in view_rels:
        (ref / r).parent.mkdir(parents=True, exist_ok=True)
        lib.with_deadline(shutil.copyfile, m.mnt / ("." + VIEW) / r, ref / r, what=f"copy {r}")
    m.unmount()
    return ref
