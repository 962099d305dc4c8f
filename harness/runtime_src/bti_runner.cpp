// bti_runner: minimal executor_runner-style binary for the bti harness.
//
// Builds against ONLY what the executorch pip wheel ships:
//   - headers:  site-packages/executorch/include
//   - library:  site-packages/executorch/extension/pybindings/_portable_lib.*.so (executorch 1.4);
//               on 1.5, lib/libexecutorch*.so and pybindings/_C.*.so (harness/runner_build.py)
//               (exports runtime core, portable+optimized kernels, XNNPACK
//                backend, bundled_program and data loaders)
// The wheel has no headers for extension/data_loader or devtools/bundled_program,
// so a tiny buffer DataLoader is implemented here and the 3 bundled_program
// functions are declared by hand (signatures copied from executorch v1.4.1
// devtools/bundled_program/bundled_program.h, commit e4d02f41f790).
//
// Usage:
//   bti_runner (--model_path FILE.pte | --bundled_program FILE.bpte [--testset_idx N])
//              [--inputs in0.bin,in1.bin,...] [--input_shapes 2x3,4,scalar]
//              [--input_dtypes float32,int64] [--iterations N] [--warmup N]
//              [--threads N] --output_dir DIR
// --input_shapes gives each input's run shape (a dynamic-shape program takes
// any shape within its bounds); --input_dtypes must match the program's.
// The output directory is created if missing (one level).
// The interface is harness/providers.py's; harness/pyrunner.py speaks it too.
// Prints one JSON line to stdout; errors go to stderr with non-zero exit.

#include <executorch/runtime/core/data_loader.h>
#include <executorch/runtime/core/error.h>
#include <executorch/runtime/core/evalue.h>
#include <executorch/runtime/core/freeable_buffer.h>
#include <executorch/runtime/core/hierarchical_allocator.h>
#include <executorch/runtime/core/memory_allocator.h>
#include <executorch/runtime/core/span.h>
#include <executorch/runtime/executor/memory_manager.h>
#include <executorch/runtime/executor/method.h>
#include <executorch/runtime/executor/method_meta.h>
#include <executorch/runtime/executor/program.h>
#include <executorch/runtime/platform/runtime.h>

#include <sys/resource.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

// ---- threadpool API (exported by _portable_lib.so; the wheel's threadpool.h
// includes <pthreadpool.h>, which the wheel does not ship) ----
namespace executorch::extension::threadpool {
class ThreadPool final {
 public:
  size_t get_thread_count() const;
  bool _unsafe_reset_threadpool(uint32_t num_threads);
};
ThreadPool* get_threadpool();
} // namespace executorch::extension::threadpool

// ---- bundled_program API (exported by _portable_lib.so, header not shipped) ----
namespace executorch {
namespace bundled_program {
ET_NODISCARD ::executorch::runtime::Error load_bundled_input(
    ::executorch::runtime::Method& method,
    const void* bundled_program_ptr,
    size_t testset_idx);
ET_NODISCARD ::executorch::runtime::Error get_program_data(
    void* file_data,
    size_t file_data_len,
    const void** out_program_data,
    size_t* out_program_data_len);
bool is_bundled_program(void* file_data, size_t file_data_len);
} // namespace bundled_program
} // namespace executorch

using executorch::aten::ScalarType;
using executorch::aten::Tensor;
using executorch::aten::TensorImpl;
using executorch::runtime::DataLoader;
using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::FreeableBuffer;
using executorch::runtime::HierarchicalAllocator;
using executorch::runtime::MemoryAllocator;
using executorch::runtime::MemoryManager;
using executorch::runtime::Method;
using executorch::runtime::MethodMeta;
using executorch::runtime::Program;
using executorch::runtime::Result;
using executorch::runtime::Span;
using executorch::runtime::Tag;

namespace {

struct Fail : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] void fail(const std::string& msg) {
  throw Fail(msg);
}

void check(Error e, const std::string& what) {
  if (e != Error::Ok) {
    char buf[32];
    snprintf(buf, sizeof(buf), " (error 0x%x)", (unsigned)e);
    fail(what + buf);
  }
}

// Read-only loader over an in-memory buffer (like extension BufferDataLoader).
class BufferLoader final : public DataLoader {
 public:
  BufferLoader(const void* data, size_t size)
      : data_(static_cast<const uint8_t*>(data)), size_(size) {}
  ET_NODISCARD Result<FreeableBuffer> load(
      size_t offset,
      size_t size,
      const SegmentInfo& /*segment_info*/) const override {
    if (offset > size_ || size > size_ - offset) {
      return Error::InvalidArgument;
    }
    return FreeableBuffer(data_ + offset, size, /*free_fn=*/nullptr);
  }
  ET_NODISCARD Result<size_t> size() const override {
    return size_;
  }

 private:
  const uint8_t* data_;
  size_t size_;
};

// Growable allocator backed by posix_memalign; frees everything on reset/dtor.
class MallocAllocator final : public MemoryAllocator {
 public:
  MallocAllocator() : MemoryAllocator(0, nullptr) {}
  ~MallocAllocator() override {
    reset();
  }
  void* allocate(size_t size, size_t alignment = kDefaultAlignment) override {
    if (alignment < sizeof(void*)) alignment = sizeof(void*);
    if ((alignment & (alignment - 1)) != 0) return nullptr;
    void* p = nullptr;
    if (posix_memalign(&p, alignment, size == 0 ? 1 : size) != 0) return nullptr;
    ptrs_.push_back(p);
    return p;
  }
  void reset() override {
    for (void* p : ptrs_) free(p);
    ptrs_.clear();
  }

 private:
  std::vector<void*> ptrs_;
};

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) fail("cannot open file: " + path);
  std::streamsize n = f.tellg();
  f.seekg(0, std::ios::beg);
  std::vector<uint8_t> data(static_cast<size_t>(n));
  if (n > 0 && !f.read(reinterpret_cast<char*>(data.data()), n))
    fail("cannot read file: " + path);
  return data;
}

void write_file(const std::string& path, const void* data, size_t n) {
  FILE* f = fopen(path.c_str(), "wb");
  if (!f) fail("cannot open output file: " + path);
  if (n > 0 && fwrite(data, 1, n, f) != n) {
    fclose(f);
    fail("short write: " + path);
  }
  if (fclose(f) != 0) fail("close failed: " + path);
}

const char* dtype_name(ScalarType t) {
  switch (t) {
    case ScalarType::Byte: return "uint8";
    case ScalarType::Char: return "int8";
    case ScalarType::Short: return "int16";
    case ScalarType::Int: return "int32";
    case ScalarType::Long: return "int64";
    case ScalarType::Half: return "float16";
    case ScalarType::Float: return "float32";
    case ScalarType::Double: return "float64";
    case ScalarType::ComplexFloat: return "complex64";
    case ScalarType::ComplexDouble: return "complex128";
    case ScalarType::Bool: return "bool";
    case ScalarType::QInt8: return "qint8";
    case ScalarType::QUInt8: return "quint8";
    case ScalarType::QInt32: return "qint32";
    case ScalarType::BFloat16: return "bfloat16";
    case ScalarType::UInt16: return "uint16";
    case ScalarType::UInt32: return "uint32";
    case ScalarType::UInt64: return "uint64";
    default: return "unknown";
  }
}

// Fill a buffer with ones of the given dtype (default inputs, like upstream
// executor_runner's prepare_input_tensors).
void fill_ones(ScalarType t, uint8_t* p, size_t nbytes) {
  auto fill = [&](auto one) {
    using T = decltype(one);
    T* q = reinterpret_cast<T*>(p);
    for (size_t i = 0; i < nbytes / sizeof(T); ++i) q[i] = one;
  };
  switch (t) {
    case ScalarType::Float: fill(1.0f); break;
    case ScalarType::Double: fill(1.0); break;
    case ScalarType::Half: fill(uint16_t{0x3C00}); break;
    case ScalarType::BFloat16: fill(uint16_t{0x3F80}); break;
    case ScalarType::Byte:
    case ScalarType::Char:
    case ScalarType::Bool: fill(uint8_t{1}); break;
    case ScalarType::Short: fill(int16_t{1}); break;
    case ScalarType::Int: fill(int32_t{1}); break;
    case ScalarType::Long: fill(int64_t{1}); break;
    default: memset(p, 0, nbytes); break;
  }
}

std::vector<std::string> split(const std::string& v) {
  std::vector<std::string> out;
  std::stringstream ss(v);
  std::string p;
  while (std::getline(ss, p, ',')) if (!p.empty()) out.push_back(p);
  return out;
}

struct Args {
  std::string model_path, bundled_path, output_dir;
  std::vector<std::string> inputs, shapes, dtypes;
  long testset_idx = 0, iterations = 1, warmup = 0, threads = 0;
};

long to_long(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  long x = strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || x < 0) fail("bad value for " + flag + ": " + v);
  return x;
}

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i], v;
    size_t eq = k.find('=');
    if (k.rfind("--", 0) != 0) fail("unexpected argument: " + k);
    if (eq != std::string::npos) {
      v = k.substr(eq + 1);
      k = k.substr(0, eq);
    } else {
      if (i + 1 >= argc) fail("missing value for " + k);
      v = argv[++i];
    }
    if (k == "--model_path") a.model_path = v;
    else if (k == "--bundled_program") a.bundled_path = v;
    else if (k == "--testset_idx") a.testset_idx = to_long(k, v);
    else if (k == "--inputs") a.inputs = split(v);
    else if (k == "--input_shapes") a.shapes = split(v);
    else if (k == "--input_dtypes") a.dtypes = split(v);
    else if (k == "--iterations") a.iterations = to_long(k, v);
    else if (k == "--warmup") a.warmup = to_long(k, v);
    else if (k == "--threads") a.threads = to_long(k, v);
    else if (k == "--output_dir") a.output_dir = v;
    else fail("unknown flag: " + k);
  }
  if (a.model_path.empty() == a.bundled_path.empty())
    fail("exactly one of --model_path / --bundled_program is required");
  if (a.output_dir.empty()) fail("--output_dir is required");
  if (a.iterations < 1) fail("--iterations must be >= 1");
  if (!a.shapes.empty() && a.shapes.size() != a.inputs.size())
    fail("--input_shapes must list one shape per input");
  if (!a.dtypes.empty() && a.dtypes.size() != a.inputs.size())
    fail("--input_dtypes must list one dtype per input");
  return a;
}

// Holds a caller-owned input tensor (data + TensorImpl metadata).
struct InputTensor {
  std::vector<uint8_t> data;
  std::vector<TensorImpl::SizesType> sizes;
  std::vector<TensorImpl::DimOrderType> dim_order;
  std::unique_ptr<TensorImpl> impl;
};

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now() - t0)
      .count();
}

int run(int argc, char** argv) {
  Args args = parse_args(argc, argv);
  executorch::runtime::runtime_init();

  if (args.threads > 0) {
    auto* tp = executorch::extension::threadpool::get_threadpool();
    if (tp == nullptr || !tp->_unsafe_reset_threadpool((uint32_t)args.threads))
      fail("failed to set threadpool size");
  }

  struct stat st;
  if (stat(args.output_dir.c_str(), &st) != 0) mkdir(args.output_dir.c_str(), 0755);
  if (stat(args.output_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    fail("cannot create output_dir: " + args.output_dir);

  const bool bundled = !args.bundled_path.empty();

  // ---------------- load (timed) ----------------
  auto t_load = std::chrono::steady_clock::now();
  std::vector<uint8_t> file_data =
      read_file(bundled ? args.bundled_path : args.model_path);
  const void* program_data = file_data.data();
  size_t program_len = file_data.size();
  if (bundled) {
    if (!executorch::bundled_program::is_bundled_program(
            file_data.data(), file_data.size()))
      fail("not a bundled program: " + args.bundled_path);
    check(executorch::bundled_program::get_program_data(
              file_data.data(), file_data.size(), &program_data, &program_len),
          "get_program_data failed");
  }
  BufferLoader loader(program_data, program_len);
  Result<Program> program = Program::load(&loader);
  if (!program.ok()) check(program.error(), "Program::load failed");

  const char* method_name = "forward";
  Result<MethodMeta> meta = program->method_meta(method_name);
  if (!meta.ok()) check(meta.error(), "no method 'forward'");

  std::vector<std::unique_ptr<uint8_t[]>> planned_buffers;
  std::vector<Span<uint8_t>> planned_spans;
  for (size_t id = 0; id < meta->num_memory_planned_buffers(); ++id) {
    size_t n = (size_t)meta->memory_planned_buffer_size(id).get();
    planned_buffers.push_back(std::make_unique<uint8_t[]>(n));
    planned_spans.push_back({planned_buffers.back().get(), n});
  }
  HierarchicalAllocator planned_memory(
      {planned_spans.data(), planned_spans.size()});
  MallocAllocator method_allocator;
  MallocAllocator temp_allocator;
  MemoryManager memory_manager(
      &method_allocator, &planned_memory, &temp_allocator);

  Result<Method> method = program->load_method(method_name, &memory_manager);
  if (!method.ok()) check(method.error(), "load_method(forward) failed");
  const double load_ms = ms_since(t_load);

  // ---------------- inputs ----------------
  const size_t n_in = meta->num_inputs();
  const bool use_bundle_inputs = bundled && args.inputs.empty();
  if (!args.inputs.empty() && args.inputs.size() != n_in) {
    fail("expected " + std::to_string(n_in) + " input files, got " +
         std::to_string(args.inputs.size()));
  }
  std::vector<InputTensor> in_tensors(n_in);
  std::vector<EValue> in_values(n_in);
  if (!use_bundle_inputs) {
    for (size_t i = 0; i < n_in; ++i) {
      Tag tag = meta->input_tag(i).get();
      const std::string fname =
          args.inputs.empty() ? std::string() : args.inputs[i];
      if (tag == Tag::Tensor) {
        auto tm = meta->input_tensor_meta(i).get();
        InputTensor& it = in_tensors[i];
        it.sizes.assign(tm.sizes().begin(), tm.sizes().end());
        it.dim_order.assign(tm.dim_order().begin(), tm.dim_order().end());
        size_t expected = tm.nbytes();
        if (!args.dtypes.empty() && args.dtypes[i] != dtype_name(tm.scalar_type()))
          fail("input " + std::to_string(i) + " is " + args.dtypes[i] +
               ", the program takes " + dtype_name(tm.scalar_type()));
        if (!args.shapes.empty()) {  // the run shape (within a dynamic program's bounds)
          std::vector<TensorImpl::SizesType> run_sizes;
          if (args.shapes[i] != "scalar") {
            std::stringstream ss(args.shapes[i]);
            std::string d;
            while (std::getline(ss, d, 'x')) run_sizes.push_back((TensorImpl::SizesType)to_long("--input_shapes", d));
          }
          if (run_sizes.size() != it.sizes.size())
            fail("input " + std::to_string(i) + ": shape " + args.shapes[i] + " has the wrong rank");
          size_t max_numel = 1, numel = 1;
          for (size_t d = 0; d < run_sizes.size(); ++d) { max_numel *= (size_t)it.sizes[d]; numel *= (size_t)run_sizes[d]; }
          if (numel > max_numel)
            fail("input " + std::to_string(i) + ": shape " + args.shapes[i] + " exceeds the program's bounds");
          expected = max_numel ? tm.nbytes() / max_numel * numel : 0;
          it.sizes = run_sizes;
        }
        if (fname.empty()) {
          it.data.resize(tm.nbytes());
          fill_ones(tm.scalar_type(), it.data.data(), it.data.size());
        } else {
          it.data = read_file(fname);
          if (it.data.size() != expected)
            fail("input " + std::to_string(i) + " (" + fname + "): " +
                 std::to_string(it.data.size()) + " bytes, expected " +
                 std::to_string(expected));
          if (it.data.empty()) it.data.resize(1);  // a valid pointer for an empty tensor
        }
        it.impl = std::make_unique<TensorImpl>(
            tm.scalar_type(), (ssize_t)it.sizes.size(), it.sizes.data(),
            it.data.data(), it.dim_order.data());
        in_values[i] = EValue(Tensor(it.impl.get()));
      } else if (fname.empty()) {
        in_values[i] = method->get_input(i);  // keep program's baked value
      } else {
        std::vector<uint8_t> raw = read_file(fname);
        if (tag == Tag::Int && raw.size() == 8) {
          int64_t v; memcpy(&v, raw.data(), 8); in_values[i] = EValue(v);
        } else if (tag == Tag::Double && raw.size() == 8) {
          double v; memcpy(&v, raw.data(), 8); in_values[i] = EValue(v);
        } else if (tag == Tag::Bool && raw.size() == 1) {
          in_values[i] = EValue(raw[0] != 0);
        } else {
          fail("unsupported non-tensor input " + std::to_string(i));
        }
      }
    }
  }
  auto set_inputs = [&]() {
    if (use_bundle_inputs) {
      check(executorch::bundled_program::load_bundled_input(
                *method, file_data.data(), (size_t)args.testset_idx),
            "load_bundled_input failed (testset_idx " +
                std::to_string(args.testset_idx) + ")");
    } else {
      for (size_t i = 0; i < n_in; ++i)
        check(method->set_input(in_values[i], i),
              "set_input " + std::to_string(i) + " failed");
    }
  };

  // ---------------- run ----------------
  // Inputs are (re)set before every execution, outside the timed region
  // (same semantics as the pybind run_method, which sets inputs per call).
  for (long w = 0; w < args.warmup; ++w) {
    set_inputs();
    check(method->execute(), "execute (warmup) failed");
  }
  std::vector<double> latencies;
  for (long it = 0; it < args.iterations; ++it) {
    set_inputs();
    auto t0 = std::chrono::steady_clock::now();
    Error e = method->execute();
    double dt = ms_since(t0);
    check(e, "execute failed");
    latencies.push_back(dt);
  }

  // ---------------- outputs ----------------
  std::string outputs_json;
  const size_t n_out = method->outputs_size();
  for (size_t i = 0; i < n_out; ++i) {
    const EValue& ev = method->get_output(i);
    std::string fname = "out_" + std::to_string(i) + ".bin";
    std::string path = args.output_dir + "/" + fname;
    std::string shape = "[";
    const char* dtype = nullptr;
    if (ev.isTensor()) {
      const Tensor& t = ev.toTensor();
      write_file(path, t.const_data_ptr(), t.nbytes());
      dtype = dtype_name(t.scalar_type());
      for (ssize_t d = 0; d < t.dim(); ++d)
        shape += (d ? "," : "") + std::to_string(t.size(d));
    } else if (ev.isInt()) {
      int64_t v = ev.toInt(); write_file(path, &v, 8); dtype = "int64";
    } else if (ev.isDouble()) {
      double v = ev.toDouble(); write_file(path, &v, 8); dtype = "float64";
    } else if (ev.isBool()) {
      uint8_t v = ev.toBool(); write_file(path, &v, 1); dtype = "bool";
    } else {
      fail("unsupported output type at index " + std::to_string(i));
    }
    shape += "]";
    if (!outputs_json.empty()) outputs_json += ", ";
    outputs_json += std::string("{\"file\": \"") + fname + "\", \"dtype\": \"" +
        dtype + "\", \"shape\": " + shape + "}";
  }

  // Peak RSS of this process image. VmHWM (per-mm, reset at exec) is used
  // because getrusage's ru_maxrss survives exec and can report the *parent's*
  // peak RSS when spawned from a large process (e.g. a Python harness).
  long max_rss_kb = -1;
  if (FILE* f = fopen("/proc/self/status", "r")) {
    char line[256];
    while (fgets(line, sizeof(line), f))
      if (sscanf(line, "VmHWM: %ld kB", &max_rss_kb) == 1) break;
    fclose(f);
  }
  if (max_rss_kb < 0) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    max_rss_kb = (long)ru.ru_maxrss;
  }

  std::string lat = "[";
  char buf[64];
  for (size_t i = 0; i < latencies.size(); ++i) {
    snprintf(buf, sizeof(buf), "%s%.6f", i ? ", " : "", latencies[i]);
    lat += buf;
  }
  lat += "]";
  snprintf(buf, sizeof(buf), "%.6f", load_ms);
  printf("{\"load_ms\": %s, \"latencies_ms\": %s, \"outputs\": [%s], \"max_rss_kb\": %ld}\n",
         buf, lat.c_str(), outputs_json.c_str(), max_rss_kb);
  fflush(stdout);
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    fprintf(stderr, "bti_runner: error: %s\n", e.what());
    return 1;
  }
}
