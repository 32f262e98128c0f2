#include "actors/inject/target.hpp"

#include <charconv>

#include <fmt/format.h>

namespace kvactor {

namespace {

constexpr std::string_view driver_takes = "kvactor::request_spec";
constexpr std::string_view driver_answers = "kvactor::request_await";
constexpr std::string_view rank_takes = "kvactor::step_plan";

} // namespace

expected<inject_target> parse_inject_target(std::string_view name, int32_t num_ranks) {
  if (name == "driver") return inject_target{inject_target::kind::driver, 0};
  auto bad = [&] {
    return make_error(errc::invalid_argument,
                      fmt::format("target: unknown actor '{}' (expected driver or rank[0] .. "
                                  "rank[{}])",
                                  name, num_ranks - 1));
  };
  constexpr std::string_view prefix = "rank[";
  if (name.size() <= prefix.size() + 1 || name.substr(0, prefix.size()) != prefix
      || name.back() != ']')
    return bad();
  auto digits = name.substr(prefix.size(), name.size() - prefix.size() - 1);
  int32_t index = -1;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
  if (ec != std::errc{} || end != digits.data() + digits.size()) return bad();
  if (index < 0 || index >= num_ranks)
    return make_error(
        errc::invalid_argument,
        fmt::format("target: {} does not exist: this process runs {} rank(s)", name, num_ranks));
  return inject_target{inject_target::kind::rank, index};
}

status check_injectable(const inject_target& target, std::string_view type) {
  const bool driver = target.k == inject_target::kind::driver;
  if (type == (driver ? driver_takes : rank_takes) || (driver && type == driver_answers))
    return ok();
  return make_error(errc::invalid_argument,
                    fmt::format("message type: {} cannot be injected into {} (it takes {})", type,
                                to_string(target),
                                driver ? fmt::format("{} or {}", driver_takes, driver_answers)
                                       : std::string{rank_takes}));
}

std::string to_string(const inject_target& target) {
  return target.k == inject_target::kind::driver ? std::string{"driver"}
                                                 : fmt::format("rank[{}]", target.index);
}

} // namespace kvactor
