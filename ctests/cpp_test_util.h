// Helpers of the C++ API tests (ctests/cpp_*.cpp): the C tests' EXPECT / fixtures / .npy
// helpers, plus checks on exceptions.
#ifndef TVM_RS_CPP_TEST_UTIL_H_
#define TVM_RS_CPP_TEST_UTIL_H_

#include <exception>
#include <string>

#include "test_util.h"

// Expects `stmt` to throw an exception of type `type` whose what() contains `text`.
#define EXPECT_THROW_HAS(stmt, type, text)                                                 \
  do {                                                                                     \
    g_checks++;                                                                            \
    bool tvm_caught_ = false;                                                              \
    try {                                                                                  \
      stmt;                                                                                \
    } catch (const type& e) {                                                              \
      tvm_caught_ = true;                                                                  \
      if (std::string(e.what()).find(text) == std::string::npos) {                        \
        g_failed++;                                                                        \
        fprintf(stderr, "FAIL %s:%d: %s threw \"%s\", without \"%s\"\n", __FILE__, __LINE__, \
                #stmt, e.what(), std::string(text).c_str());                               \
      }                                                                                    \
    } catch (const std::exception& e) {                                                    \
      tvm_caught_ = true;                                                                  \
      g_failed++;                                                                          \
      fprintf(stderr, "FAIL %s:%d: %s threw another exception: %s\n", __FILE__, __LINE__,  \
              #stmt, e.what());                                                            \
    }                                                                                      \
    if (!tvm_caught_) {                                                                    \
      g_failed++;                                                                          \
      fprintf(stderr, "FAIL %s:%d: %s did not throw\n", __FILE__, __LINE__, #stmt);        \
    }                                                                                      \
  } while (0)

// Runs a test body, counting an escaping exception as a failure.
#define RUN_TEST(fn)                                                                  \
  do {                                                                                \
    try {                                                                             \
      fn();                                                                           \
    } catch (const std::exception& e) {                                               \
      g_failed++;                                                                     \
      fprintf(stderr, "FAIL %s: uncaught exception: %s\n", #fn, e.what());            \
    }                                                                                 \
  } while (0)

static inline std::string fixture_path(const std::string& name) {
  return std::string(fixtures_dir()) + "/" + name;
}

#endif  // TVM_RS_CPP_TEST_UTIL_H_
