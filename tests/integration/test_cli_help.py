"""What --help says agrees with what the program takes and with the docs (the
kind of each value, the defaults of flag pairs, the view options), and usage
errors say what is wrong: a mistyped option gets the closest name, a value
with the wrong shape is one line and exit 2. Nothing here mounts but the
mount.fuse3 form and one mount with durations in units."""

import os
import re
import shutil

import pytest

import stoker_testlib as lib
from test_cli import paths  # noqa: F401 (a fixture: tmp, origin holding f, mnt, cache)

SUBCOMMANDS = ["mount", "unmount", "stat", "warm", "fsck", "order", "refresh", "fluid"]


def help_text(*cmd):
    r = lib.run([lib.STOKER_BIN, *cmd, "--help"])
    assert r.returncode == 0, lib.describe(r)
    return r.stdout


def one_line_usage_error(r, *words):
    info = lib.describe(r)
    assert r.returncode == 2, "not a usage error\n" + info
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, "want one line\n" + info
    for w in words:
        assert w in lines[0], f"the line does not say {w!r}\n" + info
    return lines[0]


@pytest.mark.parametrize("cmd", SUBCOMMANDS)
def test_help_names_the_kind_of_each_value(cmd):
    text = help_text(cmd)
    assert not re.search(r"\bTEXT\b", text), text
    assert "{" not in text, "a flag shows a default value\n" + text


def test_flag_pairs_read_as_on_by_default():
    text = help_text("mount")
    lines = {ln.split()[0]: ln for ln in text.splitlines() if ln.strip().startswith("--")}
    for flag in ("--supervise", "--default-permissions"):
        assert "(the default)" in lines[flag], lines[flag]
        assert f"--no-{flag[2:]}" in lines, text
    assert "--cache-size SIZE=10G" in text and "--revalidate DURATION=60" in text, text
    assert "--origin-retries N=5" in text and "--cache DIR REQUIRED" in text, text
    assert "at most 100000" in lines["--order-ahead"], lines["--order-ahead"]
    assert "at least 1000" in lines["--max-nodes"], lines["--max-nodes"]


def test_order_usage_shows_its_arguments_as_required():
    text = help_text("order")
    assert "stoker order FILE MOUNTPOINT" in text and "stoker order --clear MOUNTPOINT" in text, text
    assert "[FILE]" not in text and "[MOUNTPOINT]" not in text, text


def parser_view_keys(tmp_path):
    """The keys the view parser takes: its error for an unknown one lists them."""
    r = lib.mount_cmd_fails(tmp_path / "o", tmp_path / "m", tmp_path / "c", "--view",
                            "v:no_such_key=1")
    line = one_line_usage_error(r, "unknown view option 'no_such_key'")
    m = re.search(r"\(the options: ([^)]*)\)", line)
    assert m, line
    return m.group(1).split(", ")


def help_view_options():
    """{key: values} from `stoker mount --help`'s --view line."""
    m = re.search(r"OPTIONS: (\S+) \(docs/views.md\)", help_text("mount"))
    assert m, "no view options in --help"
    return dict(item.split("=", 1) for item in m.group(1).split(","))


def doc_view_options():
    """{key: values} from docs/views.md's table of options."""
    doc = (lib.REPO / "docs" / "views.md").read_text()
    section = doc.split("## Options", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(\w+)=([^`]+)` \|", section, re.M)
    return {k: v.replace("\\|", "|") for k, v in rows}


def test_view_options_agree_across_help_docs_and_parser(stoker_bin, tmp_path):
    parser = parser_view_keys(tmp_path)
    helped = help_view_options()
    documented = doc_view_options()
    assert parser == list(helped), ("--help", sorted(set(parser) ^ set(helped)))
    assert sorted(parser) == sorted(documented), ("docs/views.md",
                                                  sorted(set(parser) ^ set(documented)))
    assert helped == documented
    assert {"ratio", "max_side", "fancy_upsampling", "arithmetic"} <= set(parser)


@pytest.mark.parametrize("typo,near", [("--cahce-size", "--cache-size"), ("--revaldate", "--revalidate"),
                                       ("--no-supervice", "--no-supervise")])
def test_a_mistyped_option_gets_the_closest_name(stoker_bin, paths, typo, near):
    tmp, origin, mnt, cache = paths
    r = lib.mount_cmd_fails(origin, mnt, cache, typo, "5G")
    one_line_usage_error(r, f"unknown option '{typo}'", f"did you mean {near}?")
    assert not lib.is_mounted(mnt) and not cache.exists()
    # Without --cache too: the typo is what is said.
    r = lib.run([lib.STOKER_BIN, "mount", origin, mnt, "--cahce", str(cache)])
    one_line_usage_error(r, "unknown option '--cahce'", "did you mean --cache?")
    r = lib.run([lib.STOKER_BIN, "stat", "--jsn", mnt])
    one_line_usage_error(r, "did you mean --json?")
    r = lib.run([lib.STOKER_BIN, "mout", origin, mnt])
    one_line_usage_error(r, "unknown command 'mout'", "did you mean mount?")


def test_s3_endpoint_without_a_scheme_is_a_usage_error(stoker_bin, paths):
    tmp, origin, mnt, cache = paths
    r = lib.mount_cmd_fails("s3://bucket", mnt, cache, "--s3-endpoint", "127.0.0.1:9")
    one_line_usage_error(r, "--s3-endpoint 127.0.0.1:9", "http(s)://")
    assert not lib.is_mounted(mnt) and not cache.exists()


def test_durations_take_units(mounts, paths):
    tmp, origin, mnt, cache = paths
    r = lib.mount_cmd_fails(origin, mnt, cache, "--revalidate", "1w")
    one_line_usage_error(r, "--revalidate", "'1w'")
    r = lib.mount_cmd_fails(origin, mnt, cache, "--origin-backoff", "2h")
    one_line_usage_error(r, "--origin-backoff 2h")
    m = mounts.make(origin, mnt=mnt, cache=cache,
                    args=["--revalidate", "1m", "--origin-stall-timeout", "90s",
                          "--origin-backoff", "1m", "--origin-connect-timeout", "1h"])
    assert lib.with_deadline(lib.read_file, m.mnt / "f") == b"hello\n"
    m.unmount()


@pytest.mark.skipif(shutil.which("mount.fuse3") is None, reason="fuse3's mount.fuse3 is not installed")
def test_mount_fuse3_with_a_relative_origin(stoker_bin, paths):
    """mount.fuse3 runs `stoker SOURCE MOUNTPOINT -o OPTIONS` with SOURCE as
    fstab gives it: a relative origin holds no '/'."""
    tmp, origin, mnt, cache = paths
    bindir = tmp / "bin"
    bindir.mkdir()
    (bindir / "stoker").symlink_to(lib.STOKER_BIN)
    env = dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}")
    r = lib.run(["sh", "-c", f"cd {tmp} && exec mount.fuse3 origin mnt -t fuse.stoker -o cache=cache"],
                env=env)
    assert r.returncode == 0, lib.describe(r)
    try:
        assert lib.is_mounted(mnt)
        assert lib.with_deadline(lib.read_file, mnt / "f") == b"hello\n"
    finally:
        r = lib.stoker("unmount", mnt)
    assert r.returncode == 0, lib.describe(r)
    # A command's name is still the command, and a typo of one is no origin.
    r = lib.run(["sh", "-c", f"cd {tmp} && exec {lib.STOKER_BIN} nosuch mnt"])
    one_line_usage_error(r, "unknown command 'nosuch'")
