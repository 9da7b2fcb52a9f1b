"""Containers and clusters (issue 5), without a container engine: the tests
build the same isolation with util-linux (unshare, nsenter, setpriv).

- Way 1: stoker mounted on the "host" with allow_other,default_permissions,
  shared into a "container" (new mount + PID namespace whose mounts are
  slaves of the host's, the host's shared mount parent bound in with rslave),
  read there by an unprivileged uid; a file the origin keeps from that uid is
  EACCES; a daemon restarted while the container lives shows up inside it.
- Way 2: the daemon inside a namespace with /dev/fuse, read from a second
  process in the same namespace (nsenter); and as a sidecar whose mount
  propagates out through a shared directory (Kubernetes' Bidirectional).
- PID 1: the daemon as PID 1 of a new PID namespace reaps orphans and on
  SIGTERM unmounts and exits 0.
- No /dev/fuse, no CAP_SYS_ADMIN, no_new_privs: one clear line, exit 1,
  nothing mounted.
- A non-root daemon (fusermount3) with allow_other,default_permissions
  enforces the origin's permission bits for other users.
- The files in docker/ say what docs/containers.md promises (parsed, linted).

Every namespace is torn down by SIGKILL to its PID 1 (which ends every
process in it, and with the last one its mounts) and every host mount is
lazily unmounted, even when a test fails.
"""

import hashlib
import os
import re
import shutil
import signal
import stat
import struct
import subprocess
import tempfile
from pathlib import Path

import pytest

import stoker_testlib as lib
from stoker_testlib import MIB

USER = 65534          # nobody: the daemon's user where it is not root
READER = 4321         # an unprivileged reader with no name
# Debian's python3 (.ci/install-deps): any uid may run it, unlike a python
# under /root.
READER_PYTHON = "/usr/bin/python3"
DEFAULT_ARGS = ["--chunk-size", "1M", "--cache-size", "1G"]
SHARE_ARGS = DEFAULT_ARGS + ["-o", "allow_other,default_permissions"]

# Runs inside the namespaces as an unprivileged uid. `tfrecord PATH` reads
# PATH the way tf.data.TFRecordDataset does (sequentially, record by record:
# 8-byte length, 4-byte crc, data, 4-byte crc) and prints the record count and
# the sha256 of the bytes read; `open PATH` prints "ok" or the errno's name.
READER_SCRIPT = r'''
import errno, hashlib, struct, sys
what, path = sys.argv[1], sys.argv[2]
if what == "open":
    try:
        open(path, "rb").close()
        print("ok")
    except OSError as e:
        print(errno.errorcode[e.errno])
    sys.exit(0)
h = hashlib.sha256()
records = 0
with open(path, "rb", buffering=256 * 1024) as f:
    while True:
        head = f.read(12)
        if not head:
            break
        h.update(head)
        (length,) = struct.unpack("<Q", head[:8])
        body = f.read(length + 4)
        if len(body) != length + 4:
            sys.exit("short record %d" % records)
        h.update(body)
        records += 1
print(records, h.hexdigest())
'''


# ---------------------------------------------------------------------------
# Namespaces


def children_of(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


class Namespace:
    """`unshare FLAGS --fork -- sh -c SCRIPT`: the script is PID 1 of a new
    PID namespace (with a mount namespace if FLAGS say so). The script says
    "ready" on stdout when it is set up. close() kills PID 1 with SIGKILL,
    which kills every process in the namespace."""

    def __init__(self, flags, script, stderr_path):
        # stderr (the daemon's log, where it runs in here) goes to a file: a
        # pipe nobody reads would block the daemon once full.
        self.stderr_path = stderr_path
        with open(stderr_path, "w") as err:
            self.proc = subprocess.Popen(
                ["unshare", *flags, "--pid", "--fork", "--", "sh", "-c", script],
                stdout=subprocess.PIPE, stderr=err, text=True)
        try:
            self.init = lib.wait_until(lambda: (children_of(self.proc.pid) or [None])[0] or
                                       self._died(), 30, what="namespace PID 1")
        except BaseException:
            self.proc.kill()  # before PID 1 exists, unshare is all there is
            self.proc.wait(timeout=30)
            self.proc.stdout.close()
            raise

    def stderr(self):
        return Path(self.stderr_path).read_text(errors="replace")

    def _died(self):
        if self.proc.poll() is not None:
            raise AssertionError(f"unshare exited {self.proc.returncode}: {self.stderr()}")
        return None

    def wait_ready(self):
        line = lib.with_deadline(self.proc.stdout.readline, timeout=30, what="namespace ready")
        assert line.strip() == "ready", f"namespace setup failed: {line!r} {self.stderr()}"
        return self

    def terminate(self):
        """SIGTERM to PID 1, as `docker stop` sends; returns its exit code."""
        os.kill(self.init, signal.SIGTERM)
        return self.proc.wait(timeout=lib.EXIT_TIMEOUT)

    def run(self, args, uid=None, timeout=lib.IO_TIMEOUT):
        """Runs args in the namespace's mount and PID namespaces, as uid."""
        cmd = ["nsenter", "-t", self.init, "-m", "-p", "--"]
        if uid is not None:
            cmd += ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]
        return lib.run(cmd + list(args), timeout=timeout)

    def close(self):
        if self.proc.poll() is None:
            for pid in children_of(self.proc.pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
        self.proc.stdout.close()


@pytest.fixture
def world(stoker_bin):
    """A directory every uid may traverse (pytest's tmp root is 0700), with
    teardown of whatever the test left: namespaces, mounts, daemons."""
    base = Path(tempfile.mkdtemp(prefix="stoker-containers-", dir="/tmp"))
    base.chmod(0o755)
    made = []

    class World:
        path = base
        mounts = []

        def namespace(self, flags, script):
            ns = Namespace(flags, script, base / f"ns{len(made)}.stderr")
            made.append(ns)
            return ns

        def stoker_mount(self, origin, mnt, cache, args):
            m = lib.StokerMount(origin, mnt, cache, args)
            self.mounts.append(m)
            return m

        def mkdir(self, name, owner=None):
            d = base / name
            d.mkdir(mode=0o755)
            if owner is not None:
                os.chown(d, owner, owner)
            return d

        def shared_dir(self, name):
            """A directory that is a shared mount (what `mount --make-shared`
            does to a host's /mnt/stoker), so mounts below it propagate."""
            d = self.mkdir(name)
            r = lib.run(["mount", "--bind", d, d])
            assert r.returncode == 0, lib.describe(r)
            r = lib.run(["mount", "--make-shared", d])
            assert r.returncode == 0, lib.describe(r)
            return d

    w = World()
    try:
        yield w
    finally:
        for ns in reversed(made):
            ns.close()
        for m in reversed(w.mounts):
            m.cleanup()
        for mp in sorted(lib.mounts_under(base), key=len, reverse=True):
            lib.lazy_unmount(mp)
        lib.cleanup_under(base)
        left = lib.mounts_under(base)
        shutil.rmtree(base, ignore_errors=not left)
        assert not left, f"mounts left under {base}: {left}"


# ---------------------------------------------------------------------------
# Data


def write_tfrecord(path, n, rng):
    """n records of varied sizes in TFRecord framing (crcs are not checked
    by the reader, so zeros do)."""
    with open(path, "wb") as f:
        for i in range(n):
            body = rng.randbytes(rng.randrange(1, 200 * 1024))
            f.write(struct.pack("<Q", len(body)) + b"\0" * 4 + body + b"\0" * 4)
    return n


def make_origin(world, owner_of_private=0):
    """origin/: a TFRecord shard and a plain file readable by all, and
    `private` (0600, owned by owner_of_private) that other uids may not read."""
    origin = world.path / "origin"
    (origin / "train").mkdir(parents=True)
    for d in (origin, origin / "train"):
        d.chmod(0o755)
    rng = lib.seeded("containers")
    shard = origin / "train" / "train-00000-of-00001.tfrecord"
    records = write_tfrecord(shard, 60, rng)
    lib.write_random(origin / "train" / "plain.bin", 3 * MIB + 17, rng)
    private = lib.write_random(origin / "private", MIB, rng)
    os.chown(private, owner_of_private, owner_of_private)
    private.chmod(0o600)
    for p in (shard, origin / "train" / "plain.bin"):
        p.chmod(0o644)
    return origin, records


def reader_script(world):
    p = world.path / "reader.py"
    if not p.exists():
        p.write_text(READER_SCRIPT)
        p.chmod(0o644)
    return p


def check_reads(ns, world, data_root, origin, records, uid=READER):
    """Reads through data_root inside ns as uid: sha256sum and the
    TFRecord reader see the origin's bytes; `private` is EACCES."""
    shard_rel = "train/train-00000-of-00001.tfrecord"
    for rel in (shard_rel, "train/plain.bin"):
        r = ns.run(["sha256sum", f"{data_root}/{rel}"], uid=uid)
        assert r.returncode == 0, lib.describe(r)
        assert r.stdout.split()[0] == lib.sha256_file(origin / rel), f"{rel} differs\n{lib.describe(r)}"
    r = ns.run([READER_PYTHON, reader_script(world), "tfrecord", f"{data_root}/{shard_rel}"],
               uid=uid)
    assert r.returncode == 0, lib.describe(r)
    assert r.stdout.split() == [str(records), lib.sha256_file(origin / shard_rel)], lib.describe(r)
    r = ns.run([READER_PYTHON, reader_script(world), "open", f"{data_root}/private"], uid=uid)
    assert r.stdout.strip() == "EACCES", "a file the origin keeps from uid %d\n%s" % (uid, lib.describe(r))
    r = ns.run(["cat", f"{data_root}/private"], uid=uid)
    assert r.returncode != 0 and "Permission denied" in r.stderr, lib.describe(r)


def container_script(bind_from, bind_to):
    """What `docker run -v BIND_FROM:BIND_TO:ro,rslave` sets up, then idles."""
    return (f"mount --rbind {bind_from} {bind_to} && mount --make-rslave {bind_to} && "
            f"mount -o remount,bind,ro {bind_to} && echo ready && exec sleep 86400")


def assert_daemon_child_of_pid1(ns, stats_pid):
    """stoker as PID 1 forks the daemon and stays init: the daemon is its
    child (and not PID 1)."""
    assert stats_pid != 1, "the daemon runs as PID 1 itself"
    kids = [p for p in children_of(ns.init)
            if os.path.realpath(f"/proc/{p}/exe") == os.path.realpath(lib.STOKER_BIN)]
    assert len(kids) == 1, f"PID 1's children: {children_of(ns.init)}"


def container(world, bind_from, bind_to):
    """A container started with -v BIND_FROM:BIND_TO:ro,rslave."""
    return world.namespace(["--mount", "--propagation", "slave"],
                           container_script(bind_from, bind_to)).wait_ready()


def way1_layout(world):
    """origin/; the host's /mnt/stoker (a shared mount) with imagenet/ to
    mount on; the container's /data."""
    origin, records = make_origin(world)
    host = world.shared_dir("host-mnt")
    mnt = host / "imagenet"
    mnt.mkdir()
    data = world.mkdir("container-data")
    return origin, records, host, mnt, data


def daemon_in_namespace(world, flags, origin, mnt, cache, setup="", run_as="",
                        foreground=True, pid1=True):
    """A namespace whose PID 1 is `stoker mount` (after the shell lines in
    setup, under the command prefix run_as); returns once the mount answers
    inside it. With pid1=False the shell stays PID 1: it reports the
    daemon's exit on stderr and idles until close()."""
    mount = (f"{run_as}{lib.STOKER_BIN} mount {origin} {mnt} --cache {cache} "
             f"{' '.join(SHARE_ARGS)}" + (" --foreground" if foreground else ""))
    script = (f"{setup}exec {mount}" if pid1 else
              f"{setup}{mount}; echo \"daemon exited $?\" >&2; exec sleep 86400")
    ns = world.namespace(flags, script)
    try:
        lib.wait_until(lambda: ns.run(["test", "-e", f"{mnt}/.stoker/stats.json"]).returncode == 0
                       or ns._died(), lib.MOUNT_TIMEOUT, what="mount live inside the namespace")
    except lib.Hung as e:
        raise lib.Hung(f"{e}; the namespace's stderr:\n{ns.stderr()}") from None
    return ns


def stop_cleanly(ns, mnt):
    """SIGTERM to the namespace's PID 1: exit 0 after a clean unmount,
    logged to stderr."""
    rc = ns.terminate()
    err = ns.stderr()
    assert rc == 0, f"PID 1 exited {rc} on SIGTERM\n{err}"
    assert f"unmounted {mnt}" in err, "no clean unmount logged to stderr\n" + err


def ns_stats_pid(ns, mnt):
    r = ns.run(["cat", f"{mnt}/.stoker/stats.json"])
    assert r.returncode == 0, lib.describe(r)
    return int(re.search(r'"pid":\s*(\d+)', r.stdout).group(1))


# ---------------------------------------------------------------------------
# Way 1: mounted on the host, shared into containers


def test_way1_host_mount_read_in_container_as_other_uid(world):
    origin, records, host, mnt, data = way1_layout(world)
    # One container started before the mount exists, one after.
    early = container(world, host, data)
    m = world.stoker_mount(origin, mnt, world.path / "cache", SHARE_ARGS)
    m.mount()
    late = container(world, host, data)
    assert not lib.is_mounted(data), "the containers' binds leaked to the host"
    for ns in (early, late):
        check_reads(ns, world, f"{data}/imagenet", origin, records)
        assert ns_stats_pid(ns, f"{data}/imagenet") == m.pid

    # Restart the daemon while both containers live: they see the new mount.
    m.unmount()
    for ns in (early, late):
        r = ns.run(["sh", "-c", f"ls -A {data}/imagenet | wc -l"])
        assert r.stdout.strip() == "0", "the unmount did not reach the container\n" + lib.describe(r)
    m2 = world.stoker_mount(origin, mnt, world.path / "cache", SHARE_ARGS)
    m2.mount()
    assert m2.pid != m.pid
    for ns in (early, late):
        assert ns_stats_pid(ns, f"{data}/imagenet") == m2.pid
        check_reads(ns, world, f"{data}/imagenet", origin, records)
    m2.unmount()


def test_way1_binding_the_mountpoint_itself_pins_the_old_mount(world):
    """Why docs/containers.md binds the mountpoint's parent: a container that bound
    the mount itself (-v /mnt/stoker/imagenet:/data) keeps the mount it saw,
    so after the daemon stops and restarts it reads ENOTCONN."""
    origin, _, _, mnt, data = way1_layout(world)
    m = world.stoker_mount(origin, mnt, world.path / "cache", SHARE_ARGS)
    m.mount()
    ns = container(world, mnt, data)
    plain = "train/plain.bin"
    r = ns.run(["sha256sum", f"{data}/{plain}"])
    assert r.returncode == 0 and r.stdout.split()[0] == lib.sha256_file(origin / plain), lib.describe(r)
    os.kill(m.pid, signal.SIGTERM)
    lib.wait_until(lambda: not lib.pid_alive(m.pid), lib.EXIT_TIMEOUT, what="daemon exit")
    m2 = world.stoker_mount(origin, mnt, world.path / "cache", SHARE_ARGS)
    m2.mount()
    r = ns.run(["sha256sum", f"{data}/{plain}"])
    assert r.returncode != 0 and "Transport endpoint is not connected" in r.stderr, lib.describe(r)
    m2.unmount()


def test_way1_without_allow_other_other_uids_are_refused(world):
    """The pitfall docs/containers.md names: without allow_other only the daemon's
    user may enter the mount, even where the origin's bits allow it."""
    origin, _, host, mnt, data = way1_layout(world)
    m = world.stoker_mount(origin, mnt, world.path / "cache", DEFAULT_ARGS)
    m.mount()
    ns = container(world, host, data)
    r = ns.run([READER_PYTHON, reader_script(world), "open", f"{data}/imagenet/train/plain.bin"],
               uid=READER)
    assert r.stdout.strip() == "EACCES", lib.describe(r)
    r = ns.run(["sha256sum", f"{data}/imagenet/train/plain.bin"])  # root, the daemon's user
    assert r.returncode == 0, lib.describe(r)
    m.unmount()


# ---------------------------------------------------------------------------
# Way 2: the daemon inside the container


def test_way2_daemon_in_namespace_read_by_second_process(world):
    origin, records = make_origin(world)
    mnt = world.mkdir("mnt")
    cache = world.path / "cache"
    ns = daemon_in_namespace(world, ["--mount", "--propagation", "private", "--mount-proc"],
                             origin, mnt, cache)
    assert not lib.is_mounted(mnt), "the in-container mount is visible on the host"
    check_reads(ns, world, mnt, origin, records)
    stop_cleanly(ns, mnt)
    r = lib.fsck(cache)
    assert r.returncode == 0, lib.describe(r)


def test_way2_sidecar_mount_propagates_to_host_and_other_containers(world):
    """Kubernetes' sidecar: the daemon's namespace shares the mount parent
    (Bidirectional); the host and a consumer container (HostToContainer, its
    own namespace, started first) read the mount the sidecar made."""
    origin, records = make_origin(world)
    shared = world.shared_dir("empty-dir")
    mnt = shared / "imagenet"
    mnt.mkdir()
    data = world.mkdir("consumer-data")
    consumer = container(world, shared, data)
    cache = world.path / "cache"
    # --propagation unchanged: the sidecar's copy of `shared` stays a peer of
    # the host's. The daemon's FUSE mount is the only mount made in it.
    sidecar = daemon_in_namespace(world, ["--mount", "--propagation", "unchanged"],
                                  origin, mnt, cache)
    assert lib.is_mounted(mnt), "the sidecar's mount did not propagate to the host"
    host_view = lib.StokerMount(origin, mnt, cache)
    assert_daemon_child_of_pid1(sidecar, host_view.stats()["pid"])
    assert not lib.check_hashes(mnt, {"train/plain.bin": lib.sha256_file(origin / "train/plain.bin")})
    check_reads(consumer, world, f"{data}/imagenet", origin, records)
    stop_cleanly(sidecar, mnt)
    assert not lib.is_mounted(mnt), "the sidecar's unmount did not reach the host"
    r = consumer.run(["sh", "-c", f"ls -A {data}/imagenet | wc -l"])
    assert r.stdout.strip() == "0", "the unmount did not reach the consumer\n" + lib.describe(r)


# ---------------------------------------------------------------------------
# PID 1


def find_pids(argv):
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                if [a.decode() for a in f.read().split(b"\0") if a] == argv:
                    out.append(int(d))
        except OSError:
            continue
    return out


def ppid_of(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rpartition(")")[2].split()[1])


def test_pid1_reaps_orphans_and_unmounts_on_sigterm(world):
    origin, records = make_origin(world)
    mnt = world.mkdir("mnt")
    cache = world.path / "cache"
    # Like a container: own PID namespace and /proc; without --foreground,
    # which PID 1 implies.
    ns = daemon_in_namespace(world, ["--mount", "--propagation", "private", "--mount-proc"],
                             origin, mnt, cache, foreground=False)
    assert_daemon_child_of_pid1(ns, ns_stats_pid(ns, mnt))
    check_reads(ns, world, mnt, origin, records)

    # An orphan in the container is adopted by PID 1, which must reap it.
    marker = ["sleep", "86400.4321"]
    r = ns.run(["sh", "-c", f"{' '.join(marker)} >/dev/null 2>&1 &"])
    assert r.returncode == 0, lib.describe(r)
    orphan = lib.wait_until(lambda: find_pids(marker), 30, what="orphan started")[0]
    lib.wait_until(lambda: ppid_of(orphan) == ns.init, 30, what="orphan adopted by PID 1")
    os.kill(orphan, signal.SIGTERM)
    lib.wait_until(lambda: not os.path.exists(f"/proc/{orphan}"), 30,
                   what="PID 1 reaping its exited orphan (it stays a zombie otherwise)")

    stop_cleanly(ns, mnt)
    r = lib.fsck(cache)
    assert r.returncode == 0, lib.describe(r)


# ---------------------------------------------------------------------------
# What is missing is said in one line, and nothing is mounted


def one_error_line(r):
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 1, lib.describe(r)
    assert len(lines) == 1 and lines[0].startswith("stoker: error: "), lib.describe(r)
    return lines[0]


@pytest.mark.parametrize("hide", ["tmpfs-over-dev", "dev-null-over-fuse"])
def test_missing_dev_fuse(world, hide):
    origin, _ = make_origin(world)
    mnt = world.mkdir("mnt")
    cache = world.path / "cache"
    hide_cmd = ("mount -t tmpfs tmpfs /dev" if hide == "tmpfs-over-dev"
                else "mount --bind /dev/null /dev/fuse")
    # In a private mount namespace: nothing done to /dev reaches the host.
    script = (f"{hide_cmd} || exit 99; {lib.STOKER_BIN} mount {origin} {mnt} --cache {cache}; "
              f"rc=$?; grep -qF ' {mnt} ' /proc/self/mountinfo && exit 98; exit $rc")
    r = lib.run(["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script])
    assert r.returncode not in (98, 99), lib.describe(r)
    line = one_error_line(r)
    want = "/dev/fuse is missing" if hide == "tmpfs-over-dev" else "not the FUSE device"
    assert want in line and "--device /dev/fuse" in line, line
    assert not lib.is_mounted(mnt) and os.listdir(mnt) == []
    assert not lib.daemon_pids_for(mnt)


def test_root_without_cap_sys_admin(world):
    origin, _ = make_origin(world)
    mnt = world.mkdir("mnt")
    r = lib.run(["setpriv", "--bounding-set", "-sys_admin", "--inh-caps", "-sys_admin", "--",
                 lib.STOKER_BIN, "mount", origin, mnt, "--cache", world.path / "cache"])
    line = one_error_line(r)
    assert "CAP_SYS_ADMIN" in line and "--cap-add SYS_ADMIN" in line, line
    assert not lib.is_mounted(mnt) and os.listdir(mnt) == []
    assert not lib.daemon_pids_for(mnt)


def user_fuse_setup(world):
    """Shell lines for a private mount namespace in which a user may mount:
    /dev/fuse 0666 (as Debian's udev makes it; some machines have it 0600,
    and libfuse opens it before it falls back to fusermount3) and
    user_allow_other in /etc/fuse.conf. The host's files are untouched."""
    conf = world.path / "fuse.conf"
    conf.write_text("user_allow_other\n")
    conf.chmod(0o644)
    dev = world.mkdir("dev")
    return (f"mount -t tmpfs -o mode=755 tmpfs {dev} && mknod -m 666 {dev}/fuse c 10 229 && "
            f"mount --bind {dev}/fuse /dev/fuse && mount --bind {conf} /etc/fuse.conf || exit 99; ")


def test_user_with_no_new_privs(world):
    """no_new_privs (docker --security-opt no-new-privileges, Kubernetes
    allowPrivilegeEscalation: false) disables the setuid fusermount3."""
    origin, _ = make_origin(world)
    mnt = world.mkdir("mnt", owner=USER)
    home = world.mkdir("home", owner=USER)
    script = (user_fuse_setup(world) +
              f"setpriv --reuid={USER} --regid={USER} --clear-groups --no-new-privs -- "
              f"{lib.STOKER_BIN} mount {origin} {mnt} --cache {home}/cache; "
              f"rc=$?; grep -qF ' {mnt} ' /proc/self/mountinfo && exit 98; exit $rc")
    r = lib.run(["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script])
    assert r.returncode not in (98, 99), lib.describe(r)
    line = one_error_line(r)
    assert "no_new_privs" in line and "allowPrivilegeEscalation" in line, line
    assert not lib.is_mounted(mnt)


# ---------------------------------------------------------------------------
# A non-root daemon


@pytest.mark.parametrize("stop", ["sigterm", "user-unmount"])
def test_non_root_daemon_allow_other_enforces_origin_bits(world, stop):
    """`stoker mount` as a user through fusermount3, in a private mount
    namespace set up by user_fuse_setup, where the daemon and its readers
    run."""
    origin, records = make_origin(world, owner_of_private=USER)
    setup = user_fuse_setup(world)
    mnt = world.mkdir("mnt", owner=USER)
    home = world.mkdir("home", owner=USER)
    cache = home / "cache"
    ns = daemon_in_namespace(world, ["--mount", "--propagation", "private", "--mount-proc"],
                             origin, mnt, cache, setup=setup, pid1=stop == "sigterm", run_as=f"setpriv --reuid={USER} --regid={USER} "
                                                 "--clear-groups -- ")
    r = ns.run(["grep", "-F", f" {mnt} ", "/proc/self/mountinfo"])
    assert f"user_id={USER}" in r.stdout and "allow_other" in r.stdout, lib.describe(r)
    # Another uid: the origin's bits decide (private is 0600 for the daemon's user).
    check_reads(ns, world, mnt, origin, records, uid=READER)
    # The owner reads private; root too.
    for uid in (USER, 0):
        r = ns.run(["sha256sum", f"{mnt}/private"], uid=uid)
        assert r.returncode == 0 and r.stdout.split()[0] == lib.sha256_file(origin / "private"), \
            lib.describe(r)
    st = os.stat(cache)
    assert st.st_uid == USER and stat.S_IMODE(st.st_mode) == 0o700, "cache dir must be the user's, 0700"
    assert all(os.stat(p).st_uid == USER for p in lib.cache_data_files(cache))
    if stop == "sigterm":
        stop_cleanly(ns, mnt)
        return
    # The user unmounts (through fusermount3 -u); `stoker unmount` returns
    # once the daemon has exited, 0. (Not with the daemon as PID 1: its exit
    # ends the namespace and kills the unmount command with it.)
    r = ns.run([lib.STOKER_BIN, "unmount", mnt], uid=USER)
    assert r.returncode == 0, lib.describe(r)
    # The namespace's shell says how the daemon exited just after it did:
    # `stoker unmount` may return first.
    lib.wait_until(lambda: "daemon exited" in ns.stderr(), lib.EXIT_TIMEOUT, what="daemon exit line")
    assert "daemon exited 0" in ns.stderr() and f"unmounted {mnt}" in ns.stderr(), ns.stderr()


# ---------------------------------------------------------------------------
# docker/: what docs/containers.md promises is what the files say. These need no
# mount and no root; building the image needs an engine (docs/containers.md).

DOCKER = lib.REPO / "docker"


def load_yaml(name):
    yaml = pytest.importorskip("yaml")  # python3-yaml, from .ci/install-deps
    with open(DOCKER / name) as f:
        return list(yaml.safe_load_all(f))


def dockerfile_stages():
    """[(base, name, [instructions])] with continuation lines joined."""
    text = (DOCKER / "Dockerfile").read_text()
    text = re.sub(r"\\\n", " ", text)
    stages = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        word, _, rest = line.partition(" ")
        if word.upper() == "FROM":
            m = re.fullmatch(r"(\S+)(?:\s+AS\s+(\S+))?", rest.strip(), re.IGNORECASE)
            assert m, f"FROM line: {line}"
            stages.append((m.group(1), m.group(2), []))
        else:
            assert stages, f"instruction before FROM: {line}"
            stages[-1][2].append((word.upper(), rest.strip()))
    return stages


def apt_installs(instructions):
    pkgs = []
    for word, rest in instructions:
        if word == "RUN" and "apt-get install" in rest:
            after = rest.split("apt-get install", 1)[1].split("&&")[0]
            pkgs += [t for t in after.split() if not t.startswith("-")]
    return pkgs


def ci_packages():
    text = (lib.REPO / ".ci" / "install-deps").read_text()
    body = re.search(r"pkgs=\((.*?)\)", text, re.S).group(1)
    return set(body.split())


def test_dockerfile_stages_packages_and_entrypoint():
    stages = dockerfile_stages()
    assert [(b, n) for b, n, _ in stages] == [("debian:bookworm", "build"),
                                              ("debian:bookworm-slim", "runtime")]
    build, runtime = stages[0][2], stages[1][2]
    build_pkgs, runtime_pkgs = apt_installs(build), apt_installs(runtime)
    assert build_pkgs and set(build_pkgs) <= ci_packages(), (
        "the image builds with packages .ci/install-deps does not list: "
        f"{sorted(set(build_pkgs) - ci_packages())}")
    for dev in ("libfuse3-dev", "librocksdb-dev", "liburing-dev", "libcurl4-openssl-dev"):
        assert dev in build_pkgs
    assert "fuse3" in runtime_pkgs, "fusermount3 (non-root daemons) and /etc/fuse.conf"
    assert any(w == "RUN" and "cmake --build" in r for w, r in build)
    assert ("COPY", "--from=build /usr/local/bin/stoker /usr/local/bin/stoker") in runtime
    assert ("ENTRYPOINT", '["stoker"]') in runtime
    assert ("STOPSIGNAL", "SIGTERM") in runtime
    # Every package named exists in this Debian release's archive.
    r = lib.run(["apt-cache", "show", "--no-all-versions", *build_pkgs, *runtime_pkgs])
    assert r.returncode == 0, lib.describe(r)


def test_runtime_stage_has_every_library_stoker_links(stoker_bin):
    """The runtime halves of the build packages: each shared library the
    built binary needs comes from a package the runtime stage installs, or
    one they depend on, or one bookworm-slim has. The image is Debian 12, like this machine."""
    listed = apt_installs(dockerfile_stages()[1][2])
    r = lib.run(["apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests",
                 "--no-conflicts", "--no-breaks", "--no-replaces", "--no-enhances", *listed])
    assert r.returncode == 0, lib.describe(r)
    runtime_pkgs = set(listed) | set(re.findall(r"^\s*Depends: (\S+)", r.stdout, re.M))
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]",
                        lib.run(["readelf", "-d", stoker_bin]).stdout)
    assert needed, "readelf found no NEEDED entries"
    if any(re.match(r"lib[amtu]san\.so", n) for n in needed):
        pytest.skip("a sanitizer build links its runtime; the image builds without sanitizers")
    paths = dict(re.findall(r"^\s*(\S+) => (\S+)", lib.run(["ldd", stoker_bin]).stdout, re.M))
    in_slim = {"libc6", "libstdc++6", "libgcc-s1"}
    missing = []
    for lib_name in needed:
        if lib_name not in paths:
            continue  # the dynamic loader itself
        r = lib.run(["dpkg", "-S", os.path.realpath(paths[lib_name])])
        if r.returncode != 0:  # the /lib -> /usr/lib merge: ask by the other name
            r = lib.run(["dpkg", "-S", paths[lib_name]])
        assert r.returncode == 0, lib.describe(r)
        pkg = r.stdout.split(":")[0]
        if pkg not in runtime_pkgs and pkg not in in_slim:
            missing.append(f"{lib_name} ({pkg})")
    assert not missing, f"the runtime stage lacks: {missing}"


def test_compose_ways():
    (compose,) = load_yaml("compose.yaml")
    services = compose["services"]

    def bind(volume, target):
        return next(v for v in volume if isinstance(v, dict) and v["target"] == target)

    # Way 1: the host's mount parent bound read-only with rslave.
    t1 = services["trainer-host-mount"]
    v = bind(t1["volumes"], "/data")
    assert v["source"] == "/mnt/stoker" and v["read_only"] is True
    assert v["bind"]["propagation"] == "rslave"
    # Way 2: the daemon with /dev/fuse and SYS_ADMIN, its mount parent rshared.
    d = services["stoker"]
    assert d["build"]["dockerfile"] == "docker/Dockerfile"
    assert d["command"][0] == "mount" and "/mnt/stoker/imagenet" in d["command"]
    assert "--foreground" not in d["command"], "PID 1 implies it"
    assert any(dev.split(":")[0] == "/dev/fuse" for dev in d["devices"])
    assert "SYS_ADMIN" in d["cap_add"]
    assert "apparmor:unconfined" in d["security_opt"]
    assert d["stop_signal"] == "SIGTERM"
    assert bind(d["volumes"], "/mnt/stoker")["bind"]["propagation"] == "rshared"
    assert bind(d["volumes"], "/origin")["read_only"] is True
    assert bind(d["volumes"], "/cache")
    opts = d["command"][d["command"].index("-o") + 1]
    assert {"allow_other", "default_permissions"} <= set(opts.split(","))
    assert d["healthcheck"]["test"][1:3] == ["stoker", "stat"]
    t2 = services["trainer"]
    assert t2["depends_on"]["stoker"]["condition"] == "service_healthy"
    v = bind(t2["volumes"], "/data")
    assert v["source"] == "/mnt/stoker" and v["bind"]["propagation"] == "rslave"
    assert t1["user"] != "0" and t2["user"] != "0", "the trainers read as a user (allow_other)"


def mounts_by_name(container):
    return {m["name"]: m for m in container.get("volumeMounts", [])}


def check_daemon_container(c, mnt_volume):
    assert c["image"].startswith("stoker")
    assert c["args"][0] == "mount" and "-o" in c["args"]
    assert {"allow_other", "default_permissions"} <= set(c["args"][c["args"].index("-o") + 1].split(","))
    sc = c["securityContext"]
    assert sc["privileged"] is True, "Bidirectional propagation needs a privileged container"
    assert "SYS_ADMIN" in sc["capabilities"]["add"]
    m = mounts_by_name(c)[mnt_volume]
    assert m["mountPropagation"] == "Bidirectional"
    mountpoint = c["args"][2]
    assert mountpoint.startswith(m["mountPath"] + "/"), "the mount must be below the shared dir"
    cache = c["args"][c["args"].index("--cache") + 1]
    assert cache in {x["mountPath"] for x in mounts_by_name(c).values()}
    return mountpoint[len(m["mountPath"]):]


def test_kubernetes_daemonset_and_consumer():
    (ds,) = load_yaml("k8s/daemonset.yaml")
    (pod,) = load_yaml("k8s/consumer-pod.yaml")
    assert ds["apiVersion"] == "apps/v1" and ds["kind"] == "DaemonSet"
    spec = ds["spec"]["template"]["spec"]
    (c,) = spec["containers"]
    dataset = check_daemon_container(c, "mnt")
    volumes = {v["name"]: v for v in spec["volumes"]}
    host_mnt = volumes["mnt"]["hostPath"]["path"]
    assert volumes["cache"]["hostPath"]["path"], "the node's SSD as cache"
    assert volumes["fuse"]["hostPath"] == {"path": "/dev/fuse", "type": "CharDevice"}
    assert mounts_by_name(c)["fuse"]["mountPath"] == "/dev/fuse"
    assert mounts_by_name(c)["origin"]["readOnly"] is True
    assert spec["terminationGracePeriodSeconds"] >= 30
    assert c["readinessProbe"]["exec"]["command"][:2] == ["stoker", "stat"]
    # The cache group: a headless Service names the members, each advertises its own address.
    (svc,) = load_yaml("k8s/group-service.yaml")
    assert svc["kind"] == "Service" and svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["selector"].items() <= ds["spec"]["template"]["metadata"]["labels"].items()
    args = c["args"]
    host, port = args[args.index("--peers") + 1].removeprefix("dns:").rsplit(":", 1)
    assert host.split(".")[0] == svc["metadata"]["name"]
    assert svc["spec"]["ports"][0]["port"] == int(port)
    assert args[args.index("--peer-listen") + 1] == f"0.0.0.0:{port}"
    assert args[args.index("--peer-advertise") + 1] == f"$(POD_IP):{port}"
    assert {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}} in c["env"]
    token = args[args.index("--peer-token-file") + 1]
    secret_mount = mounts_by_name(c)["group-token"]
    assert token.startswith(secret_mount["mountPath"] + "/") and "secret" in volumes["group-token"]

    assert pod["kind"] == "Pod"
    pspec = pod["spec"]
    (t,) = pspec["containers"]
    pvol = {v["name"]: v for v in pspec["volumes"]}
    m = next(m for m in t["volumeMounts"] if pvol[m["name"]].get("hostPath", {}).get("path") == host_mnt)
    assert m["mountPropagation"] == "HostToContainer" and m["readOnly"] is True
    assert f"{m['mountPath']}{dataset}" in t["command"], "the trainer reads the mounted dataset"
    assert not t.get("securityContext", {}).get("privileged")
    assert pspec["securityContext"]["runAsUser"] != 0


def test_kubernetes_sidecar():
    (pod,) = load_yaml("k8s/sidecar-pod.yaml")
    spec = pod["spec"]
    (side,) = spec["initContainers"]
    assert side["restartPolicy"] == "Always", "a native sidecar keeps running"
    assert side["startupProbe"]["exec"]["command"][:2] == ["stoker", "stat"]
    dataset = check_daemon_container(side, "mnt")
    assert {v["name"]: v for v in spec["volumes"]}["mnt"] == {"name": "mnt", "emptyDir": {}}
    (t,) = spec["containers"]
    m = mounts_by_name(t)["mnt"]
    assert m["mountPropagation"] == "HostToContainer" and m["readOnly"] is True
    assert f"{m['mountPath']}{dataset}" in t["command"]


def test_yaml_lint():
    """yamllint (a Debian package) over docker/, with docker/.yamllint."""
    if shutil.which("yamllint") is None:
        pytest.fail("yamllint not installed (bash .ci/install-deps)", pytrace=False)
    r = lib.run(["yamllint", "-s", "-c", DOCKER / ".yamllint", DOCKER])
    assert r.returncode == 0, lib.describe(r)


def test_docs_document_each_way():
    body = (lib.REPO / "docs" / "containers.md").read_text()
    for promise in ("docker build -f docker/Dockerfile", "--device /dev/fuse", "--cap-add SYS_ADMIN",
                    "rslave", "rshared", "Bidirectional", "HostToContainer", "user_allow_other",
                    "allow_other,default_permissions", "--make-shared", "SELinux", "AppArmor",
                    "docker/compose.yaml", "docker/k8s/daemonset.yaml",
                    "docker/k8s/consumer-pod.yaml", "docker/k8s/sidecar-pod.yaml"):
        assert promise in body, f"docs/containers.md does not mention {promise!r}"
