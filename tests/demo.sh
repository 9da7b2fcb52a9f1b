#!/usr/bin/env bash
# The README's demo: builds a sample tree, mounts it through stoker with an SSD
# cache, reads every byte (checked against the origin with sha256), shows the
# cache statistics, remounts and reads again from the warm cache, then
# unmounts, checks the cache with fsck and removes everything.
#
#   tests/demo.sh            # uses build/stoker; STOKER_BIN=... to use another
#
# Needs FUSE (/dev/fuse, fusermount3); installs nothing. Leaves no mount
# behind, also when a step fails.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
stoker=${STOKER_BIN:-$root/build/stoker}
demo=${STOKER_DEMO_DIR:-/tmp/stoker-demo}
origin=$demo/origin
mnt=$demo/mnt
cache=$demo/cache

command -v fusermount3 >/dev/null 2>&1 ||
  { echo "demo: fusermount3 is missing (install the fuse3 package)" >&2; exit 1; }
[ -e /dev/fuse ] || { echo "demo: /dev/fuse is missing (FUSE is not available here)" >&2; exit 1; }
[ -x "$stoker" ] ||
  { echo "demo: $stoker is not built (cmake -S . -B build && cmake --build build)" >&2; exit 1; }

is_mounted() { awk -v m="$mnt" '$5 == m { found = 1 } END { exit !found }' /proc/self/mountinfo; }

cleanup() {
  rc=$?
  if is_mounted; then
    "$stoker" unmount "$mnt" 2>/dev/null || fusermount3 -u -z "$mnt" 2>/dev/null ||
      umount -l "$mnt" 2>/dev/null || true
  fi
  if [ "$rc" -ne 0 ] && [ -f "$cache/stoker.log" ]; then
    echo "demo: failed; the daemon's last log lines:" >&2
    tail -n 20 "$cache/stoker.log" >&2 || true
  fi
  rm -rf "$demo"
  exit "$rc"
}
trap cleanup EXIT

step() { printf '\n== %s\n' "$*"; }

step "sample tree in $origin"
if is_mounted; then fusermount3 -u -z "$mnt"; fi
rm -rf "$demo"
mkdir -p "$origin/nested/deeper" "$mnt"
head -c $((64 << 20)) /dev/urandom >"$origin/big.bin"
printf 'hello from the origin\n' >"$origin/hello.txt"
: >"$origin/empty"
head -c $((1 << 20)) /dev/urandom >"$origin/exactly one chunk.bin"
for i in $(seq 1 20); do
  head -c $((i * 997)) /dev/urandom >"$origin/nested/small-$i.dat"
done
printf 'deep\n' >"$origin/nested/deeper/leaf.txt"
ln -s hello.txt "$origin/link-to-hello"
# An ImageNet-shaped TFRecord shard and a JPEG, for the decoded view.
mkdir -p "$origin/train"
python3 - "$origin/train" <<'PY'
import sys
sys.path.insert(0, "tests/integration")
import view_data as vd
out = sys.argv[1]
records = []
for i, (w, h) in enumerate([(500, 375), (320, 240), (375, 500), (64, 48)]):
    jpeg = vd.jpeg_bytes(vd.make_image(w, h, seed=i), quality=90, subsampling=i % 3)
    records.append(vd.imagenet_example(jpeg, i, w, h, f"img-{i}.JPEG"))
vd.write_tfrecord(out + "/shard-00000-of-00001", records)
with open(out + "/photo.jpg", "wb") as f:
    f.write(vd.jpeg_bytes(vd.make_image(200, 150, seed=9)))
PY
(cd "$origin" && find . -type f -print0 | sort -z | xargs -0 sha256sum) >"$demo/origin.sha256"
echo "$(wc -l <"$demo/origin.sha256") files, $(du -sh "$origin" | cut -f1)"

step "stoker mount $origin $mnt --cache $cache --cache-size 1G --view decoded"
"$stoker" mount "$origin" "$mnt" --cache "$cache" --cache-size 1G --view decoded

verify() {
  (cd "$mnt" && sha256sum --quiet -c "$demo/origin.sha256")
  [ "$(readlink "$mnt/link-to-hello")" = hello.txt ] || { echo "demo: symlink differs" >&2; exit 1; }
  echo "every byte matches the origin (sha256 of $(wc -l <"$demo/origin.sha256") files; symlink ok)"
}

step "read through the mount, cold: fetched from the origin"
verify

step "stoker stat $mnt"
"$stoker" stat "$mnt"

step "stoker warm $mnt/nested (queues a background fetch; already cached here)"
"$stoker" warm "$mnt/nested"

step "stoker unmount, then mount again: the cache survives"
"$stoker" unmount "$mnt"
"$stoker" mount "$origin" "$mnt" --cache "$cache" --cache-size 1G --view decoded

step "read again, warm: served from the SSD cache"
verify

step "stoker stat $mnt (origin bytes stay 0 on this mount)"
"$stoker" stat "$mnt"

step "read the decoded view: $mnt/.decoded/train (pixels decoded once, kept in the SSD cache)"
ls -l "$mnt/.decoded/train"
python3 - "$origin/train" "$mnt/.decoded/train" <<'PY'
import sys
sys.path.insert(0, "tests/integration")
import numpy as np
import view_data as vd
raw, view = sys.argv[1], sys.argv[2]
raw_recs = vd.read_tfrecords(open(raw + "/shard-00000-of-00001", "rb").read())
view_recs = vd.read_tfrecords(open(view + "/shard-00000-of-00001", "rb").read())
assert len(raw_recs) == len(view_recs), "record count differs"
for r, v in zip(raw_recs, view_recs):
    rf, vf = vd.decode_example(r), vd.decode_example(v)
    h, w, c = vf["image/height"][0], vf["image/width"][0], vf["image/channels"][0]
    pixels = np.frombuffer(vf["image/encoded"][0], np.uint8)
    assert pixels.size == h * w * c, "pixel bytes do not match the shape"
    assert vf["image/class/label"] == rf["image/class/label"], "label lost"
    print(f"record {rf['image/filename'][0].decode()}: {len(rf['image/encoded'][0])} JPEG bytes"
          f" -> {h}x{w}x{c} raw pixels")
arr = np.load(view + "/photo.jpg.npy")
print(f"photo.jpg.npy: np.load gives {arr.dtype} {arr.shape}")
PY

step "stoker stat $mnt: the view's counters after the decoded read"
"$stoker" stat "$mnt" | grep -E '^(view|decode)'

step "stoker unmount $mnt"
"$stoker" unmount "$mnt"

step "stoker fsck $cache"
"$stoker" fsck "$cache"

step "done; removing $demo"
