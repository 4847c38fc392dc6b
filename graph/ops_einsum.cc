// einsum: any valid equation (explicit or implicit output, `...`, repeated subscripts within an
// operand, size-1 broadcasting), lowered to registry ops: a repeated subscript takes a diagonal
// (an eye mask, then a sum), subscripts no later step needs are summed first, and each pair of
// operands contracts as one batched matmul ([batch, M, K] @ [batch, K, N]) between permutes
// and reshapes. Sizes are baked into those reshapes, so einsum stays whole in graphs.
#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "graph/nn_common.h"
#include "graph/op_registry.h"
#include "runtime/errors.h"

namespace dt {
namespace {

// A subscript: a letter's code, or 1000 + position from the end for a dim the ellipsis covers.
using Label = int;
constexpr Label kEllipsisBase = 1000;

struct Operand {
  Tensor t;
  std::vector<Label> labels;  // one per dim of t
};

absl::Status EinsumError(absl::string_view why) {
  return Error(ErrorKind::kValue, absl::StrCat("einsum(): ", why));
}

// The labels of one term for a tensor of `ndim` dims (ndim < 0: an output term, where the
// ellipsis stands for `ellipsis_dims` dims).
absl::StatusOr<std::vector<Label>> ParseTerm(absl::string_view term, int64_t ndim, int64_t ellipsis_dims) {
  std::vector<Label> labels;
  bool ellipsis = false;
  int64_t letters = 0;
  for (size_t i = 0; i < term.size(); ++i) letters += absl::ascii_isalpha(term[i]) ? 1 : 0;
  for (size_t i = 0; i < term.size(); ++i) {
    const char c = term[i];
    if (c == '.') {
      if (ellipsis || term.substr(i, 3) != "...") return EinsumError("found '.' that is not part of any ellipsis");
      ellipsis = true;
      const int64_t covered = ndim >= 0 ? ndim - letters : ellipsis_dims;
      if (covered < 0) break;
      for (int64_t k = covered; k > 0; --k) labels.push_back(kEllipsisBase + static_cast<int>(k));
      i += 2;
    } else if (absl::ascii_isalpha(c)) {
      labels.push_back(c);
    } else {
      return EinsumError(absl::StrFormat("invalid subscript given at index %d in the equation", i));
    }
  }
  if (ndim >= 0 && static_cast<int64_t>(labels.size()) != ndim) {
    return EinsumError(absl::StrFormat("the number of subscripts in the equation ('%s', %d) does not match the "
                                       "number of dimensions (%d)%s",
                                       term, letters, ndim, ellipsis ? "" : " and no ellipsis was given"));
  }
  return labels;
}

// Sizes per label, checking that equal labels have equal (or 1) sizes.
absl::StatusOr<std::map<Label, int64_t>> LabelSizes(const std::vector<Operand>& ops) {
  std::map<Label, int64_t> sizes;
  for (size_t o = 0; o < ops.size(); ++o) {
    for (size_t d = 0; d < ops[o].labels.size(); ++d) {
      const int64_t n = ops[o].t.size(static_cast<int64_t>(d));
      auto [it, fresh] = sizes.emplace(ops[o].labels[d], n);
      if (fresh || it->second == n || n == 1) continue;
      if (it->second != 1) {
        return Error(ErrorKind::kRuntime,
                     absl::StrFormat("einsum(): operands do not broadcast: subscript of operand %d at dim %d has "
                                     "size %d, elsewhere %d",
                                     o, d, n, it->second));
      }
      it->second = n;
    }
  }
  return sizes;
}

// The diagonal of every subscript an operand repeats ('ii->i').
absl::Status TakeDiagonals(Operand& op) {
  for (size_t p = 0; p < op.labels.size(); ++p) {
    for (size_t q = op.labels.size() - 1; q > p; --q) {
      if (op.labels[q] != op.labels[p]) continue;
      const int64_t n = op.t.size(static_cast<int64_t>(p));
      if (op.t.size(static_cast<int64_t>(q)) != n) {
        return Error(ErrorKind::kRuntime, absl::StrFormat("einsum(): subscript %c is repeated for an operand but "
                                                          "the sizes don't match, %d != %d",
                                                          static_cast<char>(op.labels[p]), n,
                                                          op.t.size(static_cast<int64_t>(q))));
      }
      Dims shape(op.labels.size(), 1);
      shape[p] = shape[q] = n;
      DT_ASSIGN_OR_RETURN(Tensor eye, Call("eye", {Scalar::Int(n), None{}, DType::kBool, op.t.device()}));
      DT_ASSIGN_OR_RETURN(eye, Call("reshape", {eye, shape}));
      DT_ASSIGN_OR_RETURN(Tensor masked, Call("where", {eye, op.t, Scalar::Int(0)}));
      DT_ASSIGN_OR_RETURN(op.t, Call("sum", {masked, Dims{static_cast<int64_t>(q)}, Scalar::Bool(false), op.t.dtype()}));
      op.labels.erase(op.labels.begin() + static_cast<int64_t>(q));
    }
  }
  return absl::OkStatus();
}

// Sums the dims whose labels are not in `keep`.
absl::Status SumOut(Operand& op, const std::set<Label>& keep) {
  Dims dims;
  std::vector<Label> kept;
  for (size_t d = 0; d < op.labels.size(); ++d) {
    if (keep.count(op.labels[d])) kept.push_back(op.labels[d]);
    else dims.push_back(static_cast<int64_t>(d));
  }
  if (dims.empty()) return absl::OkStatus();
  DT_ASSIGN_OR_RETURN(op.t, Call("sum", {op.t, dims, Scalar::Bool(false), op.t.dtype()}));
  op.labels = kept;
  return absl::OkStatus();
}

// `op` permuted to `order` and expanded to the label sizes, as [groups...] each flattened.
absl::StatusOr<Tensor> Arrange(const Operand& op, const std::vector<std::vector<Label>>& groups,
                               const std::map<Label, int64_t>& sizes) {
  Dims perm, full, flat;
  for (const auto& group : groups) {
    int64_t product = 1;
    for (Label l : group) {
      perm.push_back(std::find(op.labels.begin(), op.labels.end(), l) - op.labels.begin());
      full.push_back(sizes.at(l));
      product *= sizes.at(l);
    }
    flat.push_back(product);
  }
  DT_ASSIGN_OR_RETURN(Tensor t, Call("permute", {op.t, perm}));
  DT_ASSIGN_OR_RETURN(t, Call("expand", {t, full}));
  return Call("reshape", {t, flat});
}

// a and b contracted over their shared labels not in `keep`, as one batched matmul.
absl::StatusOr<Operand> Contract(Operand a, Operand b, const std::set<Label>& keep,
                                 const std::map<Label, int64_t>& sizes) {
  std::set<Label> keep_a = keep, keep_b = keep;
  keep_a.insert(b.labels.begin(), b.labels.end());
  keep_b.insert(a.labels.begin(), a.labels.end());
  DT_RETURN_IF_ERROR(SumOut(a, keep_a));
  DT_RETURN_IF_ERROR(SumOut(b, keep_b));
  std::vector<Label> batch, contracted, a_only, b_only;
  for (Label l : a.labels) {
    const bool shared = std::count(b.labels.begin(), b.labels.end(), l) > 0;
    (shared ? (keep.count(l) ? batch : contracted) : a_only).push_back(l);
  }
  for (Label l : b.labels) {
    if (!std::count(a.labels.begin(), a.labels.end(), l)) b_only.push_back(l);
  }
  DT_ASSIGN_OR_RETURN(Tensor ma, Arrange(a, {batch, a_only, contracted}, sizes));
  DT_ASSIGN_OR_RETURN(Tensor mb, Arrange(b, {batch, contracted, b_only}, sizes));
  DT_ASSIGN_OR_RETURN(Tensor product, Call("matmul", {ma, mb}));
  Operand out;
  Dims shape;
  for (const auto* group : {&batch, &a_only, &b_only}) {
    for (Label l : *group) {
      out.labels.push_back(l);
      shape.push_back(sizes.at(l));
    }
  }
  DT_ASSIGN_OR_RETURN(out.t, Call("reshape", {product, shape}));
  return out;
}

// The output labels: given after "->", or (implicitly) the ellipsis then the letters used once,
// in alphabetical order.
absl::StatusOr<std::vector<Label>> OutputLabels(const std::vector<absl::string_view>& sides,
                                                const std::vector<Operand>& ops, int64_t ellipsis_dims) {
  std::map<Label, int> uses;
  for (const Operand& op : ops) {
    for (Label l : op.labels) ++uses[l];
  }
  if (sides.size() == 2) {
    DT_ASSIGN_OR_RETURN(std::vector<Label> out, ParseTerm(sides[1], -1, ellipsis_dims));
    std::set<Label> seen;
    for (Label l : out) {
      if (!seen.insert(l).second) return EinsumError("output subscript appears more than once in the output");
      if (!uses.count(l)) return EinsumError("output subscript does not appear in the equation for any input operand");
    }
    return out;
  }
  std::vector<Label> out;
  for (int64_t k = ellipsis_dims; k > 0; --k) out.push_back(kEllipsisBase + static_cast<int>(k));
  for (const auto& [label, count] : uses) {
    if (label < kEllipsisBase && count == 1) out.push_back(label);
  }
  return out;
}

absl::StatusOr<OpResult> EinsumEager(const OpDef&, const OpArgs& args) {
  std::string equation = args.string(0);
  equation.erase(std::remove(equation.begin(), equation.end(), ' '), equation.end());
  std::vector<absl::string_view> sides = absl::StrSplit(equation, "->");
  if (sides.size() > 2) return EinsumError("the equation has more than one '->'");
  std::vector<absl::string_view> terms = absl::StrSplit(sides[0], ',');
  const std::vector<Tensor>& tensors = args.tensors(1);
  if (terms.size() != tensors.size()) {
    return EinsumError(absl::StrFormat("the equation names %d operands but %d were given", terms.size(),
                                       tensors.size()));
  }
  std::vector<Operand> ops;
  int64_t ellipsis_dims = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    DT_ASSIGN_OR_RETURN(std::vector<Label> labels, ParseTerm(terms[i], tensors[i].ndim(), 0));
    for (Label l : labels) ellipsis_dims = std::max<int64_t>(ellipsis_dims, l > kEllipsisBase ? l - kEllipsisBase : 0);
    ops.push_back(Operand{tensors[i], labels});
  }
  DT_ASSIGN_OR_RETURN(std::vector<Label> output, OutputLabels(sides, ops, ellipsis_dims));
  for (Operand& op : ops) DT_RETURN_IF_ERROR(TakeDiagonals(op));
  DT_ASSIGN_OR_RETURN(auto sizes, LabelSizes(ops));
  Operand acc = ops[0];
  for (size_t i = 1; i < ops.size(); ++i) {
    std::set<Label> keep(output.begin(), output.end());
    for (size_t j = i + 1; j < ops.size(); ++j) keep.insert(ops[j].labels.begin(), ops[j].labels.end());
    DT_ASSIGN_OR_RETURN(acc, Contract(acc, ops[i], keep, sizes));
  }
  DT_RETURN_IF_ERROR(SumOut(acc, std::set<Label>(output.begin(), output.end())));
  Dims perm, full;
  for (Label l : output) {
    perm.push_back(std::find(acc.labels.begin(), acc.labels.end(), l) - acc.labels.begin());
    full.push_back(sizes.at(l));
  }
  DT_ASSIGN_OR_RETURN(Tensor y, Call("permute", {acc.t, perm}));
  DT_ASSIGN_OR_RETURN(y, Call("expand", {y, full}));
  DT_ASSIGN_OR_RETURN(y, Call("contiguous", {y}));
  return OneResult(y);
}

}  // namespace

void RegisterEinsumOp(OpRegistry& registry) {
  registry.Add("einsum(str equation, Tensor[] operands) -> Tensor", OpKind::kComposite, kFunction, &EinsumEager);
}

}  // namespace dt
