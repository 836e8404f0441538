// Writes generated C++ for embed_sample.h's bundle: embed_sample_gen OUT.cc OUT.h
#include <cstdio>

#include "common/file_system.h"
#include "compiler/image/codegen.h"
#include "tests/compiler/image/embed_sample.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: embed_sample_gen OUT.cc OUT.h\n");
    return 2;
  }
  kcache::compiler::EmbedInfo info;
  info.symbol = "kcache_test::nested::sample_bundle";
  info.source_name = "tests/compiler/kernels/\"odd\"\nname.cu";
  info.archs = {"sm_90", "compute_90"};
  info.name_expressions = {"scale<float>"};
  std::string bytes = kcache::compiler::testing::sample_bundle();
  kcache::write_file_atomically(argv[1], kcache::compiler::generate_source(bytes, info));
  kcache::write_file_atomically(argv[2], kcache::compiler::generate_header(info));
  return 0;
}
