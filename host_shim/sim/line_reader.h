// line_reader.h -- lines of a text input (a regular file or a pipe), each at most a given length,
// so that one endless line cannot take all memory.
#pragma once

#include <cstddef>
#include <string>

#include <tier/status.h>

namespace tier::sim {

class LineReader {
 public:
  // Opens `path`: a regular file or a pipe (`--trace <(zcat t.gz)`). INVALID_ARGUMENT with
  // "<what> 'path': is a directory" (or "is a device", "cannot open: ...") otherwise.
  static Result<LineReader> Open(const std::string& path, const std::string& what,
                                 size_t max_line_bytes);
  ~LineReader();
  LineReader(LineReader&& other) noexcept;
  LineReader& operator=(LineReader&&) = delete;

  // The next line without its '\n' (a final line without one counts) into *line; false at the
  // end. INVALID_ARGUMENT naming the line when it is longer than the bound, IO_ERROR when a read
  // fails. One thread at a time.
  Result<bool> Next(std::string* line);
  // The number of the line Next() returned last (1-based).
  size_t line_number() const { return line_number_; }

 private:
  LineReader(int fd, std::string what, size_t max_line_bytes)
      : fd_(fd), what_(std::move(what)), max_line_bytes_(max_line_bytes) {}
  Status Fill();

  int fd_ = -1;
  std::string what_;  // "trace 'path'"
  size_t max_line_bytes_;
  std::string buffer_;  // read but not yet returned
  size_t start_ = 0;    // where the next line begins in buffer_
  bool eof_ = false;
  size_t line_number_ = 0;
};

}  // namespace tier::sim
