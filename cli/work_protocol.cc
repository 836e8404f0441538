#include "cli/work_protocol.h"

#include <unistd.h>

#include <cerrno>

#include "common/error.h"
#include "common/file_system.h"

namespace kcache::cli {
namespace {

constexpr int kVarint = 0, kFixed64 = 1, kLen = 2, kFixed32 = 5;

class Reader {
 public:
  Reader(std::string_view data, const char* what) : data_(data), what_(what) {}
  bool done() const { return pos_ == data_.size(); }

  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      if (pos_ >= data_.size()) fail("truncated varint");
      auto b = static_cast<uint8_t>(data_[pos_++]);
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    fail("varint longer than 10 bytes");
  }
  std::string_view bytes(uint64_t n) {
    if (n > data_.size() - pos_) fail("length past the end");
    std::string_view out = data_.substr(pos_, n);
    pos_ += n;
    return out;
  }
  void skip(int wire_type) {
    switch (wire_type) {
      case kVarint:
        varint();
        return;
      case kFixed64:
        bytes(8);
        return;
      case kLen:
        bytes(varint());
        return;
      case kFixed32:
        bytes(4);
        return;
      default:
        fail("unsupported wire type " + std::to_string(wire_type));
    }
  }
  [[noreturn]] void fail(const std::string& why) const {
    throw CorruptError(std::string(what_) + ": " + why + " at byte " + std::to_string(pos_) +
                       "; is Bazel speaking the protobuf worker protocol?");
  }

 private:
  std::string_view data_;
  const char* what_;
  size_t pos_ = 0;
};

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
void put_tag(std::string& out, int number, int wire_type) {
  put_varint(out, static_cast<uint64_t>(number << 3 | wire_type));
}
void put_int32(std::string& out, int number, int32_t v) {
  if (v == 0) return;  // proto3 default: not written
  put_tag(out, number, kVarint);
  put_varint(out, static_cast<uint64_t>(static_cast<int64_t>(v)));  // negatives: 10 bytes
}
void put_string(std::string& out, int number, std::string_view s) {
  put_tag(out, number, kLen);
  put_varint(out, s.size());
  out.append(s);
}
void put_bool(std::string& out, int number, bool v) {
  if (!v) return;
  put_tag(out, number, kVarint);
  out.push_back(1);
}

// Reads a tag and checks its wire type against `expected` for known fields.
template <typename OnField>
void for_each_field(Reader& r, OnField on_field) {
  while (!r.done()) {
    uint64_t tag = r.varint();
    int number = static_cast<int>(tag >> 3), wire_type = static_cast<int>(tag & 7);
    if (tag >> 3 > 0x1fffffff || number == 0) r.fail("bad field number");
    if (!on_field(number, wire_type)) r.skip(wire_type);
  }
}

void expect(Reader& r, int wire_type, int want, int number) {
  if (wire_type != want) {
    r.fail("field " + std::to_string(number) + " has wire type " + std::to_string(wire_type));
  }
}

WorkInput decode_input(std::string_view message) {
  Reader r(message, "worker request input");
  WorkInput out;
  for_each_field(r, [&](int number, int wire_type) {
    switch (number) {
      case 1:
        expect(r, wire_type, kLen, number);
        out.path = std::string(r.bytes(r.varint()));
        return true;
      case 2:
        expect(r, wire_type, kLen, number);
        out.digest = std::string(r.bytes(r.varint()));
        return true;
      default:
        return false;
    }
  });
  return out;
}

}  // namespace

WorkRequest decode_work_request(std::string_view message) {
  Reader r(message, "worker request");
  WorkRequest out;
  for_each_field(r, [&](int number, int wire_type) {
    switch (number) {
      case 1:
        expect(r, wire_type, kLen, number);
        out.arguments.emplace_back(r.bytes(r.varint()));
        return true;
      case 2:
        expect(r, wire_type, kLen, number);
        if (out.inputs.size() == kMaxInputs) {
          r.fail("more than " + std::to_string(kMaxInputs) + " inputs");
        }
        out.inputs.push_back(decode_input(r.bytes(r.varint())));
        return true;
      case 3:
        expect(r, wire_type, kVarint, number);
        out.request_id = static_cast<int32_t>(r.varint());
        return true;
      case 4:
        expect(r, wire_type, kVarint, number);
        out.cancel = r.varint() != 0;
        return true;
      default:
        return false;
    }
  });
  return out;
}

WorkResponse decode_work_response(std::string_view message) {
  Reader r(message, "worker response");
  WorkResponse out;
  for_each_field(r, [&](int number, int wire_type) {
    switch (number) {
      case 1:
        expect(r, wire_type, kVarint, number);
        out.exit_code = static_cast<int32_t>(r.varint());
        return true;
      case 2:
        expect(r, wire_type, kLen, number);
        out.output = std::string(r.bytes(r.varint()));
        return true;
      case 3:
        expect(r, wire_type, kVarint, number);
        out.request_id = static_cast<int32_t>(r.varint());
        return true;
      case 4:
        expect(r, wire_type, kVarint, number);
        out.was_cancelled = r.varint() != 0;
        return true;
      default:
        return false;
    }
  });
  return out;
}

std::string encode_work_request(const WorkRequest& request) {
  std::string body;
  for (const std::string& a : request.arguments) put_string(body, 1, a);
  for (const WorkInput& in : request.inputs) {
    std::string input;
    put_string(input, 1, in.path);
    put_string(input, 2, in.digest);
    put_string(body, 2, input);
  }
  put_int32(body, 3, request.request_id);
  put_bool(body, 4, request.cancel);
  std::string out;
  put_varint(out, body.size());
  return out + body;
}

std::string encode_work_response(const WorkResponse& response) {
  std::string body;
  put_int32(body, 1, response.exit_code);
  if (!response.output.empty()) put_string(body, 2, response.output);
  put_int32(body, 3, response.request_id);
  put_bool(body, 4, response.was_cancelled);
  std::string out;
  put_varint(out, body.size());
  return out + body;
}

bool read_frame(int fd, std::string& message) {
  auto read_some = [&](char* buf, size_t n) {
    for (;;) {
      ssize_t got = ::read(fd, buf, n);
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) throw IoError(errno_message("cannot read the worker request", "", errno));
      return static_cast<size_t>(got);
    }
  };
  uint64_t size = 0;
  for (int i = 0;; ++i) {
    char c;
    if (read_some(&c, 1) == 0) {
      if (i == 0) return false;
      throw CorruptError("worker request: input ended inside a length prefix");
    }
    if (i == 10) throw CorruptError("worker request: length prefix longer than 10 bytes");
    size |= static_cast<uint64_t>(static_cast<uint8_t>(c) & 0x7f) << (7 * i);
    if (!(static_cast<uint8_t>(c) & 0x80)) break;
  }
  if (size > kMaxMessageBytes) {
    throw CorruptError("worker request of " + std::to_string(size) + " bytes: over the limit of " +
                       std::to_string(kMaxMessageBytes));
  }
  message.resize(size);
  for (size_t have = 0; have < size;) {
    size_t got = read_some(&message[have], size - have);
    if (got == 0) throw CorruptError("worker request: input ended inside a message");
    have += got;
  }
  return true;
}

void write_all_to(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw IoError(errno_message("cannot write the worker response", "", errno));
    bytes.remove_prefix(static_cast<size_t>(n));
  }
}

}  // namespace kcache::cli
