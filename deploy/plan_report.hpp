// The two faces of `kvactor plan`: a JSON object (schema kvactor.plan/1) and a human report.
#pragma once

#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "actors/driver/deployment_plan.hpp"

namespace kvactor {

inline constexpr const char* plan_schema = "kvactor.plan/1";

/// The JSON contract of `kvactor plan --json` (README documents every field).
nlohmann::ordered_json plan_to_json(const deployment_plan& plan);

/// Tables per group and per rank, the CUDA graph summary, warnings, and vLLM's capacity line.
void print_plan(const deployment_plan& plan, std::ostream& out);

/// vLLM's line: "GPU KV cache size: N tokens, Maximum concurrency for M tokens per request: X.XXx".
std::string capacity_line(const deployment_plan& plan);

/// "0-31", "5,11,17,23" or "0-3,8,10-12": compact layer index lists.
std::string format_index_list(const std::vector<int32_t>& indices);

} // namespace kvactor
