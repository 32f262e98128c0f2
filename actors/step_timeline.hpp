// When each step passes each point of its way between the driver, the nodes and the ranks, noted
// per process for the fan-out profile (`--debug-step-times FILE` on `kvactor run` and `kvactor
// node`; bench/step_times.py joins the files of one host). Off unless enabled: a mark is then an
// atomic load or two. On, a mark takes a process-wide lock, and the marks stay in memory until the
// next flush (a run's end, a node's release). Times are the steady clock's, the host's monotonic
// clock, which every process of a host shares, so the files of processes on one machine compare.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "messages/errc.hpp"

namespace kvactor {

/// The points, in the order a cluster step passes them (a local step: plan, rank, done).
enum class step_point : uint8_t {
  driver_plan,      ///< the driver actor starts sending the step
  driver_send,      ///< the driver's thread starts writing a node's step frame
  driver_written,   ///< that frame is written to the node's socket
  node_read,        ///< the node's channel thread has the whole frame
  node_relay,       ///< the node actor starts relaying the step to its ranks
  rank_received,    ///< a rank actor takes the step
  rank_answered,    ///< the rank actor answers it
  node_gathered,    ///< the node actor has every rank's answer
  node_written,     ///< the node's answer frame is written to the driver's socket
  driver_read,      ///< the driver's reader thread has a node's answer frame
  driver_answer,    ///< the driver actor takes that answer
  driver_step_done, ///< the driver has every answer: the step is counted
};

std::string_view to_string(step_point p);

namespace step_timeline {

/// Starts keeping marks for `path`; `label` names the process in it (driver, node:PORT). Again:
/// the later label and path.
void enable(std::string label, std::string path);
/// Stops keeping marks and forgets the kept ones.
void disable();
bool enabled();
/// Notes that step `seq` passed point `p`; `where` is the route or the rank (-1: neither).
void mark(uint64_t seq, int32_t where, step_point p);
/// Keeps a line of context ("route 0 port 4711") for the file's head.
void note(std::string line);
/// Appends the kept context and marks to the path as CSV ("label,seq,where,point,ns"; context as
/// "# " lines) and forgets them: at the end of a run (driver) and at each release (node).
status flush();

} // namespace step_timeline
} // namespace kvactor
