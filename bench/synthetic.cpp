#include "bench/synthetic.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <random>

#include <yaml-cpp/yaml.h>

namespace tokentap::bench {

namespace {

// Three-letter words: with their space, four characters — one token by a four-character rule,
// and one token for most real tokenizers.
constexpr std::array<std::string_view, 64> words = {
    "the", "and", "for", "are", "but", "not", "you", "all", "any", "can", "had", "her", "was",
    "one", "our", "out", "day", "get", "has", "him", "his", "how", "man", "new", "now", "old",
    "see", "two", "way", "who", "boy", "did", "its", "let", "put", "say", "she", "too", "use",
    "big", "end", "far", "few", "got", "low", "own", "run", "set", "top", "try", "why", "ask",
    "men", "off", "red", "sat", "sun", "ten", "yes", "yet", "air", "art", "box", "car"};

std::string text_of(std::int64_t tokens, std::mt19937_64& rng) {
  std::string out;
  out.reserve(static_cast<std::size_t>(tokens) * 4);
  std::uniform_int_distribution<std::size_t> pick(0, words.size() - 1);
  for (std::int64_t i = 0; i < tokens; ++i) {
    if (i > 0) out += ' ';
    out += words[pick(rng)];
  }
  return out;
}

std::int64_t draw(const length_dist& d, std::mt19937_64& rng) {
  double v = d.mean;
  if (d.stddev > 0) v = std::normal_distribution<double>(d.mean, d.stddev)(rng);
  return std::clamp<std::int64_t>(std::llround(v), d.min, d.max);
}

struct yaml_error {
  int line;
  std::string what;
};

[[noreturn]] void fail(const YAML::Node& n, std::string what) {
  throw yaml_error{n.Mark().line + 1, std::move(what)};
}

void check_keys(const YAML::Node& map, std::initializer_list<std::string_view> allowed,
                std::string_view where) {
  if (!map.IsMap()) fail(map, std::string(where) + " must be a mapping");
  for (const auto& kv : map) {
    const auto key = kv.first.Scalar();
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      std::string names;
      for (const auto a : allowed) names += (names.empty() ? "" : ", ") + std::string(a);
      fail(kv.first, "unknown key '" + key + "' in " + std::string(where) + " (" + names + ")");
    }
  }
}

double number(const YAML::Node& n, std::string_view key, double lo, double hi) {
  double v = 0;
  if (!n.IsScalar() || !YAML::convert<double>::decode(n, v) || !std::isfinite(v) || v < lo ||
      v > hi) {
    char range[96];
    std::snprintf(range, sizeof range, " must be a number from %g to %g", lo, hi);
    fail(n, std::string(key) + range);
  }
  return v;
}

// A length: a number, or {mean, stddev, min, max}; every value from `lo` on.
length_dist read_length(const YAML::Node& n, std::string_view key, length_dist d, double lo = 1) {
  if (n.IsScalar()) {
    d.mean = number(n, key, lo, 1 << 20);
    d.stddev = 0;
    return d;
  }
  check_keys(n, {"mean", "stddev", "min", "max"}, key);
  if (!n["mean"]) fail(n, std::string(key) + " needs a mean");
  d.mean = number(n["mean"], "mean", lo, 1 << 20);
  if (n["stddev"]) d.stddev = number(n["stddev"], "stddev", 0, 1 << 20);
  if (n["min"]) d.min = static_cast<std::int64_t>(number(n["min"], "min", lo, 1 << 20));
  if (n["max"]) d.max = static_cast<std::int64_t>(number(n["max"], "max", lo, 1 << 20));
  if (d.min > d.max) fail(n, std::string(key) + ": min is over max");
  return d;
}

}  // namespace

bool is_synthetic(std::string_view text) {
  // The first line that is neither blank nor a comment.
  while (!text.empty()) {
    const auto nl = text.find('\n');
    auto line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    const auto start = line.find_first_not_of(" \t\r");
    if (start == std::string_view::npos || line[start] == '#') continue;
    return line.substr(start).starts_with("synthetic:");
  }
  return false;
}

std::optional<synthetic_spec> read_synthetic(const std::string& text, const std::string& file,
                                             std::string& error) {
  try {
    const auto doc = YAML::Load(text);
    check_keys(doc, {"synthetic"}, "a synthetic workload");
    const auto s = doc["synthetic"];
    check_keys(s,
               {"requests", "conversations", "turns", "think_time_ms", "seed", "input_tokens",
                "output_tokens", "system_prompt", "cache_breakers"},
               "synthetic");
    synthetic_spec spec;
    if (s["requests"])
      spec.requests = static_cast<std::size_t>(number(s["requests"], "requests", 1, 1e7));
    if (const auto c = s["conversations"]) {
      if (s["requests"]) fail(c, "conversations and requests: one or the other");
      spec.conversations = static_cast<std::size_t>(number(c, "conversations", 1, 1e6));
    }
    // What only a conversation has.
    const auto of_conversations = [&](const YAML::Node& n, std::string_view key) {
      if (spec.conversations == 0)
        fail(n, std::string(key) + " needs conversations (requests are single-turn)");
    };
    if (const auto t = s["turns"]) {
      of_conversations(t, "turns");
      spec.turns = read_length(t, "turns", {.mean = 1, .max = 1000});
      if (spec.turns.max > 1000) fail(t, "turns: at most 1000");
    }
    if (const auto t = s["think_time_ms"]) {
      of_conversations(t, "think_time_ms");
      spec.think_ms = read_length(t, "think_time_ms", spec.think_ms, 0);
    }
    if (s["seed"]) spec.seed = static_cast<std::uint64_t>(number(s["seed"], "seed", 0, 1e15));
    if (s["input_tokens"]) spec.input = read_length(s["input_tokens"], "input_tokens", spec.input);
    if (s["output_tokens"])
      spec.output = read_length(s["output_tokens"], "output_tokens", spec.output);
    if (const auto p = s["system_prompt"]) {
      check_keys(p, {"tokens", "pool"}, "system_prompt");
      if (!p["tokens"]) fail(p, "system_prompt needs its tokens");
      spec.system_tokens = static_cast<std::int64_t>(number(p["tokens"], "tokens", 1, 1 << 20));
      if (p["pool"]) spec.system_pool = static_cast<std::size_t>(number(p["pool"], "pool", 1, 1e5));
    }
    if (const auto b = s["cache_breakers"]) {
      check_keys(b, {"jittered_system_prompt", "context_window", "edited_history"},
                 "cache_breakers");
      if (const auto w = b["context_window"]) {
        of_conversations(w, "context_window");
        spec.context_window = static_cast<std::int64_t>(number(w, "context_window", 1, 1 << 24));
      }
      if (const auto e = b["edited_history"]) {
        of_conversations(e, "edited_history");
        spec.edited_history = number(e, "edited_history", 0, 1);
      }
      if (b["jittered_system_prompt"]) {
        if (spec.system_tokens == 0)
          fail(b["jittered_system_prompt"], "jittered_system_prompt needs a system_prompt");
        spec.jittered_system_prompt =
            number(b["jittered_system_prompt"], "jittered_system_prompt", 0, 1);
      }
    }
    return spec;
  } catch (const yaml_error& e) {
    error = file + ":" + std::to_string(e.line) + ": " + e.what;
  } catch (const YAML::Exception& e) {
    error = file + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg;
  }
  return std::nullopt;
}

std::vector<task> synthetic_tasks(const synthetic_spec& spec) {
  std::mt19937_64 rng(spec.seed);
  std::vector<std::string> prompts;
  for (std::size_t i = 0; spec.system_tokens > 0 && i < spec.system_pool; ++i)
    prompts.push_back(text_of(spec.system_tokens, rng));
  std::uniform_int_distribution<std::size_t> which(0, prompts.empty() ? 0 : prompts.size() - 1);
  std::uniform_real_distribution<double> coin(0, 1);
  std::vector<task> out;
  const bool conversations = spec.conversations > 0;
  const auto n = conversations ? spec.conversations : spec.requests;
  out.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    task t;
    t.id = (conversations ? "c" : "s") + std::to_string(i);
    if (!prompts.empty()) {
      auto system = prompts[which(rng)];
      // A jittered system prompt: its first words differ (a timestamp or a request id put
      // first), so no cached prefix of it matches.
      if (coin(rng) < spec.jittered_system_prompt)
        system = "run " + std::to_string(rng() % 100000) + " " + system;
      t.messages.push_back({"system", std::move(system)});
    }
    if (!conversations) {
      t.messages.push_back({"user", text_of(draw(spec.input, rng), rng)});
      t.max_tokens = draw(spec.output, rng);
    } else {
      const auto turns = draw(spec.turns, rng);
      for (std::int64_t k = 0; k < turns; ++k) {
        turn u{.user = text_of(draw(spec.input, rng), rng), .max_tokens = draw(spec.output, rng)};
        if (k > 0) u.think_ms = static_cast<double>(draw(spec.think_ms, rng));
        // An edit breaks a cached prefix only inside what an earlier turn sent as its prompt:
        // an answer before the last one, so from the third turn on.
        if (k > 1 && coin(rng) < spec.edited_history)
          u.edit_answer =
              static_cast<int>(std::uniform_int_distribution<std::int64_t>(0, k - 2)(rng));
        t.turns.push_back(std::move(u));
      }
      t.context_window = spec.context_window;
    }
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace tokentap::bench
