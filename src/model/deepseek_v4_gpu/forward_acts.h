// Private to the V4 CUDA forward (forward.cpp, forward_moe.cpp): one forward's activations on
// the device, set up by Forward::alloc_acts.
#pragma once

#include <cstdint>
#include <vector>

#include "model/deepseek_v4_gpu/forward.h"

namespace deepinfer::v4gpu {

struct Forward::Acts {
  int64_t T = 0, max_n = 0, Nd = 0;  // rows, longest chunk, decoding sequences (rows 0..Nd-1)
  int32_t *ids, *pos;
  float *e, *X, *pre, *post, *comb, *xin, *xn, *qa, *qan, *qb, *kv, *qidx, *oa2, *f, *h, *sgu, *sa, *sy;
  void* hcws;
  bool hc_partials = false;  // hcws holds the next hc_pre's chunk partials (made by the post before it)
  uint16_t *q16, *kv16, *ao;
  Packed xnp, qanp, hp;  // norm_pack's forms of xn, qan, h (empty without tuning_.act_pack)
  // head
  int64_t head_rows = 0;
  std::vector<int64_t> head_off;  // first logits row of each run (processing order)
  float* logits = nullptr;        // [head_rows, vocab] (device)
};

}  // namespace deepinfer::v4gpu
