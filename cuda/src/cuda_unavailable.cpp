// Built only without CUDA: the CUDA entry points say so.
#include "tier/device/cuda_transfer_engine.h"

namespace tier::device {

bool cuda_compiled_in() {
  return false;
}
const char* cuda_architectures() {
  return "";
}

Result<int> cuda_device_count() {
  return unavailable("CUDA not compiled in");
}

Result<std::unique_ptr<TransferEngine>> make_cuda_transfer_engine(const CudaEngineOptions&) {
  return unavailable("CUDA not compiled in");
}

}  // namespace tier::device
