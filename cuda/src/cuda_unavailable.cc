// Built only without CUDA: the CUDA entry points say so.
#include "tier/device/cuda_transfer_engine.h"

namespace tier::device {

bool CudaCompiledIn() {
  return false;
}
const char* CudaArchitectures() {
  return "";
}

CudaProbe ProbeCuda() {
  CudaProbe probe;
  probe.state = CudaProbeState::kNotCompiledIn;
  probe.detail = "CUDA not compiled in";
  return probe;
}

Result<int> CudaDeviceCount() {
  return Status::Unsupported("CUDA not compiled in");
}

Result<std::unique_ptr<TransferEngine>> MakeCudaTransferEngine(const CudaEngineOptions&) {
  return Status::Unsupported("CUDA not compiled in");
}

}  // namespace tier::device
