#!/usr/bin/env python3
"""TensorFlow reads a GPU-decoded view: bench/gpu_check/tf_read.py VIEW RAW

VIEW is a TFRecord file of a decoder=gpu view (channels=3), RAW the raw
TFRecord it was made from. Reads both with tf.data, parses every Example,
reshapes the view's pixels by its shape features, and compares them with
tf.io.decode_jpeg of the raw record (INTEGER_ACCURATE). Prints one line.
Exit status: 0 read and close (mean abs diff < 3 for every record), 1 not,
3 TensorFlow is not installed here.
"""

import sys

try:
    import numpy as np
    import tensorflow as tf
except ImportError:
    print("TensorFlow is not installed here")
    sys.exit(3)

FEATURES = {
    "image/encoded": tf.io.FixedLenFeature([], tf.string),
    "image/height": tf.io.FixedLenFeature([], tf.int64),
    "image/width": tf.io.FixedLenFeature([], tf.int64),
    "image/channels": tf.io.FixedLenFeature([], tf.int64),
    "image/class/label": tf.io.FixedLenFeature([], tf.int64),
}


def main(view, raw):
    views = list(tf.data.TFRecordDataset([view]))
    raws = list(tf.data.TFRecordDataset([raw]))
    if len(views) != len(raws) or not views:
        print(f"record counts differ: view {len(views)}, raw {len(raws)}")
        return 1
    diffs = []
    for v, r in zip(views, raws):
        f = tf.io.parse_single_example(v, FEATURES)
        img = tf.reshape(tf.io.decode_raw(f["image/encoded"], tf.uint8),
                         tf.stack([f["image/height"], f["image/width"], f["image/channels"]])).numpy()
        rf = tf.io.parse_single_example(r, {"image/encoded": FEATURES["image/encoded"],
                                            "image/class/label": FEATURES["image/class/label"]})
        want = tf.io.decode_jpeg(rf["image/encoded"], channels=3, dct_method="INTEGER_ACCURATE").numpy()
        if img.shape != want.shape or int(f["image/class/label"]) != int(rf["image/class/label"]):
            print(f"record {len(diffs)}: shape {img.shape} vs {want.shape} or label differs")
            return 1
        diffs.append(float(np.abs(img.astype(int) - want.astype(int)).mean()))
    print(f"TensorFlow {tf.__version__} read {len(views)} records; mean abs diff to tf.io.decode_jpeg "
          f"{np.mean(diffs):.3f} (max per record {max(diffs):.3f}); identical records "
          f"{sum(d == 0 for d in diffs)}")
    return 0 if max(diffs) < 3.0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
