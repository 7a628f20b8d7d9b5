// Which backends this build has and which devices they see.
#pragma once

#include <string>
#include <vector>

namespace deepinfer {

bool cuda_compiled_in();
/// "cpu", then one line per CUDA device when the CUDA backend is compiled in.
std::vector<std::string> list_devices();

}  // namespace deepinfer
