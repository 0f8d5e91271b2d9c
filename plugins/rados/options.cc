#include "options.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string_view>

#include <tier/provider/option_text.h>

namespace tier::rados {
namespace {

Status Bad(std::string_view key, std::string_view expected, std::string_view got) {
  return Status::InvalidArgument("rados: option '" + std::string(key) + "': expected " +
                                 std::string(expected) + ", got '" +
                                 std::string(got.substr(0, 128)) + "'");
}

// A string option: no NUL, bounded.
bool PlainText(std::string_view text, size_t max_bytes) {
  return text.size() <= max_bytes && text.find('\0') == std::string_view::npos;
}

constexpr const char* kKnown =
    "conf, pool, client, keyring, capacity_bytes, capacity_gib, object_mib, queue_depth, "
    "compression, zstd_level, op_timeout_s, threads, lease_grace_s, sweep_interval_s, "
    "namespace_prefix, auth_key_file, admin_socket, fleet_budget_bytes, fleet_budget_gib, "
    "fleet_lease_s";

// Applies one option to `out`; `have_capacity` tracks capacity_bytes/capacity_gib.
Status ApplyOption(std::string_view key, std::string_view value, RadosOptions* out,
                   bool* have_capacity) {
  int64_t i = 0;
  uint64_t u = 0;
  if (key == "conf" || key == "keyring" || key == "auth_key_file" || key == "admin_socket") {
    if (value.empty() || !PlainText(value, 4000)) return Bad(key, "a file path", value);
    std::string* field = key == "conf"            ? &out->conf
                         : key == "keyring"       ? &out->keyring
                         : key == "auth_key_file" ? &out->auth_key_file
                                                  : &out->admin_socket;
    *field = std::string(value);
  } else if (key == "pool") {
    if (value.empty() || !PlainText(value, 256)) return Bad(key, "a pool name", value);
    out->pool = std::string(value);
  } else if (key == "client") {
    std::string_view id = value;
    if (id.rfind("client.", 0) == 0) id.remove_prefix(7);
    if (id.empty() || !PlainText(id, 128) || id.find_first_of(" \t\n") != std::string_view::npos) {
      return Bad(key, "a cephx client id such as 'tier' or 'client.tier'", value);
    }
    out->client = std::string(id);
  } else if (key == "capacity_bytes" || key == "capacity_gib") {
    if (*have_capacity) {
      return Status::InvalidArgument("rados: option '" + std::string(key) +
                                     "': give one of capacity_bytes and capacity_gib, not both");
    }
    if (key == "capacity_bytes") {
      if (!provider::ParseUnsigned(value, 1, UINT64_MAX >> 1, &u)) {
        return Bad(key, "a decimal byte count in [1, 2^63)", value);
      }
      out->capacity_bytes = u;
    } else {
      double gib = 0;
      if (!provider::ParseDecimal(value, &gib) || !(gib > 0) || gib >= 8.0 * 1024 * 1024 * 1024) {
        return Bad(key, "a positive decimal number of GiB (e.g. 64 or 0.5)", value);
      }
      out->capacity_bytes = static_cast<uint64_t>(std::llround(gib * 1073741824.0));
      if (out->capacity_bytes == 0) return Bad(key, "at least one byte", value);
    }
    *have_capacity = true;
  } else if (key == "object_mib") {
    if (!provider::ParseInteger(value, 1, 128, &i))
      return Bad(key, "an integer in [1, 128]", value);
    out->object_bytes = static_cast<uint32_t>(i) << 20;
  } else if (key == "queue_depth") {
    if (!provider::ParseInteger(value, 1, 256, &i))
      return Bad(key, "an integer in [1, 256]", value);
    out->queue_depth = static_cast<uint32_t>(i);
  } else if (key == "compression") {
    if (value == "off") {
      out->compression = CompressionMode::kOff;
    } else if (value == "zstd") {
      out->compression = CompressionMode::kZstd;
    } else if (value == "auto") {
      out->compression = CompressionMode::kAuto;
    } else {
      return Bad(key, "one of off, zstd, auto", value);
    }
  } else if (key == "zstd_level") {
    if (!provider::ParseInteger(value, -7, 19, &i))
      return Bad(key, "an integer in [-7, 19]", value);
    out->zstd_level = static_cast<int>(i);
  } else if (key == "op_timeout_s") {
    if (!provider::ParseInteger(value, 1, 3600, &i))
      return Bad(key, "an integer in [1, 3600]", value);
    out->op_timeout_s = static_cast<uint32_t>(i);
  } else if (key == "threads") {
    if (!provider::ParseInteger(value, 1, 64, &i)) return Bad(key, "an integer in [1, 64]", value);
    out->threads = static_cast<uint32_t>(i);
  } else if (key == "lease_grace_s") {
    if (!provider::ParseInteger(value, 1, 86400, &i))
      return Bad(key, "an integer in [1, 86400]", value);
    out->lease_grace_s = static_cast<uint32_t>(i);
  } else if (key == "sweep_interval_s") {
    if (!provider::ParseInteger(value, 0, 86400, &i))
      return Bad(key, "an integer in [0, 86400]", value);
    out->sweep_interval_s = static_cast<uint32_t>(i);
  } else if (key == "fleet_budget_bytes") {
    if (!provider::ParseInteger(value, 1, INT64_MAX, &i)) return Bad(key, "a byte count", value);
    out->fleet_budget_bytes = static_cast<uint64_t>(i);
  } else if (key == "fleet_budget_gib") {
    char* end = nullptr;
    const std::string text(value);
    const double gib = std::strtod(text.c_str(), &end);
    if (text.empty() || end == nullptr || *end != '\0' || !(gib > 0) || gib > 1e9) {
      return Bad(key, "a positive number of GiB", value);
    }
    out->fleet_budget_bytes = static_cast<uint64_t>(std::llround(gib * 1073741824.0));
  } else if (key == "fleet_lease_s") {
    if (!provider::ParseInteger(value, 3, 3600, &i))
      return Bad(key, "an integer in [3, 3600]", value);
    out->fleet_lease_s = static_cast<uint32_t>(i);
  } else if (key == "namespace_prefix") {
    if (!PlainText(value, 4000)) return Bad(key, "a string shorter than 4000 bytes", value);
    out->namespace_prefix = std::string(value);
  } else {
    return Status::InvalidArgument("rados: unknown option '" + std::string(key).substr(0, 64) +
                                   "' (known: " + kKnown + ")");
  }
  return Status::Ok();
}

}  // namespace

const char* CompressionName(CompressionMode mode) {
  switch (mode) {
    case CompressionMode::kOff:
      return "off";
    case CompressionMode::kZstd:
      return "zstd";
    case CompressionMode::kAuto:
      return "auto";
  }
  return "?";
}

Result<RadosOptions> ParseOptions(std::span<const tier_option> options) {
  RadosOptions out;
  std::set<std::string, std::less<>> seen;
  bool have_capacity = false;
  for (const tier_option& option : options) {
    if (option.key == nullptr || option.value == nullptr) {
      return Status::InvalidArgument("rados: option with a NULL key or value");
    }
    const std::string_view key = option.key;
    if (!seen.insert(std::string(key)).second) {
      return Status::InvalidArgument("rados: option '" + std::string(key).substr(0, 64) +
                                     "' given twice");
    }
    TIER_RETURN_IF_ERROR(ApplyOption(key, option.value, &out, &have_capacity));
  }
  if (out.pool.empty()) {
    return Status::InvalidArgument("rados: option 'pool' is required (the RADOS pool to use)");
  }
  if (!have_capacity) {
    return Status::InvalidArgument(
        "rados: option 'capacity_bytes' or 'capacity_gib' is required (the byte budget)");
  }
  // The sweep rule needs a writer to publish within half the grace of its last lease refresh,
  // and a publish to land within op_timeout_s (README.md, "The sweep rule").
  if (out.lease_grace_s < 2 * out.op_timeout_s + 2) {
    return Status::InvalidArgument(
        "rados: option 'lease_grace_s'=" + std::to_string(out.lease_grace_s) +
        ": must be at least 2 x op_timeout_s + 2 = " + std::to_string(2 * out.op_timeout_s + 2) +
        " (a live spill must never look dead to the sweep)");
  }
  if (seen.count("fleet_budget_bytes") != 0 && seen.count("fleet_budget_gib") != 0) {
    return Status::InvalidArgument(
        "rados: option 'fleet_budget_gib': give one of fleet_budget_bytes and fleet_budget_gib, "
        "not both");
  }
  return out;
}

}  // namespace tier::rados
