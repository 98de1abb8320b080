//===- MetricsWriterTest.cpp - JSONL metrics ------------------------------===//

#include "runtime/data/MetricsWriter.h"

#include "TempDir.h"

#include <gtest/gtest.h>

#include <cmath>
#include <sys/stat.h>
#include <sstream>

using namespace mtc::rt;

namespace {

using test::TempDir;

std::vector<JsonValue> readLines(const std::filesystem::path &path) {
  std::string text = test::readBytes(path);
  EXPECT_TRUE(text.empty() || text.back() == '\n') << "last line not terminated";
  std::vector<JsonValue> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    Expected<JsonValue> v = parseJson(line);
    EXPECT_TRUE(v) << line << ": " << v.error().message();
    if (v)
      out.push_back(*v);
  }
  return out;
}

TEST(MetricsWriterTest, OneObjectPerLine) {
  TempDir dir;
  const auto path = dir / "metrics.jsonl";
  Expected<MetricsWriter> w = MetricsWriter::open(path);
  ASSERT_TRUE(w) << w.error().message();
  EXPECT_TRUE(w->isOpen());
  EXPECT_EQ(w->path(), path);
  std::vector<JsonObject> records;
  for (int step = 1; step <= 3; ++step)
    records.push_back(JsonObject{{"step", step},
                                 {"loss", 6.0 - step * 0.5},
                                 {"tokens_per_s", 1000.5 * step},
                                 {"phase", "train\n\"quoted\""}});
  for (const JsonObject &r : records)
    ASSERT_TRUE(w->write(r).ok());
  ASSERT_TRUE(w->sync().ok());
  ASSERT_TRUE(w->close().ok());
  EXPECT_FALSE(w->isOpen());

  std::vector<JsonValue> lines = readLines(path);
  ASSERT_EQ(lines.size(), 3u);
  for (size_t i = 0; i < 3; ++i)
    EXPECT_EQ(lines[i], JsonValue(records[i]));
  // Compact: exactly one line per record, key order kept.
  std::string text = test::readBytes(path);
  EXPECT_EQ(text.substr(0, text.find('\n') + 1),
            R"({"step":1,"loss":5.5,"tokens_per_s":1000.5,"phase":"train\n\"quoted\""})"
            "\n");
}

TEST(MetricsWriterTest, AppendsAcrossOpensUnlessTruncating) {
  TempDir dir;
  const auto path = dir / "m.jsonl";
  {
    Expected<MetricsWriter> w = MetricsWriter::open(path);
    ASSERT_TRUE(w);
    ASSERT_TRUE(w->write(JsonObject{{"step", 1}}).ok());
    // The destructor closes.
  }
  {
    Expected<MetricsWriter> w = MetricsWriter::open(path);
    ASSERT_TRUE(w);
    ASSERT_TRUE(w->write(JsonObject{{"step", 2}}).ok());
    ASSERT_TRUE(w->close().ok());
  }
  std::vector<JsonValue> lines = readLines(path);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1].getObject()->find("step")->getInt(), 2);
  {
    Expected<MetricsWriter> w = MetricsWriter::open(path, /*truncate=*/true);
    ASSERT_TRUE(w);
    ASSERT_TRUE(w->write(JsonObject{{"step", 3}}).ok());
  }
  lines = readLines(path);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].getObject()->find("step")->getInt(), 3);
}

TEST(MetricsWriterTest, NonFiniteValuesAreNull) {
  TempDir dir;
  const auto path = dir / "m.jsonl";
  Expected<MetricsWriter> w = MetricsWriter::open(path);
  ASSERT_TRUE(w);
  ASSERT_TRUE(w->write(JsonObject{{"loss", std::nan("")}, {"grad_norm", INFINITY}}).ok());
  ASSERT_TRUE(w->close().ok());
  EXPECT_EQ(test::readBytes(path), "{\"loss\":null,\"grad_norm\":null}\n");
}

TEST(MetricsWriterTest, Errors) {
  TempDir dir;
  Expected<MetricsWriter> bad = MetricsWriter::open(dir / "missing-dir" / "m.jsonl");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message().find("missing-dir"), std::string::npos);
  EXPECT_NE(bad.error().message().find("No such file"), std::string::npos);

  // A FIFO without a reader blocked the open forever; a directory is no file either.
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0600), 0);
  Expected<MetricsWriter> fifo = MetricsWriter::open(dir / "fifo");
  ASSERT_FALSE(fifo);
  EXPECT_EQ(fifo.error().message(), "metrics file: '" + (dir / "fifo").string() +
                                        "' is a FIFO (named pipe), not a regular file");
  Expected<MetricsWriter> directory = MetricsWriter::open(dir.path());
  ASSERT_FALSE(directory);
  EXPECT_NE(directory.error().message().find("Is a directory"), std::string::npos)
      << directory.error().message();

  Expected<MetricsWriter> w = MetricsWriter::open(dir / "m.jsonl");
  ASSERT_TRUE(w);
  ASSERT_TRUE(w->close().ok());
  EXPECT_TRUE(w->close().ok()); // closing twice is fine
  Error e = w->write(JsonObject{{"step", 1}});
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.message().find("write after close"), std::string::npos);
  EXPECT_FALSE(w->sync().ok());
}

TEST(MetricsWriterTest, MoveTransfersTheFile) {
  TempDir dir;
  Expected<MetricsWriter> w = MetricsWriter::open(dir / "m.jsonl");
  ASSERT_TRUE(w);
  MetricsWriter moved = std::move(*w);
  EXPECT_FALSE(w->isOpen());
  EXPECT_FALSE(w->write(JsonObject{{"x", 1}}).ok());
  ASSERT_TRUE(moved.write(JsonObject{{"x", 2}}).ok());
  Expected<MetricsWriter> other = MetricsWriter::open(dir / "n.jsonl");
  ASSERT_TRUE(other);
  moved = std::move(*other); // closes m.jsonl, takes n.jsonl
  ASSERT_TRUE(moved.write(JsonObject{{"y", 3}}).ok());
  ASSERT_TRUE(moved.close().ok());
  EXPECT_EQ(test::readBytes(dir / "m.jsonl"), "{\"x\":2}\n");
  EXPECT_EQ(test::readBytes(dir / "n.jsonl"), "{\"y\":3}\n");
}

} // namespace
