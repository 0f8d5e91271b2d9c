#include "powerloss_util.h"

#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <stdexcept>

namespace tier::powerloss::test {
namespace {

std::string ScratchRoot() {
  struct stat st {};
  if (::stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) && ::access("/dev/shm", W_OK) == 0) {
    return "/dev/shm";
  }
  const char* tmp = std::getenv("TMPDIR");
  return tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
}

}  // namespace

ScratchDir::ScratchDir(const std::string& tag) {
  std::string templ = ScratchRoot() + "/tier-powerloss-" + tag + "-XXXXXX";
  if (::mkdtemp(templ.data()) == nullptr) throw std::runtime_error("mkdtemp " + templ + " failed");
  path_ = templ;
}

ScratchDir::~ScratchDir() {
  ::nftw(
      path_.c_str(),
      [](const char* fpath, const struct stat*, int, struct FTW*) { return ::remove(fpath); }, 16,
      FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

std::string ScratchDir::Sub(const std::string& name) const {
  const std::string p = path_ + "/" + name;
  ::mkdir(p.c_str(), 0700);
  return p;
}

}  // namespace tier::powerloss::test
