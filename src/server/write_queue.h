// The write queue both stores share (store.h): write() queues a batch from any thread; one writer
// thread takes every batch queued meanwhile (up to max_group) and hands them, in write order, to the
// store's `commit`, which commits them (group commit) and runs each batch's `done`. flush() waits for
// everything queued before it. Internal to src/server.
// Thread-safety: write() and flush() from any thread; `commit` runs on the writer thread only.
// Invariants: completed_ <= enqueued_, and completed_ counts batches whose `commit` has returned.
// The owner calls stop() in its destructor before it releases what `commit` uses.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "core/status.h"
#include "server/store.h"

namespace tessera::server {

class WriteQueue {
 public:
  struct Pending {
    WriteBatch batch;
    std::function<void(Status)> done;
  };
  using Commit = std::function<void(std::vector<Pending>& group)>;

  // Starts the writer thread.
  WriteQueue(size_t max_group, Commit commit) : max_group_(max_group), commit_(std::move(commit)) {
    thread_ = std::thread([this] { loop(); });
  }
  ~WriteQueue() { stop(); }
  WriteQueue(const WriteQueue&) = delete;
  WriteQueue& operator=(const WriteQueue&) = delete;

  void write(WriteBatch batch, std::function<void(Status)> done) {
    {
      std::lock_guard lock(mu_);
      queue_.push_back({std::move(batch), std::move(done)});
      ++enqueued_;
    }
    work_cv_.notify_one();
  }

  void flush() {
    std::unique_lock lock(mu_);
    const uint64_t target = enqueued_;
    done_cv_.wait(lock, [&] { return completed_ >= target; });
  }

  // Commits everything still queued, then ends the writer thread. Idempotent.
  void stop() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    work_cv_.notify_one();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void loop() {
    std::vector<Pending> group;
    for (;;) {
      group.clear();
      {
        std::unique_lock lock(mu_);
        work_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping, and everything queued has been committed
        while (!queue_.empty() && group.size() < max_group_) {
          group.push_back(std::move(queue_.front()));
          queue_.pop_front();
        }
      }
      commit_(group);
      {
        std::lock_guard lock(mu_);
        completed_ += group.size();
      }
      done_cv_.notify_all();
    }
  }

  const size_t max_group_;
  const Commit commit_;
  std::mutex mu_;
  std::condition_variable work_cv_;  // queue_ non-empty or stopping_
  std::condition_variable done_cv_;  // completed_ advanced
  std::deque<Pending> queue_;
  uint64_t enqueued_ = 0;
  uint64_t completed_ = 0;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace tessera::server
