// Lean images against the real NVRTC and nvJitLink (no GPU needed): the CUB
// fixture loses its unreferenced CCCL variables, what must stay stays, and
// anything unexpected gives NVRTC's own image.
#include "compiler/image/lean_image.h"

#include <gtest/gtest.h>

#include <cstring>
#include <set>

#include "bundle/bundle.h"
#include "common/error.h"
#include "common/lean_record.h"
#include "compiler/compiler.h"
#include "compiler/nvrtc/nvrtc.h"
#include "compiler/toolkit.h"
#include "tests/compiler/test_files.h"

namespace kcache::compiler {
namespace {

using testing::ScopedCwd;
using testing::test_dir;
using testing::write;

const std::string kKernels = "tests/compiler/kernels/";

template <typename T>
T get(const std::string& b, size_t at) {
  T v{};
  if (at + sizeof(T) <= b.size()) std::memcpy(&v, b.data() + at, sizeof(T));
  return v;
}

// The names in a cubin's ELF64 symbol table (.symtab), read in-process.
std::set<std::string> elf_symbols(const std::string& elf, size_t* count = nullptr) {
  std::set<std::string> names;
  if (elf.size() < 64 ||
      elf.compare(0, 4,
                  "\x7f"
                  "ELF") != 0 ||
      elf[4] != 2) {
    ADD_FAILURE() << "not an ELF64 image";
    return names;
  }
  uint64_t shoff = get<uint64_t>(elf, 0x28);
  uint16_t shentsize = get<uint16_t>(elf, 0x3A), shnum = get<uint16_t>(elf, 0x3C);
  if (count) *count = 0;
  for (uint16_t i = 0; i < shnum; ++i) {
    size_t sh = shoff + size_t{i} * shentsize;
    if (get<uint32_t>(elf, sh + 4) != 2) continue;  // SHT_SYMTAB
    uint64_t offset = get<uint64_t>(elf, sh + 0x18), size = get<uint64_t>(elf, sh + 0x20);
    uint32_t link = get<uint32_t>(elf, sh + 0x28);
    uint64_t entsize = get<uint64_t>(elf, sh + 0x38);
    size_t strsh = shoff + size_t{link} * shentsize;
    uint64_t stroff = get<uint64_t>(elf, strsh + 0x18);
    if (entsize == 0 || offset + size > elf.size()) break;
    for (uint64_t s = 0; s < size / entsize; ++s) {
      uint32_t name = get<uint32_t>(elf, offset + s * entsize);
      if (stroff + name < elf.size()) names.insert(std::string(elf.c_str() + stroff + name));
      if (count) ++*count;
    }
  }
  return names;
}

class LeanImageTest : public ::testing::Test {
 protected:
  void SetUp() override { compiler_ = std::make_unique<Compiler>(find_toolkit(""), nullptr); }

  CompileOptions kernel(const std::string& file, std::vector<std::string> archs,
                        std::string ptx = "") {
    CompileOptions o;
    o.source_path = kKernels + file;
    o.archs = std::move(archs);
    o.ptx_arch = std::move(ptx);
    o.std = "c++17";
    return o;
  }

  std::unique_ptr<Compiler> compiler_;
};

TEST_F(LeanImageTest, CubFixtureLosesItsUnreferencedCcclVariables) {
  CompileOptions o = kernel("cub_block.cu", {"sm_90"}, "compute_90");
  o.include_dirs = {compiler_->toolkit().root + "/include/cccl"};
  CompileResult lean = compiler_->compile(o);
  o.lean = false;
  CompileResult nvrtc = compiler_->compile(o);

  for (size_t i = 0; i < 2; ++i) {
    EXPECT_NE(lean.targets[i].key, nvrtc.targets[i].key) << "lean images must be keyed apart";
    EXPECT_TRUE(lean.targets[i].lean) << lean.targets[i].lean_note;
    EXPECT_GT(lean.targets[i].lean_variables_removed, 500u);
    EXPECT_FALSE(nvrtc.targets[i].lean);
    // As entries and bundles record it (issue 10).
    EXPECT_EQ(lean.targets[i].entry->lean(), (LeanRecord{LeanRecord::kAsked | LeanRecord::kLean,
                                                         lean.targets[i].lean_bytes_removed,
                                                         lean.targets[i].lean_variables_removed}));
    EXPECT_EQ(nvrtc.targets[i].entry->lean(), LeanRecord{}) << "--no-lean: off";
  }
  bundle::Bundle lean_bundle = bundle::parse(lean.bundle);
  bundle::Bundle nvrtc_bundle = bundle::parse(nvrtc.bundle);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(lean_bundle.images[i].lean, lean.targets[i].entry->lean());
    EXPECT_EQ(nvrtc_bundle.images[i].lean, LeanRecord{});
  }
  std::string lean_cubin(lean.targets[0].entry->payload());
  std::string nvrtc_cubin(nvrtc.targets[0].entry->payload());
  size_t lean_symbols = 0, nvrtc_symbols = 0;
  std::set<std::string> kept = elf_symbols(lean_cubin, &lean_symbols);
  elf_symbols(nvrtc_cubin, &nvrtc_symbols);
  EXPECT_LT(lean_symbols * 10, nvrtc_symbols) << lean_symbols << " vs " << nvrtc_symbols;
  EXPECT_LT(lean_cubin.size() * 3, nvrtc_cubin.size());
  EXPECT_EQ(lean.targets[0].lean_bytes_removed,
            static_cast<int64_t>(nvrtc_cubin.size() - lean_cubin.size()));
  EXPECT_TRUE(kept.count("sort_and_sum"));
  EXPECT_TRUE(kept.count("kThreads")) << "a user's own variable stays";

  std::string lean_ptx(lean.targets[1].entry->payload());
  std::string nvrtc_ptx(nvrtc.targets[1].entry->payload());
  EXPECT_EQ(nvrtc_ptx.size() - lean_ptx.size(),
            static_cast<size_t>(lean.targets[1].lean_bytes_removed));
  EXPECT_NE(lean_ptx.find(".entry sort_and_sum"), std::string::npos);
}

TEST_F(LeanImageTest, NoLeanGivesNvrtcsBytesExactly) {
  CompileOptions o = kernel("cub_block.cu", {"sm_90"});
  o.include_dirs = {compiler_->toolkit().root + "/include/cccl"};
  o.lean = false;
  CompileResult r = compiler_->compile(o);

  const Toolkit& tk = compiler_->toolkit();
  NvrtcInput in;
  in.source_name = o.source_path;
  in.source = *read_file(o.source_path);
  in.options = {"-arch=sm_90", "-std=c++17"};
  for (const std::string& d : tk.include_dirs) in.options.push_back("-I" + d);
  NvrtcOutput direct = Nvrtc::open(tk.nvrtc.path).compile(in);
  EXPECT_EQ(std::string(r.targets[0].entry->payload()), direct.image);
}

TEST_F(LeanImageTest, PtxWithNothingRemovableKeepsNvrtcsCubinByteIdentical) {
  CompileOptions o = kernel("saxpy.cu", {"sm_90"}, "compute_90");
  CompileResult lean = compiler_->compile(o);
  o.lean = false;
  CompileResult nvrtc = compiler_->compile(o);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_FALSE(lean.targets[i].lean);
    EXPECT_EQ(lean.targets[i].lean_note, "");
    EXPECT_EQ(lean.targets[i].entry->lean(), LeanRecord{LeanRecord::kAsked}) << "nothing to remove";
    EXPECT_EQ(lean.targets[i].entry->payload(), nvrtc.targets[i].entry->payload());
  }
}

TEST_F(LeanImageTest, NameExpressionsAndUserVariablesSurvive) {
  std::string dir = test_dir();
  ScopedCwd cwd(dir);
  write(dir, "k.cu",
        "#include <cuda/std/type_traits>\n"
        "__device__ int counter;\n"
        "namespace cuda { namespace my { __device__ int knob = 11; } }\n"
        "namespace cub { __device__ int knob; }\n"
        "extern \"C\" __global__ void k(bool* out) {\n"
        "  out[0] = cuda::std::is_integral<int>::value; counter = 1;\n"
        "}\n");
  CompileOptions o;
  o.source_path = "k.cu";
  o.archs = {"sm_90"};
  o.ptx_arch = "compute_90";
  o.name_expressions = {"&cuda::std::integral_constant<int, 7>::value"};
  CompileResult r = compiler_->compile(o);
  ASSERT_EQ(r.lowered_names.size(), 1u);
  const std::string lowered = r.lowered_names[0].lowered_name;
  ASSERT_NE(lowered.find("integral_constant"), std::string::npos) << lowered;
  EXPECT_TRUE(r.targets[0].lean) << r.targets[0].lean_note;
  std::set<std::string> symbols = elf_symbols(std::string(r.targets[0].entry->payload()));
  EXPECT_TRUE(symbols.count(lowered)) << "a name expression's variable must stay";
  EXPECT_TRUE(symbols.count("counter")) << "a user's __device__ variable must stay";
  // Issue 19: unreferenced, in CCCL's namespaces, still a user's.
  EXPECT_TRUE(symbols.count("_ZN4cuda2my4knobE")) << "a user's variable in namespace cuda";
  EXPECT_TRUE(symbols.count("_ZN3cub4knobE")) << "a user's variable in namespace cub";
  std::string ptx(r.targets[1].entry->payload());
  EXPECT_NE(ptx.find(lowered), std::string::npos);
  EXPECT_NE(ptx.find(" counter;"), std::string::npos);
}

// make_lean_image directly: each way out keeps NVRTC's image and says why.
TEST_F(LeanImageTest, DamagedPtxKeepsNvrtcsCubinAndSaysWhy) {
  LeanInput in;
  in.arch = "sm_90";
  in.nvrtc_image = "NVRTC's cubin";
  in.ptx = ".version 9.0\n.target sm_90\n.global .align 4 .u32 _ZN4cuda3std3__41xE;\n.visible .entry k( {";
  in.nvjitlink_path = compiler_->toolkit().nvjitlink.path;
  LeanImage out = make_lean_image(in);
  EXPECT_FALSE(out.lean);
  EXPECT_EQ(out.image, in.nvrtc_image);
  EXPECT_NE(out.note.find("left unchanged"), std::string::npos) << out.note;
}

TEST_F(LeanImageTest, PtxThatNvJitLinkRejectsKeepsNvrtcsCubin) {
  LeanInput in;
  in.arch = "sm_90";
  in.nvrtc_image = "NVRTC's cubin";
  in.ptx =
      ".version 9.0\n.target sm_90\n.address_size 64\n.global .align 4 .u32 _ZN4cuda3std3__41xE;\n"
      ".visible .entry k()\n{\n\tno_such_instruction.u32 %r1;\n}\n";
  in.nvjitlink_path = compiler_->toolkit().nvjitlink.path;
  ASSERT_FALSE(in.nvjitlink_path.empty()) << "the toolkit has no libnvJitLink";
  LeanImage out = make_lean_image(in);
  EXPECT_FALSE(out.lean);
  EXPECT_EQ(out.image, in.nvrtc_image);
  EXPECT_NE(out.note.find("nvJitLink"), std::string::npos) << out.note;
}

TEST_F(LeanImageTest, OptionsPtxasNeedsAreMappedAndOthersKeepNvrtcsCubin) {
  std::string why;
  auto mapped = link_options("sm_90a",
                             {"-std=c++17", "-DN=1", "-lineinfo", "--maxrregcount=32",
                              "--ptxas-options=-v", "-use_fast_math"},
                             &why);
  ASSERT_TRUE(mapped) << why;
  EXPECT_EQ(*mapped, (std::vector<std::string>{"-arch=sm_90a", "-lineinfo", "-maxrregcount=32",
                                               "-Xptxas=-v"}));
  for (const char* o : {"-G", "--device-debug", "-dlto", "-rdc=true", "-Ofast-compile=max"}) {
    EXPECT_FALSE(link_options("sm_90", {o}, &why)) << o;
    EXPECT_NE(why.find(o), std::string::npos);
  }
  LeanInput in;
  in.arch = "sm_90";
  in.nvrtc_image = "NVRTC's cubin";
  in.ptx = ".version 9.0\n.target sm_90\n.global .align 4 .u32 _ZN4cuda3std3__41xE;\n";
  in.options = {"-G"};
  LeanImage out = make_lean_image(in);
  EXPECT_EQ(out.image, in.nvrtc_image);
  EXPECT_NE(out.note.find("-G"), std::string::npos) << out.note;
}

}  // namespace
}  // namespace kcache::compiler
