// tier/host/identity.h -- how a checkpoint is named: the content ids of its prefix's blocks, the
// 32-byte provider key derived from them, and the prefix hashes the catalog indexes.
//
// A checkpoint's identity is its whole token prefix, given as the content ids of its blocks (an
// engine's block hashes; the traces' 512-token hash_ids). The key is a digest of the namespace and
// every block id: a lookup by key is a lookup by the whole identity, and the catalog still compares
// every block id of a candidate. Pure functions: any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tier_provider.h"

namespace tier {

struct ModelProfile;

// The namespace a server should open its Host with (HostOptions::namespace_id): `name` (a
// deployment's label, "" for none) followed by everything that makes two servers' bytes
// incompatible: the profile's layout fingerprint and the bytes scale. Two servers on one shared
// tier then share checkpoints only when they can use each other's; a mismatched peer is in
// another namespace by construction, whatever it was configured with. Pure.
std::string CheckpointNamespace(const std::string& name, const ModelProfile& profile,
                                uint64_t bytes_scale);

// The 32-byte provider key of a prefix: a digest of the namespace and every block id.
tier_key PrefixKey(const std::string& namespace_id, std::span<const uint64_t> blocks);
// Incremental 64-bit hashes of every prefix of `blocks`: result[k] covers blocks[0..k]. An index
// only: a collision costs a block-by-block comparison, never a wrong hit.
std::vector<uint64_t> PrefixHashes(std::span<const uint64_t> blocks);
// The identity of a tenant's blocks (issue 23; vLLM's cache_salt): every block id mixed with a
// 64-bit salt derived from `tenant` by a bijection, so one tenant's distinct blocks stay distinct
// and its prefix hashes, keys and stored manifests differ from every other tenant's (and from the
// untenanted ones) for identical prompts. "" returns `blocks` unchanged: checkpoints sealed
// without a tenant keep their keys. The Host applies it at Admit, Seal, Prefetch and Describe;
// everything after (catalog, provider key, probe, the manifest a restart re-adopts) sees only
// the tenant's ids. Pure; ~1 ns a block.
std::vector<uint64_t> TenantBlocks(std::string_view tenant, std::span<const uint64_t> blocks);
// A 32-byte key from any text (two XXH3-128 digests with different seeds). For tools and tests.
tier_key KeyFromText(std::string_view text);
// Lowercase hex of the first `bytes` bytes (for logs; never an identity).
std::string KeyHex(const tier_key& key, size_t bytes = 8);
// True when the two keys are equal byte for byte.
bool SameKey(const tier_key& a, const tier_key& b);

}  // namespace tier
