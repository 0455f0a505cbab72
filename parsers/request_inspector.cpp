#include "parsers/request_inspector.hpp"

#include <simdjson.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "parsers/json_scratch.hpp"

namespace tokentap::parsers {

namespace od = simdjson::ondemand;

struct request_inspector::impl {
  explicit impl(std::size_t max) : max_bytes(max) {}
  std::size_t max_bytes;
};

namespace {

// The thread's parser, shared by every inspector on it (the proxy keeps one inspector per session;
// inspect() parses and extracts in one call).  What a large body grew it to is released after.
struct inspector_tag;
constexpr std::size_t keep_scratch_bytes = 1u << 20;

}  // namespace

namespace {

constexpr std::uint64_t fnv_basis = 14695981039346656037ull;
std::uint64_t fnv(std::string_view s, std::uint64_t h = fnv_basis) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// A streaming 64-bit hash that takes 8 bytes per step (FNV-1a's byte loop was 10x slower on large
// conversations).  The result depends only on the bytes, not on how they were split across
// update() calls, so "a" + "\n" + "b" hashes like "a\nb" (string vs. array-of-parts content).
class stream_hash {
 public:
  void update(std::string_view s) {
    const char* p = s.data();
    std::size_t n = s.size();
    total_ += n;
    if (fill_) {
      const std::size_t take = std::min(n, block - fill_);
      std::memcpy(tail_ + fill_, p, take);
      fill_ += take;
      p += take;
      n -= take;
      if (fill_ < block) return;
      blocks(tail_);
      fill_ = 0;
    }
    for (; n >= block; p += block, n -= block) blocks(p);
    std::memcpy(tail_, p, n);
    fill_ = n;
  }
  std::uint64_t final() const {
    std::uint64_t rest[2] = {0, 0};
    std::memcpy(rest, tail_, fill_);
    const std::uint64_t h = mix(a_ ^ mix(b_ ^ rest[1]) ^ rest[0] ^ (total_ << 3));
    return h ^ (h >> 31);
  }

 private:
  static constexpr std::size_t block = 16;  // two independent 8-byte lanes
  static std::uint64_t mix(std::uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 29;
    return x * 0xc4ceb9fe1a85ec53ull;
  }
  void blocks(const char* p) {
    std::uint64_t w[2];
    std::memcpy(w, p, sizeof w);
    a_ = (a_ ^ w[0]) * 0x9e3779b97f4a7c15ull;
    b_ = (b_ ^ w[1]) * 0xc2b2ae3d27d4eb4full;
    a_ = (a_ << 27) | (a_ >> 37);
    b_ = (b_ << 31) | (b_ >> 33);
  }
  std::uint64_t a_ = 0x243f6a8885a308d3ull, b_ = 0x13198a2e03707344ull;
  std::uint64_t total_ = 0;
  char tail_[block] = {};
  std::size_t fill_ = 0;
};

// Roles as static strings (digests outlive the parsed document).
std::string_view intern_role(std::string_view r) {
  for (std::string_view k :
       {"system", "user", "assistant", "tool", "developer", "function", "model"})
    if (k == r) return k;
  return "other";
}

// Collects conversation elements as they are found; finish() orders them (tools, system, then
// `messages`, then Responses `input`, wherever those keys appear in the body) and builds digests
// and the canonical text.
// Element texts are hashed as they are read: the body is copied once (into the parser's padded
// buffer), and element texts only when the canonical text is asked for.
struct collector {
  struct element {
    std::string_view role;
    std::uint64_t hash;
    std::uint32_t chars;
    std::string text;  // only with opts.canonical
  };
  collector(const inspect_options& o, request_info& i) : opts(o), info(i) {}
  const inspect_options& opts;
  request_info& info;
  std::vector<element> tools, system, messages, input;  // input: Responses API
  // The element being read.
  stream_hash h;
  std::size_t n = 0;
  std::string text;
  bool first_part = true;
  bool malformed = false;  // a value walked for the digests was not valid JSON

  bool wanted() const { return opts.digests || opts.canonical; }
  void begin() {
    h = stream_hash{};
    n = 0;
    text.clear();
    first_part = true;
  }
  void append(std::string_view s) {
    n += s.size();
    if (!wanted()) return;  // the plain pass only counts
    h.update(s);
    if (opts.canonical) text.append(s);
  }
  /// An error other than a type mismatch means the JSON itself is broken: the body is invalid,
  /// whatever pass met it.  Returns whether `e` is an error.
  bool bad(simdjson::error_code e) {
    if (e && e != simdjson::INCORRECT_TYPE) malformed = true;
    return e != simdjson::SUCCESS;
  }
  void add(std::string_view role, std::vector<element>* list = nullptr) {
    if (!wanted()) return;
    auto& to = role == "tools"    ? tools
               : role == "system" ? system
               : list != nullptr  ? *list
                                  : messages;
    element e{role, 0, static_cast<std::uint32_t>(n), opts.canonical ? text : std::string()};
    // hash of role and text, without materializing "role \x1f text"
    const auto th = h.final();
    e.hash = fnv(std::string_view(reinterpret_cast<const char*>(&th), sizeof th),
                 fnv("\x1f", fnv(role)));
    to.push_back(std::move(e));
  }
  void finish() {
    if (!wanted()) return;
    std::uint64_t chain = fnv_basis, before = 0;
    for (auto* list : {&tools, &system, &messages, &input}) {
      for (const auto& e : *list) {
        message_digest d;
        d.role = e.role;
        d.hash = e.hash;
        // The chain folds element hashes: equal prefixes of elements give equal chains.
        chain = fnv(std::string_view(reinterpret_cast<const char*>(&d.hash), sizeof d.hash), chain);
        d.chain = chain;
        d.chars = e.chars;
        d.chars_before = before;
        before += e.chars;
        if (opts.digests) info.digests.push_back(d);
        if (opts.canonical) {
          info.canonical.append(e.role).push_back('\x1f');
          info.canonical.append(e.text).push_back('\x1e');
        }
      }
    }
  }
};

// Feeds the text of a `content` value (a string, or an array of parts with "text", joined by a
// newline) to the collector.  Returns the text bytes without the joining newlines, the same count
// text_size() gives, so prompt_chars never depends on whether digests were asked for.
std::size_t collect_text(simdjson::ondemand::value v, collector& c) {
  namespace od = simdjson::ondemand;
  od::json_type t;
  if (c.bad(v.type().get(t))) return 0;
  std::string_view s;
  if (t == od::json_type::string) {
    // Without escapes the raw bytes are the text: hash them in place instead of unescaping a copy.
    const auto raw = v.raw_json_token();
    if (raw.size() >= 2 && raw.find('\\') == std::string_view::npos && !c.opts.canonical) {
      // raw_json_token() only peeks: consume the string too, or the iterator's position (and so
      // which JSON errors it meets later) would differ from the unescaping path's.
      od::raw_json_string consumed;
      if (c.bad(v.get_raw_json_string().get(consumed))) return 0;
      const auto text = raw.substr(1, raw.rfind('"') - 1);
      c.append(text);
      return text.size();
    }
    if (c.bad(v.get_string().get(s))) return 0;
    c.append(s);
    return s.size();
  }
  if (t != od::json_type::array) return 0;
  od::array parts;
  if (c.bad(v.get_array().get(parts))) return 0;
  std::size_t total = 0;
  for (auto part : parts) {
    od::object o;
    if (c.bad(part.get_object().get(o))) {
      if (c.malformed) break;
      continue;
    }
    // A part's text, content and thinking, in that order whatever the order of its keys.
    std::string_view texts[3];
    bool has[3] = {false, false, false};
    for (auto field : o) {
      std::string_view key;
      if (c.bad(field.unescaped_key().get(key))) break;
      const int slot = key == "text" ? 0 : key == "content" ? 1 : key == "thinking" ? 2 : -1;
      if (slot >= 0 && !field.value().get_string().get(s)) {
        texts[slot] = s;
        has[slot] = true;
      }
    }
    for (int i = 0; i < 3; ++i) {
      if (!has[i]) continue;
      if (!c.first_part) c.append("\n");
      c.append(texts[i]);
      total += texts[i].size();
      c.first_part = false;
    }
  }
  return total;
}

// A whitespace-free rendering of a JSON value with strings unescaped and object members sorted
// by key (tool definitions: the same tools serialized by another client, or by the same one after
// a re-serializing gateway, are the same prefix).  False: the value is not valid JSON.
bool canonical_json(simdjson::ondemand::value v, std::string& out, int depth) {
  namespace od = simdjson::ondemand;
  od::json_type t;
  if (depth > 32) return true;
  if (v.type().get(t)) return false;
  switch (t) {
    case od::json_type::object: {
      od::object o;
      if (v.get_object().get(o)) return false;
      std::vector<std::pair<std::string, std::string>> members;
      for (auto field : o) {
        std::string_view key;
        od::value fv;
        if (field.unescaped_key().get(key) || field.value().get(fv)) return false;
        auto& m = members.emplace_back(std::string(key), std::string());
        if (!canonical_json(fv, m.second, depth + 1)) return false;
      }
      std::stable_sort(members.begin(), members.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
      out += '{';
      for (const auto& [key, value] : members) out.append(key).append(":").append(value) += ',';
      out += '}';
      return true;
    }
    case od::json_type::array: {
      od::array a;
      if (v.get_array().get(a)) return false;
      out += '[';
      for (auto item : a) {
        od::value iv;
        if (item.get(iv) || !canonical_json(iv, out, depth + 1)) return false;
        out += ',';
      }
      out += ']';
      return true;
    }
    case od::json_type::string: {
      std::string_view s;
      if (v.get_string().get(s)) return false;
      out.append(s);
      return true;
    }
    default: {
      // A number, true, false or null: its token runs to the next structural character, so it
      // may carry the whitespace after it.
      auto token = v.raw_json_token();
      while (!token.empty() && (token.back() == ' ' || token.back() == '\t' ||
                                token.back() == '\n' || token.back() == '\r'))
        token.remove_suffix(1);
      out.append(token);
      return true;
    }
  }
}

// Counts elements of a `messages` / `input` array and their text.
void read_messages(od::value v, request_info& info, collector& c,
                   std::vector<collector::element>& list) {
  od::json_type t;
  if (c.bad(v.type().get(t))) return;
  if (t == od::json_type::string) {  // Responses `input` may be a plain string
    info.messages += 1;
    std::string_view s;
    if (!c.bad(v.get_string().get(s))) {
      info.prompt_chars += s.size();
      c.begin();
      c.append(s);
      c.add("user", &list);
    }
    return;
  }
  od::array arr;
  if (c.bad(v.get_array().get(arr))) return;
  // Both passes (with and without digests) read the same values, so they meet the same errors.
  for (auto item : arr) {
    info.messages += 1;
    od::object msg;
    if (c.bad(item.get_object().get(msg))) {
      if (c.malformed) break;
      continue;
    }
    std::string_view role = "other";
    c.begin();
    for (auto field : msg) {
      std::string_view key;
      if (c.bad(field.unescaped_key().get(key))) break;
      if (key == "content") {
        od::value cv;
        if (c.bad(field.value().get(cv))) break;
        info.prompt_chars += collect_text(cv, c);
      } else if (key == "role") {
        std::string_view r;
        if (!c.bad(field.value().get_string().get(r))) role = intern_role(r);
      }
    }
    c.add(role, &list);
    if (c.malformed) break;
  }
}

bool is_true(od::value v) {
  bool b = false;
  return !v.get_bool().get(b) && b;
}

}  // namespace

request_inspector::request_inspector(std::size_t max_bytes)
    : impl_(std::make_unique<impl>(max_bytes)) {}
request_inspector::~request_inspector() = default;
request_inspector::request_inspector(request_inspector&&) noexcept = default;
request_inspector& request_inspector::operator=(request_inspector&&) noexcept = default;

request_info request_inspector::inspect(std::string_view body, inspect_options opts) {
  request_info info;
  collector c(opts, info);
  if (body.empty()) {
    info.error = "empty body";
    return info;
  }
  if (body.size() > impl_->max_bytes) {
    info.error = "body too large to inspect";
    return info;
  }
  auto& scratch = detail::thread_json_scratch<inspector_tag>();
  struct release_if_large {
    detail::json_scratch& s;
    std::size_t n;
    ~release_if_large() {
      if (n > keep_scratch_bytes) s.release();
    }
  } release{scratch, body.size()};
  od::document doc;
  if (scratch.parser.iterate(scratch.pad(body)).get(doc)) {
    info.error = "invalid JSON";
    return info;
  }
  od::object root;
  if (const auto err = doc.get_object().get(root)) {
    info.error = err == simdjson::INCORRECT_TYPE ? "body is not a JSON object" : "invalid JSON";
    return info;
  }
  int max_tokens_rank = 4;  // of the max_tokens field taken: lower wins
  for (auto field : root) {
    std::string_view key;
    if (field.unescaped_key().get(key)) {
      info.error = "invalid JSON";
      break;
    }
    od::value v;
    if (field.value().get(v)) {
      info.error = "invalid JSON";
      break;
    }
    if (key == "model") {
      std::string_view s;
      if (!v.get_string().get(s)) info.model.assign(s);
    } else if (key == "stream") {
      info.stream = is_true(v);
      info.stream_given = true;
    } else if (key == "stream_options") {
      od::object o;
      if (v.get_object().get(o)) continue;
      for (auto f : o) {
        std::string_view k;
        if (f.unescaped_key().get(k)) continue;
        if (k == "include_usage") info.include_usage = is_true(f.value());
        if (k == "continuous_usage_stats") info.continuous_usage = is_true(f.value());
      }
    } else if (key == "max_completion_tokens" || key == "max_tokens" ||
               key == "max_output_tokens") {
      // Several: OpenAI's newer name wins, as in vLLM and OpenAI (whatever the keys' order).
      const int rank = key == "max_completion_tokens" ? 0 : key == "max_tokens" ? 1 : 2;
      std::int64_t n = 0;
      if (!v.get_int64().get(n) && rank <= max_tokens_rank) {
        info.max_tokens = n;
        max_tokens_rank = rank;
      }
    } else if (key == "options") {  // Ollama's: num_predict is its budget (-1, -2: none)
      od::object o;
      if (v.get_object().get(o)) continue;
      for (auto f : o) {
        std::string_view k;
        std::int64_t n = 0;
        if (!f.unescaped_key().get(k) && k == "num_predict" && !f.value().get_int64().get(n) &&
            n >= 0 && max_tokens_rank == 4) {
          info.max_tokens = n;
          max_tokens_rank = 3;
        }
      }
    } else if (key == "messages" || key == "input") {
      read_messages(v, info, c, key == "messages" ? c.messages : c.input);
    } else if (key == "system") {
      info.messages += 1;
      c.begin();
      info.prompt_chars += collect_text(v, c);
      c.add("system");
    } else if (key == "tools" && (opts.digests || opts.canonical)) {
      std::string tools;
      if (!canonical_json(v, tools, 0)) c.malformed = true;
      c.begin();
      c.append(tools);
      c.add("tools");
    } else if (key == "prompt") {
      c.begin();
      info.prompt_chars += collect_text(v, c);
    } else if (key == "reasoning_effort" || key == "reasoning") {
      info.reasoning = true;
    } else if (key == "thinking") {
      od::object o;
      if (v.get_object().get(o)) continue;
      for (auto f : o) {
        std::string_view k, s;
        if (!f.unescaped_key().get(k) && k == "type" && !f.value().get_string().get(s))
          info.reasoning = (s == "enabled");
      }
    }
  }
  // On-Demand validates only what it reads: a malformed value the digest pass walked makes the
  // body invalid (found by fuzz_request_inspector: the error silently ended the field loop).
  if (info.error.empty() && c.malformed) info.error = "invalid JSON";
  c.finish();
  return info;
}

std::size_t root_of(std::span<const message_digest> conversation) noexcept {
  for (std::size_t i = 0; i < conversation.size(); ++i)
    if (conversation[i].role == "user") return i;
  return conversation.size() - 1;
}

}  // namespace tokentap::parsers
