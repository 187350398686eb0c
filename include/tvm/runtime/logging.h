/*
 * TVM v0.8's C++ runtime API over this runtime's C ABI (tvm-runtime, the Rust drop-in for
 * libtvm_runtime.so). Hand-written, header-only: the library exports only the C API.
 *
 * tvm/runtime/logging.h: errors (tvm::runtime::Error, InternalError, EnvErrorAlreadySet), the
 * LOG / CHECK / ICHECK / DLOG / VLOG macros. LOG(FATAL) and failed checks throw InternalError;
 * other levels write a line to std::cerr.
 */
#ifndef TVM_RUNTIME_LOGGING_H_
#define TVM_RUNTIME_LOGGING_H_

#include <tvm/runtime/c_runtime_api.h>

#include <cstdlib>
#include <ctime>
#include <exception>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#if defined(_MSC_VER)
#define TVM_NO_INLINE __declspec(noinline)
#define TVM_ALWAYS_INLINE __forceinline
#else
#define TVM_NO_INLINE __attribute__((noinline))
#define TVM_ALWAYS_INLINE inline __attribute__((always_inline))
#endif

#define TVM_THROW_EXCEPTION noexcept(false)

#ifndef TVM_LOG_STACK_TRACE
#define TVM_LOG_STACK_TRACE 1
#endif
#ifndef TVM_USE_LIBBACKTRACE
#define TVM_USE_LIBBACKTRACE 0
#endif
#ifndef TVM_LOG_CUSTOMIZE
#define TVM_LOG_CUSTOMIZE 0
#endif
#ifndef TVM_LOG_DEBUG
#define TVM_LOG_DEBUG 0
#endif

// The conditional check macros of TVM's logging.h (used by the SEqual/SHash reducers).
#define GET_MACRO(_1, _2, _3, _4, _5, NAME, ...) NAME
#define COND_CHECK_GE(...) \
  GET_MACRO(__VA_ARGS__, COND_CHECK_GE_5, COND_CHECK_GE_4, COND_CHECK_GE_3)(__VA_ARGS__)
#define COND_CHECK_EQ(...) \
  GET_MACRO(__VA_ARGS__, COND_CHECK_EQ_5, COND_CHECK_EQ_4, COND_CHECK_EQ_3)(__VA_ARGS__)
#define COND_CHECK(...) \
  GET_MACRO(__VA_ARGS__, COND_CHECK_5, COND_CHECK_4, COND_CHECK_3, COND_CHECK_2)(__VA_ARGS__)
#define COND_LOG(...) \
  GET_MACRO(__VA_ARGS__, COND_LOG_5, COND_LOG_4, COND_LOG_3, COND_LOG_2)(__VA_ARGS__)
#define COND_CHECK_OP(quit_on_assert, x, y, what, op) \
  if (!quit_on_assert) {                              \
    if (!((x)op(y))) what;                            \
  } else /* NOLINT(*) */                              \
    CHECK_##op(x, y)
#define COND_CHECK_EQ_4(quit_on_assert, x, y, what) COND_CHECK_OP(quit_on_assert, x, y, what, ==)
#define COND_CHECK_GE_4(quit_on_assert, x, y, what) COND_CHECK_OP(quit_on_assert, x, y, what, >=)
#define COND_CHECK_3(quit_on_assert, x, what) \
  if (!quit_on_assert) {                      \
    if (!(x)) what;                           \
  } else /* NOLINT(*) */                      \
    CHECK(x)
#define COND_LOG_3(quit_on_assert, x, what) \
  if (!quit_on_assert) {                    \
    what;                                   \
  } else /* NOLINT(*) */                    \
    LOG(x)
#define COND_CHECK_EQ_3(quit_on_assert, x, y) COND_CHECK_EQ_4(quit_on_assert, x, y, return false)
#define COND_CHECK_GE_3(quit_on_assert, x, y) COND_CHECK_GE_4(quit_on_assert, x, y, return false)
#define COND_CHECK_2(quit_on_assert, x) COND_CHECK_3(quit_on_assert, x, return false)
#define COND_LOG_2(quit_on_assert, x) COND_LOG_3(quit_on_assert, x, return false)

// dmlc::Error, the base of TVM's errors (TVM takes it from dmlc-core's logging.h).
#ifndef DMLC_LOGGING_H_
namespace dmlc {
/*! \brief The base error of TVM (and dmlc-core). */
struct Error : public std::runtime_error {
  explicit Error(const std::string& s) : std::runtime_error(s) {}
};
}  // namespace dmlc
#endif

namespace tvm {
namespace runtime {

/*!
 * \brief A backtrace of the caller. This header-only build keeps no symbolizer: always empty,
 * so error messages carry the file and line of the LOG(FATAL) / CHECK instead.
 */
inline std::string Backtrace() { return std::string(); }

/*! \brief An error of TVM; what() is the message (for errors from the C API: "Kind: text"). */
class Error : public ::dmlc::Error {
 public:
  explicit Error(const std::string& s) : ::dmlc::Error(s) {}
};

/*!
 * \brief A frontend error (e.g. a Python exception) is already pending: thrown for a C call
 * that returned -2, and turned back into -2 when it reaches the C boundary.
 */
class EnvErrorAlreadySet : public ::dmlc::Error {
 public:
  explicit EnvErrorAlreadySet(const std::string& s) : ::dmlc::Error(s) {}
};

/*! \brief The error of LOG(FATAL) and failed checks: file, line, message and time. */
class InternalError : public Error {
 public:
  InternalError(std::string file, int lineno, std::string message,
                std::time_t time = std::time(nullptr), std::string backtrace = Backtrace())
      : Error(""),
        file_(std::move(file)),
        lineno_(lineno),
        message_(std::move(message)),
        time_(time),
        backtrace_(std::move(backtrace)) {
    std::ostringstream s;
    std::tm tm_buf{};
#if defined(_MSC_VER)
    localtime_s(&tm_buf, &time_);
#else
    localtime_r(&time_, &tm_buf);
#endif
    s << "[" << std::put_time(&tm_buf, "%H:%M:%S") << "] " << file_ << ":" << lineno_ << ": "
      << message_ << std::endl;
    if (!backtrace_.empty()) s << backtrace_ << std::endl;
    full_message_ = s.str();
  }
  const std::string& file() const { return file_; }
  const std::string& message() const { return message_; }
  const std::string& full_message() const { return full_message_; }
  const std::string& backtrace() const { return backtrace_; }
  const std::time_t& time() const { return time_; }
  int lineno() const { return lineno_; }
  const char* what() const noexcept override { return full_message_.c_str(); }

 private:
  std::string file_;
  int lineno_;
  std::string message_;
  std::time_t time_;
  std::string backtrace_;
  std::string full_message_;
};

namespace detail {

#if TVM_LOG_CUSTOMIZE
// With TVM_LOG_CUSTOMIZE=1 the application defines these two (as with TVM).
void LogFatalImpl(const std::string& file, int lineno, const std::string& message);
void LogMessageImpl(const std::string& file, int lineno, const std::string& message);
#endif

/*! \brief Collects a LOG(FATAL) / failed check message; throws InternalError when done. */
class LogFatal {
 public:
  LogFatal(const char* file, int lineno)
      : file_(file), lineno_(lineno), unwinding_(UncaughtExceptions()) {}
#ifdef _MSC_VER
#pragma warning(push)
#pragma warning(disable : 4722)
#endif
  ~LogFatal() TVM_THROW_EXCEPTION {
    // An exception thrown while the message was being written is already on its way: throwing
    // a second one from here would terminate the program.
    if (UncaughtExceptions() > unwinding_) return;
#if TVM_LOG_CUSTOMIZE
    LogFatalImpl(file_, lineno_, stream_.str());
#endif
    throw InternalError(file_, lineno_, stream_.str());
  }
#ifdef _MSC_VER
#pragma warning(pop)
#endif
  std::ostringstream& stream() { return stream_; }

 private:
  static int UncaughtExceptions() {
#if __cplusplus >= 201703L
    return std::uncaught_exceptions();
#else
    return std::uncaught_exception() ? 1 : 0;
#endif
  }
  std::ostringstream stream_;
  std::string file_;
  int lineno_;
  int unwinding_;
};

/*! \brief Collects a LOG(INFO/WARNING/ERROR) line; writes it to std::cerr when done. */
class LogMessage {
 public:
#if TVM_LOG_CUSTOMIZE
  LogMessage(const std::string& file, int lineno) : file_(file), lineno_(lineno) {}
#else
  LogMessage(const std::string& file, int lineno) {
    std::time_t t = std::time(nullptr);
    std::tm tm_buf{};
#if defined(_MSC_VER)
    localtime_s(&tm_buf, &t);
#else
    localtime_r(&t, &tm_buf);
#endif
    stream_ << "[" << std::put_time(&tm_buf, "%H:%M:%S") << "] " << file << ":" << lineno
            << ": ";
  }
#endif
  ~LogMessage() {
#if TVM_LOG_CUSTOMIZE
    LogMessageImpl(file_, lineno_, stream_.str());
#else
    std::cerr << stream_.str() << std::endl;
#endif
  }
  std::ostringstream& stream() { return stream_; }

 private:
#if TVM_LOG_CUSTOMIZE
  std::string file_;
  int lineno_;
#endif
  std::ostringstream stream_;
};

/*! \brief Turns a stream expression into void (for LOG_IF). */
class LogMessageVoidify {
 public:
  LogMessageVoidify() {}
  void operator&(std::ostream&) {}
};

/*!
 * \brief TVM_LOG_DEBUG: unset, "" or "0": DLOG and VLOG off; "1": DLOG on; otherwise
 * "<file>=<level>;..." turns DLOG on and VLOG up to <level> on in <file> (a path suffix, or
 * DEFAULT for every file).
 */
class TvmLogDebugSettings {
 public:
  static const TvmLogDebugSettings& FromFlag() {
    static const TvmLogDebugSettings* settings =
        new TvmLogDebugSettings(ParseSpec(std::getenv("TVM_LOG_DEBUG")));
    return *settings;
  }
  static TvmLogDebugSettings ParseSpec(const char* opt_spec) {
    TvmLogDebugSettings settings;
    if (opt_spec == nullptr) return settings;
    std::string spec(opt_spec);
    if (spec.empty() || spec == "0") return settings;
    settings.dlog_enabled_ = true;
    if (spec == "1") return settings;
    std::istringstream in(spec);
    std::string item;
    while (std::getline(in, item, ';')) {
      if (item.empty()) continue;
      size_t eq = item.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == item.size()) {
        throw InternalError(__FILE__, __LINE__, "TVM_LOG_DEBUG ill-formed: '" + item + "'");
      }
      char* end = nullptr;
      std::string level = item.substr(eq + 1);
      long value = std::strtol(level.c_str(), &end, 10);  // NOLINT(runtime/int)
      if (end != level.c_str() + level.size()) {
        throw InternalError(__FILE__, __LINE__, "TVM_LOG_DEBUG ill-formed, invalid level");
      }
      settings.vlog_level_map_[item.substr(0, eq)] = static_cast<int>(value);
    }
    return settings;
  }
  bool VerboseEnabled(const char* opt_filename, int level) const {
    if (opt_filename == nullptr || level < 0 || vlog_level_map_.empty()) return false;
    std::string file(opt_filename);
    for (const auto& kv : vlog_level_map_) {
      const std::string& key = kv.first;
      bool match = key == "DEFAULT" || file == key ||
                   (file.size() > key.size() &&
                    file.compare(file.size() - key.size(), key.size(), key) == 0 &&
                    file[file.size() - key.size() - 1] == '/');
      if (match && level <= kv.second) return true;
    }
    return false;
  }
  bool dlog_enabled() const { return dlog_enabled_; }

 private:
  bool dlog_enabled_ = false;
  std::unordered_map<std::string, int> vlog_level_map_;
};

inline bool DebugLoggingEnabled() { return TvmLogDebugSettings::FromFlag().dlog_enabled(); }

inline bool VerboseLoggingEnabled(const char* opt_filename, int level) {
  return TvmLogDebugSettings::FromFlag().VerboseEnabled(opt_filename, level);
}

/*! \brief The VLOG_CONTEXT stack of this thread. */
class VLogContext {
 public:
  void Push(std::stringstream* stream) { context_stack_.push_back(stream); }
  void Pop() {
    if (!context_stack_.empty()) context_stack_.pop_back();
  }
  std::string str() const {
    std::string out;
    for (const auto* entry : context_stack_) out += entry->str() + ": ";
    return out;
  }
  static VLogContext* Get() {
    static thread_local VLogContext ctx;
    return &ctx;
  }

 private:
  std::vector<std::stringstream*> context_stack_;
};

/*! \brief dmlc::ThreadLocalStore<VLogContext> in TVM. */
struct ThreadLocalVLogContext {
  static VLogContext* Get() { return VLogContext::Get(); }
};

class VLogContextEntry {
 public:
  VLogContextEntry() { ThreadLocalVLogContext::Get()->Push(&sstream_); }
  ~VLogContextEntry() { ThreadLocalVLogContext::Get()->Pop(); }
  std::ostream& stream() { return sstream_; }

 private:
  std::stringstream sstream_;
};

constexpr const char* kTVM_INTERNAL_ERROR_MESSAGE =
    "\n"
    "---------------------------------------------------------------\n"
    "An error occurred during the execution of TVM.\n"
    "For more information, please see: https://tvm.apache.org/docs/errors.html\n"
    "---------------------------------------------------------------\n";

template <typename X, typename Y>
std::unique_ptr<std::string> LogCheckFormat(const X& x, const Y& y) {
  std::ostringstream os;
  os << " (" << x << " vs. " << y << ") ";
  return std::unique_ptr<std::string>(new std::string(os.str()));
}

#define TVM_CHECK_FUNC(name, op)                                                          \
  template <typename X, typename Y>                                                       \
  TVM_ALWAYS_INLINE std::unique_ptr<std::string> LogCheck##name(const X& x, const Y& y) { \
    if (x op y) return nullptr;                                                           \
    return LogCheckFormat(x, y);                                                          \
  }                                                                                       \
  TVM_ALWAYS_INLINE std::unique_ptr<std::string> LogCheck##name(int x, int y) {           \
    return LogCheck##name<int, int>(x, y);                                                \
  }

#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wsign-compare"
#endif
TVM_CHECK_FUNC(_LT, <)
TVM_CHECK_FUNC(_GT, >)
TVM_CHECK_FUNC(_LE, <=)
TVM_CHECK_FUNC(_GE, >=)
TVM_CHECK_FUNC(_EQ, ==)
TVM_CHECK_FUNC(_NE, !=)
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

}  // namespace detail

#define LOG(level) LOG_##level
#define LOG_FATAL ::tvm::runtime::detail::LogFatal(__FILE__, __LINE__).stream()
#define LOG_INFO ::tvm::runtime::detail::LogMessage(__FILE__, __LINE__).stream()
#define LOG_ERROR (::tvm::runtime::detail::LogMessage(__FILE__, __LINE__).stream() << "Error: ")
#define LOG_WARNING \
  (::tvm::runtime::detail::LogMessage(__FILE__, __LINE__).stream() << "Warning: ")

#define TVM_CHECK_BINARY_OP(name, op, x, y)                                \
  if (auto __tvm__log__err = ::tvm::runtime::detail::LogCheck##name(x, y)) \
  ::tvm::runtime::detail::LogFatal(__FILE__, __LINE__).stream()            \
      << "Check failed: " << #x " " #op " " #y << *__tvm__log__err << ": "

#define CHECK(x)                                                \
  if (!(x))                                                     \
  ::tvm::runtime::detail::LogFatal(__FILE__, __LINE__).stream() \
      << "Check failed: (" #x << ") is false: "

#define CHECK_LT(x, y) TVM_CHECK_BINARY_OP(_LT, <, x, y)
#define CHECK_GT(x, y) TVM_CHECK_BINARY_OP(_GT, >, x, y)
#define CHECK_LE(x, y) TVM_CHECK_BINARY_OP(_LE, <=, x, y)
#define CHECK_GE(x, y) TVM_CHECK_BINARY_OP(_GE, >=, x, y)
#define CHECK_EQ(x, y) TVM_CHECK_BINARY_OP(_EQ, ==, x, y)
#define CHECK_NE(x, y) TVM_CHECK_BINARY_OP(_NE, !=, x, y)
#define CHECK_NOTNULL(x)                                                          \
  ((x) == nullptr ? ::tvm::runtime::detail::LogFatal(__FILE__, __LINE__).stream() \
                        << "Check not null: " #x << ' ',                          \
   (x) : (x))  // NOLINT(*)

#define LOG_IF(severity, condition) \
  !(condition) ? (void)0 : ::tvm::runtime::detail::LogMessageVoidify() & LOG(severity)

#if TVM_LOG_DEBUG
#define LOG_DFATAL LOG_FATAL
#define DFATAL FATAL
#define DLOG(severity) LOG_IF(severity, ::tvm::runtime::detail::DebugLoggingEnabled())
#define DLOG_IF(severity, condition) \
  LOG_IF(severity, ::tvm::runtime::detail::DebugLoggingEnabled() && (condition))
#define VLOG_CONTEXT                                    \
  ::tvm::runtime::detail::VLogContextEntry vlog_entry_; \
  vlog_entry_.stream()
#else
#define LOG_DFATAL LOG_ERROR
#define DFATAL ERROR
#define DLOG(severity) true ? (void)0 : ::tvm::runtime::detail::LogMessageVoidify() & LOG(severity)
#define DLOG_IF(severity, condition) \
  (true || !(condition)) ? (void)0 : ::tvm::runtime::detail::LogMessageVoidify() & LOG(severity)
#define VLOG_CONTEXT true ? (void)0 : ::tvm::runtime::detail::LogMessageVoidify() & LOG(INFO)
#endif

#define VLOG(level)                                                               \
  DLOG_IF(INFO, ::tvm::runtime::detail::VerboseLoggingEnabled(__FILE__, (level))) \
      << ::tvm::runtime::detail::ThreadLocalVLogContext::Get()->str()

#if TVM_LOG_DEBUG
#define DCHECK(x) CHECK(x)
#define DCHECK_LT(x, y) CHECK((x) < (y))
#define DCHECK_GT(x, y) CHECK((x) > (y))
#define DCHECK_LE(x, y) CHECK((x) <= (y))
#define DCHECK_GE(x, y) CHECK((x) >= (y))
#define DCHECK_EQ(x, y) CHECK((x) == (y))
#define DCHECK_NE(x, y) CHECK((x) != (y))
#else
#define DCHECK(x) \
  while (false) CHECK(x)
#define DCHECK_LT(x, y) \
  while (false) CHECK((x) < (y))
#define DCHECK_GT(x, y) \
  while (false) CHECK((x) > (y))
#define DCHECK_LE(x, y) \
  while (false) CHECK((x) <= (y))
#define DCHECK_GE(x, y) \
  while (false) CHECK((x) >= (y))
#define DCHECK_EQ(x, y) \
  while (false) CHECK((x) == (y))
#define DCHECK_NE(x, y) \
  while (false) CHECK((x) != (y))
#endif

#define TVM_ICHECK_INDENT "  "

#define ICHECK_BINARY_OP(name, op, x, y)                                   \
  if (auto __tvm__log__err = ::tvm::runtime::detail::LogCheck##name(x, y)) \
  ::tvm::runtime::detail::LogFatal(__FILE__, __LINE__).stream()            \
      << ::tvm::runtime::detail::kTVM_INTERNAL_ERROR_MESSAGE << std::endl  \
      << TVM_ICHECK_INDENT << "Check failed: " << #x " " #op " " #y << *__tvm__log__err << ": "

#define ICHECK(x)                                                                 \
  if (!(x))                                                                       \
  ::tvm::runtime::detail::LogFatal(__FILE__, __LINE__).stream()                   \
      << ::tvm::runtime::detail::kTVM_INTERNAL_ERROR_MESSAGE << TVM_ICHECK_INDENT \
      << "Check failed: (" #x << ") is false: "

#define ICHECK_LT(x, y) ICHECK_BINARY_OP(_LT, <, x, y)
#define ICHECK_GT(x, y) ICHECK_BINARY_OP(_GT, >, x, y)
#define ICHECK_LE(x, y) ICHECK_BINARY_OP(_LE, <=, x, y)
#define ICHECK_GE(x, y) ICHECK_BINARY_OP(_GE, >=, x, y)
#define ICHECK_EQ(x, y) ICHECK_BINARY_OP(_EQ, ==, x, y)
#define ICHECK_NE(x, y) ICHECK_BINARY_OP(_NE, !=, x, y)
#define ICHECK_NOTNULL(x)                                                         \
  ((x) == nullptr ? ::tvm::runtime::detail::LogFatal(__FILE__, __LINE__).stream() \
                        << ::tvm::runtime::detail::kTVM_INTERNAL_ERROR_MESSAGE    \
                        << TVM_ICHECK_INDENT << "Check not null: " #x << ' ',     \
   (x) : (x))  // NOLINT(*)

namespace detail {

/*!
 * \brief The text TVM's C API reports for a C++ exception (TVM's NormalizeError): a
 * "[time] file:line: " header becomes "Kind: message" (Kind from the message, else TVMError,
 * a "Check failed: ...:" prefix kept after it) followed by "Stack trace:" and the file and line;
 * a message without a header keeps its own "Kind: " prefix (or gets TVMError).
 */
inline std::string NormalizeError(const std::string& err) {
  std::istringstream is(err);
  std::string line, file, kind, check;
  int lineno = 0;
  bool header = false;
  if (!err.empty() && err[0] == '[') {
    // "[HH:MM:SS] file:line: rest"
    size_t close = err.find("] ");
    size_t colon = close == std::string::npos ? close : err.find(':', close + 2);
    size_t colon2 = colon == std::string::npos ? colon : err.find(':', colon + 1);
    if (colon2 != std::string::npos) {
      std::string num = err.substr(colon + 1, colon2 - colon - 1);
      char* end = nullptr;
      long v = std::strtol(num.c_str(), &end, 10);  // NOLINT(runtime/int)
      if (!num.empty() && end == num.c_str() + num.size()) {
        header = true;
        file = err.substr(close + 2, colon - close - 2);
        lineno = static_cast<int>(v);
        size_t start = colon2 + 1;
        while (start < err.size() && err[start] == ' ') ++start;
        is.str(err.substr(start));
      }
    }
    if (!header) return err;
  }
  std::getline(is, line);
  if (header && line.compare(0, 13, "Check failed:") == 0) {
    size_t end = line.find(':', 13);
    if (end != std::string::npos) {
      check = line.substr(0, end + 1) + ' ';
      line = line.substr(end + 1);
    }
  }
  size_t start = line.find_first_not_of(' ');
  if (start == std::string::npos) start = line.size();
  size_t pos = start;
  for (; pos < line.size(); ++pos) {
    char ch = line[pos];
    if (ch == ':') break;
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_' && ch != '.') {
      pos = line.size();
      break;
    }
  }
  if (pos < line.size() && pos > start) {
    kind = line.substr(start, pos - start);
    size_t rest = line.find_first_not_of(' ', pos + 1);
    line = rest == std::string::npos ? std::string() : line.substr(rest);
  } else {
    kind = "TVMError";
    line = line.substr(start);
  }
  std::ostringstream os;
  os << kind << ": " << check << line << '\n';
  bool in_trace = false;
  std::vector<std::string> trace;
  while (std::getline(is, line)) {
    if (line.compare(0, 11, "Stack trace") == 0) {
      in_trace = true;
      continue;
    }
    if (in_trace && line.compare(0, 2, "  ") == 0) {
      trace.push_back(line);
      continue;
    }
    in_trace = false;
    if (line.empty() && !is.good()) continue;
    os << line << '\n';
  }
  if (!file.empty() || !trace.empty()) {
    os << "Stack trace:\n";
    if (!file.empty()) os << "  File \"" << file << "\", line " << lineno << "\n";
    for (const auto& t : trace) os << t << '\n';
  }
  return os.str();
}

}  // namespace detail
}  // namespace runtime

using runtime::Error;
using runtime::InternalError;

}  // namespace tvm
#endif  // TVM_RUNTIME_LOGGING_H_
