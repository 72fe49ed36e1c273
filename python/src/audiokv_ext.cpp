// SPDX-License-Identifier: Apache-2.0
/// @file
/// nanobind module audiokv._ext: every policy of the registry by name, the AudioKV
/// configuration, plans, and in-place compaction of K/V held in NumPy arrays or DLPack tensors.
///
/// Conventions: arguments are validated before any state changes (by the C++ entry points, or
/// here for the conversions); audiokv::error becomes audiokv.Error (a ValueError) carrying the
/// C++ argument name in `.argument`, an argument of the wrong type a TypeError with the same
/// `.argument`. Buffers written in place must be writable (read-only ones are rejected before
/// anything moves). Calls that scan cells release the GIL. One Policy object is not
/// thread-safe, as in C++; a second thread entering it while a call runs gets RuntimeError
/// instead of a data race. A Plan is held for a call's whole duration, shared by readers
/// (compact, apply, its properties) and exclusive to a writer (plan/plan_to into it, reserve);
/// a conflicting call gets RuntimeError. observe() reads a private copy of the probabilities,
/// so a caller's array written by another thread cannot change validated values.

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
#include <audiokv/pool/layer_plan.hpp>

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

/// An argument of the wrong type: becomes TypeError whose `.argument` names it, as
/// audiokv::error becomes audiokv.Error.
class argument_type_error : public std::exception {
 public:
  argument_type_error(std::string argument, std::string message)
      : argument_(std::move(argument)), message_(std::move(message)) {}
  const char* what() const noexcept override { return message_.c_str(); }
  const std::string& argument() const noexcept { return argument_; }

 private:
  std::string argument_;
  std::string message_;
};

/// Raises TypeError "audiokv::<where>: <argument> = <type of value>: <expectation>".
[[noreturn]] void fail_type(const char* where, const std::string& argument, nb::handle value,
                            const char* expectation) {
  throw argument_type_error(argument, std::string("audiokv::") + where + ": " + argument + " = " +
                                          nb::type_name(value.type()).c_str() + ": " + expectation);
}

void translate_error(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const argument_type_error& e) {
    PyObject* instance = PyObject_CallFunction(PyExc_TypeError, "s", e.what());
    if (instance == nullptr) return;
    PyObject* argument = PyUnicode_FromString(e.argument().c_str());
    if (argument == nullptr || PyObject_SetAttrString(instance, "argument", argument) != 0) {
      Py_XDECREF(argument);
      Py_DECREF(instance);
      return;  // the failure's own exception stays set
    }
    Py_DECREF(argument);
    PyErr_SetObject(PyExc_TypeError, instance);
    Py_DECREF(instance);
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

/// numpy.asarray (leaked: must outlive interpreter teardown).
nb::handle numpy_asarray() {
  static nb::object* asarray = new nb::object(nb::module_::import_("numpy").attr("asarray"));
  return *asarray;
}

/// `value` as shown in an error message: its repr (at most 200 characters), or its type's
/// name when the repr raises or is not valid Unicode.
std::string shown(nb::handle value) {
  std::string text;
  PyObject* repr = PyObject_Repr(value.ptr());
  if (repr == nullptr || !nb::try_cast(nb::handle(repr), text)) {
    PyErr_Clear();
    text = std::string("<") + nb::type_name(value.type()).c_str() + ">";
  }
  Py_XDECREF(repr);
  return text.size() > 200 ? text.substr(0, 200) + "..." : text;
}

/// A 0-d or 1-d NumPy view of `obj` (numpy.asarray), for scalar-or-array arguments.
any_array as_vector(nb::handle obj, const char* name, std::int64_t& length) {
  nb::object array;
  try {
    array = numpy_asarray()(obj);
  } catch (const nb::python_error&) {
    fail("append", name, shown(obj), "must be a scalar or a 1-d array");
  }
  any_array view;
  if (!nb::try_cast(array, view) || view.ndim() > 1) {
    fail("append", name, shown(obj), "must be a scalar or a 1-d array");
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
      fail("append", arg, nb::type_name(obj.type()).c_str(),
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

/// `obj` as an int32 in [lo, 2^31): TypeError unless an int (Python or NumPy integer; bool is
/// not one), audiokv.Error naming `name` when out of range.
std::int32_t int32_arg(nb::handle obj, const char* where, const char* name, std::int32_t lo) {
  if (PyBool_Check(obj.ptr()) || !PyIndex_Check(obj.ptr())) {
    fail_type(where, name, obj, "must be an int");
  }
  const nb::object index = nb::steal(PyNumber_Index(obj.ptr()));
  if (!index.is_valid()) {  // e.g. a 0-d NumPy array of another dtype
    PyErr_Clear();
    fail_type(where, name, obj, "must be an int");
  }
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
  if (v == -1 && PyErr_Occurred() != nullptr) throw nb::python_error();
  if (overflow != 0 || v < lo || v > std::numeric_limits<std::int32_t>::max()) {
    fail(where, name, shown(index), lo == 0 ? "must be in [0, 2^31)" : "must fit in int32");
  }
  return static_cast<std::int32_t>(v);
}

/// `obj` as a UTF-8 string: TypeError naming `name` unless a str.
std::string str_arg(nb::handle obj, const char* where, const char* name) {
  std::string out;
  if (!nb::isinstance<nb::str>(obj)) fail_type(where, name, obj, "must be a str");
  if (!nb::try_cast(obj, out)) {
    PyErr_Clear();
    fail(where, name, shown(obj), "must be valid Unicode text");
  }
  return out;
}

/// Probabilities as a C-contiguous float32 array of `ndim` dimensions, other real dtypes and
/// layouts converted: TypeError naming `name` unless array-like of real numbers,
/// audiokv.Error when it has another number of dimensions.
template <class Array>
Array probs_arg(nb::handle obj, const char* where, const char* name, std::size_t ndim) {
  Array out;
  if (!obj.is_none() && nb::try_cast(obj, out, /*convert=*/true)) return out;
  const char* expectation =
      ndim == 1 ? "must be a 1-d array of real numbers" : "must be a 2-d array of real numbers";
  nb::object array;
  std::string kind;
  try {
    array = numpy_asarray()(obj);
    kind = nb::cast<std::string>(array.attr("dtype").attr("kind"));
  } catch (const nb::python_error&) {
    fail_type(where, name, obj, expectation);
  }
  if (obj.is_none() || kind.size() != 1 || std::strchr("biuf", kind[0]) == nullptr) {
    fail_type(where, name, obj, expectation);
  }
  if (nb::cast<std::size_t>(array.attr("ndim")) != ndim) {
    fail(where, name, "shape " + shown(array.attr("shape")), expectation);
  }
  if (!nb::try_cast(array.attr("astype")("float32"), out, /*convert=*/true)) {
    fail_type(where, name, obj, expectation);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Head budgets from attention

/// EntropyHeadBudgets.observe(head, probs): one step of one head.
void observe_head_entropy(audiokv::entropy_head_budgets& self, nb::handle head,
                          nb::handle probs_obj) {
  constexpr const char* where = "EntropyHeadBudgets.observe";
  const std::int32_t h = int32_arg(head, where, "head", std::numeric_limits<std::int32_t>::min());
  const float_vector probs = probs_arg<float_vector>(probs_obj, where, "probs", 1);
  self.observe(h, audiokv::span<const float>(probs.data(), probs.shape(0)));
}

/// EntropyHeadBudgets.split(layer_budget, floor_cells): the shares as an int32 NumPy array.
nb::object split_head_budgets(const audiokv::entropy_head_budgets& self, nb::handle layer_budget,
                              nb::handle floor_cells) {
  constexpr const char* where = "EntropyHeadBudgets.split";
  if (PyBool_Check(layer_budget.ptr()) || !PyIndex_Check(layer_budget.ptr())) {
    fail_type(where, "layer_budget", layer_budget, "must be an int");
  }
  const long long total = nb::cast<long long>(nb::steal(PyNumber_Index(layer_budget.ptr())));
  const std::vector<std::int32_t> shares = self.split(
      total,
      int32_arg(floor_cells, where, "floor_cells", std::numeric_limits<std::int32_t>::min()));
  return numpy_asarray()(nb::cast(shares), "dtype"_a = "int32");
}

// ---------------------------------------------------------------------------------------------
// Plan

/// A Plan of the Python package: the plan and who uses it. The calls that release the GIL
/// hold it for their whole duration, as readers (compact, apply, the properties) or as its one
/// writer (plan(out=...), plan_to(out=...), reserve), so no thread can reallocate or refill the
/// arrays another one is reading. Holding it is one atomic exchange, no allocation.
struct py_plan {
  audiokv::eviction_plan plan;
  std::atomic<std::int32_t> users{0};  ///< readers (> 0), the writer (-1), or none (0)
};

/// Holds a Plan for one call. A call that would conflict (a writer while any call uses the
/// plan, a reader while it is written) raises RuntimeError instead of waiting: the holder may
/// have released the GIL, which the waiting thread would hold.
class plan_use {
 public:
  plan_use(py_plan& p, bool write, const char* name) : users_(p.users), write_(write) {
    std::int32_t seen = users_.load(std::memory_order_relaxed);
    for (;;) {
      if (write ? seen != 0 : seen < 0) {
        throw std::runtime_error(
            std::string("audiokv: the Plan given as '") + name + "' is " +
            (seen < 0 ? "being refilled" : "being read") +
            " by a call in another thread (a Plan in use can be read by several calls, "
            "refilled by one at a time, not both)");
      }
      const std::int32_t next = write ? -1 : seen + 1;
      if (users_.compare_exchange_weak(seen, next, std::memory_order_acquire,
                                       std::memory_order_relaxed)) {
        return;
      }
    }
  }
  ~plan_use() {
    if (write_) {
      users_.store(0, std::memory_order_release);
    } else {
      users_.fetch_sub(1, std::memory_order_release);
    }
  }
  plan_use(const plan_use&) = delete;
  plan_use& operator=(const plan_use&) = delete;

 private:
  std::atomic<std::int32_t>& users_;
  bool write_;
};

/// `obj` as a Plan: TypeError naming `name` unless an audiokv.Plan.
py_plan& plan_arg(nb::handle obj, const char* where, const char* name) {
  py_plan* p = nullptr;
  if (obj.is_none() || !nb::try_cast(obj, p, /*convert=*/false) || p == nullptr) {
    fail_type(where, name, obj, "must be an audiokv.Plan");
  }
  return *p;
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
  /// observe() staging, reused: the policy reads this private copy while the GIL is released,
  /// so another thread writing the caller's array cannot change values already validated.
  std::vector<float> probs;

  audiokv::eviction_policy& get() { return *policy; }
};

/// The AudioKV cache behind `self`, for the calls only it has (snapshot, restore).
audiokv::tiered_cache<>& audiokv_cache(py_policy& self, const char* where) {
  auto* cache = dynamic_cast<audiokv::tiered_cache<>*>(self.policy.get());
  if (cache == nullptr) {
    fail(where, "self", std::string("a '") + self.get().name() + "' policy",
         "has no snapshot (only make_policy('audiokv') caches have one)");
  }
  return *cache;
}

/// Policy.snapshot(): the cache's whole mutable state as bytes (tiered_cache::snapshot).
nb::bytes snapshot(py_policy& self) {
  busy_guard guard(*self.busy);
  const audiokv::tiered_cache<>& cache = audiokv_cache(self, "snapshot");
  const std::size_t size = cache.snapshot_size();
  // Written straight into the new bytes object (no second copy).
  auto out =
      nb::steal<nb::bytes>(PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(size)));
  if (!out.is_valid()) throw nb::python_error();
  cache.snapshot(
      audiokv::span<std::byte>(reinterpret_cast<std::byte*>(PyBytes_AS_STRING(out.ptr())), size));
  return out;
}

/// Policy.restore(data): tiered_cache::restore from any C-contiguous bytes-like object; a bad
/// snapshot raises audiokv.Error naming "snapshot" and changes nothing.
void restore(py_policy& self, nb::handle data) {
  busy_guard guard(*self.busy);
  audiokv::tiered_cache<>& cache = audiokv_cache(self, "restore");
  Py_buffer view;
  if (data.is_none() || PyObject_GetBuffer(data.ptr(), &view, PyBUF_C_CONTIGUOUS) != 0) {
    PyErr_Clear();
    fail_type("restore", "data", data, "must be bytes-like (what Policy.snapshot() returned)");
  }
  const std::unique_ptr<Py_buffer, void (*)(Py_buffer*)> release(&view, PyBuffer_Release);
  cache.restore(audiokv::span<const std::byte>(static_cast<const std::byte*>(view.buf),
                                               static_cast<std::size_t>(view.len)));
}

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
    fail("knorm::append_with_norms", "key_norms", shown(key_norms),
         "must be a 1-d float array with one norm per frame");
  }
  kn->append_with_norms(out.data(), norms.data(), count);
}

void observe(py_policy& self, nb::handle probs_obj) {
  busy_guard guard(*self.busy);
  const float_vector probs = probs_arg<float_vector>(probs_obj, "observe", "probs", 1);
  const std::int32_t n = checked_int32(probs.shape(0), "observe", "probs");
  self.probs.assign(probs.data(), probs.data() + n);
  nb::gil_scoped_release release;
  self.get().observe(self.probs.data(), n);
}

void observe_group(py_policy& self, nb::handle probs_obj, nb::handle mode_obj) {
  busy_guard guard(*self.busy);
  const float_matrix probs = probs_arg<float_matrix>(probs_obj, "observe_group", "probs", 2);
  const std::int32_t g = checked_int32(probs.shape(0), "observe_group", "probs.shape[0]");
  const std::int32_t n = checked_int32(probs.shape(1), "observe_group", "probs.shape[1]");
  const std::string mode = str_arg(mode_obj, "observe_group", "mode");
  const audiokv::gqa_reduce m = parse_mode(mode);
  audiokv::eviction_policy* p = self.policy.get();
  if (dynamic_cast<audiokv::adakv_head*>(p) != nullptr && m != audiokv::gqa_reduce::mean) {
    fail("adakv::observe_group", "mode", mode, "adakv pools each query row (mode 'mean' only)");
  }
  self.probs.assign(probs.data(), probs.data() + static_cast<std::size_t>(g) * n);
  const float* rows = self.probs.data();
  nb::gil_scoped_release release;
  if (auto* t = dynamic_cast<audiokv::tiered_cache<>*>(p)) {
    t->observe_group(rows, g, n, m);
  } else if (auto* b = dynamic_cast<audiokv::baseline_policy*>(p)) {
    b->observe_group(rows, g, n, m);
  } else if (auto* a = dynamic_cast<audiokv::adakv_head*>(p)) {
    a->observe_group(rows, g, n);
  } else {
    fail("observe_group", "policy", p->name(), "has no grouped observation");
  }
}

void plan_into(py_policy& self, py_plan& out, bool to_target, std::int32_t target) {
  busy_guard guard(*self.busy);
  plan_use use(out, /*write=*/true, "out");
  nb::gil_scoped_release release;
  if (to_target) {
    self.get().plan_to(target, out.plan);
  } else {
    self.get().plan(out.plan);
  }
}

/// plan() and plan_to(): into `out` (a Plan) or, when None, into a new Plan.
nb::object plan_or_new(py_policy& self, nb::handle out, const char* where, bool to_target,
                       std::int32_t target) {
  if (out.is_none()) {
    auto* plan = new py_plan();
    nb::object result = nb::cast(plan, nb::rv_policy::take_ownership);
    plan_into(self, *plan, to_target, target);
    return result;
  }
  py_plan* plan = nullptr;
  if (!nb::try_cast(out, plan, /*convert=*/false) || plan == nullptr) {
    fail_type(where, "out", out, "must be an audiokv.Plan or None");
  }
  plan_into(self, *plan, to_target, target);
  return nb::borrow(out);
}

void apply(py_policy& self, nb::handle plan_obj) {
  busy_guard guard(*self.busy);
  py_plan& plan = plan_arg(plan_obj, "apply", "plan");
  plan_use use(plan, /*write=*/false, "plan");
  nb::gil_scoped_release release;
  self.get().apply(plan.plan);
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
    if (!PyBool_Check(value.ptr())) {
      fail("make_policy", std::string("options.") + key, shown(value), "must be True or False");
    }
    return value.ptr() == Py_True;
  } else {
    if (!nb::try_cast(value, out, /*convert=*/!std::is_integral_v<T>)) {
      fail("make_policy", std::string("options.") + key, shown(value),
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
    std::string key;
    if (!nb::try_cast(k, key)) {
      PyErr_Clear();
      fail("make_policy", "options", shown(k), "keys must be valid Unicode text");
    }
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
      std::string reduce;
      if (!nb::isinstance<nb::str>(v) || !nb::try_cast(v, reduce)) {
        PyErr_Clear();
        reduce = shown(v);
      }
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
        fail("make_policy", "options.config", shown(v), "must be an audiokv.AudioKVConfig");
      }
      has_config = true;
    } else if (key == "block") {
      o.audiokv_pipeline.stage<2>().block = option_as<std::int32_t>(v, c);
    } else if (key == "level_weight") {
      o.audiokv_pipeline.stage<1>().level_weight = option_as<float>(v, c);
    } else if (key == "slope_gain") {
      o.audiokv_pipeline.stage<1>().slope_gain = option_as<float>(v, c);
    } else {
      fail("make_policy", "options." + key, shown(v),
           "is not an option (budget, capacity, num_speakers, n_sink, recent_size, lru_tau, "
           "lru_tau_per_cell, window, kernel, pool, group_size, layer, num_layers, beta, "
           "tova_force_last, alpha_safeguard, seed; audiokv: config, block, level_weight, "
           "slope_gain)");
    }
  }
  return o;
}

py_policy make_policy(nb::handle name_obj, const nb::kwargs& kwargs) {
  const std::string name = str_arg(name_obj, "make_policy", "name");
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

std::vector<py_policy> make_adakv_heads(nb::handle num_heads_obj, const nb::kwargs& kwargs) {
  const std::int32_t num_heads = int32_arg(num_heads_obj, "make_adakv_heads", "num_heads",
                                           std::numeric_limits<std::int32_t>::min());
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
/// ("hnd"), any element strides, any dtype (rows move byte for byte). Writable: a read-only
/// buffer (a NumPy array with writeable=False, a memoryview of bytes, a read-only DLPack
/// tensor) does not convert.
using kv_array = nb::ndarray<nb::device::cpu>;

/// `obj` as a writable CPU array; audiokv.Error naming `name` for a read-only buffer or one
/// outside host memory, TypeError for anything that is no array.
kv_array writable_cpu_array(nb::handle obj, const char* where, const char* name) {
  kv_array out;
  if (nb::try_cast(obj, out, /*convert=*/false)) return out;
  nb::ndarray<nb::ro> any;
  if (obj.is_none() || !nb::try_cast(obj, any, /*convert=*/false)) {
    fail_type(where, name, obj,
              "must be an array with the buffer protocol or DLPack (numpy.ndarray, torch.Tensor)");
  }
  if (any.device_type() != nb::device::cpu::value) {
    fail(where, name, "device type " + std::to_string(any.device_type()),
         "must be in host memory (the Python package compacts CPU tensors only)");
  }
  fail(where, name, "read-only " + std::string(nb::type_name(obj.type()).c_str()),
       "must be writable (compaction is in place)");
}

template <class Word>
void compact_words(const kv_array& kv, const audiokv::layout_strided& layout, std::int32_t head,
                   const audiokv::eviction_plan& plan) {
  const audiokv::kv_view<Word, audiokv::layout_strided> view(static_cast<Word*>(kv.data()), layout);
  if (head < 0) {
    audiokv::cpu::compact_all_heads(view, plan);
  } else {
    audiokv::cpu::compact(view, head, plan);
  }
}

void compact(nb::handle kv_obj, nb::handle plan_obj, nb::handle head_obj, nb::handle layout_obj) {
  constexpr const char* where = "compact";
  const kv_array kv = writable_cpu_array(kv_obj, where, "kv");
  py_plan& plan = plan_arg(plan_obj, where, "plan");
  const std::string layout_name = str_arg(layout_obj, where, "layout");
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
      fail(where, "head", shown(head_obj), "must be None or an int in [0, num_heads)");
    }
  }
  const std::uint8_t bits = kv.dtype().bits;
  const std::size_t lanes = kv.dtype().lanes;
  const std::size_t bytes = lanes * bits / 8;
  if (bytes != 1 && bytes != 2 && bytes != 4 && bytes != 8) {
    fail(where, "kv.dtype", std::to_string(bytes) + " bytes", "must be 1, 2, 4 or 8 bytes");
  }
  plan_use use(plan, /*write=*/false, "plan");
  nb::gil_scoped_release release;
  switch (bytes) {
    case 1:
      compact_words<std::uint8_t>(kv, layout, head, plan.plan);
      break;
    case 2:
      compact_words<std::uint16_t>(kv, layout, head, plan.plan);
      break;
    case 4:
      compact_words<std::uint32_t>(kv, layout, head, plan.plan);
      break;
    default:
      compact_words<std::uint64_t>(kv, layout, head, plan.plan);
      break;
  }
}

// ---------------------------------------------------------------------------------------------
// Native timing of the same calls, for the Python-overhead benchmark.

/// Seconds for `iterations` rounds of observe(probs) + plan(out) in a C++ loop.
double native_observe_plan_seconds(py_policy& self, nb::handle probs_obj, nb::handle out_obj,
                                   std::int64_t iterations, bool do_plan) {
  busy_guard guard(*self.busy);
  const float_vector probs = probs_arg<float_vector>(probs_obj, "observe", "probs", 1);
  const std::int32_t n = checked_int32(probs.shape(0), "observe", "probs");
  py_plan& out = plan_arg(out_obj, "_native_observe_plan_seconds", "out");
  plan_use use(out, /*write=*/true, "out");
  self.probs.assign(probs.data(), probs.data() + n);
  nb::gil_scoped_release release;
  audiokv::eviction_policy& p = self.get();
  const auto start = std::chrono::steady_clock::now();
  for (std::int64_t i = 0; i < iterations; ++i) {
    p.observe(self.probs.data(), n);
    if (do_plan) p.plan(out.plan);
  }
  const auto stop = std::chrono::steady_clock::now();
  return std::chrono::duration<double>(stop - start).count();
}

/// A Plan property: the field, read while holding the plan as a reader.
template <class T>
auto plan_field(T audiokv::eviction_plan::*field) {
  return [field](py_plan& p) {
    plan_use use(p, /*write=*/false, "self");
    return p.plan.*field;
  };
}

/// A Plan array property: a NumPy copy of the field, made while holding the plan as a reader.
template <class T>
auto plan_array(std::vector<T> audiokv::eviction_plan::*field) {
  return [field](py_plan& p) {
    plan_use use(p, /*write=*/false, "self");
    return to_numpy(p.plan.*field);
  };
}

// ---------------------------------------------------------------------------------------------
// Scores from a flash kernel's log-sum-exp (cpu/lse_scores.hpp) and plans that follow an
// eviction chosen outside the policy (eviction_policy::plan_evicting).

/// An external keep decision: the plan evicting exactly the cells where `evict_mask` is nonzero.
nb::object plan_evicting(py_policy& self, nb::handle evict_mask, nb::handle out) {
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
           nb::type_name(evict_mask.type()).c_str(), "must be a boolean or integer flag");
    }
    flags[static_cast<std::size_t>(i)] = v != 0 ? 1 : 0;
  }
  py_plan* plan = nullptr;
  nb::object result;
  if (out.is_none()) {
    plan = new py_plan();
    result = nb::cast(plan, nb::rv_policy::take_ownership);
  } else {
    if (!nb::try_cast(out, plan, /*convert=*/false) || plan == nullptr) {
      fail_type(where, "out", out, "must be an audiokv.Plan or None");
    }
    result = nb::borrow(out);
  }
  busy_guard guard(*self.busy);
  plan_use use(*plan, /*write=*/true, "out");
  {
    nb::gil_scoped_release release;
    self.get().plan_evicting(flags, plan->plan);
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

/// One busy_guard per distinct busy flag of `owners` (the heads of an adakv group share theirs).
std::vector<std::unique_ptr<busy_guard>> guard_each(const std::vector<py_policy*>& owners) {
  std::vector<std::unique_ptr<busy_guard>> guards;
  std::vector<const std::atomic<bool>*> taken;
  for (py_policy* p : owners) {
    if (std::find(taken.begin(), taken.end(), p->busy.get()) == taken.end()) {
      guards.push_back(std::make_unique<busy_guard>(*p->busy));
      taken.push_back(p->busy.get());
    }
  }
  return guards;
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
    if (!nb::try_cast(item, p, /*convert=*/false) || p == nullptr) {
      fail_type(where, audiokv::detail::indexed("policies", static_cast<long long>(owners.size())),
                item, "must be an audiokv.Policy");
    }
    owners.push_back(p);
  }
  if (owners.size() != want)
    fail(where, "len(policies)", std::to_string(owners.size()),
         ("must be batch * num_kv_heads = " + std::to_string(want) +
          " (sequence-major: policies[b * num_kv_heads + h])")
             .c_str());
  const std::vector<std::unique_ptr<busy_guard>> guards = guard_each(owners);
  std::vector<audiokv::eviction_policy*> raw;
  for (py_policy* p : owners) raw.push_back(&p->get());
  std::vector<float> workspace(audiokv::cpu::observe_lse_workspace_floats(c.s));
  nb::gil_scoped_release release;
  audiokv::cpu::observe_lse(c.s, c.k, c.k_elements, raw.data(), static_cast<float>(mass_tolerance),
                            workspace.data(), workspace.size());
}

// share_layer_plan(policies, plans, rule="max")

/// One layer's heads: policies[h] made plans[h] for the same cells; the plans are rewritten into
/// one shared keep-set (audiokv::share_layer_plan; a cell is protected where its AudioKV cache
/// says so, never in a baseline). Returns the cells evicted in every head.
std::int32_t share_layer_plan(nb::handle policies, nb::handle plans, const std::string& rule) {
  constexpr const char* where = "share_layer_plan";
  audiokv::head_reduce reduce = audiokv::head_reduce::max;
  if (rule == "mean") {
    reduce = audiokv::head_reduce::mean;
  } else if (rule != "max") {
    fail(where, "rule", rule, "must be 'max' or 'mean'");
  }
  std::vector<py_policy*> owners;
  for (nb::handle item : nb::iter(policies)) {
    py_policy* p = nullptr;
    if (!nb::try_cast(item, p, /*convert=*/false) || p == nullptr) {
      fail_type(where, audiokv::detail::indexed("policies", static_cast<long long>(owners.size())),
                item, "must be an audiokv.Policy");
    }
    owners.push_back(p);
  }
  std::vector<py_plan*> given;
  for (nb::handle item : nb::iter(plans)) {
    given.push_back(
        &plan_arg(item, where,
                  audiokv::detail::indexed("plans", static_cast<long long>(given.size())).c_str()));
  }
  if (given.size() != owners.size() || given.empty()) {
    fail(where, "len(plans)", std::to_string(given.size()),
         ("must equal len(policies) = " + std::to_string(owners.size()) + ", at least 1").c_str());
  }
  // The policies are only read; each plan is rewritten, so a plan listed twice is refused.
  const std::vector<std::unique_ptr<busy_guard>> guards = guard_each(owners);
  std::vector<std::unique_ptr<plan_use>> uses;
  std::vector<const audiokv::tiered_cache<>*> caches;
  for (std::size_t h = 0; h < owners.size(); ++h) {
    uses.push_back(std::make_unique<plan_use>(
        *given[h], /*write=*/true,
        audiokv::detail::indexed("plans", static_cast<long long>(h)).c_str()));
    caches.push_back(dynamic_cast<const audiokv::tiered_cache<>*>(owners[h]->policy.get()));
  }
  // The plans move into one array for the call and back after it, whatever it throws (a
  // failed call changes no plan).
  std::vector<audiokv::eviction_plan> layer(given.size());
  for (std::size_t h = 0; h < given.size(); ++h) std::swap(layer[h], given[h]->plan);
  struct swap_back {
    std::vector<audiokv::eviction_plan>& layer;
    std::vector<py_plan*>& given;
    ~swap_back() {
      for (std::size_t h = 0; h < given.size(); ++h) std::swap(layer[h], given[h]->plan);
    }
  } restore_plans{layer, given};
  audiokv::layer_plan_workspace ws;
  nb::gil_scoped_release release;
  return audiokv::share_layer_plan(
      audiokv::span<audiokv::eviction_plan>(layer.data(), layer.size()), reduce,
      [&](std::int32_t h, std::int32_t c) {
        const audiokv::tiered_cache<>* cache = caches[static_cast<std::size_t>(h)];
        return cache != nullptr && cache->is_protected(c);
      },
      ws);
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
  m.attr("FRAME_TEXT") = static_cast<int>(audiokv::frame_flag_text);

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
      .def_rw("smooth_text", &cfg::smooth_text)
      .def_rw("text_recent_share", &cfg::text_recent_share)
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
  nb::class_<py_plan>(m, "Plan")
      .def(nb::init<>())
      .def(
          "reserve",
          [](py_plan& p, nb::handle capacity) {
            const std::int32_t c = int32_arg(capacity, "Plan.reserve", "capacity", 0);
            plan_use use(p, /*write=*/true, "self");
            p.plan.reserve(c);
          },
          "capacity"_a.none(), nb::sig("def reserve(self, capacity: int) -> None"))
      .def_prop_ro("evict", plan_array(&plan_t::evict))
      .def_prop_ro("move_to", plan_array(&plan_t::move_to))
      .def_prop_ro("promote", plan_array(&plan_t::promote))
      .def_prop_ro("demote", plan_array(&plan_t::demote))
      .def_prop_ro("n_kv_before", plan_field(&plan_t::n_kv_before))
      .def_prop_ro("n_kv_after", plan_field(&plan_t::n_kv_after))
      .def_prop_ro("ratio", plan_field(&plan_t::ratio))
      .def_prop_ro("normalized_entropy", plan_field(&plan_t::normalized_entropy))
      .def_prop_ro("protections_released", plan_field(&plan_t::protections_released))
      .def_prop_ro("generation", plan_field(&plan_t::generation))
      .def("empty",
           [](py_plan& p) {
             plan_use use(p, /*write=*/false, "self");
             return p.plan.empty();
           })
      .def("__repr__", [](py_plan& p) -> std::string {
        try {
          plan_use use(p, /*write=*/false, "self");
          return "audiokv.Plan(n_kv_before=" + std::to_string(p.plan.n_kv_before) +
                 ", n_kv_after=" + std::to_string(p.plan.n_kv_after) +
                 ", evicted=" + std::to_string(p.plan.evict.size()) + ")";
        } catch (const std::runtime_error&) {
          return "audiokv.Plan(being refilled by another thread)";
        }
      });

  nb::class_<py_policy>(m, "Policy")
      .def_prop_ro("name", [](py_policy& s) { return std::string(s.get().name()); })
      .def("append", &append, "pos"_a.none(), "speaker"_a.none() = 0, "voice"_a.none() = 1.0f,
           "flags"_a.none() = 0, "prior"_a.none() = 0.0f, "key_norms"_a.none() = nb::none(),
           nb::sig("def append(self, pos: numpy.typing.ArrayLike, speaker: numpy.typing.ArrayLike "
                   "= 0, voice: numpy.typing.ArrayLike = 1.0, flags: numpy.typing.ArrayLike = 0, "
                   "prior: numpy.typing.ArrayLike = 0.0, key_norms: numpy.typing.ArrayLike | None "
                   "= None) -> None"),
           "Appends frames at positions `pos` (scalar or 1-d, strictly increasing); the other "
           "fields are scalars or arrays of the same length. `key_norms`: knorm only.")
      .def("observe", &observe, "probs"_a.none(),
           nb::sig("def observe(self, probs: numpy.typing.ArrayLike) -> None"),
           "One step's attention probabilities [num_cells] (float32, C-contiguous; other real "
           "dtypes are converted), finite and >= 0. Releases the GIL.")
      .def("observe_group", &observe_group, "probs"_a.none(), "mode"_a.none() = "mean",
           nb::sig("def observe_group(self, probs: numpy.typing.ArrayLike, mode: str = 'mean') "
                   "-> None"),
           "GQA: the probabilities of one group's query heads, [group, num_cells], reduced per "
           "cell by mode ('mean' or 'max'). Releases the GIL.")
      .def("wants_eviction",
           [](py_policy& s) {
             busy_guard guard(*s.busy);
             return s.get().wants_eviction();
           })
      .def(
          "plan",
          [](py_policy& s, nb::handle out) { return plan_or_new(s, out, "plan", false, 0); },
          "out"_a.none() = nb::none(), nb::sig("def plan(self, out: Plan | None = None) -> Plan"))
      .def(
          "plan_to",
          [](py_policy& s, nb::handle target, nb::handle out) {
            const std::int32_t t = int32_arg(target, "plan_to", "target_cells",
                                             std::numeric_limits<std::int32_t>::min());
            return plan_or_new(s, out, "plan_to", true, t);
          },
          "target"_a.none(), "out"_a.none() = nb::none(),
          nb::sig("def plan_to(self, target: int, out: Plan | None = None) -> Plan"))
      .def("snapshot", &snapshot, nb::sig("def snapshot(self) -> bytes"),
           "AudioKV only: the cache's whole mutable state (cells, scores, statistics, ...) in "
           "a versioned, checksummed byte format, for preemption, swap or a beam's branch.")
      .def("restore", &restore, "data"_a.none(), nb::sig("def restore(self, data: bytes) -> None"),
           "AudioKV only: replaces the state by a snapshot() of a cache with the same "
           "configuration and capacity; it then continues bit for bit like the original. A "
           "truncated, corrupt or mismatched snapshot raises audiokv.Error naming 'snapshot' "
           "and changes nothing. Plans made before it are stale.")
      .def("apply", &apply, "plan"_a.none(), nb::sig("def apply(self, plan: Plan) -> None"),
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
        std::string state;
        try {
          busy_guard guard(*s.busy);
          state = "num_cells=" + std::to_string(s.get().num_cells()) +
                  ", budget=" + std::to_string(s.get().budget());
        } catch (const std::runtime_error&) {
          state = "running a call in another thread";
        }
        return std::string("audiokv.Policy('") + s.get().name() + "', " + state + ")";
      });

  m.def("make_policy", &make_policy, "name"_a.none(), "options"_a,
        nb::sig("def make_policy(name: str, **options) -> Policy"));
  m.def("share_layer_plan", &share_layer_plan, "policies"_a, "plans"_a, "rule"_a = "max",
        nb::sig("def share_layer_plan(policies: typing.Sequence[Policy], plans: "
                "typing.Sequence[Plan], rule: str = 'max') -> int"),
        "One layer's heads: rewrites plans[h] (made by policies[h] for the same cells) into one "
        "shared keep-set, for K/V blocks that hold every head of a layer. The layer evicts as "
        "many cells as the head that evicted most, chosen among the cells some head evicted, "
        "lowest score first (max or mean over the heads); a cell protected in any AudioKV head "
        "stays. Returns the cells evicted; apply plans[h] to policies[h] afterwards. A bad "
        "argument raises naming it and changes no plan.");
  m.def("make_adakv_heads", &make_adakv_heads, "num_heads"_a.none(), "options"_a,
        nb::sig("def make_adakv_heads(num_heads: int, **options) -> list[Policy]"));
  nb::class_<audiokv::entropy_head_budgets>(
      m, "EntropyHeadBudgets",
      "A layer's budget split over its KV heads by their attention: observe each head's step, "
      "then split(layer_budget) gives shares summing exactly to it, by perplexity^exponent of "
      "each head's mean attention entropy (exponent < 0: heads that read few cells get more). "
      "Plan each head down to its share with Policy.plan_to (what tiered_layer<> does in C++).")
      .def(
          "__init__",
          [](audiokv::entropy_head_budgets* self, nb::handle num_heads, double exponent) {
            new (self) audiokv::entropy_head_budgets(
                int32_arg(num_heads, "EntropyHeadBudgets", "num_heads",
                          std::numeric_limits<std::int32_t>::min()),
                exponent);
          },
          "num_heads"_a.none(), "exponent"_a = audiokv::entropy_head_budgets::default_exponent)
      .def_prop_ro("num_heads", &audiokv::entropy_head_budgets::num_heads)
      .def_prop_ro("exponent", &audiokv::entropy_head_budgets::exponent)
      .def_prop_ro("all_observed", &audiokv::entropy_head_budgets::all_observed)
      .def("steps", &audiokv::entropy_head_budgets::steps, "head"_a,
           "Steps head `head` has observed.")
      .def("observe", &observe_head_entropy, "head"_a.none(), "probs"_a.none(),
           nb::sig("def observe(self, head: int, probs: numpy.typing.ArrayLike) -> None"),
           "One decode step of head `head`: its attention probabilities over its cells.")
      .def("mean_entropy", &audiokv::entropy_head_budgets::mean_entropy,
           "Mean attention entropy per observed step of each head, in nats.")
      .def("split", &split_head_budgets, "layer_budget"_a.none(), "floor_cells"_a.none() = 1,
           nb::sig("def split(self, layer_budget: int, floor_cells: int = 1) -> "
                   "numpy.typing.NDArray[numpy.int32]"),
           "Shares summing exactly to layer_budget, each >= floor_cells.")
      .def("reset", &audiokv::entropy_head_budgets::reset, "Forgets every observed step.");
  m.def("compact", &compact, "kv"_a.none(), "plan"_a.none(), "head"_a.none() = nb::none(),
        "layout"_a.none() = "nhd",
        nb::sig("def compact(kv: typing.Any, plan: Plan, head: int | None = None, layout: str = "
                "'nhd') -> None"),
        "Moves the kept rows of K or V by plan.move_to, in place (zero-copy). kv: a writable CPU "
        "array or tensor (NumPy, or anything with DLPack such as torch), any dtype and strides: "
        "[cells, dim], [cells, heads, dim] (layout 'nhd') or [heads, cells, dim] ('hnd'). "
        "head: one head's rows only (per-head plans), or None for every head.");
  m.def("_native_observe_plan_seconds", &native_observe_plan_seconds, "policy"_a, "probs"_a.none(),
        "out"_a.none(), "iterations"_a, "plan"_a = true);

  // ---- scores from a flash kernel's log-sum-exp; plans of an outside selection ----
  {
    nb::object policy_cls = m.attr("Policy");
    nb::setattr(
        policy_cls, "plan_evicting",
        nb::cpp_function(&plan_evicting, nb::scope(policy_cls), nb::name("plan_evicting"),
                         nb::is_method(), "evict_mask"_a.none(), "out"_a.none() = nb::none(),
                         nb::sig("def plan_evicting(self, evict_mask: numpy.typing.ArrayLike, "
                                 "out: Plan | None = None) -> Plan"),
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
