"""Fixtures for stoker's integration tests (real FUSE mounts, run as root).

Rules these fixtures enforce:
- every mount made through `mounts`/`module_mounts` is unmounted in teardown
  even when the test fails (fusermount3 -u -z, then the daemon is killed by
  the pid from stats.json if it is still alive);
- after each test nothing may be left mounted under its tmp_path (the test
  errors if something was, after cleaning it up);
- at session end everything mounted under the session's tmp root is lazily
  unmounted and any stoker daemon naming a path there is killed;
- a failing test gets the tail of each involved daemon's log in its report.
"""

import os
import time

import pytest

import stoker_testlib as lib

_START = pytest.StashKey[float]()


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "slow: heavy test (GiB of I/O or several epochs); still run in CI")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    item.stash[_START] = time.monotonic()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if not rep.failed:
        return
    start = item.stash.get(_START, 0.0)
    seen = set()
    for m in lib.ALL_MOUNTS:
        if not m.mounted_once or str(m.cache) in seen:
            continue
        if m.created >= start or lib.is_mounted(m.mnt):
            seen.add(str(m.cache))
            rep.sections.append((f"stoker log {m.cache} (mount {m.mnt})",
                                 m.log_tail()))


@pytest.fixture(scope="session", autouse=True)
def _session_guard(tmp_path_factory):
    root = tmp_path_factory.getbasetemp()
    yield
    left = lib.cleanup_under(root)
    if left:
        print(f"\nsession cleanup unmounted leftovers: {left}")


@pytest.fixture(scope="session")
def stoker_bin():
    if not (os.path.isfile(lib.STOKER_BIN) and os.access(lib.STOKER_BIN, os.X_OK)):
        pytest.fail(f"stoker binary not found at {lib.STOKER_BIN} "
                    "(build it, or set STOKER_BIN)", pytrace=False)
    if os.geteuid() != 0 or not os.path.exists("/dev/fuse"):
        pytest.fail("integration tests need root and /dev/fuse", pytrace=False)
    return lib.STOKER_BIN


@pytest.fixture(autouse=True)
def _no_mount_left(tmp_path):
    yield
    left = lib.cleanup_under(tmp_path)
    if left:
        pytest.fail(f"test left mounts behind (now cleaned up): {left}", pytrace=False)


class MountFactory:
    """make(origin, **kw) -> StokerMount, mounted. Teardown cleans all."""

    DEFAULT_ARGS = ("--chunk-size", "1M", "--cache-size", "1G")

    def __init__(self, base):
        self.base = base
        self.made = []
        self.n = 0

    def new(self, origin, mnt=None, cache=None, args=None):
        self.n += 1
        mnt = mnt or (self.base / f"mnt{self.n}")
        cache = cache or (self.base / f"cache{self.n}")
        args = list(self.DEFAULT_ARGS if args is None else args)
        # STOKER_TEST_OPENS=kernel runs a suite with the kernel opening
        # files by itself (fs/node_files.h).
        opens = os.environ.get("STOKER_TEST_OPENS")
        if opens and "--opens" not in args:
            args += ["--opens", opens]
        m = lib.StokerMount(origin, mnt, cache, args)
        self.made.append(m)
        return m

    def make(self, origin, mnt=None, cache=None, args=None):
        m = self.new(origin, mnt, cache, args)
        m.mount()
        return m

    def cleanup(self):
        for m in reversed(self.made):
            m.cleanup()


@pytest.fixture
def mounts(stoker_bin, tmp_path):
    f = MountFactory(tmp_path)
    yield f
    f.cleanup()


@pytest.fixture(scope="module")
def module_mounts(stoker_bin, tmp_path_factory, request):
    base = tmp_path_factory.mktemp(request.module.__name__.replace(".", "_"))
    f = MountFactory(base)
    yield f
    f.cleanup()
    left = lib.cleanup_under(base)
    assert not left, f"module left mounts behind: {left}"
