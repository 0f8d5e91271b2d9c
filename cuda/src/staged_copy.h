// staged_copy.h (internal) -- how a gather/scatter moves through a bounded staging buffer: the
// page table is cut into stages of at most PagesPerStage() pages; each stage is one kernel
// launch (PageCopyParams) plus one contiguous host<->staging copy per plane (PlaneRun). The CUDA
// engine runs it with kernels and cudaMemcpyAsync, the CPU engine's staged mode with memcpy, so
// this arithmetic is tested on machines without a GPU.
#pragma once

#include <cstdint>

#include "page_copy_job.h"
#include "page_copy_params.h"

namespace tier::device::detail {

struct PlaneRun {
  std::uint64_t segment_offset = 0;  // in the job's segment
  std::uint64_t staging_offset = 0;  // in the staging buffer
  std::uint64_t bytes = 0;
};

// Pages one stage holds: min(kMaxPagesPerLaunch, staging_bytes / layer page bytes); 0 when one
// page does not fit.
std::uint32_t PagesPerStage(const PageCopyJob& job, std::uint64_t staging_bytes);

// Fills the launch parameters and the per-plane runs for pages [first, first + count) of the job,
// staged at `staging`. count must be 1..kMaxPagesPerLaunch.
void MakeStage(const PageCopyJob& job, std::uint32_t first, std::uint32_t count,
               unsigned char* staging, PageCopyParams* params,
               PlaneRun (&runs)[kMaxPlanesPerLayer]);

// What the kernels do, on host memory: pool -> staging (gather) and staging -> pool (scatter).
void GatherStageOnHost(const PageCopyParams& params);
void ScatterStageOnHost(const PageCopyParams& params);

}  // namespace tier::device::detail
