"""A local origin that hangs (a hard NFS mount whose server is gone): cached
files keep being served, uncached ones fail at once, and all is well again
when the origin answers.

The hung origin is another stoker mount whose daemon is stopped with SIGSTOP:
every call into it waits, uninterruptibly, as calls into a hard NFS mount do.
The outer mount revalidates on every open (--revalidate 0), so without the
stall watch (cache/origin/stall_watch.h) each lookup and open of a cached file
would wait for as long as the origin hangs."""

import errno
import os
import signal
import threading
import time

import stoker_testlib as lib

STUCK = 12  # more calls stuck in the origin than libfuse's default 10 workers
ARGS = ["--revalidate", "0", "--origin-stall-timeout", "1", "--origin-backoff", "2",
        "--cache-size", "1G"]


def make_dataset(origin, n):
    rng = lib.seeded("hung-origin")
    for i in range(n):
        lib.write_random(origin / "d" / f"f{i:02d}", rng.randrange(1, 300_000), rng)
    # In a directory of its own: opens prefetch their directory's files.
    lib.write_random(origin / "u" / "uncached", 100_000, rng)
    return lib.hashes_of(origin)


def test_cached_files_are_served_while_a_local_origin_hangs(mounts, tmp_path):
    data = tmp_path / "data"
    expected = make_dataset(data, STUCK + 4)
    # --revalidate 0 here too: the kernel keeps no attributes of the inner
    # mount, so every stat of it reaches its (stopped) daemon.
    inner = mounts.make(data, args=["--cache-size", "1G", "--revalidate", "0"])
    outer = mounts.make(inner.mnt, args=ARGS)
    cached = sorted(p for p in expected if p != "u/uncached")
    for p in cached:
        assert lib.sha256_file(outer.mnt / p) == expected[p]
    stuck_paths, probe_paths = cached[:STUCK], cached[STUCK:]

    results = {}

    def read(p):
        try:
            results[p] = lib.sha256_file(outer.mnt / p)
        except OSError as e:
            results[p] = e

    # On a loaded machine a call of the first pass may have taken longer
    # than the stall timeout: the outer daemon then answers from the cache,
    # without asking, until a lookup after its back-off finds the origin
    # answering. Start from an origin it asks.
    def asks_origin():
        lib.with_deadline(os.stat, outer.mnt / cached[0])
        return not outer.stats().get("origin_unreachable", False)
    lib.wait_until(asks_origin, 30, interval=0.5, what="the outer daemon asking its origin again")
    lib.stop_process(inner.pid)
    threads = []
    try:
        # These ask the origin before anyone can know that it hangs: they
        # wait with it, each holding one of the outer daemon's workers.
        for p in stuck_paths:
            t = threading.Thread(target=read, args=(p,), daemon=True)
            t.start()
            threads.append(t)
        time.sleep(3)  # past the 1 s stall timeout
        assert sum(t.is_alive() for t in threads) > 0, (
            f"nothing waited on the origin: {results}; back-off episodes "
            f"{outer.stats().get('origin_unreachable_episodes')}")

        # Cached files are served from the cache, again and again.
        for _ in range(3):
            for p in probe_paths:
                t0 = time.monotonic()
                got = lib.with_deadline(lib.sha256_file, outer.mnt / p, timeout=60,
                                        what=f"read of cached {p} while the origin hangs")
                assert got == expected[p]
                print(f"cached read of {p} while hung: {time.monotonic() - t0:.3f} s")
            time.sleep(1)

        # An uncached file cannot be served: it fails, at once, not after the origin.
        def read_uncached():
            try:
                lib.sha256_file(outer.mnt / "u" / "uncached")
            except OSError as e:
                return e.errno
            return 0

        code = lib.with_deadline(read_uncached, timeout=60,
                                 what="read of an uncached file while the origin hangs")
        assert code in (errno.EIO, errno.ETIMEDOUT), os.strerror(code) if code else "read worked"

        s = lib.with_deadline(outer.stats, timeout=60, what="stats while the origin hangs")
        assert s["origin_unreachable"] is True, s
        assert s["origin_unreachable_episodes"] >= 1
        assert s["revalidations_skipped"] > 0
    finally:
        os.kill(inner.pid, signal.SIGCONT)

    # The origin answers again: the waiting reads finish with the right
    # bytes, the episode ends, and the uncached file is read.
    for t in threads:
        t.join(lib.IO_TIMEOUT)
        assert not t.is_alive(), "a read that waited on the origin never finished"
    assert {p: results[p] for p in stuck_paths} == {p: expected[p] for p in stuck_paths}
    lib.wait_until(lambda: outer.stats()["origin_unreachable"] is False, 30,
                   what="the episode to end once the origin answers")
    assert lib.sha256_file(outer.mnt / "u" / "uncached") == expected["u/uncached"]
    assert "origin stalled" in outer.log_tail(400)
    outer.unmount()
