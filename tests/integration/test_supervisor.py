"""--supervise (the default): a daemon killed with -9 is replaced on the same mount.

Readers that keep files and directories open across the kill finish with the
origin's bytes; a request the dead daemon had taken but not answered is sent
again (FUSE_NOTIFY_RESEND) and answered by the next daemon; `stoker unmount`
and SIGTERM still end everything cleanly; too many crashes in a row leave the
mount dead, as without a supervisor, for the next `stoker mount` to clear."""

import hashlib
import os
import signal
import subprocess
import threading
import time

import pytest

import stoker_testlib as lib
from stoker_testlib import MIB

ARGS = ["--chunk-size", "1M", "--cache-size", "1G", "--supervise"]


def make_dataset(origin, n=8, size=6 * MIB):
    rng = lib.seeded("supervisor")
    for i in range(n):
        lib.write_random(origin / f"f{i}", size + rng.randrange(0, MIB), rng)
    for i in range(50):
        lib.write_random(origin / "dir" / f"s{i:02d}", rng.randrange(1, 50_000), rng)
    return lib.hashes_of(origin)


def supervisor_of(m):
    s = m.stats()
    assert "supervisor" in s, f"no supervisor in stats: {s}"
    return s["pid"], s["supervisor"]


def kill_daemon(m):
    """kill -9 the serving daemon; returns once another one serves."""
    pid, sup = supervisor_of(m)
    os.kill(pid, signal.SIGKILL)
    lib.wait_until(lambda: not lib.pid_alive(pid), 30, what=f"daemon {pid} gone")
    lib.wait_until(lambda: m.stats()["pid"] != pid, 60, what="a new daemon serving")
    new_pid, new_sup = supervisor_of(m)
    assert new_sup["pid"] == sup["pid"], "the supervisor changed"
    assert new_sup["generation"] == sup["generation"] + 1
    assert new_sup["restarts"] == sup["restarts"] + 1
    m.pid = new_pid
    return new_pid


class OpenReaders:
    """Threads that each open one file once and read it to the end in
    256 KiB steps, slowly, hashing what they read."""

    def __init__(self, mnt, names, step=256 * 1024, pause=0.01):
        self.results = {}
        self.errors = []
        self.opened = threading.Barrier(len(names) + 1)
        self.threads = [threading.Thread(target=self._read, args=(mnt / n, n, step, pause),
                                         daemon=True) for n in names]
        for t in self.threads:
            t.start()
        self.opened.wait(timeout=60)

    def _read(self, path, name, step, pause):
        try:
            with open(path, "rb", buffering=0) as f:
                self.opened.wait(timeout=60)
                h = hashlib.sha256()
                while True:
                    b = f.read(step)
                    if not b:
                        break
                    h.update(b)
                    time.sleep(pause)
            self.results[name] = h.hexdigest()
        except Exception as e:  # noqa: BLE001 - reported by the test
            self.errors.append(f"{name}: {e!r}")

    def join(self, timeout):
        deadline = time.monotonic() + timeout
        for t in self.threads:
            t.join(max(0.0, deadline - time.monotonic()))
        alive = [t for t in self.threads if t.is_alive()]
        assert not alive, f"{len(alive)} readers still blocked after {timeout} s"


# With --revalidate 0 the kernel caches no attribute, so a daemon that looked
# at its own mountpoint while starting (it once did) would wait for itself.
@pytest.mark.parametrize("revalidate", ["60", "0"])
def test_open_files_and_dirs_survive_kill9(mounts, tmp_path, revalidate):
    origin = tmp_path / "origin"
    expected = make_dataset(origin)
    m = mounts.make(origin, args=ARGS + ["--revalidate", revalidate])
    names = sorted(n for n in expected if n.startswith("f"))
    # A directory handle open across the kills, read after them.
    dfd = os.open(m.mnt / "dir", os.O_RDONLY | os.O_DIRECTORY)
    try:
        readers = OpenReaders(m.mnt, names)
        for _ in range(3):
            time.sleep(0.3)
            kill_daemon(m)
        readers.join(lib.IO_TIMEOUT)
        assert not readers.errors, readers.errors
        assert readers.results == {n: expected[n] for n in names}
        listed = sorted(os.listdir(dfd))
        assert listed == sorted(os.listdir(origin / "dir"))
    finally:
        os.close(dfd)
    # Everything, including what no reader touched, reads right afterwards.
    lib.check_hashes(m.mnt, expected)
    s = m.stats()
    assert s["supervisor"]["restarts"] == 3
    assert s["errors"] == 0
    m.unmount()
    lib.wait_until(lambda: not lib.pid_alive(s["supervisor"]["pid"]), lib.EXIT_TIMEOUT,
                   what="supervisor exit after unmount")


def test_request_in_flight_at_the_kill_is_answered_again(mounts, tmp_path):
    """The daemon is killed while it waits on the origin for a read (the origin
    is another stoker mount, stopped with SIGSTOP): the kernel holds the read
    as taken; the next daemon asks for it again and answers it."""
    data = tmp_path / "data"
    expected = make_dataset(data, n=2, size=3 * MIB)
    inner = mounts.make(data, args=["--chunk-size", "1M", "--cache-size", "1G"])
    outer = mounts.make(inner.mnt, args=ARGS)
    result = {}

    def read_all():
        try:
            result["hash"] = lib.sha256_file(outer.mnt / "f0")
        except Exception as e:  # noqa: BLE001
            result["error"] = repr(e)

    lib.stop_process(inner.pid)
    t = threading.Thread(target=read_all, daemon=True)
    try:
        t.start()
        # The outer daemon has taken the read and waits on the stopped origin.
        time.sleep(1.0)
        assert t.is_alive() and not result, f"the read did not wait: {result}"
        pid, sup = supervisor_of_no_fuse(outer)
        os.kill(pid, signal.SIGKILL)
        lib.wait_until(lambda: not lib.pid_alive(pid), 30, what=f"daemon {pid} gone")
    finally:
        os.kill(inner.pid, signal.SIGCONT)
    t.join(lib.IO_TIMEOUT)
    if t.is_alive() and "refused FUSE_NOTIFY_RESEND" in outer.log_tail(200):
        pytest.skip("this kernel has no FUSE_NOTIFY_RESEND (Linux < 6.9)")
    assert not t.is_alive(), "the read taken by the killed daemon was never answered"
    assert result == {"hash": expected["f0"]}
    s = outer.stats()
    assert s["supervisor"]["restarts"] == 1 and s["pid"] != pid
    outer.pid = s["pid"]
    lib.check_hashes(outer.mnt, expected)


def supervisor_of_no_fuse(m):
    """(daemon pid, supervisor pid) from the processes, not through the mount
    (which may be blocked)."""
    pids = lib.daemon_pids_for(m.mnt)
    parents = {}
    for p in pids:
        with open(f"/proc/{p}/stat") as f:
            parents[p] = int(f.read().rpartition(")")[2].split()[1])
    daemons = [p for p in pids if parents[p] in pids]
    assert len(daemons) == 1, f"expected one supervised daemon among {parents}"
    return daemons[0], parents[daemons[0]]


def test_sigterm_to_the_supervisor_unmounts_cleanly(mounts, tmp_path):
    origin = tmp_path / "origin"
    expected = make_dataset(origin, n=1, size=MIB)
    m = mounts.make(origin, args=ARGS)
    kill_daemon(m)
    lib.check_hashes(m.mnt, expected)
    pid, sup = supervisor_of(m)
    os.kill(sup["pid"], signal.SIGTERM)
    lib.wait_until(lambda: not lib.is_mounted(m.mnt), lib.EXIT_TIMEOUT, what="unmounted")
    lib.wait_until(lambda: not lib.pid_alive(pid) and not lib.pid_alive(sup["pid"]),
                   lib.EXIT_TIMEOUT, what="daemon and supervisor exit")
    assert "daemon exiting after clean unmount" in m.log_tail(100)
    # The cache is consistent: fsck finds nothing.
    r = lib.fsck(m.cache)
    assert r.returncode == 0, lib.describe(r)


def test_too_many_crashes_leave_the_mount_dead_for_the_next_mount(mounts, tmp_path):
    origin = tmp_path / "origin"
    expected = make_dataset(origin, n=1, size=MIB)
    m = mounts.make(origin, args=ARGS)
    _, sup = supervisor_of(m)
    for _ in range(5):  # the limit: 5 restarts within 10 s
        kill_daemon(m)
    pid, _ = supervisor_of(m)
    os.kill(pid, signal.SIGKILL)
    lib.wait_until(lambda: not lib.pid_alive(sup["pid"]), lib.EXIT_TIMEOUT,
                   what="the supervisor gives up")
    assert "giving up" in m.log_tail(50)
    with pytest.raises(OSError):
        os.listdir(m.mnt)
    # The next mount clears the dead one and serves the same cache.
    m.mount()
    lib.check_hashes(m.mnt, expected)
    m.unmount()


def test_supervised_by_default_and_no_supervise_lets_a_kill9_end_the_mount(mounts, tmp_path):
    origin = tmp_path / "origin"
    make_dataset(origin, n=1, size=MIB)
    default = mounts.make(origin)
    assert default.stats()["supervisor"]["generation"] == 1
    default.unmount()
    m = mounts.make(origin, args=["--chunk-size", "1M", "--no-supervise"])
    assert "supervisor" not in m.stats()
    os.kill(m.pid, signal.SIGKILL)
    lib.wait_until(lambda: not lib.pid_alive(m.pid), 30, what="daemon gone")
    with pytest.raises(OSError):
        os.listdir(m.mnt)


def test_every_mount_under_io_load_gets_its_supervisor(mounts, tmp_path):
    """Regression (issue 30, item 1): beside O_DIRECT readers and writers, a
    mount came up now and then without its supervisor (a thread just joined
    was still counted). Forty mounts in a row: each one is supervised."""
    origin = tmp_path / "origin"
    make_dataset(origin, n=1, size=MIB)
    load = tmp_path / "load"
    load.mkdir()
    scratch = load / "dd.bin"
    with open(scratch, "wb") as f:
        f.write(os.urandom(8 * MIB))
    loops = [
        f"while :; do dd if=/dev/zero of={load}/w.bin bs=1M count=32 oflag=direct "
        f"conv=fsync status=none || dd if=/dev/zero of={load}/w.bin bs=1M count=32 "
        f"conv=fsync status=none; done",
        f"while :; do dd if={scratch} of=/dev/null bs=64k iflag=direct status=none "
        f"|| dd if={scratch} of=/dev/null bs=64k status=none; done",
    ]
    dds = [subprocess.Popen(["bash", "-c", c], start_new_session=True) for c in loops]
    try:
        m = mounts.new(origin)
        for i in range(40):
            m.mount()
            s = m.stats()
            assert "supervisor" in s, f"mount {i}: no supervisor in stats: {s}"
            assert s["supervisor"]["generation"] == 1
            m.unmount()
    finally:
        for p in dds:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
