#include "net/http/request_parser.hpp"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <limits>

// Beast 1.74 asserts falsely when the final chunk's line arrives split ("0\r\n", then "\r"):
// basic_parser.ipp's `BOOST_ASSERT(n >= 5)`, fixed upstream in boostorg/beast#2861; the code past
// it is right. A client must not be able to abort a build with assertions on.
#define BOOST_DISABLE_ASSERTS
#include <boost/asio/buffer.hpp>
#include <boost/beast/core/buffers_range.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>

namespace kvactor::http {
namespace {

namespace beast = boost::beast;

// A string body that grows as bytes arrive. Beast's string_body reserves the whole
// Content-Length up front: a client announcing max_body_bytes and sending nothing would pin that
// much memory per connection.
struct growing_body {
  using value_type = std::string;

  class reader {
  public:
    template <bool is_request, class Fields>
    reader(beast::http::header<is_request, Fields>&, value_type& body) : body_(body) {}

    void init(const boost::optional<std::uint64_t>&, beast::error_code& ec) { ec = {}; }

    template <class ConstBufferSequence>
    size_t put(const ConstBufferSequence& buffers, beast::error_code& ec) {
      size_t n = 0;
      for (auto b : beast::buffers_range_ref(buffers)) {
        body_.append(static_cast<const char*>(b.data()), b.size());
        n += b.size();
      }
      ec = {};
      return n;
    }

    void finish(beast::error_code& ec) { ec = {}; }

  private:
    value_type& body_;
  };
};

int status_for(const beast::error_code& ec) {
  if (ec == beast::http::error::body_limit) return 413;
  if (ec == beast::http::error::header_limit) return 431;
  return 400;
}

std::string lower(beast::string_view s) {
  std::string out(s.data(), s.size());
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

} // namespace

struct request_parser::state {
  beast::http::request_parser<growing_body> parser;
  size_t max_held = 0; // unconsumed bytes a caller may hold: the header limit
  int refused = 0;
  bool continue_taken = false;
};

request_parser::request_parser(parse_limits limits) : self_(std::make_unique<state>()) {
  auto& p = self_->parser;
  self_->max_held = limits.max_header_bytes;
  p.eager(true); // the body too, as far as the bytes go
  p.body_limit(static_cast<std::uint64_t>(limits.max_body_bytes));
  p.header_limit(static_cast<std::uint32_t>(
      std::min<size_t>(limits.max_header_bytes, std::numeric_limits<std::uint32_t>::max())));
}

request_parser::~request_parser() = default;

size_t request_parser::feed(std::string_view bytes) {
  auto& p = self_->parser;
  size_t used = 0;
  while (self_->refused == 0 && !p.is_done() && used < bytes.size()) {
    beast::error_code ec;
    const size_t n = p.put(boost::asio::buffer(bytes.data() + used, bytes.size() - used), ec);
    used += n;
    if (ec == beast::http::error::need_more) break;
    if (ec) self_->refused = status_for(ec);
    if (n == 0) break; // no progress without an error: wait for more bytes
  }
  // Beast bounds the head, not a chunk's size line: an endless chunk extension would make the
  // caller hold ever more bytes.
  const size_t held = bytes.size() - used;
  if (self_->refused == 0 && !p.is_done() && held > self_->max_held)
    self_->refused = p.is_header_done() ? 400 : 431;
  return used;
}

bool request_parser::done() const {
  return self_->refused == 0 && self_->parser.is_done();
}

int request_parser::refused() const {
  return self_->refused;
}

bool request_parser::take_continue() {
  auto& p = self_->parser;
  if (self_->continue_taken || self_->refused != 0 || !p.is_header_done() || p.is_done())
    return false;
  auto expect = p.get().find(beast::http::field::expect);
  if (expect == p.get().end() || lower(expect->value()) != "100-continue") return false;
  self_->continue_taken = true;
  return true;
}

bool request_parser::keep_alive() const {
  return self_->parser.keep_alive();
}

request request_parser::take() {
  auto message = self_->parser.release();
  request out;
  out.method = std::string(message.method_string().data(), message.method_string().size());
  out.target = std::string(message.target().data(), message.target().size());
  for (const auto& field : message)
    out.headers.emplace_back(lower(field.name_string()),
                             std::string(field.value().data(), field.value().size()));
  out.body = std::move(message.body());
  return out;
}

} // namespace kvactor::http
