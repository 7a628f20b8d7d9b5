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

}  // namespace deepinfer
