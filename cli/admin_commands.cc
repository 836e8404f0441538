// ccache-style administration of the local store: -s, -z, -C, -c, -M,
// --evict-older-than, verify, ls, show, export, import.
#include <CLI/CLI.hpp>

#include "cli/command.h"

namespace kcache::cli {

void add_admin_commands(CLI::App& /*app*/, Dispatch& /*dispatch*/) {}

}  // namespace kcache::cli
