//===- mtc-data.cpp - Preparing and inspecting training data --------------===//
//
// `mtc-data preprocess` tokenizes a corpus into a Megatron indexed dataset (PREFIX.idx and
// PREFIX.bin, runtime/data/IndexedDataset.h) as Megatron's tools/preprocess_data.py does;
// `mtc-data info` describes one; `mtc-data tokens` prints its documents' token ids;
// `mtc-data samples` prints the token ids of the samples `mtrun --data-path` trains on, in
// Megatron's order (runtime/data/GptDataset.h, and BlendedDataset.h for a blend), so that the
// order can be compared with Megatron's. Plain C++20 linking only the runtime.
//
//===----------------------------------------------------------------------===//

#include "runtime/data/BlendedDataset.h"
#include "runtime/data/GptDataset.h"
#include "runtime/data/IndexedDataset.h"
#include "runtime/data/Tokenizer.h"
#include "runtime/support/CommandLine.h"
#include "runtime/support/Error.h"
#include "runtime/support/FileChunks.h"
#include "runtime/support/Json.h"
#include "runtime/support/OutputPaths.h"
#include "runtime/support/RegularFile.h"

#include <cstdio>
#include <exception>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

using namespace mtc::rt;

namespace {

constexpr const char *kUsage =
    "usage: mtc-data COMMAND [options]\n"
    "\n"
    "commands:\n"
    "  preprocess --input FILE --output-prefix PREFIX [options]\n"
    "      tokenize FILE into the Megatron indexed dataset PREFIX.idx and PREFIX.bin\n"
    "      --input-format F   jsonl (one JSON object per line, the text under --json-key)\n"
    "                         or text (default: jsonl for .jsonl and .json files, else text)\n"
    "      --json-key KEY     the member holding a document's text (default: text)\n"
    "      --split-lines      text: every line is a document (default: the whole file is one)\n"
    "      --append-eod       end every non-empty document with the end-of-document token\n"
    "      --dtype D          u16 or i32, the .bin's element type (default u16)\n"
    "      --tokenizer-type T bytes: token = byte, 256 ids, end of document 0 (the default);\n"
    "                         GPT2BPETokenizer: GPT-2's BPE, with --vocab-file vocab.json\n"
    "                         and --merge-file merges.txt, end of document <|endoftext|>;\n"
    "                         SentencePieceTokenizer, GPTSentencePieceTokenizer or\n"
    "                         Llama2Tokenizer: a SentencePiece model (--tokenizer-model M)\n"
    "                         as Megatron's tokenizers of those names use it\n"
    "      --vocab-extra-ids N SentencePieceTokenizer: add T5's sentinels <extra_id_0> ...\n"
    "                         <extra_id_{N-1}> to the vocabulary (default 0)\n"
    "  info PREFIX\n"
    "      check the indexed dataset PREFIX and print its dtype, sequences, documents, tokens\n"
    "  tokens PREFIX [--first K]\n"
    "      print the token ids of the first K (default all) documents, a line each:\n"
    "      \"D: ids\", its sequences separated by \" |\"\n"
    "  samples PREFIX --seq-len L --num-samples N [--seed S] [--split W] [--which T]\n"
    "          [--first K] [--data-cache-path DIR]\n"
    "      print the first K (default N) samples of L + 1 token ids that training on N samples\n"
    "      reads, in Megatron's order (seed default 1234, Megatron's; split default \"969, 30, "
    "1\");\n"
    "      --which valid or test: that split's order for N samples (default train);\n"
    "      --data-cache-path DIR: load the order's indices from DIR's .npy files, or build\n"
    "      and write them there (as mtrun --data-cache-path)\n"
    "  samples W1 PREFIX1 W2 PREFIX2 ... --seq-len L --num-samples N [options as above]\n"
    "      the same for a blend, as `mtrun --data-path W1 PREFIX1 W2 PREFIX2 ...` reads it:\n"
    "      each sample as \"K: D/J: ids\", sample J of dataset D\n"
    "  --help\n";

using Args = CommandLine;

/// The integer option `name` in [min, max]: `fallback` when not given, required without one.
Expected<int64_t> parseInt(const Args &args, std::string_view name, std::optional<int64_t> fallback,
                           int64_t min, int64_t max) {
  std::optional<std::string> value = args.value(name);
  if (!value && !fallback)
    return makeError(name, " is required");
  return parseInteger(value, name, fallback.value_or(0), min, max);
}

std::string valueOr(const Args &args, std::string_view name, std::string fallback) {
  return args.value(name).value_or(std::move(fallback));
}

/// The command's arguments from argv[2] on.
Expected<Args> parseArgs(int argc, char **argv, std::vector<std::string_view> values,
                         std::vector<std::string_view> flags = {}) {
  return parseCommandLine(argc, argv, 2,
                          {std::move(values), {}, std::move(flags), " (see mtc-data --help)"});
}

/// Calls `line(text, number)` for every line of the regular file `path` (without its '\n'),
/// reading it in chunks; the first error `line` returns stops the reading.
Error forEachLine(const std::filesystem::path &path,
                  const std::function<Error(std::string_view, int64_t)> &line) {
  std::string pending;
  int64_t number = 0;
  Error read = readFileChunks(path, [&](const char *chunk, size_t size) {
    std::string_view data(chunk, size);
    for (size_t nl; (nl = data.find('\n')) != std::string_view::npos;) {
      pending.append(data.substr(0, nl));
      if (Error err = line(pending, ++number); !err.ok())
        return err;
      pending.clear();
      data.remove_prefix(nl + 1);
    }
    pending.append(data);
    return Error::success();
  });
  if (!read.ok())
    return read;
  if (!pending.empty())
    return line(pending, ++number);
  return Error::success();
}

int preprocess(int argc, char **argv) {
  Expected<Args> args = parseArgs(argc, argv,
                                  {"--input", "--output-prefix", "--input-format", "--json-key",
                                   "--dtype", kTokenizerFlags[0], kTokenizerFlags[1],
                                   kTokenizerFlags[2], kTokenizerFlags[3], kTokenizerFlags[4]},
                                  {"--split-lines", "--append-eod"});
  auto fail = [](const Error &err) {
    std::fprintf(stderr, "mtc-data: error: %s\n", err.message().c_str());
    return 1;
  };
  if (!args)
    return fail(args.error());
  if (!args->positional.empty())
    return fail(makeError("unexpected argument '", args->positional[0], "'"));
  if (!args->values.count("--input"))
    return fail(makeError("preprocess needs --input FILE"));
  if (!args->values.count("--output-prefix"))
    return fail(makeError("preprocess needs --output-prefix PREFIX"));
  const std::filesystem::path input = args->values["--input"];
  const std::filesystem::path prefix = args->values["--output-prefix"];
  const std::string ext = input.extension().string();
  const std::string format =
      valueOr(*args, "--input-format", ext == ".jsonl" || ext == ".json" ? "jsonl" : "text");
  if (format != "jsonl" && format != "text")
    return fail(makeError("--input-format expects jsonl or text, got '", format, "'"));
  const bool splitLines = args->flags.count("--split-lines") > 0;
  if (splitLines && format != "text")
    return fail(makeError("--split-lines applies to text input, not ", format));
  const std::string key = valueOr(*args, "--json-key", "text");
  if (args->values.count("--json-key") && format != "jsonl")
    return fail(makeError("--json-key applies to jsonl input, not ", format));
  const bool appendEod = args->flags.count("--append-eod") > 0;
  const std::string dtypeName = valueOr(*args, "--dtype", "u16");
  if (dtypeName != "u16" && dtypeName != "i32")
    return fail(makeError("--dtype expects u16 or i32, got '", dtypeName, "'"));
  const TokenDType dtype = dtypeName == "u16" ? TokenDType::U16 : TokenDType::I32;
  Expected<TokenizerOptions> tokenizerChoice = tokenizerOptions(*args);
  if (!tokenizerChoice)
    return fail(tokenizerChoice.error());
  Expected<std::unique_ptr<Tokenizer>> tokenizer = makeTokenizer(*tokenizerChoice);
  if (!tokenizer)
    return fail(tokenizer.error());
  if (dtype == TokenDType::U16 && (*tokenizer)->vocabSize() > 65536)
    return fail(makeError("--dtype u16 cannot hold the ", (*tokenizer)->vocabSize(),
                          " ids of tokenizer ", (*tokenizer)->name(), ": use --dtype i32"));
  for (const std::filesystem::path &out : {binPath(prefix), indexPath(prefix)})
    if (Error err = checkOutputFile(out, "--output-prefix"); !err.ok())
      return fail(err);
  // Read the input before anything is created: a missing or unreadable one leaves nothing.
  if (Expected<RegularFile> in = openInputFile(input); !in)
    return fail(in.takeError().withContext("--input"));

  Expected<IndexedDatasetWriter> writer = IndexedDatasetWriter::create(prefix, dtype);
  if (!writer)
    return fail(writer.error());
  std::vector<int64_t> ids;
  // One document of sentences, as Megatron's encoder: the non-empty ones are its sequences,
  // the end-of-document token closes the last.
  auto addDocument = [&](const std::vector<std::string_view> &sentences) -> Error {
    bool any = false;
    for (size_t i = 0; i < sentences.size(); ++i) {
      ids.clear();
      if (Error err = (*tokenizer)->encode(sentences[i], ids); !err.ok())
        return err;
      if (ids.empty())
        continue;
      if (Error err = writer->endSequence(); !err.ok())
        return err;
      if (Error err = writer->addTokens(ids); !err.ok())
        return err;
      any = true;
    }
    if (any && appendEod) {
      int64_t eod = (*tokenizer)->eod();
      if (Error err = writer->addTokens(std::span<const int64_t>(&eod, 1)); !err.ok())
        return err;
    }
    return writer->endDocument();
  };

  Error err;
  if (format == "jsonl") {
    err = forEachLine(input, [&](std::string_view line, int64_t number) -> Error {
      auto where = [&] { return concat(input.string(), ":", number); };
      if (line.find_first_not_of(" \t\r") == std::string_view::npos)
        return Error::success(); // blank lines are not documents
      Expected<JsonValue> doc = parseJson(line);
      if (!doc)
        return doc.takeError().withContext(where());
      const JsonObject *object = doc->getObject();
      if (!object)
        return makeError(where(), ": a JSON ", jsonKindName(doc->kind()), ", not an object");
      const JsonValue *text = object->find(key);
      if (!text)
        return makeError(where(), ": no \"", key, "\" member (choose another with --json-key)");
      std::vector<std::string_view> sentences;
      if (const std::string *s = text->getString()) {
        sentences.push_back(*s);
      } else if (const JsonArray *list = text->getArray()) {
        for (const JsonValue &v : *list) {
          if (!v.getString())
            return makeError(where(), ": \"", key, "\" is a list holding a ",
                             jsonKindName(v.kind()), ", not only strings");
          sentences.push_back(*v.getString());
        }
      } else {
        return makeError(where(), ": \"", key, "\" is a ", jsonKindName(text->kind()),
                         ", not a string or a list of strings");
      }
      return addDocument(sentences);
    });
  } else if (splitLines) {
    err = forEachLine(input, [&](std::string_view line, int64_t) { return addDocument({line}); });
  } else {
    Expected<std::string> text = readInputFile(input);
    err = text ? addDocument({*text}) : text.takeError();
  }
  if (!err.ok())
    return fail(err);
  if (Error done = writer->finish(); !done.ok())
    return fail(done);
  std::printf("wrote %s and %s: %lld documents, %lld sequences, %lld tokens (%s, tokenizer %s%s)\n",
              indexPath(prefix).c_str(), binPath(prefix).c_str(),
              static_cast<long long>(writer->numDocuments()),
              static_cast<long long>(writer->numSequences()),
              static_cast<long long>(writer->numTokens()),
              std::string(tokenDTypeName(dtype)).c_str(), std::string((*tokenizer)->name()).c_str(),
              appendEod ? concat(", end of document ", (*tokenizer)->eod()).c_str() : "");
  std::printf("train on it with: mtrun PLAN --data-path %s\n", prefix.c_str());
  return std::fflush(stdout) == 0 ? 0 : fail(makeError("cannot write the output"));
}

int info(int argc, char **argv) {
  auto fail = [](const Error &err) {
    std::fprintf(stderr, "mtc-data: error: %s\n", err.message().c_str());
    return 1;
  };
  Expected<Args> args = parseArgs(argc, argv, {}, {});
  if (!args)
    return fail(args.error());
  if (args->positional.size() != 1)
    return fail(makeError("info takes one PREFIX"));
  Expected<IndexedDataset> ds = IndexedDataset::open(args->positional[0]);
  if (!ds)
    return fail(ds.error());
  int64_t longest = 0;
  for (int32_t length : ds->sequenceLengths())
    longest = std::max<int64_t>(longest, length);
  std::printf("indexed dataset %s: dtype %s, %lld sequences, %lld documents, %lld tokens "
              "(longest sequence %lld)\n",
              ds->prefix().c_str(), std::string(tokenDTypeName(ds->dtype())).c_str(),
              static_cast<long long>(ds->numSequences()),
              static_cast<long long>(ds->numDocuments()), static_cast<long long>(ds->numTokens()),
              static_cast<long long>(longest));
  return std::fflush(stdout) == 0 ? 0 : fail(makeError("cannot write the output"));
}

int tokens(int argc, char **argv) {
  auto fail = [](const Error &err) {
    std::fprintf(stderr, "mtc-data: error: %s\n", err.message().c_str());
    return 1;
  };
  Expected<Args> args = parseArgs(argc, argv, {"--first"}, {});
  if (!args)
    return fail(args.error());
  if (args->positional.size() != 1)
    return fail(makeError("tokens takes one PREFIX"));
  Expected<IndexedDataset> ds = IndexedDataset::open(args->positional[0]);
  if (!ds)
    return fail(ds.error());
  Expected<int64_t> first = parseInt(*args, "--first", ds->numDocuments(), 0, ds->numDocuments());
  if (!first)
    return fail(first.error());
  std::span<const int64_t> documents = ds->documentIndices();
  std::vector<int64_t> ids;
  std::string line;
  for (int64_t d = 0; d < *first; ++d) {
    line = concat(d, ":");
    for (int64_t s = documents[size_t(d)]; s < documents[size_t(d) + 1]; ++s) {
      if (s > documents[size_t(d)])
        line.append(" |");
      ids.clear();
      if (Error err = ds->read(s, 0, ds->sequenceLengths()[size_t(s)], ids); !err.ok())
        return fail(err);
      for (int64_t t : ids)
        line.append(concat(" ", t));
    }
    line.push_back('\n');
    std::fputs(line.c_str(), stdout);
  }
  return std::fflush(stdout) == 0 ? 0 : fail(makeError("cannot write the output"));
}

/// Prints `count` samples of `order` (GptDataset or BlendedDataset) a line each, "K:" then
/// `label(k)` then the ids.
template <class Order, class Label>
Error printSamples(const Order &order, int64_t count, Label label) {
  std::vector<int64_t> tokens;
  std::string line;
  for (int64_t k = 0; k < count; ++k) {
    if (Error err = order.sample(k, tokens); !err.ok())
      return err;
    line = concat(k, ":", label(k));
    for (int64_t t : tokens)
      line.append(concat(" ", t));
    line.push_back('\n');
    std::fputs(line.c_str(), stdout);
  }
  return Error::success();
}

/// "documents [0, 60), 7095 tokens per epoch, 1 epochs, separate final epoch no, 443 samples"
std::string describeOrder(const GptDataset &gpt) {
  const GptSampleIndex &index = gpt.index();
  return concat("documents [", gpt.documents().begin, ", ", gpt.documents().end, "), ",
                gpt.tokensPerEpoch(), " tokens per epoch, ", index.numEpochs,
                " epochs, separate final epoch ", index.separateFinalEpoch ? "yes" : "no", ", ",
                index.numSamples(), " samples");
}

int samples(int argc, char **argv) {
  auto fail = [](const Error &err) {
    std::fprintf(stderr, "mtc-data: error: %s\n", err.message().c_str());
    return 1;
  };
  Expected<Args> args = parseArgs(argc, argv,
                                  {"--seq-len", "--num-samples", "--seed", "--split", "--which",
                                   "--first", "--data-cache-path"},
                                  {});
  if (!args)
    return fail(args.error());
  if (args->positional.empty())
    return fail(makeError("samples takes a PREFIX, or weights and prefixes (0.3 A 0.7 B)"));
  Expected<DataBlend> blend = parseDataBlend(args->positional, "samples");
  if (!blend)
    return fail(blend.error());
  constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();
  Expected<int64_t> seqLen = parseInt(*args, "--seq-len", std::nullopt, 2, kMaxInt32);
  Expected<int64_t> numSamples =
      parseInt(*args, "--num-samples", std::nullopt, 0, int64_t(1) << 40);
  Expected<int64_t> seed = parseInt(*args, "--seed", 1234, 0, 0xffffffffll);
  for (const Error *err : {&seqLen.error(), &numSamples.error(), &seed.error()})
    if (!err->ok())
      return fail(*err);
  const std::string which = valueOr(*args, "--which", "train");
  if (which != "train" && which != "valid" && which != "test")
    return fail(makeError("--which expects train, valid or test, got '", which, "'"));
  GptDataset::Options options;
  options.split = valueOr(*args, "--split", std::string(kMegatronDefaultSplit));
  options.which = which == "train" ? DataSplit::Train
                  : which == "valid" ? DataSplit::Valid
                                     : DataSplit::Test;
  options.seqLen = *seqLen;
  options.globalBatch = 1;
  options.numSamples = *numSamples;
  options.seed = uint64_t(*seed);
  options.cachePath = valueOr(*args, "--data-cache-path", "");
  // Where each order's indices came from, apart from the samples on stdout.
  auto reportCache = [&](const GptDataset &gpt) {
    if (!options.cachePath.empty())
      std::fprintf(stderr, "mtc-data: %s: %s\n", gpt.dataset().prefix().c_str(),
                   gpt.describeIndexOrigin().substr(2).c_str());
  };
  if (blend->single()) {
    Expected<int64_t> first = parseInt(*args, "--first", *numSamples, 0, *numSamples);
    if (!first)
      return fail(first.error());
    options.prefix = blend->prefixes[0];
    Expected<GptDataset> gpt = GptDataset::open(options);
    if (!gpt)
      return fail(gpt.error());
    reportCache(*gpt);
    std::printf("%s\n", describeOrder(*gpt).c_str());
    if (Error err = printSamples(*gpt, *first, [](int64_t) { return ""; }); !err.ok())
      return fail(err);
    return std::fflush(stdout) == 0 ? 0 : fail(makeError("cannot write the output"));
  }
  Expected<BlendedDataset> data = BlendedDataset::open(*blend, options);
  if (!data)
    return fail(data.error());
  for (const GptDataset &gpt : data->datasets())
    reportCache(gpt);
  if (!options.cachePath.empty())
    std::fprintf(stderr, "mtc-data: the blend: %s\n", data->describeIndexOrigin().substr(2).c_str());
  // A blend of prefixes without weights can hold fewer than N.
  Expected<int64_t> first = parseInt(*args, "--first", data->size(), 0, data->size());
  if (!first)
    return fail(first.error());
  // The weights and counts to the last bit: %.17g prints a double exactly back.
  std::string header = concat("blend of ", data->datasets().size(), " datasets, ", data->size(),
                              " samples, weights");
  for (double w : data->weights()) {
    char text[32];
    std::snprintf(text, sizeof text, " %.17g", w);
    header.append(text);
  }
  std::printf("%s\n", header.c_str());
  for (size_t d = 0; d < data->datasets().size(); ++d)
    std::printf("dataset %zu: %lld samples drawn, order for %lld: %s\n", d,
                static_cast<long long>(data->samplesDrawn()[d]),
                static_cast<long long>(data->samplesBuilt()[d]),
                describeOrder(data->datasets()[d]).c_str());
  const BlendingIndex &index = data->index();
  if (Error err = printSamples(*data, *first,
                               [&](int64_t k) {
                                 return concat(" ", index.dataset[size_t(k)], "/",
                                               index.sample[size_t(k)], ":");
                               });
      !err.ok())
    return fail(err);
  return std::fflush(stdout) == 0 ? 0 : fail(makeError("cannot write the output"));
}

} // namespace

int main(int argc, char **argv) {
  try {
    std::string_view command = argc > 1 ? argv[1] : "";
    // `mtc-data preprocess --help` too: the usage covers every command.
    for (int i = 1; i < argc; ++i)
      if (std::string_view(argv[i]) == "--help" || std::string_view(argv[i]) == "-h") {
        std::fputs(kUsage, stdout);
        return 0;
      }
    if (command == "preprocess")
      return preprocess(argc, argv);
    if (command == "info")
      return info(argc, argv);
    if (command == "tokens")
      return tokens(argc, argv);
    if (command == "samples")
      return samples(argc, argv);
    std::fprintf(stderr, "mtc-data: error: %s\n",
                 command.empty()
                     ? "no command given (see mtc-data --help)"
                     : concat("unknown command '", command,
                              "' (preprocess, info, tokens, samples; see mtc-data --help)")
                           .c_str());
    return 1;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "mtc-data: error: %s\n", e.what());
    return 1;
  }
}
