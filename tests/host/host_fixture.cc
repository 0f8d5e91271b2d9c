#include "planner_fixture.h"

#include <sstream>

namespace tier::test {

ModelProfile TinyProfile() {
  ModelProfile p;
  p.name = "tiny";
  p.model = "tiny";
  p.gpu = "none";
  p.kv_dtype = "int8";
  p.tokens_per_page = 64;
  p.full_attention_layers = 2;
  p.kv_bytes_per_token = 128;
  p.mtp_layers = 0;
  p.state_image = {{"recurrent", 1000}};
  p.hidden_state_bytes = 100;
  p.prefill_chunk_tokens = 2048;
  p.prefill_chunk_ns = 1000;
  p.prefill_token_ns = 1000;
  p.attention_pair_ns = 10;
  p.decode_token_ns = 1000000;
  p.transfer_batch_ns = 100;
  p.transfer_op_ns = 10;
  p.d2h_ns_per_byte = 0.01;
  p.h2d_ns_per_byte = 0.01;
  return p;
}

void PlannerTest::Build(const std::string& plugin, const ProviderOptions& options,
                        uint64_t device_bytes, uint64_t host_bytes) {
  std::string reason;
  auto device = SelectDeviceTier("cpu", &reason);
  ASSERT_TRUE(device.ok()) << device.status().ToString();
  device_ = device.take();
  auto library = PluginLibrary::Load(ResolvePluginPath(plugin), host_.table());
  ASSERT_TRUE(library.ok()) << library.status().message();
  library_ = library.value();
  auto instance = ProviderInstance::Open(library_, host_.table(), "planner-test", options);
  ASSERT_TRUE(instance.ok()) << instance.status().ToString();
  instance_ = instance.take();
  cold_ = std::make_unique<ColdTier>(instance_.get());
  PlannerConfig config;
  config.namespace_id = "planner-test";
  config.device_capacity_bytes = device_bytes;
  config.host_capacity_bytes = host_bytes;
  planner_ = std::make_unique<Planner>(config, cost_, device_.get(), cold_.get(), &metrics_);
  Status started = planner_->Start();
  ASSERT_TRUE(started.ok()) << started.ToString();
}

void PlannerTest::TearDown() {
  planner_.reset();
  cold_.reset();
  if (instance_) instance_->Close();
}

std::vector<uint64_t> PlannerTest::Blocks(uint64_t base, size_t n) {
  std::vector<uint64_t> blocks;
  for (size_t i = 0; i < n; ++i) blocks.push_back(base + i);
  return blocks;
}

CheckpointEntry* PlannerTest::Seal(const std::vector<uint64_t>& blocks, uint64_t now_s) {
  return planner_->Seal(blocks, blocks.size() * 512, false, now_s * 1000000000ull);
}

void PlannerTest::SealAndPushToCold(const std::vector<uint64_t>& blocks) {
  ASSERT_NE(Seal(blocks, 1), nullptr);
  for (uint64_t i = 0; i < 3; ++i) Seal(Blocks(100 + 10 * i, 1), 2 + i);
  ASSERT_EQ(PlacementsOf(blocks), kCold) << "pushed down by three newer checkpoints";
}

CheckpointEntry* PlannerTest::Find(const std::vector<uint64_t>& blocks) const {
  return planner_->catalog().Find(PrefixKey("planner-test", blocks));
}

uint8_t PlannerTest::PlacementsOf(const std::vector<uint64_t>& blocks) const {
  const CheckpointEntry* e = Find(blocks);
  return e == nullptr ? 0 : e->placements;
}

double PlannerTest::Counter(const std::string& series) const {
  std::istringstream text(registry_.ExpositionText());
  std::string line;
  while (std::getline(text, line)) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return -1;
}

}  // namespace tier::test
