#include "decode/jpeg/batching_jpeg_decoder.h"

#include <limits>

namespace stoker {

struct BatchingJpegDecoder::Pending {
  JpegJob job;
  Mutex mu;
  CondVar cv;
  bool done GUARDED_BY(mu) = false;
  Status status GUARDED_BY(mu);

  void Finish(Status s) {
    MutexLock l(mu);
    status = std::move(s);
    done = true;
    cv.notify_all();
  }
};

BatchingJpegDecoder::BatchingJpegDecoder(std::unique_ptr<BatchJpegBackend> backend)
    : backend_(std::move(backend)) {
  STOKER_CHECK(backend_ != nullptr && backend_->lanes() > 0 && backend_->max_batch() > 0,
               "a batching decoder needs a backend with lanes");
  for (int i = 0; i < backend_->lanes(); ++i) lanes_.emplace_back([this, i] { RunLane(i); });
}

BatchingJpegDecoder::~BatchingJpegDecoder() { Stop(); }

Status BatchingJpegDecoder::Decode(const uint8_t* jpeg, size_t len, const DecodeParams& params,
                                   uint8_t* out, size_t out_len) {
  JpegProbeOptions probe;
  probe.max_pixels = std::numeric_limits<uint64_t>::max();  // the view's limit applied already
  STOKER_ASSIGN_OR_RETURN(JpegInfo info, ProbeJpeg(jpeg, len, probe));
  STOKER_ASSIGN_OR_RETURN(ImageShape shape, OutputShape(info, params));
  if (shape.pixel_bytes() != out_len) {
    return Status::Invalid("output buffer of " + std::to_string(out_len) +
                           " bytes for an image of " + std::to_string(shape.pixel_bytes()));
  }
  Pending p;
  p.job = JpegJob{jpeg, len, info, params, shape, out};
  {
    MutexLock l(mu_);
    if (stop_) return Status::Error(ECANCELED, "batching decoder stopped");
    queue_.push_back(&p);
  }
  cv_.notify_one();
  MutexLock l(p.mu);
  p.cv.Wait(p.mu, [&]() REQUIRES(p.mu) { return p.done; });
  return p.status;
}

void BatchingJpegDecoder::Stop() {
  std::deque<Pending*> dropped;
  {
    MutexLock l(mu_);
    if (stop_ && lanes_.empty()) return;
    stop_ = true;
    dropped.swap(queue_);
  }
  cv_.notify_all();
  for (Pending* p : dropped) p->Finish(Status::Error(ECANCELED, "batching decoder stopped"));
  for (auto& t : lanes_) t.join();
  lanes_.clear();
}

void BatchingJpegDecoder::RunLane(int lane) {
  const size_t max_batch = backend_->max_batch();
  const uint64_t max_bytes = backend_->batch_bytes();
  std::vector<Pending*> batch;
  std::vector<JpegJob> jobs;
  std::vector<Status> results;
  for (;;) {
    batch.clear();
    {
      MutexLock l(mu_);
      cv_.Wait(mu_, [&]() REQUIRES(mu_) { return stop_ || !queue_.empty(); });
      if (stop_) return;
      uint64_t bytes = 0;
      while (!queue_.empty() && batch.size() < max_batch) {
        const uint64_t b = queue_.front()->job.shape.pixel_bytes();
        if (!batch.empty() && bytes + b > max_bytes) break;
        bytes += b;
        batch.push_back(queue_.front());
        queue_.pop_front();
      }
      // Another lane can take what is left while this one decodes.
      if (!queue_.empty()) cv_.notify_one();
    }
    jobs.clear();
    for (Pending* p : batch) jobs.push_back(p->job);
    results.assign(jobs.size(), Status::OK());
    backend_->DecodeBatch(lane, jobs, results);
    batches_++;
    images_ += jobs.size();
    uint64_t largest = largest_batch_.load();
    while (jobs.size() > largest && !largest_batch_.compare_exchange_weak(largest, jobs.size())) {
    }
    for (size_t i = 0; i < batch.size(); ++i) {
      if (!results[i].ok()) failed_++;
      batch[i]->Finish(std::move(results[i]));
    }
  }
}

size_t BatchingJpegDecoder::queued() const {
  MutexLock l(mu_);
  return queue_.size();
}

nlohmann::json BatchingJpegDecoder::Stats() const {
  nlohmann::json j;
  j["gpu_batches"] = batches_.load();
  j["gpu_images"] = images_.load();
  j["gpu_failed"] = failed_.load();
  j["gpu_largest_batch"] = largest_batch_.load();
  j["gpu_backend"] = backend_->Describe();
  return j;
}

}  // namespace stoker
