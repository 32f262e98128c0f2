#include "net/http/responder.hpp"

#include <optional>
#include <utility>

#include "net/http/wire.hpp"

namespace kvactor::http {

responder_impl::responder_impl(std::weak_ptr<exchange_sink> sink, std::shared_ptr<post_gate> gate,
                               bool close_after)
    : sink_(std::move(sink)), gate_(std::move(gate)), close_after_(close_after) {}

void responder_impl::respond(int status, std::string content_type, std::string body,
                             header_list extra_headers) {
  if (closed()) return;
  std::string head = response_head(status, content_type, extra_headers, body.size(), close_after_);
  post({piece_kind::whole, std::move(head), std::move(body)});
}

void responder_impl::begin_stream(int status, std::string content_type, header_list extra_headers) {
  if (closed()) return;
  post({piece_kind::stream_head,
        response_head(status, content_type, extra_headers, std::nullopt, close_after_),
        {}});
}

void responder_impl::write(std::string chunk) {
  if (closed() || chunk.empty()) return; // an empty chunk would end the body
  post({piece_kind::chunk, chunk_of(chunk), {}});
}

void responder_impl::end_stream() {
  if (closed()) return;
  post({piece_kind::stream_end, std::string(last_chunk), {}});
}

void responder_impl::on_disconnect(std::function<void()> f) {
  if (!f) return;
  if (closed()) {
    f();
    return;
  }
  bool posted = false;
  gate_->run_if_open([&] {
    if (auto sink = sink_.lock()) {
      sink->post_watch(shared_from_this(), std::move(f));
      posted = true;
    }
  });
  // The connection is gone (or the server stopped). It marked this responder closed before it
  // went unless the answer had completed.
  if (!posted && closed()) f();
}

void responder_impl::post(piece p) {
  gate_->run_if_open([&] {
    if (auto sink = sink_.lock()) sink->post_piece(shared_from_this(), std::move(p));
  });
}

} // namespace kvactor::http
