"""`stoker fluid`: the command of a Fluid ThinRuntimeProfile's FUSE container.
Given a config shaped as Fluid writes it (mounts, targetPath, runtimeOptions,
secrets as file paths), it mounts the Dataset's origin at targetPath in the
foreground, serves every byte, and unmounts and exits 0 on SIGTERM, as the
kubelet stops the container. A bad config is one line naming the field and
exit 1."""

import json
import os
import signal

import pytest

import remote_servers as rs
import stoker_testlib as lib
from stoker_testlib import CHUNK, MIB, STOKER_BIN


class FluidMount(lib.StokerMount):
    """A mount made by `stoker fluid --config FILE` (foreground only)."""

    def __init__(self, config, target, cache, secrets=None):
        super().__init__("/", target, cache)
        self.config, self.secrets = config, secrets

    def foreground_command(self):
        return [STOKER_BIN, "fluid", "--config", str(self.config),
                *(["--secrets", str(self.secrets)] if self.secrets else [])]


def write_config(path, mount_point, target, runtime_options=None, options=None):
    config = {
        "mounts": [{"mountPoint": mount_point, "name": "dataset", "options": options or {},
                    "readOnly": True}],
        "targetPath": str(target),
        "runtimeOptions": runtime_options or {},
        "persistentVolumeAttrs": {},
        "accessModes": ["ReadOnlyMany"],
    }
    path.write_text(json.dumps(config))
    return path


@pytest.fixture
def fluid_mounts():
    made = []
    yield made
    for m in made:
        m.cleanup()


def test_a_fluid_config_mounts_the_dataset_until_sigterm(fluid_mounts, tmp_path):
    origin = tmp_path / "nas" / "imagenet"
    rng = lib.seeded("fluid")
    for i in range(6):
        lib.write_random(origin / f"train/f{i}", CHUNK * (i % 3) + 1000 * i + 7, rng)
    expected = lib.hashes_of(origin)
    # Fluid's path; stoker creates it, as the FUSE container must.
    target = tmp_path / "runtime-mnt" / "thin" / "default" / "imagenet" / "thin-fuse"
    cache = tmp_path / "cache"
    config = write_config(tmp_path / "config.json", f"local://{origin}", target,
                          runtime_options={"cache": str(cache), "cache-size": "256M",
                                           "revalidate": "never"},
                          options={"cache_size": "300M", "no_supervise": "false"})
    m = FluidMount(config, target, cache)
    fluid_mounts.append(m)
    proc = m.mount_foreground()
    assert not lib.check_hashes(target, expected)
    st = m.stats()
    assert st["origin"] == f"local:{origin}", st
    assert st["cache_capacity_bytes"] == 300 * MIB, st  # the mount's option wins over the runtime's
    _, fstype, options = lib.mount_entry(target)
    assert fstype == "fuse.stoker" and "allow_other" in options, options  # pods' users read it
    proc.send_signal(signal.SIGTERM)
    rc = proc.wait(timeout=lib.EXIT_TIMEOUT)
    assert rc == 0, f"stoker fluid exited {rc} on SIGTERM\n{m.log_tail()}"
    assert not lib.is_mounted(target)
    assert lib.fsck(cache).returncode == 0


@pytest.mark.skipif(not rs.have_moto(), reason="moto/boto3 are not installed")
def test_s3_credentials_come_from_fluids_secret_files(fluid_mounts, tmp_path):
    server = rs.Moto(tmp_path / "moto")
    try:
        server.start()
        s3 = server.client()
        s3.create_bucket(Bucket="data")
        payload = os.urandom(3 * CHUNK + 5)
        s3.put_object(Bucket="data", Key="ds/shard-0", Body=payload)
        secrets = tmp_path / "secrets"
        (secrets / "s3").mkdir(parents=True)
        (secrets / "s3" / "id").write_text("AKIDFROMSECRET\n")
        (secrets / "s3" / "key").write_text("secret-from-file")
        target = tmp_path / "t"
        cache = tmp_path / "cache"
        config = write_config(
            tmp_path / "config.json", "s3://data/ds", target,
            runtime_options={"cache": str(cache)},
            options={"s3-endpoint": server.endpoint, "s3-path-style": "true",
                     "aws-access-key-id": str(secrets / "s3" / "id"),
                     "aws-secret-access-key": str(secrets / "s3" / "key")})
        printed = lib.stoker("fluid", "--config", config, "--secrets", secrets, "--print")
        assert printed.returncode == 0, lib.describe(printed)
        assert "AWS_ACCESS_KEY_ID" in printed.stdout and "AKIDFROMSECRET" not in printed.stdout
        m = FluidMount(config, target, cache, secrets=secrets)
        fluid_mounts.append(m)
        proc = m.mount_foreground()
        assert lib.read_file(target / "shard-0") == payload
        environ = open(f"/proc/{m.pid}/environ", "rb").read().split(b"\0")
        assert b"AWS_ACCESS_KEY_ID=AKIDFROMSECRET" in environ
        assert b"AWS_SECRET_ACCESS_KEY=secret-from-file" in environ
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=lib.EXIT_TIMEOUT) == 0, m.log_tail()
        assert not lib.is_mounted(target)
    finally:
        server.kill()


@pytest.mark.parametrize("config, field", [
    ("{", "not JSON"),
    ('{"mounts": [], "targetPath": "/t"}', "mounts is missing or empty"),
    ('{"mounts": [{"mountPoint": "/x"}]}', "targetPath is missing"),
    ('{"mounts": [{"mountPoint": "pvc://claim"}], "targetPath": "/t"}', "profile's volumes"),
    ('{"mounts": [{"mountPoint": "/x", "options": {"cache-sise": "1G"}}], "targetPath": "/t"}',
     "'cache-sise' is not a stoker mount option"),
], ids=["json", "mounts", "target", "pvc", "option"])
def test_a_bad_config_is_one_line_and_exit_1(tmp_path, config, field):
    path = tmp_path / "config.json"
    path.write_text(config)
    r = lib.stoker("fluid", "--config", path)
    assert r.returncode == 1, lib.describe(r)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and field in lines[0] and str(path) in lines[0], lib.describe(r)
    assert not (tmp_path / "t").exists()


def test_a_missing_config_is_one_line_and_exit_1(tmp_path):
    r = lib.stoker("fluid", "--config", tmp_path / "nope.json")
    assert r.returncode == 1, lib.describe(r)
    assert r.stderr.strip().count("\n") == 0 and "cannot read the config" in r.stderr, lib.describe(r)
