#include "jit/cuda_executable.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <future>
#include <new>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_format.h"
#include "jit/attention_pattern.h"
#include "jit/capture_copies.h"
#include "jit/cuda_launch.h"
#include "jit/launch_geometry.h"
#include "jit/schedule.h"
#include "runtime/copy.h"
#include "runtime/cuda_allocator.h"
#include "runtime/cuda_index_kernels.h"
#include "runtime/errors.h"
#include "runtime/log.h"
#include "runtime/random.h"

namespace dt::jit {
namespace {

// Shape sets that hold a captured graph at once, per executable; further shapes run directly.
constexpr int kMaxGraphShapes = 8;
// Shape sets remembered at all (calls counted, warm-up sizes kept).
constexpr size_t kMaxShapeStates = 64;
// Captures of one shape set after its graph stopped fitting; beyond this a library call's
// operands move on most calls, and a capture per call costs more than launching directly.
constexpr int kMaxRecaptures = 3;
// Every scalar dtype fits one slot, and every itemsize divides it.
constexpr size_t kScalarSlotBytes = 8;

// A fresh device tensor with `meta`'s sizes and (dense) strides.
absl::StatusOr<Tensor> AllocateOnDevice(const Tensor& meta, Device device) {
  int64_t extent = meta.numel() > 0 ? 1 : 0;
  for (int64_t d = 0; d < meta.ndim() && extent > 0; ++d) extent += (meta.size(d) - 1) * meta.stride(d);
  const size_t nbytes = static_cast<size_t>(std::max<int64_t>(extent, 1)) * meta.itemsize();
  absl::StatusOr<CUdeviceptr> block = CudaAllocator::Get().Allocate(device.index, nbytes);
  if (!block.ok()) return block.status();
  const CUdeviceptr ptr = *block;
  const int index = device.index;
  auto storage = Storage::Wrap(reinterpret_cast<void*>(ptr), nbytes, device,
                               [index, ptr, nbytes] { CudaAllocator::Get().Free(index, ptr, nbytes); });
  return Tensor(std::move(storage), meta.sizes(), meta.strides(), 0, meta.dtype());
}

std::vector<int64_t> InputKey(const std::vector<Tensor>& inputs) {
  std::vector<int64_t> key;
  for (const Tensor& t : inputs) {
    key.push_back(static_cast<int64_t>(t.dtype()));
    key.push_back(t.ndim());
    for (int64_t d = 0; d < t.ndim(); ++d) {
      key.push_back(t.size(d));
      key.push_back(t.stride(d));
    }
  }
  return key;
}

// Whether two plans give every value the same sizes and strides (a graph reading run-time
// numbers is replanned each call; a number may change a shape).
bool SameLayouts(const ShapePlans::Plan& a, const ShapePlans::Plan& b) {
  if (a.size() != b.size()) return false;
  for (size_t v = 0; v < a.size(); ++v) {
    if (a[v].defined() != b[v].defined()) return false;
    if (a[v].defined() && (a[v].sizes() != b[v].sizes() || a[v].strides() != b[v].strides())) return false;
  }
  return true;
}


// Whether each of `n`'s results shares storage with one of its operands (contiguous of a
// contiguous tensor returns it): the node did no device work, and a replay recomputes it on the
// host wherever its operands are, as it does views.
bool AliasesAnOperand(const Node& n, const std::vector<Tensor>& env) {
  for (ValueId out : n.outputs) {
    bool shared = false;
    for (const GraphArg& a : n.args) {
      const auto* v = std::get_if<ValueId>(&a.content);
      shared = shared || (v != nullptr && env[*v].defined() && env[out].defined() &&
                          env[*v].storage().get() == env[out].storage().get());
    }
    if (!shared) return false;
  }
  return !n.outputs.empty();
}

// Why a walk that does not launch by itself stopped: the graph no longer fits this call.
absl::Status NotReplayable(std::string why) { return absl::FailedPreconditionError(std::move(why)); }

}  // namespace

absl::StatusOr<std::shared_ptr<CudaExecutable>> CudaExecutable::Build(const Graph& graph, absl::string_view name,
                                                                      Device device, CudaGraphMode graphs) {
  const auto start = std::chrono::steady_clock::now();
  auto exe = std::make_shared<CudaExecutable>();
  DT_ASSIGN_OR_RETURN(exe->device_, CudaDevice::Get(device.index));
  exe->device_id_ = device;
  exe->name_ = std::string(name);
  exe->graph_mode_ = graphs;
  DT_ASSIGN_OR_RETURN(Program scheduled, Schedule(graph, CudaScheduleOptions(device)));
  exe->base_graph_ = scheduled.graph;
  {
    absl::MutexLock lock(&exe->mu_);
    DT_RETURN_IF_ERROR(exe->Compile(std::move(scheduled)));
  }
  exe->build_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (log::Enabled(log::Kind::kKernels)) {
    log::Write(log::Kind::kKernels,
               absl::StrFormat("%s: %d CUDA kernel(s) for %s (sm_%d), %d node(s) run eagerly, in %.1f ms; %s", name,
                               exe->num_kernels(), device.ToString(), exe->device_->sm_arch(),
                               exe->program_.steps.size() - exe->program_.kernels.size(), exe->build_seconds_ * 1e3,
                               exe->use_graphs_ ? "replayed as a CUDA graph from the second call"
                                                : absl::StrCat("no CUDA graph: ", exe->graph_refusal_)),
               exe->kernel_source_);
  }
  return exe;
}

absl::Status CudaExecutable::Compile(Program scheduled) {
  program_ = std::move(scheduled);
  DecideGraphUse(graph_mode_);
  stageable_inputs_.clear();
  if (use_graphs_) {
    const CaptureCopies copies = FindCaptureCopies(program_);
    stageable_inputs_ = copies.stageable_inputs;
    if (!copies.outputs.empty() || !staged_inputs_.empty()) {
      DT_ASSIGN_OR_RETURN(Graph copied, WithCaptureCopies(program_.graph, copies.outputs, staged_inputs_));
      DT_ASSIGN_OR_RETURN(program_, Schedule(copied, CudaScheduleOptions(device_id_)));
      DecideGraphUse(graph_mode_);
    }
  }
  written_inputs_ = InputsWrittenInPlace(program_);
  plans_ = std::make_unique<ShapePlans>(&program_.graph);
  release_after_ = ReleasePoints(program_);
  DT_RETURN_IF_ERROR(UnloadModules());
  if (!program_.kernels.empty()) {
    DT_ASSIGN_OR_RETURN(cuda_, EmitCuda(program_, NvrtcThreads()));
    kernel_source_ = cuda_.readable;
    DT_RETURN_IF_ERROR(LoadModules(name_));
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> CudaExecutable::StageMovedInputs(const std::vector<Tensor>& inputs,
                                                      const CudaGraphRecord& record) {
  std::vector<int> moved;
  for (size_t i = 0; i < inputs.size() && i < stageable_inputs_.size(); ++i) {
    const bool staged = std::find(staged_inputs_.begin(), staged_inputs_.end(), static_cast<int>(i)) !=
                        staged_inputs_.end();
    if (stageable_inputs_[i] && !staged && record.input_addresses.at(i) != inputs[i].data()) {
      moved.push_back(static_cast<int>(i));
    }
  }
  if (moved.empty()) return false;
  if (log::Enabled(log::Kind::kKernels)) {
    std::vector<std::string> sources;
    for (int i : moved) sources.push_back(base_graph_.input_sources()[i]);
    log::Write(log::Kind::kKernels,
               absl::StrFormat("%s: %s moved since the capture and a library call reads it: copied into a buffer "
                               "the CUDA graph owns from now on",
                               name_, absl::StrJoin(sources, ", ")));
  }
  staged_inputs_.insert(staged_inputs_.end(), moved.begin(), moved.end());
  // The records replay the old program's kernels: they go before its modules do.
  shapes_.clear();
  graphs_held_ = 0;
  DT_ASSIGN_OR_RETURN(Program scheduled, Schedule(base_graph_, CudaScheduleOptions(device_id_)));
  DT_RETURN_IF_ERROR(Compile(std::move(scheduled)));
  return true;
}

void CudaExecutable::DecideGraphUse(CudaGraphMode mode) {
  const Graph& g = program_.graph;
  use_graphs_ = false;
  draws_random_ = false;
  scalar_operands_ = 0;
  graph_refusal_.clear();
  escaping_.assign(g.num_values(), false);
  for (ValueId v : g.outputs()) escaping_[v] = true;
  // A returned view shares its base's buffer, which must then be fresh each call too.
  for (int i = static_cast<int>(g.nodes().size()) - 1; i >= 0; --i) {
    const Node& n = g.nodes()[i];
    if (n.op->kind != OpKind::kView) continue;
    bool returned = false;
    for (ValueId out : n.outputs) returned = returned || escaping_[out];
    if (!returned) continue;
    for (const GraphArg& a : n.args) {
      if (auto* v = std::get_if<ValueId>(&a.content)) escaping_[*v] = true;
      if (auto* vs = std::get_if<std::vector<ValueId>>(&a.content)) {
        for (ValueId v : *vs) escaping_[v] = true;
      }
    }
  }
  for (const Kernel& k : program_.kernels) {
    for (const KernelOperand& op : k.operands) scalar_operands_ += op.scalar_slot >= 0 ? 1 : 0;
  }
  if (mode == CudaGraphMode::kOff) {
    graph_refusal_ = "cuda_graphs=False";
    return;
  }
  int launches = 0;
  for (const Step& step : program_.steps) {
    if (step.kind == Step::Kind::kKernel) {
      ++launches;
      continue;
    }
    const Node& n = g.nodes()[step.index];
    if (n.inplace) {
      graph_refusal_ = absl::StrFormat("%s writes in place", n.op->name());
      return;
    }
    if (n.op->kind == OpKind::kView) continue;
    draws_random_ = draws_random_ || n.op->has(kRandom);
    if (!n.op->has(kCudaNative)) {
      graph_refusal_ = absl::StrFormat("%s runs through the host", n.op->name());
      return;
    }
    // A synchronous read-back, which a capture can't hold. Index checks are deferred to before
    // each launch of the graph (runtime/cuda_index_kernels.h); a check an op reads back some other
    // way makes the capture fail, and that shape set runs without a graph.
    if (g.MayRaiseOnValues(n) && !n.op->has(kChecksIndices)) {
      graph_refusal_ = absl::StrFormat("%s reads its operand check back from the device", n.op->name());
      return;
    }
    ++launches;
  }
  if (mode == CudaGraphMode::kAuto && launches < 2) {
    graph_refusal_ = absl::StrFormat("%d launch(es): a graph would not save any", launches);
    return;
  }
  use_graphs_ = true;
}

absl::Status CudaExecutable::LoadModules(absl::string_view name) {
  // The fused attention kernels the program's eager `_fused_attention` nodes will load compile
  // beside its own units (into the kernel cache, where the runtime finds them), not after them
  // at the first call. Best effort: a failure shows when the node runs, which then falls back.
  std::vector<std::future<void>> attention;
  for (std::string& source : FusedAttentionSources(program_.graph)) {
    attention.push_back(std::async(std::launch::async, [source = std::move(source), sm = device_->sm_arch()] {
      (void)CompileRuntimeModule(source, "attention", sm);
    }));
  }
  CacheSource source_kind;
  absl::StatusOr<std::vector<std::shared_ptr<const std::string>>> cubins =
      KernelCache::Global().LoadCubins(cuda_.sources, std::string(name), device_->sm_arch(), &source_kind);
  for (std::future<void>& f : attention) f.wait();
  DT_ASSIGN_OR_RETURN(cubins_, std::move(cubins));
  DT_RETURN_IF_ERROR(device_->Activate());
  const CudaDriver& d = device_->driver();
  for (size_t i = 0; i < cubins_.size(); ++i) {
    CUmodule module = nullptr;
    DT_RETURN_IF_ERROR(CudaCall(d.cuModuleLoadData(&module, cubins_[i]->data()), "cuModuleLoadData"));
    modules_.push_back(module);
  }
  for (const auto& [function, unit] : cuda_.unit_of_function) module_of_function_[function] = modules_[unit];
  return absl::OkStatus();
}

CudaExecutable::~CudaExecutable() {
  // Graphs first: their destruction waits for queued replays, which use the modules' code.
  shapes_.clear();
  UnloadModules().IgnoreError();
}

absl::Status CudaExecutable::UnloadModules() {
  functions_.clear();
  module_of_function_.clear();
  cubins_.clear();
  if (modules_.empty()) return absl::OkStatus();
  // Launches still queued may use the modules' code.
  DT_RETURN_IF_ERROR(device_->Synchronize());
  for (CUmodule module : modules_) device_->driver().cuModuleUnload(module);
  modules_.clear();
  return absl::OkStatus();
}

absl::StatusOr<CUfunction> CudaExecutable::Function(const std::string& name) {
  if (auto it = functions_.find(name); it != functions_.end()) return it->second;
  const auto module = module_of_function_.find(name);
  if (module == module_of_function_.end()) {
    return absl::InternalError(absl::StrCat("no generated CUDA module defines ", name));
  }
  CUfunction fn = nullptr;
  DT_RETURN_IF_ERROR(CudaCall(device_->driver().cuModuleGetFunction(&fn, module->second, name.c_str()),
                              "cuModuleGetFunction"));
  functions_[name] = fn;
  return fn;
}

absl::StatusOr<Tensor> CudaExecutable::OutputBuffer(Walk& walk, int value, const Tensor& meta) {
  if (walk.into != nullptr) {
    const std::vector<ValueId>& outputs = program_.graph.outputs();
    for (size_t i = 0; i < outputs.size() && i < walk.into->size(); ++i) {
      if (outputs[i] == value && (*walk.into)[i].defined()) return (*walk.into)[i];
    }
  }
  if (walk.mode == Mode::kDirect || Escapes(value)) return AllocateOnDevice(meta, device_id_);
  if (walk.mode == Mode::kCapture) {
    DT_ASSIGN_OR_RETURN(Tensor buffer, AllocateOnDevice(meta, device_id_));
    walk.record->intermediates[value] = buffer;
    return buffer;
  }
  auto it = walk.record->intermediates.find(value);
  if (it == walk.record->intermediates.end()) return NotReplayable(absl::StrFormat("v%d has no buffer", value));
  return it->second;
}

absl::Status CudaExecutable::RunKernel(Walk& walk, int index, const ShapePlans::Plan& plan, std::vector<Tensor>& env,
                                       const std::vector<Scalar>& scalars) {
  const Kernel& k = program_.kernels[index];
  absl::InlinedVector<Tensor, 8> tensors;
  for (const KernelOperand& op : k.operands) {
    if (op.is_output && op.write_into >= 0) {
      tensors.push_back(env[op.write_into]);  // a fused in-place write: into that tensor itself
    } else if (op.is_output) {
      DT_ASSIGN_OR_RETURN(Tensor out, OutputBuffer(walk, op.value, plan[op.value]));
      tensors.push_back(std::move(out));
    } else if (op.scalar_slot >= 0) {
      // The ABI reads a run-time number through a pointer to one device element.
      const Scalar value = scalars.at(op.scalar_slot);
      if (walk.mode == Mode::kDirect) {
        tensors.push_back(ScalarTensor(value, op.dtype, device_id_));
        continue;
      }
      // In a graph the element lives in the record's scalar buffer, refreshed before each launch.
      const size_t slot = walk.next_scalar_slot++;
      const Tensor host = ScalarTensor(value, op.dtype, Device::Cpu());
      std::memcpy(walk.record->scalar_image.data() + slot * kScalarSlotBytes, host.data(), host.itemsize());
      tensors.push_back(Tensor(walk.record->scalar_buffer.storage(), {}, {},
                               static_cast<int64_t>(slot * kScalarSlotBytes / host.itemsize()), op.dtype));
    } else {
      if (!env[op.value].defined()) {
        return absl::InternalError(absl::StrFormat("%s reads v%d before it is computed", k.name, op.value));
      }
      tensors.push_back(env[op.value]);
    }
  }
  absl::StatusOr<LaunchGeometry> geometry = PrepareLaunch(k, plan[k.domain].sizes(), tensors);
  if (!geometry.ok()) {
    if (walk.mode != Mode::kDirect) return NotReplayable(absl::StrFormat("%s runs its nodes eagerly", k.name));
    for (int node : k.nodes) DT_RETURN_IF_ERROR(program_.graph.RunNode(node, env, scalars));
    return absl::OkStatus();
  }
  int64_t rows = 1;
  for (int64_t s : geometry->outer_sizes) rows *= s;
  CudaLaunchPlan launch = PlanCudaLaunch(cuda_.kernels[index], rows, geometry->inner_size, device_->multiprocessors());
  Tensor workspace;
  if (launch.workspace_bytes > 0) {
    if (walk.mode == Mode::kReplay) {
      auto it = walk.record->workspaces.find(index);
      if (it == walk.record->workspaces.end() || it->second.numel() < launch.workspace_bytes) {
        return NotReplayable(absl::StrFormat("%s needs a larger workspace", k.name));
      }
      workspace = it->second;
    } else {
      DT_ASSIGN_OR_RETURN(workspace, AllocateOnDevice(Tensor::Empty({launch.workspace_bytes}, DType::kBool, Device::Meta()),
                                                      device_id_));
      if (walk.mode == Mode::kCapture) walk.record->workspaces[index] = workspace;
    }
  }
  absl::InlinedVector<char*, 8> data;
  absl::InlinedVector<int64_t, 8> itemsizes;
  for (const Tensor& t : tensors) {
    data.push_back(static_cast<char*>(t.data()));
    itemsizes.push_back(t.itemsize());
  }
  DT_ASSIGN_OR_RETURN(CudaKernelArgs args,
                      PackCudaArgs(*geometry, data, launch, workspace.defined() ? static_cast<char*>(workspace.data()) : nullptr,
                                   itemsizes));
  ChooseLaunchPath(cuda_.kernels[index], args, device_->multiprocessors(), &launch);
  DT_RETURN_IF_ERROR(device_->Activate());
  const CudaDriver& d = device_->driver();
  for (const CudaLaunch& l : launch.launches) {
    DT_ASSIGN_OR_RETURN(CUfunction fn, Function(l.function));
    const auto grid = static_cast<unsigned>(l.grid), block = static_cast<unsigned>(l.block),
               shared = static_cast<unsigned>(l.dynamic_shared_bytes);
    void* params[] = {&args};
    if (walk.mode == Mode::kReplay) {
      if (walk.next_launch >= walk.record->launches.size()) return NotReplayable("more launches than captured");
      CapturedLaunch& captured = walk.record->launches[walk.next_launch++];
      if (captured.function != fn || captured.grid != grid || captured.block != block ||
          captured.shared_bytes != shared) {
        return NotReplayable(absl::StrFormat("%s launches differently", l.function));
      }
      if (std::memcmp(&captured.args, &args, sizeof(args)) != 0) {
        const CudaKernelNodeParams node_params{fn, grid, 1, 1, block, 1, 1, shared, params, nullptr, nullptr, nullptr};
        DT_RETURN_IF_ERROR(CudaCall(d.cuGraphExecKernelNodeSetParams(walk.record->exec, captured.node, &node_params),
                                    "cuGraphExecKernelNodeSetParams"));
        captured.args = args;
        ++GlobalCudaGraphCounters().patches;
      }
      continue;
    }
    DT_RETURN_IF_ERROR(CudaCall(d.cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, shared, device_->stream(), params, nullptr),
                                "cuLaunchKernel"));
    if (walk.mode != Mode::kCapture) {
      ++GlobalCudaGraphCounters().kernel_launches;
    } else {
      // The capture is one chain, so the stream's frontier is the node just added.
      int capture_status = 0;
      uint64_t capture_id = 0;
      CUgraph graph = nullptr;
      const CUgraphNode* frontier = nullptr;
      size_t frontier_size = 0;
      DT_RETURN_IF_ERROR(CudaCall(d.cuStreamGetCaptureInfo(device_->stream(), &capture_status, &capture_id, &graph,
                                                           &frontier, &frontier_size),
                                  "cuStreamGetCaptureInfo"));
      if (frontier_size != 1) return NotReplayable("a captured launch did not become one node");
      walk.record->launches.push_back(CapturedLaunch{fn, grid, block, shared, frontier[0], args});
    }
  }
  for (size_t i = 0; i < k.operands.size(); ++i) {
    if (k.operands[i].is_output) env[k.operands[i].value] = std::move(tensors[i]);
  }
  // `workspace` and scalar operands of a direct launch go back to the allocator here, while the
  // launch may still be queued: the next user of those blocks is queued behind it on the same
  // stream.
  return absl::OkStatus();
}

absl::Status CudaExecutable::RunNodeStep(Walk& walk, int step, std::vector<Tensor>& env,
                                         const std::vector<Scalar>& scalars) {
  const Graph& g = program_.graph;
  const int node_index = program_.steps[step].index;
  const Node& n = g.nodes()[node_index];
  // Views are metadata: every walk recomputes them on the host.
  if (walk.mode == Mode::kDirect || n.op->kind == OpKind::kView) return g.RunNode(node_index, env, scalars);
  // A library call inside a graph (DecideGraphUse admits only those): replayable while its
  // operands stay where they were captured.
  std::vector<std::vector<int64_t>> layouts;
  // A creation op (full_like) reads only its operands' sizes and dtype, which the plan fixes.
  for (const GraphArg& a : n.op->kind == OpKind::kCreation ? std::vector<GraphArg>{} : n.args) {
    if (auto* v = std::get_if<ValueId>(&a.content)) layouts.push_back(LayoutOf(env[*v]));
    if (auto* vs = std::get_if<std::vector<ValueId>>(&a.content)) {
      for (ValueId v : *vs) layouts.push_back(LayoutOf(env[v]));
    }
  }
  if (walk.mode == Mode::kCapture) {
    for (ValueId out : n.outputs) {
      if (Escapes(out)) {
        return NotReplayable(absl::StrFormat("the result of %s is returned, and a replay would overwrite it",
                                             n.op->name()));
      }
    }
    {
      DeferredIndexChecks deferred(&walk.record->index_checks);
      DT_RETURN_IF_ERROR(g.RunNode(node_index, env, scalars));
    }
    CapturedCall call;
    call.operand_layouts = std::move(layouts);
    call.aliases_operand = AliasesAnOperand(n, env);
    for (ValueId out : n.outputs) call.outputs.push_back(env[out]);
    walk.record->calls[step] = std::move(call);
    return absl::OkStatus();
  }
  auto it = walk.record->calls.find(step);
  if (it != walk.record->calls.end() && it->second.aliases_operand) return g.RunNode(node_index, env, scalars);
  if (it == walk.record->calls.end() || it->second.operand_layouts != layouts) {
    return NotReplayable(absl::StrFormat("the operands of %s moved", n.op->name()));
  }
  for (size_t i = 0; i < n.outputs.size(); ++i) env[n.outputs[i]] = it->second.outputs[i];
  return absl::OkStatus();
}

absl::Status CudaExecutable::WalkProgram(Walk& walk, const std::shared_ptr<const ShapePlans::Plan>& plan,
                                         std::vector<Tensor>& env, const std::vector<Scalar>& scalars) {
  for (size_t i = 0; i < program_.steps.size(); ++i) {
    const Step& step = program_.steps[i];
    if (step.kind == Step::Kind::kNode) {
      DT_RETURN_IF_ERROR(RunNodeStep(walk, static_cast<int>(i), env, scalars));
    } else {
      DT_RETURN_IF_ERROR(RunKernel(walk, step.index, *plan, env, scalars));
    }
    // A captured graph keeps its buffers for replay; a direct walk frees them as eager code would
    // (the stream orders a reused block after the kernels that used it).
    if (walk.mode == Mode::kDirect) {
      for (ValueId v : release_after_[i]) env[v] = Tensor();
    }
  }
  return absl::OkStatus();
}

absl::Status CudaExecutable::PrepareIndexChecks(const std::vector<Tensor>& env, CudaGraphRecord& record) const {
  GraphIndexChecks& checks = record.index_checks;
  const std::vector<ValueId>& inputs = program_.graph.inputs();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const bool written = i < written_inputs_.size() && written_inputs_[i];
    if (!written && env[inputs[i]].defined()) checks.caller_storage.insert(env[inputs[i]].storage().get());
  }
  // Slots for checks the graph runs itself (all bits set: clear). Allocated here, as a capture
  // cannot allocate; 1 KiB per captured graph.
  DT_ASSIGN_OR_RETURN(checks.slots, AllocateOnDevice(Tensor::Empty({GraphIndexChecks::kMaxInGraph, 2}, DType::kInt64,
                                                                   Device::Meta()),
                                                     device_id_));
  return CudaCall(device_->driver().cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(checks.slots.data()), 0xff,
                                                    static_cast<size_t>(checks.slots.numel()) * sizeof(int64_t), device_->stream()),
                  "cuMemsetD8Async");
}

absl::StatusOr<std::unique_ptr<CudaGraphRecord>> CudaExecutable::Capture(
    ShapeState& state, const std::shared_ptr<const ShapePlans::Plan>& plan, std::vector<Tensor>& env,
    const std::vector<Scalar>& scalars) {
  auto record = std::make_unique<CudaGraphRecord>(device_);
  record->plan = plan;
  for (ValueId v : program_.graph.inputs()) record->input_addresses.push_back(env[v].data());
  if (scalar_operands_ > 0) {
    const auto bytes = static_cast<int64_t>(scalar_operands_ * kScalarSlotBytes);
    DT_ASSIGN_OR_RETURN(record->scalar_buffer,
                        AllocateOnDevice(Tensor::Empty({bytes}, DType::kBool, Device::Meta()), device_id_));
    record->scalar_image.assign(bytes, 0);
  }
  if (draws_random_) {
    DT_ASSIGN_OR_RETURN(record->random_state,
                        AllocateOnDevice(Tensor::Empty({2}, DType::kInt64, Device::Meta()), device_id_));
  }
  DT_RETURN_IF_ERROR(device_->Activate());
  const CudaDriver& d = device_->driver();
  DT_RETURN_IF_ERROR(PrepareIndexChecks(env, *record));
  // Everything the capture allocates must come from the cache: the warm-up call's sizes,
  // reserved after the record's own buffers, which would otherwise take reserved blocks.
  DT_RETURN_IF_ERROR(CudaAllocator::Get().Reserve(device_id_.index, state.warmup_allocations));
  DT_RETURN_IF_ERROR(CudaCall(d.cuStreamBeginCapture(device_->stream(), kCuCaptureModeThreadLocal),
                              "cuStreamBeginCapture"));
  absl::Status walked;
  {
    CudaCacheOnlyScope cache_only;
    CudaFreeHold hold;
    Walk walk{Mode::kCapture, record.get()};
    std::optional<CapturedRandomDraws> draws;
    if (draws_random_) draws.emplace(record->random_state);
    // Whatever happens, the capture must end before anything else uses the stream.
    try {
      walked = WalkProgram(walk, plan, env, scalars);
      if (walked.ok() && draws.has_value()) {
        walked = draws->Advance();
        record->random_counters = draws->counters();
      }
    } catch (const std::bad_alloc&) {
      walked = absl::ResourceExhaustedError("an allocation inside the capture failed");
    }
    record->held_blocks = hold.Take();
  }
  const CUresult ended = d.cuStreamEndCapture(device_->stream(), &record->graph);
  DT_RETURN_IF_ERROR(walked);
  DT_RETURN_IF_ERROR(CudaCall(ended, "cuStreamEndCapture"));
  DT_RETURN_IF_ERROR(CudaCall(d.cuGraphInstantiateWithFlags(&record->exec, record->graph, 0), "cuGraphInstantiate"));
  return record;
}

absl::StatusOr<std::vector<Tensor>> CudaExecutable::Run(const std::vector<Tensor>& inputs,
                                                        const std::vector<Scalar>& scalars,
                                                        const std::vector<Tensor>& into) {
  absl::MutexLock lock(&mu_);
  // Device tensors created inside ops (Storage::Allocate) report exhaustion by throwing.
  try {
    return RunLocked(inputs, scalars, into);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(absl::StrFormat("CUDA out of memory on %s while running a compiled graph",
                                                        device_id_.ToString()));
  }
}

absl::StatusOr<std::vector<Tensor>> CudaExecutable::RunLocked(const std::vector<Tensor>& inputs,
                                                              const std::vector<Scalar>& scalars,
                                                              const std::vector<Tensor>& into) {
  const Graph& g = program_.graph;
  if (inputs.size() != g.inputs().size()) {
    return Error(ErrorKind::kRuntime, absl::StrFormat("compiled graph expects %d inputs, got %d",
                                                      g.inputs().size(), inputs.size()));
  }
  absl::StatusOr<std::shared_ptr<const ShapePlans::Plan>> planned = plans_->For(inputs, scalars);
  // As on the cpu backend: inputs an op refuses are found before anything is launched, and the
  // ops run eagerly in program order so the earlier writes happen before the error is raised.
  if (!planned.ok()) return g.RunEager(inputs, scalars);
  if (!written_inputs_.empty() && WrittenInputOverlaps(inputs, written_inputs_)) return g.RunEager(inputs, scalars);
  const std::shared_ptr<const ShapePlans::Plan>& plan = *planned;
  std::vector<Tensor> env;
  auto fresh_env = [&] {
    env.assign(g.num_values(), Tensor());
    for (size_t i = 0; i < inputs.size(); ++i) env[g.inputs()[i]] = inputs[i];
  };
  auto outputs = [&] {
    std::vector<Tensor> out;
    out.reserve(g.outputs().size());
    for (ValueId v : g.outputs()) out.push_back(env[v]);
    return out;
  };
  auto run_direct = [&]() -> absl::StatusOr<std::vector<Tensor>> {
    fresh_env();
    Walk walk;
    if (!into.empty()) walk.into = &into;
    DT_RETURN_IF_ERROR(WalkProgram(walk, plan, env, scalars));
    return outputs();
  };
  if (!use_graphs_ || !into.empty()) return run_direct();

  const std::vector<int64_t> key = InputKey(inputs);
  auto found = shapes_.find(key);
  if (found == shapes_.end()) {
    if (shapes_.size() >= kMaxShapeStates) {
      ++GlobalCudaGraphCounters().shape_limit;
      return run_direct();
    }
    found = shapes_.emplace(key, ShapeState()).first;
  }
  ShapeState& state = found->second;
  ++state.calls;
  if (state.refused) return run_direct();
  const CudaDriver& d = device_->driver();
  auto launch_graph = [&](CudaGraphRecord& record) -> absl::Status {
    DT_RETURN_IF_ERROR(device_->Activate());
    for (const auto& check : record.index_checks.before_launch) DT_RETURN_IF_ERROR(check());
    if (!record.scalar_image.empty() && record.scalar_image != record.uploaded_image) {
      DT_RETURN_IF_ERROR(CudaCall(d.cuMemcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(record.scalar_buffer.data()),
                                                      record.scalar_image.data(), record.scalar_image.size(),
                                                      device_->stream()),
                                  "cuMemcpyHtoDAsync"));
      record.uploaded_image = record.scalar_image;
    }
    if (record.random_counters > 0) {
      // This launch's numbers: the counters eager code would have reserved here. The graph
      // advances its state on the device, so only draws made between launches need an upload.
      const PhiloxDraw draw = ReservePhiloxCounters(record.random_counters);
      if (draw.seed != record.random_next[0] || draw.first != record.random_next[1]) {
        record.random_next = {draw.seed, draw.first};
        DT_RETURN_IF_ERROR(CudaCall(d.cuMemcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(record.random_state.data()),
                                                        record.random_next.data(), sizeof(record.random_next),
                                                        device_->stream()),
                                    "cuMemcpyHtoDAsync"));
      }
      record.random_next[1] += record.random_counters;
    }
    DT_RETURN_IF_ERROR(CudaCall(d.cuGraphLaunch(record.exec, device_->stream()), "cuGraphLaunch"));
    ++GlobalCudaGraphCounters().replays;
    return ReadInGraphIndexChecks(record.index_checks);
  };

  if (state.record != nullptr) {
    CudaGraphRecord& record = *state.record;
    if (record.plan == plan || SameLayouts(*record.plan, *plan)) {
      fresh_env();
      Walk walk{Mode::kReplay, &record};
      absl::Status walked = WalkProgram(walk, plan, env, scalars);
      if (walked.ok() && walk.next_launch == record.launches.size()) {
        DT_RETURN_IF_ERROR(launch_graph(record));
        return outputs();
      }
      if (!walked.ok() && walked.code() != absl::StatusCode::kFailedPrecondition) return walked;
      // A batch the caller allocates anew each call: copied into the graph from now on.
      DT_ASSIGN_OR_RETURN(const bool restaged, StageMovedInputs(inputs, record));
      if (restaged) return RunLocked(inputs, scalars, into);
      if (log::Enabled(log::Kind::kKernels)) {
        log::Write(log::Kind::kKernels, absl::StrCat(name_, ": CUDA graph captured again: ",
                                                     walked.ok() ? "the layouts changed" : walked.message()));
      }
    }
    // The graph no longer fits (a library call's operands moved, or the layouts changed):
    // capture again below, unless that keeps happening.
    state.record.reset();
    --graphs_held_;
    if (++state.recaptures > kMaxRecaptures) {
      state.refused = true;
      ++GlobalCudaGraphCounters().refusals;
      if (log::Enabled(log::Kind::kKernels)) {
        log::Write(log::Kind::kKernels, absl::StrFormat("CUDA graph dropped after %d recaptures: a library call's "
                                                        "operands move between calls",
                                                        kMaxRecaptures));
      }
      return run_direct();
    }
  }
  if (state.calls == 1) {
    // Warm-up: runs directly, and remembers what it allocated for the capture to reserve.
    CudaAllocationRecorder recorder;
    absl::StatusOr<std::vector<Tensor>> result = run_direct();
    state.warmup_allocations = recorder.sizes();
    return result;
  }
  if (graphs_held_ >= kMaxGraphShapes) {
    ++GlobalCudaGraphCounters().shape_limit;
    return run_direct();
  }
  fresh_env();
  absl::StatusOr<std::unique_ptr<CudaGraphRecord>> captured = Capture(state, plan, env, scalars);
  if (!captured.ok()) {
    state.refused = true;
    ++GlobalCudaGraphCounters().refusals;
    if (log::Enabled(log::Kind::kKernels)) {
      log::Write(log::Kind::kKernels, absl::StrCat("CUDA graph capture failed; this shape set runs without one: ",
                                                   captured.status().message()));
    }
    return run_direct();
  }
  state.record = std::move(*captured);
  ++graphs_held_;
  ++GlobalCudaGraphCounters().captures;
  DT_RETURN_IF_ERROR(launch_graph(*state.record));
  return outputs();
}

}  // namespace dt::jit
