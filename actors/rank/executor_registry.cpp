#include "actors/rank/executor_registry.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace kvactor {

status executor_registry::add(executor_entry entry) {
  if (entry.name.empty())
    return make_error(errc::invalid_argument, "executor name: must not be empty");
  if (find(entry.name) != nullptr)
    return make_error(errc::invalid_argument,
                      fmt::format("executor name: '{}' is already registered", entry.name));
  if (entry.devices.empty())
    return make_error(errc::invalid_argument,
                      fmt::format("executor '{}': devices: none given", entry.name));
  if (!entry.make)
    return make_error(errc::invalid_argument,
                      fmt::format("executor '{}': make: no factory", entry.name));
  entries_.push_back(std::move(entry));
  return ok();
}

const executor_entry* executor_registry::find(std::string_view name) const {
  auto it = std::find_if(entries_.begin(), entries_.end(),
                         [&](const executor_entry& e) { return e.name == name; });
  return it == entries_.end() ? nullptr : &*it;
}

std::vector<std::string> executor_registry::names() const {
  std::vector<std::string> out;
  for (const auto& e : entries_)
    out.push_back(e.name);
  return out;
}

std::string executor_name(const rank_config& config) {
  return config.executor.empty() ? std::string{to_string(config.device)} : config.executor;
}

expected<const executor_entry*> executor_registry::choose(const rank_config& config) const {
  const auto name = executor_name(config);
  const auto* e = find(name);
  if (e == nullptr)
    return make_error(errc::invalid_argument,
                      fmt::format("executor: '{}' is not registered (registered: {})", name,
                                  fmt::join(names(), ", ")));
  if (std::find(e->devices.begin(), e->devices.end(), config.device) == e->devices.end())
    return make_error(errc::unsupported, fmt::format("executor: '{}' does not run on device {}",
                                                     name, to_string(config.device)));
  return e;
}

} // namespace kvactor
