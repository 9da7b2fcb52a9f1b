"""Decoded views (--view NAME[:OPTIONS], issue 3) through a real mount.

Numbered scenarios:
 1. .NAME/ mirrors the origin tree: JPEGs as NAME.npy, TFRecords (by
    content) under their name, other files left out; .NAME is not listed in
    the root; sizes from the first stat equal the bytes a read returns.
 2. .npy views: np.load gives libjpeg-turbo's pixels (dct=accurate is what
    Pillow's decoder does), for colour, grayscale and 4:4:4/4:2:2/4:2:0.
 3. TFRecord views: valid framing and CRCs, one record per raw record,
    image/encoded holds the HWC pixels, shape features set, the others kept.
 4. Decoded bytes live in the SSD tier: a second read (page cache dropped)
    decodes nothing; after a remount the layouts come from the index and
    nothing is decoded again. A view remounted under the same name with
    other options (dct) is decoded again, never served the old bytes.
 5. A changed raw file gives a changed view.
 6. Bad input: corrupt records, non-JPEG payloads, truncated JPEGs, huge
    frame headers: on_error=skip leaves them out, on_error=fail reads EIO;
    each is counted and listed in .stoker/errors; the daemon stays up.
 7. Bad --view arguments and name collisions are refused at mount.
 8. A dead origin: view files read before are still served from the cache.
"""

import errno
import io
import os
import re
import signal

import pytest

np = pytest.importorskip("numpy")
pytest.importorskip("PIL")

import stoker_testlib as lib  # noqa: E402
import view_data as vd  # noqa: E402

# The CPU decoder: these tests compare with libjpeg-turbo bit for bit, and on a
# GPU host --decoder=auto (the default) would give the views nvJPEG's pixels.
ARGS = ["--chunk-size", "64K", "--cache-size", "256M", "--decoder", "cpu"]


def view_args(*views, extra=()):
    out = list(ARGS) + list(extra)
    for v in views:
        out += ["--view", v]
    return out


def images():
    """name -> (jpeg bytes, channels of the decoded image)."""
    out = {}
    specs = [("rgb420", 120, 90, "RGB", 2), ("rgb422", 97, 61, "RGB", 1),
             ("rgb444", 64, 64, "RGB", 0), ("gray", 81, 47, "L", 0),
             ("big", 640, 480, "RGB", 2)]
    for i, (name, w, h, mode, sub) in enumerate(specs):
        img = vd.make_image(w, h, mode, seed=i)
        out[name + ".jpg"] = vd.jpeg_bytes(img, quality=90, subsampling=sub)
    return out


def make_shard(path, jpegs):
    payloads = []
    for label, (name, jpeg) in enumerate(sorted(jpegs.items())):
        from PIL import Image
        w, h = Image.open(io.BytesIO(jpeg)).size
        payloads.append(vd.imagenet_example(jpeg, label, w, h, name))
    vd.write_tfrecord(path, payloads)
    return payloads


@pytest.fixture
def origin(tmp_path):
    root = tmp_path / "origin"
    (root / "train" / "sub").mkdir(parents=True)
    jpegs = images()
    for name, data in jpegs.items():
        (root / "train" / name).write_bytes(data)
    make_shard(root / "train" / "shard-00000-of-00002", jpegs)
    make_shard(root / "train" / "sub" / "shard-00001-of-00002",
               {k: v for k, v in jpegs.items() if k != "big.jpg"})
    (root / "train" / "README.txt").write_text("not a view file\n")
    (root / "train" / "labels.csv").write_bytes(b"a,b\n" * 100)
    os.symlink("README.txt", root / "train" / "link")
    return root, jpegs


def listdir(path):
    return sorted(lib.with_deadline(os.listdir, path, what=f"listdir {path}"))


def read(path):
    return lib.with_deadline(lib.read_file, path, what=f"read {path}")


def check_sizes(root):
    """Every view file's st_size (first stat) equals what a read returns."""
    n = 0
    for dirpath, _, files in lib.with_deadline(lambda: list(os.walk(root)), what="walk"):
        for f in files:
            p = os.path.join(dirpath, f)
            size = os.stat(p).st_size
            data = read(p)
            assert len(data) == size, p
            n += 1
    return n


def view_records(data):
    return [vd.decode_example(p) for p in vd.read_tfrecords(data)]


# 1 ------------------------------------------------------------------------


def test_view_mirrors_tree_with_exact_sizes(mounts, origin):
    root, jpegs = origin
    m = mounts.make(root, args=view_args("decoded"))
    view = m.mnt / ".decoded"
    assert ".decoded" not in listdir(m.mnt)
    assert listdir(view) == ["train"]
    want = sorted([n + ".npy" for n in jpegs] + ["shard-00000-of-00002", "sub"])
    assert listdir(view / "train") == want
    assert listdir(view / "train" / "sub") == ["shard-00001-of-00002"]
    # ls -l before anything is read: exact sizes.
    big = os.stat(view / "train" / "big.jpg.npy")
    assert big.st_size == 128 + 640 * 480 * 3
    for name in ("README.txt", "labels.csv", "link", "big.jpg"):
        assert not os.path.exists(view / "train" / name)
    assert check_sizes(view) == len(jpegs) + 2
    # The raw tree is untouched; view files are no hard links of raw files.
    assert read(m.mnt / "train" / "big.jpg") == jpegs["big.jpg"]
    raw_inos = {os.stat(m.mnt / "train" / n).st_ino for n in jpegs}
    view_inos = {os.stat(view / "train" / (n + ".npy")).st_ino for n in jpegs}
    assert len(view_inos) == len(jpegs) and not raw_inos & view_inos
    assert os.stat(view / "train").st_ino != os.stat(m.mnt / "train").st_ino
    assert read(m.mnt / ".stoker" / "errors") == b""
    s = m.stats()
    assert s["views"] == ["decoded"]
    assert s["view_errors"] == 0
    assert s["view_layouts_computed"] == len(jpegs) + 2


# 2 ------------------------------------------------------------------------


def test_npy_views_equal_libjpeg_pixels(mounts, origin):
    root, jpegs = origin
    m = mounts.make(root, args=view_args("acc:dct=accurate", "gray:channels=1,dct=accurate",
                                         "fast"))
    for name, jpeg in jpegs.items():
        want = vd.decode_like_libjpeg(jpeg)
        got = np.load(io.BytesIO(read(m.mnt / ".acc" / "train" / (name + ".npy"))))
        assert got.dtype == np.uint8 and got.shape == want.shape, name
        assert np.array_equal(got, want), name
        gray = np.load(io.BytesIO(read(m.mnt / ".gray" / "train" / (name + ".npy"))))
        assert gray.shape == want.shape[:2] + (1,)
        if want.shape[2] == 1:
            assert np.array_equal(gray, want), name
        # The fast DCT: same shape, pixels within a few levels of accurate.
        fast = np.load(io.BytesIO(read(m.mnt / ".fast" / "train" / (name + ".npy"))))
        assert fast.shape == want.shape
        assert np.abs(fast.astype(int) - want.astype(int)).mean() < 2.0, name
    s = m.stats()
    assert s["view_images_decoded"] == 3 * len(jpegs)


# 3 ------------------------------------------------------------------------


def test_tfrecord_view_records(mounts, origin):
    root, jpegs = origin
    m = mounts.make(root, args=view_args("decoded:dct=accurate"))
    raw = read(root / "train" / "shard-00000-of-00002")
    raw_records = [vd.decode_example(p) for p in vd.read_tfrecords(raw)]
    got = view_records(read(m.mnt / ".decoded" / "train" / "shard-00000-of-00002"))
    assert len(got) == len(raw_records) == len(jpegs)
    for r, v in zip(raw_records, got):
        jpeg = r["image/encoded"][0]
        want = vd.decode_like_libjpeg(jpeg)
        h, w, c = want.shape
        assert v["image/height"] == [h] and v["image/width"] == [w]
        assert v["image/channels"] == [c]
        pixels = np.frombuffer(v["image/encoded"][0], np.uint8)
        assert pixels.size == h * w * c
        assert np.array_equal(pixels.reshape(h, w, c), want), r["image/filename"]
        for key in ("image/class/label", "image/format", "image/filename",
                    "image/class/synset", "image/colorspace"):
            assert v[key] == r[key], key
    # Ranges: any slice equals the same slice of the whole file.
    path = m.mnt / ".decoded" / "train" / "shard-00000-of-00002"
    whole = read(path)
    fd = os.open(path, os.O_RDONLY)
    try:
        for off, n in [(0, 10), (5, 70000), (len(whole) - 3, 100), (65530, 12),
                       (len(whole) // 2, 200000)]:
            assert os.pread(fd, n, off) == whole[off:off + n], (off, n)
    finally:
        os.close(fd)


# 4 ------------------------------------------------------------------------


def test_decoded_bytes_cached_and_survive_remount(mounts, origin):
    root, jpegs = origin
    # No directory prefetch: where the listing has the shard right after
    # big.jpg, it would decode other files of the view.
    m = mounts.make(root, args=view_args("decoded", extra=["--prefetch-files", "0"]))
    files = [m.mnt / ".decoded" / "train" / "shard-00000-of-00002",
             m.mnt / ".decoded" / "train" / "big.jpg.npy"]
    first = [read(p) for p in files]
    s1 = m.stats()
    assert s1["view_records_decoded"] == len(jpegs)
    assert s1["view_images_decoded"] == 1
    # Origin traffic is raw bytes only, each read once; what the views made
    # went into the cache and is counted apart.
    raw = sum(os.path.getsize(root / "train" / n) for n in ("shard-00000-of-00002", "big.jpg"))
    assert 0 < s1["origin_bytes_read"] <= raw, (s1["origin_bytes_read"], raw)
    assert s1["derived_bytes_produced"] >= sum(len(d) for d in first)
    lib.drop_caches(files)
    assert [read(p) for p in files] == first
    s2 = m.stats()
    assert s2["view_records_decoded"] == s1["view_records_decoded"]
    assert s2["view_images_decoded"] == s1["view_images_decoded"]
    assert s1["view_raw_bytes_read"] > 0
    assert s2["view_raw_bytes_read"] == s1["view_raw_bytes_read"]  # raw not read again
    # The shard is held whole now: the kernel reads it from the cache.
    hits = s2["cache_hit_bytes"] + s2["passthrough_bytes"]
    assert hits - s1["cache_hit_bytes"] - s1["passthrough_bytes"] >= sum(len(d) for d in first)
    assert s2["passthrough_opens"] >= 1
    m.unmount()

    m2 = mounts.make(root, cache=m.cache,
                     args=view_args("decoded", extra=["--prefetch-files", "0"]))
    files2 = [m2.mnt / f.relative_to(m.mnt) for f in files]
    assert [os.stat(p).st_size for p in files2] == [len(d) for d in first]
    assert [read(p) for p in files2] == first
    s3 = m2.stats()
    assert s3["view_records_decoded"] == 0 and s3["view_images_decoded"] == 0
    assert s3["view_layouts_computed"] == 0 and s3["view_layouts_loaded"] == 2
    r = lib.stoker("stat", m2.mnt)
    assert r.returncode == 0, lib.describe(r)
    assert "view records" in r.stdout and "decode queue" in r.stdout


def test_a_view_remounted_with_other_options_is_decoded_again(mounts, origin):
    """dct=fast and dct=accurate give files of the same size, with the raw
    file's times: only the options tell them apart (bug: the remount served
    the fast decode's cached bytes as the accurate one's)."""
    root, jpegs = origin
    names = ["train/big.jpg.npy", "train/shard-00000-of-00002"]
    # No directory prefetch: it would decode other files of the view.
    no_prefetch = ["--prefetch-files", "0"]
    m = mounts.make(root, args=view_args("d", extra=no_prefetch))
    fast = [read(m.mnt / ".d" / n) for n in names]
    m.unmount()
    m = mounts.make(root, cache=m.cache, args=view_args("d:dct=accurate", extra=no_prefetch))
    accurate = [read(m.mnt / ".d" / n) for n in names]
    assert [len(b) for b in accurate] == [len(b) for b in fast]
    assert accurate[0] != fast[0] and accurate[1] != fast[1]
    got = np.load(io.BytesIO(accurate[0]))
    assert np.array_equal(got, vd.decode_like_libjpeg(jpegs["big.jpg"]))
    s = m.stats()
    assert s["view_images_decoded"] == 1 and s["view_records_decoded"] == len(jpegs), s
    m.unmount()
    # Back to the first options: their bytes are still right.
    m = mounts.make(root, cache=m.cache, args=view_args("d", extra=no_prefetch))
    assert [read(m.mnt / ".d" / n) for n in names] == fast


# 5 ------------------------------------------------------------------------


def test_raw_change_changes_view(mounts, origin):
    root, jpegs = origin
    m = mounts.make(root, args=view_args("decoded", extra=["--revalidate", "0"]))
    shard = root / "train" / "shard-00000-of-00002"
    view = m.mnt / ".decoded" / "train" / "shard-00000-of-00002"
    before = view_records(read(view))
    assert len(before) == len(jpegs)
    small = {k: v for k, v in jpegs.items() if k in ("gray.jpg", "rgb444.jpg")}
    make_shard(str(shard) + ".new", small)
    os.replace(str(shard) + ".new", shard)
    after_size = os.stat(view).st_size
    after = view_records(read(view))
    assert len(after) == 2 and len(read(view)) == after_size
    labels = sorted(r["image/filename"][0] for r in after)
    assert labels == [b"gray.jpg", b"rgb444.jpg"]


# 6 ------------------------------------------------------------------------


def huge_jpeg(jpeg):
    """The same JPEG with its frame header claiming 65535x65535."""
    b = bytearray(jpeg)
    i = 2
    while i < len(b):
        marker = b[i + 1]
        seg = int.from_bytes(b[i + 2:i + 4], "big")
        if marker in (0xC0, 0xC1, 0xC2):
            b[i + 5:i + 9] = b"\xff\xff\xff\xff"
            return bytes(b)
        i += 2 + seg
    raise AssertionError("no SOF")


@pytest.fixture
def bad_origin(tmp_path):
    root = tmp_path / "bad"
    root.mkdir()
    jpegs = images()
    good = jpegs["rgb420.jpg"]
    payloads = [vd.imagenet_example(good, 0, 120, 90, "good0"),
                vd.imagenet_example(b"\x89PNG\r\n\x1a\n not a jpeg", 1, 1, 1, "png"),
                vd.imagenet_example(good, 2, 120, 90, "badcrc"),
                vd.imagenet_example(huge_jpeg(good), 3, 65535, 65535, "huge"),
                b"\x0a\x05garbage-not-an-example",
                vd.imagenet_example(jpegs["gray.jpg"], 5, 81, 47, "good5")]
    data = bytearray()
    offsets = []
    for p in payloads:
        offsets.append(len(data))
        data += vd.tfrecord_frame(p)
    # Corrupt the payload CRC of record 2 (framing stays intact).
    end2 = offsets[3]
    data[end2 - 1] ^= 0xFF
    (root / "shard").write_bytes(bytes(data))
    (root / "truncated.jpg").write_bytes(good[:40])
    (root / "huge.jpg").write_bytes(huge_jpeg(good))
    (root / "ok.jpg").write_bytes(good)
    return root, offsets


def test_on_error_skip(mounts, bad_origin):
    root, offsets = bad_origin
    m = mounts.make(root, args=view_args("decoded:on_error=skip"))
    view = m.mnt / ".decoded"
    assert listdir(view) == ["ok.jpg.npy", "shard"]
    recs = view_records(read(view / "shard"))
    assert [r["image/filename"] for r in recs] == [[b"good0"], [b"good5"]]
    assert check_sizes(view) == 2
    errors = read(m.mnt / ".stoker" / "errors").decode()
    for off in offsets[1:5]:
        assert f".decoded/shard: offset {off}:" in errors, errors
    s = m.stats()
    assert s["view_errors"] >= 4
    assert lib.pid_alive(m.pid)


def test_on_error_fail(mounts, bad_origin):
    root, offsets = bad_origin
    m = mounts.make(root, args=view_args("decoded:on_error=fail"))
    view = m.mnt / ".decoded"
    assert listdir(view) == ["huge.jpg.npy", "ok.jpg.npy", "shard", "truncated.jpg.npy"]
    for name in ("huge.jpg.npy", "truncated.jpg.npy", "shard"):
        with pytest.raises(OSError) as e:
            read(view / name)
        assert e.value.errno == errno.EIO, name
    ok = np.load(io.BytesIO(read(view / "ok.jpg.npy")))
    assert ok.shape == (90, 120, 3)
    # The good record before the bad ones stays readable (pages that do not
    # touch a bad record); reading on into the bad one is EIO.
    fd = os.open(view / "shard", os.O_RDONLY)
    try:
        head = lib.with_deadline(os.pread, fd, 4096, 0)
        (length,) = __import__("struct").unpack("<Q", head[:8])
        frame0 = length + 16
        assert frame0 > 4096
        body = lib.with_deadline(os.pread, fd, (frame0 // 4096) * 4096, 0)
        assert len(body) == (frame0 // 4096) * 4096 and body[:4096] == head
        with pytest.raises(OSError) as e:
            lib.with_deadline(os.pread, fd, 100000, frame0 - 8)
        assert e.value.errno == errno.EIO
    finally:
        os.close(fd)
    errors = read(m.mnt / ".stoker" / "errors").decode()
    assert ".decoded/huge.jpg.npy: offset 0:" in errors
    assert ".decoded/truncated.jpg.npy: offset 0:" in errors
    for off in offsets[1:5]:
        assert f".decoded/shard: offset {off}:" in errors, errors
    s = m.stats()
    assert s["view_failed_reads"] >= 3
    assert lib.pid_alive(m.pid)

    # The list outlives the daemon: a remount lists it before anything is
    # read, and counts it.
    m.unmount()
    m.mount()
    assert read(m.mnt / ".stoker" / "errors").decode() == errors
    assert m.stats()["view_errors"] == len(errors.splitlines()), m.stats()
    # A raw file laid out anew (fixed at the origin) loses its old lines.
    m.unmount()
    (root / "shard").write_bytes((root / "shard").read_bytes()[:offsets[1]])
    m = mounts.make(root, cache=m.cache,
                    args=view_args("decoded:on_error=fail") + ["--revalidate", "0"])
    assert len(view_records(read(m.mnt / ".decoded" / "shard"))) == 1
    after = read(m.mnt / ".stoker" / "errors").decode()
    assert ".decoded/shard:" not in after, after
    assert ".decoded/huge.jpg.npy: offset 0:" in after


# 7 ------------------------------------------------------------------------


@pytest.mark.parametrize("spec,message", [
    ("x:channels=2", "channels"),
    ("x:dct=slow", "dct"),
    ("x:ratio=3", "view option ratio: '3' is not 1, 2, 4 or 8"),
    ("x:max_side=0", "view option max_side: '0' is not a positive number"),
    ("x:ratio=2,max_side=64", "ratio=2 and max_side=64 exclude each other"),
    ("x:ratio=2,decoder=gpu", "decoder=gpu: ratio= needs DCT scaling"),
    ("x:on_error=maybe", "on_error"),
    ("x:colour=3", "unknown view option"),
    ("x:channels", "key=value"),
    ("a/b", "plain file name"),
    ("stoker", ".stoker"),
])
def test_bad_view_option_refused(tmp_path, stoker_bin, spec, message):
    (tmp_path / "o").mkdir()
    (tmp_path / "m").mkdir()
    r = lib.mount_cmd_fails(tmp_path / "o", tmp_path / "m", tmp_path / "c", "--view", spec)
    assert r.returncode == 2, lib.describe(r)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], r.stderr
    assert not lib.is_mounted(tmp_path / "m")


def test_duplicate_view_refused(tmp_path, stoker_bin):
    (tmp_path / "o").mkdir()
    (tmp_path / "m").mkdir()
    r = lib.mount_cmd_fails(tmp_path / "o", tmp_path / "m", tmp_path / "c",
                            "--view", "d", "--view", "d:dct=accurate")
    assert r.returncode == 2 and "twice" in r.stderr, lib.describe(r)


def test_view_name_colliding_with_origin_refused(tmp_path, stoker_bin):
    (tmp_path / "o" / ".decoded").mkdir(parents=True)
    (tmp_path / "m").mkdir()
    r = lib.mount_cmd_fails(tmp_path / "o", tmp_path / "m", tmp_path / "c",
                            "--view", "decoded")
    assert r.returncode == 1, lib.describe(r)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and ".decoded" in lines[0], r.stderr
    assert not lib.is_mounted(tmp_path / "m")


# 8 ------------------------------------------------------------------------


def big_origin(root, shards=2, per_shard=12, seed=0):
    (root / "train").mkdir(parents=True)
    for s in range(shards):
        jpegs = {}
        for i in range(per_shard):
            img = vd.make_image(320 + 16 * i, 240 + 8 * i, "RGB", seed=seed + 100 * s + i)
            jpegs[f"s{s}_{i:03d}.jpg"] = vd.jpeg_bytes(img, quality=85, subsampling=i % 3)
        make_shard(root / "train" / f"shard-{s:05d}", jpegs)
        if s == 0:
            for name, data in list(jpegs.items())[:4]:
                (root / "train" / name).write_bytes(data)
    return root


def view_files(mnt):
    out = []
    for dirpath, _, files in lib.with_deadline(lambda: list(os.walk(mnt / ".decoded")),
                                               what="walk view"):
        out += [os.path.join(dirpath, f) for f in sorted(files)]
    return sorted(out)


def test_warm_decodes_in_background(mounts, tmp_path):
    root = big_origin(tmp_path / "origin")
    m = mounts.make(root, args=view_args("decoded"))
    r = lib.stoker("warm", "--view", "decoded", "--wait", m.mnt / "train", timeout=120)
    assert r.returncode == 0, lib.describe(r)
    n_files = 2 + 4
    # Issue 30: "0%  2/2 files  0 B of 0 B": the view's bytes count, as made.
    last = r.stdout.strip().splitlines()[-1]
    done = re.search(r"100%  (\d+)/(\d+) files  (\S+ \S+) of (\S+ \S+)  ", last)
    assert done and done.group(1) == done.group(2) == str(n_files), last
    assert done.group(3) == done.group(4) != "0 B", last
    s = lib.wait_until(
        lambda: (lambda st: st if st.get("warm_files_done", -1) >= n_files else None)(m.stats()),
        120, interval=0.2, what=f"warm_files_done == {n_files}")
    assert s["view_records_decoded"] >= 24 and s["view_images_decoded"] >= 4, s
    assert s["decode_jobs_raised"] >= 0, s  # warm work raised for readers waiting on it
    before = m.stats()
    for p in view_files(m.mnt):
        assert len(read(p)) == os.stat(p).st_size
    after = m.stats()
    assert after["view_records_decoded"] == before["view_records_decoded"]
    assert after["view_images_decoded"] == before["view_images_decoded"]
    # A file of the raw tree given with --view: its view counterpart.
    r = lib.stoker("warm", "--view", "decoded", m.mnt / "train" / "s0_000.jpg")
    assert r.returncode == 0, lib.describe(r)
    r = lib.stoker("warm", "--view", "nosuch", m.mnt / "train")
    assert r.returncode == 1 and "no view 'nosuch'" in r.stderr, lib.describe(r)


# 9 ------------------------------------------------------------------------


def test_kill9_while_decoding_then_fsck_and_remount(mounts, tmp_path):
    import hashlib
    import signal
    root = big_origin(tmp_path / "origin", shards=3, per_shard=10, seed=7)
    m = mounts.make(root, args=view_args("decoded", extra=["--no-supervise"]))
    r = lib.stoker("warm", "--view", "decoded", m.mnt)
    assert r.returncode == 0, lib.describe(r)
    lib.wait_until(lambda: m.stats()["view_records_decoded"] > 0, 120, interval=0.02,
                   what="decoding under way")
    os.kill(m.pid, signal.SIGKILL)
    lib.wait_until(lambda: not lib.pid_alive(m.pid), 30, what="daemon death")

    r = lib.fsck(m.cache)
    assert r.returncode in (0, 1), "fsck after kill -9:\n" + lib.describe(r)
    if r.returncode == 1:
        rr = lib.fsck(m.cache, "--repair")
        assert rr.returncode in (0, 1), lib.describe(rr)
        r = lib.fsck(m.cache)
    assert r.returncode == 0, "fsck not clean after --repair:\n" + lib.describe(r)

    m2 = mounts.make(root, mnt=m.mnt, cache=m.cache, args=view_args("decoded"))
    got = {os.path.relpath(p, m2.mnt): hashlib.sha256(read(p)).hexdigest()
           for p in view_files(m2.mnt)}
    ref = mounts.make(root, args=view_args("decoded"))
    want = {os.path.relpath(p, ref.mnt): hashlib.sha256(read(p)).hexdigest()
            for p in view_files(ref.mnt)}
    assert got == want and len(got) == 3 + 4
    m2.unmount()
    r = lib.fsck(m.cache)
    assert r.returncode == 0, lib.describe(r)


# 10 -----------------------------------------------------------------------


def test_concurrent_readers_of_one_view_file(mounts, tmp_path):
    import random
    import threading
    root = big_origin(tmp_path / "origin", shards=1, per_shard=16, seed=3)
    m = mounts.make(root, args=view_args("decoded"))
    path = m.mnt / ".decoded" / "train" / "shard-00000"
    ref = mounts.make(root, args=view_args("decoded"))
    whole = read(ref.mnt / ".decoded" / "train" / "shard-00000")
    assert os.stat(path).st_size == len(whole)
    failures = []

    def reader(seed):
        rng = random.Random(seed)
        fd = os.open(path, os.O_RDONLY)
        try:
            for _ in range(40):
                off = rng.randrange(len(whole))
                n = rng.randrange(1, 300000)
                if os.pread(fd, n, off) != whole[off:off + n]:
                    failures.append((off, n))
        finally:
            os.close(fd)

    threads = [threading.Thread(target=reader, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(lib.IO_TIMEOUT)
    assert not any(t.is_alive() for t in threads), "readers hung"
    assert not failures, failures[:5]
    # Each record decoded about once however many readers wanted it.
    assert m.stats()["view_records_decoded"] <= 3 * 16


def test_sequential_read_decodes_each_record_about_once(mounts, tmp_path):
    """Prefetch produces neighbouring chunks of a view at once, and records
    straddle chunk boundaries: each is still decoded once (not once per
    chunk), and the raw shard is read from the origin once."""
    per_shard = 48
    root = big_origin(tmp_path / "origin", shards=1, per_shard=per_shard, seed=5)
    m = mounts.make(root, args=view_args("decoded"))
    path = m.mnt / ".decoded" / "train" / "shard-00000"
    assert os.stat(path).st_size > 8 * lib.MIB  # many chunks, many straddling records
    data = read(path)
    assert len(data) == os.stat(path).st_size
    s = m.stats()
    # A few may be decoded again after leaving the small set kept between
    # reads; once per chunk they straddle would be ~30% more.
    assert per_shard <= s["view_records_decoded"] <= per_shard + per_shard // 10, s
    raw = os.path.getsize(root / "train" / "shard-00000")
    assert s["origin_bytes_read"] <= raw, (s["origin_bytes_read"], raw)


# 11 -----------------------------------------------------------------------


def test_views_stay_within_the_cache_bound(mounts, tmp_path):
    root = big_origin(tmp_path / "origin", shards=2, per_shard=12, seed=11)
    cap = 4 * lib.MIB
    m = mounts.make(root, args=["--chunk-size", "64K", "--cache-size", str(cap),
                                "--view", "decoded"])
    ref = mounts.make(root, args=view_args("decoded"))
    for _ in range(2):
        for p in view_files(ref.mnt):
            rel = os.path.relpath(p, ref.mnt)
            assert read(m.mnt / rel) == read(p), rel
        s = m.stats()
        assert s["cache_used_bytes"] <= cap, s
    assert lib.allocated_bytes(m.cache, include=["data", "index"]) <= cap


# 12 -----------------------------------------------------------------------


def test_unmount_while_decoding_is_clean(mounts, tmp_path):
    root = big_origin(tmp_path / "origin", shards=3, per_shard=12, seed=5)
    m = mounts.make(root, args=view_args("decoded"))
    r = lib.stoker("warm", "--view", "decoded", m.mnt)
    assert r.returncode == 0, lib.describe(r)
    lib.wait_until(lambda: m.stats()["view_records_decoded"] > 0, 120, interval=0.02,
                   what="decoding under way")
    m.unmount()
    r = lib.fsck(m.cache)
    assert r.returncode == 0, lib.describe(r)
    m2 = mounts.make(root, mnt=m.mnt, cache=m.cache, args=view_args("decoded"))
    assert check_sizes(m2.mnt / ".decoded") == 3 + 4


# 13 -----------------------------------------------------------------------


def hostile_origin(root, seed):
    """Files the views must survive: truncated and corrupt JPEGs,
    progressive, CMYK, garbage after an SOI marker, TFRecords with broken
    framing, lengths past the end, non-Example payloads and features of the
    wrong type."""
    import random
    import struct
    rng = random.Random(seed)
    root.mkdir(parents=True)
    img = vd.make_image(160, 120, "RGB", seed=seed)
    good = vd.jpeg_bytes(img)
    prog = vd.jpeg_bytes(img, progressive=True)
    buf = io.BytesIO()
    img.convert("CMYK").save(buf, "JPEG")
    cmyk = buf.getvalue()
    files = {"good.jpg": good, "progressive.jpg": prog, "cmyk.jpg": cmyk,
             "soi-garbage.jpg": b"\xff\xd8\xff" + rng.randbytes(3000),
             "huge.jpg": huge_jpeg(good)}
    for cut in (3, 20, len(good) // 3, len(good) - 10):
        files[f"cut{cut}.jpg"] = good[:cut]
    scrambled = bytearray(good)
    for _ in range(30):
        scrambled[rng.randrange(len(good) // 2, len(good) - 2)] = rng.randrange(256)
    files["scrambled.jpg"] = bytes(scrambled)
    ex = vd.imagenet_example(good, 1, 160, 120, "g")
    wrong_type = vd.encode_example({"image/encoded": 7, "image/class/label": 1})
    files["mixed.tfrecord"] = b"".join(vd.tfrecord_frame(p) for p in [
        ex, wrong_type, vd.imagenet_example(good[: len(good) // 2], 2, 160, 120, "half"),
        vd.imagenet_example(cmyk, 3, 160, 120, "cmyk"), rng.randbytes(500), ex])
    frame = vd.tfrecord_frame(ex)
    files["truncated.tfrecord"] = frame + frame[: len(frame) // 2]
    length = struct.pack("<Q", 1 << 40)
    files["past-end.tfrecord"] = frame + length + struct.pack("<I", vd.masked_crc(length)) + \
        b"x" * 100
    for name, data in files.items():
        (root / name).write_bytes(data)
    return files


@pytest.mark.parametrize("on_error", ["skip", "fail"])
def test_hostile_inputs_never_crash_or_lie(mounts, tmp_path, on_error):
    hostile = hostile_origin(tmp_path / "origin", seed=42)
    m = mounts.make(tmp_path / "origin", args=view_args(f"decoded:on_error={on_error}"))
    view = m.mnt / ".decoded"
    names = listdir(view)  # the first listing of a fresh mount
    assert "good.jpg.npy" in names and "mixed.tfrecord" in names
    cut = sorted(f"{n}.npy" for n in hostile if n.startswith("cut"))
    if on_error == "skip":
        # Left out from the first listing, those whose header is fine and
        # whose scan is cut short too: a listed name must stat (glob, then
        # np.load), and these never will.
        assert not set(cut) & set(names), names
        for name in cut:
            with pytest.raises(FileNotFoundError):
                os.stat(view / name)
    else:
        assert set(cut) <= set(names), names  # listed by their heads, read as EIO
    read_ok = 0
    for name in names:
        p = view / name
        size = os.stat(p).st_size  # every name listed stats, under skip too
        try:
            data = read(p)
        except OSError as e:
            assert e.errno == errno.EIO, (name, e)
            continue
        assert len(data) == size, name
        read_ok += 1
        if name.endswith(".npy"):
            arr = np.load(io.BytesIO(data))
            assert arr.dtype == np.uint8 and arr.ndim == 3
        else:
            vd.read_tfrecords(data)  # framing and CRCs hold
    assert read_ok >= 2
    assert lib.pid_alive(m.pid)
    s = m.stats()
    assert s["view_errors"] >= 5, s
    errors = read(m.mnt / ".stoker" / "errors").decode()
    assert "mixed.tfrecord" in errors and "huge.jpg.npy" in errors, errors
    # The daemon still serves the raw tree and good view files.
    good = np.load(io.BytesIO(read(view / "good.jpg.npy")))
    assert good.shape == (120, 160, 3)


# 8 ------------------------------------------------------------------------


def test_cached_view_is_served_while_the_origin_is_dead(mounts, origin):
    """8. A view file read once is served from the SSD tier when the origin
    dies: stat and read give the same bytes; a view file never looked at
    fails with EIO, not a hang; the daemon stays up. The origin is a NAS
    whose server is gone: another stoker mount, killed (ENOTCONN for every
    call, as a dead sshfs or FUSE NAS client gives)."""
    root, jpegs = origin
    nas = mounts.make(root, args=ARGS + ["--no-supervise"])  # killed to die for good
    m = mounts.make(nas.mnt, args=view_args("decoded", extra=["--revalidate", "0"]))
    view = m.mnt / ".decoded" / "train"
    cached = {name: read(view / name) for name in ("shard-00000-of-00002", "big.jpg.npy")}
    os.kill(nas.pid, signal.SIGKILL)  # SIGTERM would unmount it cleanly: not dead, empty
    lib.wait_until(lambda: not lib.pid_alive(nas.pid), lib.EXIT_TIMEOUT, what="NAS daemon exit")
    assert lib.is_mounted(nas.mnt), "the dead NAS stays mounted (ENOTCONN)"
    lib.drop_caches([view / n for n in cached], system=False)
    for name, data in cached.items():
        assert os.stat(view / name).st_size == len(data), name
        assert read(view / name) == data, name
    with pytest.raises(OSError) as e:
        read(view / "sub" / "shard-00001-of-00002")
    assert e.value.errno in (errno.EIO, errno.ENOTCONN)
    assert m.stats()["origin_errors"] > 0
    m.unmount()
