// Which backends this build has and which devices they see.
#pragma once

#include <string>
#include <vector>

namespace deepinfer {

bool cuda_compiled_in();
/// "cpu", then one line per CUDA device when the CUDA backend is compiled in.
std::vector<std::string> list_devices();
/// Device-to-device copy bandwidth of the current CUDA device in GB/s (bytes read + written, a
/// 1 GiB copy, best of 3: cuda::measure_copy_bandwidth in device_info.cu); 0 without the CUDA
/// backend or a device.
double cuda_copy_bandwidth_gb_s();
/// Dense FP8 tensor rate of the current CUDA device in TFLOP/s: the cuBLASLt block-scaled FP8
/// GEMM of the prefill path (fp8_linear_lt, 128x128 weight / 1x128 activation scales, bf16 out)
/// at 8192 x 8192 x 8192, best of 10 timed runs after 3 warm-ups (cuda::measure_fp8_tflops in
/// device_info.cu; ~0.5 GB of buffers, freed before it returns). 0 without the CUDA backend or a
/// device, or on any failure.
double cuda_fp8_tflops();
/// Dense bf16 tensor rate of the current CUDA device in TFLOP/s: cuBLASLt's bf16 GEMM
/// (bf16_linear_lt) at 8192^3, measured as cuda_fp8_tflops (cuda::measure_bf16_tflops; ~0.4 GB).
double cuda_bf16_tflops();

/// Marks the start (true) or end (false) of the span a profiler started with "profile from start
/// off" records (cudaProfilerStart / cudaProfilerStop; e.g. `ncu --profile-from-start off`); a
/// no-op without the CUDA backend or a profiler.
void cuda_profiler_range(bool start);

}  // namespace deepinfer
