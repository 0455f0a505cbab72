#include "sim/generator.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <random>

#include "base/json.hpp"

namespace tokentap::sim {

namespace {

// ------------------------------------------------------------------ text

constexpr std::string_view answer_words[] = {
    "The",      "latency", "of",      "a",      "streamed", "response", "depends", "on",
    "queueing", "prefill", "and",     "decode", "time",     "per",      "token",   "while",
    "the",      "proxy",   "adds",    "almost", "nothing",  "because",  "it",      "forwards",
    "every",    "byte",    "as",      "soon",   "arrives",  "cache",    "hits",    "cut",
    "first",    "token",   "sharply", "model",  "answers",  "quickly",  "under",   "load",
    "with",     "steady",  "inter",   "gaps",   "between",  "tokens",   "which",   "users",
    "notice",   "most",    "when",    "they",   "stall",    "briefly",  "before",  "resuming"};

// Reasoning sentences open with the step markers of design/STEPS.md, so later issues (step
// tagging) have realistic input from the simulator.
constexpr std::string_view reasoning_openers[] = {
    "First,",       "Then",           "Next,",  "Wait,", "Therefore", "So",
    "Let me check", "Alternatively,", "首先，", "因此",  "But",       "Finally,"};

// Token texts: answer tokens are words with a leading space (like BPE tokens); reasoning tokens
// form sentences that start with step markers and end with ".\n\n" every few words.
std::vector<std::string> make_answer(std::mt19937_64& rng, int n) {
  std::vector<std::string> out;
  out.reserve(static_cast<std::size_t>(n));
  std::uniform_int_distribution<std::size_t> pick(0, std::size(answer_words) - 1);
  for (int i = 0; i < n; ++i) {
    std::string t = i == 0 ? "" : " ";
    t += answer_words[pick(rng)];
    if (i + 1 == n) t += ".";
    out.push_back(std::move(t));
  }
  return out;
}

std::vector<std::string> make_reasoning(std::mt19937_64& rng, int n) {
  std::vector<std::string> out;
  out.reserve(static_cast<std::size_t>(n));
  std::uniform_int_distribution<std::size_t> opener(0, std::size(reasoning_openers) - 1);
  std::uniform_int_distribution<std::size_t> word(0, std::size(answer_words) - 1);
  std::uniform_int_distribution<int> sentence_len(5, 12);
  int left_in_sentence = 0;
  for (int i = 0; i < n; ++i) {
    std::string t;
    if (left_in_sentence == 0) {
      t = std::string(i == 0 ? "" : "\n\n") + std::string(reasoning_openers[opener(rng)]);
      left_in_sentence = sentence_len(rng);
    } else {
      t = " " + std::string(answer_words[word(rng)]);
      if (--left_in_sentence == 0) t += ".";
    }
    out.push_back(std::move(t));
  }
  return out;
}

// ------------------------------------------------------------------ timing

double next_gap(const params& p, std::mt19937_64& rng) {
  switch (p.dist) {
    case latency_dist::fixed:
      return p.itl_ms;
    case latency_dist::uniform: {
      std::uniform_real_distribution<double> d(p.itl_ms - p.itl_jitter_ms,
                                               p.itl_ms + p.itl_jitter_ms);
      return std::max(0.0, d(rng));
    }
    case latency_dist::normal: {
      std::normal_distribution<double> d(p.itl_ms, p.itl_jitter_ms);
      return std::max(0.0, d(rng));
    }
    case latency_dist::exponential: {
      if (p.itl_ms <= 0) return 0;
      std::exponential_distribution<double> d(1.0 / p.itl_ms);
      return d(rng);
    }
  }
  return p.itl_ms;
}

// ------------------------------------------------------------------ wire formats

struct ids {
  std::string id;
  long created = 1764400000;
};

std::string openai_chunk(const ids& id, const std::string& model, std::string_view delta_json,
                         std::string_view finish, bool usage_null,
                         std::string_view usage_json = {}) {
  std::string s =
      "data: {\"id\":\"" + id.id +
      "\",\"object\":\"chat.completion.chunk\",\"created\":" + std::to_string(id.created) +
      ",\"model\":\"" + base::json::escaped(model) +
      "\",\"system_fingerprint\":\"fp_tokentap_sim\",\"choices\":[{\"index\":0,"
      "\"delta\":";
  s += delta_json;
  s += ",\"logprobs\":null,\"finish_reason\":";
  s += finish.empty() ? std::string("null") : "\"" + std::string(finish) + "\"";
  s += "}]";
  if (!usage_json.empty())
    s += ",\"usage\":" + std::string(usage_json);
  else if (usage_null)
    s += ",\"usage\":null";
  s += "}\n\n";
  return s;
}

// The usage after `completion` tokens (all of them by default).
std::string openai_usage_json(const plan& pl, int completion = -1) {
  if (completion < 0) completion = pl.completion_tokens;
  return "{\"prompt_tokens\":" + std::to_string(pl.prompt_tokens) +
         ",\"completion_tokens\":" + std::to_string(completion) +
         ",\"total_tokens\":" + std::to_string(pl.prompt_tokens + completion) +
         ",\"prompt_tokens_details\":{\"cached_tokens\":" + std::to_string(pl.cached_tokens) +
         "},\"completion_tokens_details\":"
         "{\"reasoning_tokens\":" +
         std::to_string(pl.reasoning_tokens) + "}}";
}

std::string anthropic_event(std::string_view type, const std::string& data) {
  return "event: " + std::string(type) + "\ndata: " + data + "\n\n";
}

std::string anthropic_usage_json(const plan& pl, int output_tokens) {
  // Anthropic's input_tokens excludes cache reads and cache writes.
  return "{\"input_tokens\":" +
         std::to_string(pl.prompt_tokens - pl.cached_tokens - pl.cache_write_tokens) +
         ",\"cache_creation_input_tokens\":" + std::to_string(pl.cache_write_tokens) +
         ",\"cache_read_input_tokens\":" + std::to_string(pl.cached_tokens) +
         ",\"output_tokens\":" + std::to_string(output_tokens) + "}";
}

void build_openai_stream(const params& p, const request_shape& shape, const ids& id,
                         const std::vector<std::string>& reasoning,
                         const std::vector<std::string>& answer,
                         const std::vector<double>& token_at, plan& pl) {
  const bool usage_null = shape.include_usage;
  // With continuous usage stats every chunk reports the usage so far (vLLM's shape).
  const bool continuous = shape.include_usage && shape.continuous_usage;
  const auto usage_so_far = [&](int n) { return continuous ? openai_usage_json(pl, n) : ""; };
  pl.events.push_back({openai_chunk(id, shape.model, R"({"role":"assistant","content":""})", "",
                                    usage_null, usage_so_far(0)),
                       token_at.empty() ? p.ttft_ms : token_at.front(), false});
  // Tokens p.tokens_per_event at a time, each chunk at its last token's time (reasoning and
  // answer in chunks of their own).
  std::size_t k = 0;
  int sent = 0;
  const auto chunks = [&](const std::vector<std::string>& tokens, std::string_view field) {
    const auto per = static_cast<std::size_t>(std::max(1, p.tokens_per_event));
    for (std::size_t i = 0; i < tokens.size(); i += per) {
      std::string text;
      const auto n = std::min(per, tokens.size() - i);
      for (std::size_t j = 0; j < n; ++j) text += tokens[i + j];
      k += n;
      sent += static_cast<int>(n);
      pl.events.push_back(
          {openai_chunk(id, shape.model,
                        "{\"" + std::string(field) + "\":\"" + base::json::escaped(text) + "\"}",
                        "", usage_null, usage_so_far(sent)),
           token_at[k - 1], true});
    }
  };
  chunks(reasoning, p.reasoning_field);
  chunks(answer, "content");
  const double end_at = pl.events.back().at_ms;
  pl.events.push_back({openai_chunk(id, shape.model, "{}", pl.truncated ? "length" : "stop",
                                    usage_null, usage_so_far(sent)),
                       end_at, false});
  if (shape.include_usage) {
    std::string s =
        "data: {\"id\":\"" + id.id +
        "\",\"object\":\"chat.completion.chunk\",\"created\":" + std::to_string(id.created) +
        ",\"model\":\"" + base::json::escaped(shape.model) +
        "\",\"system_fingerprint\":\"fp_tokentap_sim\",\"choices\":[],\"usage\":" +
        openai_usage_json(pl) + "}\n\n";
    pl.events.push_back({std::move(s), end_at, false});
  }
  pl.events.push_back({"data: [DONE]\n\n", end_at, false});
}

void build_anthropic_stream(const params& p, const request_shape& shape, const ids& id,
                            const std::vector<std::string>& reasoning,
                            const std::vector<std::string>& answer,
                            const std::vector<double>& token_at, plan& pl) {
  const double t0 = token_at.empty() ? p.ttft_ms : token_at.front();
  pl.events.push_back(
      {anthropic_event("message_start",
                       "{\"type\":\"message_start\",\"message\":{\"id\":\"" + id.id +
                           "\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],"
                           "\"model\":\"" +
                           base::json::escaped(shape.model) +
                           "\",\"stop_reason\":null,\"stop_sequence\":null,\"usage\":" +
                           anthropic_usage_json(pl, 1) + "}}"),
       t0, false});
  std::size_t k = 0;
  int index = 0;
  if (!reasoning.empty()) {
    pl.events.push_back(
        {anthropic_event("content_block_start",
                         "{\"type\":\"content_block_start\",\"index\":0,\"content_block\":"
                         "{\"type\":\"thinking\",\"thinking\":\"\"}}"),
         t0, false});
    for (const auto& t : reasoning) {
      pl.events.push_back(
          {anthropic_event("content_block_delta",
                           "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":"
                           "\"thinking_delta\",\"thinking\":\"" +
                               base::json::escaped(t) + "\"}}"),
           token_at[k++], true});
    }
    const double at = pl.events.back().at_ms;
    pl.events.push_back(
        {anthropic_event("content_block_delta",
                         "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":"
                         "\"signature_delta\",\"signature\":\"c2ltdWxhdGVkLXNpZ25hdHVyZQ==\"}}"),
         at, false});
    pl.events.push_back(
        {anthropic_event("content_block_stop", "{\"type\":\"content_block_stop\",\"index\":0}"), at,
         false});
    index = 1;
  }
  const std::string idx = std::to_string(index);
  const double text_start = k < token_at.size() ? token_at[k] : pl.events.back().at_ms;
  pl.events.push_back({anthropic_event("content_block_start",
                                       "{\"type\":\"content_block_start\",\"index\":" + idx +
                                           ",\"content_block\":{\"type\":\"text\",\"text\":\"\"}}"),
                       text_start, false});
  pl.events.push_back({anthropic_event("ping", "{\"type\": \"ping\"}"), text_start, false});
  for (const auto& t : answer) {
    pl.events.push_back({anthropic_event("content_block_delta",
                                         "{\"type\":\"content_block_delta\",\"index\":" + idx +
                                             ",\"delta\":{\"type\":\"text_delta\",\"text\":\"" +
                                             base::json::escaped(t) + "\"}}"),
                         token_at[k++], true});
  }
  const double end_at = pl.events.back().at_ms;
  pl.events.push_back({anthropic_event("content_block_stop",
                                       "{\"type\":\"content_block_stop\",\"index\":" + idx + "}"),
                       end_at, false});
  pl.events.push_back(
      {anthropic_event("message_delta",
                       std::string("{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"") +
                           (pl.truncated ? "max_tokens" : "end_turn") +
                           "\",\"stop_sequence\":null},\"usage\":" +
                           anthropic_usage_json(pl, pl.completion_tokens) + "}"),
       end_at, false});
  pl.events.push_back(
      {anthropic_event("message_stop", "{\"type\":\"message_stop\"}"), end_at, false});
}

std::string openai_body(const request_shape& shape, const ids& id, const params& p,
                        const plan& pl) {
  std::string s =
      "{\"id\":\"" + id.id +
      "\",\"object\":\"chat.completion\",\"created\":" + std::to_string(id.created) +
      ",\"model\":\"" + base::json::escaped(shape.model) +
      "\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"" +
      base::json::escaped(pl.content_text) + "\"";
  if (!pl.reasoning_text.empty())
    s += ",\"" + p.reasoning_field + "\":\"" + base::json::escaped(pl.reasoning_text) + "\"";
  s += "},\"logprobs\":null,\"finish_reason\":\"";
  s += pl.truncated ? "length" : "stop";
  s += "\"}],\"usage\":" + openai_usage_json(pl) + ",\"system_fingerprint\":\"fp_tokentap_sim\"}";
  return s;
}

std::string anthropic_body(const request_shape& shape, const ids& id, const plan& pl) {
  std::string s = "{\"id\":\"" + id.id +
                  "\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"" +
                  base::json::escaped(shape.model) + "\",\"content\":[";
  if (!pl.reasoning_text.empty()) {
    s += "{\"type\":\"thinking\",\"thinking\":\"" + base::json::escaped(pl.reasoning_text) +
         "\",\"signature\":\"c2ltdWxhdGVkLXNpZ25hdHVyZQ==\"},";
  }
  s += "{\"type\":\"text\",\"text\":\"" + base::json::escaped(pl.content_text) +
       "\"}],\"stop_reason\":\"";
  s += pl.truncated ? "max_tokens" : "end_turn";
  s +=
      "\",\"stop_sequence\":null,\"usage\":" + anthropic_usage_json(pl, pl.completion_tokens) + "}";
  return s;
}

// Ollama's lines open with the model and the time they were made (RFC 3339, UTC here).
std::string ollama_head(const request_shape& shape, const ids& id) {
  const std::time_t t = id.created;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char at[40];
  std::strftime(at, sizeof at, "%Y-%m-%dT%H:%M:%S.000000000Z", &tm);
  return "{\"model\":\"" + base::json::escaped(shape.model) + "\",\"created_at\":\"" + at + "\",";
}

// The text fields of one Ollama line: `message` on /api/chat, `response` on /api/generate; a
// thinking model's reasoning in `thinking` beside them.
std::string ollama_text(api kind, std::string_view content, std::string_view thinking) {
  std::string s;
  if (kind == api::ollama_chat) {
    s = "\"message\":{\"role\":\"assistant\",\"content\":\"" + base::json::escaped(content) + "\"";
    if (!thinking.empty()) s += ",\"thinking\":\"" + base::json::escaped(thinking) + "\"";
    return s + "}";
  }
  s = "\"response\":\"" + base::json::escaped(content) + "\"";
  if (!thinking.empty()) s += ",\"thinking\":\"" + base::json::escaped(thinking) + "\"";
  return s;
}

// The final object: why it ended and the counts (Ollama's durations are the engine report's).
std::string ollama_done(const request_shape& shape, const ids& id, const plan& pl,
                        std::string_view content, std::string_view thinking) {
  return ollama_head(shape, id) + ollama_text(shape.kind, content, thinking) +
         ",\"done_reason\":\"" + (pl.truncated ? "length" : "stop") +
         "\",\"done\":true,\"prompt_eval_count\":" + std::to_string(pl.prompt_tokens) +
         ",\"eval_count\":" + std::to_string(pl.completion_tokens) + "}";
}

void build_ollama_stream(const request_shape& shape, const ids& id,
                         const std::vector<std::string>& reasoning,
                         const std::vector<std::string>& answer,
                         const std::vector<double>& token_at, double ttft_ms, plan& pl) {
  std::size_t k = 0;
  for (const auto& t : reasoning)
    pl.events.push_back(
        {ollama_head(shape, id) + ollama_text(shape.kind, "", t) + ",\"done\":false}\n",
         token_at[k++], true});
  for (const auto& t : answer)
    pl.events.push_back(
        {ollama_head(shape, id) + ollama_text(shape.kind, t, "") + ",\"done\":false}\n",
         token_at[k++], true});
  const double end_at = pl.events.empty() ? ttft_ms : pl.events.back().at_ms;
  pl.events.push_back({ollama_done(shape, id, pl, "", "") + "\n", end_at, false});
}

// What each API sends when an answer fails after it began.
std::string error_event(api kind) {
  if (kind == api::anthropic_messages)
    return anthropic_event("error",
                           "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\","
                           "\"message\":\"Overloaded\"}}");
  if (is_ollama(kind)) return "{\"error\":\"an error was encountered while running the model\"}\n";
  return "data: {\"error\":{\"message\":\"The server had an error while processing your "
         "request.\",\"type\":\"server_error\",\"code\":null}}\n\n";
}

template <class T>
bool parse_number(std::string_view v, T& out) {
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  return ec == std::errc{} && p == v.data() + v.size();
}

}  // namespace

std::uint64_t fnv1a(std::string_view s) noexcept {
  std::uint64_t h = 14695981039346656037ull;  // FNV-1a 64-bit offset basis
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::optional<std::string> apply_header(params& p, std::string_view name, std::string_view value) {
  auto bad = [&] {
    return "invalid value '" + std::string(value) + "' for x-sim-" + std::string(name);
  };
  auto num = [&](auto& field) -> std::optional<std::string> {
    std::remove_reference_t<decltype(field)> v{};
    if (!parse_number(value, v) || v < 0) return bad();
    field = v;
    return std::nullopt;
  };
  if (name == "ttft-ms") return num(p.ttft_ms);
  if (name == "itl-ms") return num(p.itl_ms);
  if (name == "itl-jitter-ms") return num(p.itl_jitter_ms);
  if (name == "tokens") return num(p.output_tokens);
  if (name == "reasoning-tokens") return num(p.reasoning_tokens);
  if (name == "tokens-per-event") {
    if (auto err = num(p.tokens_per_event)) return err;
    if (p.tokens_per_event < 1) return bad();
    return std::nullopt;
  }
  if (name == "seed") return num(p.seed);
  if (name == "status") return num(p.fault_status);
  if (name == "error-after") return num(p.error_after);
  if (name == "reset-after") return num(p.reset_after);
  if (name == "stall-after") return num(p.stall_after);
  if (name == "stall-ms") return num(p.stall_ms);
  if (name == "prefill-us-per-token") return num(p.prefill_us_per_token);
  if (name == "stamp") {
    p.stamp = value == "1" || value == "true";
    return std::nullopt;
  }
  if (name == "cache-bypass") {
    p.cache_bypass = value == "1" || value == "true";
    return std::nullopt;
  }
  if (name == "hang") {
    p.hang = value == "1" || value == "true";
    return std::nullopt;
  }
  if (name == "itl-dist") {
    if (value == "fixed")
      p.dist = latency_dist::fixed;
    else if (value == "uniform")
      p.dist = latency_dist::uniform;
    else if (value == "normal")
      p.dist = latency_dist::normal;
    else if (value == "exponential")
      p.dist = latency_dist::exponential;
    else
      return bad();
    return std::nullopt;
  }
  if (name == "reasoning-field") {
    if (value != "reasoning_content" && value != "reasoning") return bad();
    p.reasoning_field = std::string(value);
    return std::nullopt;
  }
  return "unknown simulator header x-sim-" + std::string(name);
}

plan make_plan(const params& p, const request_shape& shape) {
  plan pl;
  std::mt19937_64 rng(p.seed ^ shape.body_hash);
  const int budget = shape.max_tokens
                         ? static_cast<int>(std::max<std::int64_t>(0, *shape.max_tokens))
                         : p.output_tokens + p.reasoning_tokens;
  const int n_reason = std::min(p.reasoning_tokens, budget);
  const int n_answer = std::min(p.output_tokens, budget - n_reason);
  pl.truncated = n_reason + n_answer < p.output_tokens + p.reasoning_tokens;
  const auto reasoning = make_reasoning(rng, n_reason);
  const auto answer = make_answer(rng, n_answer);
  for (const auto& t : reasoning) pl.reasoning_text += t;
  for (const auto& t : answer) pl.content_text += t;
  pl.prompt_tokens = shape.prompt_tokens > 0
                         ? static_cast<int>(shape.prompt_tokens)
                         : static_cast<int>((shape.prompt_chars + 3) / 4 + 4 * shape.messages);
  pl.cached_tokens = std::min(pl.prompt_tokens, static_cast<int>(shape.cached_tokens));
  // With cache_control, the uncached whole blocks (16 tokens) after the cached prefix are written.
  if (shape.kind == api::anthropic_messages && shape.cache_control)
    pl.cache_write_tokens = (pl.prompt_tokens - pl.cached_tokens) / 16 * 16;
  pl.reasoning_tokens = n_reason;
  pl.completion_tokens = n_reason + n_answer;

  std::vector<double> token_at;
  token_at.reserve(reasoning.size() + answer.size());
  // Prefill work is proportional to the prompt tokens not served from the cache.
  const double ttft =
      p.ttft_ms + p.prefill_us_per_token * (pl.prompt_tokens - pl.cached_tokens) / 1000.0;
  double t = ttft;
  for (std::size_t i = 0; i < reasoning.size() + answer.size(); ++i) {
    if (i > 0) t += next_gap(p, rng);
    token_at.push_back(t);
  }

  ids id;
  id.id = (shape.kind == api::anthropic_messages ? "msg_sim" : "chatcmpl-sim") +
          std::to_string((p.seed ^ shape.body_hash) % 1000000007ull);
  pl.first_token_ms = token_at.empty() ? ttft : token_at.front();
  pl.last_token_ms = token_at.empty() ? ttft : token_at.back();
  if (!shape.stream) {
    pl.body_at_ms = token_at.empty() ? ttft : token_at.back();
    pl.body = is_ollama(shape.kind) ? ollama_done(shape, id, pl, pl.content_text, pl.reasoning_text)
              : shape.kind == api::openai_chat ? openai_body(shape, id, p, pl)
                                               : anthropic_body(shape, id, pl);
    return pl;
  }
  if (is_ollama(shape.kind))
    build_ollama_stream(shape, id, reasoning, answer, token_at, ttft, pl);
  else if (shape.kind == api::openai_chat)
    build_openai_stream(p, shape, id, reasoning, answer, token_at, pl);
  else
    build_anthropic_stream(p, shape, id, reasoning, answer, token_at, pl);

  // Faults cut the stream after N token events.
  auto cut_after = [&](int n) -> std::size_t {
    int seen = 0;
    for (std::size_t i = 0; i < pl.events.size(); ++i) {
      if (seen == n) return i;
      if (pl.events[i].token) ++seen;
    }
    return pl.events.size();
  };
  if (p.error_after >= 0) {
    pl.ending = plan::end::error_event;
    pl.fault_index = cut_after(p.error_after);
    const double at = pl.fault_index > 0 ? pl.events[pl.fault_index - 1].at_ms : p.ttft_ms;
    pl.events.resize(pl.fault_index);
    pl.events.push_back({error_event(shape.kind), at, false});
  } else if (p.reset_after >= 0) {
    pl.ending = plan::end::reset;
    pl.fault_index = cut_after(p.reset_after);
    pl.events.resize(pl.fault_index);
  } else if (p.stall_after >= 0) {
    pl.ending = plan::end::stall;
    pl.fault_index = cut_after(p.stall_after);
    if (p.stall_ms > 0) {
      for (std::size_t i = pl.fault_index; i < pl.events.size(); ++i)
        pl.events[i].at_ms += p.stall_ms;
    } else {
      pl.events.resize(pl.fault_index);  // stall forever: the rest never comes
    }
  }
  return pl;
}

std::string error_body(api kind, int status) {
  if (kind == api::anthropic_messages) {
    const char* type = status == 529   ? "overloaded_error"
                       : status == 429 ? "rate_limit_error"
                       : status >= 500 ? "api_error"
                                       : "invalid_request_error";
    return std::string("{\"type\":\"error\",\"error\":{\"type\":\"") + type +
           "\",\"message\":\"simulated " + std::to_string(status) + "\"}}";
  }
  if (is_ollama(kind)) return "{\"error\":\"simulated " + std::to_string(status) + "\"}";
  const char* type = status == 429   ? "rate_limit_exceeded"
                     : status >= 500 ? "server_error"
                                     : "invalid_request_error";
  return std::string("{\"error\":{\"message\":\"simulated ") + std::to_string(status) +
         "\",\"type\":\"" + type + "\",\"param\":null,\"code\":null}}";
}

std::optional<engine_shape> engine_shape_of(std::string_view name) {
  if (name == "none") return engine_shape::none;
  if (name == "vllm") return engine_shape::vllm;
  if (name == "llama.cpp" || name == "llamacpp") return engine_shape::llamacpp;
  if (name == "tgi") return engine_shape::tgi;
  if (name == "ollama") return engine_shape::ollama;
  return std::nullopt;
}

engine_times engine_times_of(const plan& pl, double queue_ms) {
  return {queue_ms, pl.first_token_ms, std::max(0.0, pl.last_token_ms - pl.first_token_ms)};
}

namespace {

// `,"key":{…}` inserted before the last '}' of a JSON object (an SSE `data:` line's, or a body).
void insert_member(std::string& json_text, const std::string& member) {
  const auto close = json_text.rfind('}');
  if (close != std::string::npos) json_text.insert(close, member);
}

std::string ms3(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3f", v);
  return b;
}

}  // namespace

void add_engine_report(plan& pl, api kind, engine_shape e, const engine_times& t) {
  if (e == engine_shape::none || e == engine_shape::tgi || pl.ending != plan::end::normal) return;
  if ((e == engine_shape::ollama) != is_ollama(kind) || kind == api::anthropic_messages) return;
  std::string member;
  if (e == engine_shape::vllm) {
    member = ",\"metrics\":{\"queue_time_ms\":" + ms3(t.queue_ms) +
             ",\"time_to_first_token_ms\":" + ms3(t.prefill_ms) +
             ",\"generation_time_ms\":" + ms3(t.decode_ms) + "}";
  } else if (e == engine_shape::ollama) {
    // Nanoseconds.  Ollama counts the wait for a runner (its queue) in load_duration.
    auto ns = [](double ms) { return std::to_string(std::llround(ms * 1e6)); };
    member = ",\"total_duration\":" + ns(t.queue_ms + t.prefill_ms + t.decode_ms) +
             ",\"load_duration\":" + ns(t.queue_ms) +
             ",\"prompt_eval_duration\":" + ns(t.prefill_ms) +
             ",\"eval_duration\":" + ns(t.decode_ms);
  } else {
    // llama.cpp: prompt_n counts the uncached prompt only; cache_n the cached part.
    member = ",\"timings\":{\"cache_n\":" + std::to_string(pl.cached_tokens) +
             ",\"prompt_n\":" + std::to_string(pl.prompt_tokens - pl.cached_tokens) +
             ",\"prompt_ms\":" + ms3(t.prefill_ms) +
             ",\"predicted_n\":" + std::to_string(pl.completion_tokens) +
             ",\"predicted_ms\":" + ms3(t.decode_ms) + "}";
  }
  if (!pl.body.empty()) {
    insert_member(pl.body, member);
    return;
  }
  for (auto it = pl.events.rbegin(); it != pl.events.rend(); ++it) {
    if (!it->bytes.starts_with("data: {") && !it->bytes.starts_with("{")) continue;
    insert_member(it->bytes, member);
    return;
  }
}

}  // namespace tokentap::sim
