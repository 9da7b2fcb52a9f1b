"""bench/views' PyTorch rows: one epoch of an ImageFolder-style DataLoader, raw JPEGs (PIL decode) or a decoded
view's .npy files, in a worker process of an interpreter that imports torch and torchvision (Debian's python3-torch
and python3-torchvision serve /usr/bin/python3, which need not be the interpreter running the bench).
Every row: DatasetFolder -> Resize(256) -> DataLoader(num_workers=WORKERS, batch_size=BATCH, collate_fn=list: the
images keep their own sizes), shuffle off, iterated to the end; only the iteration is timed (worker start-up
included: a training loop pays it every epoch)."""

import os
import subprocess
import sys
import time

WORKERS = 4
BATCH = 64
RESIZE = 256
PROBE = "import torch, torchvision, numpy, PIL"


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
    """The view's H x W x 3 uint8 array as a C x H x W tensor, resized as PIL's Resize does (antialiased)."""

    def __init__(self, resize):
        self.resize = resize

    def __call__(self, arr):
        import torch  # noqa: PLC0415
        return self.resize(torch.from_numpy(arr).permute(2, 0, 1))


def dataset(kind, root):
    import numpy as np  # noqa: PLC0415
    from torchvision import transforms  # noqa: PLC0415
    from torchvision.datasets import DatasetFolder, ImageFolder  # noqa: PLC0415
    if kind == "raw":  # ImageFolder's own loader: PIL open + convert("RGB"), decoded with PIL's defaults (ISLOW)
        return ImageFolder(root, transform=transforms.Compose([transforms.Resize(RESIZE), transforms.PILToTensor()]))
    return DatasetFolder(root, loader=np.load, extensions=(".npy",),
                         transform=NpyToResized(transforms.Resize(RESIZE, antialias=True)))


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
