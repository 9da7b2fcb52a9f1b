// The host stand-in for the CUDA runtime and nvJPEG: two shared libraries,
// build/gpu-standin/libcudart.so and libnvjpeg.so, that export the calls the
// GPU backend makes (decode/gpu/gpu_libraries.cc) and do them on the CPU,
// so the backend's own code (loading, lanes, batches, streams, the
// allocation budget, errors, fallback) runs and is tested on machines with
// no GPU. It tests stoker's side of the ABI, not nvJPEG: the pixels are
// libjpeg-turbo's (accurate DCT; chroma upsampled by interpolation when the
// handle asked for it, else by replication), and the figures of issue 7 are
// only ever taken on a real device (bench/gpu_check).
//
// It keeps what the backend must respect on a real device:
//  - "device" and pinned memory are tracked allocations; a copy or a decode
//    whose destination is not wholly inside one fails cudaErrorInvalidValue
//    or NVJPEG_STATUS_INVALID_PARAMETER;
//  - a stream runs its work only when synchronised, so pixels read before
//    cudaStreamSynchronize are stale;
//  - nvjpegDecodeBatched needs the batch size its state was initialised for;
//    a bad bitstream fails it with NVJPEG_STATUS_BAD_JPEG;
//  - nvJPEG's own scratch memory goes through the handle's allocators.
//
// Knobs (each also read from the environment as STOKER_STANDIN_<NAME> when
// the library loads, so a daemon under test can be set up from outside):
//   DEVICES        devices reported (default 1; 0: cudaErrorNoDevice)
//   DEVICE_MEMORY  bytes cudaMalloc hands out in all (default 8 GiB)
//   HARDWARE       1: the hardware backend is accepted (default 0: refused
//                  with NVJPEG_STATUS_ARCH_MISMATCH, as on a device without
//                  JPEG engines); as nvJPEG's, it takes only baseline JPEGs
//                  whose one scan interleaves every component, and fails a
//                  batch holding another with JPEG_NOT_SUPPORTED
//   HARDWARE_REJECT_WIDTH  the hardware backend alone refuses images this
//                  wide, as it may refuse what its rules above let through
//   REJECT_WIDTH   a batch holding an image this wide fails
//                  NVJPEG_STATUS_JPEG_NOT_SUPPORTED (default 0: none)
//   FAIL_SYNC      the FAIL_SYNC-th stream synchronisation from now fails
//                  with cudaErrorLaunchFailure, its work undone (default 0)
//   STICKY         1: a FAIL_SYNC failure breaks the context, as a launch
//                  failure does on a device: BROKEN is set, and from then on
//                  synchronisation, copies, cudaMalloc and cudaMemGetInfo
//                  fail with cudaErrorLaunchFailure (set BROKEN to 0 to mend)
//   HOLD_SYNC      1: stream synchronisations wait until it is 0 again, so
//                  a test can hold a lane busy while work queues
// Readings (stoker_standin_get): LIVE_DEVICE_BYTES, LIVE_PINNED_BYTES,
// LIVE_STREAMS, SYNCS, DECODE_BATCHED (calls), DECODED (images),
// DECODED_HARDWARE (images, by a hardware-backend handle), HARDWARE_REFUSED
// (batches a hardware-backend handle refused).
//
// Thread-safety: every call is thread-safe; a stream is used by one thread
// at a time, as the backend's lanes use theirs.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

extern "C" {

// Sets a knob; returns 0, or -1 for an unknown name.
int stoker_standin_set(const char* name, long long value);
// A knob or a reading; -1 for an unknown name.
long long stoker_standin_get(const char* name);

// For the nvJPEG stand-in: whether [p, p + n) lies inside one live device
// allocation; work queued on a stream (run(arg, 1) at synchronisation, or
// run(arg, 0) when the stream failed, to free arg); a count.
int stoker_standin_device_range(const void* p, size_t n);
cudaError_t stoker_standin_enqueue(cudaStream_t stream, void (*run)(void* arg, int ok), void* arg);
void stoker_standin_count(const char* name, long long delta);
}
