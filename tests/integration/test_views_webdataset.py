"""WebDataset shards (.tar) in a decoded view (issue 22 part 2), through a
real mount, read by Python's tarfile and by webdataset (PyPI).

Shards are written by Python's tarfile in its three formats (ustar with a
name split into prefix/name, GNU with long names, pax with long paths),
each sample KEY.jpg or KEY.jpeg (colour at each subsampling, grey,
progressive) with KEY.cls and KEY.json, plus a directory member:
 1. tarfile lists the view's members in the raw order with the same names
    but for KEY.jpg/KEY.jpeg -> KEY.npy, the same mode, owner and mtime;
    every non-image member's bytes are the raw ones; each .npy holds
    Pillow's decode of its JPEG (dct=accurate), grey as H x W x 1; st_size
    from the first stat is the bytes a read returns.
 2. webdataset reads the view with only the image key changed ("npy" for
    "jpg;jpeg"), in this process and through torch's
    DataLoader(num_workers=4), and gets the same keys, classes and arrays as
    decoding the raw shards' JPEGs; ratio=2 gives Pillow's decode at 1/2.
 3. A read of one member decodes that member, not the shard.
 4. Bad members: on_error=skip leaves a JPEG that does not decode out and the
    shard stays a tar; on_error=fail reads its range as EIO; both list it
    in .stoker/errors.
"""

import errno
import io
import json
import os
import sys
import tarfile

import pytest

np = pytest.importorskip("numpy")
pytest.importorskip("PIL")

import stoker_testlib as lib  # noqa: E402
import view_data as vd  # noqa: E402
from test_views import view_args  # noqa: E402
from test_views_pytorch import torch_python  # noqa: E402,F401

CLIENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "webdataset_client.py")
CLIENT_TIMEOUT = 300
FORMATS = {"ustar": tarfile.USTAR_FORMAT, "gnu": tarfile.GNU_FORMAT, "pax": tarfile.PAX_FORMAT}


def samples(shard, count, seed):
    """[(key, ext, jpeg, cls)] for one shard: long keys in the GNU and pax
    shards, a ustar key split into prefix/name, odd sizes, grey and
    progressive JPEGs, one .jpeg."""
    out = []
    for k in range(count):
        i = seed + k
        w, h = 33 + (i * 37) % 150, 21 + (i * 53) % 120
        mode = "L" if i % 5 == 3 else "RGB"
        img = vd.make_image(w, h, mode, seed=300 + i)
        jpeg = vd.jpeg_bytes(img, quality=85, subsampling=i % 3, progressive=i % 4 == 1)
        key = f"{shard}/sample{i:04d}"
        if k == 2:
            key = f"{shard}/" + "deep/" * 24 + f"s{i}"  # ustar: prefix + name
        if k == 4 and shard != "ustar":
            key = f"{shard}/" + "long" * 40 + f"{i}"  # over 100 bytes in one name
        out.append((key, "jpeg" if k == 1 else "jpg", jpeg, i % 7))
    return out


def write_shard(path, fmt, items):
    with tarfile.open(path, "w", format=FORMATS[fmt]) as t:
        d = tarfile.TarInfo(fmt)
        d.type, d.mode, d.mtime = tarfile.DIRTYPE, 0o755, 1700000000
        t.addfile(d)
        for key, ext, jpeg, cls in items:
            meta = json.dumps({"key": key, "ext": ext}).encode()
            for name, data in [(f"{key}.{ext}", jpeg), (f"{key}.cls", str(cls).encode()),
                               (f"{key}.json", meta)]:
                ti = tarfile.TarInfo(name)
                ti.size, ti.mtime, ti.mode = len(data), 1700000000 + len(data), 0o640
                ti.uname, ti.gname, ti.uid, ti.gid = "trainer", "data", 1234, 567
                t.addfile(ti, io.BytesIO(data))


@pytest.fixture
def shards(tmp_path):
    root = tmp_path / "origin"
    (root / "shards").mkdir(parents=True)
    made = {}
    # Four shards: DataLoader's 4 workers take one each.
    for n, fmt in enumerate(["ustar", "gnu", "pax", "pax"]):
        items = samples(fmt, 6, seed=10 * n)
        write_shard(root / "shards" / f"shard-{n:06d}.tar", fmt, items)
        made[f"shard-{n:06d}.tar"] = items
    (root / "shards" / "README.txt").write_text("not a shard\n")
    return root, made


def npy_name(name):
    base, ext = os.path.splitext(name)
    return base + ".npy" if ext in (".jpg", ".jpeg") else name


def test_tarfile_lists_the_same_members_with_images_decoded(mounts, shards):
    root, made = shards
    m = mounts.make(root, args=view_args("acc:dct=accurate"))
    view = m.mnt / ".acc" / "shards"
    assert sorted(os.listdir(view)) == sorted(made)  # README.txt is not in the view
    for name in made:
        size = os.stat(view / name).st_size  # before any read
        data = (view / name).read_bytes()
        assert len(data) == size
        raw = tarfile.open(root / "shards" / name)
        got = tarfile.open(fileobj=io.BytesIO(data))
        rm, gm = raw.getmembers(), got.getmembers()
        assert [npy_name(x.name) for x in rm] == [x.name for x in gm]
        for r, g in zip(rm, gm):
            assert (g.mode, g.uid, g.gid, g.uname, g.gname, g.mtime, g.type) == \
                (r.mode, r.uid, r.gid, r.uname, r.gname, r.mtime, r.type), r.name
            if not r.isfile():
                continue
            body = got.extractfile(g).read()
            assert len(body) == g.size
            if g.name == r.name:
                assert body == raw.extractfile(r).read(), r.name
                continue
            arr = np.load(io.BytesIO(body))
            want = vd.decode_like_libjpeg(raw.extractfile(r).read())
            assert arr.dtype == np.uint8 and arr.shape == want.shape, r.name
            assert np.array_equal(arr, want), r.name
    s = m.stats()
    assert s["view_errors"] == 0 and s["view_records_decoded"] == 4 * 6, s


def run_client(python, raw_dir, view_dir, ratio=1, channels=0, workers=0):
    r = lib.run([python, CLIENT, raw_dir, view_dir, ratio, channels, workers],
                timeout=CLIENT_TIMEOUT)
    assert r.returncode == 0, lib.describe(r)
    return json.loads(r.stdout.strip().splitlines()[-1])


def check_same_samples(out, made):
    want, got = out["want"], out["got"]
    assert len(want) == sum(len(items) for items in made.values())
    assert [w["key"] for w in want] == [key for n in sorted(made) for key, *_ in made[n]]
    # DataLoader's workers interleave their shards: compared as sets of samples.
    assert sorted(got, key=lambda s: s["key"]) == sorted(want, key=lambda s: s["key"])


@pytest.mark.parametrize("view,ratio", [("acc:dct=accurate", 1), ("half:dct=accurate,ratio=2", 2)])
def test_webdataset_reads_the_view_with_only_the_image_key_changed(mounts, shards, view, ratio):
    pytest.importorskip("webdataset")
    root, made = shards
    m = mounts.make(root, args=view_args(view))
    view_dir = m.mnt / ("." + view.split(":")[0]) / "shards"
    out = run_client(sys.executable, root / "shards", view_dir, ratio)
    check_same_samples(out, made)
    assert out["got"] == out["want"]  # one process: the shards' order
    assert m.stats()["view_errors"] == 0


def test_dataloader_over_the_webdataset_view(mounts, shards, torch_python):
    r = lib.run([torch_python, "-c", "import webdataset"], timeout=120)
    if r.returncode != 0:
        pytest.skip(f"{torch_python} has no webdataset (pip install webdataset, as "
                    ".ci/install-deps does)")
    root, made = shards
    m = mounts.make(root, args=view_args("acc:dct=accurate"))
    out = run_client(torch_python, root / "shards", m.mnt / ".acc" / "shards", workers=4)
    check_same_samples(out, made)


def test_a_read_of_one_member_decodes_that_member(mounts, shards):
    root, made = shards
    big = [(f"big/s{i}", "jpg", vd.jpeg_bytes(vd.make_image(700, 500, seed=i)), i)
           for i in range(8)]
    write_shard(root / "shards" / "shard-big.tar", "pax", big)
    # Where s5.npy lies in the view: from a whole read on one mount...
    whole = mounts.make(root, args=view_args("acc:dct=accurate"))
    data = (whole.mnt / ".acc" / "shards" / "shard-big.tar").read_bytes()
    member = tarfile.open(fileobj=io.BytesIO(data)).getmember("big/s5.npy")
    # ...then read alone on another, with a cache of its own.
    m = mounts.make(root, args=view_args("acc:dct=accurate"))
    path = m.mnt / ".acc" / "shards" / "shard-big.tar"
    assert os.stat(path).st_size == len(data)
    assert m.stats()["view_records_decoded"] == 0  # laid out, nothing decoded
    with open(path, "rb") as f:
        f.seek(member.offset_data)
        arr = np.load(io.BytesIO(f.read(member.size)))
    assert np.array_equal(arr, vd.decode_like_libjpeg(big[5][2]))
    # The cache reads whole chunks and a little ahead: a few members, never
    # the whole shard.
    decoded = m.stats()["view_records_decoded"]
    assert 1 <= decoded < len(big), m.stats()


@pytest.fixture
def bad_shards(tmp_path):
    root = tmp_path / "origin"
    (root / "shards").mkdir(parents=True)
    good = vd.jpeg_bytes(vd.make_image(64, 48, seed=1))
    cut = vd.jpeg_bytes(vd.make_image(300, 200, seed=2))
    cut = cut[: len(cut) // 2]  # its header probes; its scan is cut short
    items = [("s0", "jpg", good, 0), ("s1", "jpg", b"\xff\xd8 not a jpeg", 1),
             ("s2", "jpg", cut, 2), ("s3", "jpg", good, 3)]
    write_shard(root / "shards" / "shard-0.tar", "gnu", items)
    return root


def test_on_error_skip_leaves_bad_members_out(mounts, bad_shards):
    m = mounts.make(bad_shards, args=view_args("v:on_error=skip"))
    data = (m.mnt / ".v" / "shards" / "shard-0.tar").read_bytes()
    names = tarfile.open(fileobj=io.BytesIO(data)).getnames()
    assert names == ["gnu", "s0.npy", "s0.cls", "s0.json", "s1.cls", "s1.json", "s2.cls",
                     "s2.json", "s3.npy", "s3.cls", "s3.json"]
    errors = (m.mnt / ".stoker" / "errors").read_text()
    assert "s1.jpg" in errors and "s2.jpg" in errors, errors
    assert m.stats()["view_errors"] == 2


def test_on_error_fail_reads_bad_members_as_eio(mounts, bad_shards):
    m = mounts.make(bad_shards, args=view_args("v"))
    path = m.mnt / ".v" / "shards" / "shard-0.tar"
    with pytest.raises(OSError) as e:
        path.read_bytes()
    assert e.value.errno == errno.EIO
    # Its first member, before the bad ones, reads.
    with open(path, "rb") as f:
        head = f.read(512 * 3)
    assert tarfile.TarInfo.frombuf(head[:512], "utf-8", "surrogateescape").name == "gnu"
    errors = (m.mnt / ".stoker" / "errors").read_text()
    assert "s1.jpg" in errors, errors
    assert m.stats()["view_errors"] >= 1
