// fuzz_targets.h -- the fuzz targets, as plain functions so the same code runs under libFuzzer
// (libfuzzer_entry.cc, tests/run-fuzz.sh) and over the committed corpus and regression inputs in
// every normal and sanitizer build (FuzzRegression suite). A target aborts, naming the property,
// when a parse result breaks one; otherwise it returns 0.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tier::disk::fuzz {

// The on-disk header and segment-table parser (format.h: PeekHeaderBytes, ParseHeader). The input
// is a header region. It is parsed as is, then again with every checksum recomputed so mutations
// reach the checks behind them. Whatever parses must re-encode to the same bytes, and its tables
// must describe a consistent file (chunks cover each segment exactly, lie inside the file).
int FuzzHeaderParser(const uint8_t* data, size_t size);

// Option parsing (options.h: ParseOptions). The input is lines of key=value. Whatever parses must
// satisfy every documented bound; whatever is refused is INVALID_ARGUMENT with a message.
int FuzzOptionParser(const uint8_t* data, size_t size);

}  // namespace tier::disk::fuzz
