#include "net/cookie.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <openssl/rand.h>

namespace kvactor {

namespace {

constexpr size_t min_cookie_chars = 16;

error cookie_error(const std::string& path, const std::string& why) {
  return make_error(errc::io_error, fmt::format("cluster cookie {}: {}", path, why));
}

std::string fresh_secret() {
  unsigned char bits[32];
  if (RAND_bytes(bits, sizeof bits) != 1) throw std::runtime_error("RAND_bytes failed");
  std::string hex;
  for (unsigned char b : bits)
    hex += fmt::format("{:02x}", b);
  return hex + "\n";
}

std::string parent_of(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

// Writes a fresh cookie to a private temporary file and links it into place: link() fails when
// another process got there first, and nobody ever reads a half-written cookie.
status create_cookie(const std::string& path) {
  const auto dir = parent_of(path);
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    return cookie_error(path, fmt::format("cannot create {}: {}", dir, std::strerror(errno)));
  std::string tmp = path + ".XXXXXX";
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0)
    return cookie_error(path, fmt::format("cannot write in {}: {}", dir, std::strerror(errno)));
  const auto secret = fresh_secret();
  const bool written =
      ::fchmod(fd, 0600) == 0
      && ::write(fd, secret.data(), secret.size()) == static_cast<ssize_t>(secret.size())
      && ::fsync(fd) == 0;
  ::close(fd);
  const int linked = written ? ::link(tmp.c_str(), path.c_str()) : -1;
  const int link_errno = errno;
  ::unlink(tmp.c_str());
  if (!written) return cookie_error(path, "cannot write the new cookie");
  if (linked != 0 && link_errno != EEXIST)
    return cookie_error(path, fmt::format("cannot create it: {}", std::strerror(link_errno)));
  return ok();
}

expected<std::string> read_cookie(const std::string& path, const struct stat& st) {
  if ((st.st_mode & 077) != 0)
    return cookie_error(path, fmt::format("mode {:04o} lets other users read it; chmod 600 {}",
                                          st.st_mode & 07777, path));
  std::ifstream in(path);
  if (!in) return cookie_error(path, "cannot read it");
  std::stringstream all;
  all << in.rdbuf();
  std::string secret = all.str();
  while (!secret.empty() && std::isspace(static_cast<unsigned char>(secret.back())))
    secret.pop_back();
  if (secret.size() < min_cookie_chars)
    return cookie_error(path, fmt::format("{} characters is too short for a secret (at least {})",
                                          secret.size(), min_cookie_chars));
  return secret;
}

} // namespace

expected<std::string> cookie_path() {
  if (const char* file = std::getenv("KVACTOR_COOKIE_FILE"); file && *file)
    return std::string(file);
  if (const char* home = std::getenv("HOME"); home && *home)
    return std::string(home) + "/.kvactor/cookie";
  return make_error(errc::invalid_argument,
                    "cluster cookie: neither KVACTOR_COOKIE_FILE nor HOME is set; set "
                    "KVACTOR_COOKIE_FILE to a file only this user can read");
}

expected<std::string> load_or_create_cookie(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno != ENOENT) return cookie_error(path, std::strerror(errno));
    if (auto made = create_cookie(path); !made) return made.err();
    if (::stat(path.c_str(), &st) != 0) return cookie_error(path, std::strerror(errno));
  }
  return read_cookie(path, st);
}

expected<std::string> machine_cookie() {
  auto path = cookie_path();
  if (!path) return path.err();
  return load_or_create_cookie(*path);
}

} // namespace kvactor
