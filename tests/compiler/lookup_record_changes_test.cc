// Lookup records (compiler/lookup_record.h) against what may change between
// two compiles: files edited with their stamps set back, links and folders
// retargeted or created, the working folder, the defines. Each compiles
// through a store with records and compares with a compile through no store.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "cache/storage.h"
#include "compiler/compiler.h"
#include "compiler/lookup_record.h"
#include "compiler/program.h"
#include "compiler/toolkit.h"
#include "tests/compiler/lookup_record_testing.h"
#include "tests/compiler/test_files.h"

namespace kcache::compiler {
namespace {

using testing::test_dir;
using testing::write;

using testing::age;
using testing::record_hits;
using LookupRecordChangesTest = testing::LookupRecordFixture;

std::string ptx_of(const ProgramResult& r) {
  return r.record.output(cache::ProgramOutput::ptx).bytes;
}

// An NVRTC program through `storage` (null: no store).
ProgramResult program(cache::Storage* storage, const std::string& source, const std::string& name,
                      const std::vector<std::string>& opts) {
  Compiler c(find_toolkit(""), storage);
  ProgramSource p;
  p.source = source;
  p.name = name;
  ProgramOptions mapped = program_options(p, opts);
  EXPECT_EQ(mapped.unsupported, "");
  return compile_program(c, mapped.options);
}


// Attempt 1: a name_free program whose folder does not exist (NVRTC program
// names need not exist: CuPy-like names, random names). Its quoted include
// is absent from the missing folder, answered by the folder ABOVE it, and the
// record is written relative to the program folder. Another program in an
// existing sibling folder that holds its own h.cuh sees the same stamp of the
// parent folder.
TEST_F(LookupRecordChangesTest, MissingProgramFolderAnsweredByItsParent) {
  std::string dir = test_dir();
  write(dir, "inc/h.cuh", "#define V 1\n");
  write(dir, "base/p2/h.cuh", "#define V 2\n");
  cache::Storage& storage = store_in(dir);
  const std::string src =
      "#include \"h.cuh\"\nextern \"C\" __global__ void k(int* p) { *p = V * 7919; }\n";
  const std::vector<std::string> opts = {"-arch=compute_80", "-I", dir + "/inc"};
  ProgramResult a1 = program(&storage, src, dir + "/base/p1/kern.cu", opts);
  ProgramResult a2 = program(&storage, src, dir + "/base/p1/kern.cu", opts);
  EXPECT_EQ(ptx_of(a1), ptx_of(a2));
  EXPECT_GE(record_hits(storage), 1);
  int64_t before = record_hits(storage);
  ProgramResult b = program(&storage, src, dir + "/base/p2/kern.cu", opts);
  ProgramResult fresh = program(nullptr, src, dir + "/base/p2/kern.cu", opts);
  EXPECT_NE(ptx_of(fresh).find(std::to_string(2 * 7919)), std::string::npos);
  EXPECT_EQ(ptx_of(b), ptx_of(fresh)) << "record hits " << before << " -> " << record_hits(storage);
}

CompileOptions file_options(const std::string& dir) {
  CompileOptions o;
  o.source_path = dir + "/k.cu";
  o.source_name = "k.cu";
  o.working_folder = dir;
  o.ptx_arch = "compute_80";
  return o;
}

// Attempt 2: a same-size edit with mtime set back (touch -d); ctime moves.
TEST_F(LookupRecordChangesTest, SameSizeEditWithMtimeSetBack) {
  std::string dir = test_dir();
  std::string h = write(dir, "inc/h.cuh", "#define V 1\n");
  write(dir, "k.cu", "#include \"h.cuh\"\nextern \"C\" __global__ void k(int* p) { *p = V; }\n");
  cache::Storage& storage = store_in(dir);
  CompileOptions o = file_options(dir);
  o.include_dirs = {dir + "/inc"};
  Toolkit tk = find_toolkit("");
  Compiler(tk, &storage).compile(o);
  age();
  Compiler(tk, &storage).compile(o);
  Compiler(tk, &storage).compile(o);
  ASSERT_GE(record_hits(storage), 1);
  struct stat st;
  ASSERT_EQ(::stat(h.c_str(), &st), 0);
  FILE* f = std::fopen(h.c_str(), "r+");  // in place: same inode
  std::fputs("#define V 5\n", f);
  std::fclose(f);
  struct timespec times[2] = {st.st_atim, st.st_mtim};
  ASSERT_EQ(::utimensat(AT_FDCWD, h.c_str(), times, 0), 0);
  age();
  CompileResult got = Compiler(tk, &storage).compile(o);
  EXPECT_EQ(got.bundle, Compiler(tk, nullptr).compile(o).bundle);
}

// Attempt 3: a symlinked -I folder retargeted to another folder.
TEST_F(LookupRecordChangesTest, RetargetedSymlinkedIncludeFolder) {
  std::string dir = test_dir();
  write(dir, "a/h.cuh", "#define V 1\n");
  write(dir, "b/h.cuh", "#define V 2\n");
  write(dir, "k.cu", "#include <h.cuh>\nextern \"C\" __global__ void k(int* p) { *p = V; }\n");
  ASSERT_EQ(::symlink((dir + "/a").c_str(), (dir + "/inc").c_str()), 0);
  ASSERT_EQ(::symlink((dir + "/a").c_str(), (dir + "/sub_a").c_str()), 0);
  cache::Storage& storage = store_in(dir);
  CompileOptions o = file_options(dir);
  o.include_dirs = {dir + "/inc"};
  Toolkit tk = find_toolkit("");
  Compiler(tk, &storage).compile(o);
  age();
  Compiler(tk, &storage).compile(o);
  Compiler(tk, &storage).compile(o);
  ASSERT_GE(record_hits(storage), 1);
  ::unlink((dir + "/inc").c_str());
  ASSERT_EQ(::symlink((dir + "/b").c_str(), (dir + "/inc").c_str()), 0);
  age();
  CompileResult got = Compiler(tk, &storage).compile(o);
  EXPECT_EQ(got.bundle, Compiler(tk, nullptr).compile(o).bundle);
}

// Attempt 4: a folder created where a missing folder was (include "sub/h.cuh"
// found in a later -I while the first has no "sub").
TEST_F(LookupRecordChangesTest, NewFolderWhereAMissingOneWas) {
  std::string dir = test_dir();
  write(dir, "inc1/keep", "");
  write(dir, "inc2/sub/h.cuh", "#define V 1\n");
  write(dir, "k.cu", "#include \"sub/h.cuh\"\nextern \"C\" __global__ void k(int* p) { *p = V; }\n");
  cache::Storage& storage = store_in(dir);
  CompileOptions o = file_options(dir);
  o.include_dirs = {dir + "/inc1", dir + "/inc2"};
  Toolkit tk = find_toolkit("");
  Compiler(tk, &storage).compile(o);
  age();
  Compiler(tk, &storage).compile(o);
  Compiler(tk, &storage).compile(o);
  ASSERT_GE(record_hits(storage), 1);
  // The new file is made elsewhere and its folder moved in (rename): inc1
  // gains "sub" (its mtime moves).
  write(dir, "staging/sub/h.cuh", "#define V 2\n");
  ASSERT_EQ(::rename((dir + "/staging/sub").c_str(), (dir + "/inc1/sub").c_str()), 0);
  age();
  CompileResult got = Compiler(tk, &storage).compile(o);
  EXPECT_EQ(got.bundle, Compiler(tk, nullptr).compile(o).bundle);
}

// Attempt 5: relative -I with a changed working directory.
TEST_F(LookupRecordChangesTest, RelativeIncludeFolderAndAnotherWorkingDirectory) {
  std::string dir = test_dir();
  write(dir, "w1/inc/h.cuh", "#define V 1\n");
  write(dir, "w2/inc/h.cuh", "#define V 2\n");
  write(dir, "k.cu", "#include <h.cuh>\nextern \"C\" __global__ void k(int* p) { *p = V; }\n");
  cache::Storage& storage = store_in(dir);
  CompileOptions o = file_options(dir);
  o.working_folder.clear();  // the process's: each chdir below is another working folder
  o.include_dirs = {"inc"};
  Toolkit tk = find_toolkit("");
  char old[4096];
  ASSERT_TRUE(::getcwd(old, sizeof old));
  ASSERT_EQ(::chdir((dir + "/w1").c_str()), 0);
  Compiler(tk, &storage).compile(o);
  Compiler(tk, &storage).compile(o);
  EXPECT_EQ(record_hits(storage), 1);
  ASSERT_EQ(::chdir((dir + "/w2").c_str()), 0);
  CompileResult got = Compiler(tk, &storage).compile(o);
  std::string fresh = Compiler(tk, nullptr).compile(o).bundle;
  ASSERT_EQ(::chdir(old), 0);
  EXPECT_EQ(got.bundle, fresh);
}

// Attempt 6: -D changed between compiles (same text, same files).
TEST_F(LookupRecordChangesTest, ChangedDefine) {
  std::string dir = test_dir();
  write(dir, "inc/h.cuh", "#ifndef V\n#define V 1\n#endif\n");
  write(dir, "k.cu", "#include <h.cuh>\nextern \"C\" __global__ void k(int* p) { *p = V; }\n");
  cache::Storage& storage = store_in(dir);
  CompileOptions o = file_options(dir);
  o.include_dirs = {dir + "/inc"};
  Toolkit tk = find_toolkit("");
  Compiler(tk, &storage).compile(o);
  Compiler(tk, &storage).compile(o);
  EXPECT_EQ(record_hits(storage), 1);
  o.macros = {"-DV=3"};
  CompileResult got = Compiler(tk, &storage).compile(o);
  EXPECT_EQ(got.bundle, Compiler(tk, nullptr).compile(o).bundle);
  o.macros.clear();
  o.defines = {"V=4"};
  got = Compiler(tk, &storage).compile(o);
  EXPECT_EQ(got.bundle, Compiler(tk, nullptr).compile(o).bundle);
}

// Attempt 7: a header that is a symlink, retargeted to another file of the
// same size and mtime.
TEST_F(LookupRecordChangesTest, HeaderSymlinkRetargetedToSameSizeAndMtime) {
  std::string dir = test_dir();
  std::string a = write(dir, "a.cuh", "#define V 1\n");
  std::string b = write(dir, "b.cuh", "#define V 2\n");
  struct stat st;
  ASSERT_EQ(::stat(a.c_str(), &st), 0);
  struct timespec times[2] = {st.st_atim, st.st_mtim};
  ASSERT_EQ(::utimensat(AT_FDCWD, b.c_str(), times, 0), 0);
  ASSERT_EQ(::symlink(a.c_str(), (dir + "/h.cuh").c_str()), 0);
  write(dir, "k.cu", "#include \"h.cuh\"\nextern \"C\" __global__ void k(int* p) { *p = V; }\n");
  cache::Storage& storage = store_in(dir);
  CompileOptions o;
  o.source_path = dir + "/k.cu";
  o.source_name = "k.cu";
  o.working_folder = dir;
  o.ptx_arch = "compute_80";
  Toolkit tk = find_toolkit("");
  Compiler(tk, &storage).compile(o);
  age();
  Compiler(tk, &storage).compile(o);
  Compiler(tk, &storage).compile(o);
  ASSERT_GE(record_hits(storage), 1);
  ::unlink((dir + "/h.cuh").c_str());
  ASSERT_EQ(::symlink(b.c_str(), (dir + "/h.cuh").c_str()), 0);
  age();
  CompileResult got = Compiler(tk, &storage).compile(o);
  EXPECT_EQ(got.bundle, Compiler(tk, nullptr).compile(o).bundle);
}

}  // namespace
}  // namespace kcache::compiler
