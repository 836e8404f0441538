// The drop-in's tests run a program that writes each NVRTC answer it got to a
// file of a folder (result codes, log, PTX, CUBIN, lowered names), once with
// the real NVRTC and once through kcache, and compare the two folders.
#pragma once

#include <functional>
#include <map>
#include <string>

namespace kcache::testing {

using AnswerFiles = std::map<std::string, std::string>;  // file name -> bytes

// Every file of `dir` whose name `keep` accepts (all when `keep` is empty).
AnswerFiles answer_files(const std::string& dir,
                         const std::function<bool(const std::string&)>& keep = {});

// Where two byte strings first differ, with a little printable text around it.
std::string first_difference(const std::string& got, const std::string& want);

// What differs between two runs' files ("" if nothing): each missing, extra
// or different file; result codes and logs in full, others at their first
// difference. `got` is kcache's, `want` the real NVRTC's.
std::string differences(const AnswerFiles& got, const AnswerFiles& want);

}  // namespace kcache::testing
