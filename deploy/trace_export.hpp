// A recorded run as Chrome trace-event JSON (the format Perfetto and chrome://tracing open).
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "messages/trace.hpp"

namespace kvactor {

/// {"traceEvents": [...], "displayTimeUnit": "ms"}, times in microseconds from the run's start:
///   - a thread track per actor (a "thread_name" metadata event each), the driver's first;
///   - each message a 1 µs slice named after its type on the sender's track and on the
///     receiver's, joined by a flow arrow (ids: the record's index), its summary in args;
///   - each step a span "step N" on a "steps" track, from its first message to its last;
///   - each CUDA graph capture a span of its duration on the track of the rank that reported it,
///     ending when it did.
nlohmann::json chrome_trace(const std::vector<trace_record>& records);

} // namespace kvactor
