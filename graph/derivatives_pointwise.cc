// Derivatives of the pointwise ops. Each formula returns gradients at the broadcast shape; the
// engine sums them to each argument's shape and casts them to its dtype.
#include <cmath>
#include <numbers>

#include "graph/grad_formulas.h"
#include "runtime/errors.h"

namespace dt {
namespace {

using grad::FirstGrad;
using grad::Num;
using grad::Op;

// d/dx f(x) as a tensor, times the incoming gradient.
template <absl::StatusOr<Tensor> (*Slope)(const GradContext&)>
absl::StatusOr<ArgGrads> Unary(const GradContext& c) {
  DT_ASSIGN_OR_RETURN(Tensor slope, Slope(c));
  return FirstGrad(c, Op("mul", {c.grad(), slope}));
}

absl::StatusOr<Tensor> SignSlope(const GradContext& c) { return Op("sign", {c.input(0)}); }
absl::StatusOr<Tensor> ExpSlope(const GradContext& c) { return c.output(); }
absl::StatusOr<Tensor> Exp2Slope(const GradContext& c) { return Op("mul", {c.output(), Num(std::numbers::ln2)}); }
absl::StatusOr<Tensor> LogSlope(const GradContext& c) { return Op("reciprocal", {c.input(0)}); }
absl::StatusOr<Tensor> Log2Slope(const GradContext& c) {
  DT_ASSIGN_OR_RETURN(Tensor x, Op("mul", {c.input(0), Num(std::numbers::ln2)}));
  return Op("reciprocal", {x});
}
absl::StatusOr<Tensor> Log1pSlope(const GradContext& c) {
  DT_ASSIGN_OR_RETURN(Tensor x, Op("add", {c.input(0), Num(1.0)}));
  return Op("reciprocal", {x});
}
absl::StatusOr<Tensor> Expm1Slope(const GradContext& c) { return Op("add", {c.output(), Num(1.0)}); }
absl::StatusOr<Tensor> SqrtSlope(const GradContext& c) {
  DT_ASSIGN_OR_RETURN(Tensor twice, Op("mul", {c.output(), Num(2.0)}));
  return Op("reciprocal", {twice});
}
absl::StatusOr<Tensor> RsqrtSlope(const GradContext& c) {  // -y^3 / 2
  DT_ASSIGN_OR_RETURN(Tensor cube, Op("pow", {c.output(), Num(3.0)}));
  return Op("mul", {cube, Num(-0.5)});
}
absl::StatusOr<Tensor> SinSlope(const GradContext& c) { return Op("cos", {c.input(0)}); }
absl::StatusOr<Tensor> CosSlope(const GradContext& c) {
  DT_ASSIGN_OR_RETURN(Tensor s, Op("sin", {c.input(0)}));
  return Op("neg", {s});
}
absl::StatusOr<Tensor> TanSlope(const GradContext& c) {  // 1 + y^2
  DT_ASSIGN_OR_RETURN(Tensor sq, Op("square", {c.output()}));
  return Op("add", {sq, Num(1.0)});
}
absl::StatusOr<Tensor> ReluSlope(const GradContext& c) { return Op("gt", {c.output(), Num(0.0)}); }
absl::StatusOr<Tensor> GeluTanhSlope(const GradContext& c) {
  // u = k (x + a x^3), t = tanh(u): 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 a x^2).
  constexpr double k = std::numbers::sqrt2 * std::numbers::inv_sqrtpi;
  constexpr double a = 0.044715;
  const Tensor& x = c.input(0);
  DT_ASSIGN_OR_RETURN(Tensor sq, Op("mul", {x, x}));
  DT_ASSIGN_OR_RETURN(Tensor inner, Op("mul", {sq, Num(a)}));
  DT_ASSIGN_OR_RETURN(inner, Op("add", {inner, Num(1.0)}));
  DT_ASSIGN_OR_RETURN(Tensor u, Op("mul", {x, inner}));
  DT_ASSIGN_OR_RETURN(u, Op("mul", {u, Num(k)}));
  DT_ASSIGN_OR_RETURN(Tensor t, Op("tanh", {u}));
  DT_ASSIGN_OR_RETURN(Tensor left, Op("add", {t, Num(1.0)}));
  DT_ASSIGN_OR_RETURN(left, Op("mul", {left, Num(0.5)}));
  DT_ASSIGN_OR_RETURN(Tensor t2, Op("square", {t}));
  DT_ASSIGN_OR_RETURN(Tensor sech2, grad::OneMinus(t2));
  DT_ASSIGN_OR_RETURN(Tensor du, Op("mul", {sq, Num(3.0 * a)}));
  DT_ASSIGN_OR_RETURN(du, Op("add", {du, Num(1.0)}));
  DT_ASSIGN_OR_RETURN(du, Op("mul", {du, Num(0.5 * k)}));
  DT_ASSIGN_OR_RETURN(Tensor right, Op("mul", {x, sech2}));
  DT_ASSIGN_OR_RETURN(right, Op("mul", {right, du}));
  return Op("add", {left, right});
}
absl::StatusOr<Tensor> ErfSlope(const GradContext& c) {  // 2/sqrt(pi) exp(-x^2)
  DT_ASSIGN_OR_RETURN(Tensor sq, Op("square", {c.input(0)}));
  DT_ASSIGN_OR_RETURN(Tensor e, Op("exp", {sq}));
  DT_ASSIGN_OR_RETURN(e, Op("reciprocal", {e}));
  return Op("mul", {e, Num(2.0 * std::numbers::inv_sqrtpi)});
}
absl::StatusOr<Tensor> ReciprocalSlope(const GradContext& c) {  // -y^2
  DT_ASSIGN_OR_RETURN(Tensor sq, Op("square", {c.output()}));
  return Op("neg", {sq});
}
absl::StatusOr<Tensor> SquareSlope(const GradContext& c) { return Op("mul", {c.input(0), Num(2.0)}); }

// gelu, silu, sigmoid and tanh apply their derivative as one fused pointwise op (graph/
// ops_pointwise.cc's _*_backward), taking the input or the output as the formula needs.
template <const char* kBackwardOp, bool kFromOutput>
absl::StatusOr<ArgGrads> FusedUnaryGrad(const GradContext& c) {
  return FirstGrad(c, Op(kBackwardOp, {c.grad(), kFromOutput ? c.output() : c.input(0)}));
}
constexpr char kGeluBackward[] = "_gelu_erf_backward";
constexpr char kSiluBackward[] = "_silu_backward";
constexpr char kSigmoidBackward[] = "_sigmoid_backward";
constexpr char kTanhBackward[] = "_tanh_backward";

// The fused derivatives' own derivatives (for create_graph): linear in g; in x (or y), the
// second derivative times g.
template <const char* kBackwardOp>
absl::StatusOr<ArgGrads> SecondOrderGrad(const GradContext& c,
                                         absl::StatusOr<Tensor> (*curvature)(const Tensor& v)) {
  ArgGrads grads = grad::NoGrads(c);
  if (c.needs(0)) {
    DT_ASSIGN_OR_RETURN(grads[0], Op(kBackwardOp, {c.grad(), c.args[1]}));
  }
  if (c.needs(1)) {
    DT_ASSIGN_OR_RETURN(Tensor second, curvature(c.input(1)));
    DT_ASSIGN_OR_RETURN(Tensor gg, Op("mul", {c.grad(), c.args[0]}));
    DT_ASSIGN_OR_RETURN(grads[1], Op("mul", {gg, second}));
  }
  return grads;
}

absl::StatusOr<Tensor> GeluCurvature(const Tensor& x) {  // φ(x) (2 - x²)
  DT_ASSIGN_OR_RETURN(Tensor sq, Op("square", {x}));
  DT_ASSIGN_OR_RETURN(Tensor pdf, Op("mul", {sq, Num(-0.5)}));
  DT_ASSIGN_OR_RETURN(pdf, Op("exp", {pdf}));
  DT_ASSIGN_OR_RETURN(pdf, Op("mul", {pdf, Num(0.5 * std::numbers::inv_sqrtpi * std::numbers::sqrt2)}));
  DT_ASSIGN_OR_RETURN(Tensor two_minus, Op("sub", {sq, Num(2.0)}));
  DT_ASSIGN_OR_RETURN(two_minus, Op("neg", {two_minus}));
  return Op("mul", {pdf, two_minus});
}
absl::StatusOr<Tensor> SiluCurvature(const Tensor& x) {  // s (1 - s) (2 + x (1 - 2 s))
  DT_ASSIGN_OR_RETURN(Tensor s, Op("sigmoid", {x}));
  DT_ASSIGN_OR_RETURN(Tensor rest, grad::OneMinus(s));
  DT_ASSIGN_OR_RETURN(Tensor slope, Op("mul", {s, rest}));
  DT_ASSIGN_OR_RETURN(Tensor twice, Op("mul", {s, Num(-2.0)}));
  DT_ASSIGN_OR_RETURN(twice, Op("add", {twice, Num(1.0)}));
  DT_ASSIGN_OR_RETURN(twice, Op("mul", {twice, x}));
  DT_ASSIGN_OR_RETURN(twice, Op("add", {twice, Num(2.0)}));
  return Op("mul", {slope, twice});
}
absl::StatusOr<Tensor> SigmoidCurvature(const Tensor& y) {  // 1 - 2y
  DT_ASSIGN_OR_RETURN(Tensor t, Op("mul", {y, Num(-2.0)}));
  return Op("add", {t, Num(1.0)});
}
absl::StatusOr<Tensor> TanhCurvature(const Tensor& y) { return Op("mul", {y, Num(-2.0)}); }

template <const char* kBackwardOp, absl::StatusOr<Tensor> (*kCurvature)(const Tensor&)>
absl::StatusOr<ArgGrads> FusedBackwardGrad(const GradContext& c) {
  return SecondOrderGrad<kBackwardOp>(c, kCurvature);
}

// Piecewise-constant ops (floor, sign ...): zero almost everywhere, as PyTorch defines them.
absl::StatusOr<ArgGrads> ZeroGrad(const GradContext& c) {
  return FirstGrad(c, Op("full_like", {c.grad(), Scalar::Int(0), None{}, None{}}));
}

absl::StatusOr<ArgGrads> NegGrad(const GradContext& c) { return FirstGrad(c, Op("neg", {c.grad()})); }

absl::StatusOr<ArgGrads> AddGrad(const GradContext& c) {
  ArgGrads grads = grad::NoGrads(c);
  if (c.needs(0)) grads[0] = c.grad();
  if (c.needs(1)) grads[1] = c.grad();
  return grads;
}

absl::StatusOr<ArgGrads> SubGrad(const GradContext& c) {
  ArgGrads grads = grad::NoGrads(c);
  if (c.needs(0)) grads[0] = c.grad();
  if (c.needs(1)) {
    DT_ASSIGN_OR_RETURN(grads[1], Op("neg", {c.grad()}));
  }
  return grads;
}

absl::StatusOr<ArgGrads> DivGrad(const GradContext& c) {  // a / b: g / b, -g a / b^2
  ArgGrads grads = grad::NoGrads(c);
  DT_ASSIGN_OR_RETURN(Tensor over_b, Op("div", {c.grad(), c.args[1]}));
  if (c.needs(0)) grads[0] = over_b;
  if (c.needs(1)) {
    DT_ASSIGN_OR_RETURN(Tensor t, Op("mul", {over_b, c.args[0]}));
    DT_ASSIGN_OR_RETURN(t, Op("div", {t, c.args[1]}));
    DT_ASSIGN_OR_RETURN(grads[1], Op("neg", {t}));
  }
  return grads;
}

absl::StatusOr<ArgGrads> PowGrad(const GradContext& c) {  // a^b: g b a^(b-1), g a^b log(a)
  ArgGrads grads = grad::NoGrads(c);
  if (c.needs(0)) {
    ArgValue bm1 = Num(0.0);
    if (const Scalar* b = std::get_if<Scalar>(&c.args[1])) {
      bm1 = b->is_float() ? Num(b->ToDouble() - 1.0) : ArgValue(Scalar::Int(b->ToInt() - 1));
    } else {
      DT_ASSIGN_OR_RETURN(bm1, Op("sub", {c.args[1], Num(1.0)}));
    }
    DT_ASSIGN_OR_RETURN(Tensor p, Op("pow", {c.args[0], bm1}));
    DT_ASSIGN_OR_RETURN(p, Op("mul", {p, c.args[1]}));
    DT_ASSIGN_OR_RETURN(grads[0], Op("mul", {c.grad(), p}));
  }
  if (c.needs(1)) {
    // PyTorch's convention: 0 where a == 0 and b >= 0 (the limit), instead of 0 * -inf.
    DT_ASSIGN_OR_RETURN(Tensor log_a, Op("log", {c.args[0]}));
    DT_ASSIGN_OR_RETURN(Tensor t, Op("mul", {c.output(), log_a}));
    DT_ASSIGN_OR_RETURN(Tensor zero_base, Op("eq", {c.args[0], Num(0.0)}));
    DT_ASSIGN_OR_RETURN(t, Op("where", {zero_base, Num(0.0), t}));
    DT_ASSIGN_OR_RETURN(grads[1], Op("mul", {c.grad(), t}));
  }
  return grads;
}

// maximum/minimum: the gradient goes to the chosen operand, half to each on a tie.
absl::StatusOr<ArgGrads> ExtremumGrad(const GradContext& c) {
  ArgGrads grads = grad::NoGrads(c);
  const bool is_max = c.op.name() == "maximum";
  DT_ASSIGN_OR_RETURN(Tensor wins, Op(is_max ? "gt" : "lt", {c.args[0], c.args[1]}));
  DT_ASSIGN_OR_RETURN(Tensor ties, Op("eq", {c.args[0], c.args[1]}));
  DT_ASSIGN_OR_RETURN(Tensor share, Op("where", {ties, Num(0.5), wins}));
  if (c.needs(0)) {
    DT_ASSIGN_OR_RETURN(grads[0], Op("mul", {c.grad(), share}));
  }
  if (c.needs(1)) {
    DT_ASSIGN_OR_RETURN(Tensor other, grad::OneMinus(share));
    DT_ASSIGN_OR_RETURN(grads[1], Op("mul", {c.grad(), other}));
  }
  return grads;
}

absl::StatusOr<ArgGrads> Atan2Grad(const GradContext& c) {  // atan2(a, b): (b, -a) / (a^2 + b^2)
  ArgGrads grads = grad::NoGrads(c);
  DT_ASSIGN_OR_RETURN(Tensor a2, Op("mul", {c.args[0], c.args[0]}));
  DT_ASSIGN_OR_RETURN(Tensor b2, Op("mul", {c.args[1], c.args[1]}));
  DT_ASSIGN_OR_RETURN(Tensor denom, Op("add", {a2, b2}));
  DT_ASSIGN_OR_RETURN(Tensor g, Op("div", {c.grad(), denom}));
  if (c.needs(0)) {
    DT_ASSIGN_OR_RETURN(grads[0], Op("mul", {g, c.args[1]}));
  }
  if (c.needs(1)) {
    DT_ASSIGN_OR_RETURN(Tensor t, Op("mul", {g, c.args[0]}));
    DT_ASSIGN_OR_RETURN(grads[1], Op("neg", {t}));
  }
  return grads;
}

absl::StatusOr<ArgGrads> RemainderGrad(const GradContext& c) {  // a - floor(a / b) b
  ArgGrads grads = grad::NoGrads(c);
  if (c.needs(0)) grads[0] = c.grad();
  if (c.needs(1)) {
    DT_ASSIGN_OR_RETURN(Tensor q, Op("div", {c.args[0], c.args[1]}));
    DT_ASSIGN_OR_RETURN(q, Op("floor", {q}));
    DT_ASSIGN_OR_RETURN(q, Op("mul", {q, c.grad()}));
    DT_ASSIGN_OR_RETURN(grads[1], Op("neg", {q}));
  }
  return grads;
}

absl::StatusOr<ArgGrads> WhereGrad(const GradContext& c) {
  ArgGrads grads = grad::NoGrads(c);
  if (c.needs(1)) {
    DT_ASSIGN_OR_RETURN(grads[1], Op("where", {c.args[0], c.grad(), Num(0.0)}));
  }
  if (c.needs(2)) {
    DT_ASSIGN_OR_RETURN(grads[2], Op("where", {c.args[0], Num(0.0), c.grad()}));
  }
  return grads;
}

}  // namespace

void RegisterPointwiseDerivatives(OpRegistry& registry) {
  struct Entry {
    const char* op;
    Derivative derivative;
  };
  constexpr bool kInputs = true, kNoInputs = false, kOutputs = true, kNoOutputs = false;
  const Entry entries[] = {
      {"neg", {&NegGrad, kNoInputs, kNoOutputs}},
      {"abs", {&Unary<&SignSlope>, kInputs, kNoOutputs}},
      {"exp", {&Unary<&ExpSlope>, kNoInputs, kOutputs}},
      {"exp2", {&Unary<&Exp2Slope>, kNoInputs, kOutputs}},
      {"log", {&Unary<&LogSlope>, kInputs, kNoOutputs}},
      {"log2", {&Unary<&Log2Slope>, kInputs, kNoOutputs}},
      {"log1p", {&Unary<&Log1pSlope>, kInputs, kNoOutputs}},
      {"expm1", {&Unary<&Expm1Slope>, kNoInputs, kOutputs}},
      {"sqrt", {&Unary<&SqrtSlope>, kNoInputs, kOutputs}},
      {"rsqrt", {&Unary<&RsqrtSlope>, kNoInputs, kOutputs}},
      {"sin", {&Unary<&SinSlope>, kInputs, kNoOutputs}},
      {"cos", {&Unary<&CosSlope>, kInputs, kNoOutputs}},
      {"tan", {&Unary<&TanSlope>, kNoInputs, kOutputs}},
      {"tanh", {&FusedUnaryGrad<kTanhBackward, true>, kNoInputs, kOutputs}},
      {"sigmoid", {&FusedUnaryGrad<kSigmoidBackward, true>, kNoInputs, kOutputs}},
      {"relu", {&Unary<&ReluSlope>, kNoInputs, kOutputs}},
      {"_gelu_erf", {&FusedUnaryGrad<kGeluBackward, false>, kInputs, kNoOutputs}},
      {"_gelu_tanh", {&Unary<&GeluTanhSlope>, kInputs, kNoOutputs}},
      {"silu", {&FusedUnaryGrad<kSiluBackward, false>, kInputs, kNoOutputs}},
      {"_gelu_erf_backward", {&FusedBackwardGrad<kGeluBackward, &GeluCurvature>, kInputs, kNoOutputs}},
      {"_silu_backward", {&FusedBackwardGrad<kSiluBackward, &SiluCurvature>, kInputs, kNoOutputs}},
      {"_sigmoid_backward", {&FusedBackwardGrad<kSigmoidBackward, &SigmoidCurvature>, kInputs, kNoOutputs}},
      {"_tanh_backward", {&FusedBackwardGrad<kTanhBackward, &TanhCurvature>, kInputs, kNoOutputs}},
      {"erf", {&Unary<&ErfSlope>, kInputs, kNoOutputs}},
      {"reciprocal", {&Unary<&ReciprocalSlope>, kNoInputs, kOutputs}},
      {"square", {&Unary<&SquareSlope>, kInputs, kNoOutputs}},
      {"floor", {&ZeroGrad, kNoInputs, kNoOutputs}},
      {"ceil", {&ZeroGrad, kNoInputs, kNoOutputs}},
      {"round", {&ZeroGrad, kNoInputs, kNoOutputs}},
      {"trunc", {&ZeroGrad, kNoInputs, kNoOutputs}},
      {"sign", {&ZeroGrad, kNoInputs, kNoOutputs}},
      {"floor_divide", {&ZeroGrad, kNoInputs, kNoOutputs}},
      {"add", {&AddGrad, kNoInputs, kNoOutputs}},
      {"sub", {&SubGrad, kNoInputs, kNoOutputs}},
      {"mul", {&grad::ProductGrad, kInputs, kNoOutputs}},
      {"div", {&DivGrad, kInputs, kNoOutputs}},
      {"pow", {&PowGrad, kInputs, kOutputs}},
      {"maximum", {&ExtremumGrad, kInputs, kNoOutputs}},
      {"minimum", {&ExtremumGrad, kInputs, kNoOutputs}},
      {"atan2", {&Atan2Grad, kInputs, kNoOutputs}},
      {"remainder", {&RemainderGrad, kInputs, kNoOutputs}},
      {"where", {&WhereGrad, kInputs, kNoOutputs}},
  };
  for (const Entry& e : entries) registry.Mutable(e.op).derivative = e.derivative;
}

}  // namespace dt
