"""Fixtures for the tests that run a real container engine (docker.io).

The engine is Debian's dockerd, started by the session for itself alone: its
own data root, exec root, socket and cgroup parent, no bridge and no firewall
rules (the build uses the host's network, containers none). Teardown removes
every container, stops the daemon, unmounts what it left and removes its
cgroups, even when a test fails. There is no image registry here: the base
image is a `debootstrap --variant=minbase` of Debian 12 from the mirror apt
uses, imported as debian:bookworm (and bookworm-slim, which the Dockerfile's
runtime stage names).

STOKER_ENGINE_DIR=DIR keeps the data root and the base image there between
runs (the image build is then cached); by default all of it is temporary.
"""

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
import stoker_testlib as lib  # noqa: E402

DOCKER = "/usr/bin/docker"    # Debian's CLI: another one on PATH may want buildx
DOCKERD = "/usr/sbin/dockerd"
IMAGE = "stoker:engine-test"
BUILD_TIMEOUT = 900           # the image compiles stoker: ~4 min on 2 cores


def _mirror():
    """The Debian mirror apt is configured with, for debootstrap."""
    for src in ("/etc/apt/sources.list.d/debian.sources", "/etc/apt/sources.list"):
        try:
            text = Path(src).read_text()
        except OSError:
            continue
        m = re.search(r"^URIs:\s*(\S+/debian)\s*$", text, re.M) or \
            re.search(r"^deb\s+(?:\[[^]]*\]\s+)?(\S+/debian)\s+bookworm", text, re.M)
        if m:
            return m.group(1)
    return "http://deb.debian.org/debian"


class Engine:
    """One dockerd of this session's own, and the stoker image built in it."""

    def __init__(self, base):
        self.base = Path(base)
        self.sock = self.base / "docker.sock"
        self.cgroup_parent = f"stoker-engine-test-{os.getpid()}"
        self.env = dict(os.environ, DOCKER_HOST=f"unix://{self.sock}", DOCKER_BUILDKIT="1")
        self.proc = None
        self.log = None

    def docker(self, *args, timeout=lib.CMD_TIMEOUT, check=False, input=None):
        r = subprocess.run([DOCKER, *map(str, args)], env=self.env, timeout=timeout,
                           capture_output=True, text=True, input=input)
        if check:
            assert r.returncode == 0, f"docker {' '.join(map(str, args))}: {lib.describe(r)}"
        return r

    def start(self):
        for d in ("root", "exec"):
            (self.base / d).mkdir(parents=True, exist_ok=True)
        self.log = open(self.base / "dockerd.log", "a")
        self.proc = subprocess.Popen(
            [DOCKERD, "--data-root", self.base / "root", "--exec-root", self.base / "exec",
             "-H", f"unix://{self.sock}", "--pidfile", self.base / "dockerd.pid",
             "--bridge=none", "--iptables=false", "--ip-masq=false", "--ip-forward=false",
             "--cgroup-parent", self.cgroup_parent],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)

        def ready():
            if self.proc.poll() is not None:
                raise AssertionError(f"dockerd exited rc={self.proc.returncode}:\n"
                                     + self.log_tail())
            return self.docker("info", timeout=10).returncode == 0
        lib.wait_until(ready, 60, interval=0.2, what="dockerd ready")

    def log_tail(self, lines=40):
        try:
            return "".join(open(self.base / "dockerd.log").readlines()[-lines:])
        except OSError:
            return ""

    def base_image(self):
        """debian:bookworm(-slim) from debootstrap, cached as a tarball."""
        if self.docker("image", "inspect", "debian:bookworm").returncode != 0:
            tar = self.base / "bookworm-minbase.tar"
            if not tar.exists():
                rootfs = self.base / "rootfs"
                shutil.rmtree(rootfs, ignore_errors=True)
                r = lib.run(["debootstrap", "--variant=minbase", "bookworm", rootfs, _mirror()],
                            timeout=600)
                assert r.returncode == 0, "debootstrap failed\n" + lib.describe(r)
                r = lib.run(["tar", "-C", rootfs, "-cf", tar, "."], timeout=300)
                assert r.returncode == 0, lib.describe(r)
                shutil.rmtree(rootfs, ignore_errors=True)
            with open(tar, "rb") as f:
                r = subprocess.run([DOCKER, "import", "-", "debian:bookworm"], env=self.env,
                                   stdin=f, capture_output=True, text=True, timeout=300)
            assert r.returncode == 0, "docker import failed\n" + lib.describe(r)
        self.docker("tag", "debian:bookworm", "debian:bookworm-slim", check=True)

    def build(self):
        """docker/Dockerfile as docs/containers.md builds it (the build stage
        fetches Debian's packages over the host's network)."""
        r = self.docker("build", "--network", "host", "-f", lib.REPO / "docker" / "Dockerfile",
                        "-t", IMAGE, lib.REPO, timeout=BUILD_TIMEOUT)
        assert r.returncode == 0, "docker build failed\n" + lib.describe(r)[-6000:]

    def remove_containers(self):
        r = self.docker("ps", "-aq", timeout=30)
        ids = r.stdout.split() if r.returncode == 0 else []
        if ids:
            self.docker("rm", "-f", *ids, timeout=120)

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        # containerd and its shims name the exec root; none may outlive the test.
        root = str(self.base)
        for pid in map(int, filter(str.isdigit, os.listdir("/proc"))):
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if root in cmd and pid != os.getpid():
                lib.kill_and_reap(pid, grace=2)
        for mp in sorted(lib.mounts_under(self.base), key=len, reverse=True):
            lib.run(["umount", "-l", mp], timeout=15)
        for top in Path("/sys/fs/cgroup").glob(f"*/{self.cgroup_parent}"):
            for d in sorted(top.rglob("*"), key=lambda p: len(p.parts), reverse=True):
                if d.is_dir():
                    try:
                        d.rmdir()
                    except OSError:
                        pass
            try:
                top.rmdir()
            except OSError:
                pass
        if self.log is not None:
            self.log.close()


def _tools_missing():
    return [t for t in (DOCKER, DOCKERD, shutil.which("debootstrap") or "debootstrap")
            if not os.path.exists(t)]


@pytest.fixture(scope="session")
def engine():
    if os.geteuid() != 0 or not os.path.exists("/dev/fuse"):
        pytest.fail("the engine tests need root and /dev/fuse", pytrace=False)
    missing = _tools_missing()
    if missing:
        # The README's test command installs them (.ci/install-deps); in CI
        # their absence is a failure, not a skip.
        msg = f"container engine tools missing: {missing} (apt-get install docker.io debootstrap)"
        if os.environ.get("CI"):
            pytest.fail(msg, pytrace=False)
        pytest.skip(msg)
    keep = os.environ.get("STOKER_ENGINE_DIR")
    # A short path: containerd's sockets live under the exec root, and a
    # socket's path has 108 bytes at most.
    base = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="stoker-engine-", dir="/var/tmp"))
    e = Engine(base)
    try:
        e.start()
        e.base_image()
        e.build()
        yield e
    finally:
        if e.proc is not None and e.proc.poll() is None:
            e.remove_containers()
        e.stop()
        if not keep:
            shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def stoker_bin():
    if not (os.path.isfile(lib.STOKER_BIN) and os.access(lib.STOKER_BIN, os.X_OK)):
        pytest.fail(f"stoker binary not found at {lib.STOKER_BIN} "
                    "(build it, or set STOKER_BIN)", pytrace=False)
    return lib.STOKER_BIN


@pytest.fixture
def shared_dir(tmp_path):
    """A directory that is a shared mount (a bind of itself made shared), as
    docs/containers.md asks of the parent of a mountpoint; unmounted after."""
    d = tmp_path / "shared"
    d.mkdir()
    for args in (["mount", "--bind", d, d], ["mount", "--make-shared", d]):
        r = lib.run(args)
        assert r.returncode == 0, lib.describe(r)
    yield d
    for mp in sorted(lib.mounts_under(d), key=len, reverse=True):
        lib.lazy_unmount(mp)
    for pid in lib.daemon_pids_for(d):
        lib.kill_and_reap(pid)


@pytest.fixture(autouse=True)
def _no_container_left(request):
    yield
    if "engine" in request.fixturenames:
        request.getfixturevalue("engine").remove_containers()
