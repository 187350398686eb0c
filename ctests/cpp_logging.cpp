// logging.h and data_type.h: LOG(FATAL) / CHECK / ICHECK throw InternalError with file, line
// and TVM's message texts; LOG(INFO) does not throw; the C boundary's normalization of
// messages ("Kind: message", the check text, "Stack trace:" with the file and line);
// DataType and the text forms of data types.
#include <tvm/runtime/data_type.h>
#include <tvm/runtime/logging.h>
#include <tvm/runtime/packed_func.h>
#include <tvm/runtime/registry.h>

#include <sstream>
#include <stdexcept>
#include <string>
#include <unordered_set>

#include "cpp_test_util.h"

using namespace tvm::runtime;

namespace {

void Checks() {
  int line = 0;
  try {
    line = __LINE__ + 1;
    LOG(FATAL) << "ValueError: value " << 3;
  } catch (const InternalError& e) {
    g_checks++;
    EXPECT(e.lineno() == line && e.file().find("cpp_logging.cpp") != std::string::npos);
    EXPECT(e.message() == "ValueError: value 3");
    std::string what = e.what();
    EXPECT(what[0] == '[' && what.find("cpp_logging.cpp:" + std::to_string(line) +
                                       ": ValueError: value 3") != std::string::npos);
  }
  EXPECT_THROW_HAS(CHECK(1 + 1 == 3) << "math", InternalError,
                   "Check failed: (1 + 1 == 3) is false: math");
  EXPECT_THROW_HAS(CHECK_EQ(2, 3) << "eq", InternalError, "Check failed: 2 == 3 (2 vs. 3) : eq");
  EXPECT_THROW_HAS(ICHECK_LT(5, 4), InternalError, "An error occurred during the execution");
  EXPECT_THROW_HAS(ICHECK(false) << "why", InternalError, "Check failed: (false) is false: why");
  int* null = nullptr;
  EXPECT_THROW_HAS(ICHECK_NOTNULL(null), InternalError, "Check not null: null");
  // An exception thrown while a fatal message is written goes on (no second throw, no abort).
  auto boom = []() -> std::string { throw std::out_of_range("boom while formatting"); };
  EXPECT_THROW_HAS(LOG(FATAL) << "prefix " << boom(), std::out_of_range, "boom while formatting");
  // Errors are tvm::Error and dmlc::Error.
  EXPECT_THROW_HAS(LOG(FATAL) << "x", tvm::Error, "x");
  EXPECT_THROW_HAS(LOG(FATAL) << "x", dmlc::Error, "x");
  // Not fatal: nothing thrown.
  LOG(INFO) << "an info line";
  LOG(WARNING) << "a warning line";
  LOG_IF(INFO, false) << "not printed";
  DLOG(INFO) << "debug logging is off";
  CHECK(true) << "fine";
  ICHECK_EQ(1, 1);
  DCHECK(false) << "not evaluated without TVM_LOG_DEBUG";
  g_checks++;
}

void Normalize() {
  using detail::NormalizeError;
  EXPECT(NormalizeError("ValueError: plain") == "ValueError: plain\n");
  EXPECT(NormalizeError("no kind here") == "TVMError: no kind here\n");
  EXPECT(NormalizeError("[12:00:00] a/b.cc:42: IndexError: out\nmore\n") ==
         "IndexError: out\nmore\nStack trace:\n  File \"a/b.cc\", line 42\n");
  EXPECT(NormalizeError("[12:00:00] a.cc:7: Check failed: x == y: TypeError: z\n") ==
         "TypeError: Check failed: x == y: z\nStack trace:\n  File \"a.cc\", line 7\n");
  // Not a log header: kept.
  EXPECT(NormalizeError("[not a header") == "[not a header");
  try {
    ICHECK_EQ(1, 2) << "internal";
  } catch (const std::exception& e) {
    std::string n = NormalizeError(e.what());
    EXPECT(n.compare(0, 10, "TVMError: ") == 0);
    EXPECT(n.find("Check failed: 1 == 2 (1 vs. 2) : internal") != std::string::npos);
    EXPECT(n.find("Stack trace:\n  File \"") != std::string::npos);
  }
}

void DataTypes() {
  EXPECT(DataType::Float(32).code() == kDLFloat && DataType::Float(32).bytes() == 4);
  EXPECT(DataType::Bool().is_bool() && DataType::Void().is_void() && DataType::Handle().is_handle());
  EXPECT(DataType::Int(8, 4).is_vector() && DataType::Int(8, 4).element_of() == DataType::Int(8));
  const char* texts[] = {"float32", "int8", "uint1x4", "int64x2", "float16", "bfloat16",
                         "bool",    "handle", "uint8", "int32x16"};
  for (const char* t : texts) {
    DLDataType d = String2DLDataType(t);
    EXPECT(DLDataType2String(d) == t);
  }
  DLDataType f = String2DLDataType("float");
  EXPECT(f.code == kDLFloat && f.bits == 32 && f.lanes == 1);
  EXPECT(String2DLDataType("").code == kTVMOpaqueHandle && DLDataType2String(DataType::Void()) == "");
  EXPECT_THROW_HAS(String2DLDataType("floaty"), InternalError, "unknown type floaty");
  EXPECT_THROW_HAS(String2DLDataType("complex64"), InternalError, "unknown type complex64");
  EXPECT_THROW_HAS(DataType(kDLBfloat, 32, 1), InternalError, "Check failed");
  std::ostringstream os;
  os << DataType::Int(32, 4) << " " << DLDataType{kDLUInt, 1, 1};
  EXPECT(os.str() == "int32x4 bool");
  std::unordered_set<DataType> set{DataType::Int(8), DataType::Int(8), DataType::Float(8)};
  EXPECT(set.size() == 2);
  EXPECT(GetVectorBytes(DataType::Float(32, 4)) == 16 && GetVectorBytes(DataType::Bool()) == 1);
  EXPECT(TypeMatch(DataType::Int(16), kDLInt, 16) && TypeEqual(DataType::Int(8), DataType::Int(8)));
  // The runtime's text of data types (runtime.String formats one) matches ours.
  for (const char* t : texts) {
    String via = (*Registry::Get("runtime.String"))(DataType(String2DLDataType(t)));
    EXPECT(via == t);
  }
  PackedFunc echo([](TVMArgs args, TVMRetValue* r) { *r = args[0].operator std::string(); });
  std::string via = echo(DataType::UInt(8, 4));
  EXPECT(via == "uint8x4");
}

}  // namespace

int main() {
  RUN_TEST(Checks);
  RUN_TEST(Normalize);
  RUN_TEST(DataTypes);
  return finish();
}
