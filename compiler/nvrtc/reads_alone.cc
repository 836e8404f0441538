#include "compiler/nvrtc/reads_alone.h"

namespace kcache::compiler {
namespace {

thread_local bool reads_alone = false;

}  // namespace

NvrtcReadsAlone::NvrtcReadsAlone() : outer_(reads_alone) { reads_alone = true; }
NvrtcReadsAlone::~NvrtcReadsAlone() { reads_alone = outer_; }

bool nvrtc_reads_alone() { return reads_alone; }

}  // namespace kcache::compiler
