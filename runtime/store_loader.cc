#include "runtime/store_loader.h"

#include <optional>
#include <utility>

#include "cache/remote/remote.h"
#include "cache/local/store.h"
#include "common/error.h"
#include "runtime/device.h"

namespace kcache::runtime {
namespace {

bundle::ImageKind image_kind(cache::TargetKind kind) {
  return kind == cache::TargetKind::ptx ? bundle::ImageKind::ptx : bundle::ImageKind::cubin;
}

std::string where(cache::Storage& storage) {
  std::string s = storage.local() ? "the local store " + storage.local()->dir()
                                  : "no local store (disabled, or it could not be opened)";
  if (cache::Remote* remote = storage.remote()) {
    s += " and the remote " + remote->options().url;
    if (!storage.remote_usable()) s += " (which failed earlier in this process)";
  } else {
    s += ", no remote";
  }
  return s;
}

}  // namespace

StoreImage pick_from_store(cache::Storage& storage, const std::vector<Hash128>& keys,
                           const DeviceArch& device, const std::string& what) {
  if (keys.empty()) throw InvalidArgument("no store keys given for " + what);
  std::vector<cache::Entry> found;
  found.reserve(keys.size());  // the bundle below views into these: no reallocation
  for (const Hash128& key : keys) {
    std::optional<cache::Entry> e = storage.get(key);
    if (e && e->key() == key) found.push_back(std::move(*e));
  }
  if (found.empty()) {
    std::string listed;
    for (const Hash128& key : keys) listed += (listed.empty() ? "" : ", ") + key.hex();
    throw NotFound("none of the " + std::to_string(keys.size()) + " store entries of " + what +
                   " is in " + where(storage) + ": " + listed +
                   ". Build the kernels with that store (KCACHE_DIR, or --action_env=KCACHE_DIR "
                   "for cuda_kernel), `kcache import` an archive of them, or configure the "
                   "remote that holds them (KCACHE_REMOTE)");
  }

  bundle::Bundle images;
  std::vector<std::string> hex;  // Image::key views into these
  hex.reserve(found.size());
  for (const cache::Entry& e : found) {
    hex.push_back(e.key().hex());
    images.images.push_back({image_kind(e.kind()), e.arch(), hex.back(), e.payload()});
  }
  Selection s = select_image(images, device, what + " (entries found in the store)");
  return StoreImage{std::move(found[s.index]), s.match};
}

Module load_from_store(cache::Storage& storage, const std::vector<Hash128>& keys,
                       const std::string& what) {
  // The device first: without a driver nothing needs fetching.
  DeviceArch device = Device::current().arch();
  StoreImage chosen = pick_from_store(storage, keys, device, what);
  const cache::Entry& e = chosen.entry;
  std::vector<std::pair<std::string, std::string>> names;
  for (const cache::LoweredName& n : e.lowered_names()) {
    names.emplace_back(n.name_expression, n.lowered_name);
  }
  return Module::load_image(image_kind(e.kind()), e.arch(), e.payload(),
                            what + " (store entry " + e.key().hex() + ")", std::move(names));
}

std::vector<Hash128> bundle_keys(const bundle::Bundle& bundle, const std::string& what) {
  std::vector<Hash128> keys;
  for (const bundle::Image& image : bundle.images) {
    std::optional<Hash128> key = Hash128::from_hex(image.key);
    if (!key) {
      throw InvalidArgument("the " + std::string(bundle::to_string(image.kind)) + " " +
                            std::string(image.arch) + " image of " + what + " has " +
                            (image.key.empty() ? "no store key"
                                               : "a store key that is not 32 hex digits (\"" +
                                                     std::string(image.key) + "\")") +
                            ": rebuild it with `kcache compile`, which records each image's key");
    }
    keys.push_back(*key);
  }
  return keys;
}

}  // namespace kcache::runtime
