// Load a .pt2 written by `compile-tune package` and call it from C++, as a server would, driven
// by the package's own record (compile-tune's metadata, key "compile_tune": JSON).
//
//   serve_pt2 MODEL.pt2
//
// Before any of the package's code loads, it refuses (exit code 2, one line) a package built for
// another torch release; for CPU flags this CPU lacks ("cpu": "required_flags"), naming the level
// to rebuild it for: this CPU's highest of the record's "cpu": "levels" (the one below the
// package's where only its vector extras are missing, as tuner.load_package says); for a CUDA
// device this process does not see ("device": "cuda:N"); or for another GPU ("cuda": "capability"
// and the CUDA release, the same rule as tuner.load_package). Then it sets
// the thread count and float32 matmul precision the package was measured at, builds each input of
// "input_order" from "tensors" (dtype, example shape) at the largest sizes "dims" allows (values
// 0, 1, 2, ... scaled by 1e-3 for floats, so a Python caller can build the same tensors; ones for
// integers: a valid token id and mask), calls the package and prints each output's shape and sum;
// then calls it one past those bounds: AOTInductor's input checks refuse, and the process goes on.
//
// Output, one line each: "compile_tune: <the record>", "built: <what it was built from>", "serving:
// <the thread count and matmul precision set, and the inputs it will pass>", the call inside the bounds ("input NAME [sizes], ...: output [sizes] sum S ..."), the call outside
// them ("input ...: refused: <AOTInductor's error>").
#include <dlfcn.h>

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <torch/cuda.h>
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>
#include <torch/headeronly/version.h>

// ---------------------------------------------------------------- a JSON value, just enough

struct Json {
  enum Kind { Null, Bool, Number, String, Array, Object } kind = Null;
  bool boolean = false;
  double number = 0;
  std::string text;
  std::vector<Json> items;
  std::vector<std::pair<std::string, Json>> fields;  // in the record's order

  const Json& operator[](const std::string& key) const {
    static const Json null;
    for (const auto& [k, v] : fields)
      if (k == key) return v;
    return null;
  }
  bool has(const std::string& key) const {
    for (const auto& field : fields)
      if (field.first == key) return true;
    return false;
  }
  bool is_null() const { return kind == Null; }
};

class Parser {
 public:
  explicit Parser(const std::string& s) : s_(s) {}
  Json parse() {
    Json v = value();
    space();
    if (i_ != s_.size()) fail("trailing text");
    return v;
  }

 private:
  const std::string& s_;
  size_t i_ = 0;
  [[noreturn]] void fail(const char* what) {
    throw std::runtime_error(std::string("metadata is not JSON: ") + what + " at " + std::to_string(i_));
  }
  void space() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool take(const char* word) {
    size_t n = std::char_traits<char>::length(word);
    if (s_.compare(i_, n, word) != 0) return false;
    i_ += n;
    return true;
  }
  Json value() {
    space();
    Json v;
    if (i_ >= s_.size()) fail("end of text");
    char c = s_[i_];
    if (c == '{') {
      v.kind = Json::Object;
      ++i_;
      space();
      if (take("}")) return v;
      do {
        space();
        std::string key = string();
        space();
        if (!take(":")) fail("expected ':'");
        v.fields.emplace_back(key, value());
        space();
      } while (take(","));
      if (!take("}")) fail("expected '}'");
    } else if (c == '[') {
      v.kind = Json::Array;
      ++i_;
      space();
      if (take("]")) return v;
      do v.items.push_back(value());
      while ((space(), take(",")));
      if (!take("]")) fail("expected ']'");
    } else if (c == '"') {
      v.kind = Json::String;
      v.text = string();
    } else if (take("true")) {
      v.kind = Json::Bool;
      v.boolean = true;
    } else if (take("false")) {
      v.kind = Json::Bool;
    } else if (take("null")) {
      v.kind = Json::Null;
    } else {
      size_t used = 0;
      v.kind = Json::Number;
      v.number = std::stod(s_.substr(i_), &used);
      i_ += used;
    }
    return v;
  }
  std::string string() {
    if (!take("\"")) fail("expected a string");
    std::string out;
    while (i_ < s_.size() && s_[i_] != '"') {
      char c = s_[i_++];
      if (c != '\\') {
        out += c;
        continue;
      }
      char e = s_[i_++];
      if (e == 'u') {  // names and flags are ASCII; anything else only needs to be skipped
        out += '?';
        i_ += 4;
      } else {
        out += e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e == 'b' ? '\b' : e == 'f' ? '\f' : e;
      }
    }
    if (!take("\"")) fail("unterminated string");
    return out;
  }
};

// ---------------------------------------------------------------- what the record says

static std::string join(const std::vector<std::string>& parts, const char* sep = ", ") {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? sep : "") + parts[i];
  return out;
}

static std::set<std::string> cpu_flags_here() {
  std::ifstream info("/proc/cpuinfo");
  std::string line;
  while (std::getline(info, line)) {
    auto colon = line.find(':');
    std::string key = line.substr(0, line.find_first_of(" \t:"));
    if (colon != std::string::npos && (key == "flags" || key == "Features")) {
      std::istringstream words(line.substr(colon + 1));
      return {std::istream_iterator<std::string>(words), std::istream_iterator<std::string>()};
    }
  }
  return {};
}

// The level to rebuild for so that this CPU runs the package: this CPU's highest of the record's
// "levels" (each with every flag it needs), or the one below the package's own where this CPU has
// that level and lacks only its vector extras; "" where none fits (below the lowest, or no levels
// recorded). tuner/pt2/machine.py, rebuild_level, is the same rule.
static std::string rebuild_level(const Json& cpu, const std::set<std::string>& here) {
  const auto& levels = cpu["levels"].fields;  // lowest first, each with every flag it needs
  int ours = -1, level = -1;
  for (size_t i = 0; i < levels.size(); ++i) {
    bool has = true;
    for (const auto& flag : levels[i].second.items) has = has && here.count(flag.text) > 0;
    if (has && ours == static_cast<int>(i) - 1) ours = static_cast<int>(i);
    if (levels[i].first == cpu["isa_level"].text) level = static_cast<int>(i);
  }
  if (level >= 0 && ours >= level) return level > 0 ? levels[level - 1].first : "";
  return ours >= 0 ? levels[ours].first : "";
}

// The compute capability of CUDA device `index`, asked of the CUDA driver (libcuda), so that the
// example builds against a CPU libtorch as well; {-1, -1} where no driver answers.
static std::pair<int, int> capability_of(int index) {
  void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (!driver) return {-1, -1};
  auto init = reinterpret_cast<int (*)(unsigned)>(dlsym(driver, "cuInit"));
  auto get = reinterpret_cast<int (*)(int*, int)>(dlsym(driver, "cuDeviceGet"));
  auto attribute = reinterpret_cast<int (*)(int*, int, int)>(dlsym(driver, "cuDeviceGetAttribute"));
  const int kMajor = 75, kMinor = 76;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, _MINOR
  int device = 0, major = -1, minor = -1;
  if (init && get && attribute && init(0) == 0 && get(&device, index) == 0 &&
      (attribute(&major, kMajor, device) != 0 || attribute(&minor, kMinor, device) != 0))
    major = minor = -1;
  return {major, minor};
}

// Why a CUDA package must not load here (empty: it may): no such device, another compute
// capability (kernels are compiled for one), or a CUDA release a major version apart.
static std::string cuda_refusal(const Json& meta) {
  const std::string& device = meta["device"].text;
  int index = device.size() > 5 ? std::stoi(device.substr(5)) : 0;
  int count = torch::cuda::is_available() ? static_cast<int>(torch::cuda::device_count()) : 0;
  if (index >= count)
    return "built for " + device + ", and this process sees " +
           (count ? std::to_string(count) + " CUDA device(s)" : std::string("no CUDA device")) +
           "; serve it on a GPU machine, or rebuild it here with `compile-tune package RESULTS`";
  const Json& built = meta["cuda"];
  if (built.is_null()) return "";
  auto [major, minor] = capability_of(index);
  int want_major = static_cast<int>(built["capability"].items.at(0).number);
  int want_minor = static_cast<int>(built["capability"].items.at(1).number);
  std::string rebuild = "; rebuild it on this GPU with `compile-tune package RESULTS`";
  if (major < 0) return "cannot read the compute capability of " + device + " (no CUDA driver answered)" + rebuild;
  if (major != want_major || minor != want_minor)
    return "built for another GPU: its kernels are compiled for compute capability " + std::to_string(want_major) +
           "." + std::to_string(want_minor) + " (" + built["name"].text + "); this GPU is " + std::to_string(major) +
           "." + std::to_string(minor) + rebuild;
  long runtime = at::detail::getCUDAHooks().versionCUDART();  // e.g. 12040 for 12.4
  std::string release = built["cuda"].text;
  if (!release.empty() && std::stol(release.substr(0, release.find('.'))) != runtime / 1000)
    return "built for another GPU: it was built with CUDA " + release + "; this libtorch runs CUDA " +
           std::to_string(runtime / 1000) + "." + std::to_string(runtime % 1000 / 10) + rebuild;
  return "";
}

// Why this process must not load the package (empty: it may): another torch, CPU flags missing,
// or a CUDA device it was built for that this process does not have.
static std::string refusal(const Json& meta) {
  if (meta["schema"].number > 2)  // a record this example does not know how to read
    return "its record is schema " + std::to_string(static_cast<int>(meta["schema"].number)) +
           ", newer than this example reads (2); update it from compile-tune's examples/serve_cpp";
  std::string built = meta["torch"].text.substr(0, meta["torch"].text.find('+'));
  if (!built.empty() && built != TORCH_VERSION)
    return "built for torch " + meta["torch"].text + ", this is libtorch " TORCH_VERSION +
           "; load it with that release, or rebuild it with `compile-tune package RESULTS`";
  const Json& cpu = meta["cpu"];
  std::set<std::string> here = cpu_flags_here();
  std::vector<std::string> lacking;
  if (!here.empty())
    for (const auto& flag : cpu["required_flags"].items)
      if (!here.count(flag.text)) lacking.push_back(flag.text);
  if (!lacking.empty()) {
    std::string level = rebuild_level(cpu, here);
    std::string how = level.empty() ? "`compile-tune package RESULTS`" : "`compile-tune package RESULTS --isa " + level + "`";
    return "built for " + cpu["isa_level"].text + " (" + cpu["model"].text + ") and needs " + join(lacking) +
           ", which this CPU lacks (" + std::to_string(cpu["flags"].items.size()) +
           " flags on the build CPU); rebuild it with " + how + ", or build it on this machine";
  }
  if (meta["device"].text.rfind("cuda", 0) == 0) return cuda_refusal(meta);
  return "";
}

static std::string built_line(const Json& meta) {
  std::ostringstream out;
  out << meta["config"].text << " (" << meta["config_change"].text << ")"
      << "; precision " << (meta["precision"].is_null() ? "as the model" : meta["precision"].text)
      << "; weights " << (meta["fold_at_runtime"].boolean ? "swappable" : "folded at build time")
      << "; device " << meta["device"].text << ", vector ISA " << meta["cpu_isa"].text;
  if (!meta["cuda"].is_null()) {  // checked above, before the package loaded
    const Json& cap = meta["cuda"]["capability"];
    out << "; GPU " << meta["cuda"]["name"].text << " (compute capability " << cap.items[0].number << "."
        << cap.items[1].number << ", CUDA " << meta["cuda"]["cuda"].text << ")";
  }
  out << "; inputs " << (meta["keyword_inputs"].boolean ? "by keyword" : "by position");
  std::vector<std::string> sources;
  for (const auto& [name, dims] : meta["dims_from"].fields)
    for (const auto& [dim, from] : dims.fields) sources.push_back(name + " dim " + dim + " from " + from.text);
  if (!sources.empty()) out << "; bounds: " << join(sources);
  // What tuner.load_package checks and this example only reports: the digests of its files (the
  // archive's: `sha256sum -c model.pt2.sha256`), the C++ runtime its code needs, where it came from.
  const Json& tools = meta["toolchain"];
  if (!tools.is_null())
    out << "; compiled by " << tools["compiler"]["path"].text << " " << tools["compiler"]["version"].text
        << ", needs GLIBCXX_" << tools["needs"]["glibcxx"].text << " and glibc " << tools["needs"]["glibc"].text;
  if (!meta["digests"].is_null()) out << "; " << meta["digests"]["members"].fields.size() << " files digested";
  out << "; target " << (meta["target_verified"].boolean ? "verified" : "not verified");
  if (!meta["source"].is_null() && !meta["source"]["commit"].is_null())
    out << "; from commit " << meta["source"]["commit"].text.substr(0, 12);
  return out.str();
}

static at::ScalarType dtype_of(const std::string& name) {
  static const std::map<std::string, at::ScalarType> types = {
      {"torch.float32", at::kFloat}, {"torch.float64", at::kDouble}, {"torch.float16", at::kHalf},
      {"torch.bfloat16", at::kBFloat16}, {"torch.int64", at::kLong}, {"torch.int32", at::kInt},
      {"torch.int16", at::kShort}, {"torch.int8", at::kChar}, {"torch.uint8", at::kByte}, {"torch.bool", at::kBool}};
  auto found = types.find(name);
  if (found == types.end()) throw std::runtime_error("an input of dtype " + name + ": build it yourself");
  return found->second;
}

// Each input's sizes: its example shape, its varying dims at their maximum (plus `past`).
static std::map<std::string, std::vector<int64_t>> sizes_of(const Json& meta, int64_t past) {
  std::map<std::string, std::vector<int64_t>> sizes;
  bool varies = false;
  for (const auto& [name, fixed] : meta["fixed"].fields) {
    for (const auto& n : fixed.items) sizes[name].push_back(static_cast<int64_t>(n.number));
    for (const auto& [dim, bounds] : meta["dims"][name].fields) {
      sizes[name][std::stoul(dim)] = static_cast<int64_t>(bounds.items[1].number) + past;
      varies = true;
    }
  }
  if (!varies && past && !sizes.empty() && !sizes.begin()->second.empty())
    sizes.begin()->second[0] += past;  // all fixed: one more row than the package takes
  return sizes;
}

static std::vector<at::Tensor> inputs_of(const Json& meta, const std::map<std::string, std::vector<int64_t>>& sizes,
                                         const at::Device& device, std::string& said) {
  std::vector<at::Tensor> inputs;
  std::vector<std::string> parts;
  for (const auto& name : meta["input_order"].items) {
    if (!meta["tensors"].has(name.text))
      throw std::runtime_error("input " + name.text + " is nested in another: build it yourself");
    auto type = dtype_of(meta["tensors"][name.text]["dtype"].text);
    const auto& shape = sizes.at(name.text);
    int64_t n = 1;
    for (auto d : shape) n *= d;
    auto options = at::TensorOptions().dtype(type).device(device);
    inputs.push_back(at::isFloatingType(type) ? at::arange(n, at::kFloat).mul(1e-3).reshape(shape).to(options)
                                              : at::ones(shape, options));
    std::ostringstream part;
    part << name.text << " " << c10::IntArrayRef(shape) << " " << type;
    parts.push_back(part.str());
  }
  said = join(parts);
  return inputs;
}

// Calls the package with `inputs` (described by `said`) and prints what it returns, or its refusal.
static void call(torch::inductor::AOTIModelPackageLoader& loader, std::vector<at::Tensor>& inputs,
                 const std::string& said) {
  std::cout << "input " << said << ": ";
  try {
    for (const auto& out : loader.run(inputs))
      std::cout << "output " << out.sizes() << " sum " << out.sum().item<double>() << " ";
    std::cout << std::endl;
  } catch (const std::exception& e) {
    // the package refused the input (AOTI_RUNTIME_CHECK_INPUTS): say so and go on serving
    std::string what = e.what();
    std::cout << "refused: " << what.substr(0, what.find('\n')) << std::endl;
  }
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: serve_pt2 MODEL.pt2" << std::endl;
    return 2;
  }
  // Read without loading any of the package's code.
  auto metadata = torch::inductor::AOTIModelPackageLoader::load_metadata_from_package(argv[1], "model");
  auto record = metadata.find("compile_tune");
  if (record == metadata.end()) {
    std::cerr << "error: " << argv[1] << ": no compile-tune record (package it with `compile-tune package`)"
              << std::endl;
    return 2;
  }
  std::cout << "compile_tune: " << record->second << std::endl;
  Json meta = Parser(record->second).parse();
  std::string refused = refusal(meta);
  if (!refused.empty()) {
    std::cerr << "error: " << argv[1] << ": " << refused << std::endl;
    return 2;
  }
  std::cout << "built: " << built_line(meta) << std::endl;
  at::set_num_threads(static_cast<int>(meta["threads"].number));
  if (!meta["matmul_precision"].is_null())  // tf32: as it was compiled and measured
    at::globalContext().setFloat32MatmulPrecision(meta["matmul_precision"].text);
  // The inputs before the package loads, so that a record it cannot serve fails before its code runs.
  at::Device device(meta["device"].text);
  std::string inside, outside;
  std::vector<at::Tensor> within, beyond;
  try {
    within = inputs_of(meta, sizes_of(meta, 0), device, inside);
    beyond = inputs_of(meta, sizes_of(meta, 1), device, outside);
  } catch (const std::exception& e) {
    std::cerr << "error: " << argv[1] << ": cannot build its inputs: " << e.what() << std::endl;
    return 2;
  }
  static const std::map<at::Float32MatmulPrecision, const char*> precisions = {
      {at::Float32MatmulPrecision::HIGHEST, "highest"}, {at::Float32MatmulPrecision::HIGH, "high"},
      {at::Float32MatmulPrecision::MEDIUM, "medium"}};
  std::cout << "serving: threads " << at::get_num_threads() << ", float32 matmul precision "
            << precisions.at(at::globalContext().float32MatmulPrecision()) << ", inputs " << inside << std::endl;
  // Before the first call: the package's generated code reads it once per process.
  setenv("AOTI_RUNTIME_CHECK_INPUTS", "1", /*overwrite=*/0);
  c10::InferenceMode no_grad;
  try {
    torch::inductor::AOTIModelPackageLoader loader(argv[1]);
    call(loader, within, inside);
    call(loader, beyond, outside);
  } catch (const std::exception& e) {
    std::string what = e.what();
    std::cerr << "error: " << argv[1] << ": AOTInductor could not load it: " << what.substr(0, what.find('\n'))
              << std::endl;
    return 2;
  }
  return 0;
}
