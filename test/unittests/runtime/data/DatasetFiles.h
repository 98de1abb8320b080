//===- DatasetFiles.h - Small indexed datasets for the data tests -*- C++ -*-===//

#ifndef MTC_TEST_UNITTESTS_RUNTIME_DATA_DATASETFILES_H
#define MTC_TEST_UNITTESTS_RUNTIME_DATA_DATASETFILES_H

#include "runtime/data/IndexedDataset.h"

#include "test/unittests/runtime/TempDir.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string_view>
#include <vector>

namespace mtc::rt::test {

/// The indexed dataset `dir`/`name` of the given documents (one sequence each).
inline std::filesystem::path writeDataset(const TempDir &dir,
                                          const std::vector<std::vector<int64_t>> &docs,
                                          std::string_view name = "corpus",
                                          TokenDType dtype = TokenDType::U16) {
  std::filesystem::path prefix = dir / name;
  Expected<IndexedDatasetWriter> w = IndexedDatasetWriter::create(prefix, dtype);
  EXPECT_TRUE(w) << w.error().message();
  for (const std::vector<int64_t> &doc : docs) {
    EXPECT_TRUE(w->addTokens(doc).ok());
    EXPECT_TRUE(w->endDocument().ok());
  }
  Error err = w->finish();
  EXPECT_TRUE(err.ok()) << err.message();
  return prefix;
}

} // namespace mtc::rt::test

#endif // MTC_TEST_UNITTESTS_RUNTIME_DATA_DATASETFILES_H
