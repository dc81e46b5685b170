//===- RuntimeOpShapesTest.cpp - The backends' shared shape plans ---------===//
//
// runtime/OpShapes.h and runtime/KernelFamily.h called directly: each test
// parses a one-node program for its node and attributes, builds KernelArgs
// over tensors that only carry shapes (and the integers of Slice's small
// operands), and checks the plan's numbers or its error message.
//
//===----------------------------------------------------------------------===//

#include "runtime/KernelFamily.h"
#include "runtime/OpShapes.h"
#include "runtime/cpu/CpuBackend.h"

#include "ir/Graph.h"
#include "ir/Parser.h"

#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include "gtest/gtest.h"

#include <memory>
#include <string>
#include <vector>

using namespace autopar;
using namespace llvm;

namespace {

/// The first node of a one-graph program (parsed, not verified, so the
/// declared result types may be wrong on purpose), and the tensors of a
/// KernelArgs for it.
class OneNode {
public:
  explicit OneNode(StringRef Text) {
    SM.AddNewSourceBuffer(MemoryBuffer::getMemBufferCopy(Text, "test.air"),
                          SMLoc());
    raw_string_ostream OS(Diagnostics);
    DiagnosticEngine Diag(&SM, "test.air", OS);
    M = parseModule(SM, Diag);
    EXPECT_TRUE(M) << OS.str();
  }

  const Node &node() const {
    return M->getGraphs().front()->getNodes().front();
  }

  /// An f32 operand (or result) of shape S; no data is read.
  Tensor shaped(ArrayRef<int64_t> S, ElementType Elem = ElementType::F32) {
    return Tensor(Elem, S, &Dummy);
  }
  /// An i64 operand holding Values.
  Tensor ints(std::vector<int64_t> Values) {
    Storage.push_back(std::make_unique<std::vector<int64_t>>(Values));
    std::vector<int64_t> &V = *Storage.back();
    return Tensor(ElementType::I64, {int64_t(V.size())},
                  V.empty() ? static_cast<void *>(&Dummy) : V.data());
  }

  KernelArgs args(ArrayRef<Tensor> In, ArrayRef<Tensor> Out) {
    Ins.assign(In.begin(), In.end());
    Outs.assign(Out.begin(), Out.end());
    return KernelArgs{node(), Ins, Outs};
  }

private:
  SourceMgr SM;
  std::string Diagnostics;
  std::unique_ptr<Module> M;
  double Dummy[8] = {};
  std::vector<std::unique_ptr<std::vector<int64_t>>> Storage;
  std::vector<Tensor> Ins, Outs;
};

/// The message of E (consumed), or "" for success.
template <typename T> std::string errorOf(Expected<T> E) {
  if (E)
    return "";
  return toString(E.takeError());
}
std::string errorOf(Error E) { return E ? toString(std::move(E)) : ""; }

bool contains(const std::string &S, StringRef Part) {
  return StringRef(S).contains(Part);
}

Shape shape(std::initializer_list<int64_t> S) { return Shape(S); }

//===----------------------------------------------------------------------===//
// GEMMs
//===----------------------------------------------------------------------===//

TEST(RuntimeOpShapes, MatMulBroadcastsBatches) {
  OneNode G(R"(
graph @g(%x: f32[2, 1, 3, 4], %w: f32[5, 4, 6]) {
  %y = MatMul(%x, %w) : f32[2, 5, 3, 6]
  return %y
})");
  KernelArgs A = G.args({G.shaped({2, 1, 3, 4}), G.shaped({5, 4, 6})},
                        {G.shaped({2, 5, 3, 6})});
  Expected<MatMulPlan> P = planMatMul(A);
  ASSERT_TRUE(bool(P)) << toString(P.takeError());
  EXPECT_EQ(P->M, 3);
  EXPECT_EQ(P->K, 4);
  EXPECT_EQ(P->N, 6);
  EXPECT_FALSE(P->VectorX);
  EXPECT_FALSE(P->VectorW);
  EXPECT_EQ(P->XBatch, shape({2, 1}));
  EXPECT_EQ(P->WBatch, shape({5}));
  EXPECT_EQ(P->Batch, shape({2, 5}));
  EXPECT_EQ(P->Count, 10);
  EXPECT_EQ(P->XCount, 2);
  EXPECT_EQ(P->WCount, 5);
  EXPECT_EQ(P->Out, shape({2, 5, 3, 6}));
}

TEST(RuntimeOpShapes, MatMulVectorsDropTheirDimension) {
  OneNode G(R"(
graph @g(%x: f32[4], %w: f32[3, 4, 2]) {
  %y = MatMul(%x, %w) : f32[3, 2]
  return %y
})");
  KernelArgs A =
      G.args({G.shaped({4}), G.shaped({3, 4, 2})}, {G.shaped({3, 2})});
  Expected<MatMulPlan> P = planMatMul(A);
  ASSERT_TRUE(bool(P)) << toString(P.takeError());
  EXPECT_TRUE(P->VectorX);
  EXPECT_EQ(P->M, 1);
  EXPECT_EQ(P->Out, shape({3, 2}));

  KernelArgs Dot = G.args({G.shaped({4}), G.shaped({4})}, {G.shaped({})});
  Expected<MatMulPlan> D = planMatMul(Dot);
  ASSERT_TRUE(bool(D)) << toString(D.takeError());
  EXPECT_TRUE(D->VectorX && D->VectorW);
  EXPECT_EQ(D->Out, shape({}));
}

TEST(RuntimeOpShapes, MatMulErrors) {
  OneNode G(R"(
graph @g(%x: f32[3, 4], %w: f32[5, 6]) {
  %y = MatMul(%x, %w) : f32[3, 6]
  return %y
})");
  std::string Message = errorOf(planMatMul(
      G.args({G.shaped({3, 4}), G.shaped({5, 6})}, {G.shaped({3, 6})})));
  EXPECT_TRUE(contains(Message, "contracting dimensions of f32[3, 4] and "
                                "f32[5, 6] differ"))
      << Message;
  EXPECT_TRUE(contains(Message, "(MatMul)")) << Message;

  Message = errorOf(planMatMul(G.args(
      {G.shaped({2, 3, 4}), G.shaped({3, 4, 5})}, {G.shaped({2, 3, 5})})));
  EXPECT_TRUE(contains(Message, "batch dimensions of f32[2, 3, 4] and "
                                "f32[3, 4, 5] do not broadcast"))
      << Message;

  Message = errorOf(
      planMatMul(G.args({G.shaped({}), G.shaped({4, 5})}, {G.shaped({5})})));
  EXPECT_TRUE(contains(Message, "operands must have rank 1 or more"))
      << Message;

  Message = errorOf(planMatMul(
      G.args({G.shaped({3, 4}), G.shaped({4, 5})}, {G.shaped({3, 6})})));
  EXPECT_TRUE(contains(Message, "result 0 has shape [3, 5]")) << Message;
}

TEST(RuntimeOpShapes, LinearAndGemm) {
  OneNode L(R"(
graph @g(%x: f32[2, 3, 4], %w: f32[4, 5], %b: f32[5]) {
  %y = Linear(%x, %w, %b) : f32[2, 3, 5]
  return %y
})");
  Expected<LinearPlan> P =
      planLinear(L.args({L.shaped({2, 3, 4}), L.shaped({4, 5}), L.shaped({5})},
                        {L.shaped({2, 3, 5})}));
  ASSERT_TRUE(bool(P)) << toString(P.takeError());
  EXPECT_EQ(P->Rows, 6);
  EXPECT_EQ(P->K, 4);
  EXPECT_EQ(P->N, 5);
  std::string Message = errorOf(
      planLinear(L.args({L.shaped({2, 3, 4}), L.shaped({4, 5}), L.shaped({4})},
                        {L.shaped({2, 3, 5})})));
  EXPECT_TRUE(contains(Message, "B f32[4] must be [5]")) << Message;

  OneNode G(R"(
graph @g(%a: f32[4, 3], %b: f32[5, 4], %c: f32[1, 5]) {
  %y = Gemm(%a, %b, %c) {transA = 1, transB = 1, alpha = 2.0, beta = 0.5} : f32[3, 5]
  return %y
})");
  KernelArgs A = G.args({G.shaped({4, 3}), G.shaped({5, 4}), G.shaped({1, 5})},
                        {G.shaped({3, 5})});
  Expected<GemmPlan> Q = planGemm(A);
  ASSERT_TRUE(bool(Q)) << toString(Q.takeError());
  EXPECT_TRUE(Q->TransA && Q->TransB);
  EXPECT_EQ(Q->M, 3);
  EXPECT_EQ(Q->K, 4);
  EXPECT_EQ(Q->N, 5);
  EXPECT_FLOAT_EQ(Q->Alpha, 2.0f);
  EXPECT_FLOAT_EQ(Q->Beta, 0.5f);
  EXPECT_EQ(errorOf(checkGemmC(A, *Q)), "");

  KernelArgs BadC =
      G.args({G.shaped({4, 3}), G.shaped({5, 4}), G.shaped({3, 1, 5})},
             {G.shaped({3, 5})});
  Message = errorOf(checkGemmC(BadC, *Q));
  EXPECT_TRUE(contains(Message, "C f32[3, 1, 5] does not broadcast to [3, 5]"))
      << Message;
  Message = errorOf(
      planGemm(G.args({G.shaped({4, 3}), G.shaped({5, 3}), G.shaped({1, 5})},
                      {G.shaped({3, 5})})));
  EXPECT_TRUE(contains(Message, "contracting dimensions")) << Message;
}

//===----------------------------------------------------------------------===//
// Slices and layouts
//===----------------------------------------------------------------------===//

/// planSlice over host operands.
Expected<StridedView> slice(const KernelArgs &A) {
  return planSlice(A, [&](unsigned I) { return A.readInts(I); });
}

const char *SliceProgram = R"(
graph @g(%x: f32[10], %s: i64[1], %e: i64[1], %a: i64[1], %t: i64[1]) {
  %y = Slice(%x, %s, %e, %a, %t) : f32[3]
  return %y
})";

TEST(RuntimeOpShapes, SliceClampsNegativeStartsAndLargeEnds) {
  OneNode G(SliceProgram);
  // x[-3:100] is x[7:10].
  Expected<StridedView> V = slice(
      G.args({G.shaped({10}), G.ints({-3}), G.ints({100})}, {G.shaped({3})}));
  ASSERT_TRUE(bool(V)) << toString(V.takeError());
  EXPECT_EQ(V->Out, shape({3}));
  EXPECT_EQ(V->Base, 7);
  EXPECT_EQ(V->Strides, shape({1}));

  // x[-100:2] clamps the start to 0.
  V = slice(
      G.args({G.shaped({10}), G.ints({-100}), G.ints({2})}, {G.shaped({2})}));
  ASSERT_TRUE(bool(V)) << toString(V.takeError());
  EXPECT_EQ(V->Out, shape({2}));
  EXPECT_EQ(V->Base, 0);

  // An empty range: x[5:3].
  V = slice(
      G.args({G.shaped({10}), G.ints({5}), G.ints({3})}, {G.shaped({0})}));
  ASSERT_TRUE(bool(V)) << toString(V.takeError());
  EXPECT_EQ(V->Out, shape({0}));
  EXPECT_EQ(V->Base, 0);
}

TEST(RuntimeOpShapes, SliceNegativeSteps) {
  OneNode G(SliceProgram);
  // x[100:-100:-2]: from 9 down past 0 in steps of 2: 9, 7, 5, 3, 1.
  Expected<StridedView> V =
      slice(G.args({G.shaped({10}), G.ints({100}), G.ints({-100}), G.ints({0}),
                    G.ints({-2})},
                   {G.shaped({5})}));
  ASSERT_TRUE(bool(V)) << toString(V.takeError());
  EXPECT_EQ(V->Out, shape({5}));
  EXPECT_EQ(V->Base, 9);
  EXPECT_EQ(V->Strides, shape({-2}));
}

TEST(RuntimeOpShapes, SliceOfSomeAxes) {
  OneNode G(SliceProgram);
  // x[1:3, 0:6:2] of a [4, 6] tensor, the second axis given as -1.
  Expected<StridedView> V =
      slice(G.args({G.shaped({4, 6}), G.ints({1, 0}), G.ints({3, 6}),
                    G.ints({0, -1}), G.ints({1, 2})},
                   {G.shaped({2, 3})}));
  ASSERT_TRUE(bool(V)) << toString(V.takeError());
  EXPECT_EQ(V->Out, shape({2, 3}));
  EXPECT_EQ(V->Base, 6);
  EXPECT_EQ(V->Strides, shape({6, 2}));
}

TEST(RuntimeOpShapes, SliceErrors) {
  OneNode G(SliceProgram);
  std::string Message = errorOf(slice(G.args(
      {G.shaped({10}), G.ints({0}), G.ints({5}), G.ints({0}), G.ints({0})},
      {G.shaped({5})})));
  EXPECT_TRUE(contains(Message, "a step is 0")) << Message;

  Message = errorOf(slice(G.args(
      {G.shaped({4, 6}), G.ints({0, 0}), G.ints({1, 1}), G.ints({1, -1})},
      {G.shaped({4, 1})})));
  EXPECT_TRUE(contains(Message, "axis -1 is repeated")) << Message;

  Message = errorOf(slice(
      G.args({G.shaped({10}), G.ints({0, 1}), G.ints({5})}, {G.shaped({5})})));
  EXPECT_TRUE(
      contains(Message, "starts, ends, axes and steps have different lengths"))
      << Message;

  Message = errorOf(
      slice(G.args({G.shaped({10}), G.ints({0}), G.ints({5}), G.ints({1})},
                   {G.shaped({5})})));
  EXPECT_TRUE(contains(Message, "axis 1 is out of range for rank 1"))
      << Message;

  Message = errorOf(slice(
      G.args({G.shaped({10}), G.ints({2}), G.ints({5})}, {G.shaped({4})})));
  EXPECT_TRUE(contains(Message, "result 0 has shape [3]")) << Message;
}

TEST(RuntimeOpShapes, Transpose) {
  OneNode G(R"(
graph @g(%x: f32[2, 3, 4]) {
  %y = Transpose(%x) {perm = [2, 0, 1]} : f32[4, 2, 3]
  return %y
})");
  Expected<StridedView> V =
      planTranspose(G.args({G.shaped({2, 3, 4})}, {G.shaped({4, 2, 3})}));
  ASSERT_TRUE(bool(V)) << toString(V.takeError());
  EXPECT_EQ(V->Out, shape({4, 2, 3}));
  EXPECT_EQ(V->Strides, shape({1, 12, 4}));
  EXPECT_EQ(V->Base, 0);

  std::string Message =
      errorOf(planTranspose(G.args({G.shaped({2, 3})}, {G.shaped({3, 2})})));
  EXPECT_TRUE(contains(Message, "'perm' has 3 entries for rank 2")) << Message;

  OneNode Bad(R"(
graph @g(%x: f32[2, 3]) {
  %y = Transpose(%x) {perm = [0, 0]} : f32[2, 2]
  return %y
})");
  Message = errorOf(
      planTranspose(Bad.args({Bad.shaped({2, 3})}, {Bad.shaped({2, 2})})));
  EXPECT_TRUE(contains(Message, "'perm' is not a permutation")) << Message;
}

TEST(RuntimeOpShapes, ConcatAndGather) {
  OneNode C(R"(
graph @g(%a: f32[2, 3], %b: f32[2, 5]) {
  %y = Concat(%a, %b) {axis = -1} : f32[2, 8]
  return %y
})");
  Expected<ConcatPlan> P = planConcat(
      C.args({C.shaped({2, 3}), C.shaped({2, 5})}, {C.shaped({2, 8})}));
  ASSERT_TRUE(bool(P)) << toString(P.takeError());
  EXPECT_EQ(P->Axis, 1u);
  EXPECT_EQ(P->Out, shape({2, 8}));
  std::string Message = errorOf(planConcat(
      C.args({C.shaped({2, 3}), C.shaped({3, 5})}, {C.shaped({2, 8})})));
  EXPECT_TRUE(contains(Message, "do not concatenate along axis 1")) << Message;

  OneNode G(R"(
graph @g(%x: f32[4, 10, 3], %i: i64[2, 5]) {
  %y = Gather(%x, %i) {axis = 1} : f32[4, 2, 5, 3]
  return %y
})");
  Expected<GatherPlan> Q = planGather(
      G.args({G.shaped({4, 10, 3}), G.shaped({2, 5}, ElementType::I64)},
             {G.shaped({4, 2, 5, 3})}));
  ASSERT_TRUE(bool(Q)) << toString(Q.takeError());
  EXPECT_EQ(Q->Axis, 1u);
  EXPECT_EQ(Q->Outer, 4);
  EXPECT_EQ(Q->Len, 10);
  EXPECT_EQ(Q->Inner, 3);
  EXPECT_EQ(Q->Count, 10);
}

TEST(RuntimeOpShapes, GatherGradChecksDY) {
  OneNode G(R"(
graph @g(%x: f32[10, 3], %i: i64[4], %dy: f32[4, 3]) {
  %y = GatherGrad(%x, %i, %dy) : f32[10, 3]
  return %y
})");
  Expected<GatherPlan> P = planGatherGrad(G.args(
      {G.shaped({10, 3}), G.shaped({4}, ElementType::I64), G.shaped({4, 3})},
      {G.shaped({10, 3})}));
  ASSERT_TRUE(bool(P)) << toString(P.takeError());
  EXPECT_EQ(P->Count, 4);
  EXPECT_EQ(P->Inner, 3);
  std::string Message = errorOf(planGatherGrad(G.args(
      {G.shaped({10, 3}), G.shaped({4}, ElementType::I64), G.shaped({5, 3})},
      {G.shaped({10, 3})})));
  EXPECT_TRUE(contains(Message, "dY f32[5, 3] is not the shape of "
                                "Gather(data, indices)"))
      << Message;
}

//===----------------------------------------------------------------------===//
// Elementwise, softmax, norms, reductions, casts, the loss
//===----------------------------------------------------------------------===//

TEST(RuntimeOpShapes, Broadcasts) {
  OneNode G(R"(
graph @g(%a: f32[2, 1, 3], %b: f32[4, 1]) {
  %c = Add(%a, %b) : f32[2, 4, 3]
  return %c
})");
  Expected<Shape> Out = planBinaryBroadcast(
      G.args({G.shaped({2, 1, 3}), G.shaped({4, 1})}, {G.shaped({2, 4, 3})}));
  ASSERT_TRUE(bool(Out)) << toString(Out.takeError());
  EXPECT_EQ(*Out, shape({2, 4, 3}));
  std::string Message = errorOf(planBinaryBroadcast(
      G.args({G.shaped({2, 3}), G.shaped({4})}, {G.shaped({2, 3})})));
  EXPECT_TRUE(contains(Message, "operands f32[2, 3] and f32[4] do not "
                                "broadcast"))
      << Message;
  Message = errorOf(
      planBroadcast(G.args({G.shaped({2, 3}), G.shaped({1, 3}), G.shaped({2})},
                           {G.shaped({2, 3})})));
  EXPECT_TRUE(contains(Message, "operands do not broadcast")) << Message;
}

TEST(RuntimeOpShapes, SoftmaxAndAxes) {
  OneNode G(R"(
graph @g(%x: f32[2, 3, 4]) {
  %y = Softmax(%x) {axis = 1} : f32[2, 3, 4]
  return %y
})");
  Expected<AxisExtents> P =
      planSoftmax(G.args({G.shaped({2, 3, 4})}, {G.shaped({2, 3, 4})}));
  ASSERT_TRUE(bool(P)) << toString(P.takeError());
  EXPECT_EQ(P->Axis, 1u);
  EXPECT_EQ(P->Outer, 2);
  EXPECT_EQ(P->Len, 3);
  EXPECT_EQ(P->Inner, 4);
  std::string Message =
      errorOf(planSoftmax(G.args({G.shaped({2})}, {G.shaped({2})})));
  EXPECT_TRUE(contains(Message, "axis 1 is out of range for rank 1"))
      << Message;
}

TEST(RuntimeOpShapes, NormsAndTheirGradients) {
  OneNode G(R"(
graph @g(%x: f32[2, 3, 4], %s: f32[3, 4]) {
  %y = LayerNormalization(%x, %s) {axis = 1} : f32[2, 3, 4]
  return %y
})");
  KernelArgs A =
      G.args({G.shaped({2, 3, 4}), G.shaped({3, 4})}, {G.shaped({2, 3, 4})});
  Expected<NormPlan> P = planNorm(A);
  ASSERT_TRUE(bool(P)) << toString(P.takeError());
  EXPECT_EQ(P->Rows, 2);
  EXPECT_EQ(P->Len, 12);
  EXPECT_EQ(P->Row, shape({3, 4}));
  EXPECT_EQ(getNormStatShape(A.In[0].getShape(), P->Axis), shape({2, 1, 1}));
  EXPECT_EQ(errorOf(checkBroadcastsToRow(A, 1, P->Row)), "");
  KernelArgs Wide =
      G.args({G.shaped({2, 3, 4}), G.shaped({1, 3, 4})}, {G.shaped({2, 3, 4})});
  std::string Message = errorOf(checkBroadcastsToRow(Wide, 1, P->Row));
  EXPECT_TRUE(contains(Message, "operand 1 f32[1, 3, 4] does not broadcast to "
                                "the normalised shape"))
      << Message;

  OneNode D(R"(
graph @g(%dy: f32[2, 4], %x: f32[2, 4], %s: f32[4]) {
  %dx, %ds = RMSNormalizationGrad(%dy, %x, %s) : f32[2, 4], f32[4]
  return %dx, %ds
})");
  Expected<NormPlan> Q =
      planNormGrad(D.args({D.shaped({2, 4}), D.shaped({2, 4}), D.shaped({4})},
                          {D.shaped({2, 4}), D.shaped({4})}));
  ASSERT_TRUE(bool(Q)) << toString(Q.takeError());
  EXPECT_EQ(Q->Rows, 2);
  EXPECT_EQ(Q->Len, 4);
  Message = errorOf(
      planNormGrad(D.args({D.shaped({2, 4}), D.shaped({2, 4}), D.shaped({3})},
                          {D.shaped({2, 4}), D.shaped({4})})));
  EXPECT_TRUE(contains(Message, "scale f32[3] must have one value per "
                                "normalised element (4)"))
      << Message;
  Message = errorOf(
      planNormGrad(D.args({D.shaped({2, 5}), D.shaped({2, 4}), D.shaped({4})},
                          {D.shaped({2, 4}), D.shaped({4})})));
  EXPECT_TRUE(contains(Message, "dY f32[2, 5] and X f32[2, 4] differ"))
      << Message;
}

TEST(RuntimeOpShapes, Reduce) {
  OneNode G(R"(
graph @g(%x: f32[2, 3, 4]) {
  %y = ReduceSum(%x) {axes = [0, -1], keepdims = 0} : f32[3]
  return %y
})");
  auto NoOperands = [](unsigned) -> Expected<Shape> {
    ADD_FAILURE() << "axes come from the attribute";
    return Shape();
  };
  Expected<ReducePlan> P =
      planReduce(G.args({G.shaped({2, 3, 4})}, {G.shaped({3})}), NoOperands);
  ASSERT_TRUE(bool(P)) << toString(P.takeError());
  EXPECT_FALSE(P->Noop);
  EXPECT_EQ(P->Kept, shape({1, 3, 1}));
  EXPECT_EQ(P->Red, shape({2, 1, 4}));
  EXPECT_EQ(P->Count, 8);
  std::string Message = errorOf(planReduce(
      G.args({G.shaped({2, 3, 4})}, {G.shaped({1, 3, 1})}), NoOperands));
  EXPECT_TRUE(contains(Message, "result 0 has shape [3]")) << Message;

  OneNode N(R"(
graph @g(%x: f32[2, 3], %a: i64[0]) {
  %y = ReduceMean(%x, %a) {noop_with_empty_axes = 1} : f32[2, 3]
  return %y
})");
  Expected<ReducePlan> Q =
      planReduce(N.args({N.shaped({2, 3}), N.ints({})}, {N.shaped({2, 3})}),
                 [&](unsigned I) -> Expected<Shape> {
                   EXPECT_EQ(I, 1u);
                   return Shape();
                 });
  ASSERT_TRUE(bool(Q)) << toString(Q.takeError());
  EXPECT_TRUE(Q->Noop);
}

TEST(RuntimeOpShapes, CastAndLoss) {
  OneNode G(R"(
graph @g(%x: f32[2, 3]) {
  %y = Cast(%x) {to = "bf16"} : bf16[2, 3]
  return %y
})");
  Expected<ElementType> To = planCast(
      G.args({G.shaped({2, 3})}, {G.shaped({2, 3}, ElementType::BF16)}));
  ASSERT_TRUE(bool(To)) << toString(To.takeError());
  EXPECT_EQ(*To, ElementType::BF16);

  OneNode L(R"(
graph @g(%z: f32[2, 3, 7], %l: i64[2, 3]) {
  %y = CrossEntropyLoss(%z, %l) {ignore_index = 0, reduction = "sum"} : f32[]
  return %y
})");
  Expected<LossPlan> P =
      planLoss(L.args({L.shaped({2, 3, 7}), L.shaped({2, 3}, ElementType::I64)},
                      {L.shaped({})}),
               0, 1);
  ASSERT_TRUE(bool(P)) << toString(P.takeError());
  EXPECT_EQ(P->Rows, 6);
  EXPECT_EQ(P->Classes, 7);
  EXPECT_EQ(P->Ignore, 0);
  EXPECT_FALSE(P->Mean);
  std::string Message = errorOf(
      planLoss(L.args({L.shaped({2, 3, 7}), L.shaped({3, 2}, ElementType::I64)},
                      {L.shaped({})}),
               0, 1));
  EXPECT_TRUE(contains(Message, "labels i64[3, 2] must have the leading "
                                "dimensions of logits f32[2, 3, 7]"))
      << Message;
}

//===----------------------------------------------------------------------===//
// Kernel families
//===----------------------------------------------------------------------===//

TEST(RuntimeOpShapes, KernelFamilies) {
  EXPECT_EQ(getKernelFamily(OpId::Add), KernelFamily::Binary);
  EXPECT_EQ(getKernelFamily(OpId::Or), KernelFamily::Binary);
  EXPECT_EQ(getKernelFamily(OpId::Gelu), KernelFamily::Unary);
  EXPECT_EQ(getKernelFamily(OpId::LogSoftmax), KernelFamily::Softmax);
  EXPECT_EQ(getKernelFamily(OpId::Squeeze), KernelFamily::ReshapeLike);
  EXPECT_EQ(getKernelFamily(OpId::ReduceMax), KernelFamily::Reduce);
  EXPECT_EQ(getKernelFamily(OpId::RMSNormalizationGrad),
            KernelFamily::RMSNormGrad);
  EXPECT_EQ(getKernelFamily(OpId::ShardSlice), KernelFamily::ShardSlice);
  EXPECT_EQ(getKernelFamily(OpId::Opaque), KernelFamily::None);
  EXPECT_TRUE(isCommunicationOp(OpId::AllToAll));
  EXPECT_TRUE(isCommunicationOp(OpId::Recv));
  EXPECT_FALSE(isCommunicationOp(OpId::ShardSlice));
  EXPECT_TRUE(onlyMovesElements(KernelFamily::Slice));
  EXPECT_TRUE(onlyMovesElements(KernelFamily::Cast));
  EXPECT_FALSE(onlyMovesElements(KernelFamily::Binary));
  EXPECT_FALSE(onlyMovesElements(KernelFamily::MatMul));
  EXPECT_EQ(getKernelFamily(OpId::Resize), KernelFamily::Resize);
  EXPECT_EQ(getKernelFamily(OpId::LpPool), KernelFamily::LpPool);
  EXPECT_TRUE(onlyMovesElements(KernelFamily::ReverseSequence));
  EXPECT_FALSE(onlyMovesElements(KernelFamily::Resize));
}

// The table's columns agree with each other and with the CPU backend: every
// op that OpFacts.def gives a kernel family has a CPU kernel (or runs with
// the communicator), every op of the Binary and Unary families names a
// scalar function and only they and Min and Max (of the Sum family) do,
// and only the rules that count per element (or per window tap) take a
// count.
TEST(RuntimeOpShapes, OpFactsAgreeWithTheCpuBackend) {
  for (unsigned I = 0; I != NumOps; ++I) {
    OpId Op = OpId(I);
    const OpFacts &F = getOpFacts(Op);
    SCOPED_TRACE(getOpInfo(Op).Name.str());
    EXPECT_EQ(F.Op, Op);
    if (F.Kernel != KernelFamily::None) {
      EXPECT_TRUE(CpuBackend::hasKernel(Op));
    }
    bool Elementwise =
        F.Kernel == KernelFamily::Binary || F.Kernel == KernelFamily::Unary;
    bool MinMax = Op == OpId::Min || Op == OpId::Max;
    EXPECT_EQ(Elementwise || MinMax, F.Element != ElementFn::None);
    if (F.Flops == FlopRule::PerOutput || F.Flops == FlopRule::PerInput ||
        F.Flops == FlopRule::Window) {
      EXPECT_NE(F.FlopsPerElement, 0);
    } else if (F.Flops != FlopRule::SumOperands) {
      EXPECT_EQ(F.FlopsPerElement, 0);
    }
  }
}

} // namespace
