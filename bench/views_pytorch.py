"""bench/views' PyTorch rows: one epoch of an ImageFolder-style DataLoader, raw JPEGs (PIL decode) or a decoded
view's .npy files (rows P), or of webdataset over .tar shards, raw (PIL decode) or their view (rows W), in a worker process of an interpreter that imports torch and torchvision (Debian's python3-torch
and python3-torchvision serve /usr/bin/python3, which need not be the interpreter running the bench).
Every row: DatasetFolder -> Resize(256) -> DataLoader(num_workers=WORKERS, batch_size=BATCH, collate_fn=list: the
images keep their own sizes), shuffle off, iterated to the end; only the iteration is timed (worker start-up
included: a training loop pays it every epoch). Rows W: WebDataset(shards) -> decode("pilrgb") (raw: KEY.jpg) or
decode() (view: KEY.npy, np.load) -> Resize(256) -> the same DataLoader (each worker takes its own shards)."""

import os
import subprocess
import sys
import time

WORKERS = 4
BATCH = 64
RESIZE = 256
PROBE = "import torch, torchvision, numpy, PIL"
WDS_PROBE = "import webdataset"


def torch_python():
    """(interpreter, None) for the first of sys.executable and /usr/bin/python3 that imports torch and
    torchvision, else (None, why)."""
    why = []
    for exe in dict.fromkeys([sys.executable, "/usr/bin/python3"]):
        if not os.access(exe, os.X_OK):
            continue
        p = subprocess.run([exe, "-c", PROBE], capture_output=True, text=True, timeout=120)
        if p.returncode == 0:
            return exe, None
        why.append(f"{exe}: {(p.stderr.strip().splitlines() or ['?'])[-1]}")
    return None, "no interpreter imports torch and torchvision (apt-get install python3-torch python3-torchvision): " \
        + "; ".join(why)


def keep_list(batch):
    return batch


class NpyToResized:
    """The view's H x W x 3 uint8 array through the same PIL Resize as the raw rows (Image.fromarray copies it into a
    PIL image; no decode), then PILToTensor: both sides resize with one implementation, so rows P and W measure the
    data path. (torchvision's tensor Resize(antialias=True) on 2 cores took longer than PIL's decode + resize.)"""

    def __init__(self):
        from torchvision import transforms  # noqa: PLC0415
        self.then = transforms.Compose([transforms.Resize(RESIZE), transforms.PILToTensor()])

    def __call__(self, arr):
        from PIL import Image  # noqa: PLC0415
        return self.then(Image.fromarray(arr))


def dataset(kind, root):
    import numpy as np  # noqa: PLC0415
    from torchvision import transforms  # noqa: PLC0415
    from torchvision.datasets import DatasetFolder, ImageFolder  # noqa: PLC0415
    if kind == "raw":  # ImageFolder's own loader: PIL open + convert("RGB"), decoded with PIL's defaults (ISLOW)
        return ImageFolder(root, transform=transforms.Compose([transforms.Resize(RESIZE), transforms.PILToTensor()]))
    return DatasetFolder(root, loader=np.load, extensions=(".npy",),
                         transform=NpyToResized())


def worker_pipeline(spec):
    import PIL  # noqa: PLC0415
    import torch  # noqa: PLC0415
    import torchvision  # noqa: PLC0415
    from torch.utils.data import DataLoader  # noqa: PLC0415
    ds = dataset(spec["kind"], spec["root"])
    loader = DataLoader(ds, batch_size=BATCH, num_workers=WORKERS, collate_fn=keep_list)
    images = 0
    t0 = time.monotonic()
    for batch in loader:
        images += len(batch)
    secs = time.monotonic() - t0
    out = {"images": images, "secs": secs, "input_bytes": sum(os.path.getsize(p) for p, _ in ds.samples),
           "torch": torch.__version__, "torchvision": torchvision.__version__, "Pillow (rows P)": PIL.__version__}
    if spec.get("verify"):
        out["verify"] = verify(ds, spec["verify"])
    return out


def wds_dataset(kind, shards):
    import webdataset as wds  # noqa: PLC0415
    from torchvision import transforms  # noqa: PLC0415
    ds = wds.WebDataset(shards, shardshuffle=False)
    if kind == "raw":
        return ds.decode("pilrgb").to_tuple("jpg", "cls").map_tuple(
            transforms.Compose([transforms.Resize(RESIZE), transforms.PILToTensor()]), int)
    return ds.decode().to_tuple("npy", "cls").map_tuple(NpyToResized(), int)


def worker_wds_pipeline(spec):
    import PIL  # noqa: PLC0415
    import torch  # noqa: PLC0415
    import torchvision  # noqa: PLC0415
    import webdataset  # noqa: PLC0415
    from torch.utils.data import DataLoader  # noqa: PLC0415
    shards = sorted(os.path.join(spec["root"], f) for f in os.listdir(spec["root"]) if f.endswith(".tar"))
    loader = DataLoader(wds_dataset(spec["kind"], shards), batch_size=BATCH, num_workers=WORKERS,
                        collate_fn=keep_list)
    images = 0
    t0 = time.monotonic()
    for batch in loader:
        images += len(batch)
    secs = time.monotonic() - t0
    out = {"images": images, "secs": secs, "input_bytes": sum(os.path.getsize(p) for p in shards),
           "torch": torch.__version__, "torchvision": torchvision.__version__, "Pillow (rows P)": PIL.__version__,
           "webdataset": getattr(webdataset, "__version__", "?")}
    if spec.get("verify"):
        out["verify"] = verify_shard(shards[0], spec["verify"])
    return out


def verify_shard(view_shard, check):
    """The view of a shard must list the raw shard's members, each .jpg as .npy holding PIL's decode of it (Image.draft
    at 1/ratio), bit for bit, for its first n images."""
    import io  # noqa: PLC0415
    import tarfile  # noqa: PLC0415
    import numpy as np  # noqa: PLC0415
    vd = load_view_data()
    raw_shard = os.path.join(check["raw_root"], os.path.basename(view_shard))
    with tarfile.open(raw_shard) as raw, tarfile.open(view_shard) as view:
        rm, vm = raw.getmembers(), view.getmembers()
        if [m.name[:-4] + ".npy" if m.name.endswith(".jpg") else m.name for m in rm] != [m.name for m in vm]:
            return f"{view_shard}: other members than {raw_shard}"
        pairs = [(r, v) for r, v in zip(rm, vm) if v.name.endswith(".npy")][:check["n"]]
        for r, v in pairs:
            want = vd.decode_like_libjpeg(raw.extractfile(r).read(), channels=3, ratio=check["ratio"])
            got = np.load(io.BytesIO(view.extractfile(v).read()))
            if got.shape != want.shape or not np.array_equal(got, want):
                return f"{view_shard}: {v.name} differs from PIL's decode of {r.name}"
    return None


def verify(view, check):
    """The view's first n files must hold PIL's decode of their raw JPEGs (Image.draft at 1/ratio), bit for bit."""
    import numpy as np  # noqa: PLC0415
    from torchvision.datasets import DatasetFolder  # noqa: PLC0415
    vd = load_view_data()
    raw = DatasetFolder(check["raw_root"], loader=lambda p: p, extensions=(".jpeg",))
    if [(os.path.relpath(p, view.root), t) for p, t in view.samples] != \
            [(os.path.relpath(p, raw.root) + ".npy", t) for p, t in raw.samples]:
        return f"{view.root}: other files or labels than {raw.root}"
    for (vp, _), (rp, _) in list(zip(view.samples, raw.samples))[:check["n"]]:
        with open(rp, "rb") as f:
            want = vd.decode_like_libjpeg(f.read(), channels=3, ratio=check["ratio"])
        got = np.load(vp)
        if got.shape != want.shape or not np.array_equal(got, want):
            return f"{vp}: differs from PIL's decode of {rp} (shape {got.shape}, PIL {want.shape})"
    return None


def load_view_data():
    """tests/integration/view_data.py, whose decode_like_libjpeg is the tests' PIL reference."""
    import importlib.util  # noqa: PLC0415
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(os.path.dirname(here), "tests", "integration", "view_data.py")
    spec = importlib.util.spec_from_file_location("stoker_view_data", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
