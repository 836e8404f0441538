// `kcache remote check`: does the configured remote answer, and (unless it is
// read-only) does it take writes? Used when setting up CI, and in CI itself
// as a first step that fails loudly instead of every build step quietly
// running without the cache.
//
// What it does, with a probe key no build uses:
//   read   HEAD the probe key (404 or 200 are both fine: the server answered)
//   write  PUT a probe entry (signed if an HMAC key is set), GET it back
//          through the same checks a build applies, then DELETE it (a server
//          that refuses DELETE, like bazel-remote, leaves a tiny object behind)
// For grpc:// (the Remote Execution API) the same steps in its terms: read is
// GetCapabilities then GetActionResult; write is FindMissingBlobs,
// BatchUpdateBlobs (ByteStream.Write over the batch limit) and
// UpdateActionResult, then GetActionResult and BatchReadBlobs (ByteStream.Read)
// back; REAPI has no delete, so the probe stays until the server evicts it.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cache/config.h"
#include "cache/remote/remote.h"
#include "cli/command.h"
#include "cli/storage_flags.h"
#include "common/error.h"

namespace kcache::cli {
namespace {

using nlohmann::json;

struct Step {
  bool tried = false;
  bool ok = false;
  double ms = 0;
  std::string detail;  // what happened, or the error
};

json step_json(const Step& s) {
  if (!s.tried) return nullptr;
  return json{{"ok", s.ok}, {"ms", s.ms}, {"detail", s.detail}};
}

template <typename F>
Step run_step(F&& body) {
  Step step;
  step.tried = true;
  const auto start = std::chrono::steady_clock::now();
  try {
    step.detail = body();
    step.ok = true;
  } catch (const std::exception& e) {
    step.detail = e.what();
  }
  step.ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return step;
}

std::string origin_of(const cache::StorageConfig& config, const std::string& key) {
  auto it = config.origins.find(key);
  return it == config.origins.end() ? "" : " (from " + it->second + ")";
}

Hash128 probe_key() {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  const auto now = std::chrono::system_clock::now().time_since_epoch().count();
  return xxh3_128("kcache remote check probe " + std::string(host) + " " +
                  std::to_string(getpid()) + " " + std::to_string(now));
}

int remote_check(const GlobalOptions& global) {
  const cache::StorageConfig config = storage_config(global);
  if (!config.options.remote) {
    throw InvalidArgument(
        "no remote cache is configured: pass --remote URL, set KCACHE_REMOTE, or put `remote = "
        "URL` in " +
        (config.config_file.empty() ? config.options.local_dir + "/kcache.conf"
                                    : config.config_file));
  }
  const cache::RemoteOptions& options = *config.options.remote;
  const Hash128 key = probe_key();
  const bool reapi = cache::is_reapi_url(options.url);

  std::string auth = "none";
  if (!options.bearer_token_file.empty()) auth = "bearer token from " + options.bearer_token_file;
  if (!options.basic_auth_file.empty()) auth = "basic auth from " + options.basic_auth_file;
  if (!options.headers_file.empty()) auth += ", headers from " + options.headers_file;
  const std::string signing = options.hmac_key_file.empty()
                                  ? "off (entries are checked by checksum and key only)"
                                  : "HMAC-SHA256, key from " + options.hmac_key_file;

  std::unique_ptr<cache::Remote> remote;
  Step open = run_step([&] {
    remote = std::make_unique<cache::Remote>(options);
    return std::string("ok");
  });
  Step read, write, cleanup;
  if (open.ok) {
    read = run_step([&] {
      bool found = remote->backend().exists(key);
      if (reapi) {
        return std::string("GetCapabilities: SHA-256 offered; ") +
               (found ? "GetActionResult found the probe key"
                      : "GetActionResult: NOT_FOUND for a probe key, as expected");
      }
      return std::string(found ? "HEAD answered 200" : "HEAD answered 404, as expected") +
             " for a probe key";
    });
  }
  if (read.ok && !options.read_only) {
    write = run_step([&] {
      const std::string payload = "kcache remote check probe";
      cache::Entry probe(key, cache::TargetKind::ptx, "compute_90", 0,
                         std::chrono::duration_cast<std::chrono::seconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count(),
                         payload);
      remote->put(probe);
      std::optional<cache::Entry> back = remote->get(key);
      if (!back && reapi) {
        throw IoError(
            "FindMissingBlobs, BatchUpdateBlobs and UpdateActionResult for " +
            remote->backend().url_of(key) +
            " succeeded but GetActionResult right after answered NOT_FOUND: the server stores "
            "but never returns (write-only); check remote_instance_name and that its action "
            "cache and CAS read from where they write");
      }
      if (!back) {
        throw IoError("PUT " + remote->backend().url_of(key) +
                      " succeeded but a GET right after found nothing; check that the server "
                      "stores PUT bodies where it serves GETs");
      }
      if (back->payload() != payload) {
        throw CorruptError("the probe read back from " + remote->backend().url_of(key) +
                           " differs from what was written");
      }
      const std::string how =
          reapi ? "FindMissingBlobs, BatchUpdateBlobs (ByteStream.Write over the batch limit), "
                  "UpdateActionResult, then GetActionResult and BatchReadBlobs (ByteStream.Read) "
                  "back and verified"
                : "PUT, then GET back and verified";
      return how + (remote->signing() ? " (signature checked)" : "");
    });
    if (write.ok && reapi) {
      cleanup = run_step([&] {
        return "nothing to do: REAPI has no delete, so the probe stays at " +
               remote->backend().url_of(key) + " until the server evicts it; harmless";
      });
    } else if (write.ok) {
      cleanup = run_step([&] {
        remote->backend().remove(key);
        return std::string("probe removed");
      });
      if (!cleanup.ok) {
        cleanup.detail = "probe left at " + remote->backend().url_of(key) + " (" + cleanup.detail +
                         "); harmless";
      }
    }
  }

  const bool ok = open.ok && read.ok && (options.read_only || write.ok);
  std::string verdict;
  if (!open.ok) {
    verdict = "FAILED: the remote cannot be used: " + open.detail;
  } else if (!read.ok) {
    verdict = "FAILED: the remote does not answer";
  } else if (options.read_only) {
    verdict = "OK (read-only): the remote answers; writes were not tried";
  } else if (!write.ok) {
    verdict = "FAILED: the remote answers but writes do not work";
  } else {
    verdict = "OK: the remote answers and takes writes";
  }

  if (global.format == "json") {
    json out{{"url", options.url},
             {"layout", cache::to_string(options.layout)},
             {"read_only", options.read_only},
             {"auth", auth},
             {"signing", !options.hmac_key_file.empty()},
             {"open", step_json(open)},
             {"read", step_json(read)},
             {"write", step_json(write)},
             {"cleanup", step_json(cleanup)},
             {"ok", ok},
             {"verdict", verdict}};
    std::cout << out.dump(2) << "\n";
    return ok ? kExitOk : kExitFailed;
  }
  auto line = [](const char* label, const std::string& text) {
    std::printf("%-10s %s\n", label, text.c_str());
  };
  auto step_line = [&](const char* label, const Step& s) {
    if (!s.tried) return;
    char ms[32];
    std::snprintf(ms, sizeof ms, "%.1f ms", s.ms);
    line(label, (s.ok ? "ok: " : "FAILED: ") + s.detail + " (" + ms + ")");
  };
  line("Remote:", options.url + origin_of(config, "remote"));
  if (reapi) {
    line("Protocol:", "Remote Execution API v2 (action cache + CAS), instance \"" +
                          options.instance_name + "\"" +
                          (options.tls_ca_file.empty() ? "" : ", CA " + options.tls_ca_file) +
                          (options.tls_client_cert_file.empty()
                               ? ""
                               : ", client certificate " + options.tls_client_cert_file));
  } else {
    line("Layout:",
         std::string(cache::to_string(options.layout)) + " (" +
             (options.layout == cache::RemoteLayout::bazel ? "<url>/ac/<64 hex>" : "<url>/<key>") +
             ")");
  }
  line("Mode:", std::string(options.read_only ? "read-only" : "read-write") +
                    origin_of(config, "remote_read_only"));
  line("Auth:", auth);
  line("Signing:", signing);
  line("Timeouts:", "connect " + std::to_string(options.connect_timeout.count()) + " ms, whole " +
                        "operation " + std::to_string(options.timeout.count()) + " ms, " +
                        std::to_string(options.retries) + " retries");
  if (!open.ok) line("Open:", "FAILED: " + open.detail);
  step_line("Read:", read);
  step_line("Write:", write);
  step_line("Cleanup:", cleanup);
  line("Verdict:", verdict);
  return ok ? kExitOk : kExitFailed;
}

}  // namespace

void add_remote_command(CLI::App& app, Dispatch& dispatch) {
  CLI::App* remote = app.add_subcommand("remote", "The remote cache tier");
  remote->require_subcommand(1);
  remote->fallthrough();  // --dir and --format may also come after the verb
  CLI::App* check = remote->add_subcommand(
      "check",
      "Tell whether the remote answers and (unless read-only) takes writes; exit 0 if it "
      "works, 1 if not, 2 if no remote is configured");
  check->fallthrough();
  add_storage_flags(*check, dispatch.global);
  check->callback([&dispatch] {
    dispatch.verb = "remote check";
    dispatch.action = [&dispatch] { return remote_check(dispatch.global); };
  });
}

}  // namespace kcache::cli
