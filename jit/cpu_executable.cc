#include "jit/cpu_executable.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <variant>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "jit/launch_geometry.h"
#include "jit/nvrtc_check.h"
#include "jit/schedule.h"
#include "jit/shape_plans.h"
#include "runtime/copy.h"
#include "runtime/errors.h"
#include "runtime/log.h"
#include "runtime/parallel.h"
#include "runtime/storage.h"

namespace dt::jit {
namespace {

// "view x12, matmul x4": the ops of the nodes a program runs eagerly, most frequent first, so
// the kernels log says what stayed outside the generated kernels.
std::string EagerNodeCounts(const Program& program) {
  absl::flat_hash_map<std::string, int> counts;
  for (const Step& step : program.steps) {
    if (step.kind == Step::Kind::kNode) ++counts[program.graph.nodes()[step.index].op->name()];
  }
  std::vector<std::pair<std::string, int>> sorted(counts.begin(), counts.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  std::vector<std::string> parts;
  for (const auto& [op, n] : sorted) parts.push_back(absl::StrCat(op, " x", n));
  return parts.empty() ? "none" : absl::StrJoin(parts, ", ");
}

// A fresh CPU tensor with `meta`'s sizes and (dense) strides.
Tensor AllocateLike(const Tensor& meta) {
  int64_t extent = meta.numel() > 0 ? 1 : 0;
  for (int64_t d = 0; d < meta.ndim() && extent > 0; ++d) extent += (meta.size(d) - 1) * meta.stride(d);
  auto storage = Storage::Allocate(static_cast<size_t>(extent) * meta.itemsize(), Device::Cpu());
  return Tensor(std::move(storage), meta.sizes(), meta.strides(), 0, meta.dtype());
}

// The layout of a 0-d operand, shared: a run-time number's kernel operand is read from a value
// on RunKernel's stack, so no tensor is allocated for it on each call.
const Tensor& ScalarLayout(DType dtype) {
  static const auto* layouts = [] {
    auto* all = new std::array<Tensor, kNumDTypes>();
    for (DType d : kAllDTypes) (*all)[static_cast<int>(d)] = Tensor::Empty({}, d, Device::Meta());
    return all;
  }();
  return (*layouts)[static_cast<int>(dtype)];
}

// `value` converted to `dtype` as the kernel reads it, in an 8-byte slot.
uint64_t ScalarBits(const Scalar& value, DType dtype) {
  uint64_t bits = 0;
  DT_DISPATCH_ALL(dtype, [&] {
    scalar_t converted;
    if constexpr (std::is_same_v<scalar_t, bool>) {
      converted = value.ToBool();
    } else {
      converted = value.To<scalar_t>();
    }
    static_assert(sizeof(scalar_t) <= sizeof(bits));
    std::memcpy(&bits, &converted, sizeof(scalar_t));
  });
  return bits;
}

const char* SourceName(CacheSource s) {
  switch (s) {
    case CacheSource::kMemory: return "memory cache";
    case CacheSource::kDisk: return "disk cache";
    case CacheSource::kCompiled: return "compiled";
  }
  return "?";
}

}  // namespace

absl::StatusOr<std::shared_ptr<CpuExecutable>> CpuExecutable::Build(const Graph& graph,
                                                                  absl::string_view name) {
  const auto start = std::chrono::steady_clock::now();
  auto exe = std::make_shared<CpuExecutable>();
  ScheduleOptions options;
  options.fuse_in_place_writes = true;
  options.fuse_outer_reductions = false;
  options.fuse_column_reductions = true;
  options.split_strided_reductions = true;
  DT_ASSIGN_OR_RETURN(exe->program_, Schedule(graph, options));
  exe->written_inputs_ = InputsWrittenInPlace(exe->program_);
  exe->plans_ = std::make_unique<ShapePlans>(&exe->program_.graph);
  exe->release_after_ = ReleasePoints(exe->program_);
  if (!exe->program_.kernels.empty()) {
    CppProgram cpp = EmitCpp(exe->program_);
    exe->kernel_source_ = std::move(cpp.readable);
    DT_ASSIGN_OR_RETURN(exe->libraries_, KernelCache::Global().LoadLibraries(cpp.units, &exe->cache_source_));
    DT_RETURN_IF_ERROR(CheckCudaCompiles(exe->program_, name));
    for (size_t k = 0; k < cpp.entry_of_kernel.size(); ++k) {
      const std::string& function = cpp.entry_of_kernel[k];
      const LoadedLibrary& library = *exe->libraries_[cpp.unit_of_kernel[k]];
      KernelEntry entry;
      entry.fixed = reinterpret_cast<KernelFn>(library.Symbol(function + "_fixed"));
      entry.any = reinterpret_cast<KernelFn>(library.Symbol(function + "_any"));
      if (entry.fixed == nullptr || entry.any == nullptr) {
        return absl::InternalError(absl::StrCat("kernel library ", library.path, " lacks ", function));
      }
      exe->entries_.push_back(entry);
    }
  }
  exe->build_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (log::Enabled(log::Kind::kKernels)) {
    log::Write(log::Kind::kKernels,
               absl::StrFormat("%s: %d kernel(s), %d node(s) run eagerly (%s), %s in %.1f ms", name,
                               exe->num_kernels(),
                               exe->program_.steps.size() - exe->program_.kernels.size(),
                               EagerNodeCounts(exe->program_),
                               exe->program_.kernels.empty() ? "nothing to compile" : SourceName(exe->cache_source_),
                               exe->build_seconds_ * 1e3),
               exe->kernel_source_);
  }
  return exe;
}

absl::Status CpuExecutable::RunKernel(int index, const ShapePlans::Plan& plan, std::vector<Tensor>& env,
                                      const std::vector<Scalar>& scalars) const {
  const Kernel& k = program_.kernels[index];
  const size_t m = k.operands.size();
  absl::InlinedVector<Tensor, 8> tensors;
  absl::InlinedVector<uint64_t, 8> scalar_values(m, 0);
  for (size_t i = 0; i < m; ++i) {
    const KernelOperand& op = k.operands[i];
    if (op.is_output && op.write_into >= 0) {
      tensors.push_back(env[op.write_into]);  // a fused in-place write: into that tensor itself
    } else if (op.is_output) {
      tensors.push_back(AllocateLike(plan[op.value]));
    } else if (op.scalar_slot >= 0) {
      scalar_values[i] = ScalarBits(scalars.at(op.scalar_slot), op.dtype);
      tensors.push_back(ScalarLayout(op.dtype));
    } else {
      if (!env[op.value].defined()) {
        return absl::InternalError(absl::StrFormat("%s reads v%d before it is computed", k.name, op.value));
      }
      tensors.push_back(env[op.value]);
    }
  }
  absl::StatusOr<LaunchGeometry> geometry = PrepareLaunch(k, plan[k.domain].sizes(), tensors);
  if (!geometry.ok()) {
    // A layout the kernel can't walk (reduced dims that don't merge): the nodes run eagerly.
    for (int node : k.nodes) DT_RETURN_IF_ERROR(program_.graph.RunNode(node, env, scalars));
    return absl::OkStatus();
  }
  bool fixed = true;
  for (size_t i = 0; i < m && fixed; ++i) {
    const int predicted = k.operands[i].predicted_inner_stride;
    fixed = predicted < 0 || geometry->inner_stride(i) == predicted;
  }
  absl::InlinedVector<char*, 8> data;
  for (size_t i = 0; i < m; ++i) {
    data.push_back(k.operands[i].scalar_slot >= 0 && !k.operands[i].is_output
                       ? reinterpret_cast<char*>(&scalar_values[i])
                       : static_cast<char*>(tensors[i].data()));
  }
  const KernelFn fn = fixed ? entries_[index].fixed : entries_[index].any;
  fn(geometry->outer_rank(), geometry->outer_sizes.data(), geometry->inner_size, data.data(),
     geometry->strides.data());
  for (size_t i = 0; i < m; ++i) {
    if (k.operands[i].is_output) env[k.operands[i].value] = std::move(tensors[i]);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Tensor>> CpuExecutable::RunWith(const std::vector<Tensor>& inputs,
                                                           std::vector<Tensor>* owned,
                                                           const std::vector<Scalar>& scalars) {
  const Graph& g = program_.graph;
  if (inputs.size() != g.inputs().size()) {
    return Error(ErrorKind::kRuntime, absl::StrFormat("compiled graph expects %d inputs, got %d",
                                                      g.inputs().size(), inputs.size()));
  }
  absl::StatusOr<std::shared_ptr<const ShapePlans::Plan>> planned = plans_->For(inputs, scalars);
  // An op that refuses these inputs (an in-place write into an expanded view, mismatched shapes)
  // is found while planning, before any kernel has written. Eager order then gives the program's
  // exact outcome: the writes of the ops before it happen, and it raises its own error.
  if (!planned.ok()) return g.RunEager(inputs, scalars);
  const std::shared_ptr<const ShapePlans::Plan>& plan = *planned;
  // Fused in-place writes move up to their kernel's start, which the schedule allows only for
  // storage no node in between touches; an input sharing a written input's storage would hide
  // such a touch.
  if (!written_inputs_.empty() && WrittenInputOverlaps(inputs, written_inputs_)) return g.RunEager(inputs, scalars);
  std::vector<Tensor> env(g.num_values());
  for (size_t i = 0; i < inputs.size(); ++i) {
    env[g.inputs()[i]] = owned != nullptr ? std::move((*owned)[i]) : inputs[i];
  }
  const MaxThreadsScope threads;
  for (size_t s = 0; s < program_.steps.size(); ++s) {
    const Step& step = program_.steps[s];
    if (step.kind == Step::Kind::kNode) {
      DT_RETURN_IF_ERROR(g.RunNode(step.index, env, scalars));
    } else {
      DT_RETURN_IF_ERROR(RunKernel(step.index, *plan, env, scalars));
    }
    for (ValueId v : release_after_[s]) env[v] = Tensor();
  }
  std::vector<Tensor> outputs;
  outputs.reserve(g.outputs().size());
  for (ValueId v : g.outputs()) outputs.push_back(env[v]);
  return outputs;
}

}  // namespace dt::jit
