// CRC-32C throughput (Google Benchmark): the SSE4.2 path and the table path
// over buffers the size of a TFRecord header, a small JPEG, a decoded image
// record and a chunk. Prints bytes/s; asserts nothing.
//   build/stoker_crc32c_bench --benchmark_min_time=0.2
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "decode/tfrecord/crc32c.h"

namespace {

std::vector<uint8_t> Bytes(size_t n) {
  std::vector<uint8_t> v(n);
  std::mt19937 rng(1);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

template <uint32_t (*F)(uint32_t, const void*, size_t)>
void BM_Crc32c(benchmark::State& state) {
  const auto buf = Bytes(static_cast<size_t>(state.range(0)));
  uint32_t crc = 0;
  for (auto _ : state) {
    crc = F(crc, buf.data(), buf.size());
    benchmark::DoNotOptimize(crc);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}

void Sizes(benchmark::internal::Benchmark* b) {
  for (int64_t n : {12, 4 << 10, 110 << 10, 560 << 10, 1 << 20}) b->Arg(n);
}

BENCHMARK_TEMPLATE(BM_Crc32c, stoker::crc32c_internal::ExtendHardware)->Apply(Sizes);
BENCHMARK_TEMPLATE(BM_Crc32c, stoker::crc32c_internal::ExtendPortable)->Apply(Sizes);

}  // namespace

BENCHMARK_MAIN();
