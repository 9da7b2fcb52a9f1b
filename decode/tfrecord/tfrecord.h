// TFRecord framing: what TensorFlow's TFRecordDataset reads and writes.
//
// A file is a sequence of frames, each
//   uint64 length (little endian) | uint32 masked crc32c(length bytes)
//   | length bytes of payload     | uint32 masked crc32c(payload)
// with nothing between frames and nothing after the last one. An empty file is
// a valid TFRecord file with no records, but cannot be recognised by content.
//
// Errors (all EBADMSG, the message names the offset and the problem): a
// truncated header, a length whose CRC does not match ("bad length crc"), a
// payload that runs past the end of the source ("length past end"), a payload
// whose CRC does not match ("bad data crc"). Errors of the ByteSource itself
// (EIO, ...) pass through unchanged.
//
// Thread-safety: the free functions are pure. A TfRecordReader is used by one
// thread at a time; several readers may share one ByteSource.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "decode/tfrecord/byte_source.h"
#include "util/status.h"

namespace stoker {

inline constexpr size_t kTfRecordHeaderSize = 12;
inline constexpr size_t kTfRecordFooterSize = 4;
inline constexpr size_t kTfRecordOverhead = kTfRecordHeaderSize + kTfRecordFooterSize;

// Where one record lies in its file.
struct TfRecordExtent {
  uint64_t offset = 0;  // start of the frame (its length field)
  uint64_t length = 0;  // payload bytes
  uint64_t data_offset() const { return offset + kTfRecordHeaderSize; }
  uint64_t frame_size() const { return length + kTfRecordOverhead; }
  uint64_t end() const { return offset + frame_size(); }
  bool operator==(const TfRecordExtent&) const = default;
};

// --- Writing ---------------------------------------------------------------
void EncodeTfRecordHeader(uint64_t length, uint8_t out[kTfRecordHeaderSize]);
// The masked CRC the footer of this payload carries.
uint32_t TfRecordMaskedCrc(const void* data, size_t len);
void EncodeTfRecordFooter(uint32_t masked_crc, uint8_t out[kTfRecordFooterSize]);
// Appends a whole frame for payload to out.
void AppendTfRecord(std::string_view payload, std::string* out);

// --- Reading ---------------------------------------------------------------
// The payload length of a header, or EBADMSG "bad length crc". offset is only
// for the message.
Result<uint64_t> DecodeTfRecordHeader(const uint8_t header[kTfRecordHeaderSize], uint64_t offset);

// Content sniffing: true if the first bytes of a file of file_size bytes start
// with a frame whose length CRC checks out and whose payload fits in the file.
// Needs at least kTfRecordHeaderSize bytes; a random file passes with
// probability about 2^-32.
bool IsTfRecord(const uint8_t* first, size_t n, uint64_t file_size);

struct TfRecordReaderOptions {
  // Check each payload's CRC. Off only where the caller checks it itself.
  // Default: true.
  bool verify_data_crc = true;
  // A larger length is refused (EBADMSG) before anything is allocated; it
  // guards memory against a corrupt header whose CRC happens to match.
  // Default: 1 GiB.
  uint64_t max_record_length = uint64_t{1} << 30;
};

class TfRecordReader {
 public:
  explicit TfRecordReader(ByteSource* src, TfRecordReaderOptions options = {})
      : src_(src), options_(options) {}

  // Reads the next record. Returns false at a clean end (the last frame ended
  // exactly at the end of the source). data may be null (the payload is then
  // only read to check its CRC, if enabled, in bounded pieces).
  // After "bad data crc" the framing is intact and the reader is positioned
  // after the bad record, so a caller may skip it; after any other error
  // Next keeps returning that error.
  Result<bool> Next(TfRecordExtent* extent, std::string* data);

  // Where the next frame starts.
  uint64_t offset() const { return offset_; }
  // False once an error lost the framing (every error but "bad data crc"
  // and errors of the source).
  bool framing_intact() const { return broken_.ok(); }
  // Continues at a frame start known from an index; clears a sticky error.
  void Seek(uint64_t offset) {
    offset_ = offset;
    broken_ = Status::OK();
  }

 private:
  ByteSource* src_;
  TfRecordReaderOptions options_;
  uint64_t offset_ = 0;
  Status broken_;
};

// Reads and checks the one record whose frame starts at offset (from an
// index), returning its payload.
Result<std::string> ReadTfRecordAt(ByteSource& src, uint64_t offset,
                                   const TfRecordReaderOptions& options = {});

}  // namespace stoker
