"""WebDataset as the client of a decoded view, for test_views_webdataset.py.

    webdataset_client.py RAW_DIR VIEW_DIR RATIO CHANNELS WORKERS

Reads every *.tar shard of VIEW_DIR with webdataset (PyPI), the image key
"npy" (decoded by webdataset's default handler, np.load), and the same
shards of RAW_DIR with the key "jpg;jpeg", each JPEG decoded by this
interpreter's Pillow (view_data.decode_like_libjpeg). WORKERS > 0 reads the
view through torch's DataLoader(num_workers=WORKERS, batch_size=None) (each
worker takes its own shards, webdataset's split_by_worker); 0 iterates the
WebDataset in this process. Prints one JSON line: per sample its key,
class and the array's shape and sha256, on both sides. It compares nothing:
the test does.
"""

import glob
import hashlib
import json
import os
import sys

import numpy as np
import webdataset as wds

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import view_data as vd  # noqa: E402


def summary(key, arr, cls):
    arr = np.ascontiguousarray(arr)
    return {"key": key, "cls": int(cls), "shape": list(arr.shape), "dtype": str(arr.dtype),
            "sha256": hashlib.sha256(arr.tobytes()).hexdigest()}


def main(raw_dir, view_dir, ratio, channels, workers):
    names = sorted(os.path.basename(p) for p in glob.glob(os.path.join(raw_dir, "*.tar")))
    raw = wds.WebDataset([os.path.join(raw_dir, n) for n in names], shardshuffle=False)
    want = [summary(s["__key__"], vd.decode_like_libjpeg(s.get("jpg", s.get("jpeg")), channels,
                                                         ratio), s["cls"])
            for s in raw]
    view = (wds.WebDataset([os.path.join(view_dir, n) for n in names], shardshuffle=False)
            .decode().to_tuple("__key__", "npy", "cls"))
    if workers:
        import torch
        loader = torch.utils.data.DataLoader(view, batch_size=None, num_workers=workers)
        got = [summary(k, a.numpy() if hasattr(a, "numpy") else a, c) for k, a, c in loader]
    else:
        got = [summary(k, a, c) for k, a, c in view]
    return {"python": sys.executable, "shards": names, "want": want, "got": got}


if __name__ == "__main__":
    raw_dir, view_dir, ratio, channels, workers = sys.argv[1:]
    print(json.dumps(main(raw_dir, view_dir, int(ratio), int(channels), int(workers))))
