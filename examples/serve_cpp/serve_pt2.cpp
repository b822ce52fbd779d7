// Load a .pt2 written by `compile-tune package` and call it from C++, as a server would, driven
// by the package's own record (compile-tune's metadata, key "compile_tune": JSON).
//
//   serve_pt2 MODEL.pt2
//
// Before any of the package's code loads, it refuses (exit code 2, one line) a package built for
// another torch release or for CPU flags this CPU lacks ("cpu": "required_flags"). Then it sets
// the thread count and float32 matmul precision the package was measured at, builds each input of
// "input_order" from "tensors" (dtype, example shape) at the largest sizes "dims" allows (values
// 0, 1, 2, ... scaled by 1e-3 for floats, so a Python caller can build the same tensors; ones for
// integers: a valid token id and mask), calls the package and prints each output's shape and sum;
// then calls it one past those bounds: AOTInductor's input checks refuse, and the process goes on.
//
// Output, one line each: "compile_tune: <the record>", "built: <what it was built from>", the
// call inside the bounds ("input NAME [sizes], ...: output [sizes] sum S ..."), the call outside
// them ("input ...: refused: <AOTInductor's error>").
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

// Why this process must not load the package (empty: it may): another torch, or CPU flags missing.
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
  if (!lacking.empty())
    return "built for " + cpu["isa_level"].text + " (" + cpu["model"].text + ") and needs " + join(lacking) +
           ", which this CPU lacks (" + std::to_string(cpu["flags"].items.size()) +
           " flags on the build CPU); rebuild it with `compile-tune package RESULTS --isa x86-64-v2` or on this "
           "machine";
  return "";
}

static std::string built_line(const Json& meta) {
  std::ostringstream out;
  out << meta["config"].text << " (" << meta["config_change"].text << ")"
      << "; precision " << (meta["precision"].is_null() ? "as the model" : meta["precision"].text)
      << "; weights " << (meta["fold_at_runtime"].boolean ? "swappable" : "folded at build time")
      << "; device " << meta["device"].text << ", vector ISA " << meta["cpu_isa"].text;
  if (!meta["cuda"].is_null()) {  // checked by tuner.load_package; a CUDA caller checks it too
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
    part << name.text << " " << c10::IntArrayRef(shape);
    parts.push_back(part.str());
  }
  said = join(parts);
  return inputs;
}

static void call(torch::inductor::AOTIModelPackageLoader& loader, const Json& meta, int64_t past) {
  std::string said;
  std::vector<at::Tensor> inputs = inputs_of(meta, sizes_of(meta, past), at::Device(meta["device"].text), said);
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
  // Before the first call: the package's generated code reads it once per process.
  setenv("AOTI_RUNTIME_CHECK_INPUTS", "1", /*overwrite=*/0);
  c10::InferenceMode no_grad;
  torch::inductor::AOTIModelPackageLoader loader(argv[1]);
  call(loader, meta, 0);
  call(loader, meta, 1);
  return 0;
}
