"""PyTorch as the client of a decoded view, for test_views_pytorch.py, which
runs it with an interpreter that imports torch and torchvision (Debian's
python3-torch and python3-torchvision serve /usr/bin/python3, which need not
be the interpreter running pytest).

    pytorch_client.py RAW_ROOT VIEW_ROOT RATIO CHANNELS

Reads VIEW_ROOT as DatasetFolder(loader=np.load, extensions=(".npy",))
through DataLoader(num_workers=4, batch_size=None) and RAW_ROOT as
DatasetFolder(extensions=(".jpg", ".jpeg")), decoding each raw JPEG with this
interpreter's Pillow (view_data.decode_like_libjpeg); prints one JSON line
with both sides' classes, samples and per-sample shape and sha256. It
compares nothing: the test does.
"""

import hashlib
import json
import os
import sys

import numpy as np
import PIL
import torch
import torchvision
from torch.utils.data import DataLoader
from torchvision.datasets import DatasetFolder

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import view_data as vd  # noqa: E402


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def summary(arr):
    arr = np.ascontiguousarray(arr)
    return {"shape": list(arr.shape), "dtype": str(arr.dtype),
            "sha256": hashlib.sha256(arr.tobytes()).hexdigest()}


def folder(ds, root):
    return {"classes": ds.classes, "class_to_idx": ds.class_to_idx,
            "samples": [[os.path.relpath(p, root), label] for p, label in ds.samples]}


def main(raw_root, view_root, ratio, channels):
    view = DatasetFolder(view_root, loader=np.load, extensions=(".npy",))
    raw = DatasetFolder(raw_root, loader=read_bytes, extensions=(".jpg", ".jpeg"))
    # batch_size=None: one sample at a time, so arrays of different sizes need
    # no collate; each comes back from a worker as a tensor.
    loaded = [{"label": int(label), **summary(img.numpy())}
              for img, label in DataLoader(view, batch_size=None, num_workers=4)]
    want = [{"label": label, **summary(vd.decode_like_libjpeg(jpeg, channels, ratio))}
            for jpeg, label in raw]
    return {"python": sys.executable, "torch": torch.__version__,
            "torchvision": torchvision.__version__, "pillow": PIL.__version__,
            "view": folder(view, view_root), "raw": folder(raw, raw_root),
            "loaded": loaded, "want": want}


if __name__ == "__main__":
    raw_root, view_root, ratio, channels = sys.argv[1:]
    print(json.dumps(main(raw_root, view_root, int(ratio), int(channels))))
