// interpreter/compiled_segment.cc: a trace becomes a cache entry (its graph compiled by the
// backend the options choose), and an entry runs: its number program, then its graph.
#include "interpreter/compiled_segment.h"

#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "autograd/compiled_function.h"
#include "interpreter/number_program.h"
#include "interpreter/py_types.h"
#include "jit/kernel_cache.h"
#include "runtime/errors.h"
#include "runtime/autograd_meta.h"
#include "runtime/log.h"

namespace dt::interpreter {
namespace {

using py::PyRef;

std::vector<Tensor> ResolveInputs(const CacheEntry& entry, const guards::FrameInputs& inputs) {
  std::vector<Tensor> tensors;
  tensors.reserve(entry.trace.input_sources.size());
  for (const guards::SourceRef& s : entry.trace.input_sources) tensors.push_back(py::Unwrap(s->Resolve(inputs)));
  return tensors;
}

// Runs a Python backend's compiled callable; an error status means a Python error is set.
absl::StatusOr<std::vector<Tensor>> RunPythonBackend(const CacheEntry& entry, PyObject* callable,
                                                     const std::vector<Tensor>& tensors) {
  InsideDyntrace guard;
  PyRef args = PyRef::Steal(PyTuple_New(tensors.size()));
  for (size_t i = 0; i < tensors.size(); ++i) PyTuple_SET_ITEM(args.get(), i, py::Wrap(tensors[i]));
  PyRef r = PyRef::Steal(PyObject_Call(callable, args.get(), nullptr));
  if (!r) return Error(ErrorKind::kRuntime, "python");
  PyRef seq = PyRef::Steal(PySequence_Fast(r.get(), "a dyntrace backend must return a list or tuple of tensors"));
  if (!seq) return Error(ErrorKind::kRuntime, "python");
  std::vector<Tensor> outs;
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq.get()); ++i) {
    PyObject* item = PySequence_Fast_GET_ITEM(seq.get(), i);
    if (!py::IsTensor(item)) {
      PyErr_SetString(PyExc_TypeError, "a dyntrace backend returned a non-tensor output");
      return Error(ErrorKind::kRuntime, "python");
    }
    outs.push_back(py::Unwrap(item));
  }
  if (outs.size() != entry.graph()->outputs().size()) {
    PyErr_Format(PyExc_ValueError, "a dyntrace backend returned %zd outputs; the graph has %zd",
                 outs.size(), entry.graph()->outputs().size());
    return Error(ErrorKind::kRuntime, "python");
  }
  return outs;
}

// Graphs that read run-time Python numbers run on the eager backend: a Python backend's callable
// only receives tensors.
bool GraphReadsNumbers(const Graph& g) {
  for (const Node& n : g.nodes()) {
    for (const GraphArg& a : n.args) {
      if (a.ReadsNumbers()) return true;
    }
  }
  return false;
}

bool GraphHasInplace(const Graph& g) {
  for (const Node& n : g.nodes()) {
    if (n.inplace) return true;
  }
  return false;
}

// What a compiling backend built becomes the entry's graph; when it failed (no compiler or
// NVRTC, a compile error, a module the driver rejects) the graph runs eagerly and the reason is
// logged: never a wrong result. The kernel cache's warning (an unusable cache directory) is
// shown once; one turned into an error by a filter can't stop compilation here: it is printed.
template <typename Executable>
void Adopt(CacheEntry& entry, const std::string& name, const char* backend,
           absl::StatusOr<std::shared_ptr<Executable>> built) {
  if (std::string warning = jit::KernelCache::Global().TakeWarning(); !warning.empty()) {
    if (PyErr_WarnEx(PyExc_RuntimeWarning, warning.c_str(), 1) < 0) PyErr_WriteUnraisable(nullptr);
  }
  if (!built.ok()) {
    const std::string reason = absl::StrCat(name, ": the ", backend, " backend could not compile the graph (",
                                            built.status().message(), "); it runs eagerly");
    GlobalStats().compile_failures.Add(reason);
    if (log::Enabled(log::Kind::kKernels)) log::Write(log::Kind::kKernels, reason);
    entry.backend_used = "eager";
    return;
  }
  entry.backend_used = backend;
  entry.kernel_source = (*built)->kernel_source();
  entry.compile_seconds += (*built)->build_seconds();
  entry.compiled = *std::move(built);
}

// The cpu backend: fused kernels from the host compiler.
void CompileForCpu(CacheEntry& entry, const std::string& name) {
  Adopt(entry, name, "cpu", jit::CpuExecutable::Build(*entry.graph(), name));
}

// The CUDA device a graph reads or creates tensors on, if any.
std::optional<Device> CudaDeviceRead(const CacheEntry& entry, const guards::FrameInputs& inputs) {
  for (const Tensor& t : ResolveInputs(entry, inputs)) {
    if (t.device().type == DeviceType::kCuda) return t.device();
  }
  for (const Node& node : entry.graph()->nodes()) {  // creation ops asked for a CUDA result
    for (const GraphArg& arg : node.args) {
      const auto* value = std::get_if<ArgValue>(&arg.content);
      const Device* device = value ? std::get_if<Device>(value) : nullptr;
      if (device != nullptr && device->type == DeviceType::kCuda) return *device;
    }
  }
  return std::nullopt;
}

// The cuda backend: NVRTC-compiled kernels on the graph's device.
void CompileForCuda(CacheEntry& entry, const std::string& name, Device device, const JitOptions& options) {
  // jit() validated the option; a bad value can only come from a caller inside dyntrace.
  const jit::CudaGraphMode graphs =
      jit::ParseCudaGraphMode(options.cuda_graphs).value_or(jit::CudaGraphMode::kAuto);
  Adopt(entry, name, "cuda", jit::CudaExecutable::Build(*entry.graph(), name, device, graphs));
}

// The backward graph, compiled by the backend that compiled the forward one.
void CompileBackward(CacheEntry& entry, const std::string& name, std::optional<Device> cuda, const JitOptions& options) {
  auto backward = std::make_shared<CompiledBackward>();
  backward->joint = entry.trace.joint;
  Stats& stats = GlobalStats();
  stats.backward_graphs += 1;
  stats.saved_bytes += backward->joint->saved_bytes;
  stats.save_everything_bytes += backward->joint->save_everything_bytes;
  stats.recomputed_nodes += backward->joint->recomputed_nodes;
  const Graph& graph = backward->joint->backward;
  const std::string backward_name = absl::StrCat(name, "_backward");
  absl::StatusOr<CompiledGraph> built = CompiledGraph(EagerGraph{});
  if (graph.nodes().empty()) {
    built = CompiledGraph(EagerGraph{});
  } else if (entry.backend_used == "cpu") {
    auto cpu = jit::CpuExecutable::Build(graph, backward_name);
    built = cpu.ok() ? absl::StatusOr<CompiledGraph>(CompiledGraph(*cpu)) : cpu.status();
  } else if (entry.backend_used == "cuda" && cuda.has_value()) {
    const jit::CudaGraphMode graphs =
        jit::ParseCudaGraphMode(options.cuda_graphs).value_or(jit::CudaGraphMode::kAuto);
    auto gpu = jit::CudaExecutable::Build(graph, backward_name, *cuda, graphs);
    built = gpu.ok() ? absl::StatusOr<CompiledGraph>(CompiledGraph(*gpu)) : gpu.status();
  }
  if (built.ok()) {
    backward->compiled = *std::move(built);
    backward->backend_used = std::holds_alternative<EagerGraph>(backward->compiled) ? "eager" : entry.backend_used;
  } else {
    const std::string reason = absl::StrCat(backward_name, ": the ", entry.backend_used,
                                            " backend could not compile the backward graph (", built.status().message(),
                                            "); it runs eagerly");
    GlobalStats().compile_failures.Add(reason);
    if (log::Enabled(log::Kind::kKernels)) log::Write(log::Kind::kKernels, reason);
    backward->backend_used = "eager";
  }
  entry.backward = std::move(backward);
}

// Runs a backward graph on (gradients, saved values); what a CompiledFunctionNode calls.
absl::StatusOr<std::vector<Tensor>> RunBackward(const CompiledBackward& backward, std::vector<Tensor> inputs) {
  return std::visit(
      [&](const auto& compiled) -> absl::StatusOr<std::vector<Tensor>> {
        using T = std::decay_t<decltype(compiled)>;
        if constexpr (std::is_same_v<T, EagerGraph> || std::is_same_v<T, PythonBackendCallable>) {
          return backward.joint->backward.RunEager(inputs);
        } else {
          return compiled->Run(std::move(inputs), {});
        }
      },
      backward.compiled);
}

}  // namespace

std::shared_ptr<CacheEntry> CompileSegment(trace::TraceResult trace, const JitOptions& options,
                                           const guards::FrameInputs& inputs, int start_offset,
                                           const std::string& name) {
  auto entry = std::make_shared<CacheEntry>();
  entry->start_offset = start_offset;
  entry->guards = std::move(trace.guards);
  entry->trace = std::move(trace);
  const Graph& graph = *entry->graph();
  entry->has_inplace = GraphHasInplace(graph);
  const bool empty = graph.nodes().empty();
  const std::optional<Device> cuda = empty ? std::nullopt : CudaDeviceRead(*entry, inputs);
  if (options.backend_callable && !empty && !GraphReadsNumbers(graph)) {
    PyRef graph_obj = PyRef::Steal(py::WrapGraph(entry->graph()));
    PyRef examples = PyRef::Steal(PyList_New(0));
    for (const Tensor& t : ResolveInputs(*entry, inputs)) {
      PyRef w = PyRef::Steal(py::Wrap(t));
      PyList_Append(examples.get(), w.get());
    }
    InsideDyntrace guard;
    PyRef compiled = PyRef::Steal(PyObject_CallFunctionObjArgs(
        options.backend_callable.get(), graph_obj.get(), examples.get(), nullptr));
    if (!compiled) return nullptr;
    entry->compiled = PythonBackendCallable{compiled};
    entry->backend_used = "python";
  } else if ((options.backend == "cpu" || options.backend == "auto") && !empty && !cuda) {
    CompileForCpu(*entry, name);
  } else if ((options.backend == "cuda" || options.backend == "auto") && cuda) {
    CompileForCuda(*entry, name, *cuda, options);
  } else {
    // Graphs over CUDA tensors never run CPU kernels, which cannot read device memory; the
    // eager backend runs them op by op on the device (graph/cuda_eager.h).
    entry->backend_used = "eager";
  }
  if (entry->trace.joint != nullptr) CompileBackward(*entry, name, cuda, options);
  return entry;
}

// Replays a segment's number program on the real values; false (no error left set) when Python
// would raise there, in which case CPython reruns the segment's code and raises itself.
bool ComputeNumbers(const CacheEntry& entry, const guards::FrameInputs& inputs,
                    std::vector<PyRef>& values, std::vector<Scalar>& scalars) {
  scalars.clear();
  if (!trace::EvaluateNumbers(entry.trace.scalars, inputs, values)) return false;
  for (const PyRef& value : values) {
    auto scalar = py::ToScalar(value.get(), "a run-time number");
    // Only numbers used by tensor ops must fit a Scalar; keep a placeholder for the rest.
    scalars.push_back(scalar.ok() ? *scalar : Scalar::Int(0));
  }
  return true;
}

absl::StatusOr<std::vector<Tensor>> RunCompiledGraph(const CacheEntry& entry, const guards::FrameInputs& inputs,
                                                     const std::vector<Scalar>& scalars) {
  const Graph& graph = *entry.graph();
  if (graph.nodes().empty() && graph.outputs().empty()) return std::vector<Tensor>();
  std::vector<Tensor> tensors = ResolveInputs(entry, inputs);
  if (const auto* python = std::get_if<PythonBackendCallable>(&entry.compiled)) {
    return RunPythonBackend(entry, python->callable.get(), tensors);
  }
  absl::StatusOr<std::vector<Tensor>> outputs;
  Py_BEGIN_ALLOW_THREADS
  // Inputs autograd follows are differentiated by the joint graph's backward, not recorded op
  // by op (the eager backend's ops would record otherwise).
  GradModeGuard no_recording(false);
  outputs = std::visit(
      [&](const auto& compiled) -> absl::StatusOr<std::vector<Tensor>> {
        using T = std::decay_t<decltype(compiled)>;
        if constexpr (std::is_same_v<T, EagerGraph> || std::is_same_v<T, PythonBackendCallable>) {
          return graph.RunEager(tensors, scalars);
        } else {
          return compiled->Run(tensors, scalars);
        }
      },
      entry.compiled);
  Py_END_ALLOW_THREADS
  if (outputs.ok() && !entry.trace.freed_graph_outputs.empty()) {
    std::vector<Tensor*> freed;
    for (int k : entry.trace.freed_graph_outputs) freed.push_back(&(*outputs)[k]);
    FreedGraphNode::Attach(std::move(freed));
  }
  if (!outputs.ok() || entry.backward == nullptr) return outputs;
  std::shared_ptr<const CompiledBackward> backward = entry.backward;
  auto run = [backward](std::vector<Tensor> grads_and_saved) { return RunBackward(*backward, std::move(grads_and_saved)); };
  DT_RETURN_IF_ERROR(CompiledFunctionNode::Attach(backward->joint, std::move(run), tensors, *outputs));
  GlobalStats().compiled_backward_runs += 1;
  return outputs;
}

}  // namespace dt::interpreter
