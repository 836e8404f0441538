// Modules from the kcache store, by entry key: for programs that ship the keys
// of their images (a bundle's image list, a manifest) rather than the images,
// and fetch them at run time from a store shared with the build (the local
// store, then the remote tier, as cache::Storage is configured).
//
// This is the optional target //runtime:store_loader. It links the store
// (SQLite; libcurl and libcrypto are opened on first remote use), which the
// core //runtime never does: a binary that only loads embedded bundles links
// //runtime alone.
//
// Selection follows the bundle rules (image_selection.h): the entries found
// are treated as the images of one bundle, and the best one for the device is
// loaded with Module::load_image, with the lowered names the entry carries.
//
// Errors:
// - NotFound when none of the keys is in the store: it lists every key, the
//   local store folder and the remote (if any), and says how to fill the store;
// - NotFound when entries were found but none runs on the device: it names the
//   device's arch and lists the images found (select_image's message);
// - DriverError as Module::load_image throws (no driver: "no CUDA driver found",
//   raised before the store is asked anything).
// A key whose entry is damaged is a miss (the store removes it), never an error.
//
// Thread safety: as cache::Storage (thread-safe) and Module.
#pragma once

#include "common/cxx17.h"  // first: says so in one line below C++17

#include <string>
#include <vector>

#include "bundle/bundle.h"
#include "cache/format/entry.h"
#include "cache/storage.h"
#include "common/hash.h"
#include "runtime/image_selection.h"
#include "runtime/module.h"

namespace kcache::runtime {

struct StoreImage {
  cache::Entry entry;  // the chosen image, with its lowered names
  Match match = Match::exact_cubin;
};

// Fetches every key through `storage` (each one is asked for, so pass the
// candidates only) and picks the best image for `device`. `what` names the
// images in messages ("saxpy.cu's images"). Throws NotFound as above.
StoreImage pick_from_store(cache::Storage& storage, const std::vector<Hash128>& keys,
                           const DeviceArch& device, const std::string& what);

// pick_from_store for the current context's device, then Module::load_image.
// The Module is named "<what> (store entry <key>)".
Module load_from_store(cache::Storage& storage, const std::vector<Hash128>& keys,
                       const std::string& what = "store entries");

// The keys a bundle lists for its images, in image order. Throws
// InvalidArgument if an image has no key or one that is not 32 hex digits.
std::vector<Hash128> bundle_keys(const bundle::Bundle& bundle, const std::string& what);

}  // namespace kcache::runtime
