//===- TestPasses.h - Passes that exist only for tests ----------*- C++ -*-===//

#ifndef AUTOPAR_TEST_LIB_TESTPASSES_H
#define AUTOPAR_TEST_LIB_TESTPASSES_H

namespace autopar {

/// Adds the test-only passes to the pass registry. Tools call it once.
void registerTestPasses();

/// Adds test-print-layer-stats (TestPrintLayerStats.cpp); called by
/// registerTestPasses.
void registerTestPrintLayerStatsPass();

/// Adds test-print-op-loops (TestPrintOpLoops.cpp).
void registerTestPrintOpLoopsPass();

/// Adds test-print-cost (TestPrintCost.cpp).
void registerTestPrintCostPass();

} // namespace autopar

#endif // AUTOPAR_TEST_LIB_TESTPASSES_H
