// Tar archives as WebDataset shards are written (POSIX ustar, GNU and pax),
// read member by member, and one member's headers rewritten for a new name
// and size with every other field kept.
//
// An archive is a sequence of 512-byte blocks. A member is a header block
// (name, mode, uid, gid, size, mtime, checksum, type, ...; numbers in octal,
// or GNU base-256 for large ones) followed by its data padded to a block.
// Names longer than the header's fields come before it, in extension members
// of their own: a pax header ('x': "LEN key=value\n" records, of which "path"
// and "size" override the header's) or GNU long names ('L' for the name, 'K'
// for a link's target). A pax global header ('g') is a member by itself. The
// archive ends with a zero block (two, by POSIX; writers pad the file to a
// 10 KiB record with more).
//
// Errors (EBADMSG, naming the offset): a header whose checksum is wrong, a
// member that runs past the end of the file, a bad number or pax record, an
// extension member over kMaxExtensionBytes, an old GNU sparse member (its
// map runs on in extra blocks; not supported). ByteSource errors pass through.
//
// Why by hand: a view needs each member's raw offsets (to copy members and
// decode only the images a read covers) and byte-exact headers that differ
// from the raw ones only in name and size. libarchive reads entries but
// re-encodes headers in its own way when writing, and gives no offsets of
// the extension members it folds into an entry.
//
// Thread-safety: the free functions are pure; a TarReader is used by one
// thread at a time.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "decode/tfrecord/byte_source.h"
#include "util/status.h"

namespace stoker {

inline constexpr size_t kTarBlock = 512;
// Extension members (long names, pax records) larger than this are refused.
inline constexpr uint64_t kMaxExtensionBytes = 1 << 20;

inline uint64_t TarPadded(uint64_t n) { return (n + kTarBlock - 1) / kTarBlock * kTarBlock; }

// One member as it lies in the archive.
struct TarMember {
  uint64_t offset = 0;       // its first block: an extension member's header, or its own
  uint64_t data_offset = 0;  // its data, right after its own header
  uint64_t size = 0;         // data bytes (pax "size" if given)
  char type = '0';           // the header's typeflag
  std::string name;          // pax path, else GNU long name, else prefix/name
  uint64_t end() const { return data_offset + TarPadded(size); }
  bool is_regular() const { return type == '0' || type == '\0' || type == '7'; }
};

// True if block (kTarBlock bytes) is a tar header whose checksum checks out,
// or all zeros (the end of an archive: an empty one).
bool IsTarBlock(const uint8_t* block);

class TarReader {
 public:
  // REQUIRES: src outlives the reader.
  explicit TarReader(ByteSource* src) : src_(src) {}
  // The next member: true, or false at the end of the archive (a zero block,
  // or the end of the file at a block boundary). After false, offset() is
  // where the end-of-archive blocks start.
  Result<bool> Next(TarMember* member);
  // Where the next member (or the end) starts.
  uint64_t offset() const { return offset_; }

 private:
  ByteSource* const src_;
  uint64_t offset_ = 0;
};

// The headers of the member whose raw headers (from its offset to its data
// offset) are raw_headers, for new_name and new_size: the same blocks with
// the name replaced where it is held (the header's name field when it holds
// the old name's suffix, a GNU long name, a pax path), the size (the
// header's, and a pax size if there is one), and the checksums.
// old_suffix: the end of the member's name to replace with new_suffix.
// EBADMSG as for TarReader; EINVAL if the name does not end in old_suffix.
Result<std::string> RewriteTarHeaders(std::string_view raw_headers, std::string_view old_suffix,
                                      std::string_view new_suffix, uint64_t new_size);

// For tests and tools: a header block for a regular member (ustar; name up
// to 100 bytes, or split into prefix/name up to 255), and a pax or GNU
// long-name extension for a longer one.
enum class TarFormat { kUstar, kGnu, kPax };
std::string TarMemberBytes(std::string_view name, std::string_view data,
                           TarFormat format = TarFormat::kUstar);
// Two zero blocks.
std::string TarEnd();
// Writes the checksum of a header block (kTarBlock bytes), as tar writers do.
void SealTarHeader(uint8_t* block);

}  // namespace stoker
