// graph/op_registry.h: the one table of ops.
//
// Every op dyntrace knows is one OpDef here: its schema (the Python calling convention), its kind,
// its eager implementation, and for pointwise and reduction ops the element function in
// runtime/scalar_math.h that both code generators call by name. The Python surface binds
// functions and Tensor methods from this table, the tracer records nodes against it, and the
// printer prints them by its names. Adding an op is adding an entry in one ops_*.cc file.
//
//   const OpDef* add = OpRegistry::Get().Find("add");
//   absl::StatusOr<OpResult> r = CallOp(*add, OpArgs({a, b, Scalar::Int(1)}));
#ifndef DYNTRACE_GRAPH_OP_REGISTRY_H_
#define DYNTRACE_GRAPH_OP_REGISTRY_H_

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/autocast.h"
#include "graph/derivative.h"
#include "graph/op_schema.h"
#include "runtime/errors.h"
#include "runtime/strided_loop.h"

namespace dt {

enum class OpKind : uint8_t {
  kPointwise,   // elementwise over broadcast operands; `pointwise` describes it
  kReduction,   // folds dims with a combiner; `reduction` describes it
  kView,        // returns a view sharing the input's storage
  kComposite,   // defined in terms of other ops (softmax, layer_norm, var ...)
  kCreation,    // makes a tensor from sizes and values (zeros, arange, rand ...)
  kData,        // copies or rearranges data (cat, clone, contiguous ...)
  kExtern,      // calls a library (matmul through BLAS)
};

// How a pointwise op's compute and result dtypes follow from its promoted operand dtype.
enum class DTypeRule : uint8_t {
  kPromote,     // compute and result in the promoted type
  kIntToFloat,  // like kPromote, but bool/int promote to the default float (exp, div)
  kToBool,      // compute in the promoted type, result bool (comparisons, logical ops)
};

// Property flags, tinygrad-style: sets of ops that share a behaviour, not scattered ifs.
enum OpProperty : uint32_t {
  kNoProperty = 0,
  kRejectsBool = 1u << 0,         // PyTorch refuses bool operands (neg, sub)
  kIntegerDivision = 1u << 1,     // integer operands: a zero divisor raises ZeroDivisionError
  kIntegerPower = 1u << 2,        // integer operands: a negative exponent raises
  kCommutative = 1u << 3,
  kInplaceVariant = 1u << 4,      // also bound as Tensor.<name>_ (in-place)
  kMethod = 1u << 5,              // bound as a Tensor method
  kFunction = 1u << 6,            // bound as dyntrace.<name>
  kRandom = 1u << 7,              // reads the generator: never constant-folded or CSE'd
  // A composite whose eager body, recorded on meta tensors, is valid for every shape that passes
  // the trace's guards (it bakes no size into a constant), so graph/decompose may expand it.
  kDecomposable = 1u << 8,
  // Its eager definition runs CUDA tensors on the device itself (matmul through cuBLAS), instead
  // of through host mirrors (graph/cuda_eager.h).
  kCudaNative = 1u << 9,
  // Bound as dyntrace.nn.functional.<name> (torch.nn.functional has it); ops torch also has at
  // the top level carry kFunction too, and both names are the same op-function object.
  kNNFunctional = 1u << 10,
  // Its eager body writes some of its tensor arguments (batch_norm's running statistics): a
  // graph keeps its node though nothing reads the result, and runs it where it stands.
  kWritesArguments = 1u << 11,
  // Bound as dyntrace.linalg.<name without its "linalg_" prefix> (torch.linalg has it).
  kLinalg = 1u << 12,
  // Writes its tensor arguments in place and returns nothing (the optimizer updates): autograd
  // refuses a call whose arguments require grad (it could not record it), and traces break
  // before one (a node without results would be dead code to the fuser).
  kEagerUpdate = 1u << 13,
  // Its eager body reads index operands' values and raises on one out of range (gather,
  // advanced indexing, embedding, nll_loss ...): a graph keeps its node though nothing reads the
  // result, so the error is raised as plain Python raises it.
  kChecksIndices = 1u << 14,
  // A "Tensor[]" result of one tensor goes to Python as that tensor, not a 1-tuple: the op
  // returns more only when asked (torch.unique with return_inverse / return_counts).
  kOneResultBare = 1u << 15,
  // Its element function is a transcendental (exp, log, erf, tanh, trig, pow): computing it
  // costs more than reading a saved result, so autograd's partitioner recomputes it only from
  // operands backward has anyway (autograd/partition.h).
  kCostlyElement = 1u << 16,
};

// How a result's sizes follow from its operands' (the tracer follows this to write a size Python
// reads of an intermediate in terms of the inputs' sizes, so it stays symbolic). Pointwise ops
// broadcast and reductions fold their dims by their kind; other ops say it here.
enum class ShapeRule : uint8_t {
  kUnknown,      // not followed: reading a size of the result specialises the inputs' sizes
  kSameAsFirst,  // the first operand's shape (softmax, layer_norm, contiguous ...)
  kTranspose,    // arguments 1 and 2 name the two dims swapped
  kPermute,      // argument 1 is the order of the dims
  kUnsqueeze,    // argument 1 is the new dim
  kReshape,      // argument 1 is the new shape (a -1 takes the rest of the elements)
  kMatmul,       // batch dims broadcast, then (m, k) @ (k, n)
};

struct PointwiseInfo {
  int arity = 0;
  DTypeRule dtype_rule = DTypeRule::kPromote;
  // The element function's name in runtime/scalar_math.h (namespace dt::scalar).
  std::string scalar_fn;
  // Loops indexed by compute dtype; null where the op does not support that dtype.
  std::array<InnerLoop, kNumDTypes> loops{};
};

enum class ReductionCombiner : uint8_t { kSum, kProd, kMax, kMin, kAny, kAll };

struct ReductionInfo {
  ReductionCombiner combiner;
  std::string scalar_fn;  // combiner in runtime/scalar_math.h ("reduce_sum")
  // For max/min: the same fold over runtime/scalar_math.h's order keys ("reduce_max_key"), which
  // the CPU generator uses on floating rows because it vectorises; empty where there is none.
  std::string order_key_fn;
  // mean: the folded value is divided by the number of elements folded, counted when the op runs
  // (so a compiled mean serves every size).
  bool divides_by_count = false;
};

class OpDef;
using OpResult = std::vector<Tensor>;
// Why a call's result shape depends on tensor values (nonzero, `x[mask]`), or nullopt when it
// does not; given the call's arguments (meta tensors while tracing). The tracer breaks the
// graph before such a call, with this reason.
using DataDependence = std::optional<std::string> (*)(const OpArgs& args);
using EagerFn = absl::StatusOr<OpResult> (*)(const OpDef& op, const OpArgs& args);
// How a node of the op reads in a printed graph, when not as a call: the statement, given the
// output names, the argument texts, and each argument's constant value (null where it is a
// graph value or run-time number). Null when the constants do not allow that form.
using StatementPrinter = std::optional<std::string> (*)(absl::Span<const std::string> outputs,
                                                       absl::Span<const std::string> args,
                                                       absl::Span<const ArgValue* const> constants);

class OpDef {
 public:
  Schema schema;
  OpKind kind = OpKind::kComposite;
  uint32_t properties = kNoProperty;
  EagerFn eager = nullptr;
  PointwiseInfo pointwise;
  ReductionInfo reduction;
  std::string doc;  // one line, shown by help()
  StatementPrinter print_statement = nullptr;  // null: printed as dyntrace.<name>(args)
  ShapeRule shape_rule = ShapeRule::kUnknown;
  DataDependence data_dependent_shape = nullptr;  // null: the shape never depends on values
  // How gradients flow back through a call (graph/derivatives_*.cc). Without one, a composite
  // is differentiated through the calls its eager body makes; other ops with floating results
  // refuse arguments that require grad.
  Derivative derivative;
  // What autocast regions do to its arguments, per device type (graph/autocast.h).
  AutocastPolicies autocast;

  const std::string& name() const { return schema.name; }
  bool has(OpProperty p) const { return (properties & p) != 0; }
};

class OpRegistry {
 public:
  // The registry with every op, built on first use.
  static const OpRegistry& Get();

  // REQUIRES: the schema parses and the name is new; registration bugs abort at start-up.
  OpDef& Add(absl::string_view schema, OpKind kind, uint32_t properties, EagerFn eager);

  const OpDef* Find(absl::string_view name) const;
  // REQUIRES: an op called `name` exists (aborts otherwise: a registration bug).
  OpDef& Mutable(absl::string_view name);
  const std::vector<std::unique_ptr<OpDef>>& ops() const { return ops_; }

 private:
  std::vector<std::unique_ptr<OpDef>> ops_;
  absl::flat_hash_map<std::string, OpDef*> by_name_;
};

// Runs `op` eagerly. Checks the number of arguments against the schema. While grad mode is on
// and a tensor argument requires grad, the installed grad recorder runs it instead.
[[nodiscard]] absl::StatusOr<OpResult> CallOp(const OpDef& op, const OpArgs& args);
// CallOp without the grad recorder: what the recorder itself runs.
[[nodiscard]] absl::StatusOr<OpResult> CallOpUnrecorded(const OpDef& op, const OpArgs& args);
// A composite's own body on whatever device its arguments are: the calls it makes dispatch, and
// record, one by one. CallOpUnrecorded would run it on CUDA as one fused kernel, whose result has
// no history for autograd to follow.
[[nodiscard]] absl::StatusOr<OpResult> CallOpBody(const OpDef& op, const OpArgs& args);

// Autograd's entry (autograd/record.h installs it once the module starts): runs a call whose
// arguments require grad and records how to differentiate it.
using GradRecorder = absl::StatusOr<OpResult> (*)(const OpDef& op, const OpArgs& args);
void InstallGradRecorder(GradRecorder recorder);
// Whether CallOp would hand this call to the grad recorder.
bool RecordsGrad(const OpArgs& args);
// Looks up `name` and runs it with `args`, completing omitted trailing arguments from defaults.
// The convenience entry for composites written in terms of other ops.
[[nodiscard]] absl::StatusOr<Tensor> Call(absl::string_view name, std::vector<ArgValue> args);

// Points a creation op's device argument (if it has one) at the meta device, so that running
// it makes a shape-only tensor: no memory, and random ops leave the generator alone. Tracing
// and shape planning (jit/shape_plans.h) both run creation ops this way.
void CreateOnMeta(const OpDef& op, std::vector<ArgValue>& args);

// While set, Call() records the primitive ops it runs instead of being opaque (graph/decompose).
class CallRecorder {
 public:
  virtual ~CallRecorder() = default;
  // Runs `op` on `args` (meta tensors) and remembers it; returns its results.
  virtual absl::StatusOr<OpResult> Record(const OpDef& op, const OpArgs& args) = 0;
  // Whether a call of `op` is recorded as one node; otherwise its body runs and its calls are
  // recorded. Decomposable composites are expanded by default (the code generators fuse their
  // primitives).
  virtual bool RecordsWhole(const OpDef& op) const {
    return !(op.kind == OpKind::kComposite && op.has(kDecomposable));
  }
};
// Installs `recorder` for this thread until the returned previous one is restored.
CallRecorder* SetCallRecorder(CallRecorder* recorder);

// Registration functions, one per ops_*.cc file.
void RegisterPointwiseOps(OpRegistry& registry);
void RegisterReductionOps(OpRegistry& registry);
void RegisterShapeOps(OpRegistry& registry);
void RegisterCreationOps(OpRegistry& registry);
void RegisterCompositeOps(OpRegistry& registry);
void RegisterLinalgOps(OpRegistry& registry);
void RegisterIndexingOps(OpRegistry& registry);
void RegisterSortingOps(OpRegistry& registry);
void RegisterSearchOps(OpRegistry& registry);
void RegisterDataOps(OpRegistry& registry);
void RegisterOptimOps(OpRegistry& registry);
// Sets `derivative` on the ops that have one; runs after every op is registered.
void RegisterDerivatives(OpRegistry& registry);
void RegisterPointwiseDerivatives(OpRegistry& registry);
void RegisterShapeDerivatives(OpRegistry& registry);
void RegisterReductionDerivatives(OpRegistry& registry);
void RegisterIndexingDerivatives(OpRegistry& registry);
void RegisterLossOps(OpRegistry& registry);
void RegisterNNOps(OpRegistry& registry);
void RegisterAttentionOps(OpRegistry& registry);
void RegisterNormOps(OpRegistry& registry);
void RegisterIm2colOp(OpRegistry& registry);
void RegisterConvOps(OpRegistry& registry);
void RegisterResampleOps(OpRegistry& registry);
void RegisterEinsumOp(OpRegistry& registry);
void RegisterMathOps(OpRegistry& registry);
void RegisterNormReductionOps(OpRegistry& registry);
void RegisterShapeExtraOps(OpRegistry& registry);
void RegisterRandomOps(OpRegistry& registry);

}  // namespace dt

#endif  // DYNTRACE_GRAPH_OP_REGISTRY_H_
