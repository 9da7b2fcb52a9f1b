"""fstab and mount(8): `mount -t fuse.stoker ORIGIN DIR -o cache=...` and an
/etc/fstab line mount through the mount.fuse.stoker helper, `umount DIR`
through umount.fuse.stoker waits for the daemon like `stoker unmount`, and
an unknown option is one line. Each test runs in a private mount namespace
whose /usr/sbin has the helpers laid over it (as `cmake --install` puts them
in /sbin), so the host's /sbin is left alone."""

import json
import os
import pathlib
import shutil
import textwrap

import pytest

import stoker_testlib as lib
from stoker_testlib import MIB


def run_in_namespace(tmp_path, script):
    """Runs a bash script in a private mount namespace with the helpers in
    /usr/sbin; returns the completed process."""
    helpers = tmp_path / "helpers"
    helpers.mkdir()
    for name in ("mount.fuse.stoker", "umount.fuse.stoker"):
        (helpers / name).symlink_to(lib.STOKER_BIN)
    prelude = textwrap.dedent(f"""\
        set -u
        mount -t overlay overlay -o lowerdir={helpers}:/usr/sbin /usr/sbin || exit 97
        """)
    return lib.run(["unshare", "-m", "--propagation", "private", "bash", "-c",
                    prelude + textwrap.dedent(script)], timeout=120)


def make_origin(tmp_path):
    origin = tmp_path / "origin"
    origin.mkdir()
    lib.write_random(origin / "big", 5 * MIB + 7, lib.seeded("fstab"))
    (tmp_path / "mnt").mkdir()
    return origin


def test_mount_t_fuse_stoker_and_umount(tmp_path):
    origin = make_origin(tmp_path)
    mnt, cache = tmp_path / "mnt", tmp_path / "cache"
    r = run_in_namespace(tmp_path, f"""
        mount -t fuse.stoker {origin} {mnt} -o cache={cache},cache_size=1G,chunk_size=1M,allow_other,noauto,_netdev,x-systemd.requires=nas.mount || exit 1
        grep " {mnt} " /proc/self/mounts
        sha256sum {mnt}/big
        cat {mnt}/.stoker/stats.json > {tmp_path}/stats.json
        pid=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["pid"])' {tmp_path}/stats.json)
        umount {mnt} || exit 2
        # The helper waited for the daemon, as stoker unmount does.
        if kill -0 "$pid" 2>/dev/null; then echo "daemon $pid still running"; exit 3; fi
        grep -c " {mnt} " /proc/self/mounts || true
        """)
    assert r.returncode == 0, lib.describe(r)
    lines = r.stdout.splitlines()
    assert "fuse.stoker" in lines[0] and "allow_other" in lines[0] and "default_permissions" in lines[0]
    assert lines[1].split()[0] == lib.sha256_file(origin / "big")
    assert lines[-1] == "0"
    st = json.loads((tmp_path / "stats.json").read_text())
    assert st["cache_dir"] == str(cache) and st["cache_capacity_bytes"] == 1 << 30


def test_an_fstab_line_mounts_with_a_view(tmp_path):
    origin = make_origin(tmp_path)
    mnt, cache = tmp_path / "mnt", tmp_path / "cache"
    fstab = tmp_path / "fstab"
    fstab.write_text(f"{origin} {mnt} fuse.stoker "
                     f"cache={cache},view=decoded:channels=3;dct=fast,revalidate=5,nofail 0 0\n")
    r = run_in_namespace(tmp_path, f"""
        mount -T {fstab} {mnt} || exit 1
        ls -a {mnt}/.decoded > /dev/null || exit 2
        python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["views"], d["max_nodes"])' {mnt}/.stoker/stats.json
        umount {mnt} || exit 3
        """)
    assert r.returncode == 0, lib.describe(r)
    assert r.stdout.split() == ["['decoded']", "100000"], r.stdout


def test_unknown_option_is_one_line(tmp_path):
    origin = make_origin(tmp_path)
    mnt = tmp_path / "mnt"
    r = run_in_namespace(tmp_path, f"""
        mount -t fuse.stoker {origin} {mnt} -o cache={tmp_path}/cache,bogus=1
        echo "rc=$?"
        grep -c " {mnt} " /proc/self/mounts || true
        """)
    assert r.returncode == 0, lib.describe(r)
    assert "unknown mount option 'bogus=1'" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert r.stdout.split() == ["rc=2", "0"], r.stdout  # the helper's exit status, nothing mounted


def test_cmake_install_puts_the_helpers_and_the_unit_in_place(tmp_path):
    """`cmake --install` (into a DESTDIR): the binary, mount(8)'s and
    umount(8)'s helpers where mount(8) looks for them, the systemd unit,
    the man page, the docs."""
    build = pathlib.Path(lib.STOKER_BIN).parent
    if not (build / "cmake_install.cmake").exists():
        pytest.skip(f"{build} is not a CMake build directory")
    dest = tmp_path / "dest"
    r = lib.run(["cmake", "--install", build], env={**os.environ, "DESTDIR": str(dest)}, timeout=120)
    assert r.returncode == 0, lib.describe(r)
    bins = list(dest.rglob("bin/stoker"))
    assert len(bins) == 1 and os.access(bins[0], os.X_OK), bins
    installed_bin = "/" + str(bins[0].relative_to(dest))
    for helper in ("mount.fuse.stoker", "umount.fuse.stoker"):
        link = dest / "sbin" / helper
        assert link.is_symlink() and os.readlink(link) == installed_bin, link
    [unit] = list(dest.rglob("systemd/system/stoker@.service"))
    text = unit.read_text()
    assert f"ExecStart={installed_bin} mount $ORIGIN $MOUNTPOINT $OPTIONS" in text
    assert f"ExecStop={installed_bin} unmount $MOUNTPOINT" in text
    if shutil.which("systemd-analyze"):
        v = lib.run(["systemd-analyze", "verify", unit])
        # The binary is not at its installed path on this machine; nothing else may be wrong.
        problems = [ln for ln in (v.stdout + v.stderr).splitlines()
                    if ln.strip() and "is not executable" not in ln]
        assert not problems, problems
    assert list(dest.rglob("doc/stoker/configuration.md"))
    # stoker(1), made from the binary's --help: every subcommand's options.
    # A build of the stoker target alone (the sanitizer builds) has none.
    if not (build / "stoker.1").exists():
        assert not list(dest.rglob("man/man1/stoker.1"))
        return
    [page] = list(dest.rglob("man/man1/stoker.1"))
    text = page.read_text()
    for cmd in ("mount", "unmount", "stat", "fsck", "warm"):
        assert f'.SH "STOKER {cmd}"' in text, cmd
    assert "--cache-size" in text and "--wait" in text and "\n.SH SEE ALSO" in text
    if shutil.which("man"):
        r = lib.run(["man", "-l", page], env={**os.environ, "MANWIDTH": "100", "MANPAGER": "cat"})
        assert r.returncode == 0 and "STOKER(1)" in r.stdout, lib.describe(r)
