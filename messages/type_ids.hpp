// The ONE CAF type-ID block of kvactor: every type that crosses an actor or process boundary.
// Append only (IDs are positional); register_types() loads the block into an actor system.
#pragma once

#include <vector>

#include <caf/type_id.hpp>

namespace kvactor {
struct attention_layer;
struct model_layout;
struct kv_cache_spec;
struct memory_limits;
struct kv_cache_group;
struct kv_cache_tensor;
struct kv_cache_config;
struct kv_cache_view;
struct kv_cache_capacity;
struct block_size_constraint;
struct backend_capabilities;
struct attention_group;
struct graph_support_info;
struct batch_descriptor;
struct cudagraph_plan;
struct error;
} // namespace kvactor

// clang-format off
CAF_BEGIN_TYPE_ID_BLOCK(kvactor, caf::first_custom_type_id)
  // layer.hpp
  CAF_ADD_TYPE_ID(kvactor, (kvactor::attention_layer))
  CAF_ADD_TYPE_ID(kvactor, (kvactor::model_layout))
  // kv.hpp
  CAF_ADD_TYPE_ID(kvactor, (kvactor::kv_cache_spec))
  CAF_ADD_TYPE_ID(kvactor, (kvactor::memory_limits))
  CAF_ADD_TYPE_ID(kvactor, (kvactor::kv_cache_group))
  CAF_ADD_TYPE_ID(kvactor, (kvactor::kv_cache_tensor))
  CAF_ADD_TYPE_ID(kvactor, (kvactor::kv_cache_config))
  CAF_ADD_TYPE_ID(kvactor, (kvactor::kv_cache_view))
  CAF_ADD_TYPE_ID(kvactor, (kvactor::kv_cache_capacity))
  // backend.hpp
  CAF_ADD_TYPE_ID(kvactor, (kvactor::block_size_constraint))
  CAF_ADD_TYPE_ID(kvactor, (kvactor::backend_capabilities))
  CAF_ADD_TYPE_ID(kvactor, (kvactor::attention_group))
  CAF_ADD_TYPE_ID(kvactor, (kvactor::graph_support_info))
  // cudagraph.hpp
  CAF_ADD_TYPE_ID(kvactor, (kvactor::batch_descriptor))
  CAF_ADD_TYPE_ID(kvactor, (kvactor::cudagraph_plan))
  // errc.hpp
  CAF_ADD_TYPE_ID(kvactor, (kvactor::error))
  // Lists sent as one message element. NOTE(type_ids): add_message_types registers exactly the
  // block; unlike add_message_type<T>(name), it does not register std::vector<T> by itself.
  CAF_ADD_TYPE_ID(kvactor, (std::vector<kvactor::attention_layer>))
  CAF_ADD_TYPE_ID(kvactor, (std::vector<kvactor::kv_cache_spec>))
  CAF_ADD_TYPE_ID(kvactor, (std::vector<kvactor::kv_cache_view>))
  CAF_ADD_TYPE_ID(kvactor, (std::vector<kvactor::backend_capabilities>))
  CAF_ADD_TYPE_ID(kvactor, (std::vector<kvactor::attention_group>))
CAF_END_TYPE_ID_BLOCK(kvactor)
// clang-format on
