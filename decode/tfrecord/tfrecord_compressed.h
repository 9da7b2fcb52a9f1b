// GZIP- and ZLIB-compressed TFRecord files (TFRecordDataset's
// compression_type "GZIP" / "ZLIB"): the whole frame stream is deflated.
//
// Such a file can only be read from the start: offsets in extents are
// offsets in the inflated stream, and a view of it has to inflate it once to
// lay it out. Concatenated gzip members are read as one stream.
//
// Errors: EBADMSG for corrupt compressed data, a compressed stream that ends
// early ("truncated") and the framing errors of tfrecord.h; a length past the
// end shows up as "truncated" here, since the inflated size is unknown until
// the end. ByteSource errors pass through. All errors are sticky.
//
// Thread-safety: one thread at a time per object.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "decode/tfrecord/byte_source.h"
#include "decode/tfrecord/tfrecord.h"
#include "util/status.h"

namespace stoker {

enum class TfRecordCompression { kNone, kGzip, kZlib };

// ".gz" / ".gzip" -> kGzip, ".zlib" / ".zz" -> kZlib, else kNone.
TfRecordCompression CompressionFromName(std::string_view name);
// By magic bytes: gzip's 1f 8b 08; a zlib header (deflate, valid check bits).
// The zlib test is weak (about 1 in 500 random pairs pass); confirm with
// IsCompressedTfRecord.
TfRecordCompression SniffCompression(const uint8_t* first, size_t n);

// The inflated bytes of src, read sequentially.
class InflatingStream {
 public:
  // REQUIRES: kind != kNone.
  InflatingStream(ByteSource* src, TfRecordCompression kind);
  ~InflatingStream();
  InflatingStream(const InflatingStream&) = delete;
  InflatingStream& operator=(const InflatingStream&) = delete;

  // Fills up to len bytes; short only at the end of the stream.
  Result<size_t> Read(void* buf, size_t len);
  // Inflated bytes returned so far.
  uint64_t position() const { return position_; }

 private:
  ByteSource* src_;
  std::unique_ptr<z_stream> zs_;
  std::vector<uint8_t> in_;
  uint64_t src_off_ = 0;
  uint64_t position_ = 0;
  bool ended_ = false;
  Status broken_;
};

class CompressedTfRecordReader {
 public:
  CompressedTfRecordReader(ByteSource* src, TfRecordCompression kind,
                           TfRecordReaderOptions options = {})
      : stream_(src, kind), options_(options) {}
  // As TfRecordReader::Next, over the inflated stream.
  Result<bool> Next(TfRecordExtent* extent, std::string* data);
  bool framing_intact() const { return broken_.ok(); }

 private:
  InflatingStream stream_;
  TfRecordReaderOptions options_;
  Status broken_;
};

// True if src inflates (as kind) to bytes that start with a valid TFRecord
// header. Reads only the start of the file.
bool IsCompressedTfRecord(ByteSource& src, TfRecordCompression kind);

}  // namespace stoker
