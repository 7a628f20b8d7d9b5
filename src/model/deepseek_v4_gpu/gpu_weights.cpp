#include "model/deepseek_v4_gpu/gpu_weights.h"

#include <cstring>

#include "core/dtype.h"
#include "model/deepseek_v4/rope.h"

namespace deepinfer::v4gpu {

namespace {

Status field_error(const std::string& field, const std::string& have, const std::string& need) {
  return Status::unsupported("config.json: " + field + " = " + have + " is not supported by the CUDA model (" + need +
                             "); run it with --device cpu");
}

std::vector<float> rows_f32(const Weight& w) {
  std::vector<float> v(static_cast<size_t>(w.rows * w.cols));
  w.dequant_rows(0, w.rows, v.data());
  return v;
}

Result<DeviceBuffer> upload_bf16(const Weight& w) {
  std::vector<uint16_t> h(static_cast<size_t>(w.rows * w.cols));
  if (w.format == WeightFormat::kBF16) {
    std::memcpy(h.data(), w.data.data(), h.size() * 2);
  } else {
    std::vector<float> row(w.cols);
    for (int64_t r = 0; r < w.rows; ++r) {
      w.dequant_rows(r, 1, row.data());
      for (int64_t c = 0; c < w.cols; ++c) h[r * w.cols + c] = f32_to_bf16(row[c]);
    }
  }
  return DeviceBuffer::upload(h, w.name);
}

Result<GpuLinear> upload_linear(const Weight& w, bool allow_fp8) {
  GpuLinear g;
  g.n = w.rows, g.k = w.cols;
  const bool fp8 = allow_fp8 && w.format == WeightFormat::kFp8Block && w.block_rows == 128 && w.block_cols == 128 &&
                   w.rows % 128 == 0 && w.cols % 128 == 0 &&
                   (w.scale.dtype() == DType::kF8E8M0 || w.scale.dtype() == DType::kF32 ||
                    w.scale.dtype() == DType::kBF16);
  if (!fp8) {
    DI_ASSIGN_OR_RETURN(g.data, upload_bf16(w));
    return g;
  }
  g.fp8 = true;
  DI_ASSIGN_OR_RETURN(g.data, DeviceBuffer::upload(w.data.data(), w.data.nbytes(), w.name));
  if (w.scale.dtype() == DType::kF8E8M0) {
    DI_ASSIGN_OR_RETURN(g.scale, DeviceBuffer::upload(w.scale.data(), w.scale.nbytes(), w.name + " scale"));
  } else {  // fp32 scales (bf16 ones widened)
    const int64_t n = w.scale.numel();
    std::vector<float> s(static_cast<size_t>(n));
    if (w.scale.dtype() == DType::kF32) {
      std::memcpy(s.data(), w.scale.data(), n * 4);
    } else {
      const auto* b = static_cast<const uint16_t*>(w.scale.data());
      for (int64_t i = 0; i < n; ++i) s[i] = bf16_to_f32(b[i]);
    }
    g.scale_f32 = true;
    DI_ASSIGN_OR_RETURN(g.scale, DeviceBuffer::upload(s, w.name + " scale"));
  }
  DI_TRY(g.add_f32_scales());
  return g;
}

Result<DeviceBuffer> upload_vec(const std::vector<float>& v, const std::string& what) {
  return DeviceBuffer::upload(v, what);
}

Result<GpuHc> upload_hc(const v4::HcWeights& w) {
  GpuHc g;
  DI_ASSIGN_OR_RETURN(g.fn, DeviceBuffer::upload(rows_f32(w.fn), w.fn.name));
  DI_ASSIGN_OR_RETURN(g.base, upload_vec(w.base, w.fn.name + " base"));
  DI_ASSIGN_OR_RETURN(g.scale, upload_vec(w.scale, w.fn.name + " scale"));
  return g;
}

// hc_head [n, n*d] into the padded hc_pre site (hc_head_site).
Result<GpuHc> upload_hc_head(const v4::HcHeadWeights& w, int64_t n) {
  DI_ASSIGN_OR_RETURN(GpuHc g, hc_head_site(n, w.fn.cols));
  const std::vector<float> fn = rows_f32(w.fn);
  if (!cuda::copy_to_device(g.fn.get(), fn.data(), fn.size() * 4) ||
      !cuda::copy_to_device(g.base.get(), w.base.data(), static_cast<size_t>(n) * 4) ||
      !cuda::copy_to_device(g.scale.get(), w.scale.data(), 4))
    return device_error("upload of hc_head");
  return g;
}

Result<GpuCompressor> upload_compressor(const v4::CompressorWeights& w, int64_t ratio, int64_t width, bool overlap) {
  GpuCompressor g;
  g.ratio = ratio, g.width = width, g.overlap = overlap;
  DI_ASSIGN_OR_RETURN(const GpuLinear wkv, upload_linear(w.wkv, false));
  DI_ASSIGN_OR_RETURN(const GpuLinear wgate, upload_linear(w.wgate, false));
  if (wkv.n != g.cw() || wgate.n != g.cw())
    return Status::invalid_argument(w.wkv.name + " / " + w.wgate.name + ": rows are not the compressor's " +
                                    std::to_string(g.cw()) + " channels");
  DI_ASSIGN_OR_RETURN(g.wkvg, concat_rows(wkv, wgate, w.wkv.name + " + wgate"));
  DI_ASSIGN_OR_RETURN(g.ape, upload_vec(w.ape, w.wkv.name + " ape"));
  DI_ASSIGN_OR_RETURN(g.norm, upload_vec(w.norm, w.wkv.name + " norm"));
  return g;
}

Status check_expert(const Weight& w) {
  if (w.format != WeightFormat::kMxfp4)
    return Status::unsupported(w.name + ": routed experts stored as " + std::string(weight_format_name(w.format)) +
                               "; the CUDA model runs MXFP4 routed experts only (run it with --device cpu)");
  if (w.rows % 32 || w.cols % 128)
    return Status::unsupported(w.name + ": MXFP4 expert shape needs rows % 32 == 0 and cols % 128 == 0");
  return Status::ok();
}

// One expert's w1, w3, w2 (packed e2m1 then E8M0 scales each) in one allocation.
Result<DeviceBuffer> upload_expert(const Weight& w1, const Weight& w3, const Weight& w2, bool tiled,
                                   cuda::ExpertPtrs& p) {
  DI_TRY(check_expert(w1));
  DI_TRY(check_expert(w3));
  DI_TRY(check_expert(w2));
  const Weight* ws[3] = {&w1, &w3, &w2};
  size_t part[6];
  for (int i = 0; i < 3; ++i) part[2 * i] = ws[i]->data.nbytes(), part[2 * i + 1] = ws[i]->scale.nbytes();
  const ExpertLayout lay = expert_layout(part);
  std::vector<uint8_t> blob(lay.bytes, 0);
  for (int i = 0; i < 6; ++i) {
    const Tensor& t = i % 2 == 0 ? ws[i / 2]->data : ws[i / 2]->scale;
    std::memcpy(blob.data() + lay.off[i], t.data(), t.nbytes());
  }
  DI_ASSIGN_OR_RETURN(DeviceBuffer d, DeviceBuffer::upload(blob, w1.name));
  DI_TRY(lay.to_device_layout(d.as<uint8_t>(), w1.name));
  if (tiled) DI_TRY(lay.to_tiles(d, w1.rows, w1.cols, w1.name));
  p = lay.ptrs(d.as<uint8_t>());
  return d;
}

Result<GpuLayer> upload_layer(const v4::BlockWeights& b, const v4::V4Config& c) {
  GpuLayer g;
  g.kind = b.kind, g.ratio = b.ratio, g.hash = b.hash;
  DI_ASSIGN_OR_RETURN(g.hc_attn, upload_hc(b.hc_attn));
  DI_ASSIGN_OR_RETURN(g.hc_ffn, upload_hc(b.hc_ffn));
  const v4::AttentionWeights& a = b.attn;
  DI_ASSIGN_OR_RETURN(g.attn_norm, upload_vec(b.attn_norm, "attn_norm"));
  DI_ASSIGN_OR_RETURN(g.ffn_norm, upload_vec(b.ffn_norm, "ffn_norm"));
  DI_ASSIGN_OR_RETURN(g.q_norm, upload_vec(a.q_norm, "q_norm"));
  DI_ASSIGN_OR_RETURN(g.kv_norm, upload_vec(a.kv_norm, "kv_norm"));
  DI_ASSIGN_OR_RETURN(g.sinks, upload_vec(a.sinks, "attn_sink"));
  DI_ASSIGN_OR_RETURN(g.inv_freq, rope_inv_freq(b.kind, c));
  DI_ASSIGN_OR_RETURN(g.wq_a, upload_linear(a.wq_a, true));
  DI_ASSIGN_OR_RETURN(g.wq_b, upload_linear(a.wq_b, true));
  DI_ASSIGN_OR_RETURN(g.wkv, upload_linear(a.wkv, true));
  DI_ASSIGN_OR_RETURN(g.wo_a, upload_linear(a.wo_a, true));
  DI_ASSIGN_OR_RETURN(g.wo_b, upload_linear(a.wo_b, true));
  if (a.compressor) {
    g.has_compressor = true;
    DI_ASSIGN_OR_RETURN(g.cmp, upload_compressor(*a.compressor, b.ratio, c.head_dim, b.kind == v4::AttnKind::kCsa));
  }
  if (a.indexer) {
    g.has_indexer = true;
    DI_ASSIGN_OR_RETURN(g.icmp, upload_compressor(a.indexer->compressor, b.ratio, c.index_head_dim, true));
    DI_ASSIGN_OR_RETURN(g.idx_wq_b, upload_linear(a.indexer->wq_b, true));
    DI_ASSIGN_OR_RETURN(g.weights_proj, upload_linear(a.indexer->weights_proj, false));
  }
  const v4::MoeWeights& f = b.ffn;
  DI_ASSIGN_OR_RETURN(g.gate, upload_bf16(f.gate));
  const int64_t E = c.n_routed_experts;
  DI_ASSIGN_OR_RETURN(g.bias, upload_vec(b.hash ? std::vector<float>(E, 0.f) : f.bias, "gate.bias"));
  if (b.hash) {
    DI_ASSIGN_OR_RETURN(g.tid2eid, DeviceBuffer::upload(f.tid2eid, "gate.tid2eid"));
  }
  std::vector<cuda::ExpertPtrs> ptrs(E);
  g.experts_tiled = experts_tileable(c.moe_inter, c.hidden);
  for (int64_t e = 0; e < E; ++e) {
    DI_ASSIGN_OR_RETURN(DeviceBuffer blob, upload_expert(f.w1[e], f.w3[e], f.w2[e], g.experts_tiled, ptrs[e]));
    g.experts.push_back(std::move(blob));
  }
  DI_ASSIGN_OR_RETURN(g.expert_ptrs, DeviceBuffer::upload(ptrs, "expert pointers"));
  DI_ASSIGN_OR_RETURN(g.experts_foldable, experts_scales_foldable(ptrs, c.moe_inter, c.hidden));
  DI_ASSIGN_OR_RETURN(g.experts_fp8_foldable, experts_scales_foldable(ptrs, c.moe_inter, c.hidden, true));
  {
    DI_ASSIGN_OR_RETURN(GpuLinear w1, upload_linear(f.shared_w1, true));
    DI_ASSIGN_OR_RETURN(GpuLinear w3, upload_linear(f.shared_w3, true));
    if (w1.fp8 != w3.fp8 || w1.scale_f32 != w3.scale_f32) {  // stored differently: both as bf16
      DI_ASSIGN_OR_RETURN(w1, upload_linear(f.shared_w1, false));
      DI_ASSIGN_OR_RETURN(w3, upload_linear(f.shared_w3, false));
    }
    DI_ASSIGN_OR_RETURN(g.sh_w13, concat_rows(w1, w3, f.shared_w1.name + " + w3"));
  }
  DI_ASSIGN_OR_RETURN(g.sh_w2, upload_linear(f.shared_w2, true));
  return g;
}

}  // namespace

ExpertLayout expert_layout(const size_t part_bytes[6]) {
  ExpertLayout l;
  size_t at = 0;
  for (int i = 0; i < 6; ++i) {
    at = (at + 15) / 16 * 16;
    l.off[i] = at;
    l.len[i] = part_bytes[i];
    at += part_bytes[i];
  }
  l.bytes = at;
  return l;
}

cuda::ExpertPtrs ExpertLayout::ptrs(const uint8_t* base) const {
  cuda::ExpertPtrs p;
  p.w1 = base + off[0], p.s1 = base + off[1], p.w3 = base + off[2], p.s3 = base + off[3];
  p.w2 = base + off[4], p.s2 = base + off[5];
  return p;
}

Status ExpertLayout::to_device_layout(uint8_t* base, const std::string& what) const {
  for (int i = 0; i < 6; i += 2)
    if (!cuda::mxfp4_to_device_layout(base + off[i], static_cast<int64_t>(len[i])))
      return device_error("MXFP4 device layout of " + what);
  return Status::ok();
}

Status ExpertLayout::to_tiles(DeviceBuffer& blob, int64_t I, int64_t d, const std::string& what) const {
  DI_ASSIGN_OR_RETURN(DeviceBuffer t, DeviceBuffer::alloc(bytes, what));
  const int64_t n[3] = {I, I, d}, k[3] = {d, d, I};  // w1, w3, w2
  for (int i = 0; i < 3; ++i)
    if (!cuda::mxfp4_tile64(blob.as<uint8_t>() + off[2 * i], blob.as<uint8_t>() + off[2 * i + 1], n[i], k[i],
                            t.as<uint8_t>() + off[2 * i], t.as<uint8_t>() + off[2 * i + 1]))
      return device_error("MXFP4 64-row tiles of " + what);
  DI_CUDA_TRY(cuda::synchronize());
  blob = std::move(t);
  return Status::ok();
}

Result<DeviceBuffer> rope_inv_freq(v4::AttnKind kind, const v4::V4Config& c) {
  const v4::Rope rope(kind == v4::AttnKind::kSliding ? c.rope_main : c.rope_compress, c.rope_dim);
  return DeviceBuffer::upload(rope.inv_freq(), "rope inv_freq");
}

Result<GpuHc> hc_head_site(int64_t n, int64_t cols) {
  const int64_t mix = (2 + n) * n;
  GpuHc g;
  DI_ASSIGN_OR_RETURN(g.fn, DeviceBuffer::zeros(static_cast<size_t>(mix * cols) * 4, "hc_head_fn"));
  DI_ASSIGN_OR_RETURN(g.base, DeviceBuffer::zeros(static_cast<size_t>(mix) * 4, "hc_head_base"));
  DI_ASSIGN_OR_RETURN(g.scale, DeviceBuffer::upload(std::vector<float>{1.f, 1.f, 1.f}, "hc_head_scale"));
  return g;
}

size_t layer_bytes(const GpuLayer& g) {
  size_t s = 0;
  for (const DeviceBuffer* b : {&g.hc_attn.fn, &g.hc_attn.base, &g.hc_attn.scale, &g.hc_ffn.fn, &g.hc_ffn.base,
                                &g.hc_ffn.scale, &g.attn_norm, &g.ffn_norm, &g.q_norm, &g.kv_norm, &g.sinks,
                                &g.inv_freq, &g.cmp.ape, &g.cmp.norm, &g.icmp.ape, &g.icmp.norm, &g.gate, &g.bias,
                                &g.tid2eid, &g.expert_ptrs})
    s += b->bytes();
  for (const GpuLinear* l : {&g.wq_a, &g.wq_b, &g.wkv, &g.wo_a, &g.wo_b, &g.cmp.wkvg, &g.icmp.wkvg,
                             &g.idx_wq_b, &g.weights_proj, &g.sh_w13, &g.sh_w2})
    s += l->bytes();
  for (const DeviceBuffer& e : g.experts) s += e.bytes();
  return s;
}


size_t total_bytes(const GpuWeights& g) {
  size_t s = g.embed.bytes() + g.head.bytes() + g.norm.bytes() + g.hc_head.fn.bytes();
  for (const GpuLayer& l : g.layers) s += layer_bytes(l);
  return s;
}

cuda::Fp8Weight GpuLinear::fp8_rows(int64_t r0, int64_t rows) const {
  cuda::Fp8Weight w;
  w.data = data.as<uint8_t>() + r0 * k;
  const int64_t srow = (r0 / 128) * (k / 128);
  w.scale = scale_f32 ? static_cast<const void*>(scale.as<float>() + srow)
                      : static_cast<const void*>(scale.as<uint8_t>() + srow);
  w.scale_is_f32 = scale_f32;
  w.n = rows, w.k = k;
  return w;
}

cuda::Fp8Weight GpuLinear::lt_rows(int64_t r0, int64_t rows) const {
  cuda::Fp8Weight w = fp8_rows(r0, rows);
  if (!scale_f32) w.scale = scale32.as<float>() + (r0 / 128) * (k / 128), w.scale_is_f32 = true;
  return w;
}

Result<GpuLinear> concat_rows(const GpuLinear& a, const GpuLinear& b, const std::string& what) {
  if (a.k != b.k || a.fp8 != b.fp8 || a.scale_f32 != b.scale_f32)
    return Status::invalid_argument(what + ": rows of different widths or formats cannot share one GEMM");
  GpuLinear g;
  g.fp8 = a.fp8, g.scale_f32 = a.scale_f32, g.n = a.n + b.n, g.k = a.k;
  auto cat = [&](const DeviceBuffer& x, const DeviceBuffer& y, DeviceBuffer& out) -> Status {
    if (x.bytes() + y.bytes() == 0) return Status::ok();
    DI_ASSIGN_OR_RETURN(out, DeviceBuffer::alloc(x.bytes() + y.bytes(), what));
    if (!cuda::copy_device_to_device(out.get(), x.get(), x.bytes()) ||
        !cuda::copy_device_to_device(out.as<uint8_t>() + x.bytes(), y.get(), y.bytes()))
      return device_error("copy of " + what);
    return Status::ok();
  };
  DI_TRY(cat(a.data, b.data, g.data));
  DI_TRY(cat(a.scale, b.scale, g.scale));
  DI_TRY(cat(a.scale32, b.scale32, g.scale32));
  return g;
}

Status GpuLinear::add_f32_scales() {
  if (!fp8 || scale_f32) return Status::ok();
  DI_ASSIGN_OR_RETURN(scale32, DeviceBuffer::alloc(static_cast<size_t>((n / 128) * (k / 128)) * 4, "fp32 weight scales"));
  if (!cuda::fp8_scales_to_f32(fp8_rows(0, n), scale32.as<float>())) return device_error("fp8_scales_to_f32");
  return Status::ok();
}

Status check_gpu_config(const v4::V4Config& c) {
  auto eq = [](const char* field, int64_t have, int64_t need) -> Status {
    if (have == need) return Status::ok();
    return field_error(field, std::to_string(have), "the kernels implement " + std::to_string(need));
  };
  DI_TRY(eq("num_attention_heads", c.num_heads, 64));
  DI_TRY(eq("head_dim", c.head_dim, 512));
  DI_TRY(eq("qk_rope_head_dim", c.rope_dim, 64));
  DI_TRY(eq("sliding_window", c.window, 128));
  DI_TRY(eq("hc_mult", c.hc_mult, 4));
  if (c.hidden % 1024) return field_error("hidden_size", std::to_string(c.hidden), "a multiple of 1024");
  if (c.q_lora_rank % 128) return field_error("q_lora_rank", std::to_string(c.q_lora_rank), "a multiple of 128");
  if (c.o_groups <= 0 || (c.num_heads * c.head_dim / c.o_groups) % 128 || c.o_lora_rank % 128)
    return field_error("o_groups / o_lora_rank", std::to_string(c.o_groups) + " / " + std::to_string(c.o_lora_rank),
                       "head groups of a multiple of 128 dims and o_lora_rank a multiple of 128");
  if (c.moe_inter % 128) return field_error("moe_intermediate_size", std::to_string(c.moe_inter), "a multiple of 128");
  if (c.n_routed_experts % 8 || c.n_routed_experts > 1024)
    return field_error("n_routed_experts", std::to_string(c.n_routed_experts), "a multiple of 8, at most 1024");
  if (c.experts_per_tok <= 0 || c.experts_per_tok > 16 || c.experts_per_tok > c.n_routed_experts)
    return field_error("num_experts_per_tok", std::to_string(c.experts_per_tok), "1..16");
  DI_TRY(eq("n_shared_experts", c.n_shared_experts, 1));
  if (c.scoring_func != "sqrtsoftplus") return field_error("scoring_func", c.scoring_func, "sqrtsoftplus");
  if (!c.norm_topk_prob) return field_error("norm_topk_prob", "false", "true");
  bool csa = false;
  for (size_t l = 0; l < c.attn_kinds.size(); ++l) {
    const std::string f = "compress_ratios[" + std::to_string(l) + "]";
    if (c.attn_kinds[l] == v4::AttnKind::kCsa) {
      csa = true;
      DI_TRY(eq(f.c_str(), c.ratios[l], 4));
    }
    if (c.attn_kinds[l] == v4::AttnKind::kHca) DI_TRY(eq(f.c_str(), c.ratios[l], 128));
  }
  if (csa) {
    if (c.index_n_heads <= 0 || c.index_n_heads % 16 || c.index_n_heads > 64)
      return field_error("index_n_heads", std::to_string(c.index_n_heads), "a multiple of 16, at most 64");
    if (c.index_head_dim != 128) return field_error("index_head_dim", std::to_string(c.index_head_dim), "128");
    if (c.index_topk <= 0 || c.index_topk > 2048)
      return field_error("index_topk", std::to_string(c.index_topk), "1..2048");
  }
  if (c.numerics.kv_only) return Status::unsupported("numerics kv_only is a V4.1 option");
  return Status::ok();
}

Result<GpuWeights> GpuWeights::upload(const v4::V4Weights& w, const v4::V4Config& c) {
  DI_TRY(check_gpu_config(c));
  GpuWeights g;
  DI_ASSIGN_OR_RETURN(g.embed, upload_bf16(w.embed));
  DI_ASSIGN_OR_RETURN(g.head, upload_linear(w.head, true));
  DI_ASSIGN_OR_RETURN(g.norm, upload_vec(w.norm, "norm"));
  DI_ASSIGN_OR_RETURN(g.hc_head, upload_hc_head(w.hc_head, c.hc_mult));
  for (const v4::BlockWeights& b : w.layers) {
    DI_ASSIGN_OR_RETURN(GpuLayer l, upload_layer(b, c));
    g.layers.push_back(std::move(l));
  }
  g.bytes = total_bytes(g);
  return g;
}

Result<bool> experts_scales_foldable(const std::vector<cuda::ExpertPtrs>& ptrs, int64_t I, int64_t d, bool fp8) {
  const int32_t one = 1;
  DI_ASSIGN_OR_RETURN(DeviceBuffer flag, DeviceBuffer::upload(&one, sizeof(one), "expert scale check"));
  const auto check = fp8 ? cuda::mxfp4_scales_fp8_foldable : cuda::mxfp4_scales_foldable;
  for (const cuda::ExpertPtrs& p : ptrs) {
    DI_CUDA_TRY(check(p.s1, I * d / 32, flag.as<int32_t>(), nullptr));
    DI_CUDA_TRY(check(p.s3, I * d / 32, flag.as<int32_t>(), nullptr));
    DI_CUDA_TRY(check(p.s2, d * I / 32, flag.as<int32_t>(), nullptr));
  }
  int32_t out = 0;
  DI_CUDA_TRY(cuda::synchronize());
  DI_CUDA_TRY(cuda::copy_to_host(&out, flag.as<int32_t>(), sizeof(out)));
  return out == 1;
}

}  // namespace deepinfer::v4gpu
