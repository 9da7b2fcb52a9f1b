"""Concurrency: 16 reader threads (random preads and sequential streams)
over many files with a cache capacity far below the dataset, so eviction
runs all the time, while a writer atomically replaces origin files
(write a temp file + rename) and the mount revalidates on every open
(--revalidate 0).

Version k of a file is its base bytes XOR k, so every byte says which
version it came from. Proves: every read returns bytes of one version the
file really had (a byte of no version is a mismatch; bytes of two versions
in one read are a torn read, also counted as a mismatch), nothing
deadlocks (the part's watchdog + per-thread joins), and reports the
daemon's peak RSS (VmHWM)."""

import errno
import mmap
import os
import random
import threading
import time

import rel
from rel import ARGS, MIB

XOR = [bytes(b ^ k for b in range(256)) for k in range(256)]


def concurrency(tally, scratch, quick, seed):
    rng = random.Random(seed)
    origin = scratch.path("origin")
    origin.mkdir()
    n_files = 48 if quick else 160
    bases, versions = {}, {}
    for i in range(n_files):
        name = f"f{i:03d}"
        size = rng.choice([rng.randrange(1, 300_000), MIB + 7, rng.randrange(2 * MIB, 4 * MIB)])
        bases[name] = rng.randbytes(size)
        versions[name] = 0
        (origin / name).write_bytes(bases[name])
    total = sum(len(b) for b in bases.values())
    BASES.clear()
    BASES.update(bases)
    capacity = 16 * MIB
    tally.say(f"{n_files} files, {total // MIB} MiB, cache capacity {capacity // MIB} MiB, "
              f"16 readers, one replacing writer, --revalidate 0")
    m = scratch.stoker_mount(origin, "cc", ARGS + ["--cache-size", str(capacity),
                                                  "--revalidate", "0"])
    duration = 40 if quick else 300
    stop = threading.Event()
    vlock = threading.Lock()
    threads = [threading.Thread(target=reader, daemon=True, name=f"reader{i}",
                                args=(tally, m.mnt, bases, stop, seed * 100 + i, i % 2, i % 4 == 3))
               for i in range(16)]
    writer_t = threading.Thread(target=writer, daemon=True, name="writer",
                                args=(tally, origin, bases, versions, vlock, stop, rng))
    for t in threads + [writer_t]:
        t.start()
    peak = 0
    end = time.monotonic() + duration
    while time.monotonic() < end and not stop.is_set():
        peak = max(peak, rel.vm_hwm_kib(m.pid))
        time.sleep(0.5)
    stop.set()
    stuck = []
    for t in threads + [writer_t]:
        t.join(120)
        if t.is_alive():
            stuck.append(t.name)
    if stuck:
        tally.add(hangs=1)
        tally.say(f"HANG: {stuck} still blocked 120s after stop")
        return
    s = m.stats()
    peak = max(peak, rel.vm_hwm_kib(m.pid))
    tally.say(f"{tally.cases} reads, {tally.faults} replacements; evicted_bytes="
              f"{s['evicted_bytes'] // MIB} MiB, cache_used_bytes {s['cache_used_bytes'] // MIB} MiB "
              f"of {s['cache_capacity_bytes'] // MIB}; origin_changes={s.get('origin_changes')}; "
              f"errors={s['errors']}; ESTALE reads {STALE}; daemon peak RSS (VmHWM) {peak // 1024} MiB")
    if s["cache_used_bytes"] > s["cache_capacity_bytes"]:
        tally.fail(f"cache_used_bytes {s['cache_used_bytes']} > capacity")
    rel.count_passthrough(tally, m)
    m.unmount()


def writer(tally, origin, bases, versions, vlock, stop, rng):
    """Replaces a random file with its next version every few ms: write a
    temp file, fsync, rename over."""
    names = sorted(bases)
    while not stop.is_set():
        name = rng.choice(names)
        with vlock:
            k = (versions[name] + 1) % 256
        tmp = origin / f".tmp-{name}"
        with open(tmp, "wb") as f:
            f.write(bases[name].translate(XOR[k]))
        os.rename(tmp, origin / name)
        with vlock:
            versions[name] = k
        tally.add(faults=1)
        stop.wait(0.02)


STALE = {"buffered": 0, "O_DIRECT": 0}


def reader(tally, mnt, bases, stop, seed, streaming, direct):
    """Reads until stopped, checking each read() belongs to one version.
    direct: O_DIRECT reads (past the kernel page cache, straight to the
    daemon), which tells stoker's own tearing from the page cache's.
    ESTALE (the file was replaced under an open descriptor and the rest of
    the old version is gone, or replaced twice during the open) is counted,
    not failed: it is the contract."""
    rng = random.Random(seed)
    names = sorted(bases)
    mode = "O_DIRECT" if direct else "buffered"
    pread = direct_pread if direct else os.pread
    while not stop.is_set():
        name = rng.choice(names)
        base = bases[name]
        try:
            fd = os.open(mnt / name, os.O_RDONLY | (os.O_DIRECT if direct else 0))
        except OSError as e:
            if e.errno == errno.ESTALE:  # replaced again during the kernel's one retry
                with tally.lock:
                    STALE[mode] += 1
            else:
                tally.fail(f"open {name}: {e}")
            continue
        try:
            if streaming:
                off = 0
                while not stop.is_set():
                    data = pread(fd, MIB, off)
                    if not data:
                        break
                    check(tally, name, base, off, data, mode)
                    off += len(data)
            else:
                for _ in range(8):
                    off = rng.randrange(0, len(base))
                    if direct:
                        off -= off % 4096
                    check(tally, name, base, off, pread(fd, rng.randrange(1, 2 * MIB), off), mode)
        except OSError as e:
            if e.errno == errno.ESTALE:
                with tally.lock:
                    STALE[mode] += 1
            else:
                tally.fail(f"read {name} ({mode}): {e}")
        finally:
            os.close(fd)


def direct_pread(fd, length, off):
    """pread into a page-aligned buffer (O_DIRECT needs one)."""
    length = (length + 4095) // 4096 * 4096
    buf = mmap.mmap(-1, length)
    try:
        n = os.preadv(fd, [buf], off)
        return bytes(buf[:n])
    finally:
        buf.close()


def check(tally, name, base, off, data, mode):
    """One read must be base[off:...] XOR k for a single k."""
    tally.add(cases=1, bytes_compared=len(data))
    want_len = min(len(data), len(base) - off)
    if len(data) != want_len or not data:
        if len(data) != want_len:
            tally.mismatch(f"{mode} {name} @ {off}: {len(data)} bytes, file has {len(base) - off} left")
        return
    k = data[0] ^ base[off]
    if data != base[off:off + len(data)].translate(XOR[k]):
        tally.mismatch(f"{mode} {name} @ {off} len {len(data)}: {classify(base, off, data)}")


def classify(base, off, data):
    """Says what a bad read holds, page by page (4 KiB of the file each):
    pages of several versions (each page one version: the kernel's page
    cache mixing versions), zero-filled pages, or bytes of no version."""
    versions, zero_pages, foreign = set(), 0, 0
    first_foreign = ""
    pos = off
    while pos < off + len(data):
        end = min(off + len(data), (pos // 4096 + 1) * 4096)
        got = data[pos - off:end - off]
        k = got[0] ^ base[pos]
        if got == base[pos:end].translate(XOR[k]):
            versions.add(k)
        elif not got.strip(b"\0"):
            zero_pages += 1
        else:
            foreign += 1
            first_foreign = first_foreign or describe_page(base, pos, got)
        pos = end
    return (f"pages of versions {sorted(versions)[:10]}, {zero_pages} zero-filled pages, "
            f"{foreign} pages of no version{first_foreign}")


def describe_page(base, pos, got):
    """Runs of (got XOR base) in a page of no version: a run of one value
    is a stretch of one version; a patternless page is foreign bytes."""
    runs, start = [], 0
    x = [g ^ b for g, b in zip(got, base[pos:pos + len(got)])]
    for i in range(1, len(x) + 1):
        if i == len(x) or x[i] != x[start]:
            if i - start >= 16:
                runs.append(f"{pos + start}+{i - start}:v{x[start]}")
            start = i
    return (f" (first one at file offset {pos}: one-version runs {runs[:6]}; "
            f"its bytes are {find_origin_of(got)})")


BASES = {}
_DELTAS = {}
_DELTA_LOCK = threading.Lock()


def _delta(b):
    """b[i] XOR b[i+1]: the same for every version (the XOR k cancels)."""
    n = int.from_bytes(b, "big")
    return ((n ^ (n >> 8)) & ((1 << (8 * (len(b) - 1))) - 1)).to_bytes(len(b) - 1, "big") if len(b) > 1 else b""


def find_origin_of(page):
    """Which file, offset and version a page of foreign bytes came from."""
    probe = _delta(page[:64])
    with _DELTA_LOCK:
        for name, b in sorted(BASES.items()):
            if name not in _DELTAS:
                _DELTAS[name] = _delta(b)
            at = _DELTAS[name].find(probe)
            if at >= 0:
                return f"{name} offset {at} version {page[0] ^ b[at]}"
    return "from no file of the tree at any version"
