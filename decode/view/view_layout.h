// ViewLayout: where every byte of a decoded view file comes from, computed
// from the raw file by one scan that parses records and probes JPEG headers
// but decodes no pixels. st_size, seeks and "which records cover this read"
// are answered from it before anything is decoded, and it is what the
// producer (view_producer.h) must match byte for byte.
//
// A TFRecord view is a sequence of entries in raw-file order:
//  - kImage: one raw record, rewritten (example_codec.h). Its frame is
//    12 + prefix_size + shape.pixel_bytes() + suffix + 4 bytes, pixels at
//    pixel_offset().
//  - kFailed (on_error=fail only): a raw record that does not decode, or the
//    rest of a file whose framing broke. It occupies its raw size (at least
//    one byte, so a reader always meets it) and reads as EIO.
// With on_error=skip such records are left out. Either way each problem is
// listed in errors, for MOUNTPOINT/.stoker/errors.
// Under skip a layout made with a JpegCheck also leaves out the records
// whose JPEG probes but does not decode (a scan cut short): the check runs
// on every JPEG before it is given a place, so a layout never has to change
// once its size was given out. Without a check (and always under fail)
// such a record lays out and fails only when produced.
// A tar view (kTar) is laid out by tar_view.h.
// A JPEG view (kNpy) is an .npy header followed by the pixels; a JPEG whose
// header does not probe (or, with a check, does not decode) is, under fail,
// one kFailed entry of the raw size; under skip LayoutJpegNpyView returns the
// error and the file is left out.
//
// Layouts are values; Encode/DecodeViewLayout give the binary form kept in
// the index. Decode checks everything it reads (a corrupt value is EBADMSG,
// never a crash or a layout whose entries overlap).
//
// Thread-safety: values and pure functions; a builder is used by one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "decode/jpeg/image_shape.h"
#include "decode/tfrecord/byte_source.h"
#include "decode/tfrecord/tfrecord.h"
#include "decode/tfrecord/tfrecord_compressed.h"
#include "decode/view/view_options.h"
#include "decode/view/view_record.h"
#include "util/status.h"

namespace stoker {

// kCopy and kZeros occur in tar views only (tar_view.h).
enum class ViewRecordKind : uint8_t { kImage = 0, kFailed = 1, kCopy = 2, kZeros = 3 };

struct ViewRecord {
  ViewRecordKind kind = ViewRecordKind::kImage;
  uint64_t in_offset = 0;  // raw frame start (inflated offset for compressed files)
  uint64_t in_size = 0;    // raw bytes it stands for: one frame, or a broken tail
  uint64_t out_offset = 0;
  uint64_t out_size = 0;
  uint32_t prefix_size = 0;  // kImage: payload bytes before the pixels
  ImageShape shape;          // kImage
  uint64_t out_end() const { return out_offset + out_size; }
  uint64_t pixel_offset() const { return out_offset + kTfRecordHeaderSize + prefix_size; }
  bool operator==(const ViewRecord&) const = default;
};

struct ViewError {
  uint64_t in_offset = 0;  // where in the raw file (0 for a whole file)
  int code = 0;            // errno-style, as the Status had it
  std::string message;
  bool operator==(const ViewError&) const = default;
};

enum class ViewKind : uint8_t { kTfRecord = 1, kNpy = 2, kTar = 3 };

struct ViewLayout {
  ViewKind kind = ViewKind::kTfRecord;
  std::string fingerprint;  // ViewOptions::Fingerprint of what made it
  uint64_t source_size = 0;
  uint64_t size = 0;  // the view file's st_size
  std::vector<ViewRecord> records;
  std::vector<ViewError> errors;
  // kNpy and not failed: the image and its header.
  ImageShape shape;
  uint32_t npy_header_size = 0;

  bool npy_failed() const { return kind == ViewKind::kNpy && !records.empty(); }
  // The index of the entry holding byte off, or records.size() past the end.
  size_t RecordAt(uint64_t off) const;
  // Entries overlapping [off, off + len): [first, last).
  std::pair<size_t, size_t> RecordsOverlapping(uint64_t off, uint64_t len) const;
  bool operator==(const ViewLayout&) const = default;
};

// Whether each of some JPEGs decodes (one Status per JPEG, in order); the
// caller may check them in parallel. The views use CheckJpegDecodes.
using JpegCheck = std::function<std::vector<Status>(const std::vector<std::string_view>& jpegs)>;

// Lists a problem at in_offset in layout's errors and, under on_error=fail,
// appends a kFailed entry for the in_size raw bytes it stands for.
void AddFailedEntry(ViewLayout* layout, OnError on_error, uint64_t in_offset, uint64_t in_size,
                    const Status& why);

// Builds a TFRecord view's layout from the records of one scan, in order.
// With a check (used under on_error=skip only) records are held back and
// checked kCheckBatch at a time; raw-order is kept.
class TfRecordLayoutBuilder {
 public:
  static constexpr size_t kCheckBatch = 32;
  TfRecordLayoutBuilder(const ViewOptions& options, std::string fingerprint, uint64_t source_size,
                        JpegCheck check = nullptr);
  // A record whose framing and CRCs checked out.
  void AddRecord(const TfRecordExtent& extent, std::string_view payload);
  // A record whose frame is intact but whose payload did not verify.
  void AddBadRecord(const TfRecordExtent& extent, const Status& why);
  // The framing broke at offset; raw_rest bytes follow (0 if unknown).
  void AddBrokenTail(uint64_t offset, uint64_t raw_rest, const Status& why);
  ViewLayout Finish() &&;

 private:
  struct Held {
    TfRecordExtent extent;
    PlannedImageRecord planned;
  };
  void AddFailed(uint64_t in_offset, uint64_t in_size, const Status& why);
  void AddPlanned(const TfRecordExtent& extent, const Held& held);
  void CheckHeld();
  const ViewOptions& options_;
  const JpegCheck check_;
  ViewLayout layout_;
  std::vector<Held> held_;  // planned records waiting for the check
};

// Scans a whole raw TFRecord file (compression as given) and lays out its
// view. Data problems end up in the layout; only ByteSource errors (the raw
// file could not be read) are returned.
// check: see TfRecordLayoutBuilder (ignored under on_error=fail).
Result<ViewLayout> LayoutTfRecordView(ByteSource& src, TfRecordCompression compression,
                                      const ViewOptions& options, const std::string& decoder_name,
                                      const JpegCheck& check = nullptr);

// Lays out the .npy view of a JPEG file, reading only as much of its start
// as the header needs; with a check under on_error=skip, the whole file.
Result<ViewLayout> LayoutJpegNpyView(ByteSource& src, const ViewOptions& options,
                                     const std::string& decoder_name,
                                     const JpegCheck& check = nullptr);

std::string EncodeViewLayout(const ViewLayout& layout);
Result<ViewLayout> DecodeViewLayout(std::string_view encoded);

}  // namespace stoker
