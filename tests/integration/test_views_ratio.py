"""Reduced-resolution views (ratio=1|2|4|8, max_side=N; issue 22) with
TensorFlow as the reference.

Skipped where tensorflow (tensorflow-cpu from PyPI) is not installed.
 1. Every view file's st_size, from the first stat and before anything is
    decoded, is the size a read returns; .npy files hold exactly
    tf.io.decode_jpeg(jpeg, channels=C, ratio=N, dct_method=...) and
    TFRecord views hold it in each record (shape features set to the scaled
    size): every ratio, both DCT methods, grey and colour, 4:2:0 / 4:2:2 /
    4:4:4, odd sizes, 1x1, progressive JPEGs.
 2. max_side=N decodes each image at the largest ratio that keeps its
    shorter side at least N, as tf.io.decode_jpeg does at that ratio.
 3. A view remounted under the same name with another ratio is decoded
    again, never served the old bytes.
 4. On a mount whose decoder is the GPU (the host stand-in for nvJPEG), a
    view with a ratio decodes on the CPU, and stats.json and `stoker stat`
    say so.
A bad ratio or max_side is refused at mount with one line naming it
(test_views.py::test_bad_view_option_refused).
"""

import io
import os

import pytest

np = pytest.importorskip("numpy")
pytest.importorskip("PIL")
tf = pytest.importorskip("tensorflow")

import stoker_testlib as lib  # noqa: E402
import view_data as vd  # noqa: E402
from test_views import make_shard, read, view_args  # noqa: E402
from test_views_tensorflow import FEATURES  # noqa: E402

RATIOS = (1, 2, 4, 8)
NO_PREFETCH = ["--prefetch-files", "0"]


def jpegs():
    """name -> JPEG: colour at each subsampling, grey, progressive, sizes
    that are not multiples of 8 (or of the MCU), and smaller than 8."""
    out = {}
    specs = [  # name, width, height, mode, subsampling (0 4:4:4, 1 4:2:2, 2 4:2:0), progressive
        ("c420", 97, 61, "RGB", 2, False),
        ("c422", 333, 251, "RGB", 1, False),
        ("c444", 64, 48, "RGB", 0, False),
        ("grey", 81, 47, "L", 0, False),
        ("prog420", 150, 113, "RGB", 2, True),
        ("prog444", 45, 91, "RGB", 0, True),
        ("proggrey", 37, 29, "L", 0, True),
        ("tiny", 5, 3, "RGB", 2, False),
        ("dot", 1, 1, "RGB", 0, False),
    ]
    for i, (name, w, h, mode, sub, prog) in enumerate(specs):
        img = vd.make_image(w, h, mode, seed=30 + i)
        out[name + ".jpg"] = vd.jpeg_bytes(img, quality=85, subsampling=sub, progressive=prog)
    return out


@pytest.fixture
def dataset(tmp_path):
    root = tmp_path / "origin"
    root.mkdir()
    images = jpegs()
    for name, data in images.items():
        (root / name).write_bytes(data)
    make_shard(root / "shard", images)
    return root, images


def dct_name(dct):
    return "INTEGER_ACCURATE" if dct == "accurate" else ""


def want_pixels(jpeg, ratio, dct="fast", channels=0):
    return tf.io.decode_jpeg(jpeg, channels=channels, ratio=ratio,
                             dct_method=dct_name(dct)).numpy()


def npy_header_size(data):
    f = io.BytesIO(data)
    np.lib.format.read_magic(f)
    np.lib.format.read_array_header_1_0(f)
    return f.tell()


# Every ratio with both DCT methods, plus channel conversions: NAME -> options.
VIEWS = {f"{dct[0]}{r}": dict(ratio=r, dct=dct, channels=0)
         for r in RATIOS for dct in ("fast", "accurate")}
VIEWS["grey4"] = dict(ratio=4, dct="fast", channels=1)
VIEWS["rgb2"] = dict(ratio=2, dct="accurate", channels=3)


def spec(name, o):
    return f"{name}:ratio={o['ratio']},dct={o['dct']},channels={o['channels']}"


def stat_all(mnt):
    """st_size of every view file, by path, before anything is read."""
    sizes = {}
    for name in VIEWS:
        for f in lib.with_deadline(os.listdir, mnt / ("." + name)):
            sizes[(name, f)] = os.stat(mnt / ("." + name) / f).st_size
    return sizes


# 1 ------------------------------------------------------------------------


def test_npy_sizes_and_pixels_equal_decode_jpeg_at_every_ratio(mounts, dataset):
    root, images = dataset
    m = mounts.make(root, args=view_args(*(spec(n, o) for n, o in VIEWS.items()),
                                         extra=NO_PREFETCH))
    sizes = stat_all(m.mnt)
    s = m.stats()
    assert s["view_images_decoded"] == 0 and s["view_records_decoded"] == 0, s
    for name, o in VIEWS.items():
        for jpeg_name, jpeg in images.items():
            want = want_pixels(jpeg, o["ratio"], o["dct"], o["channels"])
            data = read(m.mnt / ("." + name) / (jpeg_name + ".npy"))
            assert sizes[(name, jpeg_name + ".npy")] == len(data), (name, jpeg_name)
            assert len(data) == npy_header_size(data) + want.size, (name, jpeg_name)
            got = np.load(io.BytesIO(data))
            assert got.shape == want.shape, (name, jpeg_name)
            assert np.array_equal(got, want), (name, jpeg_name)
    assert m.stats()["view_errors"] == 0


def test_tfrecord_sizes_and_pixels_equal_decode_jpeg_at_every_ratio(mounts, dataset):
    root, images = dataset
    m = mounts.make(root, args=view_args(*(spec(n, o) for n, o in VIEWS.items()),
                                         extra=NO_PREFETCH))
    sizes = {n: os.stat(m.mnt / ("." + n) / "shard").st_size for n in VIEWS}
    assert m.stats()["view_records_decoded"] == 0
    raw = [r.numpy() for r in tf.data.TFRecordDataset([str(root / "shard")])]
    for name, o in VIEWS.items():
        path = m.mnt / ("." + name) / "shard"
        assert len(read(path)) == sizes[name], name
        got = lib.with_deadline(lambda: [r.numpy() for r in tf.data.TFRecordDataset([str(path)])])
        assert len(got) == len(raw) == len(images)
        for r, d in zip(raw, got):
            jpeg = tf.io.parse_single_example(r, {"image/encoded": FEATURES["image/encoded"]})
            want = want_pixels(jpeg["image/encoded"], o["ratio"], o["dct"], o["channels"])
            f = tf.io.parse_single_example(d, FEATURES)
            shape = [int(f["image/height"]), int(f["image/width"]), int(f["image/channels"])]
            assert shape == list(want.shape), name
            img = tf.reshape(tf.io.decode_raw(f["image/encoded"], tf.uint8), shape).numpy()
            assert np.array_equal(img, want), name


# 2 ------------------------------------------------------------------------


def max_side_ratio(width, height, side):
    ratio = 1
    while ratio < 8 and -(-min(width, height) // (ratio * 2)) >= side:
        ratio *= 2
    return ratio


def test_max_side_picks_the_ratio_per_image(mounts, dataset):
    root, images = dataset
    m = mounts.make(root, args=view_args("s:max_side=20,dct=accurate", extra=NO_PREFETCH))
    ratios = set()
    for name, jpeg in images.items():
        h, w = tf.io.extract_jpeg_shape(jpeg).numpy()[:2]
        ratio = max_side_ratio(int(w), int(h), 20)
        ratios.add(ratio)
        path = m.mnt / ".s" / (name + ".npy")
        size = os.stat(path).st_size
        data = read(path)
        assert len(data) == size, name
        want = want_pixels(jpeg, ratio, "accurate")
        got = np.load(io.BytesIO(data))
        assert got.shape == want.shape and np.array_equal(got, want), (name, ratio)
        if min(w, h) >= 20:
            assert min(got.shape[:2]) >= 20, name
    assert ratios == {1, 2, 4, 8}, ratios  # the data set covers every choice


# 3 ------------------------------------------------------------------------


def test_a_view_remounted_with_another_ratio_is_decoded_again(mounts, dataset, tmp_path):
    root, images = dataset
    cache, seen = tmp_path / "cache", {}
    for ratio in (2, 4, 2):
        m = mounts.make(root, cache=cache, args=view_args(f"d:ratio={ratio}", extra=NO_PREFETCH))
        data = read(m.mnt / ".d" / "c422.jpg.npy")
        assert np.array_equal(np.load(io.BytesIO(data)), want_pixels(images["c422.jpg"], ratio))
        assert seen.setdefault(ratio, data) == data
        m.unmount()
    assert len(seen[4]) < len(seen[2])


# 4 ------------------------------------------------------------------------


def test_a_ratio_view_decodes_on_the_cpu_under_a_gpu_mount(mounts, dataset):
    from test_gpu_decoder import ARGS as GPU_ARGS
    from test_gpu_decoder import standin_args
    root, images = dataset
    m = mounts.make(root, args=GPU_ARGS + standin_args() + [
        "--decoder", "gpu", "--view", "g", "--view", "half:ratio=2,dct=accurate"])
    s = m.stats()
    assert s["decoder"] == "gpu", s
    assert s["view_decoders"]["g"].startswith("nvjpeg "), s
    half = s["view_decoders"]["half"]
    assert half.startswith("libjpeg-turbo ") and "needs DCT scaling" in half, s
    for name, jpeg in images.items():
        got = np.load(io.BytesIO(read(m.mnt / ".half" / (name + ".npy"))))
        assert np.array_equal(got, want_pixels(jpeg, 2, "accurate")), name
    s = m.stats()
    assert s["decode_fallbacks"] == 0 and s["gpu_images"] == 0, s
    r = lib.stoker("stat", m.mnt)
    assert r.returncode == 0, lib.describe(r)
    row = [ln for ln in r.stdout.splitlines() if ln.strip().startswith("views")]
    assert row and "half [libjpeg-turbo" in row[0] and "needs DCT scaling" in row[0], r.stdout


def test_auto_opens_no_gpu_for_views_it_cannot_decode(mounts, dataset):
    """--decoder=auto with only ratio views: the GPU (here the stand-in,
    which auto would open) is not opened at all."""
    from test_gpu_decoder import ARGS as GPU_ARGS
    from test_gpu_decoder import standin_args
    root, images = dataset
    m = mounts.make(root, args=GPU_ARGS + standin_args() + [
        "--decoder", "auto", "--view", "half:ratio=2,dct=accurate"])
    s = m.stats()
    assert s["decoder"] == "cpu" and s["decoder_reason"] == "--decoder=auto", s
    assert "gpu_batches" not in s, s
    name, jpeg = next(iter(images.items()))
    got = np.load(io.BytesIO(read(m.mnt / ".half" / (name + ".npy"))))
    assert np.array_equal(got, want_pixels(jpeg, 2, "accurate")), name
