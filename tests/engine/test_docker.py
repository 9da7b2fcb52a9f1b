"""docs/containers.md with a real container engine (Debian's docker.io): the
image built from docker/Dockerfile, and ways 1 and 2 run as written there.

- The image: its entrypoint is stoker; without /dev/fuse or CAP_SYS_ADMIN
  `stoker mount` in it says which flag to add, exits 1, mounts nothing.
- Way 1: a container started before the host mounts stoker under a shared
  parent, bound `ro,rslave`, reads the files as an unprivileged uid once the
  mount appears; the origin's mode bits hold for that uid; writes are refused
  even as the container's root (the bind's `ro` does not reach a FUSE mount
  below it: stoker refuses them itself); the reads go on across a daemon
  killed and restarted by the supervisor, and across `stoker unmount` and a
  new `stoker mount`.
- Way 2: the daemon in a container (`--device /dev/fuse --cap-add
  SYS_ADMIN`) mounts below an `rshared` bind; a second container, started
  before it, reads the mount through an `rslave` bind, and so does the host;
  `docker stop` unmounts (exit 0, nothing left mounted, the cache passes
  fsck), and a new daemon container on the same cache serves the same reads
  from the cache alone.

- Fluid: the image as a ThinRuntimeProfile's FUSE container, `stoker fluid`
  with a config shaped as Fluid writes it (and an S3-style secret file as
  Fluid mounts one) at /etc/fluid/config/config.json, mounts the Dataset at
  targetPath below an `rshared` bind (Fluid's Bidirectional propagation), a
  second container reads it, and `docker stop` unmounts and exits 0.

What an engine adds nothing to (PID 1 reaping, a non-root daemon, the
files in docker/) stays in tests/integration/test_containers.py, which
builds the same isolation with util-linux.
"""

import json
import os

import stoker_testlib as lib
from stoker_testlib import MIB
from conftest import IMAGE

NOBODY = "65534"
MOUNT_ARGS = ["--chunk-size", "1M", "--cache-size", "1G", "-o", "allow_other"]
# The daemon's container as docs/containers.md runs it (way 2).
DAEMON_FLAGS = ["--device", "/dev/fuse", "--cap-add", "SYS_ADMIN",
                "--security-opt", "apparmor:unconfined"]


def make_origin(root):
    """Files a training job reads, and what the origin keeps from others: a
    0600 file and a 0700 directory of root's."""
    rng = lib.seeded(str(root))
    (root / "sub").mkdir(parents=True)
    (root / "private").mkdir(mode=0o700)
    want = {}
    for rel, size in (("pub.bin", 3 * MIB + 17), ("sub/deep.bin", 1 * MIB),
                      ("secret.bin", 4096), ("private/inner.bin", 4096)):
        lib.write_random(root / rel, size, rng)
        want[rel] = lib.sha256_file(root / rel)
    os.chmod(root / "secret.bin", 0o600)
    os.chmod(root / "private", 0o700)
    os.chmod(root, 0o755)
    return want


def run_detached(engine, *args):
    r = engine.docker("run", "-d", "--network", "none", *args, check=True)
    return r.stdout.strip()


def sleeper(engine, bind, user=NOBODY):
    """A container that only waits, for `docker exec` to read in; started
    before anything is mounted below its bind."""
    return run_detached(engine, "-u", user, "-v", bind, "--entrypoint", "sleep", IMAGE, "infinity")


def sha256_in(engine, cid, paths):
    r = engine.docker("exec", cid, "sha256sum", *paths, timeout=lib.IO_TIMEOUT)
    assert r.returncode == 0, lib.describe(r)
    return {p: line.split()[0] for p, line in zip(paths, r.stdout.splitlines())}


def check_container_reads(engine, cid, mnt, want):
    """What an unprivileged uid in the container may read is the origin's
    bytes; what the origin keeps from it is EACCES; writes are EROFS."""
    public = ["pub.bin", "sub/deep.bin"]
    got = sha256_in(engine, cid, [f"{mnt}/{rel}" for rel in public])
    assert got == {f"{mnt}/{rel}": want[rel] for rel in public}
    for path in (f"{mnt}/secret.bin", f"{mnt}/private/inner.bin"):
        r = engine.docker("exec", cid, "cat", path)
        assert r.returncode != 0 and "Permission denied" in r.stderr, lib.describe(r)
    r = engine.docker("exec", cid, "ls", f"{mnt}/private")
    assert r.returncode != 0 and "Permission denied" in r.stderr, lib.describe(r)
    # The container's root: the bind's ro does not reach the FUSE mount.
    r = engine.docker("exec", "-u", "0", cid, "sh", "-c", f"echo x > {mnt}/new.bin")
    assert r.returncode != 0 and "Read-only file system" in r.stderr, lib.describe(r)


def listing_in(engine, cid, path):
    r = engine.docker("exec", cid, "ls", "-A", path)
    assert r.returncode == 0, lib.describe(r)
    return r.stdout.split()


def test_image_entrypoint_is_stoker(engine):
    r = engine.docker("run", "--rm", "--network", "none", IMAGE, "--version")
    assert r.returncode == 0 and r.stdout.startswith("stoker "), lib.describe(r)
    # The image's default command is --help.
    r = engine.docker("run", "--rm", "--network", "none", IMAGE)
    assert r.returncode == 0 and "mount" in r.stdout, lib.describe(r)


def test_image_without_device_or_privilege_says_which_flag(engine, tmp_path):
    origin = tmp_path / "origin"
    origin.mkdir()
    base = ["run", "--rm", "--network", "none", "-v", f"{origin}:/origin:ro"]
    cmd = [IMAGE, "mount", "/origin", "/data", "--cache", "/cache"]
    cases = (([], "--device /dev/fuse"),
             (["--device", "/dev/fuse"], "--cap-add SYS_ADMIN"))
    for flags, hint in cases:
        r = engine.docker(*base, *flags, *cmd)
        assert r.returncode == 1, lib.describe(r)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("stoker: error:") and hint in lines[0], \
            lib.describe(r)


def test_way1_host_mount_shared_into_a_running_container(engine, stoker_bin, shared_dir,
                                                         tmp_path):
    want = make_origin(tmp_path / "origin")
    mnt = shared_dir / "imagenet"
    mnt.mkdir()
    cid = sleeper(engine, f"{shared_dir}:/data:ro,rslave")
    assert listing_in(engine, cid, "/data/imagenet") == []

    m = lib.StokerMount(tmp_path / "origin", mnt, tmp_path / "cache", MOUNT_ARGS)
    try:
        # Mounted after the container started: it shows up inside.
        m.mount()
        check_container_reads(engine, cid, "/data/imagenet", want)

        # The daemon killed: the supervisor's new one serves the same mount.
        old = m.pid
        os.kill(old, 9)
        lib.wait_until(lambda: m.stats().get("pid") not in (None, old), 30, what="a new daemon")
        m.pid = int(m.stats()["pid"])
        check_container_reads(engine, cid, "/data/imagenet", want)

        # Unmounted and mounted again on the host: gone, then back, inside.
        m.unmount()
        assert listing_in(engine, cid, "/data/imagenet") == []
        m.mount()
        check_container_reads(engine, cid, "/data/imagenet", want)
        s = m.stats()
        assert s["origin_bytes_read"] == 0, s
        assert s["cache_hit_bytes"] > 0 or s["passthrough_opens"] > 0, s
        m.unmount()
    finally:
        m.cleanup()


def run_daemon(engine, origin, cache, shared_dir):
    """Way 2: stoker as the container's PID 1, mounting below an rshared bind."""
    cid = run_detached(engine, *DAEMON_FLAGS,
                       "-v", f"{origin}:/origin:ro", "-v", f"{cache}:/cache",
                       "-v", f"{shared_dir}:/mnt/stoker:rshared",
                       IMAGE, "mount", "/origin", "/mnt/stoker/imagenet", "--cache", "/cache",
                       "-o", "allow_other")
    wait_mounted(engine, cid, shared_dir / "imagenet")
    return cid


def wait_mounted(engine, cid, mnt):
    """Until the container's mount shows at mnt on the host; fails at once
    if the container ends."""
    def up():
        state = engine.docker("inspect", "-f", "{{.State.Running}}", cid).stdout.strip()
        assert state == "true", "the daemon's container ended:\n" + \
            engine.docker("logs", cid).stderr[-3000:]
        return lib.is_mounted(mnt)
    lib.wait_until(up, lib.MOUNT_TIMEOUT, what=f"the container's mount at {mnt} on the host")


def stop_daemon(engine, cid, mnt):
    """`docker stop`: SIGTERM to PID 1, which unmounts and exits 0 well
    before docker's 10 s would end it with SIGKILL (exit 137)."""
    engine.docker("stop", cid, timeout=60, check=True)
    code = engine.docker("inspect", "-f", "{{.State.ExitCode}}", cid).stdout.strip()
    logs = engine.docker("logs", cid).stderr
    assert code == "0", f"exit {code}\n{logs[-3000:]}"
    assert "daemon exiting after clean unmount" in logs, logs[-3000:]
    assert not lib.is_mounted(mnt)
    engine.docker("rm", cid, check=True)


def stats_of(mnt):
    return json.loads(lib.with_deadline((mnt / ".stoker" / "stats.json").read_bytes,
                                        what="read stats.json"))


def test_way2_daemon_in_a_container_serves_another(engine, stoker_bin, shared_dir, tmp_path):
    origin = tmp_path / "origin"
    want = make_origin(origin)
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    mnt = shared_dir / "imagenet"
    mnt.mkdir()
    reader = sleeper(engine, f"{shared_dir}:/mnt/stoker:ro,rslave")

    daemon = run_daemon(engine, origin, cache, shared_dir)
    check_container_reads(engine, reader, "/mnt/stoker/imagenet", want)
    # The host sees the daemon's mount too, and the CLI in its container works.
    assert lib.sha256_file(mnt / "pub.bin") == want["pub.bin"]
    r = engine.docker("exec", daemon, "stoker", "stat", "/mnt/stoker/imagenet")
    assert r.returncode == 0 and "hit" in r.stdout, lib.describe(r)
    stop_daemon(engine, daemon, mnt)
    assert listing_in(engine, reader, "/mnt/stoker/imagenet") == []
    r = lib.fsck(cache)
    assert r.returncode == 0, "the cache a stopped container left fails fsck\n" + lib.describe(r)

    # A new daemon container on the same cache: the reader's files come from
    # the cache alone (read by stoker, or by the kernel from a cached file).
    daemon = run_daemon(engine, origin, cache, shared_dir)
    check_container_reads(engine, reader, "/mnt/stoker/imagenet", want)
    s = stats_of(mnt)
    assert s["origin_bytes_read"] == 0, s
    assert s["cache_hit_bytes"] > 0 or s["passthrough_opens"] > 0, s
    stop_daemon(engine, daemon, mnt)


def test_fluid_thin_runtime_container_mounts_the_dataset(engine, stoker_bin, shared_dir, tmp_path):
    origin = tmp_path / "origin"
    want = make_origin(origin)
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    secrets = tmp_path / "secrets"
    (secrets / "ds-s3").mkdir(parents=True)
    (secrets / "ds-s3" / "region").write_text("eu-west-1\n")
    config = tmp_path / "config.json"
    target = "/runtime-mnt/thin/default/imagenet/thin-fuse"
    config.write_text(json.dumps({
        "mounts": [{"mountPoint": "local:///origin", "name": "imagenet", "readOnly": True,
                    "options": {"chunk-size": "1M", "aws-region": "/etc/fluid/secrets/ds-s3/region"}}],
        "targetPath": target,
        "runtimeOptions": {"cache-size": "1G"},
        "accessModes": ["ReadOnlyMany"]}))
    reader = sleeper(engine, f"{shared_dir}:/mnt/stoker:ro,rslave")
    cid = run_detached(engine, *DAEMON_FLAGS,
                       "-v", f"{origin}:/origin:ro", "-v", f"{cache}:/var/cache/stoker",
                       "-v", f"{config}:/etc/fluid/config/config.json:ro",
                       "-v", f"{secrets}:/etc/fluid/secrets:ro",
                       "-v", f"{shared_dir}:/runtime-mnt/thin/default/imagenet:rshared",
                       IMAGE, "fluid")
    mnt = shared_dir / "thin-fuse"
    wait_mounted(engine, cid, mnt)
    check_container_reads(engine, reader, "/mnt/stoker/thin-fuse", want)
    environ = engine.docker("exec", cid, "cat", "/proc/1/environ", check=True).stdout
    assert "AWS_REGION=eu-west-1" in environ.split("\0"), environ
    assert stats_of(mnt)["cache_capacity_bytes"] == 1 << 30
    stop_daemon(engine, cid, mnt)
    assert listing_in(engine, reader, "/mnt/stoker/thin-fuse") == []
    r = lib.fsck(cache)
    assert r.returncode == 0, "the cache a stopped FUSE container left fails fsck\n" + lib.describe(r)
