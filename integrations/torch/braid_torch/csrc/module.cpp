// module.cpp - the Python module: the backend's creator for register_backend, and the version.
#include <pybind11/chrono.h>
#include <torch/python.h>

#include "backend.hpp"

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "braid: a torch.distributed backend for CPU tensors on braid's host mode";
  m.def("create_backend", &braid_torch::BackendBraid::create, "creator for torch.distributed.Backend.register_backend");
  m.def("library_path", [] { return braid_torch::nccl().path; }, "the braid library this process uses");
  m.def("nccl_version", [] {
    int v = 0;
    braid_torch::check(braid_torch::nccl().GetVersion(&v), "ncclGetVersion");
    return v;
  });
}
