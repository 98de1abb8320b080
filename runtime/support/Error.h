//===- Error.h - Errors as values for the runtime ---------------*- C++ -*-===//
//
// The runtime reports every failure as a value: a function that can fail returns `Error` (no
// result) or `Expected<T>` (a T or an Error). Nothing throws across the public API and nothing
// asserts on data that comes from users (plans, files, command lines); asserts guard only
// programming errors such as dereferencing an Expected that holds an error.
//
// Modeled on llvm::Error / llvm::Expected but without the "must be checked" machinery:
// `Error` is `[[nodiscard]]`, which the compiler enforces for the common mistake.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_SUPPORT_ERROR_H
#define MTC_RUNTIME_SUPPORT_ERROR_H

#include <cassert>
#include <cerrno>
#include <charconv>
#include <concepts>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <variant>

namespace mtc::rt {

/// Success, or a failure with a human-readable message. A default-constructed Error is
/// success. Messages are complete sentences without a trailing period, most specific context
/// first added last: `withContext("loading plan")` turns "x: no such file" into
/// "loading plan: x: no such file".
class [[nodiscard]] Error {
public:
  /// Success.
  Error() = default;
  static Error success() { return Error(); }

  /// Failure with `message` (an empty message is still a failure).
  static Error failure(std::string message) {
    Error e;
    e.failed_ = true;
    e.message_ = std::move(message);
    return e;
  }

  bool ok() const { return !failed_; }
  const std::string &message() const { return message_; }

  /// Prefixes the message with "context: " (no-op on success).
  Error withContext(std::string_view context) && {
    if (failed_) {
      std::string m;
      m.reserve(context.size() + 2 + message_.size());
      m.append(context).append(": ").append(message_);
      message_ = std::move(m);
    }
    return std::move(*this);
  }

private:
  std::string message_;
  bool failed_ = false;
};

namespace detail {

inline void appendPiece(std::string &out, std::string_view s) { out.append(s); }
inline void appendPiece(std::string &out, const char *s) { out.append(s ? s : "(null)"); }
inline void appendPiece(std::string &out, const std::string &s) { out.append(s); }
inline void appendPiece(std::string &out, char c) { out.push_back(c); }
inline void appendPiece(std::string &out, bool b) { out.append(b ? "true" : "false"); }
inline void appendPiece(std::string &out, const std::filesystem::path &p) {
  out.push_back('\'');
  out.append(p.string());
  out.push_back('\'');
}
inline void appendPiece(std::string &out, std::error_code ec) { out.append(ec.message()); }

template <class T>
  requires(std::integral<T> && !std::same_as<T, bool> && !std::same_as<T, char>)
void appendPiece(std::string &out, T v) {
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

template <std::floating_point T> void appendPiece(std::string &out, T v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

} // namespace detail

/// Concatenates the pieces (strings, characters, integers, floating-point numbers printed in
/// shortest round-trip form, bools, std::error_code messages, and filesystem paths, which are
/// quoted) into one string. libstdc++ 12 has no <format>, hence this instead of std::format.
template <class... Pieces> std::string concat(const Pieces &...pieces) {
  std::string out;
  (detail::appendPiece(out, pieces), ...);
  return out;
}

/// A failed Error whose message is the concatenation of `pieces` (see concat).
template <class... Pieces> Error makeError(const Pieces &...pieces) {
  return Error::failure(concat(pieces...));
}

/// The current errno as an error_code (its message is strerror's, obtained thread-safely).
inline std::error_code errnoCode() { return std::error_code(errno, std::generic_category()); }
inline std::error_code errnoCode(int err) { return std::error_code(err, std::generic_category()); }

/// A T or an Error. Test it with `if (!x) return x.takeError();`, then use `*x` / `x->`.
template <class T> class [[nodiscard]] Expected {
  static_assert(!std::is_reference_v<T>, "Expected<T&> is not supported");
  static_assert(!std::is_same_v<std::remove_cv_t<T>, Error>, "use Error directly");

public:
  Expected(T value) : storage_(std::in_place_index<0>, std::move(value)) {}
  /// Anything T can be built from (e.g. a string literal for Expected<std::string>).
  template <class U>
    requires(std::constructible_from<T, U &&> && !std::same_as<std::remove_cvref_t<U>, T> &&
             !std::same_as<std::remove_cvref_t<U>, Error> &&
             !std::same_as<std::remove_cvref_t<U>, Expected>)
  Expected(U &&value) : storage_(std::in_place_index<0>, T(std::forward<U>(value))) {}
  /// Holds `error`, which must be a failure: a success Error has no value to carry and is
  /// turned into a failure saying so, rather than into undefined behaviour.
  Expected(Error error)
      : storage_(std::in_place_index<1>,
                 error.ok() ? Error::failure("internal error: Expected built from success")
                            : std::move(error)) {}

  explicit operator bool() const { return storage_.index() == 0; }
  bool ok() const { return storage_.index() == 0; }

  T &operator*() & {
    assert(ok() && "dereferencing an Expected that holds an error");
    return std::get<0>(storage_);
  }
  const T &operator*() const & {
    assert(ok() && "dereferencing an Expected that holds an error");
    return std::get<0>(storage_);
  }
  T &&operator*() && {
    assert(ok() && "dereferencing an Expected that holds an error");
    return std::get<0>(std::move(storage_));
  }
  T *operator->() { return &**this; }
  const T *operator->() const { return &**this; }

  /// The error (success if this holds a value).
  const Error &error() const {
    static const Error kSuccess;
    return ok() ? kSuccess : std::get<1>(storage_);
  }
  /// Moves the error out (success if this holds a value).
  Error takeError() { return ok() ? Error::success() : std::move(std::get<1>(storage_)); }

private:
  std::variant<T, Error> storage_;
};

} // namespace mtc::rt

#endif // MTC_RUNTIME_SUPPORT_ERROR_H
