// profile_fields.h -- a model profile's fields, their types and their ranges: what
// LoadModelProfile accepts. The ranges keep every product the cost model and the Host form
// (bytes per checkpoint, nanoseconds per prefill) far inside 64 bits.
#pragma once

#include <string>

#include <tier/host/model_profile.h>
#include <tier/status.h>

#include "json_input.h"

namespace tier {

constexpr size_t kMaxProfileFileBytes = 1 << 20;  // a profile is a few KiB

// The file's text: a regular file of at most kMaxProfileFileBytes. INVALID_ARGUMENT naming the
// file otherwise (missing, a directory or device, too large, unreadable). Any thread.
Result<std::string> ReadProfileFile(const std::string& path);

// Every field of `input` checked (type and range) into a profile; INVALID_ARGUMENT
// "<where>: field 'prefill.token_ns' is -1; expected a number from 0 to 1000000000" otherwise.
// Fields it does not know ("sources") are ignored. Pure.
Result<ModelProfile> ReadModelProfile(const JsonInput& input, const std::string& where);

}  // namespace tier
