"""`stoker stat` (human and --json) and `stoker warm`."""

import json
import os
import re
import signal
import subprocess

import stoker_testlib as lib
from stoker_testlib import CHUNK, stoker

REQUIRED = ("bytes_read", "cache_hit_bytes", "origin_bytes_read", "cache_used_bytes",
            "cache_capacity_bytes", "objects", "chunks", "evicted_bytes",
            "revalidations", "errors", "checksum_failures", "origin_changes",
            "pid", "cache_dir", "passthrough", "passthrough_opens", "passthrough_bytes",
            "passthrough_fallbacks")


def make_origin(origin, n_big=6, n_small=50):
    rng = lib.seeded("stat")
    for i in range(n_big):
        lib.write_random(origin / "big" / f"b{i}", 2 * CHUNK + i * 1000, rng)
    for i in range(n_small):
        lib.write_random(origin / "small" / f"s{i:02d}", 1 + i * 997, rng)
    (origin / "empty").write_bytes(b"")
    return lib.hashes_of(origin)


def test_stat_json_and_human(mounts, tmp_path):
    origin = tmp_path / "origin"
    expected = make_origin(origin)
    m = mounts.make(origin)
    total = sum(os.path.getsize(origin / r) for r in expected)
    assert not lib.check_hashes(m.mnt, expected)

    r = stoker("stat", m.mnt, "--json")
    assert r.returncode == 0, lib.describe(r)
    js = json.loads(r.stdout)
    for k in REQUIRED:
        assert k in js, f"stat --json lacks {k}: {js}"
    assert js["pid"] == m.pid
    assert os.path.realpath(js["cache_dir"]) == os.path.realpath(m.cache)
    assert js["bytes_read"] + js["passthrough_bytes"] >= total, js
    assert js["origin_bytes_read"] >= total, js
    assert js["cache_capacity_bytes"] == 1 << 30, js
    assert 0 < js["cache_used_bytes"] <= js["cache_capacity_bytes"], js
    assert js["chunks"] >= 6 * 3, js
    assert js["objects"] >= len(expected) - 1, js
    assert js["errors"] == 0, js

    # stats.json and stat --json agree on the required keys.
    raw = m.stats()
    for k in REQUIRED:
        assert k in raw, f"stats.json lacks {k}"

    # From a subdirectory of the mount too.
    r2 = stoker("stat", m.mnt / "big", "--json")
    assert r2.returncode == 0, lib.describe(r2)
    assert json.loads(r2.stdout)["pid"] == m.pid

    h = stoker("stat", m.mnt)
    assert h.returncode == 0, lib.describe(h)
    assert re.search(r"hit", h.stdout, re.I), "human stat shows no hit ratio\n" + lib.describe(h)
    assert re.search(r"\d+(\.\d+)?\s*%", h.stdout), "no percentage in human stat\n" + lib.describe(h)
    assert re.search(r"\d+(\.\d+)?\s*(B|KiB|MiB|GiB|K|M|G)\b", h.stdout), \
        "no human sizes in stat\n" + lib.describe(h)
    m.unmount()
    r = stoker("stat", m.mnt)
    assert r.returncode != 0, "stat of an unmounted dir succeeded\n" + lib.describe(r)


def test_stats_file_is_fresh_and_read_only(mounts, tmp_path):
    origin = tmp_path / "origin"
    lib.write_random(origin / "f", 3 * CHUNK)
    m = mounts.make(origin)
    s1 = m.stats()
    assert lib.with_deadline(lib.read_file, m.mnt / "f") == (origin / "f").read_bytes()
    s2 = m.stats()  # the same path again must not come from a stale page cache
    assert s2["bytes_read"] - s1["bytes_read"] >= 3 * CHUNK, (s1, s2)
    try:
        lib.with_deadline(lambda: open(m.stats_path, "wb").close())
        raise AssertionError("stats.json opened for writing")
    except OSError:
        pass
    m.unmount()


def test_warm_pulls_files_into_cache(mounts, tmp_path):
    origin = tmp_path / "origin"
    expected = make_origin(origin)
    nonempty = [r for r in expected if os.path.getsize(origin / r) > 0]
    m = mounts.make(origin)
    before = m.stats()
    assert before["origin_bytes_read"] == 0, before

    r = stoker("warm", m.mnt / "big", m.mnt / "small", timeout=30)
    assert r.returncode == 0, lib.describe(r)
    n_files = len([rel for rel in expected if rel.startswith(("big/", "small/"))])
    s = lib.wait_until(
        lambda: (lambda st: st if st.get("warm_files_done", -1) >= n_files else None)(m.stats()),
        120, interval=0.2, what=f"warm_files_done == {n_files}")
    assert s["warm_files_done"] == n_files, s
    assert s["warm_files_queued"] >= n_files, s
    assert s["origin_bytes_read"] >= sum(os.path.getsize(origin / r) for r in nonempty), s

    h = stoker("stat", m.mnt)
    assert h.returncode == 0 and re.search(r"warm", h.stdout, re.I), \
        "warm progress not shown by stat\n" + lib.describe(h)

    files = [m.mnt / r for r in expected]
    with lib.OriginReadGuard(lib.regular_files(origin)) as guard:
        lib.drop_caches(files)
        mid = m.stats()
        bad = lib.check_hashes(m.mnt, expected)
        after = m.stats()
    assert not bad, bad[:10]
    assert guard.events == [], f"origin read after warm: {guard.events[:5]}"
    assert after["origin_bytes_read"] == mid["origin_bytes_read"], (mid, after)
    m.unmount()


def test_warm_wait_returns_when_done_and_reports(mounts, tmp_path):
    origin = tmp_path / "origin"
    expected = make_origin(origin)
    m = mounts.make(origin)
    r = stoker("warm", "--wait", m.mnt / "big", m.mnt / "small", timeout=120)
    assert r.returncode == 0, lib.describe(r)
    # Not a terminal: plain lines, the last one at 100%.
    last = r.stdout.strip().splitlines()[-1]
    n_files = len([rel for rel in expected if rel.startswith(("big/", "small/"))])
    assert last.startswith("warm: 100%") and f" {n_files}/{n_files} files" in last, r.stdout
    st = m.stats()
    assert st["warm_files_done"] == n_files, st  # done when --wait returned, not later
    assert st["origin_bytes_read"] >= sum(os.path.getsize(origin / rel) for rel in expected)
    # The daemon keeps the job; --status shows it.
    s = stoker("warm", "--status", m.mnt)
    assert s.returncode == 0, lib.describe(s)
    assert re.search(r"^job 1\s+done\s+100%", s.stdout, re.M), s.stdout


def test_warm_from_a_list_in_its_order(mounts, tmp_path):
    origin = tmp_path / "origin"
    make_origin(origin)
    m = mounts.make(origin)
    order = [f"small/s{i:02d}" for i in (7, 3, 41, 12)] + ["big/b2"]
    listing = tmp_path / "epoch-order.txt"
    listing.write_text("".join(f"{m.mnt / rel}\n" for rel in order))
    r = stoker("warm", "--wait", "--from", listing, timeout=120)
    assert r.returncode == 0, lib.describe(r)
    st = m.stats()
    assert st["warm_files_done"] == len(order), st
    j = json.loads(lib.run(["python3", "-c", "import socket,json,sys; s=socket.socket(socket.AF_UNIX);"
                            "s.connect(sys.argv[1]); s.sendall(b'{\"op\":\"warm_status\"}\\n');"
                            "print(s.makefile().readline())", f"{m.cache}/control.sock"]).stdout)
    assert j["jobs"][-1]["paths"] == order, j


def test_warm_beyond_the_cache_says_so_and_bad_paths_fail(mounts, tmp_path):
    origin = tmp_path / "origin"
    for i in range(4):
        lib.write_random(origin / f"f{i}", 3 * CHUNK, lib.seeded(f"warm-big-{i}"))
    m = mounts.make(origin, args=["--chunk-size", "1M", "--cache-size", "8M"])
    # Without --wait too: said up front, before the command returns.
    r = stoker("warm", m.mnt, timeout=120)
    assert r.returncode == 0 and "beyond the cache's bound" in r.stderr, lib.describe(r)
    assert "a warm evicts nothing" in r.stderr, lib.describe(r)
    r = stoker("warm", "--wait", m.mnt, timeout=120)
    assert "beyond the cache's bound" in r.stderr, lib.describe(r)
    r = stoker("warm", "--wait", m.mnt / "missing", timeout=30)
    assert r.returncode == 1 and "missing" in r.stderr, lib.describe(r)
    r = stoker("warm", "--status", m.mnt, m.mnt / "f0")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, lib.describe(r)
    r = stoker("warm")
    assert r.returncode == 2 and "nothing to warm" in r.stderr, lib.describe(r)


def test_warm_beyond_the_cache_lists_what_it_did_not_keep_and_evicts_nothing(mounts, tmp_path):
    """Issue 30: 6 MiB into a 4 MiB cache printed 100% and exited 0."""
    origin = tmp_path / "origin"
    names = [f"f{i}" for i in range(6)]
    for n in names:
        lib.write_random(origin / n, CHUNK, lib.seeded(f"warm-keep-{n}"))
    m = mounts.make(origin, args=["--chunk-size", "1M", "--cache-size", "4M"])
    r = stoker("warm", "--wait", m.mnt, timeout=120)
    assert r.returncode == 1, lib.describe(r)
    assert "a warm evicts nothing, so it keeps what fits" in r.stderr, lib.describe(r)
    not_kept = sorted(re.findall(r"/(f\d): not kept: ", r.stderr))
    assert not_kept and len(not_kept) < len(names), lib.describe(r)
    assert "100%" not in r.stdout.strip().splitlines()[-1], lib.describe(r)
    st = m.stats()
    assert st["evicted_bytes"] == 0, st  # not even what the same warm kept
    # Every file not listed is in the cache whole: reading it asks nothing
    # of the origin.
    before = st["origin_bytes_read"]
    kept = [n for n in names if n not in not_kept]
    for n in kept:
        with open(m.mnt / n, "rb") as f:
            assert len(f.read()) == CHUNK
    assert m.stats()["origin_bytes_read"] == before, (kept, not_kept, m.stats())
    # A second warm of what was kept, in the full cache: nothing to refuse.
    r = stoker("warm", "--wait", *[m.mnt / n for n in kept], timeout=120)
    assert r.returncode == 0, lib.describe(r)


def test_stat_for_a_person_and_its_watch(mounts, tmp_path):
    origin = tmp_path / "origin"
    lib.write_random(origin / "a", 2 * CHUNK, lib.seeded("stat-person"))
    m = mounts.make(origin)
    for _ in range(2):
        with open(m.mnt / "a", "rb") as f:
            f.read()
    r = stoker("stat", m.mnt)
    assert r.returncode == 0, lib.describe(r)
    rows = {ln.split("  ", 1)[0]: ln.split("  ", 1)[1].strip()
            for ln in r.stdout.splitlines() if "  " in ln}
    assert rows["mountpoint"] == str(m.mnt), r.stdout
    assert "of the reads that reached the daemon" in rows["hit ratio"], r.stdout
    if m.stats().get("passthrough_bytes", 0) > 0:
        assert "handed to the kernel by passthrough" in rows["hit ratio"], r.stdout
    assert "chunks not cached" in rows, r.stdout
    # --watch: bounded by --count, one table and rates row per refresh.
    r = stoker("stat", m.mnt, "--watch", "0.2", "--count", "3", timeout=30)
    assert r.returncode == 0, lib.describe(r)
    assert r.stdout.count("mountpoint  ") == 3, r.stdout
    assert r.stdout.count("rates  over the last ") == 2, r.stdout
    r = stoker("stat", m.mnt, "--watch", "--count", "1", timeout=30)
    assert r.returncode == 0 and "rates  " in r.stdout, lib.describe(r)
    r = stoker("stat", m.mnt, "--count", "2")
    assert r.returncode == 2, lib.describe(r)
    # Ctrl-C ends a watch cleanly; so does the mount going away.
    def watch():
        p = subprocess.Popen([lib.STOKER_BIN, "stat", m.mnt, "--watch", "0.2"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert p.stdout.readline().startswith("mountpoint"), "no table drawn"
        return p

    p = watch()
    try:
        p.send_signal(signal.SIGINT)
        assert p.wait(timeout=10) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    p = watch()
    try:
        m.unmount()
        _, err = p.communicate(timeout=20)
        assert p.returncode == 1 and "went away" in err, err
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
