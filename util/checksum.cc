#include "util/checksum.h"

#include <xxhash.h>

namespace stoker {

uint64_t ChunkChecksum(const void* data, size_t len) { return XXH3_64bits(data, len); }

}  // namespace stoker
