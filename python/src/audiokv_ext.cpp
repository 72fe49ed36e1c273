// SPDX-License-Identifier: Apache-2.0
/// @file
/// nanobind module audiokv._ext: every policy of the registry by name, the AudioKV
/// configuration, plans, and in-place compaction of K/V held in NumPy arrays or DLPack tensors.
///
/// Conventions: arguments are validated before any state changes (by the C++ entry points, or
/// here for the conversions); audiokv::error becomes audiokv.Error (a ValueError) carrying the
/// C++ argument name in `.argument`. Calls that scan cells release the GIL. One Policy object is
/// not thread-safe, as in C++; a second thread entering it while a call runs gets RuntimeError
/// instead of a data race.

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <audiokv/audiokv.hpp>
#include <audiokv/cpu/lse_scores.hpp>

namespace nb = nanobind;
using namespace nb::literals;

namespace {

// ---------------------------------------------------------------------------------------------
// Errors

/// audiokv.Error, set by the package's __init__ (a Python ValueError subclass whose
/// constructor takes (message, argument)). Until then audiokv::error maps to ValueError.
nb::object& error_type() {
  static nb::object* type = new nb::object();  // leaked: must outlive interpreter teardown
  return *type;
}

[[noreturn]] void fail(const char* where, const std::string& argument, const std::string& value,
                       const char* expectation) {
  audiokv::detail::throw_invalid(where, argument, value, expectation);
}

void translate_error(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const audiokv::error& e) {
    nb::object& type = error_type();
    if (!type.is_valid()) {
      PyErr_SetString(PyExc_ValueError, e.what());
      return;
    }
    // The translator runs with the GIL held; building the instance cannot throw into C++.
    PyObject* instance = PyObject_CallFunction(type.ptr(), "ss", e.what(), e.argument().c_str());
    if (instance == nullptr) return;  // the constructor's own exception stays set
    PyErr_SetObject(type.ptr(), instance);
    Py_DECREF(instance);
  }
}

// ---------------------------------------------------------------------------------------------
// Argument conversion (array-likes to the C++ types, with the argument's name on error)

using any_array = nb::ndarray<nb::ro, nb::device::cpu>;

/// A 0-d or 1-d NumPy view of `obj` (numpy.asarray), for scalar-or-array arguments.
any_array as_vector(nb::handle obj, const char* name, std::int64_t& length) {
  static nb::object asarray = nb::module_::import_("numpy").attr("asarray");
  nb::object array = asarray(obj);
  any_array view;
  if (!nb::try_cast(array, view) || view.ndim() > 1) {
    fail("append", name, nb::cast<std::string>(nb::repr(obj)), "must be a scalar or a 1-d array");
  }
  length = view.ndim() == 0 ? -1 : static_cast<std::int64_t>(view.shape(0));
  return view;
}

enum class read_status { ok, bad_dtype, out_of_range };

/// Element i of a 0-d/1-d CPU array as T, from any integer or (when allowed) floating dtype;
/// `shown` receives the element as text when it does not fit.
template <class T>
read_status read_element(const any_array& a, std::int64_t i, bool allow_float, T& out,
                         std::string& shown) {
  const std::int64_t offset = a.ndim() == 0 ? 0 : i * a.stride(0);
  const auto* base = static_cast<const std::uint8_t*>(a.data());
  const nb::dlpack::dtype dt = a.dtype();
  const void* p = base + offset * (dt.bits / 8);
  auto load = [p](auto tag) {
    decltype(tag) v;
    std::memcpy(&v, p, sizeof v);
    return v;
  };
  const auto code = static_cast<nb::dlpack::dtype_code>(dt.code);
  if (dt.lanes != 1) return read_status::bad_dtype;
  if (code == nb::dlpack::dtype_code::Int) {
    std::int64_t v;
    switch (dt.bits) {
      case 8:
        v = load(std::int8_t{});
        break;
      case 16:
        v = load(std::int16_t{});
        break;
      case 32:
        v = load(std::int32_t{});
        break;
      case 64:
        v = load(std::int64_t{});
        break;
      default:
        return read_status::bad_dtype;
    }
    if constexpr (std::is_integral_v<T>) {
      if (v < static_cast<std::int64_t>(std::numeric_limits<T>::min()) ||
          v > static_cast<std::int64_t>(std::numeric_limits<T>::max())) {
        shown = std::to_string(v);
        return read_status::out_of_range;
      }
    }
    out = static_cast<T>(v);
    return read_status::ok;
  }
  if (code == nb::dlpack::dtype_code::UInt || code == nb::dlpack::dtype_code::Bool) {
    std::uint64_t v;
    switch (dt.bits) {
      case 8:
        v = load(std::uint8_t{});
        break;
      case 16:
        v = load(std::uint16_t{});
        break;
      case 32:
        v = load(std::uint32_t{});
        break;
      case 64:
        v = load(std::uint64_t{});
        break;
      default:
        return read_status::bad_dtype;
    }
    if constexpr (std::is_integral_v<T>) {
      if (v > static_cast<std::uint64_t>(std::numeric_limits<T>::max())) {
        shown = std::to_string(v);
        return read_status::out_of_range;
      }
    }
    out = static_cast<T>(v);
    return read_status::ok;
  }
  if (code == nb::dlpack::dtype_code::Float && allow_float) {
    double v;
    switch (dt.bits) {
      case 32:
        v = load(float{});
        break;
      case 64:
        v = load(double{});
        break;
      default:
        return read_status::bad_dtype;
    }
    out = static_cast<T>(v);
    return read_status::ok;
  }
  return read_status::bad_dtype;
}

/// Reads a scalar-or-[n] argument into out[i].*field, naming "<name>[i]" on a bad element.
template <class T, class Field>
void fill_field(nb::handle obj, const char* name, std::int64_t n, bool allow_float,
                std::vector<audiokv::frame_meta>& out, Field field) {
  std::int64_t length = 0;
  const any_array a = as_vector(obj, name, length);
  if (length >= 0 && length != n) {
    fail("append", name, "length " + std::to_string(length),
         ("must be a scalar or have the length of pos (" + std::to_string(n) + ")").c_str());
  }
  for (std::int64_t i = 0; i < n; ++i) {
    T v{};
    std::string shown;
    const read_status status = read_element<T>(a, length < 0 ? 0 : i, allow_float, v, shown);
    if (status != read_status::ok) {
      const std::string arg = length < 0 ? std::string(name) : audiokv::detail::indexed(name, i);
      if (status == read_status::out_of_range) {
        fail("append", arg, shown,
             sizeof(T) == 1 ? "must fit in 8 bits (frame flags)" : "must fit in int32");
      }
      fail("append", arg, nb::cast<std::string>(nb::str(nb::handle(obj).type())),
           allow_float ? "must be a real number" : "must be an integer");
    }
    out[static_cast<std::size_t>(i)].*field = v;
  }
}

using float_vector = nb::ndarray<const float, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using float_matrix = nb::ndarray<const float, nb::ndim<2>, nb::c_contig, nb::device::cpu>;

std::int32_t checked_int32(std::size_t n, const char* where, const char* name) {
  if (n > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max())) {
    fail(where, name, std::to_string(n), "must have fewer than 2^31 elements");
  }
  return static_cast<std::int32_t>(n);
}

audiokv::gqa_reduce parse_mode(const std::string& mode) {
  if (mode == "mean") return audiokv::gqa_reduce::mean;
  if (mode == "max") return audiokv::gqa_reduce::max;
  fail("observe_group", "mode", mode, "must be 'mean' or 'max'");
}

// ---------------------------------------------------------------------------------------------
// Policy

/// Raises RuntimeError when a second thread enters an object that is running a call.
class busy_guard {
 public:
  explicit busy_guard(std::atomic<bool>& flag) : flag_(flag) {
    if (flag_.exchange(true, std::memory_order_acquire)) {
      throw std::runtime_error(
          "audiokv: this policy is already running a call in another thread (one policy object "
          "is not thread-safe; use one per thread)");
    }
  }
  ~busy_guard() { flag_.store(false, std::memory_order_release); }
  busy_guard(const busy_guard&) = delete;
  busy_guard& operator=(const busy_guard&) = delete;

 private:
  std::atomic<bool>& flag_;
};

/// One (sequence, layer, KV head) cache under one policy. Heads of one adakv group share
/// their busy flag, since they share state.
struct py_policy {
  std::unique_ptr<audiokv::eviction_policy> policy;
  std::shared_ptr<std::atomic<bool>> busy = std::make_shared<std::atomic<bool>>(false);
  std::vector<audiokv::frame_meta> frames;  // append() staging, reused

  audiokv::eviction_policy& get() { return *policy; }
};

void append(py_policy& self, nb::handle pos, nb::handle speaker, nb::handle voice, nb::handle flags,
            nb::handle prior, nb::handle key_norms) {
  busy_guard guard(*self.busy);
  std::int64_t n = 0;
  as_vector(pos, "pos", n);
  if (n < 0) n = 1;
  if (n > std::numeric_limits<std::int32_t>::max()) {
    fail("append", "pos", "length " + std::to_string(n), "must have fewer than 2^31 frames");
  }
  std::vector<audiokv::frame_meta>& out = self.frames;
  out.assign(static_cast<std::size_t>(n), audiokv::frame_meta{});
  fill_field<std::int32_t>(pos, "pos", n, false, out, &audiokv::frame_meta::pos);
  fill_field<std::int32_t>(speaker, "speaker", n, false, out, &audiokv::frame_meta::speaker);
  fill_field<float>(voice, "voice", n, true, out, &audiokv::frame_meta::voice);
  fill_field<std::uint8_t>(flags, "flags", n, false, out, &audiokv::frame_meta::flags);
  fill_field<float>(prior, "prior", n, true, out, &audiokv::frame_meta::prior);
  const auto count = static_cast<std::int32_t>(n);
  if (key_norms.is_none()) {
    self.get().append(out.data(), count);
    return;
  }
  auto* kn = dynamic_cast<audiokv::knorm*>(self.policy.get());
  if (kn == nullptr) {
    fail("append", "key_norms", "given", "only the knorm policy takes key norms");
  }
  float_vector norms;
  if (!nb::try_cast(key_norms, norms) || static_cast<std::int64_t>(norms.shape(0)) != n) {
    fail("knorm::append_with_norms", "key_norms", nb::cast<std::string>(nb::repr(key_norms)),
         "must be a 1-d float array with one norm per frame");
  }
  kn->append_with_norms(out.data(), norms.data(), count);
}

void observe(py_policy& self, const float_vector& probs) {
  busy_guard guard(*self.busy);
  const std::int32_t n = checked_int32(probs.shape(0), "observe", "probs");
  nb::gil_scoped_release release;
  self.get().observe(probs.data(), n);
}

void observe_group(py_policy& self, const float_matrix& probs, const std::string& mode) {
  busy_guard guard(*self.busy);
  const std::int32_t g = checked_int32(probs.shape(0), "observe_group", "probs.shape[0]");
  const std::int32_t n = checked_int32(probs.shape(1), "observe_group", "probs.shape[1]");
  const audiokv::gqa_reduce m = parse_mode(mode);
  audiokv::eviction_policy* p = self.policy.get();
  nb::gil_scoped_release release;
  if (auto* t = dynamic_cast<audiokv::tiered_cache<>*>(p)) {
    t->observe_group(probs.data(), g, n, m);
  } else if (auto* b = dynamic_cast<audiokv::baseline_policy*>(p)) {
    b->observe_group(probs.data(), g, n, m);
  } else if (auto* a = dynamic_cast<audiokv::adakv_head*>(p)) {
    if (m != audiokv::gqa_reduce::mean) {
      fail("adakv::observe_group", "mode", mode, "adakv pools each query row (mode 'mean' only)");
    }
    a->observe_group(probs.data(), g, n);
  } else {
    fail("observe_group", "policy", p->name(), "has no grouped observation");
  }
}

void plan_into(py_policy& self, audiokv::eviction_plan& out, bool to_target, std::int32_t target) {
  busy_guard guard(*self.busy);
  nb::gil_scoped_release release;
  if (to_target) {
    self.get().plan_to(target, out);
  } else {
    self.get().plan(out);
  }
}

void apply(py_policy& self, const audiokv::eviction_plan& plan) {
  busy_guard guard(*self.busy);
  nb::gil_scoped_release release;
  self.get().apply(plan);
}

/// A new NumPy array holding a copy of data[0, n) (plans and positions are small; a copy
/// cannot dangle when the plan is refilled or the policy changes).
template <class T>
nb::object to_numpy(const T* data, std::size_t n) {
  T* copy = new T[n > 0 ? n : 1];
  if (n > 0) std::memcpy(copy, data, n * sizeof(T));
  nb::capsule owner(copy, [](void* p) noexcept { delete[] static_cast<T*>(p); });
  return nb::cast(nb::ndarray<nb::numpy, T, nb::ndim<1>>(copy, {n}, owner),
                  nb::rv_policy::reference);
}

template <class T>
nb::object to_numpy(const std::vector<T>& v) {
  return to_numpy(v.data(), v.size());
}

// ---------------------------------------------------------------------------------------------
// make_policy(name, **options)

template <class T>
T option_as(nb::handle value, const char* key) {
  T out{};
  if constexpr (std::is_same_v<T, bool>) {
    if (!PyBool_Check(value.ptr())) fail("make_policy", key, "not a bool", "must be True/False");
    return value.ptr() == Py_True;
  } else {
    if (!nb::try_cast(value, out, /*convert=*/!std::is_integral_v<T>)) {
      fail("make_policy", std::string("options.") + key, nb::cast<std::string>(nb::repr(value)),
           std::is_integral_v<T> ? "must be an int in range" : "must be a number");
    }
  }
  return out;
}

/// Copies the keyword arguments into policy_options; an unknown key raises audiokv.Error
/// naming it. `audiokv_config` fields may be given directly (budget-style names excepted, which
/// set the shared fields) or through config=AudioKVConfig(...).
audiokv::policy_options parse_options(const nb::kwargs& kwargs, bool& has_config) {
  audiokv::policy_options o;
  has_config = false;
  for (auto [k, v] : kwargs) {
    const std::string key = nb::cast<std::string>(k);
    const char* c = key.c_str();
    if (key == "budget") {
      o.budget = option_as<std::int32_t>(v, c);
    } else if (key == "capacity") {
      o.capacity = option_as<std::int32_t>(v, c);
    } else if (key == "num_speakers") {
      o.num_speakers = option_as<std::int32_t>(v, c);
    } else if (key == "n_sink") {
      o.n_sink = option_as<std::int32_t>(v, c);
    } else if (key == "recent_size") {
      o.recent_size = option_as<std::int32_t>(v, c);
    } else if (key == "lru_tau") {
      o.lru_tau = option_as<float>(v, c);
    } else if (key == "lru_tau_per_cell") {
      o.lru_tau_per_cell = option_as<bool>(v, c);
    } else if (key == "window") {
      o.window = option_as<std::int32_t>(v, c);
    } else if (key == "kernel") {
      o.kernel = option_as<std::int32_t>(v, c);
    } else if (key == "reduce" || key == "pool") {  // "pool": the earlier spelling
      const std::string reduce = nb::cast<std::string>(nb::str(v));
      if (reduce == "avg") {
        o.reduce = audiokv::scores::kernel_reduce::avg;
      } else if (reduce == "max") {
        o.reduce = audiokv::scores::kernel_reduce::max;
      } else {
        fail("make_policy", "options." + key, reduce, "must be 'avg' or 'max'");
      }
    } else if (key == "group_size") {
      o.group_size = option_as<std::int32_t>(v, c);
    } else if (key == "layer") {
      o.layer = option_as<std::int32_t>(v, c);
    } else if (key == "num_layers") {
      o.num_layers = option_as<std::int32_t>(v, c);
    } else if (key == "beta") {
      o.beta = option_as<std::int32_t>(v, c);
    } else if (key == "tova_force_last") {
      o.tova_force_last = option_as<bool>(v, c);
    } else if (key == "alpha_safeguard") {
      o.alpha_safeguard = option_as<double>(v, c);
    } else if (key == "seed") {
      o.seed = option_as<std::uint64_t>(v, c);
    } else if (key == "config") {
      if (!nb::try_cast(v, o.audiokv)) {
        fail("make_policy", "options.config", nb::cast<std::string>(nb::repr(v)),
             "must be an audiokv.AudioKVConfig");
      }
      has_config = true;
    } else if (key == "block") {
      o.audiokv_pipeline.stage<2>().block = option_as<std::int32_t>(v, c);
    } else if (key == "level_weight") {
      o.audiokv_pipeline.stage<1>().level_weight = option_as<float>(v, c);
    } else if (key == "slope_gain") {
      o.audiokv_pipeline.stage<1>().slope_gain = option_as<float>(v, c);
    } else {
      fail("make_policy", "options." + key, nb::cast<std::string>(nb::repr(v)),
           "is not an option (budget, capacity, num_speakers, n_sink, recent_size, lru_tau, "
           "lru_tau_per_cell, window, kernel, pool, group_size, layer, num_layers, beta, "
           "tova_force_last, alpha_safeguard, seed; audiokv: config, block, level_weight, "
           "slope_gain)");
    }
  }
  return o;
}

py_policy make_policy(const std::string& name, const nb::kwargs& kwargs) {
  bool has_config = false;
  audiokv::policy_options o = parse_options(kwargs, has_config);
  if (has_config && name != "audiokv") {
    fail("make_policy", "options.config", name, "is the AudioKV configuration (name 'audiokv')");
  }
  if (has_config && o.audiokv.budget == 0 && o.budget > 0) {
    // budget= with config=: the config's own fields win except an unset budget.
    o.audiokv.budget = o.budget;
    if (o.audiokv.capacity == 0) o.audiokv.capacity = o.capacity;
  }
  py_policy out;
  out.policy = audiokv::make_policy(name, o);
  return out;
}

std::vector<py_policy> make_adakv_heads(std::int32_t num_heads, const nb::kwargs& kwargs) {
  bool has_config = false;
  const audiokv::policy_options o = parse_options(kwargs, has_config);
  if (has_config) fail("make_adakv_heads", "options.config", "given", "adakv takes no config");
  auto group =
      audiokv::adakv_group::create(audiokv::adakv_config{o.snap(), num_heads, o.alpha_safeguard});
  auto busy = std::make_shared<std::atomic<bool>>(false);
  std::vector<py_policy> heads;
  for (std::int32_t h = 0; h < num_heads; ++h) {
    py_policy p;
    p.policy = group->make_head(h);
    p.busy = busy;
    heads.push_back(std::move(p));
  }
  return heads;
}

// ---------------------------------------------------------------------------------------------
// compact(kv, plan, head=None, layout="nhd")

/// K or V of one layer: [cells, dim], [cells, heads, dim] ("nhd") or [heads, cells, dim]
/// ("hnd"), any element strides, any dtype (rows move byte for byte).
using kv_array = nb::ndarray<nb::ro>;

template <class Word>
void compact_words(const kv_array& kv, const audiokv::layout_strided& layout, std::int32_t head,
                   const audiokv::eviction_plan& plan) {
  // The view is writable: kv was checked writable by the caller.
  Word* data = static_cast<Word*>(const_cast<void*>(kv.data()));
  const audiokv::kv_view<Word, audiokv::layout_strided> view(data, layout);
  if (head < 0) {
    audiokv::cpu::compact_all_heads(view, plan);
  } else {
    audiokv::cpu::compact(view, head, plan);
  }
}

void compact(nb::handle kv_obj, const audiokv::eviction_plan& plan, nb::handle head_obj,
             const std::string& layout_name) {
  constexpr const char* where = "compact";
  kv_array kv;
  if (!nb::try_cast(kv_obj, kv, /*convert=*/false)) {
    fail(where, "kv", nb::cast<std::string>(nb::repr(nb::type_name(kv_obj.type()))),
         "must be an array with the buffer protocol or DLPack (numpy.ndarray, torch.Tensor)");
  }
  if (kv.device_type() != nb::device::cpu::value) {
    fail(where, "kv", "device type " + std::to_string(kv.device_type()),
         "must be in host memory (the Python package compacts CPU tensors only)");
  }
  if (nb::hasattr(kv_obj, "flags") && !nb::cast<bool>(kv_obj.attr("flags").attr("writeable"))) {
    fail(where, "kv", "read-only array", "must be writable (compaction is in place)");
  }
  const std::size_t ndim = kv.ndim();
  if (ndim != 2 && ndim != 3) {
    fail(where, "kv.ndim", std::to_string(ndim),
         "must be 2 ([cells, dim]) or 3 ([cells, heads, dim] or [heads, cells, dim])");
  }
  const bool hnd = layout_name == "hnd";
  if (!hnd && layout_name != "nhd") fail(where, "layout", layout_name, "must be 'nhd' or 'hnd'");
  if (ndim == 2 && hnd) fail(where, "layout", layout_name, "needs a 3-d kv");
  const std::size_t cell_axis = hnd ? 1 : 0;
  const std::size_t head_axis = ndim == 2 ? 0 : (hnd ? 0 : 1);
  for (std::size_t d = 0; d < ndim; ++d) {
    if (kv.stride(d) < 0) {
      fail(where, audiokv::detail::indexed("kv.strides", static_cast<long long>(d)),
           std::to_string(kv.stride(d)), "must be >= 0");
    }
    if (kv.shape(d) > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max())) {
      fail(where, audiokv::detail::indexed("kv.shape", static_cast<long long>(d)),
           std::to_string(kv.shape(d)), "must be < 2^31");
    }
  }
  audiokv::layout_strided layout;
  layout.extents.num_cells = static_cast<std::int32_t>(kv.shape(cell_axis));
  layout.extents.num_heads = ndim == 2 ? 1 : static_cast<std::int32_t>(kv.shape(head_axis));
  layout.extents.head_dim = static_cast<std::int32_t>(kv.shape(ndim - 1));
  layout.cell_stride_elems = kv.stride(cell_axis);
  layout.head_stride_elems = ndim == 2 ? 0 : kv.stride(head_axis);
  layout.dim_stride_elems = kv.stride(ndim - 1);
  std::int32_t head = -1;
  if (!head_obj.is_none()) {
    if (!nb::try_cast(head_obj, head, false) || head < 0 || head >= layout.extents.num_heads) {
      fail(where, "head", nb::cast<std::string>(nb::repr(head_obj)),
           "must be None or an int in [0, num_heads)");
    }
  }
  const std::uint8_t bits = kv.dtype().bits;
  const std::size_t lanes = kv.dtype().lanes;
  const std::size_t bytes = lanes * bits / 8;
  nb::gil_scoped_release release;
  switch (bytes) {
    case 1:
      compact_words<std::uint8_t>(kv, layout, head, plan);
      break;
    case 2:
      compact_words<std::uint16_t>(kv, layout, head, plan);
      break;
    case 4:
      compact_words<std::uint32_t>(kv, layout, head, plan);
      break;
    case 8:
      compact_words<std::uint64_t>(kv, layout, head, plan);
      break;
    default:
      fail(where, "kv.dtype", std::to_string(bytes) + " bytes", "must be 1, 2, 4 or 8 bytes");
  }
}

// ---------------------------------------------------------------------------------------------
// Native timing of the same calls, for the Python-overhead benchmark.

/// Seconds for `iterations` rounds of observe(probs) + plan(out) in a C++ loop.
double native_observe_plan_seconds(py_policy& self, const float_vector& probs,
                                   audiokv::eviction_plan& out, std::int64_t iterations,
                                   bool do_plan) {
  busy_guard guard(*self.busy);
  const std::int32_t n = checked_int32(probs.shape(0), "observe", "probs");
  nb::gil_scoped_release release;
  audiokv::eviction_policy& p = self.get();
  const auto start = std::chrono::steady_clock::now();
  for (std::int64_t i = 0; i < iterations; ++i) {
    p.observe(probs.data(), n);
    if (do_plan) p.plan(out);
  }
  const auto stop = std::chrono::steady_clock::now();
  return std::chrono::duration<double>(stop - start).count();
}

// ---------------------------------------------------------------------------------------------
// Scores from a flash kernel's log-sum-exp (cpu/lse_scores.hpp) and plans that follow an
// eviction chosen outside the policy (eviction_policy::plan_evicting).

/// An external keep decision: the plan evicting exactly the cells where `evict_mask` is nonzero.
nb::object plan_evicting(py_policy& self, nb::handle evict_mask, nb::object out) {
  constexpr const char* where = "plan_evicting";
  std::int64_t length = 0;
  const any_array mask = as_vector(evict_mask, "evict_mask", length);
  if (length < 0) fail(where, "evict_mask", "a scalar", "must be a 1-d array of num_cells flags");
  std::vector<std::uint8_t> flags(static_cast<std::size_t>(length));
  for (std::int64_t i = 0; i < length; ++i) {
    std::int32_t v = 0;
    std::string shown;
    if (read_element<std::int32_t>(mask, i, false, v, shown) != read_status::ok) {
      fail(where, audiokv::detail::indexed("evict_mask", i),
           nb::cast<std::string>(nb::str(nb::handle(evict_mask).type())),
           "must be a boolean or integer flag");
    }
    flags[static_cast<std::size_t>(i)] = v != 0 ? 1 : 0;
  }
  nb::object result = out;
  if (result.is_none())
    result = nb::cast(new audiokv::eviction_plan(), nb::rv_policy::take_ownership);
  auto& plan = nb::cast<audiokv::eviction_plan&>(result);
  busy_guard guard(*self.busy);
  {
    nb::gil_scoped_release release;
    self.get().plan_evicting(flags, plan);
  }
  return result;
}

/// One lse_scores / observe_lse call parsed from Python arguments (the arrays stay owned by
/// their Python objects for the duration of the call).
struct lse_call {
  audiokv::lse_scoring s;
  const float* k = nullptr;
  std::int64_t k_elements = 0;
  std::vector<std::int32_t> seq_lens, indptr, indices, last_page_len;
};

using lse_float_array = nb::ndarray<const float, nb::device::cpu>;

lse_float_array lse_float_arg(nb::handle obj, const char* where, const char* name) {
  lse_float_array a;
  if (!nb::try_cast(obj, a, /*convert=*/false)) {
    fail(where, name, nb::cast<std::string>(nb::repr(nb::type_name(obj.type()))),
         "must be a float32 CPU array (numpy.ndarray or torch.Tensor; convert with "
         ".astype(numpy.float32) / .float())");
  }
  for (std::size_t d = 0; d < a.ndim(); ++d) {
    if (a.stride(d) < 0)
      fail(where, std::string(name) + ".strides", std::to_string(a.stride(d)), "must be >= 0");
  }
  return a;
}

std::vector<std::int32_t> lse_int_arg(nb::handle obj, const char* where, const char* name) {
  std::int64_t length = 0;
  const any_array a = as_vector(obj, name, length);
  if (length < 0) fail(where, name, "a scalar", "must be a 1-d integer array");
  std::vector<std::int32_t> out(static_cast<std::size_t>(length));
  for (std::int64_t i = 0; i < length; ++i) {
    std::string shown;
    const read_status st = read_element<std::int32_t>(a, i, false, out[i], shown);
    if (st != read_status::ok) {
      fail(where, audiokv::detail::indexed(name, i),
           st == read_status::out_of_range ? shown : std::string("a non-integer"),
           "must be an int32 integer");
    }
  }
  return out;
}

/// Elements from the first to one past the last element of `a` (strides >= 0).
std::int64_t span_elements(const lse_float_array& a) {
  std::int64_t last = 0;
  for (std::size_t d = 0; d < a.ndim(); ++d) {
    if (a.shape(d) == 0) return 0;
    last += static_cast<std::int64_t>(a.shape(d) - 1) * a.stride(d);
  }
  return last + 1;
}

std::int32_t as_int32(std::size_t n, const char* where, const std::string& name) {
  if (n > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()))
    fail(where, name, std::to_string(n), "must be < 2^31");
  return static_cast<std::int32_t>(n);
}

void parse_lse_call(lse_call& c, const char* where, nb::handle q_obj, nb::handle k_obj,
                    nb::handle lse_obj, const std::string& base, double scale,
                    const std::string& mode, const std::string& layout, nb::handle seq_lens,
                    nb::handle indptr, nb::handle indices, nb::handle last_page_len,
                    lse_float_array& q, lse_float_array& k, lse_float_array& lse) {
  if (base == "natural") {
    c.s.base = audiokv::lse_base::natural;
  } else if (base == "two") {
    c.s.base = audiokv::lse_base::two;
  } else {
    fail(where, "base", base,
         "must be 'natural' or 'two': the base of the kernel's LSE (FlashInfer's FA2-style "
         "decode/prefill return base two; its cutlass backend returns natural)");
  }
  if (mode == "mean") {
    c.s.mode = audiokv::gqa_reduce::mean;
  } else if (mode == "max") {
    c.s.mode = audiokv::gqa_reduce::max;
  } else {
    fail(where, "mode", mode, "must be 'mean' or 'max'");
  }
  const bool hnd = layout == "hnd";
  if (!hnd && layout != "nhd") fail(where, "layout", layout, "must be 'nhd' or 'hnd'");
  c.s.scale = static_cast<float>(scale);

  q = lse_float_arg(q_obj, where, "q");
  lse = lse_float_arg(lse_obj, where, "lse");
  k = lse_float_arg(k_obj, where, "k");
  if (q.ndim() != 2 && q.ndim() != 3)
    fail(where, "q.ndim", std::to_string(q.ndim()),
         "must be 3 ([batch, num_q_heads, head_dim]) or 2 (one sequence)");
  const bool single = q.ndim() == 2;
  const std::int32_t batch = single ? 1 : as_int32(q.shape(0), where, "q.shape[0]");
  const std::int32_t hq = as_int32(q.shape(single ? 0 : 1), where, "q.shape");
  const std::int32_t dim = as_int32(q.shape(q.ndim() - 1), where, "q.shape");
  const bool q_dense = q.stride(q.ndim() - 1) == 1 && q.stride(q.ndim() - 2) == dim &&
                       (single || q.stride(0) == static_cast<std::int64_t>(hq) * dim);
  if (!q_dense)
    fail(where, "q", "strided", "must be C-contiguous ([batch, num_q_heads, head_dim])");
  const bool lse_shape_ok = single ? lse.ndim() == 1 && lse.shape(0) == static_cast<std::size_t>(hq)
                                   : lse.ndim() == 2 &&
                                         lse.shape(0) == static_cast<std::size_t>(batch) &&
                                         lse.shape(1) == static_cast<std::size_t>(hq);
  if (!lse_shape_ok)
    fail(where, "lse.shape", std::to_string(lse.ndim()) + "-d",
         "must be [batch, num_q_heads] (one value per query row of q)");
  if (lse.stride(lse.ndim() - 1) != 1 || (!single && lse.stride(0) != hq))
    fail(where, "lse", "strided", "must be C-contiguous");

  const bool paged = !indptr.is_none();
  std::int32_t hkv = 0;
  std::int32_t capacity = 0;
  auto& kv = c.s.kv;
  if (paged) {
    if (k.ndim() != 4)
      fail(where, "k.ndim", std::to_string(k.ndim()),
           "must be 4 for paged K: [pages, page_size, kv_heads, dim] ('nhd') or [pages, "
           "kv_heads, page_size, dim] ('hnd')");
    if (indices.is_none() || last_page_len.is_none())
      fail(where, indices.is_none() ? "indices" : "last_page_len", "None",
           "must be given with indptr (FlashInfer's paged layout)");
    if (!seq_lens.is_none()) fail(where, "seq_lens", "given", "must be None with indptr");
    c.indptr = lse_int_arg(indptr, where, "indptr");
    c.indices = lse_int_arg(indices, where, "indices");
    c.last_page_len = lse_int_arg(last_page_len, where, "last_page_len");
    if (static_cast<std::int64_t>(c.indptr.size()) != static_cast<std::int64_t>(batch) + 1)
      fail(where, "indptr.size", std::to_string(c.indptr.size()), "must be batch + 1");
    if (static_cast<std::int64_t>(c.last_page_len.size()) != batch)
      fail(where, "last_page_len.size", std::to_string(c.last_page_len.size()), "must be batch");
    if (c.indptr[batch] > static_cast<std::int32_t>(c.indices.size()))
      fail(where, "indices.size", std::to_string(c.indices.size()), "must be >= indptr[batch]");
    kv.page_size = as_int32(k.shape(hnd ? 2 : 1), where, "k.shape");
    hkv = as_int32(k.shape(hnd ? 1 : 2), where, "k.shape");
    kv.page_stride = k.stride(0);
    kv.entry_stride = k.stride(hnd ? 2 : 1);
    kv.head_stride = k.stride(hnd ? 1 : 2);
    kv.indptr = c.indptr.data();
    kv.indices = c.indices.data();
    kv.last_page_len = c.last_page_len.data();
    // Capacity: the longest sequence (the table itself is validated by the driver).
    for (std::int32_t b = 0; b < batch; ++b) {
      const std::int64_t np = static_cast<std::int64_t>(c.indptr[b + 1]) - c.indptr[b];
      if (np > 0 && c.last_page_len[b] >= 1 && c.last_page_len[b] <= kv.page_size) {
        const std::int64_t n = (np - 1) * kv.page_size + c.last_page_len[b];
        if (n > std::numeric_limits<std::int32_t>::max())
          fail(where, audiokv::detail::indexed("indptr", b + 1), std::to_string(n),
               "gives more than 2^31 cells");
        capacity = std::max(capacity, static_cast<std::int32_t>(n));
      }
    }
  } else {
    if (!indices.is_none() || !last_page_len.is_none())
      fail(where, !indices.is_none() ? "indices" : "last_page_len", "given",
           "must be None without indptr (contiguous K)");
    if (k.ndim() != (single ? 3u : 4u))
      fail(where, "k.ndim", std::to_string(k.ndim()),
           single ? "must be 3 for one sequence: [cells, kv_heads, dim] ('nhd') or [kv_heads, "
                    "cells, dim] ('hnd')"
                  : "must be 4: [batch, cells, kv_heads, dim] ('nhd') or [batch, kv_heads, cells, "
                    "dim] ('hnd')");
    const std::size_t o = single ? 0 : 1;
    if (!single && k.shape(0) != static_cast<std::size_t>(batch))
      fail(where, "k.shape[0]", std::to_string(k.shape(0)), "must equal the batch of q");
    capacity = as_int32(k.shape(o + (hnd ? 1 : 0)), where, "k.shape");
    hkv = as_int32(k.shape(o + (hnd ? 0 : 1)), where, "k.shape");
    kv.seq_stride = single ? 0 : k.stride(0);
    kv.entry_stride = k.stride(o + (hnd ? 1 : 0));
    kv.head_stride = k.stride(o + (hnd ? 0 : 1));
    if (seq_lens.is_none()) {
      c.seq_lens.assign(static_cast<std::size_t>(batch), capacity);
    } else {
      c.seq_lens = lse_int_arg(seq_lens, where, "seq_lens");
      if (static_cast<std::int64_t>(c.seq_lens.size()) != batch)
        fail(where, "seq_lens.size", std::to_string(c.seq_lens.size()), "must be batch");
    }
    kv.seq_lens = c.seq_lens.data();
  }
  if (k.shape(k.ndim() - 1) != static_cast<std::size_t>(dim))
    fail(where, "k.shape[-1]", std::to_string(k.shape(k.ndim() - 1)), "must equal q's head_dim");
  if (k.stride(k.ndim() - 1) != 1)
    fail(where, "k.strides[-1]", std::to_string(k.stride(k.ndim() - 1)),
         "must be 1 (rows of head_dim contiguous floats)");
  c.s.shape = audiokv::attention_shape{hq, hkv, dim, capacity};
  c.s.batch = batch;
  c.s.q = q.data();
  c.s.lse = lse.data();
  c.k = k.data();
  c.k_elements = span_elements(k);
}

/// A new zero-filled float32 NumPy array of `shape`.
nb::object zeros_f32(std::initializer_list<std::size_t> shape, float** data) {
  std::size_t n = 1;
  for (std::size_t d : shape) n *= d;
  float* buf = new float[n > 0 ? n : 1]();
  nb::capsule owner(buf, [](void* p) noexcept { delete[] static_cast<float*>(p); });
  *data = buf;
  return nb::cast(nb::ndarray<nb::numpy, float>(buf, shape.size(), shape.begin(), owner),
                  nb::rv_policy::reference);
}

nb::object lse_scores(nb::handle q_obj, nb::handle k_obj, nb::handle lse_obj,
                      const std::string& base, double scale, const std::string& mode,
                      const std::string& layout, nb::handle seq_lens, nb::handle indptr,
                      nb::handle indices, nb::handle last_page_len, bool return_probs) {
  constexpr const char* where = "lse_scores";
  lse_call c;
  lse_float_array q, k, lse;
  parse_lse_call(c, where, q_obj, k_obj, lse_obj, base, scale, mode, layout, seq_lens, indptr,
                 indices, last_page_len, q, k, lse);
  const auto b = static_cast<std::size_t>(c.s.batch);
  const auto cells = static_cast<std::size_t>(c.s.shape.num_cells);
  float* scores = nullptr;
  float* probs = nullptr;
  nb::object scores_obj =
      zeros_f32({b, static_cast<std::size_t>(c.s.shape.num_kv_heads), cells}, &scores);
  nb::object probs_obj;
  if (return_probs)
    probs_obj = zeros_f32({b, static_cast<std::size_t>(c.s.shape.num_q_heads), cells}, &probs);
  {
    nb::gil_scoped_release release;
    audiokv::cpu::lse_scores(c.s, c.k, c.k_elements, scores, probs);
  }
  if (return_probs) return nb::make_tuple(scores_obj, probs_obj);
  return scores_obj;
}

void observe_lse(nb::handle policies, nb::handle q_obj, nb::handle k_obj, nb::handle lse_obj,
                 const std::string& base, double scale, const std::string& mode,
                 const std::string& layout, nb::handle seq_lens, nb::handle indptr,
                 nb::handle indices, nb::handle last_page_len, double mass_tolerance) {
  constexpr const char* where = "observe_lse";
  lse_call c;
  lse_float_array q, k, lse;
  parse_lse_call(c, where, q_obj, k_obj, lse_obj, base, scale, mode, layout, seq_lens, indptr,
                 indices, last_page_len, q, k, lse);
  const std::size_t want =
      static_cast<std::size_t>(c.s.batch) * static_cast<std::size_t>(c.s.shape.num_kv_heads);
  std::vector<py_policy*> owners;
  for (nb::handle item : nb::iter(policies)) {
    py_policy* p = nullptr;
    if (!nb::try_cast(item, p) || p == nullptr)
      fail(where, audiokv::detail::indexed("policies", static_cast<long long>(owners.size())),
           nb::cast<std::string>(nb::repr(nb::type_name(item.type()))),
           "must be an audiokv.Policy");
    owners.push_back(p);
  }
  if (owners.size() != want)
    fail(where, "len(policies)", std::to_string(owners.size()),
         ("must be batch * num_kv_heads = " + std::to_string(want) +
          " (sequence-major: policies[b * num_kv_heads + h])")
             .c_str());
  // One guard per busy flag (the heads of an adakv group share theirs).
  std::vector<std::unique_ptr<busy_guard>> guards;
  std::vector<const std::atomic<bool>*> taken;
  std::vector<audiokv::eviction_policy*> raw;
  for (py_policy* p : owners) {
    if (std::find(taken.begin(), taken.end(), p->busy.get()) == taken.end()) {
      guards.push_back(std::make_unique<busy_guard>(*p->busy));
      taken.push_back(p->busy.get());
    }
    raw.push_back(&p->get());
  }
  std::vector<float> workspace(audiokv::cpu::observe_lse_workspace_floats(c.s));
  nb::gil_scoped_release release;
  audiokv::cpu::observe_lse(c.s, c.k, c.k_elements, raw.data(), static_cast<float>(mass_tolerance),
                            workspace.data(), workspace.size());
}

}  // namespace

NB_MODULE(_ext, m) {
  m.doc() = "audiokv C++ bindings (use the audiokv package, not this module directly)";
  nb::register_exception_translator(translate_error);
  m.def(
      "_set_error_type", [](nb::object type) { error_type() = std::move(type); }, "type"_a);

  m.attr("version") = std::to_string(AUDIOKV_VERSION_MAJOR) + "." +
                      std::to_string(AUDIOKV_VERSION_MINOR) + "." +
                      std::to_string(AUDIOKV_VERSION_PATCH);
  m.attr("policy_names") = std::string(audiokv::policy_names());
  m.attr("FRAME_PHONEME_BOUNDARY") = static_cast<int>(audiokv::frame_flag_phoneme_boundary);
  m.attr("FRAME_SEGMENT_START") = static_cast<int>(audiokv::frame_flag_segment_start);
  m.attr("FRAME_CRITICAL") = static_cast<int>(audiokv::frame_flag_critical);
  m.attr("FRAME_SINK") = static_cast<int>(audiokv::frame_flag_sink);

  nb::class_<audiokv::pool_split>(m, "PoolSplit")
      .def(nb::init<>())
      .def_rw("base", &audiokv::pool_split::base)
      .def_rw("buffer", &audiokv::pool_split::buffer)
      .def_rw("emergency", &audiokv::pool_split::emergency);

  nb::class_<audiokv::prefetch_config>(m, "PrefetchConfig")
      .def(nb::init<>())
      .def_rw("enabled", &audiokv::prefetch_config::enabled)
      .def_rw("beta", &audiokv::prefetch_config::beta)
      .def_rw("decay", &audiokv::prefetch_config::decay)
      .def_rw("horizon_steps", &audiokv::prefetch_config::horizon_steps)
      .def_rw("margin", &audiokv::prefetch_config::margin)
      .def_rw("min_burst_frames", &audiokv::prefetch_config::min_burst_frames)
      .def_rw("granularity", &audiokv::prefetch_config::granularity);

  using cfg = audiokv::audiokv_config;
  nb::class_<cfg>(m, "AudioKVConfig")
      .def(nb::init<>())
      .def_rw("budget", &cfg::budget)
      .def_rw("capacity", &cfg::capacity)
      .def_rw("split", &cfg::split)
      .def_rw("trigger", &cfg::trigger)
      .def_rw("alpha", &cfg::alpha)
      .def_rw("neighbour_prior", &cfg::neighbour_prior)
      .def_rw("evaluation_share", &cfg::evaluation_share)
      .def_rw("base_rate", &cfg::base_rate)
      .def_rw("lambda_", &cfg::lambda)
      .def_rw("voice_weight", &cfg::voice_weight)
      .def_rw("boundary_radius", &cfg::boundary_radius)
      .def_rw("boundary_horizon_ms", &cfg::boundary_horizon_ms)
      .def_rw("min_retention_ms", &cfg::min_retention_ms)
      .def_rw("frame_ms", &cfg::frame_ms)
      .def_rw("num_speakers", &cfg::num_speakers)
      .def_rw("baseline_rate", &cfg::baseline_rate)
      .def_rw("drift_window", &cfg::drift_window)
      .def_rw("drift_factor", &cfg::drift_factor)
      .def_prop_rw(
          "prior_mode",
          [](const cfg& c) { return c.prior == audiokv::prior_mode::add ? "add" : "multiply"; },
          [](cfg& c, const std::string& mode) {
            if (mode == "add") {
              c.prior = audiokv::prior_mode::add;
            } else if (mode == "multiply") {
              c.prior = audiokv::prior_mode::multiply;
            } else {
              fail("AudioKVConfig", "config.prior_mode", mode, "must be 'add' or 'multiply'");
            }
          })
      .def_rw("prefetch", &cfg::prefetch)
      .def("validate", &cfg::validate, "Raises audiokv.Error naming the first invalid field.")
      .def("trigger_cells", &cfg::trigger_cells)
      .def("retention_frames", &cfg::retention_frames);

  using plan_t = audiokv::eviction_plan;
  nb::class_<plan_t>(m, "Plan")
      .def(nb::init<>())
      .def(
          "reserve", [](plan_t& p, std::int32_t capacity) { p.reserve(capacity); }, "capacity"_a)
      .def_prop_ro("evict", [](const plan_t& p) { return to_numpy(p.evict); })
      .def_prop_ro("move_to", [](const plan_t& p) { return to_numpy(p.move_to); })
      .def_prop_ro("promote", [](const plan_t& p) { return to_numpy(p.promote); })
      .def_prop_ro("demote", [](const plan_t& p) { return to_numpy(p.demote); })
      .def_ro("n_kv_before", &plan_t::n_kv_before)
      .def_ro("n_kv_after", &plan_t::n_kv_after)
      .def_ro("ratio", &plan_t::ratio)
      .def_ro("normalized_entropy", &plan_t::normalized_entropy)
      .def_ro("protections_released", &plan_t::protections_released)
      .def_ro("generation", &plan_t::generation)
      .def("empty", &plan_t::empty)
      .def("__repr__", [](const plan_t& p) {
        return "audiokv.Plan(n_kv_before=" + std::to_string(p.n_kv_before) +
               ", n_kv_after=" + std::to_string(p.n_kv_after) +
               ", evicted=" + std::to_string(p.evict.size()) + ")";
      });

  nb::class_<py_policy>(m, "Policy")
      .def_prop_ro("name", [](py_policy& s) { return std::string(s.get().name()); })
      .def("append", &append, "pos"_a, "speaker"_a = 0, "voice"_a = 1.0f, "flags"_a = 0,
           "prior"_a = 0.0f, "key_norms"_a = nb::none(),
           nb::sig("def append(self, pos: numpy.typing.ArrayLike, speaker: numpy.typing.ArrayLike "
                   "= 0, voice: numpy.typing.ArrayLike = 1.0, flags: numpy.typing.ArrayLike = 0, "
                   "prior: numpy.typing.ArrayLike = 0.0, key_norms: numpy.typing.ArrayLike | None "
                   "= None) -> None"),
           "Appends frames at positions `pos` (scalar or 1-d, strictly increasing); the other "
           "fields are scalars or arrays of the same length. `key_norms`: knorm only.")
      .def("observe", &observe, "probs"_a,
           "One step's attention probabilities [num_cells] (float32, C-contiguous; other real "
           "dtypes are converted), finite and >= 0. Releases the GIL.")
      .def("observe_group", &observe_group, "probs"_a, "mode"_a = "mean",
           "GQA: the probabilities of one group's query heads, [group, num_cells], reduced per "
           "cell by mode ('mean' or 'max'). Releases the GIL.")
      .def("wants_eviction",
           [](py_policy& s) {
             busy_guard guard(*s.busy);
             return s.get().wants_eviction();
           })
      .def(
          "plan",
          [](py_policy& s, nb::object out) {
            if (out.is_none()) {
              auto* plan = new plan_t();
              nb::object result = nb::cast(plan, nb::rv_policy::take_ownership);
              plan_into(s, *plan, false, 0);
              return result;
            }
            plan_into(s, nb::cast<plan_t&>(out), false, 0);
            return out;
          },
          "out"_a = nb::none())
      .def(
          "plan_to",
          [](py_policy& s, std::int32_t target, nb::object out) {
            if (out.is_none()) {
              auto* plan = new plan_t();
              nb::object result = nb::cast(plan, nb::rv_policy::take_ownership);
              plan_into(s, *plan, true, target);
              return result;
            }
            plan_into(s, nb::cast<plan_t&>(out), true, target);
            return out;
          },
          "target"_a, "out"_a = nb::none())
      .def("apply", &apply, "plan"_a,
           "Commits a plan this policy made for its current state (a stale plan raises "
           "audiokv.Error). Apply the same plan to the K/V first (audiokv.compact).")
      .def_prop_ro("num_cells",
                   [](py_policy& s) {
                     busy_guard guard(*s.busy);
                     return s.get().num_cells();
                   })
      .def_prop_ro("budget",
                   [](py_policy& s) {
                     busy_guard guard(*s.busy);
                     return s.get().budget();
                   })
      .def_prop_ro("capacity",
                   [](py_policy& s) {
                     busy_guard guard(*s.busy);
                     return s.get().capacity();
                   })
      .def_prop_ro("positions",
                   [](py_policy& s) {
                     busy_guard guard(*s.busy);
                     return to_numpy(s.get().positions(),
                                     static_cast<std::size_t>(s.get().num_cells()));
                   })
      .def_prop_ro(
          "tiers",
          [](py_policy& s) -> nb::object {
            busy_guard guard(*s.busy);
            const audiokv::pool_tier* t = s.get().tiers();
            if (t == nullptr) return nb::none();
            static_assert(sizeof(audiokv::pool_tier) == 1, "tiers are bytes");
            return to_numpy(reinterpret_cast<const std::uint8_t*>(t),
                            static_cast<std::size_t>(s.get().num_cells()));
          },
          "[num_cells] pool of each cell (0 buffer, 1 base, 2 emergency), or None for a "
          "single-pool policy.")
      .def("__repr__", [](py_policy& s) {
        return std::string("audiokv.Policy('") + s.get().name() +
               "', num_cells=" + std::to_string(s.get().num_cells()) +
               ", budget=" + std::to_string(s.get().budget()) + ")";
      });

  m.def("make_policy", &make_policy, "name"_a, "options"_a);
  m.def("make_adakv_heads", &make_adakv_heads, "num_heads"_a, "options"_a);
  m.def("compact", &compact, "kv"_a, "plan"_a, "head"_a = nb::none(), "layout"_a = "nhd",
        nb::sig("def compact(kv: typing.Any, plan: Plan, head: int | None = None, layout: str = "
                "'nhd') -> None"),
        "Moves the kept rows of K or V by plan.move_to, in place (zero-copy). kv: a writable CPU "
        "array or tensor (NumPy, or anything with DLPack such as torch), any dtype and strides: "
        "[cells, dim], [cells, heads, dim] (layout 'nhd') or [heads, cells, dim] ('hnd'). "
        "head: one head's rows only (per-head plans), or None for every head.");
  m.def("_native_observe_plan_seconds", &native_observe_plan_seconds, "policy"_a, "probs"_a,
        "out"_a, "iterations"_a, "plan"_a = true);

  // ---- scores from a flash kernel's log-sum-exp; plans of an outside selection ----
  {
    nb::object policy_cls = m.attr("Policy");
    nb::setattr(
        policy_cls, "plan_evicting",
        nb::cpp_function(&plan_evicting, nb::scope(policy_cls), nb::name("plan_evicting"),
                         nb::is_method(), "evict_mask"_a, "out"_a = nb::none(),
                         "The plan evicting exactly the cells where evict_mask is nonzero: an "
                         "eviction chosen outside the policy (an engine's or a wrapper's own "
                         "keep set). apply() it to make the policy follow the engine's memory; "
                         "no protection applies."));
  }
  m.def("lse_scores", &lse_scores, "q"_a, "k"_a, "lse"_a, nb::kw_only(), "base"_a, "scale"_a,
        "mode"_a = "mean", "layout"_a = "nhd", "seq_lens"_a = nb::none(), "indptr"_a = nb::none(),
        "indices"_a = nb::none(), "last_page_len"_a = nb::none(), "return_probs"_a = false,
        "Per-cell attention probabilities p = base^(scale q.k - lse) from the LSE a flash "
        "kernel returns, GQA-reduced per KV head (see audiokv.lse_scores).");
  m.def("observe_lse", &observe_lse, "policies"_a, "q"_a, "k"_a, "lse"_a, nb::kw_only(), "base"_a,
        "scale"_a, "mode"_a = "mean", "layout"_a = "nhd", "seq_lens"_a = nb::none(),
        "indptr"_a = nb::none(), "indices"_a = nb::none(), "last_page_len"_a = nb::none(),
        "mass_tolerance"_a = 1e-3,
        "lse_scores folded straight into policies[b * num_kv_heads + h].observe() (see "
        "audiokv.observe_lse).");
}
