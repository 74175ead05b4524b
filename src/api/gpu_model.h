// GPU model names: the short form that specs, traces and placement use
// (V100M32, A10, T4), from the long names NVML and nvidia-smi report
// ("Tesla V100-SXM2-32GB"). One home, so a node's model and a spec's
// gpuModel are compared in the same form everywhere.
#pragma once

#include <string>
#include <string_view>

namespace trainyard::api {

// The short name of a GPU model: vendor and product-line words (NVIDIA,
// Tesla, GeForce, Quadro) and form-factor words (SXM2, PCIE, NVL, HBM3, ...)
// dropped, the rest joined upper-case, and a memory size "NNGB" written as
// a suffix "MNN": "Tesla V100-SXM2-32GB" -> "V100M32", "NVIDIA A10" -> "A10",
// "NVIDIA H100 80GB HBM3" -> "H100M80", "NVIDIA GeForce RTX 3090" ->
// "RTX3090". A short name is its own short name ("V100M32", "G2"); "" stays
// "".
std::string CanonicalGpuModel(std::string_view name);

}  // namespace trainyard::api
