"""The GPU decode backend's choice at mount (--decoder=auto|cpu|gpu, issue 7).

Numbered scenarios:
 1. Without a usable GPU, --decoder=gpu (or a view's decoder=gpu) fails the
    mount with one clear line and a non-zero exit; nothing is mounted.
 2. Without a usable GPU, --decoder=auto mounts with the CPU decoder, says so
    in stats.json, `stoker stat` and the log, and serves libjpeg-turbo's
    pixels.
 3. On a GPU host (skipped elsewhere): --decoder=gpu mounts, says so, serves
    pixels close to libjpeg-turbo's, sends a progressive JPEG to the CPU
    (counted), and a view first read with the CPU and then remounted with the
    GPU is decoded again, never served the CPU's cached bytes.

"No usable GPU" is made on any host by hiding the devices
(CUDA_VISIBLE_DEVICES=""), so scenarios 1 and 2 run on GPU hosts too.
"""

import os

import pytest

np = pytest.importorskip("numpy")
pytest.importorskip("PIL")

import stoker_testlib as lib  # noqa: E402
import view_data as vd  # noqa: E402

ARGS = ["--chunk-size", "64K", "--cache-size", "256M"]
NO_GPU = dict(os.environ, CUDA_VISIBLE_DEVICES="")


@pytest.fixture
def origin(tmp_path):
    root = tmp_path / "origin"
    root.mkdir()
    jpegs = {}
    for i, (w, h, sub) in enumerate([(120, 90, 2), (97, 61, 1), (64, 64, 0)]):
        jpegs[f"img{i}.jpg"] = vd.jpeg_bytes(vd.make_image(w, h, seed=i), quality=90,
                                             subsampling=sub)
    jpegs["prog.jpg"] = vd.jpeg_bytes(vd.make_image(80, 60, seed=9), progressive=True)
    for name, data in jpegs.items():
        (root / name).write_bytes(data)
    return root, jpegs


def gpu_mount_works(mounts, tmp_path):
    """True if this host's stoker opens the GPU decoder."""
    (tmp_path / "probe-o").mkdir()
    m = mounts.new(tmp_path / "probe-o", args=ARGS + ["--decoder", "gpu"])
    r = lib.run(m.command(), timeout=lib.MOUNT_TIMEOUT)
    m.cleanup()
    return r.returncode == 0


# 1 ------------------------------------------------------------------------


@pytest.mark.parametrize("args,who", [
    (["--decoder", "gpu", "--view", "decoded"], "--decoder=gpu"),
    (["--decoder", "gpu"], "--decoder=gpu"),
    (["--view", "g:decoder=gpu"], "--view g:decoder=gpu"),
    (["--decoder", "cpu", "--view", "g:decoder=gpu"], "--view g:decoder=gpu"),
])
def test_gpu_without_device_fails_at_mount(tmp_path, origin, stoker_bin, args, who):
    root, _ = origin
    mnt = tmp_path / "m"
    mnt.mkdir()
    r = lib.run([stoker_bin, "mount", root, mnt, "--cache", tmp_path / "c", *ARGS, *args],
                timeout=lib.MOUNT_TIMEOUT, env=NO_GPU)
    try:
        assert r.returncode != 0, lib.describe(r)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1, lib.describe(r)
        assert f"{who}: no usable GPU decoder: " in lines[0], lib.describe(r)
        assert not lib.is_mounted(mnt)
    finally:
        lib.cleanup_under(tmp_path)


def test_bad_decoder_value_is_a_usage_error(tmp_path, origin, stoker_bin):
    root, _ = origin
    (tmp_path / "m").mkdir()
    r = lib.mount_cmd_fails(root, tmp_path / "m", tmp_path / "c", "--decoder", "cuda")
    assert r.returncode == 2 and "--decoder" in r.stderr, lib.describe(r)
    r = lib.mount_cmd_fails(root, tmp_path / "m", tmp_path / "c", "--view", "v:decoder=tpu")
    assert r.returncode == 2 and "decoder" in r.stderr, lib.describe(r)
    assert not lib.is_mounted(tmp_path / "m")


# 2 ------------------------------------------------------------------------


def test_auto_without_device_picks_the_cpu(tmp_path, origin, stoker_bin, mounts, monkeypatch):
    root, jpegs = origin
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    m = mounts.make(root, tmp_path / "m", tmp_path / "c",
                    args=ARGS + ["--decoder", "auto", "--view", "decoded:dct=accurate"])
    s = m.stats()
    assert s["decoder"] == "cpu", s
    assert "--decoder=auto: no GPU decoder: " in s["decoder_reason"], s
    assert s["view_decoders"]["decoded"].startswith("libjpeg-turbo"), s
    assert "gpu_batches" not in s
    for name, jpeg in jpegs.items():
        got = np.load(m.mnt / ".decoded" / (name + ".npy"))
        assert np.array_equal(got, vd.decode_like_libjpeg(jpeg)), name
    r = lib.stoker("stat", m.mnt)
    assert r.returncode == 0, lib.describe(r)
    row = [ln for ln in r.stdout.splitlines() if ln.strip().startswith("decoder")]
    assert row and "cpu (--decoder=auto: no GPU decoder" in row[0], r.stdout
    line = "decoder: cpu (--decoder=auto: no GPU decoder: "
    lib.wait_until(lambda: line in m.log_path().read_text(errors="replace"), timeout=30,
                   what="the decoder's choice in the log (flushed every 2 s)")


def test_cpu_is_cpu_and_opens_no_gpu(tmp_path, origin, stoker_bin, mounts):
    root, _ = origin
    m = mounts.make(root, tmp_path / "m", tmp_path / "c",
                    args=ARGS + ["--decoder", "cpu", "--view", "decoded"])
    s = m.stats()
    assert s["decoder"] == "cpu" and s["decoder_reason"] == "--decoder=cpu", s
    m.unmount()  # the log is complete once the daemon has exited
    log = m.log_path().read_text(errors="replace")
    assert "view decoded: decoder libjpeg-turbo" in log, log[-2000:]
    assert "GPU decoder" not in log and "nvjpeg" not in log, log[-2000:]


# 3 ------------------------------------------------------------------------


def test_gpu_view_on_a_gpu_host(tmp_path, origin, stoker_bin, mounts):
    if not gpu_mount_works(mounts, tmp_path):
        pytest.skip("no usable GPU decoder on this host")
    root, jpegs = origin
    cache = tmp_path / "c"
    m = mounts.make(root, tmp_path / "m", cache, args=ARGS + ["--decoder", "cpu", "--view", "d"])
    cpu_bytes = {n: (m.mnt / ".d" / (n + ".npy")).read_bytes() for n in jpegs}
    m.unmount()
    m = mounts.make(root, tmp_path / "m", cache, args=ARGS + ["--decoder", "gpu", "--view", "d"])
    s = m.stats()
    assert s["decoder"] == "gpu", s
    assert s["view_decoders"]["d"].startswith("nvjpeg "), s
    gpu_bytes = {}
    for name, jpeg in jpegs.items():
        gpu_bytes[name] = (m.mnt / ".d" / (name + ".npy")).read_bytes()
        got = np.load(m.mnt / ".d" / (name + ".npy")).astype(int)
        want = vd.decode_like_libjpeg(jpeg).astype(int)
        assert got.shape == want.shape, name
        assert np.abs(got - want).mean() < 3.0, name
    s = m.stats()
    assert s["gpu_images"] >= 3, s
    assert s["decode_fallbacks_unsupported"] >= 1, s  # prog.jpg
    assert s["view_images_decoded"] == len(jpegs), s  # none served from the CPU's cache
    assert any(gpu_bytes[n] != cpu_bytes[n] for n in jpegs if n != "prog.jpg")
