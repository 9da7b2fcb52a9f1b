"""Bad input gets one line naming the problem, a non-zero exit, and leaves
nothing mounted; --help/--version work; subcommands refuse non-stoker
paths."""

import json
import os
import re

import pytest

import stoker_testlib as lib
from stoker_testlib import stoker


@pytest.fixture
def paths(tmp_path):
    origin = tmp_path / "origin"
    origin.mkdir()
    (origin / "f").write_bytes(b"hello\n")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    return tmp_path, origin, mnt, tmp_path / "cache"


def assert_refused(r, mnt, keywords, cache=None):
    """Non-zero exit, exactly one non-empty stderr line mentioning one of
    the keywords, nothing mounted, no daemon left; with cache (a dir that
    did not exist): not made either."""
    info = lib.describe(r)
    assert r.returncode != 0, "accepted bad input\n" + info
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, f"want a one-line error, got {len(lines)} lines\n" + info
    low = lines[0].lower()
    assert any(k.lower() in low for k in keywords), (
        f"error does not name the problem (any of {keywords})\n" + info)
    if mnt is not None:
        assert not lib.is_mounted(mnt), "something got mounted\n" + info
        assert not lib.daemon_pids_for(mnt), "a daemon is left running\n" + info
    if cache is not None:
        assert not os.path.exists(cache), "a refused mount made its cache dir\n" + info


def test_missing_origin(stoker_bin, paths):
    tmp, _, mnt, cache = paths
    missing = tmp / "no-such-origin"
    r = lib.mount_cmd_fails(missing, mnt, cache)
    assert_refused(r, mnt, [str(missing), "origin"], cache=cache)


def test_origin_is_a_file(stoker_bin, paths):
    tmp, origin, mnt, cache = paths
    r = lib.mount_cmd_fails(origin / "f", mnt, cache)
    assert_refused(r, mnt, ["director", "origin"], cache=cache)


def test_unreadable_origin(stoker_bin, paths):
    """Root ignores modes, so the origin directory is made unopenable with a
    fanotify FAN_OPEN_PERM mark answered FAN_DENY (see OriginReadGuard)."""
    tmp, origin, mnt, cache = paths
    guard = lib.OriginReadGuard([origin], mask=lib.OriginReadGuard.FAN_OPEN_PERM
                                | lib.OriginReadGuard.FAN_ONDIR)
    with guard:
        if not guard.available:
            pytest.skip(f"fanotify unavailable: {guard.reason}")
        with pytest.raises(PermissionError):
            os.listdir(origin)
        r = lib.mount_cmd_fails(origin, mnt, cache)
    if lib.is_mounted(mnt):
        lib.cleanup_under(mnt)
    assert_refused(r, mnt, [str(origin), "origin"])


def test_missing_mountpoint(stoker_bin, paths):
    tmp, origin, _, cache = paths
    missing = tmp / "no-such-mnt"
    r = lib.mount_cmd_fails(origin, missing, cache)
    assert_refused(r, missing, [str(missing), "mountpoint", "mount point"], cache=cache)
    assert not missing.exists(), "mount created the missing mountpoint"


def test_mountpoint_is_a_file(stoker_bin, paths):
    tmp, origin, _, cache = paths
    f = tmp / "file-mnt"
    f.write_bytes(b"")
    r = lib.mount_cmd_fails(origin, f, cache)
    assert_refused(r, f, ["director", "mountpoint", "mount point"], cache=cache)


def test_non_empty_mountpoint(stoker_bin, paths):
    tmp, origin, mnt, cache = paths
    (mnt / "something").write_bytes(b"x")
    r = lib.mount_cmd_fails(origin, mnt, cache)
    assert_refused(r, mnt, ["empty"], cache=cache)
    assert os.listdir(mnt) == ["something"]


@pytest.mark.parametrize("where", ["cache_in_mountpoint", "mountpoint_in_origin",
                                   "mountpoint_in_cache"])
def test_overlapping_paths_are_refused_before_anything_is_made(stoker_bin, paths, where):
    tmp, origin, mnt, cache = paths
    if where == "cache_in_mountpoint":
        cache = mnt / "c"
    elif where == "mountpoint_in_origin":
        mnt = origin / "m"
        mnt.mkdir()
    else:
        cache.mkdir()
        mnt = cache / "m"
        mnt.mkdir()
    before = sorted(p for p in tmp.rglob("*"))
    r = lib.mount_cmd_fails(origin, mnt, cache)
    assert_refused(r, mnt, ["is inside"])
    assert sorted(p for p in tmp.rglob("*")) == before, "the refused mount created something"


def tree_snapshot(root):
    """Every path under root with its type and bytes: what a refused mount
    must leave as it was."""
    return sorted((str(p.relative_to(root)), p.is_dir(), None if p.is_dir() else p.read_bytes())
                  for p in root.rglob("*"))


@pytest.mark.parametrize("where", ["origin", "origin/sub/cc", "link/sub/cc"])
def test_cache_dir_in_the_origin_is_refused_and_nothing_written(stoker_bin, paths, where):
    """Also through a symlink to the origin (the unit tests cover bind
    mounts)."""
    tmp, origin, mnt, _ = paths
    (origin / "sub").mkdir()
    (tmp / "link").symlink_to(origin)
    cache = tmp / where
    before = tree_snapshot(origin)
    r = lib.mount_cmd_fails(origin, mnt, cache)
    assert r.returncode == 2, lib.describe(r)
    assert_refused(r, mnt, ["is the origin" if where == "origin" else "is inside the origin"])
    assert tree_snapshot(origin) == before, "the refused mount wrote into the origin"
    assert os.listdir(mnt) == []


def test_mountpoint_holding_a_stoker_mount_names_it(mounts, paths):
    tmp, origin, mnt, cache = paths
    m = mounts.make(origin, mnt=mnt, cache=cache)
    s = m.stats()
    pid = s.get("supervisor", {}).get("pid", s["pid"])
    other = tmp / "other-origin"
    other.mkdir()
    r = lib.mount_cmd_fails(other, mnt, tmp / "cache2", "--chunk-size", "1M", "--cache-size", "1G")
    assert r.returncode != 0, lib.describe(r)
    assert f"is already a stoker mount of '{origin}' (pid {pid})" in r.stderr, lib.describe(r)
    assert lib.with_deadline(lib.read_file, m.mnt / "f") == b"hello\n"
    m.unmount()


def test_another_chunk_size_is_refused_until_reset(mounts, paths):
    tmp, origin, mnt, cache = paths
    m = mounts.make(origin, mnt=mnt, cache=cache)
    assert lib.with_deadline(lib.read_file, m.mnt / "f") == b"hello\n"
    m.unmount()
    before = lib.cache_data_files(cache)
    assert before, "nothing was cached"
    r = lib.mount_cmd_fails(origin, mnt, cache, "--chunk-size", "256K", "--cache-size", "1G")
    assert r.returncode == 2, lib.describe(r)
    assert_refused(r, mnt, ["--reset"])
    assert "holds chunks of 1 MiB" in r.stderr, lib.describe(r)
    assert lib.cache_data_files(cache) == before, "the refused mount changed the cache"
    m2 = mounts.make(origin, mnt=mnt, cache=cache,
                     args=["--chunk-size", "256K", "--cache-size", "1G", "--reset"])
    s = m2.stats()
    assert s["chunk_size"] == 256 << 10 and s["chunks"] == 0, s
    assert s["fresh_start"] == "emptied on request (--reset)", s
    assert lib.with_deadline(lib.read_file, m2.mnt / "f") == b"hello\n"
    m2.unmount()


def test_another_origin_is_refused_until_reset(mounts, paths):
    """The index records the origin it caches; a cache dir is not silently
    taken over by another origin (its bytes would be served under another
    tree's names)."""
    tmp, origin, mnt, cache = paths
    m = mounts.make(origin, mnt=mnt, cache=cache)
    assert lib.with_deadline(lib.read_file, m.mnt / "f") == b"hello\n"
    m.unmount()
    before = lib.cache_data_files(cache)
    other = tmp / "other"
    other.mkdir()
    (other / "f").write_bytes(b"other\n")
    r = lib.mount_cmd_fails(other, mnt, cache, "--chunk-size", "1M", "--cache-size", "1G")
    assert r.returncode == 2, lib.describe(r)
    assert_refused(r, mnt, ["--reset"])
    assert f"holds files of local:{origin.resolve()}, not local:{other.resolve()}" in r.stderr, \
        lib.describe(r)
    assert lib.cache_data_files(cache) == before, "the refused mount changed the cache"
    # The same origin through a symlink is the same origin.
    link = tmp / "link"
    link.symlink_to(origin)
    m2 = mounts.make(link, mnt=mnt, cache=cache)
    assert m2.stats()["chunks"] > 0 and m2.stats()["fresh_start"] == "", m2.stats()
    m2.unmount()
    m3 = mounts.make(other, mnt=mnt, cache=cache, args=["--chunk-size", "1M", "--reset"])
    assert m3.stats()["fresh_start"] == "emptied on request (--reset)", m3.stats()
    assert lib.with_deadline(lib.read_file, m3.mnt / "f") == b"other\n"
    m3.unmount()


def test_foreground_refusal_of_another_chunk_size_exits_2(mounts, paths):
    tmp, origin, mnt, cache = paths
    m = mounts.make(origin, mnt=mnt, cache=cache)
    m.unmount()
    r = lib.mount_cmd_fails(origin, mnt, cache, "--chunk-size", "256K", "--cache-size", "1G",
                            "--foreground")
    assert r.returncode == 2, lib.describe(r)
    assert "--reset" in r.stderr.splitlines()[-1], lib.describe(r)
    assert not lib.is_mounted(mnt)


def test_risky_cache_dir_warns_and_mounts(mounts, paths):
    """A bound beyond the disk's free space, and a cache dir on tmpfs: a
    warning each on the terminal and in the log; the mount comes up."""
    tmp, origin, mnt, _ = paths
    ram = tmp / "ram"
    ram.mkdir()
    if lib.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", ram]).returncode != 0:
        pytest.skip("cannot mount a tmpfs")
    m = mounts.new(origin, mnt=mnt, cache=ram / "cache",
                   args=["--chunk-size", "1M", "--cache-size", "1G"])
    try:
        r = m.mount()
        warnings = [ln for ln in r.stderr.splitlines() if "warning:" in ln]
        assert len(warnings) == 2, lib.describe(r)
        assert "--cache-size 1.00 GiB is more than cache dir" in warnings[0], lib.describe(r)
        assert "is on tmpfs" in warnings[1] and "reboot" in warnings[1], lib.describe(r)
        log = m.log_path().read_text()
        assert "is on tmpfs" in log and "is more than cache dir" in log, log[-2000:]
        m.unmount()
    finally:
        m.cleanup()
        lib.run(["umount", "-l", ram])


def test_cache_dir_cannot_be_created(stoker_bin, paths):
    tmp, origin, mnt, _ = paths
    blocker = tmp / "regular-file"
    blocker.write_bytes(b"")
    cache = blocker / "cache"
    r = lib.mount_cmd_fails(origin, mnt, cache)
    assert_refused(r, mnt, ["cache", str(cache)])


def test_cache_dir_in_use_by_live_mount(mounts, paths):
    tmp, origin, mnt, cache = paths
    m = mounts.make(origin, mnt=mnt, cache=cache)
    mnt2 = tmp / "mnt2"
    mnt2.mkdir()
    r = lib.mount_cmd_fails(origin, mnt2, cache, "--chunk-size", "1M", "--cache-size", "1G")
    assert_refused(r, mnt2, ["in use"])
    # The holder named: the process that outlives a daemon crash, and where.
    s = m.stats()
    pid = s.get("supervisor", {}).get("pid", s["pid"])
    assert f"in use by stoker pid {pid} (the mount at {mnt})" in r.stderr, lib.describe(r)
    # The first mount is unharmed.
    assert lib.with_deadline(lib.read_file, m.mnt / "f") == b"hello\n"
    assert lib.pid_alive(m.pid)
    m.unmount()


@pytest.mark.parametrize("opt,value", [
    ("--cache-size", "12Q"),
    ("--cache-size", "-5"),
    ("--cache-size", ""),
    ("--cache-size", "abc"),
    ("--cache-size", "1.2.3G"),
    ("--cache-size", "99999999999999999999999"),
    ("--chunk-size", "12Q"),
    ("--chunk-size", "-1M"),
    ("--chunk-size", "0"),
])
def test_unparsable_sizes(stoker_bin, paths, opt, value):
    tmp, origin, mnt, cache = paths
    r = lib.mount_cmd_fails(origin, mnt, cache, f"{opt}={value}")
    kws = ["size", opt.lstrip("-")] + ([value] if value else [])
    assert_refused(r, mnt, kws)


def test_cache_size_smaller_than_a_chunk(stoker_bin, paths):
    tmp, origin, mnt, cache = paths
    r = lib.mount_cmd_fails(origin, mnt, cache, "--chunk-size", "1M", "--cache-size", "512K")
    assert_refused(r, mnt, ["chunk"])


def test_bad_revalidate(stoker_bin, paths):
    tmp, origin, mnt, cache = paths
    r = lib.mount_cmd_fails(origin, mnt, cache, "--revalidate=soon")
    assert_refused(r, mnt, ["revalidate", "soon"])


def test_missing_cache_option(stoker_bin, paths):
    tmp, origin, mnt, _ = paths
    r = lib.run([lib.STOKER_BIN, "mount", origin, mnt])
    assert_refused(r, mnt, ["cache"])


def test_unknown_fuse_option_leaves_nothing_mounted(stoker_bin, paths):
    tmp, origin, mnt, cache = paths
    r = lib.mount_cmd_fails(origin, mnt, cache, "-o", "no_such_fuse_option_xyz")
    assert r.returncode != 0, lib.describe(r)
    assert r.stderr.strip(), lib.describe(r)
    assert not lib.is_mounted(mnt)
    assert not lib.daemon_pids_for(mnt)


def test_fuse_options_pass_through(mounts, paths):
    tmp, origin, mnt, cache = paths
    m = mounts.make(origin, mnt=mnt, cache=cache,
                    args=["--chunk-size", "1M", "--cache-size", "1G", "-o", "allow_other"])
    entry = lib.mount_entry(m.mnt)
    assert entry[1].startswith("fuse"), entry
    assert "allow_other" in entry[2].split(","), entry
    m.unmount()


def test_help_and_version(stoker_bin):
    r = stoker("--help")
    assert r.returncode == 0, lib.describe(r)
    for sub in ("mount", "unmount", "stat", "fsck", "warm", "order", "refresh"):
        assert sub in r.stdout, f"--help does not list {sub}\n" + lib.describe(r)
        rs = stoker(sub, "--help")
        assert rs.returncode == 0, lib.describe(rs)
        assert rs.stdout.strip(), lib.describe(rs)
    r = stoker("--version")
    assert r.returncode == 0, lib.describe(r)
    assert any(c.isdigit() for c in r.stdout), lib.describe(r)
    rm = stoker("mount", "--help")
    for opt in ("--cache", "--cache-size", "--chunk-size", "--revalidate", "--foreground"):
        assert opt in rm.stdout, f"mount --help lacks {opt}\n" + lib.describe(rm)


def test_unknown_subcommand(stoker_bin):
    r = stoker("frobnicate")
    assert r.returncode != 0, lib.describe(r)


@pytest.mark.parametrize("sub", ["stat", "unmount", "warm", "refresh"])
def test_subcommands_refuse_non_stoker_dir(stoker_bin, tmp_path, sub):
    d = tmp_path / "plain"
    d.mkdir()
    (d / "file").write_bytes(b"x")
    r = stoker(sub, d / "file" if sub in ("warm", "refresh") else d)
    assert r.returncode != 0, lib.describe(r)
    assert r.stderr.strip(), lib.describe(r)
    assert (d / "file").read_bytes() == b"x"


def test_subcommands_refuse_missing_path(stoker_bin, tmp_path):
    for sub in ("stat", "unmount", "warm", "refresh"):
        r = stoker(sub, tmp_path / "nope")
        assert r.returncode != 0, lib.describe(r)


def test_fsck_cannot_check(stoker_bin, tmp_path):
    r = lib.fsck(tmp_path / "no-such-cache")
    assert r.returncode == 2, lib.describe(r)
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "x").write_bytes(b"x")
    r = lib.fsck(plain)
    assert r.returncode == 2, "fsck of a dir that is no cache:\n" + lib.describe(r)


def test_fsck_refuses_while_mounted(mounts, paths):
    tmp, origin, mnt, cache = paths
    m = mounts.make(origin, mnt=mnt, cache=cache)
    assert lib.with_deadline(lib.read_file, m.mnt / "f") == b"hello\n"
    for args in ((), ("--repair",), ("--json",)):
        r = lib.fsck(cache, *args)
        assert r.returncode == 2, f"fsck {args} ran on a live cache:\n" + lib.describe(r)
        assert r.stderr.strip()
    assert lib.with_deadline(lib.read_file, m.mnt / "f") == b"hello\n"
    m.unmount()
    r = lib.fsck(cache, "--json")
    assert r.returncode == 0, lib.describe(r)
    json.loads(r.stdout)


def help_options(cmd):
    """The long options `stoker CMD --help` lists (--help itself left out)."""
    r = lib.run([lib.STOKER_BIN, *cmd, "--help"])
    assert r.returncode == 0, lib.describe(r)
    opts = set()
    for line in r.stdout.split("Options:", 1)[1].splitlines():
        first = line.strip().split(" ", 1)[0]
        for name in first.split("{", 1)[0].split(","):
            if name.startswith("--") and name != "--help":
                opts.add(name)
    return opts


@pytest.mark.parametrize("cmd", [[], ["mount"], ["unmount"], ["stat"], ["warm"], ["fsck"]],
                         ids=["stoker", "mount", "unmount", "stat", "warm", "fsck"])
def test_configuration_doc_has_every_option(cmd):
    doc = (lib.REPO / "docs" / "configuration.md").read_text()
    opts = help_options(cmd)
    assert opts or not cmd, "no options parsed from --help"
    missing = sorted(o for o in opts if f"`{o}" not in doc)
    assert not missing, f"docs/configuration.md does not document {missing} of stoker {' '.join(cmd)}"


STATS_FIELD = re.compile(r"`([a-z][a-z0-9]*(?:_[a-z0-9]+)+)`")


def docs_stats_fields():
    """(stats fields the docs name, those they say `stoker stat` shows), each as
    {field: "doc"}: the first column of tables headed "field" or "stats.json field",
    fields named "in stats.json", and fields in a sentence saying `stoker stat` shows."""
    named, shown = {}, {}
    for doc in sorted((lib.REPO / "docs").glob("*.md")):
        text = doc.read_text()
        in_table = False
        for line in text.splitlines():
            if line.startswith("| field |") or line.startswith("| stats.json field |"):
                in_table = True
                continue
            if not line.startswith("|"):
                in_table = False
            elif in_table and not line.startswith("|---"):
                for f in STATS_FIELD.findall(line.split("|")[1]):
                    named[f] = doc.name
        for para in re.split(r"\n\s*\n", text):
            flat = " ".join(para.split())
            for f in re.findall(r"`([a-z0-9_]+)` in stats\.json", flat):
                named[f] = doc.name
            for sentence in re.split(r"(?<=[.;])\s|\|", flat):
                if "`stoker stat` shows" in sentence:
                    in_json = set(re.findall(r"`([a-z0-9_]+)` in stats\.json", sentence))
                    for f in STATS_FIELD.findall(sentence):
                        named[f] = doc.name
                        if f not in in_json:
                            shown[f] = doc.name
        # The table after "`stoker stat` shows them" is shown too.
        for m in re.finditer(r"`stoker stat` shows them[^\n]*\n(?:[^\n]*\n)*?\n((?:\|[^\n]*\n)+)",
                             text):
            for line in m.group(1).splitlines()[2:]:
                for f in STATS_FIELD.findall(line.split("|")[1]):
                    shown[f] = doc.name
    return named, shown


def test_docs_name_only_stats_fields_that_exist_and_stat_shows_them(mounts, paths):
    """Issue 30: docs said `stoker stat` shows the order_* counters and
    chunks_not_cached; it showed neither."""
    tmp, origin, mnt, cache = paths
    (origin / "a").write_bytes(b"x" * 5000)
    m = mounts.make(origin, mnt, cache, args=["--view", "decoded"])
    listing = tmp / "order.txt"
    listing.write_text("a\n")
    r = stoker("order", listing, m.mnt)
    assert r.returncode == 0, lib.describe(r)
    stats = m.stats()
    named, shown = docs_stats_fields()
    assert "chunks_not_cached" in shown and "order_hits" in shown, (named, shown)
    # Fields only some mounts have: a GPU decoder, a supervised restart.
    optional = {"origin_io_backend", "decode_fallbacks"}
    missing = sorted(f"{f} ({doc})" for f, doc in named.items()
                     if f not in stats and f not in optional)
    assert not missing, f"docs name stats fields that stats.json lacks: {missing}"
    r = stoker("stat", m.mnt)
    assert r.returncode == 0, lib.describe(r)
    absent = sorted(f"{f} ({doc})" for f, doc in shown.items()
                    if f not in r.stdout and f.replace("_", " ") not in r.stdout)
    assert not absent, f"docs say `stoker stat` shows {absent}:\n{r.stdout}"


def test_metrics_doc_names_the_real_metric_of_each_field(mounts, paths):
    """docs/operations.md: field F is stoker_F(_total) except the renames it
    lists; each metric's HELP line names its field."""
    tmp, origin, mnt, cache = paths
    (origin / "a").write_bytes(b"x" * 5000)
    m = mounts.make(origin, mnt, cache)
    r = stoker("stat", m.mnt, "--prometheus")
    assert r.returncode == 0, lib.describe(r)
    helps = re.findall(r"^# HELP (\S+) ([a-z_.]+)\b", r.stdout, re.M)
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", r.stdout, re.M))
    assert len(helps) == len(types), r.stdout
    doc = (lib.REPO / "docs" / "operations.md").read_text()
    renames = {}
    for line in doc.splitlines():
        cells = line.split("|")
        if len(cells) > 3:
            fields = STATS_FIELD.findall(cells[1]) or re.findall(r"`([a-z_]+)`", cells[1])
            metric = re.findall(r"`(stoker_[a-z_]+)", cells[2])
            if len(fields) == 1 and metric:
                renames[fields[0]] = metric[0]
    for metric, field in helps:
        if "." in field or " " in field or field.startswith("errors"):
            continue  # supervisor.restarts, the errors family: in the table by hand
        plain = f"stoker_{field}" + ("" if types[metric] == "gauge" else "_total")
        expected = renames.get(field, plain)
        if types[metric] == "histogram" or metric == "stoker_info":
            continue
        assert metric == expected, f"{field} is {metric}, docs/operations.md says {expected}"
