#include "actors/chaos/chaos_link.hpp"

#include <charconv>
#include <cmath>
#include <string>

#include <fmt/format.h>

namespace kvactor {

namespace {

error bad_spec(std::string_view text, std::string_view why) {
  return make_error(errc::invalid_argument, fmt::format("--chaos: '{}': {}", text, why));
}

} // namespace

expected<chaos_spec> parse_chaos_spec(std::string_view text) {
  const auto colon = text.find(':');
  if (colon == std::string_view::npos) return bad_spec(text, "expected SEED:RATE, e.g. 7:0.2");
  const auto seed_text = text.substr(0, colon);
  const auto rate_text = std::string{text.substr(colon + 1)};
  chaos_spec spec;
  const auto [end, ec] =
      std::from_chars(seed_text.data(), seed_text.data() + seed_text.size(), spec.seed);
  if (ec != std::errc{} || end != seed_text.data() + seed_text.size() || seed_text.empty())
    return bad_spec(text, fmt::format("SEED '{}' is not an unsigned integer", seed_text));
  size_t used = 0;
  try {
    spec.rate = std::stod(rate_text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != rate_text.size() || !std::isfinite(spec.rate) || spec.rate < 0.0
      || spec.rate > 1.0)
    return bad_spec(text, fmt::format("RATE '{}' is not a probability in [0, 1]", rate_text));
  return spec;
}

std::string_view to_string(link_fault f) {
  switch (f) {
  case link_fault::deliver: return "deliver";
  case link_fault::drop: return "drop";
  case link_fault::duplicate: return "duplicate";
  case link_fault::delay: return "delay";
  }
  return "?";
}

chaos_link::chaos_link(const chaos_spec& spec, uint64_t link_id, link_kind kind)
    : spec_(spec), kind_(kind), state_(spec.seed ^ (0x9e3779b97f4a7c15ull * (link_id + 1))) {}

uint64_t chaos_link::draw() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double chaos_link::uniform() {
  return static_cast<double>(draw() >> 11) * 0x1.0p-53;
}

link_decision chaos_link::next() {
  ++counts_.messages;
  link_decision d;
  if (uniform() >= spec_.rate) return d;
  const double late = uniform();
  d.delay = std::chrono::microseconds(
      static_cast<int64_t>(late * static_cast<double>(spec_.max_delay.count())));
  switch (kind_ == link_kind::lossless ? 2 : draw() % 3) {
  case 0:
    d.fault = link_fault::drop;
    ++counts_.dropped;
    break;
  case 1:
    d.fault = link_fault::duplicate;
    ++counts_.duplicated;
    break;
  default:
    d.fault = link_fault::delay;
    ++counts_.delayed;
    break;
  }
  return d;
}

} // namespace kvactor
