#include "profile_fields.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace tier {
namespace {

// Keeps the first failure of a sequence of reads.
class FirstError {
 public:
  void Take(Status status) {
    if (status_.ok() && !status.ok()) status_ = std::move(status);
  }
  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }

 private:
  Status status_;
};

constexpr uint32_t kMaxLayers = 1024;
constexpr uint32_t kMaxMtpLayers = 64;
constexpr size_t kMaxStateParts = 64;
constexpr uint64_t kMaxKvBytesPerToken = uint64_t{16} << 20;  // 16 MiB
constexpr uint64_t kMaxHiddenStateBytes = uint64_t{1} << 30;  // 1 GiB
constexpr uint64_t kMaxStatePartBytes = uint64_t{64} << 30;   // 64 GiB
constexpr uint32_t kMaxChunkTokens = 4194304;                 // = the trace's input_length bound

void ReadNames(const JsonReader& r, ModelProfile* p, FirstError* e) {
  e->Take(r.Text("/name", 128, IsNameByte, "letters, digits and . _ + -", &p->name));
  e->Take(r.Text("/model", 128, IsPrintableByte, "printable characters", &p->model));
  e->Take(r.Text("/gpu", 128, IsPrintableByte, "printable characters", &p->gpu));
  e->Take(r.Text("/kv_dtype", 64, IsNameByte, "letters, digits and . _ + -", &p->kv_dtype));
}

void ReadLayout(const JsonReader& r, ModelProfile* p, FirstError* e) {
  e->Take(r.Whole("/tokens_per_page", 1u, 65536u, &p->tokens_per_page));
  e->Take(r.Whole("/full_attention_layers", 1u, kMaxLayers, &p->full_attention_layers));
  e->Take(r.Whole("/kv_heads", 1u, 1024u, &p->kv_heads));
  e->Take(r.Whole("/head_dim", 1u, 65536u, &p->head_dim));
  e->Take(r.Whole("/kv_bytes_per_token", uint64_t{1}, kMaxKvBytesPerToken, &p->kv_bytes_per_token));
  if (e->ok() && p->kv_bytes_per_token % p->full_attention_layers != 0) {
    e->Take(r.Problem("/kv_bytes_per_token", "a multiple of full_attention_layers (" +
                                                 std::to_string(p->full_attention_layers) + ")"));
  }
  e->Take(r.Whole("/mtp_layers", 0u, kMaxMtpLayers, &p->mtp_layers));
  e->Take(
      r.Whole("/hidden_state_bytes", uint64_t{0}, kMaxHiddenStateBytes, &p->hidden_state_bytes));
}

void ReadStateImage(const JsonReader& r, ModelProfile* p, FirstError* e) {
  size_t parts = 0;
  e->Take(r.Array("/state_image", kMaxStateParts, &parts));
  if (!e->ok()) return;
  for (size_t i = 0; i < parts; ++i) {
    const std::string at = "/state_image/" + std::to_string(i);
    StatePart part;
    e->Take(r.Object(at));
    if (!e->ok()) return;
    e->Take(r.Text(at + "/name", 64, IsNameByte, "letters, digits and . _ + -", &part.name));
    e->Take(r.Whole(at + "/bytes", uint64_t{0}, kMaxStatePartBytes, &part.bytes));
    p->state_image.push_back(std::move(part));
  }
}

// Nanosecond coefficients: bounds that a 4 Mi-token prefill, decode or a full-checkpoint copy
// cannot push past 2^63 ns.
void ReadCosts(const JsonReader& r, ModelProfile* p, FirstError* e) {
  for (const char* object : {"/prefill", "/decode", "/transfer"}) e->Take(r.Object(object));
  if (!e->ok()) return;
  e->Take(r.Whole("/prefill/chunk_tokens", 1u, kMaxChunkTokens, &p->prefill_chunk_tokens));
  e->Take(r.Number("/prefill/chunk_ns", 0, 1e10, &p->prefill_chunk_ns));
  e->Take(r.Number("/prefill/token_ns", 0, 1e9, &p->prefill_token_ns));
  e->Take(r.Number("/prefill/attention_pair_ns", 0, 1e4, &p->attention_pair_ns));
  e->Take(r.Number("/decode/token_ns", 0, 1e10, &p->decode_token_ns));
  e->Take(r.Number("/transfer/batch_ns", 0, 1e10, &p->transfer_batch_ns));
  e->Take(r.Number("/transfer/op_ns", 0, 1e9, &p->transfer_op_ns));
  e->Take(r.Number("/transfer/d2h_ns_per_byte", 0, 100, &p->d2h_ns_per_byte));
  e->Take(r.Number("/transfer/h2d_ns_per_byte", 0, 100, &p->h2d_ns_per_byte));
}

}  // namespace

Result<std::string> ReadProfileFile(const std::string& path) {
  const std::string where = "model profile '" + path + "'";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return Status(TIER_INVALID_ARGUMENT, where + ": cannot open: " + Status::ErrnoText(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0)
    return Status(TIER_INVALID_ARGUMENT, where + ": " + Status::ErrnoText(errno));
  if (!S_ISREG(st.st_mode)) {
    return Status(TIER_INVALID_ARGUMENT,
                  where + (S_ISDIR(st.st_mode) ? ": is a directory" : ": is not a regular file"));
  }
  if (static_cast<uint64_t>(st.st_size) > kMaxProfileFileBytes) {
    return Status(TIER_INVALID_ARGUMENT, where + ": " + std::to_string(st.st_size) +
                                             " bytes; a profile is at most " +
                                             std::to_string(kMaxProfileFileBytes));
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::read(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status(TIER_INVALID_ARGUMENT, where + ": read: " + Status::ErrnoText(errno));
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  text.resize(done);
  return text;
}

Result<ModelProfile> ReadModelProfile(const JsonInput& input, const std::string& where) {
  if (!input.doc.is_object()) return Status(TIER_INVALID_ARGUMENT, where + ": not a JSON object");
  const JsonReader reader(input, where);
  ModelProfile profile;
  FirstError error;
  ReadNames(reader, &profile, &error);
  ReadLayout(reader, &profile, &error);
  ReadStateImage(reader, &profile, &error);
  ReadCosts(reader, &profile, &error);
  if (!error.ok()) return error.status();
  return profile;
}

}  // namespace tier
