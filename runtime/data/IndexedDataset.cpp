//===- IndexedDataset.cpp - Megatron's .idx/.bin token files --------------===//

#include "runtime/data/IndexedDataset.h"

#include "runtime/support/TemporaryFiles.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <fcntl.h>
#include <limits>
#include <new>
#include <sys/stat.h>
#include <unistd.h>

namespace mtc::rt {

// The files are little-endian and read with memcpy.
static_assert(std::endian::native == std::endian::little, "the runtime assumes little-endian");

namespace {

constexpr char kMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
constexpr uint64_t kHeaderSize = 9 + 8 + 1 + 8 + 8;
/// Tokens buffered by the writer before a write(2).
constexpr size_t kWriteBuffer = size_t(1) << 20;

template <class T> T load(const char *p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <class T> void append(std::string &out, T v) {
  char bytes[sizeof v];
  std::memcpy(bytes, &v, sizeof v);
  out.append(bytes, sizeof v);
}

/// Element `i` of `bytes` (of `dtype`) as an integer; false for a floating-point value that is
/// not a whole number in int64's range.
bool decode(TokenDType dtype, const char *bytes, size_t i, int64_t &out) {
  const char *p = bytes + i * tokenDTypeSize(dtype);
  auto whole = [&](double v) {
    // 2^63 is the first double past int64's range.
    if (!(v >= -9223372036854775808.0 && v < 9223372036854775808.0) || std::trunc(v) != v)
      return false;
    out = static_cast<int64_t>(v);
    return true;
  };
  switch (dtype) {
  case TokenDType::U8:
    out = load<uint8_t>(p);
    return true;
  case TokenDType::I8:
    out = load<int8_t>(p);
    return true;
  case TokenDType::I16:
    out = load<int16_t>(p);
    return true;
  case TokenDType::I32:
    out = load<int32_t>(p);
    return true;
  case TokenDType::I64:
    out = load<int64_t>(p);
    return true;
  case TokenDType::U16:
    out = load<uint16_t>(p);
    return true;
  case TokenDType::F32:
    return whole(load<float>(p));
  case TokenDType::F64:
    return whole(load<double>(p));
  }
  return false;
}

/// Appends `token` as an element of `dtype`; false when the dtype cannot hold it exactly.
bool encode(TokenDType dtype, int64_t token, std::string &out) {
  auto integer = [&]<class T>(T) {
    if (token < std::numeric_limits<T>::min() || token > std::numeric_limits<T>::max())
      return false;
    append(out, static_cast<T>(token));
    return true;
  };
  // Integers up to 2^24 (float) and 2^53 (double) are exact.
  auto floating = [&]<class T>(T, int64_t limit) {
    if (token < -limit || token > limit)
      return false;
    append(out, static_cast<T>(token));
    return true;
  };
  switch (dtype) {
  case TokenDType::U8:
    return integer(uint8_t());
  case TokenDType::I8:
    return integer(int8_t());
  case TokenDType::I16:
    return integer(int16_t());
  case TokenDType::I32:
    return integer(int32_t());
  case TokenDType::I64:
    return integer(int64_t());
  case TokenDType::U16:
    return integer(uint16_t());
  case TokenDType::F32:
    return floating(float(), int64_t(1) << 24);
  case TokenDType::F64:
    return floating(double(), int64_t(1) << 53);
  }
  return false;
}

/// Whether `path` names something (a broken link counts as nothing).
bool pathExists(const std::filesystem::path &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

} // namespace

std::optional<TokenDType> tokenDTypeFromCode(uint8_t code) {
  if (code < 1 || code > 8)
    return std::nullopt;
  return static_cast<TokenDType>(code);
}

size_t tokenDTypeSize(TokenDType dtype) {
  switch (dtype) {
  case TokenDType::U8:
  case TokenDType::I8:
    return 1;
  case TokenDType::I16:
  case TokenDType::U16:
    return 2;
  case TokenDType::I32:
  case TokenDType::F32:
    return 4;
  case TokenDType::I64:
  case TokenDType::F64:
    return 8;
  }
  return 1;
}

std::string_view tokenDTypeName(TokenDType dtype) {
  switch (dtype) {
  case TokenDType::U8:
    return "uint8";
  case TokenDType::I8:
    return "int8";
  case TokenDType::I16:
    return "int16";
  case TokenDType::I32:
    return "int32";
  case TokenDType::I64:
    return "int64";
  case TokenDType::F64:
    return "float64";
  case TokenDType::F32:
    return "float32";
  case TokenDType::U16:
    return "uint16";
  }
  return "?";
}

std::filesystem::path indexPath(const std::filesystem::path &prefix) {
  return std::filesystem::path(prefix.string() + ".idx");
}

std::filesystem::path binPath(const std::filesystem::path &prefix) {
  return std::filesystem::path(prefix.string() + ".bin");
}

//===----------------------------------------------------------------------===//
// Reading
//===----------------------------------------------------------------------===//

Expected<IndexedDataset> IndexedDataset::open(const std::filesystem::path &prefix) {
  const std::filesystem::path idx = indexPath(prefix), bin = binPath(prefix);
  const std::string what = concat("indexed dataset ", prefix);
  int openErrno = 0;
  Expected<RegularFile> idxFile = openInputFile(idx, {}, &openErrno);
  if (!idxFile) {
    // The usual slips: the path of one of the files instead of their prefix, or a prefix
    // with nothing there at all.
    if (openErrno == ENOENT) {
      std::string ext = prefix.extension().string();
      if ((ext == ".idx" || ext == ".bin") && pathExists(prefix))
        return makeError(what,
                         ": give the prefix of the .idx and .bin files, without the "
                         "extension: ",
                         std::filesystem::path(prefix).replace_extension(""));
      if (!pathExists(bin))
        return makeError(what, ": neither ", idx, " nor ", bin, " exists");
    }
    return idxFile.takeError().withContext(what);
  }
  auto fail = [&](const auto &...pieces) {
    return makeError("indexed dataset ", idx, ": ", pieces...);
  };

  const uint64_t size = idxFile->size;
  if (size < kHeaderSize)
    return fail("the file is ", size, " bytes, shorter than the ", kHeaderSize, "-byte header");
  std::string bytes;
  try {
    bytes.resize(size);
  } catch (const std::bad_alloc &) {
    return fail("out of memory reading its ", size, " bytes");
  }
  if (Error err = readExactlyAt(idxFile->handle.get(), 0, bytes.data(), size, concat(idx));
      !err.ok())
    return err;
  const char *p = bytes.data();
  if (std::memcmp(p, kMagic, sizeof kMagic) != 0)
    return fail("not a Megatron indexed dataset index (its first bytes are not the magic "
                "\"MMIDIDX\\0\\0\")");
  if (uint64_t version = load<uint64_t>(p + 9); version != 1)
    return fail("version ", version, " is not supported (only version 1 is)");
  uint8_t code = load<uint8_t>(p + 17);
  std::optional<TokenDType> dtype = tokenDTypeFromCode(code);
  if (!dtype)
    return fail("unknown dtype code ", int(code), " (the codes are 1 to 8)");
  const uint64_t s = load<uint64_t>(p + 18), d = load<uint64_t>(p + 26);
  // Counts this large need more than 2^64 bytes; below, the size needed does not overflow.
  const bool countable = s <= (uint64_t(1) << 59) && d <= (uint64_t(1) << 59);
  const uint64_t need = countable ? kHeaderSize + 12 * s + 8 * d : 0;
  if (!countable || need != size) {
    if (countable && need + s == size && s > 0)
      return fail("a multimodal index (a mode byte per sequence), which mtc does not read");
    return fail("its header counts ", s, " sequences and ", d, " document indices, which need ",
                countable ? concat(need, " bytes") : std::string("more bytes than a file holds"),
                ", but the file has ", size, need > size || !countable ? " (truncated?)" : "");
  }
  if (d == 0)
    return fail("it has no document indices (Megatron writes at least the leading 0)");

  IndexedDataset ds;
  ds.prefix_ = prefix;
  ds.dtype_ = *dtype;
  try {
    ds.lengths_.resize(s);
    ds.pointers_.resize(s);
    ds.documents_.resize(d);
  } catch (const std::bad_alloc &) {
    return fail("out of memory for ", s, " sequences");
  }
  std::memcpy(ds.lengths_.data(), p + kHeaderSize, 4 * s);
  std::memcpy(ds.pointers_.data(), p + kHeaderSize + 4 * s, 8 * s);
  std::memcpy(ds.documents_.data(), p + kHeaderSize + 12 * s, 8 * d);

  Expected<RegularFile> binFile = openInputFile(bin);
  if (!binFile)
    return binFile.takeError().withContext(what);
  ds.bin_ = std::move(binFile->handle);
  ds.binSize_ = binFile->size;

  const uint64_t item = tokenDTypeSize(ds.dtype_);
  for (uint64_t i = 0; i < s; ++i) {
    int64_t length = ds.lengths_[i], pointer = ds.pointers_[i];
    if (length < 0)
      return fail("sequence ", i, " has a negative length (", length, ")");
    uint64_t extent = uint64_t(length) * item;
    if (pointer < 0 || uint64_t(pointer) > ds.binSize_ || extent > ds.binSize_ - uint64_t(pointer))
      return fail("sequence ", i, " (", length, " tokens at byte ", pointer, ") lies outside ", bin,
                  ", which is ", ds.binSize_, " bytes");
    ds.numTokens_ += length;
  }
  if (ds.documents_[0] != 0)
    return fail("the first document index is ", ds.documents_[0], ", not 0");
  for (uint64_t i = 1; i < d; ++i)
    if (ds.documents_[i] < ds.documents_[i - 1])
      return fail("document index ", i, " (", ds.documents_[i], ") is below the one before it (",
                  ds.documents_[i - 1], ")");
  if (uint64_t(ds.documents_[d - 1]) != s)
    return fail("the last document index is ", ds.documents_[d - 1],
                ", not the number of sequences (", s, ")");
  return ds;
}

Error IndexedDataset::read(int64_t sequence, int64_t offset, int64_t count,
                           std::vector<int64_t> &out) const {
  const std::filesystem::path bin = binPath(prefix_);
  if (sequence < 0 || sequence >= numSequences())
    return makeError("indexed dataset ", prefix_, ": no sequence ", sequence, " (it has ",
                     numSequences(), ")");
  const int64_t length = lengths_[size_t(sequence)];
  if (offset < 0 || count < 0 || offset > length || count > length - offset)
    return makeError("indexed dataset ", prefix_, ": tokens [", offset, ", ", offset + count,
                     ") are outside sequence ", sequence, " of ", length, " tokens");
  // A .bin rewritten in place (by a new preprocessing run into the same prefix) would
  // otherwise give other tokens silently.
  struct stat st;
  if (::fstat(bin_.get(), &st) != 0)
    return makeError("cannot stat ", bin, ": ", errnoCode());
  if (uint64_t(st.st_size) != binSize_)
    return makeError("indexed dataset ", bin, " is ", uint64_t(st.st_size), " bytes now but was ",
                     binSize_, " when it was opened: it was modified while in use");
  const size_t item = tokenDTypeSize(dtype_);
  std::string bytes(size_t(count) * item, '\0');
  if (Error err = readExactlyAt(bin_.get(), uint64_t(pointers_[size_t(sequence)]) + offset * item,
                                bytes.data(), bytes.size(), concat("indexed dataset ", bin));
      !err.ok())
    return err;
  const size_t first = out.size();
  out.resize(first + size_t(count));
  for (int64_t i = 0; i < count; ++i)
    if (!decode(dtype_, bytes.data(), size_t(i), out[first + size_t(i)]))
      return makeError("indexed dataset ", bin, ": token ", offset + i, " of sequence ", sequence,
                       " is not a whole number (dtype ", tokenDTypeName(dtype_), ")");
  return Error::success();
}

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

Expected<IndexedDatasetWriter> IndexedDatasetWriter::create(const std::filesystem::path &prefix,
                                                            TokenDType dtype) {
  const std::filesystem::path bin = binPath(prefix);
  (void)removeStaleTemporaries(bin);
  (void)removeStaleTemporaries(indexPath(prefix));
  IndexedDatasetWriter w;
  w.prefix_ = prefix;
  w.dtype_ = dtype;
  w.binTmp_ = temporaryPathFor(bin);
  int fd = ::open(w.binTmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return makeError("cannot create ", w.binTmp_, ": ", errnoCode());
  w.bin_ = FileHandle(fd);
  return w;
}

IndexedDatasetWriter::IndexedDatasetWriter(IndexedDatasetWriter &&other) noexcept
    : prefix_(std::move(other.prefix_)), binTmp_(std::move(other.binTmp_)), dtype_(other.dtype_),
      bin_(std::move(other.bin_)), buffer_(std::move(other.buffer_)),
      sequenceTokens_(other.sequenceTokens_), numTokens_(other.numTokens_),
      lengths_(std::move(other.lengths_)), documents_(std::move(other.documents_)),
      finished_(other.finished_) {
  other.binTmp_.clear();
  other.finished_ = true;
}

IndexedDatasetWriter &IndexedDatasetWriter::operator=(IndexedDatasetWriter &&other) noexcept {
  if (this != &other) {
    discard();
    prefix_ = std::move(other.prefix_);
    binTmp_ = std::move(other.binTmp_);
    dtype_ = other.dtype_;
    bin_ = std::move(other.bin_);
    buffer_ = std::move(other.buffer_);
    sequenceTokens_ = other.sequenceTokens_;
    numTokens_ = other.numTokens_;
    lengths_ = std::move(other.lengths_);
    documents_ = std::move(other.documents_);
    finished_ = other.finished_;
    other.binTmp_.clear();
    other.finished_ = true;
  }
  return *this;
}

IndexedDatasetWriter::~IndexedDatasetWriter() { discard(); }

void IndexedDatasetWriter::discard() {
  if (finished_ || binTmp_.empty())
    return;
  bin_ = FileHandle();
  ::unlink(binTmp_.c_str());
  finished_ = true;
}

Error IndexedDatasetWriter::flush() {
  Error err = writeAll(bin_.get(), buffer_.data(), buffer_.size(), binTmp_);
  buffer_.clear();
  return err;
}

Error IndexedDatasetWriter::addTokens(std::span<const int64_t> tokens) {
  if (finished_)
    return makeError("indexed dataset ", prefix_, ": tokens added after finish");
  for (int64_t token : tokens)
    if (!encode(dtype_, token, buffer_))
      return makeError("indexed dataset ", prefix_, ": token ", token, " does not fit its dtype ",
                       tokenDTypeName(dtype_));
  sequenceTokens_ += int64_t(tokens.size());
  numTokens_ += int64_t(tokens.size());
  return buffer_.size() >= kWriteBuffer ? flush() : Error::success();
}

Error IndexedDatasetWriter::endSequence() {
  if (sequenceTokens_ == 0)
    return Error::success();
  if (sequenceTokens_ > std::numeric_limits<int32_t>::max())
    return makeError("indexed dataset ", prefix_, ": a sequence of ", sequenceTokens_,
                     " tokens is longer than the format's int32 lengths allow");
  lengths_.push_back(int32_t(sequenceTokens_));
  sequenceTokens_ = 0;
  return Error::success();
}

Error IndexedDatasetWriter::endDocument() {
  if (Error err = endSequence(); !err.ok())
    return err;
  documents_.push_back(int64_t(lengths_.size()));
  return Error::success();
}

Error IndexedDatasetWriter::finish() {
  if (finished_)
    return makeError("indexed dataset ", prefix_, ": finished twice");
  if (sequenceTokens_ > 0 || documents_.back() != int64_t(lengths_.size()))
    if (Error err = endDocument(); !err.ok())
      return err;
  const std::filesystem::path bin = binPath(prefix_), idx = indexPath(prefix_);
  const std::filesystem::path idxTmp = temporaryPathFor(idx);
  auto failed = [&](Error err) {
    ::unlink(idxTmp.c_str());
    discard();
    return err;
  };
  if (Error err = flush(); !err.ok())
    return failed(std::move(err));
  if (::fsync(bin_.get()) != 0)
    return failed(makeError("cannot sync ", binTmp_, ": ", errnoCode()));
  if (Error err = bin_.close(concat(binTmp_)); !err.ok())
    return failed(std::move(err));

  // Pointers as Megatron's writer computes them: the sequences back to back.
  std::string header(kMagic, sizeof kMagic);
  append<uint64_t>(header, 1);
  append<uint8_t>(header, static_cast<uint8_t>(dtype_));
  append<uint64_t>(header, lengths_.size());
  append<uint64_t>(header, documents_.size());
  for (int32_t length : lengths_)
    append(header, length);
  int64_t pointer = 0;
  for (int32_t length : lengths_) {
    append(header, pointer);
    pointer += int64_t(length) * int64_t(tokenDTypeSize(dtype_));
  }
  for (int64_t document : documents_)
    append(header, document);
  int fd = ::open(idxTmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return failed(makeError("cannot create ", idxTmp, ": ", errnoCode()));
  FileHandle idxFile(fd);
  if (Error err = writeAll(fd, header.data(), header.size(), idxTmp); !err.ok())
    return failed(std::move(err));
  if (::fsync(fd) != 0)
    return failed(makeError("cannot sync ", idxTmp, ": ", errnoCode()));
  if (Error err = idxFile.close(concat(idxTmp)); !err.ok())
    return failed(std::move(err));
  // The .bin first: a reader that opens the pair in between sees the new .bin with the old
  // .idx, which its validation most likely refuses, never an old .bin under a new index.
  if (::rename(binTmp_.c_str(), bin.c_str()) != 0)
    return failed(makeError("cannot rename ", binTmp_, " to ", bin, ": ", errnoCode()));
  finished_ = true;
  if (::rename(idxTmp.c_str(), idx.c_str()) != 0) {
    Error err = makeError("cannot rename ", idxTmp, " to ", idx, ": ", errnoCode());
    ::unlink(idxTmp.c_str());
    return err;
  }
  std::filesystem::path dir = bin.parent_path();
  if (dir.empty())
    dir = ".";
  // Makes the renames durable; a failure here does not undo the write, so it is not reported.
  if (int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
  return Error::success();
}

} // namespace mtc::rt
