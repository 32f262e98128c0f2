#include "messages/caf_error.hpp"

#include <string>

#include <caf/make_message.hpp>
#include <caf/message.hpp>
#include <caf/sec.hpp>

namespace kvactor {

caf::error to_caf_error(const error& x) {
  if (x.code == errc::no_error) return caf::error{};
  auto code = static_cast<uint8_t>(x.code);
  if (x.message.empty()) return caf::error{code, errc_category};
  return caf::error{code, errc_category, caf::make_message(x.message)};
}

caf::error to_caf_error(const error& x, const std::vector<uint64_t>& request_ids) {
  if (x.code == errc::no_error) return caf::error{};
  return caf::error{static_cast<uint8_t>(x.code), errc_category,
                    caf::make_message(x.message, request_ids)};
}

std::vector<uint64_t> request_ids_of(const caf::error& x) {
  if (!x) return {}; // an empty caf::error has no context to read
  const auto& ctx = x.context();
  if (x.category() == errc_category && ctx.size() == 2
      && ctx.match_element<std::vector<uint64_t>>(1))
    return ctx.get_as<std::vector<uint64_t>>(1);
  return {};
}

error from_caf_error(const caf::error& x) {
  if (!x) return error{};
  const auto& ctx = x.context();
  if (x.category() == errc_category) {
    std::string message;
    if (ctx.size() >= 1 && ctx.match_element<std::string>(0))
      message = ctx.get_as<std::string>(0);
    else if (!ctx.empty())
      message = to_string(ctx);
    return error{static_cast<errc>(x.code()), std::move(message)};
  }
  std::string message = to_string(x.category());
  message += ": ";
  if (x.category() == caf::atom("system"))
    message += to_string(static_cast<caf::sec>(x.code()));
  else
    message += std::to_string(x.code());
  if (!ctx.empty()) {
    message += ' ';
    message += to_string(ctx);
  }
  return error{errc::io_error, std::move(message)};
}

} // namespace kvactor
