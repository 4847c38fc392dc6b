// The graph IR: building, printing, dead-code elimination and eager execution, checked against
// the same ops called directly.
#include "gtest/gtest.h"
#include "graph/graph.h"
#include "runtime/copy.h"
#include "runtime/random.h"

namespace dt {
namespace {

Tensor MetaLike(const Tensor& t) {
  return Tensor(Storage::Allocate(0, Device::Meta()), t.sizes(), t.strides(), 0, t.dtype());
}

std::vector<Tensor> MetaRun(const char* name, std::vector<ArgValue> args) {
  return *CallOp(*OpRegistry::Get().Find(name), OpArgs(std::move(args)));
}

TEST(Graph, RunsLikeDirectCallsAndDropsDeadCode) {
  ManualSeed(1);
  Tensor x = Tensor::Empty({3, 5}, DType::kFloat32, Device::Cpu());
  FillNormal(x);
  Graph g;
  const ValueId in = g.AddInput(MetaLike(x), "L['x']");
  const Tensor mx = g.value(in).meta;
  auto e = g.AddNode(OpRegistry::Get().Find("exp"), {GraphArg::Value(in)}, MetaRun("exp", {mx}), false, {});
  // A node nobody uses: removed.
  g.AddNode(OpRegistry::Get().Find("neg"), {GraphArg::Value(in)}, MetaRun("neg", {mx}), false, {});
  auto s = g.AddNode(OpRegistry::Get().Find("sum"),
                     {GraphArg::Value(e[0]), GraphArg{ArgValue(Dims{1})}, GraphArg{ArgValue(Scalar::Bool(true))},
                      GraphArg{ArgValue(None{})}},
                     MetaRun("sum", {g.value(e[0]).meta, Dims{1}, Scalar::Bool(true), None{}}), false, {});
  g.SetOutputs({s[0]});
  EXPECT_EQ(g.EliminateDeadCode(), 1);
  EXPECT_EQ(g.nodes().size(), 2u);
  const std::string text = g.ToString("f");
  EXPECT_NE(text.find("dyntrace.exp(v0)"), std::string::npos) << text;
  EXPECT_NE(text.find("keepdim=True"), std::string::npos) << text;
  EXPECT_EQ(text.find("neg"), std::string::npos) << text;
  auto out = g.RunEager({x});
  ASSERT_TRUE(out.ok()) << out.status();
  auto direct = Call("sum", {*Call("exp", {x}), Dims{1}, Scalar::Bool(true)});
  Tensor a = Contiguous(out->at(0)), b = Contiguous(*direct);
  ASSERT_EQ(a.sizes(), (Dims{3, 1}));
  for (int i = 0; i < 3; ++i) EXPECT_FLOAT_EQ(a.data_as<float>()[i], b.data_as<float>()[i]);
}

TEST(Graph, InplaceNodesWriteThroughToInputs) {
  Tensor x = *Call("arange", {Scalar::Int(4), None{}, Scalar::Int(1), DType::kFloat32, None{}});
  Graph g;
  const ValueId in = g.AddInput(MetaLike(x), "L['x']");
  g.AddNode(OpRegistry::Get().Find("mul"), {GraphArg::Value(in), GraphArg{ArgValue(Scalar::Int(3))}},
            {g.value(in).meta}, /*inplace=*/true, {});
  EXPECT_EQ(g.EliminateDeadCode(), 0);  // mutations stay even when nothing reads them
  ASSERT_TRUE(g.RunEager({x}).ok());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(x.data_as<float>()[i], 3.0f * i);
}

}  // namespace
}  // namespace dt
