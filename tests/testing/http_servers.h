// HTTP servers for the remote tier's tests and benchmark, all on loopback:
// a real nginx (Debian's nginx-light, WebDAV PUT/DELETE) and a scripted
// server that misbehaves on purpose (stalls, truncates).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "tests/testing/temp_dir.h"

namespace kcache::testing {

// An nginx serving a fresh folder with WebDAV PUT and DELETE on a free
// loopback port, in the foreground and as a single process (`daemon off;
// master_process off;`), so it needs no root and no system folders. It is
// killed by the destructor, and by the kernel if the test process dies first
// (PR_SET_PDEATHSIG), so a crashed test never leaves it running.
//
// Throws std::runtime_error (with nginx's error log) if it does not start; a
// machine without nginx is told to run tools/install_deps.sh.
class NginxServer {
 public:
  // `extra_locations` is pasted into the server block, e.g.
  // "location /fail/ { return 500; }"; "{dir}" stands for dir().
  explicit NginxServer(const std::string& extra_locations = "");
  ~NginxServer();
  NginxServer(const NginxServer&) = delete;
  NginxServer& operator=(const NginxServer&) = delete;

  // "http://127.0.0.1:PORT" + path.
  std::string url(const std::string& path = "") const;
  // The folder nginx serves and PUT writes into.
  std::string root() const { return dir_ / "www"; }
  // The folder holding the config and logs, for files a config refers to.
  const std::string& dir() const { return dir_.path(); }
  // Requests served so far, one "METHOD URI STATUS" string each (complete:
  // it waits for nginx to log every request it has answered).
  std::vector<std::string> requests() const;
  // How many requests so far had `method` and a URI starting with `prefix`.
  int count_requests(const std::string& method, const std::string& prefix = "/") const;
  // Every regular file under root(), as paths relative to it.
  std::vector<std::string> files() const;

 private:
  bool try_start(int port, const std::string& extra_locations);
  void stop();

  TempDir dir_;
  pid_t pid_ = -1;
  int port_ = 0;
  mutable int barriers_ = 0;
};

// A server on a free loopback port that answers every request with the same
// raw bytes and closes, or (with an empty response) accepts connections and
// never answers: the stalled server the timeout tests need. Counts the
// connections it accepts.
class ScriptedServer {
 public:
  explicit ScriptedServer(std::string response);
  ~ScriptedServer();
  ScriptedServer(const ScriptedServer&) = delete;
  ScriptedServer& operator=(const ScriptedServer&) = delete;

  std::string url(const std::string& path = "") const;
  int connections() const { return connections_.load(); }

 private:
  void serve();

  std::string response_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::vector<int> held_;  // stalled connections, closed by the destructor
  std::thread thread_;
};

// A loopback port nothing listens on (connection refused).
int unused_port();

// The nginx binary: on PATH or /usr/sbin/nginx; empty if there is none.
std::string find_nginx();

}  // namespace kcache::testing
