// Sampling on the GPU (sampling_ops.h): one 1024-thread block per row, the CPU sampler's steps
// (src/sample/sampler.h) as passes over the row, with the row's shaped values in the workspace.
//
//   pass 1   raw -> processed logits (NaN -> -inf, bias, penalties) -> s = x / T into ws;
//            argmaxes (greedy, fallback), max s, candidate / +inf counts, raw max (logprobs);
//   top_k    radix select (4 x 8-bit count histograms) of the k-th largest s; keep s >= it;
//   weights  w = (float)exp(double(s - smax)) into ws (0: dropped or underflowed);
//   top_p    radix descent on the bits of w with exact 128-bit fixed-point mass histograms
//            (integer sums: order-free, so bitwise batch invariant) finds the w of the token
//            where the mass in `better` order (w desc, id asc) reaches top_p * total, and how
//            many of its ties (lowest ids first) the prefix takes;
//   min_p    w >= min_p;
//   pick     the inverse CDF in ascending id order, in double: tiles of 4096 ids, each thread
//            4 consecutive ids summed in order, a fixed-tree block scan, tiles carried in order.
//
// The CPU sums in double in plain id order; the GPU's sums are in a fixed tree order, so they
// differ from the CPU's in the last bits (1e-16 relative) and a token can only differ when the
// uniform lands that close to a CDF step. Everything is a function of the row alone.
//
// exp: glibc's expf is (nearly always) correctly rounded; the GPU rounds a double exp to float,
// which is too, where CUDA's expf is not (2 ulp).
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/sampling_ops.h"

namespace deepinfer::cuda {

using detail::as_stream;
using detail::check_launch;
using detail::fail;

namespace {

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;
constexpr int kPer = 4;  // consecutive ids per thread in id-ordered tiles
constexpr int kTile = kThreads * kPer;
constexpr int kMaxTop = 20;
constexpr int kBins = 256;
constexpr float kGreedyT = 1e-5f;  // sample/sampling_params.h kGreedyTemperature
constexpr unsigned kFull = 0xffffffffu;

__device__ __forceinline__ float neg_inf() { return -INFINITY; }

// ---- Philox4x32-10, exactly sample/rng.h ----

__device__ double rng_uniform_dev(uint64_t seed, uint32_t sample_index, int64_t position) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u, kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  const uint64_t pos = static_cast<uint64_t>(position);
  uint32_t c0 = static_cast<uint32_t>(pos), c1 = static_cast<uint32_t>(pos >> 32), c2 = sample_index, c3 = 0u;
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
#pragma unroll
  for (int r = 0; r < 10; ++r) {
    const uint64_t p0 = static_cast<uint64_t>(kM0) * c0, p1 = static_cast<uint64_t>(kM1) * c2;
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += kW0;
    k1 += kW1;
  }
  const uint64_t bits = (static_cast<uint64_t>(c0) << 32 | c1) >> 11;
  return static_cast<double>(bits) * 0x1.0p-53;
}

// ---- exact 128-bit fixed-point masses (unit 2^-104) ----

struct U128 {  // no initialisers: it lives in __shared__ Scratch
  unsigned long long lo, hi;
};
__device__ __forceinline__ U128 zero128() { return U128{0ull, 0ull}; }
__device__ __forceinline__ U128 add128(U128 a, U128 b) {
  U128 r = zero128();
  r.lo = a.lo + b.lo;
  r.hi = a.hi + b.hi + (r.lo < a.lo ? 1ull : 0ull);
  return r;
}
__device__ __forceinline__ U128 mul128(U128 a, uint32_t j) {  // a * j, no overflow for our ranges
  U128 r = zero128();
  r.lo = a.lo * j;
  r.hi = a.hi * j + __umul64hi(a.lo, j);
  return r;
}
__device__ __forceinline__ double to_double(U128 a) {
  return (static_cast<double>(a.hi) * 18446744073709551616.0 + static_cast<double>(a.lo)) * 0x1.0p-104;
}
/// w (a positive float <= 1) * 2^104, exact for w >= 2^-81, truncated below.
__device__ __forceinline__ U128 weight_fx(float w) {
  const uint32_t b = __float_as_uint(w);
  int e = static_cast<int>(b >> 23);
  unsigned long long m = b & 0x7fffffu;
  if (e == 0) e = 1;
  else m |= 0x800000u;
  const int sh = e - 46;  // w = m * 2^(e - 150); w * 2^104 = m * 2^(e - 46)
  U128 r = zero128();
  if (sh >= 64) {
    r.hi = m << (sh - 64);
  } else if (sh > 0) {
    r.lo = m << sh;
    r.hi = m >> (64 - sh);
  } else if (sh > -24) {
    r.lo = m >> (-sh);
  }
  return r;
}
__device__ __forceinline__ void shared_add128(unsigned long long* lo, unsigned long long* hi, U128 v) {
  const unsigned long long old = atomicAdd(lo, v.lo);
  atomicAdd(hi, v.hi + (old + v.lo < old ? 1ull : 0ull));
}

/// Orderable key of a float (larger float, larger key); -0 and +0 share one key.
__device__ __forceinline__ uint32_t float_key(float f) {
  const uint32_t u = __float_as_uint(f + 0.0f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ float key_float(uint32_t k) {
  return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

// ---- deterministic block reductions and scans (every thread gets the same bits) ----

struct ArgMax {
  float v;
  int32_t id;  // -1: none
};
__device__ __forceinline__ ArgMax better_of(ArgMax a, ArgMax b) {  // larger value, then lower id
  if (a.id < 0) return b;
  if (b.id < 0) return a;
  return (a.v > b.v || (a.v == b.v && a.id < b.id)) ? a : b;
}

struct Scratch {  // shared memory of one block
  double d[kWarps];
  long long l[kWarps];
  float f[kWarps];
  ArgMax am[kWarps];
  U128 u[kWarps];
  unsigned long long mass_lo[kBins], mass_hi[kBins];
  U128 stage[kWarps][32];  // per-lane masses for the warp-aggregated histogram
  uint32_t cnt[kBins];
  int32_t top_id[kMaxTop];
  float top_lp[kMaxTop];
  int32_t n_top;
  int32_t found;
  uint32_t bcast_u32[2];
  U128 bcast_u128;
};

template <class T, class Op>
__device__ T block_reduce(T v, Op op, T* sh) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(kFull, v, o));
  __syncthreads();
  if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
  __syncthreads();
  T r = sh[0];
  for (int w = 1; w < kWarps; ++w) r = op(r, sh[w]);
  return r;
}
__device__ __forceinline__ ArgMax warp_argmax(ArgMax v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    ArgMax other;
    other.v = __shfl_xor_sync(kFull, v.v, o);
    other.id = __shfl_xor_sync(kFull, v.id, o);
    v = better_of(v, other);
  }
  return v;
}
__device__ ArgMax block_argmax(ArgMax v, ArgMax* sh) {
  v = warp_argmax(v);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
  __syncthreads();
  ArgMax r = sh[0];
  for (int w = 1; w < kWarps; ++w) r = better_of(r, sh[w]);
  return r;
}
__device__ U128 block_sum128(U128 v, U128* sh) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    U128 other = zero128();
    other.lo = __shfl_xor_sync(kFull, v.lo, o);
    other.hi = __shfl_xor_sync(kFull, v.hi, o);
    v = add128(v, other);
  }
  __syncthreads();
  if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
  __syncthreads();
  U128 r = sh[0];
  for (int w = 1; w < kWarps; ++w) r = add128(r, sh[w]);
  return r;
}
/// Exclusive scan over the block in thread order; `total` the block's sum (same in all threads).
template <class T>
__device__ T block_excl_scan(T v, T* sh, T& total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  T inc = v;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const T n = __shfl_up_sync(kFull, inc, o);
    if (lane >= o) inc += n;
  }
  T ex = __shfl_up_sync(kFull, inc, 1);
  if (lane == 0) ex = T(0);
  __syncthreads();
  if (lane == 31) sh[warp] = inc;
  __syncthreads();
  T wp = T(0), tot = T(0);
  for (int w = 0; w < kWarps; ++w) {
    if (w < warp) wp += sh[w];
    tot += sh[w];
  }
  total = tot;
  return wp + ex;
}

/// Histogram add, aggregated over the lanes of a warp that hit the same bin (the top bins of a
/// row's values take nearly every token: plain shared atomics would serialise on them). Every
/// lane of the warp must call it; `valid` false adds nothing.
template <bool kMass>
__device__ __forceinline__ void hist_add(Scratch& sc, bool valid, uint32_t bin, U128 mass) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const unsigned peers = __match_any_sync(kFull, valid ? bin : 0xffffffffu);
  if (kMass) {
    sc.stage[warp][lane] = mass;
    __syncwarp();
  }
  if (valid && lane == __ffs(peers) - 1) {
    atomicAdd(&sc.cnt[bin], static_cast<uint32_t>(__popc(peers)));
    if (kMass) {
      U128 sum = zero128();
      for (unsigned m = peers; m != 0; m &= m - 1) sum = add128(sum, sc.stage[warp][__ffs(m) - 1]);
      shared_add128(&sc.mass_lo[bin], &sc.mass_hi[bin], sum);
    }
  }
  if (kMass) __syncwarp();
}

struct MaxF {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct AddD {
  __device__ double operator()(double a, double b) const { return a + b; }
};
struct AddL {
  __device__ long long operator()(long long a, long long b) const { return a + b; }
};

// ---- the row's passes ----

struct Row {
  const float* raw;
  const float* bias;   // or null
  const int32_t* cnt;  // or null (no frequency / presence)
  const uint8_t* seen; // or null (no repetition)
  float* ws;
  int vocab;
  GpuSampleParams p;
};

/// Steps 1-2 of sampler.h for id i: its value after NaN, bias and penalties, from x = r.raw[i].
__device__ __forceinline__ float processed(const Row& r, int i, float x) {
  if (isnan(x)) x = neg_inf();
  if (r.bias != nullptr) {
    const float b = r.bias[i];
    x = (b == neg_inf()) ? neg_inf() : __fadd_rn(x, b);
  }
  if (r.seen != nullptr && r.p.repetition_penalty != 1.f && r.seen[i]) {
    const float rp = r.p.repetition_penalty;
    x = x > 0.f ? __fdiv_rn(x, rp) : __fmul_rn(x, rp);
  }
  if (r.cnt != nullptr && (r.p.frequency_penalty != 0.f || r.p.presence_penalty != 0.f)) {
    const int32_t c = r.cnt[i];
    if (c > 0) {
      // The CPU build (-O3 -march=native, GCC's default -ffp-contract=fast) fuses
      // `out -= frequency_penalty * count` into one vfnmadd: one rounding, as this fmaf.
      x = __fmaf_rn(-r.p.frequency_penalty, static_cast<float>(c), x);
      x = __fsub_rn(x, r.p.presence_penalty);
    }
  }
  if (isnan(x)) x = neg_inf();
  return x;
}

/// s as top_k / weights see it: with +inf present only the +inf tokens remain, at s = 0.
__device__ __forceinline__ float shaped(float s, bool pinf) { return pinf ? (s == INFINITY ? 0.f : neg_inf()) : s; }

/// The k-th largest key (with multiplicity) among keys[i] for which `key_of` returns true;
/// `need` returns how many of the keys equal to it are inside the top k.
template <class KeyOf>
__device__ uint32_t radix_select(int vocab, int k, KeyOf key_of, Scratch& sc, int& need) {
  uint32_t prefix = 0, mask = 0;
  int kk = k;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < kBins; b += kThreads) sc.cnt[b] = 0;
    __syncthreads();
    for (int base = 0; base < vocab; base += kThreads) {  // warp-uniform trip count
      const int i = base + static_cast<int>(threadIdx.x);
      uint32_t key = 0;
      const bool in = i < vocab && key_of(i, key) && (key & mask) == prefix;
      hist_add<false>(sc, in, (key >> shift) & 0xffu, zero128());
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      int d = kBins - 1;
      for (; d > 0; --d) {
        if (static_cast<int>(sc.cnt[d]) >= kk) break;
        kk -= static_cast<int>(sc.cnt[d]);
      }
      sc.bcast_u32[0] = static_cast<uint32_t>(d);
      sc.bcast_u32[1] = static_cast<uint32_t>(kk);
    }
    __syncthreads();
    prefix |= sc.bcast_u32[0] << shift;
    mask |= 0xffu << shift;
    kk = static_cast<int>(sc.bcast_u32[1]);
    __syncthreads();
  }
  need = kk;
  return prefix;
}

/// top_p: the w of the token where the mass (w desc, id asc) first reaches target, the exact
/// mass above it, how many tokens have that w, and how many of them (lowest ids) are kept.
struct TopPCut {
  float w;
  uint32_t keep_ties, n_ties;
};
__device__ TopPCut top_p_cut(const Row& r, double target, Scratch& sc) {
  uint32_t prefix = 0, mask = 0;
  U128 above = zero128();
  uint32_t n_ties = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < kBins; b += kThreads) {
      sc.cnt[b] = 0;
      sc.mass_lo[b] = sc.mass_hi[b] = 0;
    }
    __syncthreads();
    for (int base = 0; base < r.vocab; base += kThreads) {  // warp-uniform trip count
      const int i = base + static_cast<int>(threadIdx.x);
      const float w = i < r.vocab ? r.ws[i] : 0.f;
      const uint32_t key = __float_as_uint(w);
      const bool in = w > 0.f && (key & mask) == prefix;
      hist_add<true>(sc, in, (key >> shift) & 0xffu, in ? weight_fx(w) : zero128());
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      int d = kBins - 1, last_nonempty = -1;
      U128 acc = above;
      for (; d >= 0; --d) {
        if (sc.cnt[d] == 0) continue;
        last_nonempty = d;
        U128 m = zero128();
        m.lo = sc.mass_lo[d];
        m.hi = sc.mass_hi[d];
        const U128 cand = add128(acc, m);
        if (to_double(cand) >= target) break;
        acc = cand;
      }
      if (d < 0) d = last_nonempty < 0 ? 0 : last_nonempty;  // cannot happen (exact sums)
      sc.bcast_u32[0] = static_cast<uint32_t>(d);
      sc.bcast_u32[1] = sc.cnt[d];
      sc.bcast_u128 = acc;
    }
    __syncthreads();
    prefix |= sc.bcast_u32[0] << shift;
    mask |= 0xffu << shift;
    n_ties = sc.bcast_u32[1];
    above = sc.bcast_u128;
    __syncthreads();
  }
  TopPCut cut;
  cut.w = __uint_as_float(prefix);
  cut.n_ties = n_ties;
  // Smallest j in [1, n_ties] with above + j * w >= target (monotone in j).
  const U128 wfx = weight_fx(cut.w);
  uint32_t lo = 1, hi = n_ties;
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo) / 2;
    if (to_double(add128(above, mul128(wfx, mid))) >= target) hi = mid;
    else lo = mid + 1;
  }
  cut.keep_ties = lo;
  return cut;
}

/// Loads ws[i0 .. i0+3] (0 past the end).
__device__ __forceinline__ void load4(const float* ws, int vocab, int i0, float (&w)[kPer]) {
#pragma unroll
  for (int j = 0; j < kPer; ++j) w[j] = (i0 + j < vocab) ? ws[i0 + j] : 0.f;
}
__device__ __forceinline__ double thread_sum(const float (&w)[kPer]) {
  double s = 0.0;
#pragma unroll
  for (int j = 0; j < kPer; ++j) s += static_cast<double>(w[j]);
  return s;
}

/// Final survivors (top_p cut, min_p) written back into ws in place; returns their total as
/// pick_token's tile scans sum it.
__device__ double finalize_weights(const Row& r, bool use_cut, TopPCut cut, Scratch& sc) {
  const bool rank_ties = use_cut && cut.keep_ties < cut.n_ties;
  const double min_p = static_cast<double>(r.p.min_p);
  long long tie_carry = 0;
  double total = 0.0;
  for (int base = 0; base < r.vocab; base += kTile) {
    const int i0 = base + static_cast<int>(threadIdx.x) * kPer;
    float w[kPer];
    load4(r.ws, r.vocab, i0, w);
    long long rank = 0;
    if (rank_ties) {
      long long mine = 0, tile_ties = 0;
#pragma unroll
      for (int j = 0; j < kPer; ++j) mine += (w[j] > 0.f && w[j] == cut.w) ? 1 : 0;
      rank = tie_carry + block_excl_scan(mine, sc.l, tile_ties);
      tie_carry += tile_ties;
    }
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      if (i0 + j >= r.vocab || !(w[j] > 0.f)) continue;
      bool keep = true;
      if (use_cut) {
        if (w[j] == cut.w) keep = !rank_ties || rank++ < static_cast<long long>(cut.keep_ties);
        else keep = w[j] > cut.w;
      }
      if (keep && r.p.min_p > 0.f && static_cast<double>(w[j]) < min_p) keep = false;
      if (!keep) {
        r.ws[i0 + j] = 0.f;
        w[j] = 0.f;
      }
    }
    double tile_total;
    block_excl_scan(thread_sum(w), sc.d, tile_total);
    total += tile_total;
  }
  __syncthreads();
  return total;
}

/// The total of ws as pick_token's tile scans sum it.
__device__ double tile_total_of(const Row& r, Scratch& sc) {
  double total = 0.0;
  for (int base = 0; base < r.vocab; base += kTile) {
    float w[kPer];
    load4(r.ws, r.vocab, base + static_cast<int>(threadIdx.x) * kPer, w);
    double tile_total;
    block_excl_scan(thread_sum(w), sc.d, tile_total);
    total += tile_total;
  }
  return total;
}

/// Inverse CDF over ws in ascending id order; `total` from finalize_weights / tile_total_of.
/// If rounding leaves every running sum <= u * total, the last survivor (as the CPU).
__device__ int32_t pick_token(const Row& r, double u, double total, Scratch& sc) {
  const double target = u * total;
  if (threadIdx.x == 0) sc.found = INT32_MAX;
  __syncthreads();
  int32_t last = -1;
  double carry = 0.0;
  for (int base = 0; base < r.vocab; base += kTile) {
    const int i0 = base + static_cast<int>(threadIdx.x) * kPer;
    float w[kPer];
    load4(r.ws, r.vocab, i0, w);
    double tile_total;
    double cum = carry + block_excl_scan(thread_sum(w), sc.d, tile_total);
    carry += tile_total;
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      if (!(w[j] > 0.f)) continue;
      cum += static_cast<double>(w[j]);
      if (target < cum) {
        atomicMin(&sc.found, i0 + j);
        break;
      }
    }
#pragma unroll
    for (int j = 0; j < kPer; ++j)
      if (w[j] > 0.f) last = i0 + j;
    __syncthreads();
    if (sc.found != INT32_MAX) break;
  }
  const int32_t t = sc.found;
  if (t != INT32_MAX) return t;
  return static_cast<int32_t>(block_reduce(static_cast<float>(last), MaxF(), sc.f));  // ids < 2^24
}

/// Raw log_softmax (logprobs.cpp): the chosen token's and the top n, best first, ties by id.
__device__ void write_logprobs(const Row& r, float raw_max, int32_t token, int n, float* logprob,
                               int32_t* top_ids, float* top_lp, Scratch& sc) {
  double part = 0.0;
  for (int i = threadIdx.x; i < r.vocab; i += kThreads)
    part += exp(static_cast<double>(__fsub_rn(r.raw[i], raw_max)));
  const double sum = block_reduce(part, AddD(), sc.d);
  const float lse = __fadd_rn(raw_max, static_cast<float>(log(sum)));
  if (threadIdx.x == 0 && logprob != nullptr) *logprob = __fsub_rn(r.raw[token], lse);
  if (n <= 0) return;
  n = min(n, r.vocab);
  auto key_of = [&](int i, uint32_t& key) {
    key = float_key(__fsub_rn(r.raw[i], lse));
    return true;
  };
  int need = 0;
  const uint32_t thr = radix_select(r.vocab, n, key_of, sc, need);
  if (threadIdx.x == 0) sc.n_top = 0;
  __syncthreads();
  // Every key above the threshold, and the `need` lowest ids of those equal to it.
  long long tie_carry = 0;
  for (int base = 0; base < r.vocab; base += kTile) {
    const int i0 = base + static_cast<int>(threadIdx.x) * kPer;
    uint32_t k[kPer];
    long long mine = 0, tile_ties = 0;
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      k[j] = 0;
      if (i0 + j < r.vocab) key_of(i0 + j, k[j]);
      mine += (i0 + j < r.vocab && k[j] == thr) ? 1 : 0;
    }
    long long rank = tie_carry + block_excl_scan(mine, sc.l, tile_ties);
    tie_carry += tile_ties;
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      if (i0 + j >= r.vocab) continue;
      if (k[j] > thr || (k[j] == thr && rank++ < need)) {
        const int slot = atomicAdd(&sc.n_top, 1);
        if (slot < kMaxTop) {
          sc.top_id[slot] = i0 + j;
          sc.top_lp[slot] = key_float(k[j]);
        }
      }
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    const int m = min(sc.n_top, kMaxTop);
    for (int a = 1; a < m; ++a) {  // insertion sort: lp desc, id asc
      const int32_t id = sc.top_id[a];
      const float v = sc.top_lp[a];
      int b = a - 1;
      while (b >= 0 && (sc.top_lp[b] < v || (sc.top_lp[b] == v && sc.top_id[b] > id))) {
        sc.top_id[b + 1] = sc.top_id[b];
        sc.top_lp[b + 1] = sc.top_lp[b];
        --b;
      }
      sc.top_id[b + 1] = id;
      sc.top_lp[b + 1] = v;
    }
    for (int s = 0; s < kMaxTop; ++s) {
      top_ids[s] = s < m ? sc.top_id[s] : -1;
      top_lp[s] = s < m ? sc.top_lp[s] : neg_inf();
    }
  }
}

/// Row `row`'s inputs (r.p already set): its logits, bias, and penalty tables when it has them.
__device__ __forceinline__ void set_row_inputs(Row& r, const GpuSampleArgs& a, int row) {
  r.vocab = a.vocab;
  r.raw = a.logits + static_cast<int64_t>(row) * a.vocab;
  r.bias = a.bias != nullptr ? a.bias + static_cast<int64_t>(row) * a.vocab : nullptr;
  const bool pen = r.p.counts_row >= 0;
  r.cnt = pen && a.counts != nullptr ? a.counts + static_cast<int64_t>(r.p.counts_row) * a.vocab : nullptr;
  r.seen = pen && a.seen != nullptr ? a.seen + static_cast<int64_t>(r.p.counts_row) * a.vocab : nullptr;
}

// ---- greedy rows without logprobs: the argmaxes of pass 1 over many blocks ----
// A 129k-entry row read by one block took ~54 us (one SM's issue rate); greedy_partial_kernel
// spreads each plain greedy row over kGreedyChunks blocks, and sample_kernel folds their results
// in chunk order. Both argmaxes are order-free (larger value, then lower id), so the token is the
// one pass 1 would pick.
constexpr int kGreedyChunks = 64, kGreedyThreads = 256;
struct GreedyPart {
  ArgMax x, raw;  // over the chunk: processed values, raw values (the fallback)
};
__device__ __forceinline__ bool plain_greedy(const GpuSampleParams& p) {
  return p.temperature < kGreedyT && p.want_logprobs == 0;
}

__global__ void __launch_bounds__(kGreedyThreads) greedy_partial_kernel(GpuSampleArgs a, GreedyPart* parts) {
  detail::pdl_entry();
  __shared__ ArgMax sx[kGreedyThreads / 32], sr[kGreedyThreads / 32];
  const int row = blockIdx.x, chunk = blockIdx.y;
  Row r;
  r.p = a.params[row];
  if (!plain_greedy(r.p)) return;  // block-uniform
  set_row_inputs(r, a, row);
  const int per = (a.vocab + kGreedyChunks - 1) / kGreedyChunks;
  const int i0 = chunk * per, i1 = min(a.vocab, i0 + per);
  ArgMax am_x{neg_inf(), -1}, am_raw{neg_inf(), -1};
  for (int i = i0 + threadIdx.x; i < i1; i += kGreedyThreads) {
    const float v = r.raw[i];
    if (!isnan(v) && v != neg_inf()) am_raw = better_of(am_raw, ArgMax{v, i});
    const float x = processed(r, i, v);
    if (x != neg_inf()) am_x = better_of(am_x, ArgMax{x, i});
  }
  am_x = warp_argmax(am_x);
  am_raw = warp_argmax(am_raw);
  if ((threadIdx.x & 31) == 0) sx[threadIdx.x >> 5] = am_x, sr[threadIdx.x >> 5] = am_raw;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kGreedyThreads / 32; ++w) am_x = better_of(sx[0], sx[w]), sx[0] = am_x;
    for (int w = 1; w < kGreedyThreads / 32; ++w) am_raw = better_of(sr[0], sr[w]), sr[0] = am_raw;
    parts[static_cast<int64_t>(row) * kGreedyChunks + chunk] = GreedyPart{sx[0], sr[0]};
  }
}

__global__ void __launch_bounds__(kThreads) sample_kernel(GpuSampleArgs a, float* ws_all, const GreedyPart* parts) {
  detail::pdl_entry();
  __shared__ Scratch sc;
  const int row = blockIdx.x;
  Row r;
  r.p = a.params[row];
  if (plain_greedy(r.p)) {  // block-uniform: fold the partial kernel's chunks (warp 0)
    if (threadIdx.x >= 32) return;
    ArgMax am_x{neg_inf(), -1}, am_raw{neg_inf(), -1};
    for (int c = threadIdx.x; c < kGreedyChunks; c += 32) {
      const GreedyPart g = parts[static_cast<int64_t>(row) * kGreedyChunks + c];
      am_x = better_of(am_x, g.x);
      am_raw = better_of(am_raw, g.raw);
    }
    am_x = warp_argmax(am_x);
    am_raw = warp_argmax(am_raw);
    if (threadIdx.x == 0) {
      a.token[row] = am_x.id >= 0 ? am_x.id : (am_raw.id >= 0 ? am_raw.id : 0);
      if (a.logprob != nullptr) a.logprob[row] = 0.f;
    }
    return;
  }
  set_row_inputs(r, a, row);
  r.ws = ws_all + static_cast<int64_t>(row) * a.vocab;
  const bool greedy = r.p.temperature < kGreedyT;

  // Pass 1.
  ArgMax am_x{neg_inf(), -1}, am_raw{neg_inf(), -1};
  float raw_max = neg_inf(), s_max = neg_inf();
  long long n_cand = 0, n_pinf = 0;
  // Everything this pass gathers is order-free (maxima, argmaxes by value then id, counts), so
  // each thread loads kPass1 values ahead: one block reads a whole row, and one load in flight
  // per thread would leave it latency-bound (~50 us for a 129k-entry row).
  constexpr int kPass1 = 8;
  for (int base = threadIdx.x; base < r.vocab; base += kThreads * kPass1) {
    float raw[kPass1];
#pragma unroll
    for (int u = 0; u < kPass1; ++u) {
      const int i = base + u * kThreads;
      raw[u] = i < r.vocab ? r.raw[i] : 0.f;
    }
#pragma unroll
    for (int u = 0; u < kPass1; ++u) {
      const int i = base + u * kThreads;
      if (i >= r.vocab) break;
      const float v = raw[u];
      raw_max = fmaxf(raw_max, v);
      if (!isnan(v) && v != neg_inf()) am_raw = better_of(am_raw, ArgMax{v, i});
      const float x = processed(r, i, v);
      if (greedy) {
        if (x != neg_inf()) am_x = better_of(am_x, ArgMax{x, i});
        continue;
      }
      float s = neg_inf();
      if (x != neg_inf()) {
        s = __fdiv_rn(x, r.p.temperature);
        ++n_cand;
        if (s == INFINITY) ++n_pinf;
        else s_max = fmaxf(s_max, s);
      }
      r.ws[i] = s;
    }
  }
  raw_max = block_reduce(raw_max, MaxF(), sc.f);
  am_raw = block_argmax(am_raw, sc.am);
  const int32_t fallback = am_raw.id < 0 ? 0 : am_raw.id;

  int32_t token;
  if (greedy) {
    am_x = block_argmax(am_x, sc.am);
    token = am_x.id < 0 ? fallback : am_x.id;
  } else {
    n_cand = block_reduce(n_cand, AddL(), sc.l);
    n_pinf = block_reduce(n_pinf, AddL(), sc.l);
    s_max = block_reduce(s_max, MaxF(), sc.f);
    const bool pinf = n_pinf > 0;
    const long long count = pinf ? n_pinf : n_cand;
    if (pinf) s_max = 0.f;
    if (count == 0) {
      token = fallback;
    } else {
      float thr = neg_inf();
      if (r.p.top_k > 0 && r.p.top_k < count) {
        auto key_of = [&](int i, uint32_t& key) {
          const float s = shaped(r.ws[i], pinf);
          key = float_key(s);
          return s != neg_inf();
        };
        int need;
        thr = key_float(radix_select(r.vocab, r.p.top_k, key_of, sc, need));
      }
      long long n_surv = 0;
      U128 part = zero128();  // exact mass, for top_p
      for (int i = threadIdx.x; i < r.vocab; i += kThreads) {
        const float s = shaped(r.ws[i], pinf);
        float w = 0.f;
        if (s != neg_inf() && s >= thr) w = static_cast<float>(exp(static_cast<double>(__fsub_rn(s, s_max))));
        r.ws[i] = w;
        if (w > 0.f) {
          ++n_surv;
          part = add128(part, weight_fx(w));
        }
      }
      n_surv = block_reduce(n_surv, AddL(), sc.l);  // syncs: ws is complete after this
      const bool use_cut = r.p.top_p < 1.f && n_surv > 1;
      TopPCut cut{0.f, 0, 0};
      if (use_cut) {
        const U128 mass = block_sum128(part, sc.u);
        cut = top_p_cut(r, static_cast<double>(r.p.top_p) * to_double(mass), sc);
      }
      const double total =
          (use_cut || r.p.min_p > 0.f) ? finalize_weights(r, use_cut, cut, sc) : tile_total_of(r, sc);
      token = pick_token(r, rng_uniform_dev(r.p.seed, r.p.sample_index, r.p.position), total, sc);
    }
  }
  if (threadIdx.x == 0) a.token[row] = token;
  if (r.p.want_logprobs > 0) {
    const bool tops = r.p.want_logprobs > 1 && a.top_ids != nullptr && a.top_logprobs != nullptr;
    write_logprobs(r, raw_max, token, tops ? min(r.p.want_logprobs - 1, kMaxTop) : 0,
                   a.logprob != nullptr ? a.logprob + row : nullptr,
                   tops ? a.top_ids + static_cast<int64_t>(row) * kMaxTop : nullptr,
                   tops ? a.top_logprobs + static_cast<int64_t>(row) * kMaxTop : nullptr, sc);
  } else if (threadIdx.x == 0 && a.logprob != nullptr) {
    a.logprob[row] = 0.f;
  }
}

// Workspace: the rows' shaped values [rows, vocab] fp32, then the greedy partials [rows, chunks].
size_t greedy_parts_offset(int32_t rows, int32_t vocab) {
  const size_t b = static_cast<size_t>(rows) * static_cast<size_t>(vocab) * sizeof(float);
  return (b + 15) / 16 * 16;
}

}  // namespace

size_t sample_workspace_bytes(int32_t rows, int32_t vocab) {
  if (rows <= 0 || vocab <= 0) return 0;
  return greedy_parts_offset(rows, vocab) + static_cast<size_t>(rows) * kGreedyChunks * sizeof(GreedyPart);
}

bool sample_tokens(const GpuSampleArgs& a, void* workspace, void* stream) {
  if (a.rows < 0 || a.vocab <= 0) return fail("sample_tokens: bad shape");
  if (a.rows == 0) return true;
  if (a.logits == nullptr || a.params == nullptr || a.token == nullptr || workspace == nullptr)
    return fail("sample_tokens: null logits, params, token or workspace");
  auto* parts = reinterpret_cast<GreedyPart*>(static_cast<uint8_t*>(workspace) + greedy_parts_offset(a.rows, a.vocab));
  detail::launch_pdl(greedy_partial_kernel, dim3(a.rows, kGreedyChunks), kGreedyThreads, 0, as_stream(stream), a, parts);
  if (!check_launch("greedy_partial_kernel")) return false;
  detail::launch_pdl(sample_kernel, a.rows, kThreads, 0, as_stream(stream), a, static_cast<float*>(workspace), parts);
  return check_launch("sample_kernel");
}

}  // namespace deepinfer::cuda
