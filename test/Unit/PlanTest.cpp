//===- PlanTest.cpp - The plan record, its pins and its JSON form ---------===//

#include "ir/Plan.h"

#include "llvm/Support/FormatVariadic.h"

#include <gtest/gtest.h>

using namespace autopar;
using namespace llvm;

namespace {

PlanRecord makeRecord() {
  PlanRecord R;
  R.AutoparVersion = "0.1.0";
  R.Model = "m.onnx";
  R.ModelSha256 = "ab";
  R.GlobalBatch = 16;
  R.Inputs = PlanInputs{16, "tp=2", {"sequence=16"}, "", false, 3, {}};
  AttrDict Cluster;
  Cluster.set("name", Attribute::getString("h100"));
  Cluster.set("num_gpus", Attribute::getInt(8));
  Cluster.set("gpus_per_node", Attribute::getInt(8));
  Cluster.set("latency_s", Attribute::getFloat(2.5e-6));
  R.Cluster = Attribute::getDict(std::move(Cluster));
  R.ClusterName = "h100";
  R.NumGpus = 8;
  R.GpusPerNode = 8;
  R.Shape = ModelShape{2, 64, 4, 16, 100, {1, 1}};
  R.Config.TP = 2;
  R.Config.PP = 2;
  R.Config.DP = 2;
  R.Config.MicroBatch = 2;
  R.Config.MicroBatches = 4;
  R.Config.Schedule = ScheduleKind::GPipe;
  R.Config.Zero = 1;
  R.Config.Offload = OffloadKind::OptimizerCpu;
  R.Config.Attention = AttentionKernel::Flash;
  R.Config.DpOverlap = false;
  R.Config.StageUnits = {2, 2};
  R.Predicted.StepSeconds = 0.125;
  R.Predicted.MemoryCapacityBytes = 85899345920.0;
  R.Memory = {StageMemory{1, 2, 3, 4, 5, 6, 21}, StageMemory{}};
  R.TrainingPipelines = {"extract-stage{stage=0}", "extract-stage{stage=1}"};
  return R;
}

TEST(PlanTest, AttributesRoundTrip) {
  PlanRecord R = makeRecord();
  Expected<PlanRecord> Back = decodePlan(encodePlan(R));
  ASSERT_TRUE(bool(Back)) << toString(Back.takeError());
  EXPECT_EQ(Back->Config.str(), R.Config.str());
  EXPECT_EQ(Back->Config.StageUnits, R.Config.StageUnits);
  EXPECT_EQ(Back->Config.MicroBatches, 4);
  EXPECT_EQ(Back->Inputs->Dims, R.Inputs->Dims);
  EXPECT_EQ(Back->Inputs->Top, 3u);
  EXPECT_EQ(Back->Memory.size(), 2u);
  EXPECT_EQ(Back->Memory[0].Total, 21);
  EXPECT_EQ(Back->TrainingPipelines, R.TrainingPipelines);
  EXPECT_EQ(Back->ClusterName, "h100");
  EXPECT_TRUE(encodePlan(*Back) == encodePlan(R));
  EXPECT_FALSE(bool(checkPlanInvariants(*Back, "")));
}

// `--freeze` patterns are recorded when there are some (absent otherwise,
// so that plans without them keep their bytes).
TEST(PlanTest, FreezeRoundTrip) {
  PlanRecord R = makeRecord();
  EXPECT_EQ(planToJSON(R).find("\"freeze\""), std::string::npos);
  R.Inputs->Freeze = {"rotary_emb", "^model\\.layers\\.0\\."};
  std::string Json = planToJSON(R);
  EXPECT_NE(Json.find("\"freeze\": ["), std::string::npos);
  Expected<PlanRecord> Back = parsePlanJSON(Json, "plan.json");
  ASSERT_TRUE(bool(Back)) << toString(Back.takeError());
  EXPECT_EQ(Back->Inputs->Freeze, R.Inputs->Freeze);
  EXPECT_EQ(planToJSON(*Back), Json);
}

// plan.json is the same attributes: written, read and written again, the
// same bytes.
TEST(PlanTest, JSONRoundTrip) {
  std::string Json = planToJSON(makeRecord());
  Expected<PlanRecord> Back = parsePlanJSON(Json, "plan.json");
  ASSERT_TRUE(bool(Back)) << toString(Back.takeError());
  EXPECT_EQ(planToJSON(*Back), Json);
  EXPECT_EQ(Back->Config.str(), makeRecord().Config.str());
  EXPECT_NE(Json.find("\"dp_overlap\": false"), std::string::npos);
}

TEST(PlanTest, ErrorsNameTheKey) {
  AttrDict A = encodePlan(makeRecord());
  AttrDict Plan = A.get("plan")->getDict();
  Plan.erase("mbs");
  A.set("plan", Attribute::getDict(Plan));
  Expected<PlanRecord> R = decodePlan(A);
  ASSERT_FALSE(bool(R));
  EXPECT_EQ(toString(R.takeError()), "'plan.mbs' is missing");

  Plan.set("mbs", Attribute::getString("2"));
  A.set("plan", Attribute::getDict(Plan));
  R = decodePlan(A);
  ASSERT_FALSE(bool(R));
  EXPECT_EQ(toString(R.takeError()), "'plan.mbs' is not an integer");
}

TEST(PlanTest, Invariants) {
  PlanRecord R = makeRecord();
  R.Config.VPP = 2; // gpipe takes vpp 1
  R.GlobalBatch = 17;
  R.Config.TrainPrecision = Precision::FP16;
  R.Config.GradReduce = Precision::BF16; // fp32 or the compute precision
  std::string Message = toString(checkPlanInvariants(R, "p: "));
  EXPECT_NE(Message.find("p: global_batch 17 != plan.mbs"), std::string::npos)
      << Message;
  EXPECT_NE(Message.find("p: the gpipe schedule needs plan.vpp == 1, got 2"),
            std::string::npos)
      << Message;
  EXPECT_NE(
      Message.find("p: plan.grad_reduce bf16 must be fp32 or plan.precision "
                   "fp16"),
      std::string::npos)
      << Message;
}

// Pins come from the same table as the configuration: every key parses,
// prints back and applies.
TEST(PlanTest, Fixes) {
  Expected<PlanFixes> F = PlanFixes::parse(
      "tp=4,pp=2,dp=8,mbs=2,schedule=interleaved,vpp=3,zero=3,recompute=full,"
      "sp=on,offload=nvme,precision=fp16,attention=flash,dp-overlap=off,"
      "grad-reduce=fp16,grad-bucket=40000000,fusion=off,"
      "verify-transfers=on");
  ASSERT_TRUE(bool(F)) << toString(F.takeError());
  PlanConfig C;
  F->applyTo(C);
  EXPECT_EQ(C.str(), "tp=4,pp=2,dp=8,mbs=2,schedule=interleaved,vpp=3,zero=3,"
                     "recompute=full,sp=on,offload=nvme,precision=fp16,"
                     "attention=flash,dp-overlap=off,grad-reduce=fp16,"
                     "grad-bucket=40000000,fusion=off,verify-transfers=on");
  EXPECT_EQ(F->str(), C.str());
  EXPECT_EQ(PlanFixes::parse("")->str(), "");

  // A plan written before grad-bucket reads DDP's 25 MiB of fp32
  // gradients, what priced it.
  EXPECT_EQ(PlanConfig().GradBucket, 25 * 1024 * 1024 / 4);
  // And before fusion, fused kernels.
  EXPECT_TRUE(PlanConfig().Fusion);
  Expected<PlanFixes> Bad = PlanFixes::parse("grad-bucket=0");
  ASSERT_FALSE(bool(Bad));
  consumeError(Bad.takeError());
  Bad = PlanFixes::parse("zero=4");
  ASSERT_FALSE(bool(Bad));
  EXPECT_EQ(toString(Bad.takeError()), "--fix zero=4: expected 0, 1, 2 or 3");
  Bad = PlanFixes::parse("precision=tf32");
  ASSERT_FALSE(bool(Bad));
  EXPECT_EQ(toString(Bad.takeError()),
            "--fix precision=tf32: expected bf16, fp16 or fp32");
  Bad = PlanFixes::parse("tp=0");
  ASSERT_FALSE(bool(Bad));
  EXPECT_EQ(toString(Bad.takeError()),
            "--fix tp=0: expected a positive integer");
}

TEST(PlanTest, JSONConversionKeepsKinds) {
  json::Value V = json::Object{{"i", 3},
                               {"f", 0.5},
                               {"ints", json::Array{1, 2}},
                               {"floats", json::Array{1, 2.5}},
                               {"names", json::Array{"a", "b"}},
                               {"b", true}};
  Attribute A = attributeFromJSON(V);
  ASSERT_TRUE(A.isa(Attribute::Kind::Dict));
  const AttrDict &D = A.getDict();
  EXPECT_TRUE(D.get("i")->isa(Attribute::Kind::Int));
  EXPECT_TRUE(D.get("f")->isa(Attribute::Kind::Float));
  EXPECT_TRUE(D.get("ints")->isa(Attribute::Kind::IntList));
  EXPECT_TRUE(D.get("floats")->isa(Attribute::Kind::FloatList));
  EXPECT_TRUE(D.get("names")->isa(Attribute::Kind::List));
  EXPECT_TRUE(D.get("b")->isa(Attribute::Kind::Bool));
  EXPECT_EQ(formatv("{0}", attributeToJSON(A)).str(), formatv("{0}", V).str());
}

} // namespace
