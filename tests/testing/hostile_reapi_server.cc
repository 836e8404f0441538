#include "tests/testing/hostile_reapi_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <thread>

#include "tests/testing/buildgrid_server.h"
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

std::string script_path() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  const std::string relative = "tests/testing/hostile_reapi_server.py";
  if (srcdir && workspace) return std::string(srcdir) + "/" + workspace + "/" + relative;
  return relative;
}

}  // namespace

std::string HostileReapiServer::find_python() {
  const std::string bgd = BuildGridServer::find_bgd();
  if (bgd.empty()) return "";
  const std::string python = bgd.substr(0, bgd.rfind('/')) + "/python3";
  return access(python.c_str(), X_OK) == 0 ? python : "";
}

HostileReapiServer::HostileReapiServer(const std::string& mode) {
  const std::string python = find_python();
  if (python.empty()) {
    throw std::runtime_error(
        "the BuildGrid venv is not installed (no /opt/kcache-buildgrid/bin/python3); run "
        "tools/install_deps.sh");
  }
  port_ = unused_port();
  const std::string log_path = dir_ / "server.log";
  const std::string script = script_path();
  const std::string port = std::to_string(port_);
  const pid_t parent = getpid();
  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    const int log = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(log, 1);
    dup2(log, 2);
    execl(python.c_str(), python.c_str(), script.c_str(), mode.c_str(), port.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  // Importing grpcio on a loaded machine takes a few seconds.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!accepts(port_)) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_ || std::chrono::steady_clock::now() > give_up) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
      throw std::runtime_error("the hostile REAPI server (" + mode + ") did not start on port " +
                               port + "; its output:\n" + read_file_or_die(log_path));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

HostileReapiServer::~HostileReapiServer() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
}

std::string HostileReapiServer::url() const { return "grpc://127.0.0.1:" + std::to_string(port_); }

}  // namespace kcache::testing
