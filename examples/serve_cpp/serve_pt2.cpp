// Load a .pt2 written by `compile-tune package` and call it from C++, as a server would.
//
//   serve_pt2 MODEL.pt2 DIM0 [DIM1 ...]
//
// Calls the package once on a float32 input of the given shape (values 0, 1, 2, ... scaled by
// 1e-3, so a Python caller can build the same tensor), prints each output's shape and sum, then
// calls it on a shape one larger in the first dimension: inside the package's bounds it answers,
// outside them AOTInductor's input checks refuse with an error and the process goes on.
//
// The package's own record (compile-tune's metadata, key "compile_tune") says the torch it was
// built for and "input_order": the names of the tensors run() takes, in order (keyword inputs
// are flattened in the order the workload's example_inputs() gave them).
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>

static at::Tensor input_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  return at::arange(n, at::kFloat).mul(1e-3).reshape(shape);
}

static void call(torch::inductor::AOTIModelPackageLoader& loader, const std::vector<int64_t>& shape) {
  std::cout << "input [";
  for (size_t i = 0; i < shape.size(); ++i) std::cout << (i ? ", " : "") << shape[i];
  std::cout << "]: ";
  try {
    std::vector<at::Tensor> outputs = loader.run({input_of(shape)});
    for (const auto& out : outputs) {
      std::cout << "output " << out.sizes() << " sum " << out.sum().item<double>() << " ";
    }
    std::cout << std::endl;
  } catch (const std::exception& e) {
    // the package refused the input (AOTI_RUNTIME_CHECK_INPUTS): say so and go on serving
    std::string what = e.what();
    std::cout << "refused: " << what.substr(0, what.find('\n')) << std::endl;
  }
}

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: serve_pt2 MODEL.pt2 DIM0 [DIM1 ...]" << std::endl;
    return 2;
  }
  // Before the first call: the package's generated code reads it once per process.
  setenv("AOTI_RUNTIME_CHECK_INPUTS", "1", /*overwrite=*/0);
  c10::InferenceMode no_grad;
  torch::inductor::AOTIModelPackageLoader loader(argv[1]);
  auto metadata = loader.get_metadata();
  auto record = metadata.find("compile_tune");
  std::cout << "compile_tune: " << (record == metadata.end() ? "(none)" : record->second) << std::endl;
  std::vector<int64_t> shape;
  for (int i = 2; i < argc; ++i) shape.push_back(std::atoll(argv[i]));
  call(loader, shape);
  shape[0] += 1;
  call(loader, shape);
  return 0;
}
