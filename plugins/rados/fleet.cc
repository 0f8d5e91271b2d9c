// The fleet budget's ledger (fleet.h): a text object updated by compare-and-swap on its version.
#include "fleet.h"

#include <rados/librados.h>
#include <time.h>

#include <cerrno>
#include <chrono>
#include <memory>
#include <random>
#include <sstream>
#include <thread>

#include "catalog.h"
#include "format.h"

namespace tier::rados {
namespace {

constexpr const char* kXattrVersion = "tier.v";
constexpr const char* kMagic = "tier-fleet 1";
constexpr size_t kMaxLedgerBytes = 4u << 20;

struct ReadBuffer {
  std::vector<char> bytes = std::vector<char>(kMaxLedgerBytes);
  size_t bytes_read = 0;
  int rval = 0;
};

}  // namespace

uint64_t FleetLedger::TotalBytes() const {
  uint64_t total = committed_bytes;
  for (const auto& [id, s] : servers) total += s.reserved_bytes;
  return total;
}

bool FleetLedger::Pinned(const std::string& key_hex) const {
  auto it = pins.lower_bound({key_hex, 0});
  return it != pins.end() && it->first.first == key_hex;
}

std::string FleetLedger::Encode() const {
  std::ostringstream out;
  out << kMagic << "\nv " << version << "\nc " << committed_bytes << "\nn " << commits << "\n";
  for (const auto& [id, s] : servers) {
    out << "s " << Hex64(id) << " " << s.lease_unix_ns << " " << s.reserved_bytes << "\n";
  }
  for (const auto& [pin, count] : pins) {
    out << "p " << pin.first << " " << Hex64(pin.second) << " " << count << "\n";
  }
  for (const auto& [key, id] : evicting) out << "e " << key << " " << Hex64(id) << "\n";
  for (const std::string& line : other_lines) out << line << "\n";
  return out.str();
}

bool FleetLedger::Parse(const std::string& text, FleetLedger* out) {
  *out = FleetLedger{};
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line) || line != kMagic) return false;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::istringstream f(line);
    std::string kind, a, b;
    f >> kind;
    uint64_t id = 0;
    if (kind == "v") {
      if (!(f >> out->version)) return false;
    } else if (kind == "n") {
      if (!(f >> out->commits)) return false;
    } else if (kind == "c") {
      if (!(f >> out->committed_bytes)) return false;
    } else if (kind == "s") {
      Server s;
      if (!(f >> a >> s.lease_unix_ns >> s.reserved_bytes) || !ParseHex64(a, &id)) return false;
      out->servers[id] = s;
    } else if (kind == "p") {
      uint32_t count = 0;
      if (!(f >> a >> b >> count) || !ParseHex64(b, &id)) return false;
      out->pins[{a, id}] = count;
    } else if (kind == "e") {
      if (!(f >> a >> b) || !ParseHex64(b, &id)) return false;
      out->evicting[a] = id;
    } else {
      out->other_lines.push_back(line);
    }
  }
  return true;
}

FleetBudget::FleetBudget(Aio* aio, uint64_t budget_bytes, uint32_t lease_s, uint64_t server_id,
                         uint32_t op_timeout_s)
    : aio_(aio),
      budget_bytes_(budget_bytes),
      lease_ns_(uint64_t{lease_s} * 1'000'000'000ull),
      server_id_(server_id),
      op_timeout_s_(op_timeout_s) {}

uint64_t FleetBudget::UnixNowNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

Result<FleetLedger> FleetBudget::Read() {
  const uint64_t deadline = Aio::NowNs() + (uint64_t{op_timeout_s_} + 1) * 1'000'000'000ull;
  auto buffer = std::make_shared<ReadBuffer>();
  rados_read_op_t op = rados_create_read_op();
  if (op == nullptr) return Status::Internal("rados: out of memory");
  rados_read_op_read(op, 0, kMaxLedgerBytes, buffer->bytes.data(), &buffer->bytes_read,
                     &buffer->rval);
  const int rc = aio_->ReadSync(kObject, op, 0, deadline, buffer);
  if (rc == -ENOENT) return Status::NotFound("rados: fleet: no ledger");
  if (rc < 0) return FromRados(rc, "fleet: read the ledger");
  FleetLedger ledger;
  if (!FleetLedger::Parse(std::string(buffer->bytes.data(), buffer->bytes_read), &ledger)) {
    return Status::DataLoss("rados: fleet: the ledger '" + std::string(kObject) +
                            "' does not parse");
  }
  return ledger;
}

Status FleetBudget::Join(uint64_t counted_bytes) {
  FleetLedger fresh;
  fresh.version = 1;
  fresh.committed_bytes = counted_bytes;
  const std::string text = fresh.Encode();
  const std::string version = "1";
  rados_write_op_t op = rados_create_write_op();
  if (op == nullptr) return Status::Internal("rados: out of memory");
  rados_write_op_create(op, LIBRADOS_CREATE_EXCLUSIVE, nullptr);
  rados_write_op_write_full(op, text.data(), text.size());
  rados_write_op_setxattr(op, kXattrVersion, version.data(), version.size());
  const uint64_t deadline = Aio::NowNs() + (uint64_t{op_timeout_s_} + 1) * 1'000'000'000ull;
  const int rc = aio_->WriteSync(kObject, op, LIBRADOS_OPERATION_FULL_FORCE, deadline);
  if (rc < 0 && rc != -EEXIST) return FromRados(rc, "fleet: create the ledger");
  return Refresh();
}

Status FleetBudget::Update(const Mutation& mutate, FleetLedger* after) {
  const uint64_t deadline = Aio::NowNs() + (uint64_t{op_timeout_s_} + 1) * 1'000'000'000ull;
  thread_local std::mt19937 rng{std::random_device{}()};
  for (uint32_t attempt = 0;; ++attempt) {
    Result<FleetLedger> read = Read();
    if (!read.ok()) return read.status();
    FleetLedger ledger = read.take();
    const uint64_t now = UnixNowNs();
    for (auto it = ledger.servers.begin(); it != ledger.servers.end();) {
      const bool dead = it->first != server_id_ && it->second.lease_unix_ns + lease_ns_ < now;
      if (!dead) {
        ++it;
        continue;
      }
      const uint64_t id = it->first;
      std::erase_if(ledger.pins, [id](const auto& p) { return p.first.second == id; });
      std::erase_if(ledger.evicting, [id](const auto& e) { return e.second == id; });
      it = ledger.servers.erase(it);
    }
    FleetLedger::Server& me = ledger.servers[server_id_];
    if (me.lease_unix_ns < now) me.lease_unix_ns = now;
    TIER_RETURN_IF_ERROR(mutate(&ledger));
    const std::string old_version = std::to_string(ledger.version);
    ++ledger.version;
    const std::string new_version = std::to_string(ledger.version);
    const std::string text = ledger.Encode();
    rados_write_op_t op = rados_create_write_op();
    if (op == nullptr) return Status::Internal("rados: out of memory");
    rados_write_op_cmpxattr(op, kXattrVersion, LIBRADOS_CMPXATTR_OP_EQ, old_version.data(),
                            old_version.size());
    rados_write_op_write_full(op, text.data(), text.size());
    rados_write_op_setxattr(op, kXattrVersion, new_version.data(), new_version.size());
    // FULL_FORCE: giving bytes back must work on a full pool.
    const int rc = aio_->WriteSync(kObject, op, LIBRADOS_OPERATION_FULL_FORCE, deadline);
    if (rc == 0) {
      if (after != nullptr) *after = std::move(ledger);
      return Status::Ok();
    }
    if (rc != -ECANCELED) return FromRados(rc, "fleet: update the ledger");
    if (Aio::NowNs() >= deadline) {
      return Status::Busy("rados: fleet: the ledger changed under every attempt (" +
                          std::to_string(attempt + 1) + ")");
    }
    // Another server wrote first: read again after a short random pause.
    std::this_thread::sleep_for(std::chrono::microseconds(
        std::uniform_int_distribution<int>(100, 2000 + 500 * std::min(attempt, 20u))(rng)));
  }
}

Status FleetBudget::Reserve(uint64_t bytes, uint64_t* total_bytes) {
  return Update([&](FleetLedger* l) {
    *total_bytes = l->TotalBytes();
    if (*total_bytes + bytes > budget_bytes_) {
      return Status::NoSpace("rados: fleet_budget_bytes=" + std::to_string(budget_bytes_) +
                             " would be exceeded (" + std::to_string(l->committed_bytes) +
                             " stored, " + std::to_string(*total_bytes - l->committed_bytes) +
                             " reserved by " + std::to_string(l->servers.size()) +
                             " servers, this spill needs up to " + std::to_string(bytes) + ")");
    }
    l->servers[server_id_].reserved_bytes += bytes;
    return Status::Ok();
  });
}

Status FleetBudget::Commit(uint64_t reserved_bytes, uint64_t stored_bytes) {
  return Update([&](FleetLedger* l) {
    uint64_t& r = l->servers[server_id_].reserved_bytes;
    r -= std::min(r, reserved_bytes);
    l->committed_bytes += stored_bytes;
    ++l->commits;
    return Status::Ok();
  });
}

Status FleetBudget::Release(uint64_t reserved_bytes, uint64_t committed_bytes) {
  return Update([&](FleetLedger* l) {
    uint64_t& r = l->servers[server_id_].reserved_bytes;
    r -= std::min(r, reserved_bytes);
    l->committed_bytes -= std::min(l->committed_bytes, committed_bytes);
    if (committed_bytes != 0) ++l->commits;
    return Status::Ok();
  });
}

Status FleetBudget::Pin(const std::string& key_hex) {
  return Update([&](FleetLedger* l) {
    if (l->evicting.count(key_hex) != 0) {
      return Status::NotFound("rados: fleet: the checkpoint is being evicted");
    }
    ++l->pins[{key_hex, server_id_}];
    return Status::Ok();
  });
}

Status FleetBudget::Unpin(const std::string& key_hex) {
  return Update([&](FleetLedger* l) {
    auto it = l->pins.find({key_hex, server_id_});
    if (it != l->pins.end() && --it->second == 0) l->pins.erase(it);
    return Status::Ok();
  });
}

Status FleetBudget::BeginEvict(const std::string& key_hex) {
  return Update([&](FleetLedger* l) {
    if (l->Pinned(key_hex) || l->evicting.count(key_hex) != 0) {
      return Status::Busy("rados: fleet: being restored or evicted");
    }
    l->evicting[key_hex] = server_id_;
    return Status::Ok();
  });
}

Status FleetBudget::EndEvict(const std::string& key_hex, uint64_t removed_bytes) {
  return Update([&](FleetLedger* l) {
    l->evicting.erase(key_hex);
    l->committed_bytes -= std::min(l->committed_bytes, removed_bytes);
    if (removed_bytes != 0) ++l->commits;
    return Status::Ok();
  });
}

Status FleetBudget::Refresh() {
  return Update([](FleetLedger*) { return Status::Ok(); });
}

Status FleetBudget::Leave() {
  return Update([&](FleetLedger* l) {
    const uint64_t id = server_id_;
    std::erase_if(l->pins, [id](const auto& p) { return p.first.second == id; });
    std::erase_if(l->evicting, [id](const auto& e) { return e.second == id; });
    l->servers.erase(id);
    return Status::Ok();
  });
}

}  // namespace tier::rados
