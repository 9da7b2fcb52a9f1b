"""A slow network link between stoker and a test server (nginx, moto).

The issue asks for netem (delay and rate on a veth pair). This machine's
kernel has no queueing disciplines at all: `tc qdisc add ... netem`, and
even `tbf`, answer "Specified qdisc kind is unknown", and no module can be
loaded. So the server runs in a network namespace of its own, reached over
a veth pair, and the delay and rate come from bench/slowlink.cc, a TCP
forwarder in user space on the host side: each direction is one link of a
given rate with a given one-way delay, shared by every connection (see its
header). stoker connects to the forwarder on 127.0.0.1.

Namespace() creates `stk4-PID-N` with a veth pair (`s4PID-Na` on the host,
`...b` inside) and a /30 of 10.244.0.0/16; delete() removes the namespace,
which removes the pair; clear_stale() removes those of killed runs. SlowLink(...).start() runs the forwarder as our
child; stop() kills it and returns what it counted.
"""

import itertools
import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

import stoker_testlib as lib

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "bench" / "slowlink.cc"
_seq = itertools.count()


def can_make_namespaces():
    return os.geteuid() == 0 and shutil.which("ip") is not None


def _ip(*args):
    r = lib.run(["ip", *args])
    assert r.returncode == 0, lib.describe(r)
    return r


class Namespace:
    """A network namespace holding one end of a veth pair; the host holds the
    other. inner_ip is the server's address, reached from the host."""

    def __init__(self):
        n = next(_seq)
        pid = os.getpid()
        self.name = f"stk4-{pid}-{n}"
        tag = f"{pid % 100000}{n % 100}"
        self.host_if, self.inner_if = f"s4{tag}a", f"s4{tag}b"  # at most 15 bytes
        # A /30 per namespace: 16384 of them in 10.244.0.0/16, picked by pid and number.
        slot = (pid * 8 + n) % 16384
        base = (10 << 24) | (244 << 16) | (slot * 4)
        quad = lambda a: ".".join(str((a >> s) & 255) for s in (24, 16, 8, 0))  # noqa: E731
        self.host_ip, self.inner_ip = quad(base + 1), quad(base + 2)
        self.made = False

    def create(self):
        _ip("netns", "add", self.name)
        self.made = True
        _ip("link", "add", self.host_if, "type", "veth", "peer", "name", self.inner_if)
        _ip("link", "set", self.inner_if, "netns", self.name)
        _ip("addr", "add", f"{self.host_ip}/30", "dev", self.host_if)
        _ip("link", "set", self.host_if, "up")
        _ip("-n", self.name, "addr", "add", f"{self.inner_ip}/30", "dev", self.inner_if)
        _ip("-n", self.name, "link", "set", self.inner_if, "up")
        _ip("-n", self.name, "link", "set", "lo", "up")
        return self

    def exec_argv(self, argv):
        return ["ip", "netns", "exec", self.name, *argv]

    def free_port(self):
        # A fresh namespace has nothing listening: any port above the
        # ephemeral range's start is free there.
        return 20000 + (os.getpid() + next(_seq)) % 20000

    def delete(self):
        if not self.made:
            return
        lib.run(["ip", "netns", "del", self.name])
        # The host end goes with its peer; remove it if it did not.
        if lib.run(["ip", "link", "show", self.host_if]).returncode == 0:
            lib.run(["ip", "link", "del", self.host_if])
        self.made = False


def clear_stale():
    """Deletes the namespaces of runs that were killed (stk4-PID-N and
    bench/remote's stk4-bench-PID whose process PID is gone), after killing
    what still runs inside them (their server): nothing else is touched."""
    r = lib.run(["ip", "netns", "list"])
    for line in r.stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        m = re.fullmatch(r"stk4-(?:bench-)?(\d+)(?:-\d+)?", name)
        if not m or os.path.exists(f"/proc/{m.group(1)}"):
            continue
        for pid in lib.run(["ip", "netns", "pids", name]).stdout.split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
        lib.run(["ip", "netns", "del", name])


def build(out_dir):
    """Compiles bench/slowlink.cc into out_dir (once per source version)."""
    out = Path(out_dir) / "slowlink"
    if not out.exists() or out.stat().st_mtime < SOURCE.stat().st_mtime:
        cxx = shutil.which("g++") or shutil.which("c++")
        assert cxx, "no C++ compiler for bench/slowlink.cc"
        r = lib.run([cxx, "-O2", "-Wall", "-pthread", "-o", out, SOURCE], timeout=300)
        assert r.returncode == 0, lib.describe(r)
    return out


class SlowLink:
    """The forwarder from 127.0.0.1:port to host:port with delay_ms each way
    (RTT = 2 x delay_ms) and rate_mbit each way."""

    def __init__(self, binary, host, port, delay_ms=2.5, rate_mbit=1000):
        self.argv = [str(binary), "--listen", "127.0.0.1:0", "--connect", f"{host}:{port}",
                     "--delay-ms", str(delay_ms), "--rate-mbit", str(rate_mbit)]
        self.proc = None
        self.port = None

    def start(self):
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     stdin=subprocess.DEVNULL, text=True)
        line = lib.with_deadline(self.proc.stdout.readline, timeout=30, what="slowlink start")
        m = re.fullmatch(r"listening 127\.0\.0\.1:(\d+)\n", line or "")
        assert m, f"slowlink did not start: {line!r} {self.proc.stderr.read() if self.proc.poll() else ''}"
        self.port = int(m.group(1))
        return self

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def stop(self):
        """Ends the forwarder; returns its counts ({} if it had died)."""
        if self.proc is None:
            return {}
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            _, err = self.proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        self.proc = None
        m = re.search(r"slowlink: (.*)", err or "")
        if not m:
            return {}
        words = m.group(1).split()
        return {k: int(v) for k, v in zip(words[::2], words[1::2])}
