//===- PipelineParserTest.cpp - Pipeline text and pass options ------------===//

#include "passes/PassManager.h"
#include "passes/PassRegistry.h"

#include "gtest/gtest.h"

using namespace autopar;

namespace {

TEST(PipelineTextTest, SplitsPassesAndOptions) {
  auto Elements =
      parsePipelineText(" canonicalize , partition-stages{stages=4 mode=even,"
                        "x=-1.5} ,a");
  ASSERT_TRUE(bool(Elements)) << llvm::toString(Elements.takeError());
  ASSERT_EQ(Elements->size(), 3u);
  EXPECT_EQ((*Elements)[0].Argument, "canonicalize");
  EXPECT_TRUE((*Elements)[0].Options.empty());
  EXPECT_EQ((*Elements)[1].Argument, "partition-stages");
  using Opt = std::pair<std::string, std::string>;
  EXPECT_EQ(
      (*Elements)[1].Options,
      (std::vector<Opt>{{"stages", "4"}, {"mode", "even"}, {"x", "-1.5"}}));
  EXPECT_EQ((*Elements)[2].Argument, "a");
  auto Empty = parsePipelineText("   ");
  ASSERT_TRUE(bool(Empty));
  EXPECT_TRUE(Empty->empty());
}

TEST(PipelineTextTest, ErrorsNameTheColumn) {
  auto Error = [](llvm::StringRef Text) {
    auto E = parsePipelineText(Text);
    EXPECT_FALSE(bool(E)) << Text.str();
    return E ? std::string() : llvm::toString(E.takeError());
  };
  EXPECT_EQ(Error("a,,b"), "pipeline column 3: expected a pass name");
  EXPECT_EQ(Error("a{k}"), "pipeline column 4: expected '=' after option 'k'");
  EXPECT_EQ(Error("a{k=}"),
            "pipeline column 5: expected a value for option 'k'");
  EXPECT_EQ(Error("a b"), "pipeline column 3: expected ',' between passes");
  EXPECT_EQ(Error("a{k=1"),
            "pipeline column 6: expected an option name or '}' in the options "
            "of 'a'");
}

TEST(PassOptionBinderTest, ParsesTypedValues) {
  PassOptionBinder B;
  bool Flag = false;
  int64_t Count = 0;
  double Ratio = 0;
  std::string Mode;
  B.bind("flag", &Flag, "a flag");
  B.bind("count", &Count, "a count");
  B.bind("ratio", &Ratio, "a ratio");
  B.bind("mode", &Mode, "a mode");
  EXPECT_FALSE(bool(B.set("p", "flag", "true")));
  EXPECT_FALSE(bool(B.set("p", "count", "-12")));
  EXPECT_FALSE(bool(B.set("p", "ratio", "0.25")));
  EXPECT_FALSE(bool(B.set("p", "mode", "1f1b")));
  EXPECT_TRUE(Flag);
  EXPECT_EQ(Count, -12);
  EXPECT_EQ(Ratio, 0.25);
  EXPECT_EQ(Mode, "1f1b");
  std::string S;
  llvm::raw_string_ostream OS(S);
  B.printValues(OS);
  EXPECT_EQ(OS.str(), "{flag=true count=-12 ratio=0.25 mode=1f1b}");

  EXPECT_EQ(llvm::toString(B.set("p", "count", "many")),
            "pass 'p': option 'count' expects an integer, got 'many'");
  EXPECT_EQ(llvm::toString(B.set("p", "flag", "yes")),
            "pass 'p': option 'flag' expects true or false, got 'yes'");
  EXPECT_EQ(llvm::toString(B.set("p", "ratio", "1x")),
            "pass 'p': option 'ratio' expects a number, got '1x'");
  EXPECT_EQ(llvm::toString(B.set("p", "nope", "1")),
            "pass 'p': unknown option 'nope' (options: flag, count, ratio, "
            "mode)");
}

TEST(PassManagerTest, BuildsRegisteredPassesWithOptions) {
  PassManager PM;
  EXPECT_FALSE(
      bool(PM.addPipeline("canonicalize{dce=false max-iterations=2}")));
  EXPECT_EQ(PM.size(), 1u);
  std::string S;
  llvm::raw_string_ostream OS(S);
  PM.printPipeline(OS);
  EXPECT_EQ(OS.str(), "canonicalize{remove-identities=true fold-constants=true "
                      "refine-types=true dce=false max-iterations=2}");
  EXPECT_NE(llvm::toString(PM.addPipeline("no-such-pass"))
                .find("unknown pass 'no-such-pass'"),
            std::string::npos);
  EXPECT_EQ(llvm::toString(PM.addPipeline("canonicalize{max-iterations=0}")),
            "pass 'canonicalize': max-iterations must be at least 1");
  EXPECT_TRUE(lookupPass("canonicalize"));
}

} // namespace
