"""The GPU decode backend's choice at mount (--decoder=auto|cpu|gpu, issue 7).

Numbered scenarios:
 1. Without a usable GPU, --decoder=gpu (or a view's decoder=gpu) fails the
    mount with one clear line and a non-zero exit; nothing is mounted.
    Where pip installed the nvidia-nvjpeg wheel (CI does), the daemon finds
    the real nvJPEG by itself, resolves from it and the CUDA runtime every
    call the backend makes, and fails on the device alone.
 2. Without a usable GPU, --decoder=auto mounts with the CPU decoder, says so
    in stats.json, `stoker stat` and the log, and serves libjpeg-turbo's
    pixels.
 3. On a GPU host (skipped elsewhere): --decoder=gpu mounts, says so, serves
    pixels close to libjpeg-turbo's, sends a progressive JPEG to the CPU
    (counted), and a view first read with the CPU and then remounted with the
    GPU is decoded again, never served the CPU's cached bytes.
 4. On the host stand-in for libcudart and libnvjpeg (build/gpu-standin,
    decode/gpu/standin/standin.h; any host with a STOKER_CUDA build): the
    daemon's GPU path runs end to end. Scenario 3 holds, and its pixels are
    exactly libjpeg-turbo's (the stand-in's); --decoder=auto picks the GPU;
    `stoker stat` names it; a device that fails mid-stream sends its images
    to the CPU, counted, with every byte still right; a host whose runtime
    sees no device fails --decoder=gpu with the runtime's reason.

"No usable GPU" is made on any host by hiding the devices
(CUDA_VISIBLE_DEVICES=""), so scenarios 1 and 2 run on GPU hosts too.
"""

import os
from pathlib import Path

import pytest

np = pytest.importorskip("numpy")
pytest.importorskip("PIL")

import stoker_testlib as lib  # noqa: E402
import view_data as vd  # noqa: E402

ARGS = ["--chunk-size", "64K", "--cache-size", "256M"]
NO_GPU = dict(os.environ, CUDA_VISIBLE_DEVICES="")
STANDIN = Path(lib.STOKER_BIN).parent / "gpu-standin"


def standin_args():
    if not (STANDIN / "libnvjpeg.so").exists():
        pytest.skip(f"no GPU stand-in at {STANDIN} (a build without STOKER_CUDA)")
    return ["--gpu-library-path", str(STANDIN)]


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


def real_nvjpeg():
    """The nvidia-nvjpeg wheel's library, where pip installed it; else None."""
    import site
    for d in site.getsitepackages() + [site.getusersitepackages()]:
        for p in sorted(Path(d).glob("nvidia/*/lib/libnvjpeg.so*")):
            return p
    return None


def test_the_real_nvjpeg_loads_and_only_the_device_is_missing(tmp_path, origin, stoker_bin):
    found = real_nvjpeg()
    if found is None:
        pytest.skip("the nvidia-nvjpeg wheel is not installed")
    if not (list(Path("/usr/local/cuda/lib64").glob("libcudart.so*"))
            or list(found.parent.glob("libcudart.so*"))):
        pytest.skip("no CUDA runtime (libcudart) where the daemon looks first")
    root, _ = origin
    (tmp_path / "m").mkdir()
    r = lib.run([stoker_bin, "mount", root, tmp_path / "m", "--cache", tmp_path / "c", *ARGS,
                 "--decoder", "gpu"], timeout=lib.MOUNT_TIMEOUT, env=NO_GPU)
    try:
        lines = r.stderr.strip().splitlines()
        assert r.returncode != 0 and len(lines) == 1, lib.describe(r)
        # Not "not found" (ENOENT) nor "has no <symbol>" (ENOSYS): loaded.
        # A host without a driver says so (issue 30), not the runtime's words.
        assert ("--decoder=gpu: no usable GPU decoder: no CUDA device: " in lines[0]
                or lines[0].endswith("--decoder=gpu: no usable GPU decoder: no NVIDIA driver")), \
            (str(found), lib.describe(r))
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
    assert row and "; decoding on the CPU (--decoder=auto)" in row[0], r.stdout
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
    check_gpu_view(tmp_path, origin, mounts, [])


def check_gpu_view(tmp_path, origin, mounts, extra):
    """Scenario 3 with extra mount arguments; returns the GPU mount."""
    root, jpegs = origin
    cache = tmp_path / "c"
    m = mounts.make(root, tmp_path / "m", cache, args=ARGS + ["--decoder", "cpu", "--view", "d"])
    cpu_bytes = {n: (m.mnt / ".d" / (n + ".npy")).read_bytes() for n in jpegs}
    m.unmount()
    m = mounts.make(root, tmp_path / "m", cache,
                    args=ARGS + extra + ["--decoder", "gpu", "--view", "d"])
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
    return m


# 4 ------------------------------------------------------------------------


def test_gpu_view_on_the_standin(tmp_path, origin, mounts):
    m = check_gpu_view(tmp_path, origin, mounts, standin_args())
    _, jpegs = origin
    for name, jpeg in jpegs.items():
        if name != "prog.jpg":  # decoded by the CPU fallback, with the view's fast DCT
            got = np.load(m.mnt / ".d" / (name + ".npy"))
            assert np.array_equal(got, vd.decode_like_libjpeg(jpeg)), name
    s = m.stats()
    assert "stand-in" in s["gpu_backend"]["device"], s
    assert s["gpu_backend"]["nvjpeg_path"] == str(STANDIN / "libnvjpeg.so"), s
    assert s["decode_fallbacks"] == s["decode_fallbacks_unsupported"] == 1, s
    r = lib.stoker("stat", m.mnt)
    assert r.returncode == 0, lib.describe(r)
    row = [ln for ln in r.stdout.splitlines() if ln.strip().startswith("decoder")]
    assert row and "gpu (--decoder=gpu" in row[0] and "1 fell back to the cpu" in row[0], r.stdout


def test_auto_picks_the_standin(tmp_path, origin, mounts):
    root, jpegs = origin
    m = mounts.make(root, tmp_path / "m", tmp_path / "c",
                    args=ARGS + standin_args() + ["--decoder", "auto", "--view", "d"])
    s = m.stats()
    assert s["decoder"] == "gpu" and s["decoder_reason"].startswith("--decoder=auto"), s
    np.load(m.mnt / ".d" / "img0.jpg.npy")
    assert m.stats()["gpu_images"] >= 1


@pytest.mark.parametrize("sticky", [False, True])
def test_a_failing_device_falls_back_to_the_cpu(tmp_path, origin, mounts, monkeypatch, sticky):
    """The daemon's first stream synchronisation fails (the knob counts down
    once), and with sticky it breaks the CUDA context, as a launch failure
    does: the images it fails are decoded by the CPU, counted, and with
    dct=accurate both decoders give the same bytes, so every file is right.
    A broken context is said in stat."""
    root, jpegs = origin
    monkeypatch.setenv("STOKER_STANDIN_FAIL_SYNC", "1")
    monkeypatch.setenv("STOKER_STANDIN_STICKY", "1" if sticky else "0")
    m = mounts.make(root, tmp_path / "m", tmp_path / "c",
                    args=ARGS + standin_args() + ["--decoder", "gpu", "--view", "d:dct=accurate"])
    for name, jpeg in sorted(jpegs.items()):
        got = np.load(m.mnt / ".d" / (name + ".npy"))
        assert np.array_equal(got, vd.decode_like_libjpeg(jpeg)), name
    s = m.stats()
    assert s["decode_fallbacks_device_error"] >= 1, s
    assert s["gpu_failed"] >= 1 and s["gpu_images"] >= 3, s
    assert s["view_errors"] == 0, s
    assert s["gpu_backend"]["context_broken"] == sticky, s
    if sticky:
        assert s["decode_fallbacks_device_error"] == s["gpu_images"] - 1, s  # all but prog.jpg
        r = lib.stoker("stat", m.mnt)
        assert "the GPU's CUDA context is broken" in r.stdout, lib.describe(r)


@pytest.mark.parametrize("decoder", ["gpu", "auto"])
def test_a_runtime_without_a_device(tmp_path, origin, stoker_bin, mounts, monkeypatch, decoder):
    root, _ = origin
    monkeypatch.setenv("STOKER_STANDIN_DEVICES", "0")
    args = ARGS + standin_args() + ["--decoder", decoder, "--view", "d"]
    if decoder == "gpu":
        (tmp_path / "m").mkdir()
        r = lib.run([stoker_bin, "mount", root, tmp_path / "m", "--cache", tmp_path / "c", *args],
                    timeout=lib.MOUNT_TIMEOUT)
        lines = r.stderr.strip().splitlines()
        assert r.returncode != 0 and len(lines) == 1, lib.describe(r)
        assert "--decoder=gpu: no usable GPU decoder: no CUDA device: no CUDA-capable device" \
            in lines[0], lib.describe(r)
        assert not lib.is_mounted(tmp_path / "m")
    else:
        m = mounts.make(root, tmp_path / "m", tmp_path / "c", args=args)
        s = m.stats()
        assert s["decoder"] == "cpu" and "no CUDA device" in s["decoder_reason"], s
