#include "tests/testing/http_servers.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

namespace kcache::testing {
namespace {

using Clock = std::chrono::steady_clock;

sockaddr_in loopback(int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  return addr;
}

// A socket bound to a free loopback port; the port through `port`.
int bind_free_port(int* port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error("socket() failed");
  sockaddr_in addr = loopback(0);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    throw std::runtime_error("bind() to a loopback port failed");
  }
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  *port = ntohs(addr.sin_port);
  return fd;
}

bool accepts_connections(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in addr = loopback(port);
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  close(fd);
  return ok;
}

void list_files(const std::string& root, const std::string& rel, std::vector<std::string>* out) {
  DIR* dir = opendir((root + "/" + rel).c_str());
  if (!dir) return;
  while (dirent* e = readdir(dir)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    const std::string child = rel.empty() ? name : rel + "/" + name;
    struct stat st;
    if (stat((root + "/" + child).c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      list_files(root, child, out);
    } else {
      out->push_back(child);
    }
  }
  closedir(dir);
}

}  // namespace

std::string find_nginx() {
  std::vector<std::string> candidates;
  if (const char* path = std::getenv("PATH")) {
    std::stringstream ss(path);
    std::string dir;
    while (std::getline(ss, dir, ':')) candidates.push_back(dir + "/nginx");
  }
  candidates.push_back("/usr/sbin/nginx");
  for (const std::string& c : candidates) {
    if (access(c.c_str(), X_OK) == 0) return c;
  }
  return "";
}

int unused_port() {
  int port = 0;
  close(bind_free_port(&port));  // bound, never listened on: connections are refused
  return port;
}

NginxServer::NginxServer(const std::string& extra_locations) {
  for (int attempt = 0; attempt < 5; ++attempt) {
    if (try_start(unused_port(), extra_locations)) return;
  }
  std::string log;
  try {
    log = read_file_or_die(dir_ / "error.log");
  } catch (const std::exception&) {
  }
  throw std::runtime_error("nginx did not start; its error log:\n" + log);
}

bool NginxServer::try_start(int port, const std::string& extra_locations) {
  const std::string nginx = find_nginx();
  if (nginx.empty()) {
    throw std::runtime_error(
        "nginx is not installed; the remote tier's tests need it: run tools/install_deps.sh "
        "(Debian package nginx-light)");
  }
  const std::string d = dir_.path();
  std::string with_dir = extra_locations;
  for (size_t at; (at = with_dir.find("{dir}")) != std::string::npos;) with_dir.replace(at, 5, d);
  mkdir((d + "/www").c_str(), 0755);
  std::ostringstream conf;
  if (geteuid() == 0) {
    // As root nginx hands its temp folders to `user` (default nobody), which
    // a sandbox's user namespace may not map: keep them ours.
    const passwd* pw = getpwuid(geteuid());
    const group* gr = getgrgid(getegid());
    if (pw && gr) conf << "user " << pw->pw_name << " " << gr->gr_name << ";\n";
  }
  conf << "daemon off;\n"
       << "master_process off;\n"
       << "worker_processes 1;\n"
       << "pid " << d << "/nginx.pid;\n"
       << "error_log " << d << "/error.log warn;\n"
       << "events { worker_connections 1024; }\n"
       << "http {\n"
       << "  log_format kcache '$request_method $uri $status';\n"
       << "  access_log " << d << "/access.log kcache;\n"
       << "  client_body_temp_path " << d << "/client_body;\n"
       << "  proxy_temp_path " << d << "/proxy;\n"
       << "  fastcgi_temp_path " << d << "/fastcgi;\n"
       << "  uwsgi_temp_path " << d << "/uwsgi;\n"
       << "  scgi_temp_path " << d << "/scgi;\n"
       << "  client_max_body_size 0;\n"
       << "  server {\n"
       << "    listen 127.0.0.1:" << port << ";\n"
       << "    root " << d << "/www;\n"
       << "    location / {\n"
       << "      dav_methods PUT DELETE;\n"
       << "      create_full_put_path on;\n"
       << "      dav_access user:rw group:r all:r;\n"
       << "    }\n"
       << with_dir << "\n"
       << "  }\n"
       << "}\n";
  write_file(dir_ / "nginx.conf", conf.str());

  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    // Dies with the test, whatever happens to the test.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    const std::string conf_path = d + "/nginx.conf", log_path = d + "/error.log";
    execl(nginx.c_str(), nginx.c_str(), "-p", (d + "/").c_str(), "-c", conf_path.c_str(), "-e",
          log_path.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  pid_ = pid;
  port_ = port;
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(20);
  while (Clock::now() < deadline) {
    if (accepts_connections(port)) return true;
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {  // exited: port taken, or a bad config
      pid_ = -1;
      return false;
    }
    usleep(10 * 1000);
  }
  stop();
  return false;
}

NginxServer::~NginxServer() { stop(); }

void NginxServer::stop() {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  for (int i = 0; i < 200; ++i) {  // 2 s for a clean exit, then SIGKILL
    if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
      pid_ = -1;
      return;
    }
    usleep(10 * 1000);
  }
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

std::string NginxServer::url(const std::string& path) const {
  return "http://127.0.0.1:" + std::to_string(port_) + path;
}

std::vector<std::string> NginxServer::requests() const {
  // nginx logs a request after sending its response, so a client can be done
  // before the line is written. A barrier: one more request, and wait for its
  // line. A single-process nginx finishes (and logs) each request before it
  // takes the next connection, so once the barrier's line is there, every
  // earlier line is too.
  const std::string barrier = "/__kcache_log_barrier__/" + std::to_string(++barriers_);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr = loopback(port_);
  if (fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    const std::string request = "HEAD " + barrier + " HTTP/1.0\r\n\r\n";
    if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) > 0) {
      char buf[1024];
      while (read(fd, buf, sizeof buf) > 0) {
      }
    }
  }
  if (fd >= 0) close(fd);

  std::vector<std::string> out;
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(10);
  for (;;) {
    out.clear();
    bool barrier_seen = false;
    std::string log;
    try {
      log = read_file_or_die(dir_ / "access.log");
    } catch (const std::exception&) {
    }
    std::stringstream ss(log);
    std::string line;
    while (std::getline(ss, line)) {
      if (line.find(" /__kcache_log_barrier__/") != std::string::npos) {
        if (line.find(barrier + " ") != std::string::npos) barrier_seen = true;
        continue;
      }
      if (!line.empty()) out.push_back(line);
    }
    if (barrier_seen) return out;
    if (Clock::now() > deadline) throw std::runtime_error("nginx never logged " + barrier);
    usleep(2 * 1000);
  }
}

int NginxServer::count_requests(const std::string& method, const std::string& prefix) const {
  int n = 0;
  for (const std::string& r : requests()) {
    if (r.rfind(method + " " + prefix, 0) == 0) ++n;
  }
  return n;
}

std::vector<std::string> NginxServer::files() const {
  std::vector<std::string> out;
  list_files(root(), "", &out);
  return out;
}

ScriptedServer::ScriptedServer(std::string response) : response_(std::move(response)) {
  listen_fd_ = bind_free_port(&port_);
  if (listen(listen_fd_, 64) != 0) throw std::runtime_error("listen() failed");
  thread_ = std::thread([this] { serve(); });
}

ScriptedServer::~ScriptedServer() {
  stop_.store(true);
  thread_.join();
  for (int fd : held_) close(fd);
  close(listen_fd_);
}

std::string ScriptedServer::url(const std::string& path) const {
  return "http://127.0.0.1:" + std::to_string(port_) + path;
}

void ScriptedServer::serve() {
  while (!stop_.load()) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (poll(&p, 1, 20) <= 0) continue;
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    connections_.fetch_add(1);
    if (response_.empty()) {
      held_.push_back(fd);  // never answered
      continue;
    }
    // Read the request head (bodies of the small requests tests send come
    // with it or are ignored), answer, close.
    std::string request;
    char buf[4096];
    while (request.find("\r\n\r\n") == std::string::npos) {
      pollfd r{fd, POLLIN, 0};
      if (poll(&r, 1, 2000) <= 0) break;
      ssize_t n = read(fd, buf, sizeof buf);
      if (n <= 0) break;
      request.append(buf, static_cast<size_t>(n));
    }
    size_t sent = 0;
    while (sent < response_.size()) {
      ssize_t n = send(fd, response_.data() + sent, response_.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
    }
    shutdown(fd, SHUT_RDWR);
    close(fd);
  }
}

}  // namespace kcache::testing
