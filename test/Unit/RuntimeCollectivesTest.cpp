//===- RuntimeCollectivesTest.cpp - Groups and single-rank collectives ----===//
//
// What the CPU backend's communication needs without MPI: the groups of
// ranks from a mesh and an axis (world ranks in row-major order over the
// mesh, the last axis innermost), pipeline peers, the chunk layouts of
// gathers and scatters along any dimension, and the communication kernels
// in a job of one rank (identities, or errors that say why not). The
// multi-rank paths run under mpirun in test/Runtime/mpi-*.test.
//
//===----------------------------------------------------------------------===//

#include "RuntimeTestSupport.h"

#include "runtime/cpu/CollectiveKernels.h"
#include "runtime/cpu/CpuCommunicator.h"

#include "ir/OpFacts.h"

#include <numeric>

using namespace autopar;
using namespace autopar::test;
using namespace llvm;

namespace {

Mesh makeMesh(std::vector<std::pair<std::string, int64_t>> Axes) {
  Mesh M;
  M.Name = "cluster";
  M.Axes = std::move(Axes);
  return M;
}

std::vector<int> groupOf(const Mesh &M, StringRef Axis, int Rank) {
  Expected<SmallVector<int, 8>> G = getMeshGroup(M, Axis, Rank, 8);
  if (!G) {
    ADD_FAILURE() << toString(G.takeError());
    return {};
  }
  return std::vector<int>(G->begin(), G->end());
}

TEST(RuntimeCollectives, MeshCoordinatesAreRowMajor) {
  Mesh M = makeMesh({{"pp", 2}, {"dp", 2}, {"tp", 2}});
  EXPECT_EQ(describeMesh(M), "mesh @cluster = [pp = 2, dp = 2, tp = 2]");
  // Rank 6 = 4 * pp + 2 * dp + tp: pp 1, dp 1, tp 0.
  EXPECT_EQ(getMeshCoordinates(M, 6), (SmallVector<int64_t, 4>{1, 1, 0}));
  EXPECT_EQ(getMeshCoordinates(M, 5), (SmallVector<int64_t, 4>{1, 0, 1}));
  EXPECT_EQ(getMeshCoordinates(M, 0), (SmallVector<int64_t, 4>{0, 0, 0}));
}

TEST(RuntimeCollectives, GroupsShareTheOtherCoordinates) {
  Mesh M = makeMesh({{"pp", 2}, {"dp", 2}, {"tp", 2}});
  // tp is innermost: neighbouring ranks.
  EXPECT_EQ(groupOf(M, "tp", 6), (std::vector<int>{6, 7}));
  EXPECT_EQ(groupOf(M, "tp", 7), (std::vector<int>{6, 7}));
  EXPECT_EQ(groupOf(M, "dp", 6), (std::vector<int>{4, 6}));
  EXPECT_EQ(groupOf(M, "dp", 1), (std::vector<int>{1, 3}));
  EXPECT_EQ(groupOf(M, "pp", 6), (std::vector<int>{2, 6}));
  // Every rank is in exactly one group of each axis, in axis order.
  for (StringRef Axis : {"pp", "dp", "tp"}) {
    std::vector<int> Seen(8, 0);
    for (int R = 0; R != 8; ++R) {
      std::vector<int> G = groupOf(M, Axis, R);
      ASSERT_EQ(G.size(), 2u);
      EXPECT_TRUE(std::is_sorted(G.begin(), G.end()));
      EXPECT_NE(std::find(G.begin(), G.end(), R), G.end());
      if (G[0] == R)
        for (int Member : G)
          ++Seen[Member];
    }
    EXPECT_EQ(Seen, std::vector<int>(8, 1)) << Axis.str();
  }
}

TEST(RuntimeCollectives, GroupsOfUnevenAxes) {
  Mesh M = makeMesh({{"dp", 3}, {"tp", 4}});
  Expected<SmallVector<int, 8>> TP = getMeshGroup(M, "tp", 5, 12);
  ASSERT_TRUE(bool(TP));
  EXPECT_EQ(*TP, (SmallVector<int, 8>{4, 5, 6, 7}));
  Expected<SmallVector<int, 8>> DP = getMeshGroup(M, "dp", 5, 12);
  ASSERT_TRUE(bool(DP));
  EXPECT_EQ(*DP, (SmallVector<int, 8>{1, 5, 9}));
}

TEST(RuntimeCollectives, GroupErrors) {
  Mesh M = makeMesh({{"dp", 2}, {"tp", 2}});
  EXPECT_EQ(toString(getMeshGroup(M, "tp", 0, 2).takeError()),
            "mesh @cluster = [dp = 2, tp = 2] has 4 devices; the job has 2 "
            "ranks (start it with mpirun -np 4)");
  EXPECT_EQ(toString(getMeshGroup(M, "tp", 0, 1).takeError()),
            "mesh @cluster = [dp = 2, tp = 2] has 4 devices; the job has 1 "
            "rank (start it with mpirun -np 4)");
  EXPECT_EQ(toString(getMeshGroup(M, "pp", 0, 4).takeError()),
            "mesh @cluster = [dp = 2, tp = 2] has no axis 'pp'");
}

TEST(RuntimeCollectives, PipelinePeers) {
  Mesh M = makeMesh({{"pp", 4}, {"dp", 2}, {"tp", 2}});
  // Rank 5: pp 1, dp 0, tp 1; stage 2 with the same dp and tp is rank 9.
  Expected<int> Next = getMeshPeer(M, "pp", 2, 5, 16);
  ASSERT_TRUE(bool(Next));
  EXPECT_EQ(*Next, 9);
  Expected<int> Prev = getMeshPeer(M, "pp", 0, 5, 16);
  ASSERT_TRUE(bool(Prev));
  EXPECT_EQ(*Prev, 1);
  EXPECT_EQ(toString(getMeshPeer(M, "pp", 4, 5, 16).takeError()),
            "pp = 4 is not on mesh @cluster = [pp = 4, dp = 2, tp = 2] (pp "
            "has 4)");
}

TEST(RuntimeCollectives, ChunksAlongAnyDimension) {
  // f32[2, 4, 3] in 2 chunks along dimension 1: chunk P is [:, 2P:2P+2, :].
  std::vector<float> In(24);
  std::iota(In.begin(), In.end(), 0.0f);
  SmallVector<int64_t, 4> Shape{2, 4, 3};
  std::vector<float> Packed(24, -1);
  packChunks(In.data(), Packed.data(), Shape, sizeof(float), 1, 2);
  std::vector<float> Expected;
  for (int P = 0; P != 2; ++P)
    for (int O = 0; O != 2; ++O)
      for (int I = 2 * P; I != 2 * P + 2; ++I)
        for (int K = 0; K != 3; ++K)
          Expected.push_back(float(O * 12 + I * 3 + K));
  EXPECT_EQ(Packed, Expected);
  std::vector<float> Back(24, -1);
  unpackChunks(Packed.data(), Back.data(), Shape, sizeof(float), 1, 2);
  EXPECT_EQ(Back, In);
  EXPECT_FALSE(chunksAreContiguous(Shape, 1));
  EXPECT_TRUE(chunksAreContiguous(Shape, 0));
  EXPECT_TRUE(chunksAreContiguous({1, 4, 3}, 1));
}

TEST(RuntimeCollectives, LabelsNest) {
  EXPECT_EQ(CommunicationLabel::current(), "");
  {
    CommunicationLabel Outer("outer");
    EXPECT_EQ(CommunicationLabel::current(), "outer");
    {
      CommunicationLabel Inner("inner");
      EXPECT_EQ(CommunicationLabel::current(), "inner");
    }
    EXPECT_EQ(CommunicationLabel::current(), "outer");
  }
  EXPECT_EQ(CommunicationLabel::current(), "");
  EXPECT_EQ(describeGroup({3}), "rank 3");
  EXPECT_EQ(describeGroup({0, 2}), "ranks [0, 2]");
}

TEST(RuntimeCollectives, BackendRunsCommunicationOps) {
  for (OpId Op : {OpId::AllReduce, OpId::AllGather, OpId::ReduceScatter,
                  OpId::AllToAll, OpId::Send, OpId::Recv, OpId::SendRecv}) {
    EXPECT_TRUE(isCommunicationOp(Op));
    EXPECT_TRUE(CpuBackend::hasKernel(Op));
  }
  EXPECT_FALSE(isCommunicationOp(OpId::Add));
}

// One rank runs a whole-model program: every collective keeps its value.
TEST(RuntimeCollectives, SingleRankCollectivesAreIdentities) {
  std::vector<HostTensor> Out =
      runProgram(R"(
graph @g(%x: f32[2, 4]) {
  mesh @cluster = [dp = 2, tp = 2]
  %r = AllReduce(%x) {axis = "tp", mesh = "cluster"} : f32[2, 4]
  %g = AllGather(%r) {axis = "tp", dim = 1, mesh = "cluster"} : f32[2, 4]
  %s = ReduceScatter(%g) {axis = "dp", dim = 1, mesh = "cluster"} : f32[2, 4]
  %a = AllToAll(%s) {axis = "tp", dst_dim = 1, mesh = "cluster", src_dim = 0} : f32[2, 4]
  %p = SendRecv(%a) {dst_stage = 1, src_stage = 0} : f32[2, 4]
  return %p
}
)",
                 {f32({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8})});
  ASSERT_EQ(Out.size(), 1u);
  EXPECT_EQ(floatsOf(Out[0]), (std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8}));
}

// Per-rank collectives on a mesh of one device, in any element type.
TEST(RuntimeCollectives, SingleRankLocalCollectives) {
  std::vector<HostTensor> Out = runProgram(R"(
graph @g(%x: f32[2, 3]) {
  mesh @one = [dp = 1, tp = 1]
  %h = Cast(%x) {to = "f16"} : f16[2, 3]
  %r = AllReduce(%h) {axis = "dp", mesh = "one"} : f16[2, 3]
  %g = AllGather(%r) {axis = "tp", dim = 1, local = 1, mesh = "one"} : f16[2, 3]
  %s = ReduceScatter(%g) {axis = "dp", dim = 0, local = 1, mesh = "one"} : f16[2, 3]
  %a = AllToAll(%s) {axis = "tp", dst_dim = 1, local = 1, mesh = "one", src_dim = 0} : f16[2, 3]
  %y = Cast(%a) {to = "f32"} : f32[2, 3]
  return %y
}
)",
                                           {f32({2, 3}, {1, 2, 3, 4, 5, 6})});
  ASSERT_EQ(Out.size(), 1u);
  EXPECT_EQ(floatsOf(Out[0]), (std::vector<float>{1, 2, 3, 4, 5, 6}));
}

TEST(RuntimeCollectives, SingleRankErrors) {
  std::string Error;
  runProgram(R"(
graph @g(%x: f32[2, 4]) {
  mesh @cluster = [dp = 2, tp = 2]
  %g = AllGather(%x) {axis = "tp", dim = 1, local = 1, mesh = "cluster"} : f32[2, 8]
  return %g
}
)",
             {f32({2, 4}, std::vector<float>(8))}, &Error);
  EXPECT_EQ(Error, "node '%g' (AllGather): mesh @cluster = [dp = 2, tp = 2] "
                   "has 4 devices; the job has 1 rank (start it with mpirun "
                   "-np 4)");

  runProgram(R"(
graph @g(%x: f32[2]) {
  mesh @cluster = [pp = 2]
  Send(%x) {dst_stage = 1} loc("send_h")
  return %x
}
)",
             {f32({2}, {1, 2})}, &Error);
  EXPECT_EQ(Error,
            "node 'send_h' (Send): a job of one rank has no pipeline stage 1 "
            "(start the job with mpirun, one rank per device)");
}

TEST(RuntimeCollectives, SingleRankCommunicatorNamesTheLabel) {
  SingleRankCommunicator C;
  float In[2] = {1, 2}, Out[2] = {0, 0};
  Tensor TIn(ElementType::F32, {2}, In), TOut(ElementType::F32, {2}, Out);
  CommunicationLabel Label("axis 'tp' of mesh @cluster, node '%y' (AllReduce)");
  EXPECT_EQ(
      toString(C.allReduce(TIn, TOut, {0, 1}, std::chrono::milliseconds(100))),
      "all-reduce (axis 'tp' of mesh @cluster, node '%y' (AllReduce)): "
      "a single-rank job has only rank 0; the group has 2 ranks");
}

} // namespace
