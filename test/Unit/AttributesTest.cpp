//===- AttributesTest.cpp - Attributes, float text and the graph API ------===//

#include "ir/Attributes.h"
#include "ir/Graph.h"
#include "ir/Printer.h"

#include "gtest/gtest.h"

#include <cmath>

using namespace autopar;

namespace {

std::string floatText(double V, ElementType Ty = ElementType::F64) {
  std::string S;
  llvm::raw_string_ostream OS(S);
  printFloat(OS, V, Ty);
  return OS.str();
}

TEST(FloatTextTest, ShortestTextThatReadsBack) {
  EXPECT_EQ(floatText(1.0), "1.0");
  EXPECT_EQ(floatText(0.1), "0.1");
  EXPECT_EQ(floatText(1e-5), "1e-05");
  EXPECT_EQ(floatText(-2.5), "-2.5");
  EXPECT_EQ(floatText(1e300), "1e+300");
  // f32's nearest value to 0.1 prints as 0.1 in f32, not as its double text.
  double F32Tenth = static_cast<float>(0.1);
  EXPECT_EQ(floatText(F32Tenth, ElementType::F32), "0.1");
  EXPECT_EQ(floatText(F32Tenth), "0.10000000149011612");
  EXPECT_EQ(floatText(INFINITY), "inf");
  EXPECT_EQ(floatText(-INFINITY), "-inf");
  EXPECT_EQ(floatText(NAN), "nan");
}

TEST(FloatTextTest, RoundsToNarrowTypes) {
  // 1/3 in bf16 has 8 significant bits.
  double V = roundToElementType(1.0 / 3.0, ElementType::BF16);
  EXPECT_EQ(V, 0.333984375);
  EXPECT_EQ(floatText(V, ElementType::BF16), "0.334");
  EXPECT_EQ(roundToElementType(65520.0, ElementType::F16), INFINITY);
  EXPECT_EQ(roundToElementType(0.1, ElementType::F64), 0.1);
}

TEST(AttrDictTest, KeepsNamesSortedAndUnique) {
  AttrDict D;
  D.set("zeta", Attribute::getInt(1));
  D.set("alpha", Attribute::getFloat(0.5));
  D.set("mid", Attribute::getString("x"));
  D.set("alpha", Attribute::getInt(3));
  std::vector<std::string> Names;
  for (const NamedAttribute &E : D)
    Names.push_back(E.first);
  EXPECT_EQ(Names, (std::vector<std::string>{"alpha", "mid", "zeta"}));
  ASSERT_TRUE(D.get("alpha"));
  EXPECT_EQ(D.get("alpha")->getInt(), 3);
  EXPECT_TRUE(D.erase("mid"));
  EXPECT_FALSE(D.erase("mid"));
  EXPECT_FALSE(D.get("mid"));
}

TEST(AttributeTest, PrintsEveryKind) {
  auto Text = [](const Attribute &A) {
    std::string S;
    llvm::raw_string_ostream OS(S);
    OS << A;
    return OS.str();
  };
  EXPECT_EQ(Text(Attribute::getString("a\"b\\\n\x01")),
            "\"a\\\"b\\\\\\n\\x01\"");
  EXPECT_EQ(Text(Attribute::getIntList({1, -2})), "[1, -2]");
  EXPECT_EQ(Text(Attribute::getFloatList({1, 0.25})), "[1.0, 0.25]");
  EXPECT_EQ(Text(Attribute::getBool(false)), "false");
  Sharding S{"m", {{"dp"}, {}}, {"tp"}};
  EXPECT_EQ(Text(Attribute::getSharding(S)),
            "sharding<@m, [{dp}, {}], partial = {tp}>");
  DenseTensor T(TensorType::get(ElementType::Bool, {2}),
                std::vector<int64_t>{1, 0});
  EXPECT_EQ(Text(Attribute::getTensor(T)), "dense<bool[2], [true, false]>");
  AttrDict D;
  D.set("odd key", Attribute::getInt(1));
  EXPECT_EQ(Text(Attribute::getDict(D)), "{\"odd key\" = 1}");
  EXPECT_EQ(Attribute::getIntList({1}), Attribute::getIntList({1}));
  EXPECT_NE(Attribute::getIntList({1}), Attribute::getFloatList({1}));
}

TEST(GraphTest, ReplaceAllUsesUpdatesNodesAndOutputs) {
  Graph G("g");
  TensorType T = TensorType::get(ElementType::F32, {4});
  Value *X = G.addInput("x", T);
  Value *Y = G.addInput("y", T);
  Node *Add = G.createNode(OpId::Add, {X, X}, {T});
  Node *Neg = G.createNode(OpId::Neg, {Add->getResult(0)}, {T});
  G.setOutputs({Add->getResult(0), Neg->getResult(0)});
  EXPECT_EQ(X->getUsers().size(), 2u);
  X->replaceAllUsesWith(Y);
  EXPECT_FALSE(X->hasUses());
  EXPECT_EQ(Add->getOperand(0), Y);
  EXPECT_EQ(Add->getOperand(1), Y);
  Add->getResult(0)->replaceAllUsesWith(Y);
  EXPECT_EQ(G.getOutputs()[0], Y);
  EXPECT_EQ(Neg->getOperand(0), Y);
  EXPECT_EQ(Y->getNumOutputUses(), 1u);
  std::string Name = Add->getResult(0)->getName().str();
  Add->erase();
  EXPECT_FALSE(G.isNameUsed(Name));
  EXPECT_EQ(G.getNodes().size(), 1u);
}

TEST(GraphTest, FreshAndUniqueNames) {
  Graph G("g");
  TensorType T = TensorType::get(ElementType::F32, {});
  Value *X = G.addInput("0", T);
  Node *N = G.createNode(OpId::Neg, {X}, {T});
  EXPECT_EQ(N->getResult(0)->getName(), "1");
  EXPECT_EQ(G.getUniqueName("x"), "x");
  G.addInput("x", T);
  G.addInput("x_1", T);
  EXPECT_EQ(G.getUniqueName("x"), "x_2");
  G.renameValue(N->getResult(0), "y");
  EXPECT_EQ(G.lookupValue("y"), N->getResult(0));
  EXPECT_FALSE(G.isNameUsed("1"));
}

TEST(GraphTest, NodesInsertBefore) {
  Graph G("g");
  TensorType T = TensorType::get(ElementType::F32, {});
  Value *X = G.addInput("x", T);
  Node *Last = G.createNode(OpId::Neg, {X}, {T}, AttrDict(), {"last"});
  G.createNode(OpId::Relu, {X}, {T}, AttrDict(), {"first"}, Last);
  G.setOutputs({Last->getResult(0)});
  std::string S;
  llvm::raw_string_ostream OS(S);
  printGraph(OS, G);
  EXPECT_EQ(OS.str(), "graph @g(%x: f32[]) {\n"
                      "  %first = Relu(%x) : f32[]\n"
                      "  %last = Neg(%x) : f32[]\n"
                      "  return %last\n"
                      "}\n");
}

} // namespace
