#include "util/checksum.h"

#if defined(__x86_64__)
// The dispatching entry point picks the widest vector unit of the CPU it
// runs on (AVX-512, AVX2 or SSE2) at the first call; plain XXH3_64bits in
// Debian's libxxhash is built for SSE2 only. Same function, same values:
// XXH3 is defined independently of the vector unit that computes it.
#define XXH_DISPATCH_DISABLE_REPLACE
#include <xxh_x86dispatch.h>
#define STOKER_XXH3_64 XXH3_64bits_dispatch
#else
#include <xxhash.h>
#define STOKER_XXH3_64 XXH3_64bits
#endif

namespace stoker {

uint64_t ChunkChecksum(const void* data, size_t len) { return STOKER_XXH3_64(data, len); }

}  // namespace stoker
