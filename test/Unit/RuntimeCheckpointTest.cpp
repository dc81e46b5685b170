//===- RuntimeCheckpointTest.cpp - Checkpoints on disk --------------------===//
//
// The checkpoint format of runtime/Checkpoint.h: folder and file names, the
// index's JSON (a round trip, and each malformed field refused with a
// message naming it), shards written, committed and read back byte for
// byte, CRC32 and truncation checks naming the tensor, the match of a
// checkpoint's tensors against a program's parameters, `latest`, and which
// old checkpoints are deleted. Also the executor's readParam / writeParam.
//
//===----------------------------------------------------------------------===//

#include "RuntimeTestSupport.h"

#include "runtime/Checkpoint.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <fstream>

using namespace autopar;
using namespace autopar::test;
using namespace llvm;

namespace {

std::string errorText(Error E) { return E ? toString(std::move(E)) : ""; }

/// A fresh folder, removed with everything in it at the end of the test.
class CheckpointTest : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_FALSE(sys::fs::createUniqueDirectory("autopar-ckpt", Root));
  }
  void TearDown() override { sys::fs::remove_directories(Root); }

  std::string path(StringRef A, StringRef B = "", StringRef C = "") const {
    SmallString<256> P(Root);
    for (StringRef Part : {A, B, C})
      if (!Part.empty())
        sys::path::append(P, Part);
    return std::string(P);
  }
  static void writeText(const std::string &Path, StringRef Text) {
    std::ofstream(Path, std::ios::binary) << Text.str();
  }
  static std::string readText(const std::string &Path) {
    std::ifstream In(Path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(In), {});
  }

  /// Three tensors of different types, an empty one included.
  std::vector<CheckpointTensorSpec> specs() const {
    std::vector<CheckpointTensorSpec> S(4);
    S[0].Name = "w";
    S[0].Elem = ElementType::F32;
    S[0].Shape = {2, 3};
    S[1].Name = "adamw.m.w";
    S[1].Elem = ElementType::F32;
    S[1].Shape = {2, 3};
    S[2].Name = "ids";
    S[2].Elem = ElementType::I64;
    S[2].Shape = {5};
    S[3].Name = "empty";
    S[3].Elem = ElementType::Bool;
    S[3].Shape = {0, 4};
    return S;
  }
  /// Distinct bytes per tensor and step.
  static std::vector<uint8_t> bytesOf(const CheckpointTensorSpec &S,
                                      int64_t Step) {
    size_t N = size_t(getNumElements(S.Shape)) * getElementSize(S.Elem);
    std::vector<uint8_t> B(N);
    for (size_t I = 0; I != N; ++I)
      B[I] = uint8_t(I * 7 + S.Name.size() * 13 + Step);
    return B;
  }
  CheckpointIndex meta(int64_t Step) const {
    CheckpointIndex M;
    M.Step = Step;
    M.Program = "train.air";
    M.Graph = "main";
    M.Data = "tokens.i32";
    M.DataPosition = uint64_t(Step) * 16;
    M.DataRngState = 0xfedcba9876543210ULL;
    return M;
  }
  /// Writes and commits the checkpoint of Step.
  void save(int64_t Step) {
    std::vector<CheckpointTensorSpec> S = specs();
    auto Read = [&](size_t I) -> Expected<std::vector<uint8_t>> {
      return bytesOf(S[I], Step);
    };
    ASSERT_EQ(errorText(writeCheckpointShard(Root, meta(Step), S, Read)), "");
    ASSERT_EQ(errorText(commitCheckpoint(Root, Step, 1)), "");
  }
  /// Reads the checkpoint of Step back: the error text, or "" and Out.
  std::string load(int64_t Step,
                   std::vector<std::pair<std::string, std::vector<uint8_t>>>
                       *Out = nullptr) {
    Expected<CheckpointIndex> Index = readCheckpointIndex(Root, Step, 0);
    if (!Index)
      return toString(Index.takeError());
    if (Error E = matchCheckpointTensors(*Index, specs(), "index"))
      return toString(std::move(E));
    return errorText(readCheckpointTensors(
        Root, *Index, [&](const CheckpointTensor &T, ArrayRef<uint8_t> B) {
          if (Out)
            Out->emplace_back(T.Name, std::vector<uint8_t>(B.begin(), B.end()));
          return Error::success();
        }));
  }
  std::vector<std::string> listRoot() const {
    std::vector<std::string> Names;
    std::error_code EC;
    for (sys::fs::directory_iterator It(Root, EC), End; It != End && !EC;
         It.increment(EC))
      Names.push_back(sys::path::filename(It->path()).str());
    llvm::sort(Names);
    return Names;
  }

  SmallString<128> Root;
};

TEST(CheckpointNames, StepFolders) {
  EXPECT_EQ(getCheckpointName(0), "step_0");
  EXPECT_EQ(getCheckpointName(1234), "step_1234");
  EXPECT_EQ(parseCheckpointName("step_0"), std::optional<int64_t>(0));
  EXPECT_EQ(parseCheckpointName("step_1234"), std::optional<int64_t>(1234));
  for (StringRef Bad : {"step_", "step_01", "step_-1", "step_1x", "step_1.tmp",
                        "latest", "step_99999999999999999999", "../step_1"})
    EXPECT_EQ(parseCheckpointName(Bad), std::nullopt) << Bad.str();
  EXPECT_EQ(getCheckpointShardName(3), "rank3.bin");
  EXPECT_EQ(getCheckpointIndexName(3), "rank3.json");
}

TEST(CheckpointIndexTest, RoundTrip) {
  CheckpointIndex I;
  I.Step = 42;
  I.Rank = 1;
  I.NumRanks = 4;
  I.Program = "rank1.air";
  I.Graph = "g";
  I.Data = "random";
  I.DataPosition = 17;
  I.DataRngState = ~uint64_t(0);
  I.File = "rank1.bin";
  I.FileSize = 128 + 40;
  CheckpointTensor A;
  A.Name = "a";
  A.Elem = ElementType::F32;
  A.Shape = {2, 3};
  A.Offset = 64;
  A.Length = 24;
  A.Crc32 = 0xffffffffu;
  CheckpointTensor B;
  B.Name = "b.c";
  B.Elem = ElementType::I64;
  B.Shape = {5};
  B.Offset = 128;
  B.Length = 40;
  B.Crc32 = 7;
  I.Tensors = {A, B};
  std::string Text = I.toJSON();
  Expected<CheckpointIndex> P = CheckpointIndex::parse(Text, "x.json");
  ASSERT_TRUE(bool(P)) << toString(P.takeError());
  EXPECT_EQ(P->Step, 42);
  EXPECT_EQ(P->Rank, 1);
  EXPECT_EQ(P->NumRanks, 4);
  EXPECT_EQ(P->Program, "rank1.air");
  EXPECT_EQ(P->Graph, "g");
  EXPECT_EQ(P->Data, "random");
  EXPECT_EQ(P->DataPosition, 17u);
  EXPECT_EQ(P->DataRngState, ~uint64_t(0));
  EXPECT_EQ(P->File, "rank1.bin");
  EXPECT_EQ(P->FileSize, I.FileSize);
  ASSERT_EQ(P->Tensors.size(), 2u);
  for (size_t K = 0; K != 2; ++K) {
    const CheckpointTensor &X = I.Tensors[K], &Y = P->Tensors[K];
    EXPECT_EQ(X.Name, Y.Name);
    EXPECT_EQ(X.Elem, Y.Elem);
    EXPECT_EQ(ArrayRef<int64_t>(X.Shape), ArrayRef<int64_t>(Y.Shape));
    EXPECT_EQ(X.Offset, Y.Offset);
    EXPECT_EQ(X.Length, Y.Length);
    EXPECT_EQ(X.Crc32, Y.Crc32);
  }
  // The text is stable: writing the parsed index gives the same text.
  EXPECT_EQ(P->toJSON(), Text);
}

/// The index text with the first occurrence of From replaced by To.
static std::string mutate(std::string Text, StringRef From, StringRef To) {
  size_t At = Text.find(From.str());
  EXPECT_NE(At, std::string::npos) << From.str();
  if (At != std::string::npos)
    Text.replace(At, From.size(), To.str());
  return Text;
}

TEST(CheckpointIndexTest, RefusesMalformedFields) {
  CheckpointIndex I;
  I.Step = 3;
  I.File = "rank0.bin";
  I.FileSize = 64 + 24;
  CheckpointTensor A;
  A.Name = "a";
  A.Shape = {2, 3};
  A.Offset = 64;
  A.Length = 24;
  I.Tensors = {A};
  std::string Good = I.toJSON();
  ASSERT_TRUE(bool(CheckpointIndex::parse(Good, "i.json")));
  struct Case {
    std::string Text;
    std::string Message;
  } Cases[] = {
      {"{", "checkpoint index 'i.json': "},
      {"[]", "checkpoint index 'i.json' is not a JSON object"},
      {mutate(Good, "\"autopar-checkpoint\"", "\"other\""),
       "format is 'other', not 'autopar-checkpoint'"},
      {mutate(Good, "\"version\": 1", "\"version\": 2"),
       "version 2 is not supported"},
      {mutate(Good, "\"step\": 3", "\"steps\": 3"), "'step' is missing"},
      {mutate(Good, "\"step\": 3", "\"step\": -3"),
       "'step' must be a non-negative integer"},
      {mutate(Good, "\"rank\": 0", "\"rank\": 1"), "rank 1 of 1 ranks"},
      {mutate(Good, "\"file\": \"rank0.bin\"", "\"file\": \"../x.bin\""),
       "'file' must be a file name in the checkpoint's folder"},
      {mutate(Good, "\"rng_state\": \"0x0000000000000000\"",
              "\"rng_state\": \"12\""),
       "data: 'rng_state' must be a hexadecimal integer"},
      {mutate(Good, "\"dtype\": \"f32\"", "\"dtype\": \"f31\""),
       "tensors[0] ('a'): 'dtype' must be an element type, not 'f31'"},
      {mutate(Good, "\"name\": \"a\"", "\"name\": \"\""),
       "tensors[0]: 'name' must be a non-empty string"},
      {mutate(Good, "\"length\": 24", "\"length\": 20"),
       "tensors[0] ('a'): length 20 is not the 24 bytes of f32[2, 3]"},
      {mutate(Good, "\"offset\": 64", "\"offset\": 8"),
       "tensor 'a': offset 8 + length 24 is outside the file's data"},
      {mutate(Good, "\"file_size\": 88", "\"file_size\": 80"),
       "tensor 'a': offset 64 + length 24 is outside the file's data"},
      {mutate(Good, "\"crc32\": 0", "\"crc32\": 4294967296"),
       "'crc32' must be a 32-bit unsigned integer"},
      {mutate(Good, "\"crc32\": 0", "\"crc32\": 1.5"),
       "'crc32' must be a non-negative integer"},
      {mutate(Good, "3\n      ]\n    }",
              "4611686018427387904, 4611686018427387904\n      ]\n    }"),
       "type f32[2, 4611686018427387904, 4611686018427387904] is too large"},
      // The block's place in its logical tensor.
      {mutate(Good, "\"origin\": [\n        0,\n        0",
              "\"origin\": [\n        0,\n        1"),
       "the block at origin 1 of dimension 1 (size 3) overruns its logical "
       "size 3"},
      {mutate(Good, "\"origin\": [\n        0,\n        0\n      ]",
              "\"origin\": [\n        0\n      ]"),
       "logical_shape and origin must have one entry per dimension"},
      {mutate(Good, "\"tensors\": [",
              "\"tensors\": [{\"name\": \"a\", "
              "\"dtype\": \"f32\", \"shape\": [2, 3], "
              "\"offset\": 64, \"length\": 24, "
              "\"crc32\": 0},"),
       "tensor 'a' appears twice"},
  };
  for (const Case &C : Cases) {
    Expected<CheckpointIndex> P = CheckpointIndex::parse(C.Text, "i.json");
    std::string Message = P ? "" : toString(P.takeError());
    EXPECT_NE(Message.find(C.Message), std::string::npos)
        << "expected '" << C.Message << "' in '" << Message << "' for\n"
        << C.Text;
  }
}

// Loss scaling's fields (runtime/LossScaler.h) are optional: an index
// without them, as older runtimes wrote, still parses.
TEST(CheckpointIndexTest, LossScaleFields) {
  CheckpointIndex I;
  I.Step = 5;
  I.File = "rank0.bin";
  I.FileSize = 64;
  std::string Old = I.toJSON();
  EXPECT_EQ(Old.find("optimizer_step"), std::string::npos);
  EXPECT_EQ(Old.find("loss_scale"), std::string::npos);
  Expected<CheckpointIndex> P = CheckpointIndex::parse(Old, "i.json");
  ASSERT_TRUE(bool(P)) << toString(P.takeError());
  EXPECT_FALSE(P->OptimizerStep);
  EXPECT_FALSE(P->LossScale);

  I.OptimizerStep = 4;
  I.LossScale = 32768;
  I.LossScaleGrowthTracker = 1;
  std::string Text = I.toJSON();
  P = CheckpointIndex::parse(Text, "i.json");
  ASSERT_TRUE(bool(P)) << toString(P.takeError());
  EXPECT_EQ(P->OptimizerStep, std::optional<int64_t>(4));
  EXPECT_EQ(P->LossScale, std::optional<double>(32768));
  EXPECT_EQ(P->LossScaleGrowthTracker, 1);
  EXPECT_EQ(P->toJSON(), Text);

  struct Case {
    std::string Text;
    std::string Message;
  } Cases[] = {
      {mutate(Text, "\"optimizer_step\": 4", "\"optimizer_step\": 6"),
       "'optimizer_step' must be at most the step"},
      {mutate(Text, "\"scale\": 32768", "\"scale\": 0"),
       "loss_scale: 'scale' must be a finite number > 0"},
      {mutate(Text, "\"growth_tracker\": 1", "\"growth_tracker\": -1"),
       "loss_scale: 'growth_tracker' must be a non-negative integer"},
  };
  for (const Case &C : Cases) {
    Expected<CheckpointIndex> Bad = CheckpointIndex::parse(C.Text, "i.json");
    ASSERT_FALSE(bool(Bad)) << C.Message;
    EXPECT_NE(toString(Bad.takeError()).find(C.Message), std::string::npos)
        << C.Message;
  }
}

TEST_F(CheckpointTest, WritesCommitsAndReadsBack) {
  EXPECT_EQ(cantFail(readLatestCheckpoint(Root)), std::nullopt);
  save(5);
  EXPECT_EQ(readText(path("latest")), "step_5\n");
  EXPECT_EQ(listRoot(), (std::vector<std::string>{"latest", "step_5"}));
  EXPECT_EQ(cantFail(readLatestCheckpoint(Root)), std::optional<int64_t>(5));

  Expected<CheckpointIndex> Index = readCheckpointIndex(Root, 5, 0);
  ASSERT_TRUE(bool(Index)) << toString(Index.takeError());
  EXPECT_EQ(Index->Program, "train.air");
  EXPECT_EQ(Index->DataPosition, 80u);
  EXPECT_EQ(Index->DataRngState, 0xfedcba9876543210ULL);
  EXPECT_EQ(Index->File, "rank0.bin");
  uint64_t Size = 0;
  ASSERT_FALSE(sys::fs::file_size(path("step_5", "rank0.bin"), Size));
  EXPECT_EQ(Index->FileSize, Size);
  for (const CheckpointTensor &T : Index->Tensors)
    EXPECT_EQ(T.Offset % 64, 0u) << T.Name;

  std::vector<std::pair<std::string, std::vector<uint8_t>>> Got;
  ASSERT_EQ(load(5, &Got), "");
  std::vector<CheckpointTensorSpec> S = specs();
  ASSERT_EQ(Got.size(), S.size());
  for (size_t I = 0; I != S.size(); ++I) {
    EXPECT_EQ(Got[I].first, S[I].Name);
    EXPECT_EQ(Got[I].second, bytesOf(S[I], 5)) << S[I].Name;
  }
  // The index of another step or rank is refused.
  EXPECT_NE(errorText(readCheckpointIndex(Root, 5, 1).takeError()), "");
  sys::fs::copy_file(path("step_5", "rank0.json"), path("step_5", "x.json"));
  ASSERT_FALSE(sys::fs::rename(path("step_5"), path("step_6")));
  EXPECT_NE(errorText(readCheckpointIndex(Root, 6, 0).takeError())
                .find("is rank 0's of step 5, not rank 0's of step 6"),
            std::string::npos);
}

TEST_F(CheckpointTest, CrcAndTruncation) {
  save(1);
  std::string Shard = path("step_1", "rank0.bin");
  std::string Original = readText(Shard);
  Expected<CheckpointIndex> Index = readCheckpointIndex(Root, 1, 0);
  ASSERT_TRUE(bool(Index));
  const CheckpointTensor &M = Index->Tensors[1];
  ASSERT_EQ(M.Name, "adamw.m.w");

  // One flipped bit in adamw.m.w.
  std::string Flipped = Original;
  Flipped[M.Offset + 3] ^= 0x01;
  writeText(Shard, Flipped);
  std::string E = load(1);
  EXPECT_NE(E.find("checkpoint '" + Shard + "': tensor 'adamw.m.w': CRC32 0x"),
            std::string::npos)
      << E;
  EXPECT_NE(E.find("the data is corrupt"), std::string::npos) << E;

  // Cut inside the last non-empty tensor.
  const CheckpointTensor &Ids = Index->Tensors[2];
  ASSERT_EQ(Ids.Name, "ids");
  writeText(Shard, Original.substr(0, Ids.Offset + 8));
  E = load(1);
  EXPECT_NE(E.find("tensor 'ids' (offset " + std::to_string(Ids.Offset) +
                   ", length 40) is past the end of the file"),
            std::string::npos)
      << E;
  EXPECT_NE(E.find("it is truncated"), std::string::npos) << E;

  // Extra bytes at the end, a damaged header, no file.
  writeText(Shard, Original + "xx");
  EXPECT_NE(load(1).find("bytes; its index says"), std::string::npos);
  std::string BadHeader = Original;
  BadHeader[0] = 'X';
  writeText(Shard, BadHeader);
  EXPECT_NE(load(1).find("is not an autopar checkpoint shard"),
            std::string::npos);
  writeText(Shard, Original.substr(0, 10));
  EXPECT_NE(load(1).find("less than its header"), std::string::npos);
  sys::fs::remove(Shard);
  EXPECT_NE(load(1).find("No such file or directory"), std::string::npos);
  writeText(Shard, Original);
  EXPECT_EQ(load(1), "");
}

TEST_F(CheckpointTest, MatchesByName) {
  save(1);
  Expected<CheckpointIndex> Index = readCheckpointIndex(Root, 1, 0);
  ASSERT_TRUE(bool(Index));
  std::vector<CheckpointTensorSpec> S = specs();
  // Another order matches.
  std::vector<CheckpointTensorSpec> Reversed(S.rbegin(), S.rend());
  EXPECT_EQ(errorText(matchCheckpointTensors(*Index, Reversed, "i.json")), "");
  // A parameter the checkpoint lacks.
  std::vector<CheckpointTensorSpec> More = S;
  More.push_back(S[0]);
  More.back().Name = "adamw.v.w";
  EXPECT_EQ(errorText(matchCheckpointTensors(*Index, More, "i.json")),
            "checkpoint 'i.json' has no tensor 'adamw.v.w' (the program's "
            "parameter f32[2, 3])");
  // A tensor the program lacks.
  std::vector<CheckpointTensorSpec> Fewer(S.begin() + 1, S.end());
  EXPECT_EQ(errorText(matchCheckpointTensors(*Index, Fewer, "i.json")),
            "checkpoint 'i.json': tensor 'w' is not a parameter of the "
            "program");
  // Another shape, another dtype.
  std::vector<CheckpointTensorSpec> Wide = S;
  Wide[0].Shape = {2, 4};
  EXPECT_EQ(errorText(matchCheckpointTensors(*Index, Wide, "i.json")),
            "checkpoint 'i.json': tensor 'w' is f32[2, 3]; the program's "
            "parameter is f32[2, 4]");
  std::vector<CheckpointTensorSpec> Half = S;
  Half[2].Elem = ElementType::I32;
  EXPECT_EQ(errorText(matchCheckpointTensors(*Index, Half, "i.json")),
            "checkpoint 'i.json': tensor 'ids' is i64[5]; the program's "
            "parameter is i32[5]");
}

TEST_F(CheckpointTest, Latest) {
  writeText(path("latest"), "garbage\n");
  EXPECT_NE(errorText(readLatestCheckpoint(Root).takeError())
                .find("does not name a checkpoint (step_<N>): 'garbage'"),
            std::string::npos);
  writeText(path("latest"), "step_3\n");
  EXPECT_NE(errorText(readLatestCheckpoint(Root).takeError())
                .find("names 'step_3', which is not a folder"),
            std::string::npos);
  save(3);
  EXPECT_EQ(cantFail(readLatestCheckpoint(Root)), std::optional<int64_t>(3));
}

TEST_F(CheckpointTest, CommitNeedsEveryRanksIndex) {
  std::vector<CheckpointTensorSpec> S = specs();
  auto Read = [&](size_t I) -> Expected<std::vector<uint8_t>> {
    return bytesOf(S[I], 1);
  };
  ASSERT_EQ(errorText(writeCheckpointShard(Root, meta(1), S, Read)), "");
  EXPECT_NE(errorText(commitCheckpoint(Root, 1, 2))
                .find("rank1.json' is "
                      "missing"),
            std::string::npos);
  EXPECT_EQ(cantFail(readLatestCheckpoint(Root)), std::nullopt);
  EXPECT_EQ(errorText(commitCheckpoint(Root, 1, 1)), "");
  // A reader's error reaches the caller, naming the tensor; the index an
  // earlier attempt left is gone, so the partial shard cannot be committed.
  ASSERT_FALSE(sys::fs::create_directories(path("step_2.tmp")));
  writeText(path("step_2.tmp", "rank0.json"), "{}");
  auto Fail = [&](size_t) -> Expected<std::vector<uint8_t>> {
    return createStringError(inconvertibleErrorCode(), "device lost");
  };
  EXPECT_EQ(errorText(writeCheckpointShard(Root, meta(2), S, Fail)),
            "tensor 'w': device lost");
  EXPECT_FALSE(sys::fs::exists(path("step_2.tmp", "rank0.json")));
  EXPECT_NE(errorText(commitCheckpoint(Root, 2, 1)), "");
  EXPECT_EQ(cantFail(readLatestCheckpoint(Root)), std::optional<int64_t>(1));
  auto Short = [&](size_t) -> Expected<std::vector<uint8_t>> {
    return std::vector<uint8_t>(3);
  };
  EXPECT_EQ(errorText(writeCheckpointShard(Root, meta(2), S, Short)),
            "tensor 'w': 3 bytes given for f32[2, 3]");
}

TEST_F(CheckpointTest, ReplacesAnUncommittedFolder) {
  save(1);
  // A crash after the rename of step_2 and before `latest` moved.
  save(2);
  writeText(path("latest"), "step_1\n");
  save(2);
  EXPECT_EQ(readText(path("latest")), "step_2\n");
  EXPECT_EQ(load(2), "");
}

TEST_F(CheckpointTest, Prunes) {
  for (int64_t Step = 1; Step <= 5; ++Step)
    save(Step);
  // Leftovers: an unfinished folder before and after step 5, a crashed
  // run's committed step 7, and something that is not a checkpoint.
  ASSERT_FALSE(sys::fs::create_directories(path("step_2.tmp")));
  ASSERT_FALSE(sys::fs::create_directories(path("step_6.tmp")));
  ASSERT_FALSE(sys::fs::create_directories(path("step_7")));
  writeText(path("notes.txt"), "kept");
  ASSERT_EQ(errorText(pruneCheckpoints(Root, 5, 2)), "");
  EXPECT_EQ(listRoot(),
            (std::vector<std::string>{"latest", "notes.txt", "step_4", "step_5",
                                      "step_6.tmp"}));
  ASSERT_EQ(errorText(pruneCheckpoints(Root, 5, 1)), "");
  EXPECT_EQ(listRoot(), (std::vector<std::string>{"latest", "notes.txt",
                                                  "step_5", "step_6.tmp"}));
  save(6);
  save(7);
  ASSERT_EQ(errorText(pruneCheckpoints(Root, 7, 0)), "");
  EXPECT_EQ(listRoot(),
            (std::vector<std::string>{"latest", "notes.txt", "step_5", "step_6",
                                      "step_7"}));
}

TEST(ExecutorParams, ReadAndWrite) {
  SourceMgr SM;
  SM.AddNewSourceBuffer(MemoryBuffer::getMemBufferCopy(R"(
graph @g(%x: f32[2]) {
  param %w: f32[2] = dense<f32[2], [1.0, 2.0]>
  %y = Mul(%x, %w) : f32[2]
  return %y
})",
                                                       "test.air"),
                        SMLoc());
  DiagnosticEngine Diag(&SM, "test.air");
  std::unique_ptr<Module> M = parseModule(SM, Diag);
  ASSERT_TRUE(M && succeeded(verifyModule(*M, Diag)));
  const Graph &G = *M->getGraphs().front();
  CpuBackend B;
  Expected<std::unique_ptr<Executor>> X = Executor::create(G, B, {});
  ASSERT_TRUE(bool(X)) << toString(X.takeError());
  const Value &W = *G.getParams().front();
  Expected<HostTensor> Before = (*X)->readParam(W);
  ASSERT_TRUE(bool(Before));
  EXPECT_EQ(floatsOf(*Before), (std::vector<float>{1, 2}));
  std::vector<float> New = {3, -4};
  std::vector<uint8_t> Bytes(8);
  std::memcpy(Bytes.data(), New.data(), 8);
  ASSERT_EQ(errorText((*X)->writeParam(W, Bytes)), "");
  EXPECT_EQ(floatsOf(cantFail((*X)->readParam(W))), New);
  HostTensor In = f32({2}, {10, 10});
  Expected<std::vector<HostTensor>> Out = (*X)->run({In});
  ASSERT_TRUE(bool(Out));
  EXPECT_EQ(floatsOf(Out->front()), (std::vector<float>{30, -40}));

  EXPECT_EQ(
      errorText((*X)->writeParam(W, ArrayRef<uint8_t>(Bytes).take_front(4))),
      "value '%w': 4 bytes given for f32[2] (8 bytes)");
  const Value &Input = *G.getInputs().front();
  EXPECT_EQ(errorText((*X)->readParam(Input).takeError()),
            "value '%x': is not a parameter of the graph");
  EXPECT_EQ(errorText((*X)->writeParam(Input, Bytes)),
            "value '%x': is not a parameter of the graph");
}

} // namespace
