"""--metrics ADDR:PORT: the daemon serves Prometheus's text format at
/metrics, with the values of stats.json; Debian's prometheus server scrapes a
live mount, and a PromQL query over its HTTP API gives the hit ratio that
`stoker stat` shows. `stoker stat --prometheus` prints the same metrics."""

import json
import shutil
import socket
import subprocess
import urllib.parse
import urllib.request

import pytest

import stoker_testlib as lib
from stoker_testlib import MIB

PROMETHEUS = shutil.which("prometheus")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def get(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.status, r.headers.get("Content-Type"), r.read().decode()


def samples(text):
    """{metric{labels}: value} of an exposition."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def origin_with_files(tmp_path, n=4):
    origin = tmp_path / "origin"
    origin.mkdir()
    rng = lib.seeded("metrics")
    for i in range(n):
        lib.write_random(origin / f"f{i}", 3 * MIB + i, rng)
    return origin


def mount_with_metrics(mounts, origin, port):
    # Reads through the daemon (no passthrough), so that the second pass is
    # counted as cache hits.
    return mounts.make(origin, args=["--chunk-size", "1M", "--cache-size", "1G", "--passthrough",
                                     "off", "--metrics", f"127.0.0.1:{port}"])


def read_twice(m, origin):
    for _ in range(2):
        for p in sorted(origin.iterdir()):
            assert lib.read_file(m.mnt / p.name) == p.read_bytes()
        lib.drop_caches()


def test_metrics_are_the_stats(mounts, tmp_path):
    origin = origin_with_files(tmp_path)
    port = free_port()
    m = mount_with_metrics(mounts, origin, port)
    read_twice(m, origin)
    lib.wait_until(lambda: m.stats()["chunks"] >= 15, 30, what="the files cached")
    status, ctype, text = get(f"http://127.0.0.1:{port}/metrics")
    st = m.stats()
    assert status == 200 and "version=0.0.4" in ctype, ctype
    s = samples(text)
    assert s["stoker_read_bytes_total"] == st["bytes_read"] > 0
    assert s["stoker_cache_hit_bytes_total"] == st["cache_hit_bytes"] > 0
    assert s["stoker_origin_read_bytes_total"] == st["origin_bytes_read"] > 0
    assert s["stoker_cache_used_bytes"] == st["cache_used_bytes"]
    assert s['stoker_errors_total{kind="read"}'] == 0
    assert s['stoker_read_duration_seconds_bucket{le="+Inf"}'] == s["stoker_read_duration_seconds_count"] > 0
    assert 'stoker_info{' in text and 'opens="daemon"' in text
    # The CLI prints the same metrics from stats.json.
    r = lib.run([lib.STOKER_BIN, "stat", "--prometheus", m.mnt])
    assert r.returncode == 0, lib.describe(r)
    printed = samples(r.stdout)
    assert set(printed) == set(s)
    assert printed["stoker_read_bytes_total"] == s["stoker_read_bytes_total"]
    # Anything but /metrics is a 404; the mount's files are not served.
    with pytest.raises(urllib.error.HTTPError) as e:
        get(f"http://127.0.0.1:{port}/f0")
    assert e.value.code == 404


def test_a_taken_port_fails_the_mount_with_one_line(mounts, tmp_path):
    origin = origin_with_files(tmp_path, n=1)
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        port = taken.getsockname()[1]
        mnt = tmp_path / "mnt-taken"
        mnt.mkdir()
        r = lib.run([lib.STOKER_BIN, "mount", origin, mnt, "--cache", tmp_path / "cache-taken",
                     "--metrics", f"127.0.0.1:{port}"])
        assert r.returncode == 1, lib.describe(r)
        assert len(r.stderr.strip().splitlines()) == 1 and "--metrics" in r.stderr, r.stderr
        assert not lib.is_mounted(mnt)
        r = lib.run([lib.STOKER_BIN, "mount", origin, mnt, "--cache", tmp_path / "cache-taken",
                     "--metrics", "localhost:x"])
        assert r.returncode == 2 and "--metrics" in r.stderr, lib.describe(r)
    finally:
        taken.close()


@pytest.mark.skipif(PROMETHEUS is None, reason="Debian's prometheus is not installed (.ci/install-deps)")
def test_prometheus_scrapes_a_live_mount(mounts, tmp_path):
    origin = origin_with_files(tmp_path)
    port, prom_port = free_port(), free_port()
    m = mount_with_metrics(mounts, origin, port)
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n"
        "scrape_configs:\n  - job_name: stoker\n"
        f"    static_configs:\n      - targets: ['127.0.0.1:{port}']\n")
    log = open(tmp_path / "prometheus.log", "w")
    prom = subprocess.Popen([PROMETHEUS, f"--config.file={config}",
                             f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                             f"--web.listen-address=127.0.0.1:{prom_port}"],
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        read_twice(m, origin)
        st = m.stats()
        want = st["cache_hit_bytes"] / st["bytes_read"]

        def query(q):
            url = f"http://127.0.0.1:{prom_port}/api/v1/query?" + urllib.parse.urlencode({"query": q})
            try:
                status, _, body = get(url)
            except OSError:
                return None  # not up yet
            result = json.loads(body)["data"]["result"]
            return float(result[0]["value"][1]) if status == 200 and result else None

        # Scraped after the reads: the counters Prometheus holds are the daemon's.
        lib.wait_until(lambda: query("stoker_read_bytes_total") == st["bytes_read"], 60,
                       what="a scrape after the reads")
        got = query("stoker_cache_hit_bytes_total / stoker_read_bytes_total")
        assert got == pytest.approx(want, rel=1e-9)
        r = lib.run([lib.STOKER_BIN, "stat", m.mnt])
        assert r.returncode == 0, lib.describe(r)
        [row] = [ln for ln in r.stdout.splitlines() if ln.startswith("hit ratio")]
        assert row.split()[2] == f"{100 * got:.1f}%", (row, got)
        assert query('up{job="stoker"}') == 1
    finally:
        prom.terminate()
        try:
            prom.wait(timeout=30)
        except subprocess.TimeoutExpired:
            prom.kill()
        log.close()
