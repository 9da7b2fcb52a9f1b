// Chunk checksums: XXH3-64 from libxxhash. The only checksum stoker stores.
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>

namespace stoker {

uint64_t ChunkChecksum(const void* data, size_t len);

}  // namespace stoker
