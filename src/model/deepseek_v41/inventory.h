// The tensor inventory a V4.1 text checkpoint must hold, derived from V41Config alone (names as
// DeepSeek publishes them, logical shapes), and a name check of a model.safetensors.index.json
// against it: what `deepinfer inspect` reports on a folder without weights.
#pragma once

#include <string>
#include <vector>

#include "model/deepseek_v41/config.h"
#include "model/deepseek_v41/state.h"
#include "tensor/tensor.h"

namespace deepinfer::v41 {

enum class TensorGroup : uint8_t { kBackbone, kEngramTable, kEngramOther, kDSpark };

struct ExpectedTensor {
  std::string name;
  Shape shape;        // logical (unpacked) shape
  bool linear;        // may carry a `.scale` companion (FP8 / MXFP4)
  TensorGroup group;
};

std::vector<ExpectedTensor> expected_tensors(const V41Config& c);

/// The DSpark stages' tensors (mtp.0 .. mtp.{n-1}, n = num_nextn_predict_layers; docs/v41.md
/// section 7, what V41Weights::load binds; the Markov heads under [O]'s markov_head.embed / .head
/// names), group kDSpark. Empty when n = 0 or the DSpark config is incomplete.
std::vector<ExpectedTensor> expected_dspark_tensors(const V41Config& c);

struct IndexCheck {
  int64_t matched = 0, scales = 0, dspark = 0, not_checked = 0;
  std::vector<std::string> missing, unexpected;
  uint64_t backbone_params = 0, engram_table_params = 0, engram_other_params = 0;
  uint64_t dspark_params = 0;  // from the config's inventory (expected_dspark_tensors)
};

/// Checks the names of an index's weight_map against the inventory. `mtp.*` (DSpark stages) are
/// counted, not checked; names of the vision tower (containing "vision", "visual", "aligner" or
/// "image") are counted as not checked; everything else must be expected.
IndexCheck check_index_names(const V41Config& c, const std::vector<std::string>& names);

/// How the release stores a tensor (tools/reference/README.md, open point 10; V4-MODEL.md 7):
/// FP8 e4m3 with an E8M0 scale per 32x32 block (attention and shared-expert linears, indexer
/// wq_b, Engram wkv; wo_a is taken to be FP8 as in V4, an open point), MXFP4 (routed experts: two
/// values per byte plus an E8M0 scale per 32 along K), FP8 rows with a scale per 32 columns
/// (Engram tables), BF16 (embed, head, norms, router, compressor, indexer wk / weights_proj,
/// Engram q/k weights) or F32 (mHC, sinks, router bias).
enum class StoredFormat : uint8_t { kFp8Block32, kMxfp4, kFp8Rows32, kBf16, kF32 };
StoredFormat stored_format(const ExpectedTensor& e);
/// Bytes of the tensor and its scales in that format.
uint64_t stored_bytes(const ExpectedTensor& e);

/// Memory of the text model on `gpus` GPUs under expert parallelism: the routed experts are split
/// by id (the busiest GPU holds ceil(E / gpus) of each layer's), everything else of the backbone
/// and the Engram projections is replicated on every GPU. The Engram tables stay in host memory
/// (memory-mapped from the checkpoint; a step reads only its rows), once per host. The state is the
/// engine's f32 layout (state_sizes), held by the GPU that runs the sequence's attention (data
/// parallel attention). The DSpark stages are held like the backbone (their routed experts split by
/// id, ceil(E' / gpus) per stage on the busiest GPU, the rest replicated) and counted apart; the
/// vision tower is not counted.
struct MemoryPlan {
  int64_t gpus = 1;
  int64_t experts_per_gpu = 0;           // per layer, on the busiest GPU
  uint64_t routed_expert_bytes = 0;      // per GPU
  uint64_t replicated_bytes = 0;         // per GPU
  int64_t dspark_experts_per_gpu = 0;    // per stage, on the busiest GPU
  uint64_t dspark_routed_bytes = 0;      // per GPU
  uint64_t dspark_replicated_bytes = 0;  // per GPU
  uint64_t weight_bytes_per_gpu = 0;     // routed + replicated + both DSpark parts
  uint64_t engram_table_host_bytes = 0;  // per host
  double state_bytes_per_token = 0;      // per token of a sequence on that GPU
  size_t state_bytes_per_sequence = 0;
};
std::vector<MemoryPlan> memory_plans(const V41Config& c, const std::vector<int64_t>& gpu_counts = {1, 2, 4, 8});

}  // namespace deepinfer::v41
