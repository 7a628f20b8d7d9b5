// The published DeepSeek-V4-Flash architecture (V4-MODEL.md section 1.1) as a config.json object
// in the upstream spelling (compress_ratios, num_hash_layers, qk_rope_head_dim, rope_scaling,
// quantization_config), cut to the first `layers` of its 43 layers (the real CSA/HCA order) and
// `experts` routed experts (an EP slice keeps top-6). V4Config::from_json parses it, so a
// synthetic model goes through the same config path as a checkpoint on disk.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

#include "core/result.h"
#include "model/deepseek_v4/config.h"

namespace deepinfer::v4 {

inline constexpr int64_t kFlashLayers = 43;
inline constexpr int64_t kFlashExperts = 256;

/// config.json of V4-Flash with its first `layers` layers and `experts` routed experts
/// (num_experts_per_tok min(6, experts); num_hash_layers min(3, layers)).
nlohmann::json flash_config_json(int64_t layers = kFlashLayers, int64_t experts = kFlashExperts);
/// flash_config_json parsed by V4Config::from_json; an error for layers outside 1..43 or
/// experts outside 1..256. Top-6 routing (top-E below six experts).
Result<V4Config> flash_config(int64_t layers = kFlashLayers, int64_t experts = kFlashExperts);

/// `deepinfer bench --synthetic` spellings: "v4-flash[:LAYERS[:EXPERTS]]" (LAYERS 1..43, default
/// 4; EXPERTS 1..256, default 256) and "v4-flash-ep8" (43 layers, 32 experts: one GPU's slice of
/// expert parallelism over 8).
struct FlashSpec {
  int64_t layers = 4;
  int64_t experts = kFlashExperts;
};
Result<FlashSpec> parse_flash_spec(std::string_view spec);

}  // namespace deepinfer::v4
