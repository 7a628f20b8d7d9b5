// V4Weights: every tensor of a DeepSeek-V4 checkpoint, bound to its slot and validated against
// V4Config. Linear weights stay in their stored format (views into the mapped files); small
// vectors (norms, sinks, biases, ape) are copied to fp32. Names are accepted in the upstream
// bare form (`layers.N.attn.wq_a.weight`, `embed.weight`, `hc_head_fn`, `mtp.0.*`) and in the
// `model.`-prefixed form transformers writes (`model.embed_tokens.weight`, `model.hc_head.hc_fn`,
// `model.layers.N.attn.norm.weight` for kv_norm). A missing, unexpected, mis-shaped or mis-typed
// tensor is an error naming the file and the tensor.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "loader/checkpoint.h"
#include "model/deepseek_v4/config.h"
#include "tensor/weight.h"

namespace deepinfer::v4 {

struct HcWeights {  // one mHC site: fn [(2+n)n, n*d], base [(2+n)n], scale [3]
  Weight fn;
  std::vector<float> base, scale;
};

struct HcHeadWeights {  // final collapse: fn [n, n*d], base [n], scale [1]
  Weight fn;
  std::vector<float> base, scale;
};

struct CompressorWeights {
  Weight wkv, wgate;       // [c*width, d], c = 2 with overlap (CSA), 1 without (HCA)
  std::vector<float> ape;  // [ratio, c*width]
  std::vector<float> norm; // [width]
};

struct IndexerWeights {
  Weight wq_b;          // [index_heads * index_dim, q_lora]
  Weight weights_proj;  // [index_heads, d]
  CompressorWeights compressor;
};

struct AttentionWeights {
  Weight wq_a, wq_b, wkv, wo_a, wo_b;
  std::vector<float> q_norm, kv_norm, sinks;
  std::optional<CompressorWeights> compressor;
  std::optional<IndexerWeights> indexer;
};

struct MoeWeights {
  Weight gate;                   // router [E, d]
  std::vector<float> bias;       // learned routing: selection bias [E]
  std::vector<int32_t> tid2eid;  // hash routing: [vocab, top_k]
  std::vector<Weight> w1, w2, w3;
  Weight shared_w1, shared_w2, shared_w3;
};

struct BlockWeights {
  AttnKind kind = AttnKind::kSliding;
  int64_t ratio = 0;
  bool hash = false;
  std::vector<float> attn_norm, ffn_norm;
  HcWeights hc_attn, hc_ffn;
  AttentionWeights attn;
  MoeWeights ffn;
};

struct MtpWeights {  // preview checkpoint's next-next-token head (V4-MODEL.md 2.10)
  Weight e_proj, h_proj;
  std::vector<float> enorm, hnorm, norm;
  HcHeadWeights hc_head;
  BlockWeights block;
};

struct V4Weights {
  Weight embed, head;
  std::vector<float> norm;
  HcHeadWeights hc_head;
  std::vector<BlockWeights> layers;
  std::optional<MtpWeights> mtp;

  static Result<V4Weights> load(const Checkpoint& ck, const V4Config& cfg);
};

/// Maps a checkpoint tensor name to the upstream bare form used internally.
std::string canonical_tensor_name(std::string_view name);

namespace binder {
class Binder;
}
/// The routed experts (E of inner width I over hidden d: `<fp>.experts.<e>.w1/w2/w3`) and the
/// shared experts (`<fp>.shared_experts.*`, n_shared x I wide) of one MoE layer into `f`; the
/// router's weights are the caller's (V4 and V4.1 differ there).
Status load_experts(binder::Binder& b, const std::string& fp, int64_t E, int64_t I, int64_t d, int64_t n_shared,
                    MoeWeights& f);

}  // namespace deepinfer::v4
