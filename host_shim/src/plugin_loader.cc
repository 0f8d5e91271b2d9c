#include <tier/host/plugin_loader.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <vector>

namespace tier {
namespace {

Status LoadError(const std::string& path, const std::string& cause) {
  return Status(TIER_INVALID_ARGUMENT, "cannot load tier plugin '" + path + "': " + cause);
}

std::string Version(uint32_t major, uint32_t minor) {
  return std::to_string(major) + "." + std::to_string(minor);
}

bool HasElfMagic(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char magic[4] = {};
  const ssize_t n = ::read(fd, magic, sizeof(magic));
  ::close(fd);
  return n == 4 && std::memcmp(magic,
                               "\x7f"
                               "ELF",
                               4) == 0;
}

struct RequiredSlot {
  const char* name;
  size_t offset;
};

#define TIER_SLOT(field) \
  { #field, offsetof(tier_provider, field) }
constexpr RequiredSlot kRequiredSlots[] = {
    TIER_SLOT(open),      TIER_SLOT(close),       TIER_SLOT(info),    TIER_SLOT(stats),
    TIER_SLOT(stat),      TIER_SLOT(spill),       TIER_SLOT(restore), TIER_SLOT(remove),
    TIER_SLOT(enumerate), TIER_SLOT(plan_restore)};
#undef TIER_SLOT

bool FileExists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string ExecutableDir() {
  char buffer[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buffer, sizeof(buffer) - 1);
  if (n <= 0) return {};
  std::string exe(buffer, static_cast<size_t>(n));
  const size_t slash = exe.rfind('/');
  return slash == std::string::npos ? std::string() : exe.substr(0, slash);
}

}  // namespace

Result<std::shared_ptr<PluginLibrary>> PluginLibrary::Load(const std::string& path,
                                                           const tier_host_services* host,
                                                           uint32_t host_abi_minor) {
  if (path.empty()) return LoadError(path, "no plugin path given");
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    return LoadError(path, err == ENOENT ? "no such file" : std::strerror(err));
  }
  if (S_ISDIR(st.st_mode)) return LoadError(path, "is a directory, not a shared object");
  if (!HasElfMagic(path)) {
    // Still ask the dynamic loader, so the message carries its own words.
    void* probe = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (probe != nullptr) {
      ::dlclose(probe);
    } else {
      const char* why = ::dlerror();
      return LoadError(path,
                       std::string("not a shared object (") + (why ? why : "no ELF header") + ")");
    }
  }
  // RTLD_NODELETE: never unmapped (see plugin_loader.h).
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (handle == nullptr) {
    const char* why = ::dlerror();
    return LoadError(path, std::string("dlopen failed: ") + (why ? why : "unknown error"));
  }
  std::shared_ptr<PluginLibrary> library(new PluginLibrary());
  library->handle_ = handle;  // dlclose'd by the destructor on every path below
  library->path_ = path;
  library->host_abi_minor_ = host_abi_minor;

  ::dlerror();
  void* symbol = ::dlsym(handle, TIER_PROVIDER_ENTRY_SYMBOL);
  if (symbol == nullptr) {
    return LoadError(path, std::string("no entry symbol '") + TIER_PROVIDER_ENTRY_SYMBOL +
                               "' (not a tier provider?)");
  }
  auto entry = reinterpret_cast<tier_provider_entry_fn>(symbol);
  const tier_provider* table = nullptr;
  const tier_status status = entry(TIER_ABI_VERSION_MAJOR, host_abi_minor, host, &table);
  const std::string host_version = Version(TIER_ABI_VERSION_MAJOR, host_abi_minor);
  if (table != nullptr && table->abi_major != TIER_ABI_VERSION_MAJOR) {
    return LoadError(path, "ABI major version mismatch: plugin " +
                               Version(table->abi_major, table->abi_minor) + ", host " +
                               host_version);
  }
  if (status != TIER_OK) {
    return LoadError(path, std::string("entry point refused host ABI ") + host_version + " (" +
                               tier_status_name(status) + ")");
  }
  if (table == nullptr) return LoadError(path, "entry point returned no provider table");
  if (table->struct_size < TIER_PROVIDER_V1_0_SIZE) {
    return LoadError(path, "provider table too short: " + std::to_string(table->struct_size) +
                               " bytes, ABI 1.0 requires at least " +
                               std::to_string(TIER_PROVIDER_V1_0_SIZE));
  }
  for (const RequiredSlot& slot : kRequiredSlots) {
    const void* fn =
        *reinterpret_cast<void* const*>(reinterpret_cast<const char*>(table) + slot.offset);
    if (fn == nullptr) {
      return LoadError(path,
                       std::string("provider table misses required slot '") + slot.name + "'");
    }
  }
  if (table->name == nullptr || table->name[0] == '\0') {
    return LoadError(path, "provider table has no name");
  }
  library->table_ = table;
  return library;
}

PluginLibrary::~PluginLibrary() {
  if (handle_ != nullptr) ::dlclose(handle_);
}

uint32_t PluginLibrary::negotiated_abi_minor() const {
  return table_->abi_minor < host_abi_minor_ ? table_->abi_minor : host_abi_minor_;
}

std::string PluginLibrary::AbiDescription() const {
  return Version(TIER_ABI_VERSION_MAJOR, negotiated_abi_minor()) + " (host " +
         Version(TIER_ABI_VERSION_MAJOR, host_abi_minor_) + ", plugin " +
         Version(table_->abi_major, table_->abi_minor) + ")";
}

bool PluginLibrary::HasSlot(size_t offset, size_t size) const {
  if (table_->struct_size < offset + size) return false;
  return *reinterpret_cast<void* const*>(reinterpret_cast<const char*>(table_) + offset) != nullptr;
}

std::string ResolvePluginPath(const std::string& name_or_path) {
  if (name_or_path.find('/') != std::string::npos ||
      (name_or_path.size() > 3 && name_or_path.compare(name_or_path.size() - 3, 3, ".so") == 0)) {
    return name_or_path;
  }
  const std::string file = "libtier_" + name_or_path + ".so";
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("TIER_PLUGIN_PATH"); env != nullptr) {
    std::stringstream list(env);
    std::string dir;
    while (std::getline(list, dir, ':')) {
      if (!dir.empty()) dirs.push_back(dir);
    }
  }
  if (const std::string exe_dir = ExecutableDir(); !exe_dir.empty()) {
    dirs.push_back(exe_dir + "/../" TIER_PLUGIN_INSTALL_DIR);
  }
#ifdef TIER_BUILD_PLUGIN_DIR
  dirs.push_back(TIER_BUILD_PLUGIN_DIR);
#endif
  for (const std::string& dir : dirs) {
    if (FileExists(dir + "/" + file)) return dir + "/" + file;
  }
  return name_or_path;
}

}  // namespace tier
