"""Test data for decoded views: JPEGs made with Pillow (Debian's
libjpeg-turbo), TFRecord files shaped like the ImageNet ones, and readers
for what a view returns (TFRecord framing with masked CRC-32C, tf.train.Example
protobufs, .npy), written here so that the tests need no TensorFlow."""

import gzip
import io
import struct
import zlib

import numpy as np
from PIL import Image

# --- CRC-32C and TFRecord framing -------------------------------------------

_CRC_TABLE = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _CRC_TABLE.append(_c)


def crc32c(data):
    crc = 0xFFFFFFFF
    table = _CRC_TABLE
    for b in bytes(data):
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc(data):
    c = crc32c(data)
    return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def tfrecord_frame(payload):
    length = struct.pack("<Q", len(payload))
    return (length + struct.pack("<I", masked_crc(length)) + payload +
            struct.pack("<I", masked_crc(payload)))


def read_tfrecords(data):
    """The payloads of a TFRecord file, checking lengths and both CRCs."""
    out = []
    pos = 0
    while pos < len(data):
        assert pos + 12 <= len(data), f"truncated header at {pos}"
        length_bytes = data[pos:pos + 8]
        (length,) = struct.unpack("<Q", length_bytes)
        (lcrc,) = struct.unpack("<I", data[pos + 8:pos + 12])
        assert lcrc == masked_crc(length_bytes), f"bad length crc at {pos}"
        end = pos + 12 + length + 4
        assert end <= len(data), f"record at {pos} runs past the end"
        payload = data[pos + 12:pos + 12 + length]
        (dcrc,) = struct.unpack("<I", data[end - 4:end])
        assert dcrc == masked_crc(payload), f"bad data crc at {pos}"
        out.append(payload)
        pos = end
    return out


# --- protobuf (tf.train.Example) ---------------------------------------------


def _varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field(num, wire, payload):
    return _varint((num << 3) | wire) + payload


def _ld(num, data):
    return _field(num, 2, _varint(len(data)) + data)


def encode_example(features):
    """features: name -> bytes | int | [int] | float."""
    entries = b""
    for name in sorted(features):
        v = features[name]
        if isinstance(v, bytes):
            feature = _ld(1, _ld(1, v))  # bytes_list
        elif isinstance(v, float):
            feature = _ld(2, _ld(1, struct.pack("<f", v)))  # float_list, packed
        else:
            vals = v if isinstance(v, list) else [v]
            packed = b"".join(_varint(x & 0xFFFFFFFFFFFFFFFF) for x in vals)
            feature = _ld(3, _ld(1, packed))  # int64_list, packed
        entries += _ld(1, _ld(1, name.encode()) + _ld(2, feature))
    return _ld(1, entries)


def _read_varint(buf, pos):
    v = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return v, pos


def _fields(buf):
    pos = 0
    while pos < len(buf):
        key, pos = _read_varint(buf, pos)
        num, wire = key >> 3, key & 7
        if wire == 0:
            v, pos = _read_varint(buf, pos)
        elif wire == 2:
            n, pos = _read_varint(buf, pos)
            v = buf[pos:pos + n]
            pos += n
        elif wire == 5:
            v = buf[pos:pos + 4]
            pos += 4
        elif wire == 1:
            v = buf[pos:pos + 8]
            pos += 8
        else:
            raise AssertionError(f"wire type {wire}")
        yield num, wire, v


def decode_example(payload):
    """name -> list of bytes (bytes_list) or list of int (int64_list)."""
    out = {}
    for num, _, features in _fields(payload):
        assert num == 1
        for fnum, _, entry in _fields(features):
            assert fnum == 1
            name, value = None, b""
            for enum, _, ev in _fields(entry):
                if enum == 1:
                    name = bytes(ev).decode()
                elif enum == 2:
                    value = ev
            vals = []
            for knum, _, lst in _fields(value):
                for lnum, lwire, item in _fields(lst):
                    if knum == 1:
                        vals.append(bytes(item))
                    elif knum == 3 and lwire == 2:
                        p = 0
                        while p < len(item):
                            x, p = _read_varint(item, p)
                            vals.append(x - (1 << 64) if x >= 1 << 63 else x)
                    elif knum == 3:
                        vals.append(item)
                    else:
                        vals.append(bytes(item))
            out[name] = vals
    return out


# --- images -------------------------------------------------------------------


def make_image(width, height, mode="RGB", seed=0):
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:height, 0:width]
    base = np.stack([(xx * 255 // max(width - 1, 1)),
                     (yy * 255 // max(height - 1, 1)),
                     ((xx + yy) * 127 // max(width + height - 2, 1))], axis=-1)
    noise = rng.integers(0, 40, size=(height, width, 3))
    arr = np.clip(base + noise, 0, 255).astype(np.uint8)
    img = Image.fromarray(arr, "RGB")
    return img.convert("L") if mode == "L" else img


def jpeg_bytes(img, quality=90, subsampling=2, progressive=False):
    """subsampling: 0 = 4:4:4, 1 = 4:2:2, 2 = 4:2:0 (Pillow's numbering)."""
    buf = io.BytesIO()
    kw = {"quality": quality, "progressive": progressive}
    if img.mode != "L":
        kw["subsampling"] = subsampling
    img.save(buf, "JPEG", **kw)
    return buf.getvalue()


def decode_like_libjpeg(jpeg, channels=0, ratio=1):
    """Pixels as Pillow decodes them: libjpeg-turbo with JDCT_ISLOW and fancy
    upsampling, i.e. the view's dct=accurate. HWC uint8. ratio > 1 asks
    Image.draft for that scale, which sets libjpeg's scale_denom and keeps the
    other settings (the view's ratio=N); the image must be at least ratio
    pixels on each side, or draft picks a smaller scale."""
    img = Image.open(io.BytesIO(jpeg))
    if ratio > 1:
        w, h = img.size
        img.draft(img.mode, (max(w // ratio, 1), max(h // ratio, 1)))
        assert img.size == (-(-w // ratio), -(-h // ratio)), (
            f"draft gave {img.size} for {w}x{h} at 1/{ratio}")
    img.load()
    if channels == 3 or (channels == 0 and img.mode != "L"):
        img = img.convert("RGB")
    elif channels == 1:
        img = img.convert("L")
    arr = np.asarray(img, dtype=np.uint8)
    if arr.ndim == 2:
        arr = arr[:, :, None]
    return arr


def imagenet_example(jpeg, label, width, height, name):
    return encode_example({
        "image/encoded": jpeg,
        "image/format": b"JPEG",
        "image/class/label": label,
        "image/class/synset": b"n%08d" % label,
        "image/filename": name.encode(),
        "image/height": height,
        "image/width": width,
        "image/colorspace": b"RGB",
        "image/channels": 3,
    })


def write_tfrecord(path, payloads):
    with open(path, "wb") as f:
        for p in payloads:
            f.write(tfrecord_frame(p))


def gzip_bytes(data):
    """data as a GZIP stream (TFRecordDataset's compression_type="GZIP")."""
    return gzip.compress(data, mtime=0)


def zlib_bytes(data):
    """data as a ZLIB stream (compression_type="ZLIB")."""
    return zlib.compress(data)
