"""TensorFlow as the real client of a mount and its decoded views (issue 3).

Skipped where tensorflow (tensorflow-cpu from PyPI) is not installed.
 1. TFRecordDataset over the raw paths yields exactly the origin's records,
    also with num_parallel_reads and interleave.
 2. Over the decoded view, decode_raw + reshape equals tf.io.decode_jpeg of
    the raw record bit for bit: default settings, and
    dct_method='INTEGER_ACCURATE' against dct=accurate; colour and gray.
    Also for a decoder=gpu view made by the GPU backend on the host
    stand-in for libcudart and libnvjpeg (its pixels are libjpeg-turbo's with
    the accurate DCT; bench/gpu_check reads nvJPEG's own on a GPU host).
 3. np.load of .npy views equals tf.io.decode_jpeg of the original files.
 4. A dataset with bad records: on_error=skip yields the good ones only;
    on_error=fail makes TensorFlow's read fail. Also a JPEG whose header is
    fine but whose scan is cut short (it fails only when decoded): skip
    leaves it out, fail reads EIO with a log line and a counted error.
"""

import errno
import io
import os

import pytest

np = pytest.importorskip("numpy")
pytest.importorskip("PIL")
tf = pytest.importorskip("tensorflow")

import stoker_testlib as lib  # noqa: E402
import view_data as vd  # noqa: E402
from test_views import bad_origin, images, make_shard, read, view_args  # noqa: E402,F401

FEATURES = {
    "image/encoded": tf.io.FixedLenFeature([], tf.string),
    "image/height": tf.io.FixedLenFeature([], tf.int64),
    "image/width": tf.io.FixedLenFeature([], tf.int64),
    "image/channels": tf.io.FixedLenFeature([], tf.int64),
    "image/class/label": tf.io.FixedLenFeature([], tf.int64),
}


@pytest.fixture
def dataset(tmp_path):
    root = tmp_path / "origin"
    (root / "train").mkdir(parents=True)
    jpegs = images()
    for i in range(4):
        img = vd.make_image(150 + 7 * i, 100 + 5 * i, "L" if i % 2 else "RGB", seed=50 + i)
        jpegs[f"extra{i}.jpg"] = vd.jpeg_bytes(img, quality=80, subsampling=i % 3)
    for name, data in jpegs.items():
        (root / "train" / name).write_bytes(data)
    names = sorted(jpegs)
    make_shard(root / "train" / "shard-0", {n: jpegs[n] for n in names[:5]})
    make_shard(root / "train" / "shard-1", {n: jpegs[n] for n in names[5:]})
    return root, jpegs


def records(paths, **kw):
    return [r.numpy() for r in tf.data.TFRecordDataset([str(p) for p in paths], **kw)]


def test_raw_tfrecords_through_the_mount(mounts, dataset):
    root, _ = dataset
    m = mounts.make(root, args=view_args("decoded"))
    shards = [m.mnt / "train" / "shard-0", m.mnt / "train" / "shard-1"]
    want = []
    for s in ("shard-0", "shard-1"):
        want += vd.read_tfrecords((root / "train" / s).read_bytes())
    assert lib.with_deadline(records, shards) == want
    got = lib.with_deadline(records, shards, num_parallel_reads=2)
    assert sorted(got) == sorted(want)
    ds = tf.data.Dataset.from_tensor_slices([str(p) for p in shards]).interleave(
        tf.data.TFRecordDataset, cycle_length=2, num_parallel_calls=2)
    assert sorted(lib.with_deadline(lambda: [r.numpy() for r in ds])) == sorted(want)


@pytest.mark.parametrize("view,dct_method", [("decoded", ""),
                                             ("acc:dct=accurate", "INTEGER_ACCURATE")])
def test_view_pixels_equal_decode_jpeg(mounts, dataset, view, dct_method):
    root, _ = dataset
    m = mounts.make(root, args=view_args(view))
    name = "." + view.split(":")[0]
    for shard in ("shard-0", "shard-1"):
        assert_decoded(records([m.mnt / "train" / shard]),
                       records([m.mnt / name / "train" / shard]), dct_method)


def test_gpu_view_pixels_equal_decode_jpeg(mounts, dataset):
    from test_gpu_decoder import standin_args
    root, jpegs = dataset
    m = mounts.make(root, args=view_args("g:decoder=gpu", extra=standin_args()))
    for shard in ("shard-0", "shard-1"):
        assert_decoded(records([m.mnt / "train" / shard]),
                       records([m.mnt / ".g" / "train" / shard]), "INTEGER_ACCURATE")
    s = m.stats()
    assert s["view_decoders"]["g"].startswith("nvjpeg "), s
    assert s["gpu_images"] >= len(jpegs) and s["decode_fallbacks"] == 0, s


def assert_decoded(raw, decoded, dct_method=""):
    """decoded (view records) is raw (records with JPEGs) with each image as
    decode_raw + reshape of tf.io.decode_jpeg's pixels, bit for bit."""
    assert len(raw) == len(decoded)
    for r, d in zip(raw, decoded):
        rf = tf.io.parse_single_example(r, {"image/encoded": FEATURES["image/encoded"],
                                            "image/class/label": FEATURES["image/class/label"]})
        want = tf.io.decode_jpeg(rf["image/encoded"], dct_method=dct_method).numpy()
        f = tf.io.parse_single_example(d, FEATURES)
        img = tf.reshape(tf.io.decode_raw(f["image/encoded"], tf.uint8),
                         tf.stack([f["image/height"], f["image/width"],
                                   f["image/channels"]])).numpy()
        assert img.shape == want.shape
        assert np.array_equal(img, want)
        assert int(f["image/class/label"]) == int(rf["image/class/label"])


def test_compressed_shards_read_as_plain_tfrecords(mounts, dataset):
    """A GZIP shard (by its .gz name) and a ZLIB one without a suffix (by
    compression=zlib) appear under their names as uncompressed view
    TFRecords, which TFRecordDataset reads with no compression_type."""
    root, _ = dataset
    train = root / "train"
    (train / "shard-2.tfrecord.gz").write_bytes(vd.gzip_bytes((train / "shard-0").read_bytes()))
    (train / "shard-3").write_bytes(vd.zlib_bytes((train / "shard-1").read_bytes()))
    m = mounts.make(root, args=view_args("decoded", "z:compression=zlib"))
    assert "shard-3" not in lib.with_deadline(os.listdir, m.mnt / ".decoded" / "train")
    for raw, comp, view in (("shard-2.tfrecord.gz", "GZIP", ".decoded"), ("shard-3", "ZLIB", ".z")):
        raw_records = records([m.mnt / "train" / raw], compression_type=comp)
        assert raw_records == records([train / raw], compression_type=comp)
        assert_decoded(raw_records, lib.with_deadline(records, [m.mnt / view / "train" / raw]))


def test_npy_equals_decode_jpeg(mounts, dataset):
    root, jpegs = dataset
    m = mounts.make(root, args=view_args("decoded", "acc:dct=accurate"))
    for name, jpeg in jpegs.items():
        for view, method in ((".decoded", ""), (".acc", "INTEGER_ACCURATE")):
            got = np.load(io.BytesIO(read(m.mnt / view / "train" / (name + ".npy"))))
            want = tf.io.decode_jpeg(jpeg, dct_method=method).numpy()
            assert np.array_equal(got, want), (view, name)


def test_bad_records_skip_and_fail(mounts, bad_origin):  # noqa: F811
    root, _ = bad_origin
    m = mounts.make(root, args=view_args("skip:on_error=skip", "fail:on_error=fail"))
    good = records([m.mnt / ".skip" / "shard"])
    assert len(good) == 2
    for d in good:
        f = tf.io.parse_single_example(d, FEATURES)
        n = int(f["image/height"]) * int(f["image/width"]) * int(f["image/channels"])
        assert tf.io.decode_raw(f["image/encoded"], tf.uint8).shape[0] == n
    with pytest.raises(tf.errors.OpError):
        records([m.mnt / ".fail" / "shard"])
    assert lib.pid_alive(m.pid)


def _decoded(d):
    f = tf.io.parse_single_example(d, FEATURES)
    img = tf.reshape(tf.io.decode_raw(f["image/encoded"], tf.uint8),
                     tf.stack([f["image/height"], f["image/width"], f["image/channels"]]))
    return int(f["image/class/label"]), img.numpy()


@pytest.fixture
def cut_scan_origin(tmp_path):
    """A shard of 12 records, records 4 and 9 a JPEG whose scan is cut short
    (its header probes fine; libjpeg fails mid-stream). Spans many chunks."""
    root = tmp_path / "cutscan"
    root.mkdir()
    payloads, jpegs, offsets, pos = [], [], [], 0
    for i in range(12):
        img = vd.make_image(160 + 13 * i, 120 + 7 * i, "L" if i % 5 == 2 else "RGB", seed=70 + i)
        jpeg = vd.jpeg_bytes(img, quality=90, subsampling=i % 3)
        if i in (4, 9):
            jpeg = jpeg[:len(jpeg) * 3 // 5]  # mid-stream: no EOI, scan incomplete
            with pytest.raises(tf.errors.InvalidArgumentError):
                tf.io.decode_jpeg(jpeg)  # TensorFlow cannot decode it either
        jpegs.append(jpeg)
        payloads.append(vd.imagenet_example(jpeg, i, img.size[0], img.size[1], f"img{i}"))
        offsets.append(pos)
        pos += len(vd.tfrecord_frame(payloads[-1]))
    vd.write_tfrecord(root / "shard", payloads)
    return root, jpegs, offsets


def test_cut_scan_is_skipped_under_skip(mounts, cut_scan_origin):
    root, jpegs, offsets = cut_scan_origin
    m = mounts.make(root, args=view_args("skip:on_error=skip"))
    shard = m.mnt / ".skip" / "shard"
    size = os.stat(shard).st_size
    got = lib.with_deadline(records, [shard])
    assert [_decoded(d)[0] for d in got] == [i for i in range(12) if i not in (4, 9)]
    for d in got:
        label, img = _decoded(d)
        assert np.array_equal(img, tf.io.decode_jpeg(jpegs[label]).numpy()), label
    # The size given out at the first stat was the size read; it never changes.
    assert os.stat(shard).st_size == size == sum(len(vd.tfrecord_frame(d)) for d in got)
    errors = read(m.mnt / ".stoker" / "errors").decode()
    for i in (4, 9):
        assert f".skip/shard: offset {offsets[i]}:" in errors, errors
    s = m.stats()
    assert s["view_errors"] >= 2 and s["view_failed_reads"] == 0
    assert s["view_images_checked"] == 12
    assert lib.pid_alive(m.pid)


@pytest.mark.parametrize("view", ["fail:on_error=fail", "fail"])
def test_cut_scan_reads_eio_under_fail(mounts, cut_scan_origin, view):
    root, _, offsets = cut_scan_origin
    m = mounts.make(root, args=view_args(view))
    shard = m.mnt / ".fail" / "shard"
    with pytest.raises(tf.errors.OpError):
        lib.with_deadline(records, [shard])
    with pytest.raises(OSError) as e:
        read(shard)
    assert e.value.errno == errno.EIO
    errors = read(m.mnt / ".stoker" / "errors").decode()
    assert f".fail/shard: offset {offsets[4]}:" in errors, errors
    s = m.stats()
    assert s["view_errors"] >= 1 and s["view_failed_reads"] >= 1
    assert s["view_images_checked"] == 0
    log = m.log_tail(400)
    assert f"raw offset {offsets[4]} does not decode" in log, log
    assert lib.pid_alive(m.pid)
