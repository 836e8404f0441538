#include "tests/testing/tls_certificates.h"

#include <unistd.h>

#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "tests/testing/run_command.h"
#include "tests/testing/temp_dir.h"

namespace kcache::testing {
namespace {

void run_openssl(const std::string& openssl, std::vector<std::string> args) {
  args.insert(args.begin(), openssl);
  CommandResult r = run_command(args);
  if (r.exit_code != 0) {
    std::ostringstream command;
    for (const std::string& a : args) command << a << ' ';
    throw std::runtime_error("making the test certificates failed (exit " +
                             std::to_string(r.exit_code) + "): " + command.str() + "\n" + r.err);
  }
}

// A new P-256 key and a certificate for it signed by the CA.
void issue(const std::string& openssl, const std::string& dir, const std::string& name,
           const std::string& subject, const std::string& extensions, int serial) {
  const std::string base = dir + "/" + name;
  write_file(base + ".ext", extensions);
  run_openssl(openssl,
              {"req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
               "-keyout", base + ".key", "-out", base + ".csr", "-subj", subject});
  run_openssl(openssl, {"x509", "-req", "-in", base + ".csr", "-CA", dir + "/ca.pem", "-CAkey",
                        dir + "/ca.key", "-set_serial", std::to_string(serial), "-days", "2",
                        "-extfile", base + ".ext", "-out", base + ".pem"});
}

}  // namespace

std::string find_openssl() {
  if (const char* path = std::getenv("PATH")) {
    std::stringstream dirs(path);
    std::string d;
    while (std::getline(dirs, d, ':')) {
      if (!d.empty() && access((d + "/openssl").c_str(), X_OK) == 0) return d + "/openssl";
    }
  }
  return access("/usr/bin/openssl", X_OK) == 0 ? "/usr/bin/openssl" : "";
}

TlsCertificates make_tls_certificates(const std::string& dir) {
  const std::string openssl = find_openssl();
  if (openssl.empty()) {
    throw std::runtime_error("the openssl program is not installed (Debian package openssl)");
  }
  run_openssl(openssl,
              {"req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
               "-nodes", "-keyout", dir + "/ca.key", "-out", dir + "/ca.pem", "-days", "2", "-subj",
               "/CN=kcache test CA", "-addext", "basicConstraints=critical,CA:TRUE", "-addext",
               "keyUsage=critical,keyCertSign,cRLSign"});
  issue(openssl, dir, "server", "/CN=localhost",
        "basicConstraints=CA:FALSE\n"
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
        "extendedKeyUsage=serverAuth\n",
        2);
  issue(openssl, dir, "client", "/CN=kcache test client",
        "basicConstraints=CA:FALSE\n"
        "extendedKeyUsage=clientAuth\n",
        3);
  return TlsCertificates{dir + "/ca.pem", dir + "/server.pem", dir + "/server.key",
                         dir + "/client.pem", dir + "/client.key"};
}

}  // namespace kcache::testing
