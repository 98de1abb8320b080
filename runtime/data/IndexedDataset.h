//===- IndexedDataset.h - Megatron's .idx/.bin token files -------*- C++ -*-===//
//
// Megatron-LM's "MMIDIDX" indexed dataset: a corpus already tokenized, as two files of one
// prefix. `PREFIX.bin` is the token ids of every sequence one after the other, in the
// dataset's dtype (little-endian). `PREFIX.idx` is, unaligned and little-endian:
//
//   9 bytes  magic "MMIDIDX\0\0"      u64 version (1)      u8 dtype code
//   u64 S    the number of sequences  u64 D   the number of document indices
//   int32[S] sequence lengths (tokens)
//   int64[S] sequence pointers (byte offsets into the .bin)
//   int64[D] document indices: the sequence each document starts at, then S
//
// Dtype codes: 1 u8, 2 i8, 3 i16, 4 i32, 5 i64, 6 f64, 7 f32, 8 u16. A document is one or
// more sequences (Megatron's preprocessing makes one sequence per document, or one per
// sentence with --split-sentences); D is the number of documents + 1, the first index 0 and
// the last S, as Megatron's builder writes them.
//
// The reader validates everything at open: the magic, version and dtype, counts that match
// the .idx's size exactly, lengths and pointers inside the .bin, a document index that starts
// at 0, never decreases and ends at S. The .idx is read whole; the .bin stays open and each
// read is a pread (as TextDataset's: a file truncated while in use is an error naming it, not
// the SIGBUS of a mapping), and a .bin whose size changed since the open is an error too.
// Only regular files are accepted (support/RegularFile.h). Multimodal indices (a mode byte
// per sequence after the document indices) are recognised and refused.
//
// The writer produces files Megatron reads, byte for byte what its IndexedDatasetBuilder
// writes for the same sequences: both files are written to temporaries, synced and renamed
// into place (the .bin first), so an interrupted write leaves any previous pair untouched.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_DATA_INDEXEDDATASET_H
#define MTC_RUNTIME_DATA_INDEXEDDATASET_H

#include "runtime/support/Error.h"
#include "runtime/support/RegularFile.h"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mtc::rt {

/// The element type of a .bin, by its .idx code.
enum class TokenDType : uint8_t {
  U8 = 1,
  I8 = 2,
  I16 = 3,
  I32 = 4,
  I64 = 5,
  F64 = 6,
  F32 = 7,
  U16 = 8,
};

/// The type of code `code`, if it names one.
std::optional<TokenDType> tokenDTypeFromCode(uint8_t code);
/// Bytes per element.
size_t tokenDTypeSize(TokenDType dtype);
/// numpy's names: "uint8", "int8", "int16", "int32", "int64", "float64", "float32", "uint16".
std::string_view tokenDTypeName(TokenDType dtype);

/// `PREFIX.idx` and `PREFIX.bin` (the prefix with the extension appended, as Megatron does:
/// "corpus" gives "corpus.idx", "a.b" gives "a.b.idx").
std::filesystem::path indexPath(const std::filesystem::path &prefix);
std::filesystem::path binPath(const std::filesystem::path &prefix);

class IndexedDataset {
public:
  /// Opens `prefix` (.idx and .bin) and validates it; messages name the file and the problem.
  static Expected<IndexedDataset> open(const std::filesystem::path &prefix);

  const std::filesystem::path &prefix() const { return prefix_; }
  TokenDType dtype() const { return dtype_; }
  int64_t numSequences() const { return int64_t(lengths_.size()); }
  /// Documents: the document indices less one.
  int64_t numDocuments() const { return int64_t(documents_.size()) - 1; }
  std::span<const int32_t> sequenceLengths() const { return lengths_; }
  std::span<const int64_t> sequencePointers() const { return pointers_; }
  std::span<const int64_t> documentIndices() const { return documents_; }
  /// The sum of the sequence lengths.
  int64_t numTokens() const { return numTokens_; }
  uint64_t binSize() const { return binSize_; }

  /// Tokens [offset, offset + count) of sequence `sequence` appended to `out`. Fails on a
  /// range outside the sequence, a .bin that changed since the open or cannot be read, and a
  /// floating-point dtype's element that is not a whole number in int64's range.
  Error read(int64_t sequence, int64_t offset, int64_t count, std::vector<int64_t> &out) const;

private:
  IndexedDataset() = default;

  std::filesystem::path prefix_;
  TokenDType dtype_ = TokenDType::U16;
  std::vector<int32_t> lengths_;
  std::vector<int64_t> pointers_;
  std::vector<int64_t> documents_;
  int64_t numTokens_ = 0;
  FileHandle bin_;
  uint64_t binSize_ = 0; // when opened
};

/// Writes an indexed dataset: tokens of the open sequence with addTokens, sequences closed by
/// endSequence, documents by endDocument (Megatron's add_item / end_document), then finish.
class IndexedDatasetWriter {
public:
  /// Starts writing `prefix`'s .bin (to a temporary next to it) with elements of `dtype`.
  static Expected<IndexedDatasetWriter> create(const std::filesystem::path &prefix,
                                               TokenDType dtype);
  IndexedDatasetWriter(IndexedDatasetWriter &&) noexcept;
  IndexedDatasetWriter &operator=(IndexedDatasetWriter &&) noexcept;
  /// Removes the temporaries of a writer that was not finished.
  ~IndexedDatasetWriter();

  /// Appends `tokens` to the open sequence. A token the dtype cannot hold is an error.
  Error addTokens(std::span<const int64_t> tokens);
  /// Closes the open sequence; an empty one is dropped (Megatron stores no empty sequences).
  Error endSequence();
  /// Closes the open sequence and the document (which may hold no sequence).
  Error endDocument();
  /// Writes the .idx and moves both files into place. The open document, if it has
  /// sequences or tokens, is ended first.
  Error finish();

  int64_t numSequences() const { return int64_t(lengths_.size()); }
  int64_t numDocuments() const { return int64_t(documents_.size()) - 1; }
  int64_t numTokens() const { return numTokens_; }

private:
  IndexedDatasetWriter() = default;
  Error flush();
  void discard();

  std::filesystem::path prefix_, binTmp_;
  TokenDType dtype_ = TokenDType::U16;
  FileHandle bin_;
  std::string buffer_;         // encoded tokens not yet written
  int64_t sequenceTokens_ = 0; // tokens of the open sequence
  int64_t numTokens_ = 0;
  std::vector<int32_t> lengths_;
  std::vector<int64_t> documents_{0};
  bool finished_ = false;
};

} // namespace mtc::rt

#endif // MTC_RUNTIME_DATA_INDEXEDDATASET_H
