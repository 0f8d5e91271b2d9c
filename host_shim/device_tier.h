// device_tier.h -- where the Device placement's bytes live and how they move: device memory and
// the transfer engine's copies when a GPU is present, host memory standing in for it otherwise.
#pragma once

#include <memory>
#include <string>

#include <tier/status.h>
#include "catalog.h"

namespace tier::device {
class HostAllocator;
class TransferEngine;
}  // namespace tier::device

namespace tier {

// Blocking copies between Host segment buffers and device memory. One thread at a time.
class DeviceTier {
 public:
  virtual ~DeviceTier() = default;
  // "cuda" or "cpu": the `path` label of tier_device_path.
  virtual const char* path() const = 0;
  // "GPU 0: NVIDIA ..." or "CPU reference ...", for the start-up log line.
  virtual std::string description() const = 0;
  // Copies every segment to the device; returns once the copy is complete. On an error (the
  // device's status, annotated "device: ") nothing it queued is still running.
  virtual Result<std::unique_ptr<DeviceCopy>> Upload(const HostCopy& host) = 0;
  // Copies a device copy back into `host`, whose segments have the uploaded sizes. On an error
  // nothing it queued is still running (so `host` may be freed at once).
  virtual Status Download(const DeviceCopy& copy, HostCopy* host) = 0;
  // Where the Host tier's memory comes from: pinned on the CUDA path, page-aligned otherwise.
  virtual std::shared_ptr<device::HostAllocator> host_allocator() = 0;
};

// The engine the transfer library selects at run time for `preference` ("auto": CUDA when a
// device is present, else the CPU reference path; "cpu"; "cuda"), with the reason for the choice
// in `reason`. INVALID_ARGUMENT/UNSUPPORTED when "cuda" is asked for and none is usable.
Result<std::unique_ptr<DeviceTier>> SelectDeviceTier(const std::string& preference,
                                                     std::string* reason);

// The Device tier over an engine the caller made (tests: a CPU engine with test seams); owns it.
// Any thread.
std::unique_ptr<DeviceTier> MakeEngineDeviceTier(std::unique_ptr<device::TransferEngine> engine);

}  // namespace tier
