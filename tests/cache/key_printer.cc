// Prints the key of the sample request; key_test runs it as a separate process.
#include <cstdio>

#include "tests/cache/key_sample.h"

int main() {
  std::printf("%s\n",
              kcache::cache::compute_key(kcache::cache::testing::sample_request()).hex().c_str());
  return 0;
}
