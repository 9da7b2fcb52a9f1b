"""TensorFlow over an S3 origin (moto's server): the raw TFRecord read and
the decoded views of test_views_tensorflow.py, with the same dataset put
into a bucket instead of a directory. Skipped where tensorflow or moto is
not installed.
"""

import io
import os

import pytest

np = pytest.importorskip("numpy")
pytest.importorskip("PIL")
tf = pytest.importorskip("tensorflow")
pytest.importorskip("moto")

import remote_servers as rs  # noqa: E402
import stoker_testlib as lib  # noqa: E402
import view_data as vd  # noqa: E402
from test_views import read, view_args  # noqa: E402
from test_views_tensorflow import FEATURES, dataset, records  # noqa: E402,F401

BUCKET = "tf-data"


@pytest.fixture
def s3_dataset(dataset, tmp_path, monkeypatch):  # noqa: F811
    root, jpegs = dataset
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIATFTEST")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "tf-test-secret")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    server = rs.Moto(tmp_path / "moto")
    try:
        server.start()
        client = server.client()
        client.create_bucket(Bucket=BUCKET)
        for p in sorted(root.rglob("*")):
            if p.is_file():
                client.put_object(Bucket=BUCKET, Key=f"ds/{p.relative_to(root)}",
                                  Body=p.read_bytes())
        yield server, root, jpegs
    finally:
        server.stop()


def s3_mount(mounts, server, *views):
    return mounts.make(f"s3://{BUCKET}/ds",
                       args=view_args(*views, extra=["--s3-endpoint", server.endpoint]))


def test_raw_tfrecords_over_s3(mounts, s3_dataset):
    server, root, _ = s3_dataset
    m = s3_mount(mounts, server, "decoded")
    shards = [m.mnt / "train" / "shard-0", m.mnt / "train" / "shard-1"]
    want = []
    for s in ("shard-0", "shard-1"):
        want += vd.read_tfrecords((root / "train" / s).read_bytes())
    assert lib.with_deadline(records, shards) == want
    got = lib.with_deadline(records, shards, num_parallel_reads=2)
    assert sorted(got) == sorted(want)


def test_view_pixels_over_s3_equal_decode_jpeg(mounts, s3_dataset):
    server, root, jpegs = s3_dataset
    m = s3_mount(mounts, server, "decoded")
    for shard in ("shard-0", "shard-1"):
        raw = lib.with_deadline(records, [m.mnt / "train" / shard])
        decoded = lib.with_deadline(records, [m.mnt / ".decoded" / "train" / shard])
        assert len(raw) == len(decoded)
        for r, d in zip(raw, decoded):
            rf = tf.io.parse_single_example(r, {"image/encoded": FEATURES["image/encoded"]})
            want = tf.io.decode_jpeg(rf["image/encoded"]).numpy()
            f = tf.io.parse_single_example(d, FEATURES)
            img = tf.reshape(tf.io.decode_raw(f["image/encoded"], tf.uint8),
                             tf.stack([f["image/height"], f["image/width"],
                                       f["image/channels"]])).numpy()
            assert np.array_equal(img, want)
    for name, jpeg in jpegs.items():
        got = np.load(io.BytesIO(read(m.mnt / ".decoded" / "train" / (name + ".npy"))))
        assert np.array_equal(got, tf.io.decode_jpeg(jpeg).numpy()), name
    assert os.path.isdir(m.mnt / ".decoded")
