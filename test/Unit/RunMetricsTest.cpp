//===- RunMetricsTest.cpp - Step records and their Prometheus text --------===//
//
// The pieces of `--metrics` and `--metrics-port` that the lit tests reach
// only through whole runs: a record's JSON round trip, the phase and
// micro-batch of a node, how the recorder splits a step, and the
// aggregation over ranks (runtime/RunMetrics.h, runtime/MetricsServer.h).
//
//===----------------------------------------------------------------------===//

#include "runtime/RunMetrics.h"
#include "runtime/MetricsServer.h"

#include "ir/Graph.h"
#include "ir/Parser.h"

#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"

#include "gtest/gtest.h"

using namespace autopar;
using namespace llvm;

namespace {

StepRecord makeRecord(int Rank, double StepSeconds, uint64_t Sent) {
  StepRecord R;
  R.Step = 7;
  R.Rank = Rank;
  R.Host = "n00" + std::to_string(Rank);
  R.Attempt = 2;
  R.Time = 1796000000.125;
  R.StepSeconds = StepSeconds;
  R.ForwardSeconds = 0.25;
  R.IdleSeconds = 0.0625;
  R.Loss = 4.125;
  R.Lr = 3e-4;
  R.GradNorm = 1.5;
  R.DeviceBytes = 1ull << 33;
  R.SentBytes["AllReduce"] = Sent;
  R.OffloadBytes["nvme"] = 4096;
  R.Timeline.push_back({'F', 0, 0.0, 1.5});
  R.Timeline.push_back({'W', -1, 1.5, 2.25});
  return R;
}

TEST(RunMetricsTest, RecordsRoundTrip) {
  StepRecord R = makeRecord(3, 0.5, 1ull << 40);
  std::string Line = R.toJSON();
  EXPECT_EQ(Line.find('\n'), std::string::npos);
  EXPECT_NE(Line.find("\"kind\":\"step\""), std::string::npos);
  EXPECT_NE(Line.find("\"time\":1796000000.125"), std::string::npos);
  EXPECT_EQ(Line.find("loss_scale"), std::string::npos);
  Expected<StepRecord> Back = StepRecord::fromJSON(Line);
  ASSERT_TRUE(bool(Back)) << toString(Back.takeError());
  EXPECT_EQ(Back->Rank, 3);
  EXPECT_EQ(Back->Host, "n003");
  EXPECT_EQ(Back->Attempt, 2);
  EXPECT_DOUBLE_EQ(Back->StepSeconds, 0.5);
  EXPECT_DOUBLE_EQ(*Back->GradNorm, 1.5);
  EXPECT_FALSE(Back->LossScale.has_value());
  EXPECT_EQ(Back->DeviceBytes, 1ull << 33);
  EXPECT_EQ(Back->SentBytes["AllReduce"], 1ull << 40);
  EXPECT_EQ(Back->OffloadBytes["nvme"], 4096u);
  ASSERT_EQ(Back->Timeline.size(), 2u);
  EXPECT_EQ(Back->Timeline[1].Phase, 'W');
  EXPECT_EQ(Back->Timeline[1].MicroBatch, -1);
  EXPECT_DOUBLE_EQ(Back->Timeline[1].EndMs, 2.25);
  // The same figures, the same bytes.
  EXPECT_EQ(Back->toJSON(), Line);
  EXPECT_FALSE(bool(StepRecord::fromJSON("{\"kind\":\"event\"}")));
  consumeError(StepRecord::fromJSON("{\"kind\":\"event\"}").takeError());
}

std::unique_ptr<Module> parse(StringRef Text, SourceMgr &SM) {
  SM.AddNewSourceBuffer(MemoryBuffer::getMemBufferCopy(Text, "t.air"), SMLoc());
  DiagnosticEngine Diag(&SM, "t.air");
  return parseModule(SM, Diag);
}

TEST(RunMetricsTest, PhasesAndMicroBatches) {
  SourceMgr SM;
  std::unique_ptr<Module> M = parse(R"(
graph @g(%a: f32[2, 2]) {
  %x.mb12.stage1 = Add(%a, %a) : f32[2, 2] loc("/h.0/Add")
  %y.mb3 = Mul(%x.mb12.stage1, %a) : f32[2, 2] loc("/h.0/Mul.grad.mb3")
  %z = GeluGrad(%y.mb3, %a) {approximate = "none"} : f32[2, 2]
  %w.mb = Add(%z, %a) : f32[2, 2] loc("/h.0/Add.gradient")
  return %w.mb
})",
                                    SM);
  ASSERT_TRUE(M);
  std::vector<const Node *> Nodes;
  for (const Node &N : M->getGraphs().front()->getNodes())
    Nodes.push_back(&N);
  ASSERT_EQ(Nodes.size(), 4u);
  EXPECT_EQ(getNodePhase(*Nodes[0]), 'F');
  EXPECT_EQ(getNodeMicroBatch(*Nodes[0]), 12);
  EXPECT_EQ(getNodePhase(*Nodes[1]), 'B');
  EXPECT_EQ(getNodeMicroBatch(*Nodes[1]), 3);
  // A gradient op without a name, and a name that only starts with .grad.
  EXPECT_EQ(getNodePhase(*Nodes[2]), 'B');
  EXPECT_EQ(getNodeMicroBatch(*Nodes[2]), -1);
  EXPECT_EQ(getNodePhase(*Nodes[3]), 'F');
  EXPECT_EQ(getNodeMicroBatch(*Nodes[3]), -1);

  // The recorder merges consecutive nodes of one phase and micro-batch and
  // counts the time outside nodes as idle.
  using Clock = std::chrono::steady_clock;
  Clock::time_point T0 = Clock::now();
  auto At = [&](double Ms) {
    return T0 + std::chrono::duration_cast<Clock::duration>(
                    std::chrono::duration<double, std::milli>(Ms));
  };
  StepMetricsRecorder Rec;
  Rec.beginStep(T0);
  Rec.record(*Nodes[0], At(1), At(2));
  Rec.record(*Nodes[1], At(2), At(4));
  Rec.record(*Nodes[2], At(4), At(5));
  Rec.record(*Nodes[3], At(5), At(6));
  StepRecord R = Rec.finishStep(At(10));
  EXPECT_NEAR(R.StepSeconds, 0.010, 1e-9);
  EXPECT_NEAR(R.ForwardSeconds, 0.002, 1e-9);
  EXPECT_NEAR(R.BackwardSeconds, 0.003, 1e-9);
  EXPECT_NEAR(R.IdleSeconds, 0.005, 1e-9);
  ASSERT_EQ(R.Timeline.size(), 4u);
  EXPECT_EQ(R.Timeline[1].Phase, 'B');
  EXPECT_EQ(R.Timeline[2].MicroBatch, -1);
  EXPECT_NEAR(R.Timeline[3].EndMs, 6.0, 1e-6);
}

TEST(RunMetricsTest, PrometheusAggregatesOverRanks) {
  std::vector<StepRecord> Latest = {
      makeRecord(0, 0.4, 10), makeRecord(1, 0.1, 20), makeRecord(2, 0.3, 30),
      makeRecord(3, 0.2, 40)};
  MetricsTotals Totals;
  Totals.add(Latest);
  Totals.add(Latest);
  std::string Text = formatPrometheus(Latest, Totals);
  EXPECT_NE(Text.find("autopar_ranks 4\n"), std::string::npos);
  EXPECT_NE(Text.find("autopar_steps_total 2\n"), std::string::npos);
  EXPECT_NE(Text.find("# TYPE autopar_step_seconds gauge\n"),
            std::string::npos);
  EXPECT_NE(Text.find("autopar_step_seconds{stat=\"min\"} 0.1\n"),
            std::string::npos);
  // The median of four is the mean of the middle two.
  EXPECT_NE(Text.find("autopar_step_seconds{stat=\"median\"} 0.25\n"),
            std::string::npos);
  EXPECT_NE(Text.find("autopar_step_seconds{stat=\"max\"} 0.4\n"),
            std::string::npos);
  EXPECT_NE(Text.find("autopar_sent_bytes_total{op=\"AllReduce\"} 200\n"),
            std::string::npos);
  EXPECT_NE(Text.find("autopar_grad_norm 1.5\n"), std::string::npos);
  EXPECT_EQ(Text.find("autopar_loss_scale"), std::string::npos);
  // Before the first step: the job's size only.
  std::string Empty = formatPrometheus({}, MetricsTotals());
  EXPECT_NE(Empty.find("autopar_ranks 0\n"), std::string::npos);
  EXPECT_EQ(Empty.find("autopar_step_seconds"), std::string::npos);
}

} // namespace
