// The cluster cookie file: made on first use, private, shared by processes that start together,
// and refused when other users could read it.
#include "net/cookie.hpp"
#include "tests/support/temp_dir.hpp"

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <set>
#include <vector>

namespace kvactor {
namespace {

namespace fs = std::filesystem;
using test::temp_dir;

TEST(ClusterCookie, IsCreatedPrivateOnFirstUseAndReadBackAfter) {
  temp_dir d("kvactor-cookie");
  const auto file = (d.path / "sub" / "cookie").string();
  auto first = load_or_create_cookie(file);
  ASSERT_TRUE(first) << first.err().message;
  EXPECT_EQ(first->size(), 64u) << "256 random bits in hex";
  struct stat st {};
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat((d.path / "sub").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  auto again = load_or_create_cookie(file);
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, *first);
}

TEST(ClusterCookie, ProcessesStartingTogetherAgreeOnOneCookie) {
  temp_dir d("kvactor-cookie");
  const auto file = (d.path / "cookie").string();
  std::vector<std::future<expected<std::string>>> racing;
  for (int i = 0; i < 8; ++i)
    racing.push_back(std::async(std::launch::async, [&] { return load_or_create_cookie(file); }));
  std::set<std::string> seen;
  for (auto& r : racing) {
    auto c = r.get();
    ASSERT_TRUE(c) << c.err().message;
    seen.insert(*c);
  }
  EXPECT_EQ(seen.size(), 1u);
}

TEST(ClusterCookie, AFileOthersCanReadIsRefusedNamingItsMode) {
  temp_dir d("kvactor-cookie");
  const auto file = (d.path / "cookie").string();
  std::ofstream(file) << "0123456789abcdef0123456789abcdef\n";
  ::chmod(file.c_str(), 0644);
  auto c = load_or_create_cookie(file);
  ASSERT_FALSE(c);
  EXPECT_NE(c.err().message.find("mode 0644 lets other users read it; chmod 600"),
            std::string::npos)
      << c.err().message;
}

TEST(ClusterCookie, ATooShortSecretIsRefused) {
  temp_dir d("kvactor-cookie");
  const auto file = (d.path / "cookie").string();
  std::ofstream(file) << "short\n";
  ::chmod(file.c_str(), 0600);
  auto c = load_or_create_cookie(file);
  ASSERT_FALSE(c);
  EXPECT_NE(c.err().message.find("5 characters is too short"), std::string::npos);
}

TEST(ClusterCookie, TheEnvironmentNamesTheFile) {
  ::setenv("KVACTOR_COOKIE_FILE", "/somewhere/cookie", 1);
  auto p = cookie_path();
  ::unsetenv("KVACTOR_COOKIE_FILE");
  ASSERT_TRUE(p);
  EXPECT_EQ(*p, "/somewhere/cookie");
}

} // namespace
} // namespace kvactor
