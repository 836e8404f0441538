#include "runtime/image_selection.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <string>
#include <tuple>
#include <vector>

#include "common/error.h"

namespace kcache::runtime {
namespace {

using bundle::ImageKind;

// A bundle whose images are given as "sm_90", "compute_90a", ...: the kind
// follows the prefix, unless forced (to build malformed bundles).
bundle::Bundle make_bundle(const std::vector<std::string>& archs) {
  static std::deque<std::string> storage;  // views need strings that never move
  bundle::Bundle b;
  for (const std::string& arch : archs) {
    storage.push_back(arch);
    ImageKind kind = arch.rfind("compute_", 0) == 0 ? ImageKind::ptx : ImageKind::cubin;
    b.images.push_back({kind, storage.back(), "", "data"});
  }
  return b;
}

DeviceArch device(int major, int minor, bool arch_specific = true) {
  DeviceArch d;
  d.major = major;
  d.minor = minor;
  d.arch_specific = arch_specific;
  return d;
}

// The arch of the chosen image, or "none".
std::string pick(const std::vector<std::string>& archs, const DeviceArch& d) {
  bundle::Bundle b = make_bundle(archs);
  std::optional<Selection> s = find_image(b, d);
  return s ? std::string(b.images[s->index].arch) : "none";
}

Match match_of(const std::vector<std::string>& archs, const DeviceArch& d) {
  bundle::Bundle b = make_bundle(archs);
  return find_image(b, d).value().match;
}

TEST(ParseArchTest, ReadsRealVirtualAndSuffixes) {
  auto a = parse_arch("sm_90a").value();
  EXPECT_FALSE(a.is_virtual);
  EXPECT_EQ(a.major, 9);
  EXPECT_EQ(a.minor, 0);
  EXPECT_EQ(a.suffix, 'a');
  auto b = parse_arch("compute_100f").value();
  EXPECT_TRUE(b.is_virtual);
  EXPECT_EQ(b.major, 10);
  EXPECT_EQ(b.minor, 0);
  EXPECT_EQ(b.suffix, 'f');
  auto c = parse_arch("sm_121").value();
  EXPECT_EQ(c.major, 12);
  EXPECT_EQ(c.minor, 1);
  EXPECT_EQ(c.suffix, '\0');
  auto d = parse_arch("sm_75").value();
  EXPECT_EQ(d.major, 7);
  EXPECT_EQ(d.minor, 5);
}

TEST(ParseArchTest, RejectsWhatIsNotAnArch) {
  for (const char* bad : {"", "sm_", "sm_9", "sm_9000", "sm_90b", "sm_9x", "compute", "gfx90a",
                          "SM_90", "sm_90af", "sm_05", "lto_90", " sm_90"}) {
    EXPECT_FALSE(parse_arch(bad).has_value()) << bad;
  }
}

TEST(ImageSelectionTest, PicksExactCubinFirst) {
  EXPECT_EQ(pick({"compute_90", "sm_80", "sm_90", "sm_86"}, device(9, 0)), "sm_90");
  EXPECT_EQ(match_of({"compute_90", "sm_90"}, device(9, 0)), Match::exact_cubin);
}

TEST(ImageSelectionTest, PrefersArchSpecificThenFamilyThenPlainAtTheExactArch) {
  EXPECT_EQ(pick({"sm_90", "sm_90a"}, device(9, 0)), "sm_90a");
  EXPECT_EQ(pick({"sm_100", "sm_100f", "sm_100a"}, device(10, 0)), "sm_100a");
  EXPECT_EQ(pick({"sm_100", "sm_100f"}, device(10, 0)), "sm_100f");
}

TEST(ImageSelectionTest, ArchSpecificCubinRunsOnlyOnItsExactArch) {
  EXPECT_EQ(pick({"sm_100a"}, device(10, 3)), "none");
  EXPECT_EQ(pick({"sm_100a", "sm_100"}, device(10, 3)), "sm_100");
  EXPECT_EQ(pick({"sm_90a"}, device(10, 0)), "none");
  EXPECT_EQ(pick({"sm_90a"}, device(9, 0)), "sm_90a");
}

TEST(ImageSelectionTest, ArchSpecificImagesAreSkippedWhenNotAllowed) {
  EXPECT_EQ(pick({"sm_90a", "sm_90"}, device(9, 0, false)), "sm_90");
  EXPECT_EQ(pick({"sm_90a", "compute_90a", "compute_80"}, device(9, 0, false)), "compute_80");
  EXPECT_EQ(pick({"sm_90a"}, device(9, 0, false)), "none");
}

TEST(ImageSelectionTest, CompatibleCubinIsTheHighestMinorOfTheSameMajor) {
  EXPECT_EQ(pick({"sm_80", "sm_86", "compute_89"}, device(8, 9)), "sm_86");
  EXPECT_EQ(match_of({"sm_80", "sm_86"}, device(8, 9)), Match::compatible_cubin);
  EXPECT_EQ(pick({"sm_86", "sm_80"}, device(8, 7)), "sm_86");
}

TEST(ImageSelectionTest, CubinForAHigherMinorOrAnotherMajorNeverRuns) {
  EXPECT_EQ(pick({"sm_86"}, device(8, 0)), "none");
  EXPECT_EQ(pick({"sm_80"}, device(9, 0)), "none");
  EXPECT_EQ(pick({"sm_90"}, device(8, 9)), "none");
  EXPECT_EQ(pick({"sm_120"}, device(10, 0)), "none");
}

TEST(ImageSelectionTest, FamilyCubinRunsOnLaterMembersOfItsFamily) {
  EXPECT_EQ(pick({"sm_100f"}, device(10, 3)), "sm_100f");
  EXPECT_EQ(match_of({"sm_100f"}, device(10, 3)), Match::compatible_cubin);
  EXPECT_EQ(pick({"sm_103f"}, device(10, 0)), "none");
  EXPECT_EQ(pick({"sm_100f"}, device(11, 0)), "none");
  EXPECT_EQ(pick({"sm_120f"}, device(12, 1)), "sm_120f");
  // Same minor: family before plain; a higher minor wins over the suffix.
  EXPECT_EQ(pick({"sm_100", "sm_100f"}, device(10, 3)), "sm_100f");
  EXPECT_EQ(pick({"sm_100f", "sm_101"}, device(10, 3)), "sm_101");
}

TEST(ImageSelectionTest, ExactCubinBeatsACompatibleFamilyCubin) {
  EXPECT_EQ(pick({"sm_100f", "sm_103"}, device(10, 3)), "sm_103");
}

TEST(ImageSelectionTest, FallsBackToPtxOfTheHighestVirtualArchNotAboveTheDevice) {
  EXPECT_EQ(pick({"compute_80", "compute_90", "compute_100"}, device(9, 0)), "compute_90");
  EXPECT_EQ(pick({"compute_80", "compute_90", "compute_100"}, device(8, 9)), "compute_80");
  EXPECT_EQ(pick({"compute_75", "compute_80"}, device(12, 0)), "compute_80");
  EXPECT_EQ(pick({"compute_90"}, device(8, 9)), "none");
  EXPECT_EQ(match_of({"compute_80"}, device(9, 0)), Match::ptx);
  // No cubin this device can run: PTX even though cubins exist.
  EXPECT_EQ(pick({"sm_80", "sm_100", "compute_80"}, device(9, 0)), "compute_80");
}

TEST(ImageSelectionTest, ArchSpecificAndFamilyPtxFollowTheirOwnRules) {
  EXPECT_EQ(pick({"compute_90a", "compute_80"}, device(9, 0)), "compute_90a");
  EXPECT_EQ(pick({"compute_90a", "compute_80"}, device(10, 0)), "compute_80");
  EXPECT_EQ(pick({"compute_100f"}, device(10, 3)), "compute_100f");
  EXPECT_EQ(pick({"compute_100f"}, device(12, 0)), "none");
  EXPECT_EQ(pick({"compute_100", "compute_100f"}, device(10, 0)), "compute_100f");
}

TEST(ImageSelectionTest, AnyCubinThatRunsBeatsNewerPtx) {
  EXPECT_EQ(pick({"compute_89", "sm_80"}, device(8, 9)), "sm_80");
}

TEST(ImageSelectionTest, IgnoresUnparseableArchsAndKindMismatches) {
  bundle::Bundle b = make_bundle({"sm_90"});
  b.images[0].kind = ImageKind::ptx;  // PTX labelled with a real arch
  b.images.push_back({ImageKind::cubin, "compute_90", "", "x"});
  b.images.push_back({ImageKind::cubin, "sm_9x", "", "x"});
  EXPECT_FALSE(find_image(b, device(9, 0)).has_value());
  b.images.push_back({ImageKind::cubin, "sm_90", "", "x"});
  EXPECT_EQ(find_image(b, device(9, 0))->index, 3u);
}

TEST(ImageSelectionTest, FirstOfEqualImagesWins) {
  bundle::Bundle b = make_bundle({"sm_80", "sm_90", "sm_90"});
  EXPECT_EQ(find_image(b, device(9, 0))->index, 1u);
}

TEST(ImageSelectionTest, NoMatchErrorNamesTheDeviceArchAndListsEveryImage) {
  bundle::Bundle b = make_bundle({"sm_90", "sm_90a", "compute_90"});
  b.images.push_back({ImageKind::cubin, "sm_9x", "", "x"});
  try {
    select_image(b, device(8, 6), "saxpy.kcb");
    FAIL() << "expected NotFound";
  } catch (const NotFound& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("saxpy.kcb"), std::string::npos) << m;
    EXPECT_NE(m.find("sm_86"), std::string::npos) << m;
    EXPECT_NE(m.find("cubin sm_90,"), std::string::npos) << m;
    EXPECT_NE(m.find("cubin sm_90a"), std::string::npos) << m;
    EXPECT_NE(m.find("ptx compute_90"), std::string::npos) << m;
    EXPECT_NE(m.find("sm_9x (unrecognised arch)"), std::string::npos) << m;
    EXPECT_NE(m.find("Rebuild"), std::string::npos) << m;
    EXPECT_EQ(e.kind(), ErrorKind::not_found);
  }
}

TEST(ImageSelectionTest, EmptyBundleErrorSaysItHasNoImages) {
  try {
    select_image(bundle::Bundle{}, device(9, 0), "empty.kcb");
    FAIL() << "expected NotFound";
  } catch (const NotFound& e) {
    EXPECT_NE(std::string(e.what()).find("no images at all"), std::string::npos) << e.what();
  }
}

TEST(ImageSelectionTest, SelectImageReturnsWhatFindImageFinds) {
  bundle::Bundle b = make_bundle({"sm_80", "compute_80"});
  Selection s = select_image(b, device(9, 0), "x");
  EXPECT_EQ(s.index, 1u);
  EXPECT_EQ(s.match, Match::ptx);
}

// A second, deliberately naive statement of the rules: list every image that
// runs, order by the documented preference, take the first. Checked against
// find_image on every subset of a pool of images and every device below.
struct Candidate {
  size_t index;
  int tier, major, minor, suffix;
};

std::optional<size_t> reference(const bundle::Bundle& b, const DeviceArch& d) {
  std::vector<Candidate> runs;
  for (size_t i = 0; i < b.images.size(); ++i) {
    auto a = parse_arch(b.images[i].arch);
    if (!a) continue;
    bool cubin = b.images[i].kind == ImageKind::cubin;
    if (cubin == a->is_virtual) continue;
    bool ok;
    if (a->suffix == 'a') {
      ok = d.arch_specific && a->major == d.major && a->minor == d.minor;
    } else if (cubin || a->suffix == 'f') {
      ok = a->major == d.major && a->minor <= d.minor;
    } else {
      ok = a->major * 10 + a->minor <= d.major * 10 + d.minor;
    }
    if (!ok) continue;
    int tier = !cubin ? 0 : (a->minor == d.minor ? 2 : 1);
    int suffix = a->suffix == 'a' ? 2 : a->suffix == 'f' ? 1 : 0;
    runs.push_back({i, tier, a->major, a->minor, suffix});
  }
  if (runs.empty()) return std::nullopt;
  std::stable_sort(runs.begin(), runs.end(), [](const Candidate& x, const Candidate& y) {
    return std::tie(x.tier, x.major, x.minor, x.suffix) >
           std::tie(y.tier, y.major, y.minor, y.suffix);
  });
  return runs.front().index;
}

TEST(ImageSelectionTest, AgreesWithANaiveStatementOfTheRulesOnEverySubset) {
  const std::vector<std::string> pool = {
      "sm_75",   "sm_80",   "sm_86",      "sm_89",      "sm_90",       "sm_90a",      "sm_100",
      "sm_100f", "sm_103a", "compute_75", "compute_80", "compute_90a", "compute_100f"};
  const std::vector<std::pair<int, int>> devices = {{7, 5},  {8, 0},  {8, 6},  {8, 9},  {9, 0},
                                                    {10, 0}, {10, 3}, {11, 0}, {12, 0}, {12, 1}};
  size_t checked = 0;
  for (uint32_t mask = 0; mask < (1u << pool.size()); mask += 7) {  // a spread of subsets
    std::vector<std::string> archs;
    for (size_t i = 0; i < pool.size(); ++i) {
      if (mask & (1u << i)) archs.push_back(pool[i]);
    }
    bundle::Bundle b = make_bundle(archs);
    for (auto [major, minor] : devices) {
      for (bool arch_specific : {true, false}) {
        DeviceArch d = device(major, minor, arch_specific);
        std::optional<Selection> got = find_image(b, d);
        std::optional<size_t> want = reference(b, d);
        ASSERT_EQ(got.has_value(), want.has_value()) << d.name() << " mask " << mask;
        if (got) {
          ASSERT_EQ(got->index, *want) << d.name() << " mask " << mask;
        }
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 20000u);
}

}  // namespace
}  // namespace kcache::runtime
