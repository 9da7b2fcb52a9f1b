"""PyTorch as a real client of a decoded view (issue 22).

An ImageFolder-style tree (class folders of JPEGs: colour at each
subsampling, grey, progressive, mixed sizes, one .JPEG, a file that is no
image) read as torchvision's DatasetFolder(VIEW, loader=np.load,
extensions=(".npy",)) through DataLoader(num_workers=4, batch_size=None):
 1. dct=accurate: every sample, in order, holds Pillow's decode of its raw
    JPEG bit for bit (libjpeg-turbo, JDCT_ISLOW and fancy upsampling);
    a grey JPEG is H x W x 1, as the view's channels=0 gives it; classes,
    class_to_idx, labels and the sample count equal DatasetFolder's over the
    raw tree (extensions=(".jpg", ".jpeg")).
 2. channels=3 (what ImageFolder's loader gives: Image.convert("RGB")): the
    same, a grey JPEG as three equal planes.
 3. ratio=2: the same against Pillow's decode after Image.draft at 1/2,
    which sets libjpeg's scale_denom=2 and leaves the DCT method and
    upsampling alone, so it gives the view's pixels bit for bit (and
    tf.io.decode_jpeg(ratio=2)'s, test_views_ratio.py).

The client (pytorch_client.py) runs in a subprocess under the first of
sys.executable and /usr/bin/python3 that imports torch and torchvision
(Debian's python3-torch and python3-torchvision, from .ci/install-deps); the
test skips only where neither does.
"""

import json
import os
import sys

import pytest

pytest.importorskip("numpy")
pytest.importorskip("PIL")

import stoker_testlib as lib  # noqa: E402
import view_data as vd  # noqa: E402
from test_views import view_args  # noqa: E402

CLIENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pytorch_client.py")
CLIENT_TIMEOUT = 300  # torch's import and 4 workers on a loaded 2-core machine


@pytest.fixture(scope="module")
def torch_python():
    tried = []
    for exe in dict.fromkeys([sys.executable, "/usr/bin/python3"]):
        if not os.access(exe, os.X_OK):
            continue
        r = lib.run([exe, "-c", "import torch, torchvision, numpy, PIL"], timeout=120)
        if r.returncode == 0:
            return exe
        tried.append(f"{exe}: {(r.stderr.strip().splitlines() or ['?'])[-1]}")
    pytest.skip("no interpreter imports torch and torchvision (apt-get install python3-torch "
                "python3-torchvision, as .ci/install-deps does): " + "; ".join(tried))


def image_folder(root):
    """{class: {name: (jpeg, width, height, channels)}}, 31 JPEGs in 3 classes."""
    classes = {"n01440764": 11, "n02102040": 12, "n03000684": 8}
    tree, i = {}, 0
    for cls, count in classes.items():
        tree[cls] = {}
        (root / cls).mkdir(parents=True)
        for k in range(count):
            w, h = 40 + (i * 37) % 170, 30 + (i * 53) % 140
            mode = "L" if i in (4, 17) else "RGB"
            progressive = i in (7, 17, 25)  # 17: progressive grey
            img = vd.make_image(w, h, mode, seed=200 + i)
            jpeg = vd.jpeg_bytes(img, quality=85, subsampling=i % 3, progressive=progressive)
            name = f"img{i:03d}.JPEG" if i == 20 else f"img{i:03d}.jpg"
            (root / cls / name).write_bytes(jpeg)
            tree[cls][name] = (jpeg, w, h, 1 if mode == "L" else 3)
            i += 1
    (root / "n02102040" / "labels.txt").write_text("not an image\n")
    return tree


@pytest.fixture
def dataset(tmp_path):
    root = tmp_path / "origin"
    return root, image_folder(root / "train")


def run_client(python, raw_root, view_root, ratio, channels):
    r = lib.run([python, CLIENT, raw_root, view_root, ratio, channels], timeout=CLIENT_TIMEOUT)
    assert r.returncode == 0, lib.describe(r)
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("view,ratio,channels", [
    ("acc:dct=accurate", 1, 0),
    ("rgb:dct=accurate,channels=3", 1, 3),
    ("half:dct=accurate,ratio=2", 2, 0),
])
def test_dataloader_over_the_view_equals_pillow_and_the_raw_tree(
        mounts, dataset, torch_python, view, ratio, channels):
    root, tree = dataset
    m = mounts.make(root, args=view_args(view))
    view_root = m.mnt / ("." + view.split(":")[0]) / "train"
    out = run_client(torch_python, root / "train", view_root, ratio, channels)
    raw, got = out["raw"], out["view"]

    # Labels and counts: the view's DatasetFolder is the raw tree's.
    n = sum(len(files) for files in tree.values())
    assert raw["classes"] == sorted(tree) and len(raw["samples"]) == n, raw
    assert got["classes"] == raw["classes"]
    assert got["class_to_idx"] == raw["class_to_idx"]
    assert got["samples"] == [[p + ".npy", label] for p, label in raw["samples"]]
    loaded, want = out["loaded"], out["want"]
    assert len(loaded) == len(want) == n
    assert [s["label"] for s in loaded] == [label for _, label in raw["samples"]]

    # Pixels: what DataLoader delivered is Pillow's decode, sample by sample.
    for (path, _), s, w in zip(raw["samples"], loaded, want):
        cls, name = os.path.split(path)
        _, width, height, chans = tree[cls][name]
        shape = [-(-height // ratio), -(-width // ratio), channels or chans]
        assert w["shape"] == shape, (path, w)
        assert s == w, (path, s, w)
    assert m.stats()["view_errors"] == 0
