#include "tests/testing/buildgrid_server.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "tests/testing/http_servers.h"

namespace kcache::testing {
namespace {

bool accepts(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  close(fd);
  return ok;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string base64url(const std::string& data) {
  static const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  uint32_t bits = 0;
  int count = 0;
  for (unsigned char c : data) {
    bits = (bits << 8) | c;
    count += 8;
    while (count >= 6) {
      count -= 6;
      out += alphabet[(bits >> count) & 63];
    }
  }
  if (count > 0) out += alphabet[(bits << (6 - count)) & 63];
  return out;  // no padding, as JWTs are written
}

}  // namespace

std::string make_jwt(const std::string& secret) {
  const long long expires =
      std::chrono::duration_cast<std::chrono::seconds>(
          std::chrono::system_clock::now().time_since_epoch() + std::chrono::hours(1))
          .count();
  const std::string signing_input =
      base64url(R"({"alg":"HS256","typ":"JWT"})") + "." +
      base64url(R"({"sub":"kcache-ci","exp":)" + std::to_string(expires) + "}");
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int mac_size = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(signing_input.data()), signing_input.size(), mac,
       &mac_size);
  return signing_input + "." + base64url(std::string(reinterpret_cast<char*>(mac), mac_size));
}

std::string BuildGridServer::find_bgd() {
  std::string candidates[2];
  if (const char* venv = std::getenv("KCACHE_BUILDGRID_VENV"); venv && *venv) {
    candidates[0] = std::string(venv) + "/bin/bgd";
  }
  candidates[1] = "/opt/kcache-buildgrid/bin/bgd";
  for (const std::string& c : candidates) {
    if (!c.empty() && access(c.c_str(), X_OK) == 0) return c;
  }
  return "";
}

BuildGridServer::BuildGridServer(bool allow_updates)
    : BuildGridServer(BuildGridOptions{allow_updates, "", "", "", "", ""}) {}

BuildGridServer::BuildGridServer(const BuildGridOptions& options) {
  const std::string bgd = find_bgd();
  if (bgd.empty()) {
    throw std::runtime_error(
        "BuildGrid is not installed (no /opt/kcache-buildgrid/bin/bgd); run tools/install_deps.sh");
  }
  port_ = unused_port();
  tls_ = !options.tls_server_cert.empty();
  const std::string d = dir_.path();
  {
    std::ofstream conf(d + "/bgd.yml");
    conf << "server:\n"
            "  - !channel\n"
            "    address: \"127.0.0.1:"
         << port_ << "\"\n";
    if (tls_) {
      conf << "    insecure-mode: false\n"
              "    credentials:\n"
              "      tls-server-key: \""
           << options.tls_server_key
           << "\"\n"
              "      tls-server-cert: \""
           << options.tls_server_cert << "\"\n";
      if (!options.tls_client_ca.empty()) {
        conf << "      tls-client-certs: \"" << options.tls_client_ca << "\"\n";
      }
    } else {
      conf << "    insecure-mode: true\n";
    }
    if (!options.jwt_hs256_secret.empty()) {
      write_file(d + "/jwt-secret", options.jwt_hs256_secret);  // BuildGrid reads it from a file
      conf << "authorization:\n"
              "  method: jwt\n"
              "  secret: \""
           << d
           << "/jwt-secret\"\n"
              "  algorithm: hs256\n";
    }
    conf << "storages:\n"
            "  - !disk-storage &disk\n"
            "    path: "
         << d
         << "/store\n"
            "caches:\n"
            "  - !lru-action-cache &ac\n"
            "    storage: *disk\n"
            "    max-cached-refs: 100000\n"
            "    allow-updates: "
         << (options.allow_updates ? "true" : "false")
         << "\n"
            "instances:\n"
            "  - name: \""
         << options.instance_name
         << "\"\n"
            "    services:\n"
            "      - !action-cache\n"
            "        cache: *ac\n"
            "      - !cas\n"
            "        storage: *disk\n"
            "      - !bytestream\n"
            "        storage: *disk\n";
  }
  const pid_t parent = getpid();
  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    setpgid(0, 0);  // its own group: the destructor stops every process it starts
    const int log = open((d + "/bgd.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(log, 1);
    dup2(log, 2);
    execl(bgd.c_str(), bgd.c_str(), "server", "start", (d + "/bgd.yml").c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  // A cold Python start on a loaded machine takes seconds.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(90);
  while (!accepts(port_)) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_ || std::chrono::steady_clock::now() > give_up) {
      kill_now();
      throw std::runtime_error("BuildGrid did not start on port " + std::to_string(port_) +
                               "; its log:\n" + slurp(d + "/bgd.log"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

BuildGridServer::~BuildGridServer() { kill_now(); }

void BuildGridServer::kill_now() {
  if (pid_ <= 0) return;
  kill(-pid_, SIGKILL);
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

std::string BuildGridServer::url() const {
  return (tls_ ? "grpcs://127.0.0.1:" : "grpc://127.0.0.1:") + std::to_string(port_);
}

std::string BuildGridServer::blob_path(const std::string& sha256_hex) const {
  return dir_.path() + "/store/cas/objects/" + sha256_hex.substr(0, 2) + "/" + sha256_hex.substr(2);
}

int BuildGridServer::blob_count() const {
  int count = 0;
  const std::string root = dir_.path() + "/store/cas/objects";
  DIR* top = opendir(root.c_str());
  if (!top) return 0;
  while (dirent* e = readdir(top)) {
    if (e->d_name[0] == '.') continue;
    DIR* sub = opendir((root + "/" + e->d_name).c_str());
    if (!sub) continue;
    while (dirent* f = readdir(sub)) count += f->d_name[0] != '.';
    closedir(sub);
  }
  closedir(top);
  return count;
}

}  // namespace kcache::testing
