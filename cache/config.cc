#include "cache/config.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "common/environment.h"
#include "common/error.h"
#include "common/file_system.h"
#include "common/paths.h"

namespace kcache::cache {
namespace {

constexpr const char* kConfigFileName = "kcache.conf";

// Every key the config file may hold, in the order `--help` and docs list them.
constexpr const char* kKeys[] = {
    "dir",
    "remote",
    "remote_layout",
    "remote_read_only",
    "remote_timeout",
    "remote_connect_timeout",
    "remote_retries",
    "remote_token_file",
    "remote_basic_auth_file",
    "remote_hmac_key_file",
    "remote_instance_name",
    "remote_tls_ca_file",
    "remote_tls_client_cert_file",
    "remote_tls_client_key_file",
    "remote_headers_file",
    "sloppiness",
    "umask",
};

bool is_path_key(const std::string& key) {
  return key == "dir" || (key.size() > 5 && key.compare(key.size() - 5, 5, "_file") == 0);
}

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

struct Value {
  std::string text;
  std::string origin;  // "--remote", "$KCACHE_REMOTE", "file:line"
};

// key -> value and the line it came from.
std::map<std::string, Value> parse_config_file(const std::string& path, const std::string& text) {
  std::map<std::string, Value> out;
  std::istringstream in(text);
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    const std::string where = path + ":" + std::to_string(number);
    line = trim(line);
    if (line.empty() || line[0] == '#') continue;
    const size_t eq = line.find('=');
    if (eq == std::string::npos) {
      throw InvalidArgument(where + ": expected `key = value`, got \"" + line + "\"");
    }
    const std::string key = trim(line.substr(0, eq));
    std::string value = trim(line.substr(eq + 1));
    if (std::find(std::begin(kKeys), std::end(kKeys), key) == std::end(kKeys)) {
      std::string known;
      for (const char* k : kKeys) known += std::string(known.empty() ? "" : ", ") + k;
      throw InvalidArgument(where + ": unknown setting \"" + key + "\" (known: " + known + ")");
    }
    if (is_path_key(key) && !value.empty() && value[0] != '/') {
      value = parent_folder(path) + "/" + value;
    }
    out[key] = Value{value, where};
  }
  return out;
}

std::string default_dir(const GetEnv& read_env) {
  if (const char* xdg = read_env(env::name(env::Var::xdg_cache_home)); xdg && *xdg) {
    return std::string(xdg) + "/kcache";
  }
  if (const char* home = read_env(env::name(env::Var::home)); home && *home) {
    return std::string(home) + "/.cache/kcache";
  }
  return default_store_dir();  // falls back on the password database, or says what to set
}

class Resolver {
 public:
  Resolver(const std::map<std::string, std::string>& flags, const GetEnv& read_env)
      : flags_(flags), read_env_(read_env) {}

  void set_file(std::map<std::string, Value> file) { file_ = std::move(file); }

  // The value of `key` from the highest layer that has one.
  std::optional<Value> find(const std::string& key) const {
    if (auto it = flags_.find(key); it != flags_.end()) {
      std::string flag = "--" + key;
      std::replace(flag.begin(), flag.end(), '_', '-');
      return Value{it->second, flag};
    }
    const std::string var = env_var_for(key);
    if (const char* v = read_env_(var.c_str()); v && *v) return Value{v, "$" + var};
    if (auto it = file_.find(key); it != file_.end()) return it->second;
    return std::nullopt;
  }

 private:
  const std::map<std::string, std::string>& flags_;
  const GetEnv& read_env_;
  std::map<std::string, Value> file_;
};

[[noreturn]] void bad_value(const std::string& key, const Value& v, const std::string& expected) {
  throw InvalidArgument("bad value \"" + v.text + "\" for " + key + " (from " + v.origin +
                        "): expected " + expected);
}

bool parse_bool(const std::string& key, const Value& v) {
  const std::string t = lower(v.text);
  if (t == "1" || t == "true" || t == "yes" || t == "on") return true;
  if (t == "0" || t == "false" || t == "no" || t == "off") return false;
  bad_value(key, v, "true or false (yes/no, on/off, 1/0)");
}

std::chrono::milliseconds parse_duration(const std::string& key, const Value& v) {
  const std::string t = lower(v.text);
  size_t unit_at = 0;
  while (unit_at < t.size() &&
         (std::isdigit(static_cast<unsigned char>(t[unit_at])) || t[unit_at] == '.')) {
    ++unit_at;
  }
  const std::string number = t.substr(0, unit_at), unit = t.substr(unit_at);
  char* end = nullptr;
  const double value = number.empty() ? -1 : std::strtod(number.c_str(), &end);
  double scale = 0;
  if (unit.empty() || unit == "s") scale = 1000;
  if (unit == "ms") scale = 1;
  if (unit == "m" || unit == "min") scale = 60000;
  if (value <= 0 || scale == 0 || !end || *end != '\0' || !std::isfinite(value)) {
    bad_value(key, v, "a positive duration such as 500ms, 10s or 2m (a bare number is seconds)");
  }
  return std::chrono::milliseconds(std::max<int64_t>(1, std::llround(value * scale)));
}

int parse_retries(const std::string& key, const Value& v) {
  char* end = nullptr;
  long n = std::strtol(v.text.c_str(), &end, 10);
  if (v.text.empty() || *end != '\0' || n < 0 || n > 10) bad_value(key, v, "a count from 0 to 10");
  return static_cast<int>(n);
}

}  // namespace

std::string env_var_for(const std::string& key) {
  std::string var = "KCACHE_" + key;
  for (char& c : var) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return var;
}

StorageConfig resolve_storage_config(const std::map<std::string, std::string>& flags,
                                     const GetEnv& read_env_in) {
  const GetEnv read_env =
      read_env_in ? read_env_in : [](const char* name) { return env::read(name); };
  for (const auto& [key, value] : flags) {
    if (std::find(std::begin(kKeys), std::end(kKeys), key) == std::end(kKeys)) {
      throw InvalidArgument("unknown storage setting \"" + key + "\"");
    }
  }
  StorageConfig config;
  Resolver resolver(flags, read_env);

  // The store folder first: the default config file lives in it.
  std::map<std::string, Value> explicit_file;
  if (const char* path = read_env(env::name(env::Var::kcache_config)); path && *path) {
    std::optional<std::string> text = read_file(path);
    if (!text) {
      throw IoError(std::string("the config file ") + path +
                    " named by $KCACHE_CONFIG does not exist; create it or unset KCACHE_CONFIG");
    }
    explicit_file = parse_config_file(path, *text);
    config.config_file = path;
  }
  std::optional<Value> dir = resolver.find("dir");
  if (!dir) {
    if (auto it = explicit_file.find("dir"); it != explicit_file.end()) dir = it->second;
  }
  if (dir) {
    config.options.local_dir = dir->text;
    config.origins["dir"] = dir->origin;
  } else {
    config.options.local_dir = default_dir(read_env);
  }
  if (config.config_file.empty()) {
    const std::string path = config.options.local_dir + "/" + kConfigFileName;
    std::optional<std::string> text;
    try {
      text = read_file(path);
    } catch (const IoError&) {
      // An unreadable store folder is the store's trouble to report, not ours.
    }
    if (text) {
      explicit_file = parse_config_file(path, *text);
      if (auto it = explicit_file.find("dir"); it != explicit_file.end()) {
        throw InvalidArgument(it->second.origin +
                              ": `dir` cannot be set in the store's own kcache.conf; set it in "
                              "the file $KCACHE_CONFIG names, or with KCACHE_DIR / --dir");
      }
      config.config_file = path;
    }
  }
  resolver.set_file(std::move(explicit_file));

  auto take = [&](const std::string& key) {
    std::optional<Value> v = resolver.find(key);
    if (v) config.origins[key] = v->origin;
    return v;
  };

  RemoteOptions remote;
  std::optional<Value> url = take("remote");
  if (auto v = take("remote_layout")) {
    std::optional<RemoteLayout> layout = parse_remote_layout(lower(v->text));
    if (!layout) bad_value("remote_layout", *v, "flat or bazel");
    remote.layout = *layout;
  }
  if (auto v = take("remote_read_only")) remote.read_only = parse_bool("remote_read_only", *v);
  if (auto v = take("remote_timeout")) remote.timeout = parse_duration("remote_timeout", *v);
  if (auto v = take("remote_connect_timeout")) {
    remote.connect_timeout = parse_duration("remote_connect_timeout", *v);
  }
  if (auto v = take("remote_retries")) remote.retries = parse_retries("remote_retries", *v);
  if (auto v = take("remote_token_file")) remote.bearer_token_file = v->text;
  if (auto v = take("remote_basic_auth_file")) remote.basic_auth_file = v->text;
  if (auto v = take("remote_hmac_key_file")) remote.hmac_key_file = v->text;
  // grpc:// remotes (the Remote Execution API; cache/remote/reapi/).
  if (auto v = take("remote_instance_name")) remote.instance_name = v->text;
  if (auto v = take("remote_tls_ca_file")) remote.tls_ca_file = v->text;
  if (auto v = take("remote_tls_client_cert_file")) remote.tls_client_cert_file = v->text;
  if (auto v = take("remote_tls_client_key_file")) remote.tls_client_key_file = v->text;
  if (auto v = take("remote_headers_file")) remote.headers_file = v->text;
  if (auto v = take("sloppiness")) {
    // ccache's grammar: a list separated by commas or blanks.
    std::string list = v->text;
    std::replace(list.begin(), list.end(), ',', ' ');
    std::istringstream words(list);
    for (std::string word; words >> word;) {
      if (lower(word) != "time_macros") bad_value("sloppiness", *v, "time_macros (or nothing)");
      config.options.sloppy_time_macros = true;
    }
  }
  if (auto v = take("umask")) {
    // ccache's: octal digits, what new store folders and files leave out.
    const std::string& t = v->text;
    if (t.empty() || t.size() > 4 || t.find_first_not_of("01234567") != std::string::npos) {
      bad_value("umask", *v, "an octal umask such as 002 or 0007");
    }
    config.options.umask = static_cast<mode_t>(std::stoul(t, nullptr, 8));
  }
  if (url && lower(url->text) != "off" && lower(url->text) != "none") {
    try {
      remote.url = normalize_remote_url(url->text);
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(std::string(e.what()) + " (from " + url->origin + ")");
    }
    config.options.remote = remote;
  }
  return config;
}

StorageOptions storage_options_or_local_only(const std::function<void(const std::string&)>& warn,
                                             const GetEnv& read_env) {
  try {
    return resolve_storage_config({}, read_env).options;
  } catch (const Error& e) {
    const std::string message =
        std::string(e.what()) + "; using the default local store without a remote cache";
    if (warn) {
      warn(message);
    } else if (!store_quiet()) {
      std::fprintf(stderr, "kcache: warning: %s\n", message.c_str());
    }
  }
  StorageOptions options;
  try {
    const char* dir =
        read_env ? read_env(env::name(env::Var::kcache_dir)) : env::read(env::Var::kcache_dir);
    options.local_dir = dir && *dir ? dir : default_store_dir();
  } catch (const Error&) {
    options.local_enabled = false;  // no folder at all: Storage then runs without a cache
  }
  return options;
}

}  // namespace kcache::cache
