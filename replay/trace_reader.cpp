#include "replay/trace_reader.hpp"

#include <simdjson.h>

#include "base/json.hpp"
#include "hooks/observe/attribution.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <optional>

namespace tokentap::replay {

namespace od = simdjson::ondemand;

namespace {

double num(od::value v) {
  double d;
  return v.get_double().get(d) ? -1 : d;
}

std::int64_t integer(od::value v) {
  std::int64_t n;
  return v.get_int64().get(n) ? -1 : n;
}

std::string str(od::value v) {
  std::string_view s;
  return v.get_string().get(s) ? std::string() : std::string(s);
}

template <class F>
bool fields(od::value v, F&& f) {
  od::object o;
  if (v.get_object().get(o)) return false;
  for (auto field : o) {
    std::string_view k;
    od::value fv;
    if (field.unescaped_key().get(k) || field.value().get(fv)) return false;
    f(k, fv);
  }
  return true;
}

template <class F>
bool elements(od::value v, F&& f) {
  od::array a;
  if (v.get_array().get(a)) return false;
  for (auto item : a) {
    od::value iv;
    if (item.get(iv)) return false;
    f(iv);
  }
  return true;
}

}  // namespace

std::int64_t parse_rfc3339_us(const std::string& s) {
  std::tm tm{};
  int usec = 0;
  if (std::sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d.%6dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                  &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &usec) < 6)
    return -1;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return static_cast<std::int64_t>(timegm(&tm)) * 1000000 + usec;
}

namespace {

// A duration that may be negative (unexplained_ms); nullopt for null or no number.
std::optional<double> signed_ms(od::value v) {
  double d;
  if (v.get_double().get(d) || !std::isfinite(d)) return std::nullopt;
  return d;
}

void attribution(od::value v, recorded_attribution& a) {
  static_assert(recorded_phases == hooks::phase_count);
  a.present = fields(v, [&](std::string_view k, od::value x) {
    for (std::size_t i = 0; i < recorded_phases; ++i) {
      const auto name = hooks::to_string(static_cast<hooks::phase>(i));
      if (k.size() == name.size() + 3 && k.starts_with(name) && k.ends_with("_ms")) {
        a.phases[i] = signed_ms(x);
        return;
      }
    }
    if (k == "client_wait_ms") {
      a.client_wait_ms = signed_ms(x);
    } else if (k == "unexplained_ms") {
      a.unexplained_ms = signed_ms(x);
    } else if (k == "engine") {
      fields(x, [&](std::string_view ek, od::value ev) {
        if (ek == "source")
          a.engine_source = str(ev);
        else if (ek == "queue_ms")
          a.engine_queue_ms = signed_ms(ev);
        else if (ek == "prefill_ms")
          a.engine_prefill_ms = signed_ms(ev);
        else if (ek == "decode_ms")
          a.engine_decode_ms = signed_ms(ev);
        else if (ek == "load_ms")
          a.engine_load_ms = signed_ms(ev);
        else if (ek == "inference_ms")
          a.engine_inference_ms = signed_ms(ev);
      });
    }
  });
}

}  // namespace

std::optional<record> parse_record(const std::string& line) {
  thread_local od::parser parser;
  simdjson::padded_string json(line);
  od::document doc;
  od::value root;
  if (parser.iterate(json).get(doc) || doc.get_value().get(root)) return std::nullopt;
  record r;
  std::int64_t version = 0;
  bool ok = fields(root, [&](std::string_view k, od::value v) {
    if (k == "v")
      version = integer(v);
    else if (k == "id")
      r.id = str(v);
    else if (k == "start")
      r.start = str(v);
    else if (k == "route")
      r.route = str(v);
    else if (k == "provider")
      r.provider = str(v);
    else if (k == "model")
      r.model = str(v);
    else if (k == "outcome")
      r.outcome = str(v);
    else if (k == "error")
      fields(v, [&](std::string_view ek, od::value ev) {
        if (ek == "type") r.error_type = str(ev);
      });
    else if (k == "request") {
      fields(v, [&](std::string_view rk, od::value rv) {
        if (rk == "method")
          r.method = str(rv);
        else if (rk == "path")
          r.path = str(rv);
        else if (rk == "headers")
          fields(rv, [&](std::string_view hk, od::value hv) {
            r.request_headers.emplace_back(hk, str(hv));
          });
        else if (rk == "body") {
          std::string_view b;
          if (!rv.get_string().get(b)) r.body = std::string(b);
        }
      });
    } else if (k == "response") {
      fields(v, [&](std::string_view rk, od::value rv) {
        if (rk == "status")
          r.status = static_cast<int>(integer(rv));
        else if (rk == "headers")
          fields(rv, [&](std::string_view hk, od::value hv) {
            r.response_headers.emplace_back(hk, str(hv));
          });
      });
    } else if (k == "timing") {
      fields(v, [&](std::string_view tk, od::value tv) {
        if (tk == "ttft_ms")
          r.ttft_ms = num(tv);
        else if (tk == "ttft_answer_ms")
          r.ttft_answer_ms = num(tv);
        else if (tk == "e2e_ms")
          r.e2e_ms = num(tv);
        else if (tk == "upstream_headers_ms")
          r.upstream_headers_ms = num(tv);
        else if (tk == "tokens_per_s")
          r.tokens_per_s = num(tv);
        else if (tk == "stalls")
          r.stalls = integer(tv);
        else if (tk == "itl_values_ms")
          elements(tv, [&](od::value x) { r.itl_values_ms.push_back(num(x)); });
        else if (tk == "itl_ms")
          fields(tv, [&](std::string_view q, od::value qv) {
            if (q == "p50")
              r.itl_p50 = num(qv);
            else if (q == "p95")
              r.itl_p95 = num(qv);
            else if (q == "p99")
              r.itl_p99 = num(qv);
          });
        else if (tk == "overhead_ms")
          fields(tv, [&](std::string_view q, od::value qv) {
            if (q == "p50")
              r.overhead_p50 = num(qv);
            else if (q == "p99")
              r.overhead_p99 = num(qv);
          });
      });
    } else if (k == "attribution") {
      attribution(v, r.attribution);
    } else if (k == "fault") {
      recorded_fault f;
      if (fields(v, [&](std::string_view fk, od::value fv) {
            if (fk == "rule")
              f.rule = str(fv);
            else if (fk == "kind")
              f.kind = str(fv);
            else if (fk == "value")
              f.value = integer(fv);
          }))
        r.fault = std::move(f);
    } else if (k == "usage") {
      fields(v, [&](std::string_view uk, od::value uv) {
        if (uk == "input_tokens")
          r.input_tokens = integer(uv);
        else if (uk == "output_tokens")
          r.output_tokens = integer(uv);
        else if (uk == "reasoning_tokens")
          r.reasoning_tokens = integer(uv);
        else if (uk == "cached_input_tokens")
          r.cached_input_tokens = integer(uv);
      });
    } else if (k == "events") {
      elements(v, [&](od::value e) {
        recorded_read rr;
        std::optional<std::string> b64;
        fields(e, [&](std::string_view ek, od::value ev) {
          if (ek == "t_us")
            rr.t_us = integer(ev);
          else if (ek == "raw")
            rr.bytes = str(ev);
          else if (ek == "raw_b64")
            b64 = base::json::base64_decode(str(ev));
        });
        if (b64) rr.bytes = std::move(*b64);
        r.events.push_back(std::move(rr));
      });
    } else if (k == "steps") {
      elements(v, [&](od::value e) {
        step_record s;
        fields(e, [&](std::string_view sk, od::value sv) {
          if (sk == "kind")
            s.kind = str(sv);
          else if (sk == "tokens")
            s.tokens = integer(sv);
          else if (sk == "redundant") {
            bool b = false;
            if (!sv.get_bool().get(b)) s.redundant = b;
          }
        });
        r.steps.push_back(std::move(s));
      });
    } else if (k == "choices") {
      r.choices = integer(v);
    } else if (k == "redundant_tokens") {
      r.redundant_tokens = integer(v);
    } else if (k == "cache") {
      elements(v, [&](od::value e) {
        cache_event c;
        fields(e, [&](std::string_view ck, od::value cv) {
          if (ck == "event")
            c.event = str(cv);
          else if (ck == "role")
            c.role = str(cv);
          else if (ck == "reason")
            c.reason = str(cv);
        });
        if (!c.event.empty()) r.cache.push_back(std::move(c));
      });
    }
  });
  if (!ok || version != 1 || r.method.empty()) return std::nullopt;
  r.start_us = parse_rfc3339_us(r.start);
  return r;
}

namespace {

// The files a path names: itself, or a directory's *.jsonl files in name order (the writer's
// names sort in creation order).
std::vector<std::string> files_of(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return {path};
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(path, ec))
    if (e.path().extension() == ".jsonl") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

read_result read_traces(const std::vector<std::string>& paths) {
  return read_traces(paths, {});
}

read_result read_traces(const std::vector<std::string>& paths,
                        const std::vector<std::string>& ids) {
  read_result out;
  // A line that does not contain one of the ids as a JSON string is not parsed at all.
  auto wanted = [&](const std::string& line) {
    if (ids.empty()) return true;
    for (const auto& id : ids)
      if (line.find("\"" + id + "\"") != std::string::npos) return true;
    return false;
  };
  auto warn = [&](std::string w) {
    ++out.skipped;
    if (out.warnings.size() < 20) out.warnings.push_back(std::move(w));
  };
  std::vector<std::string> files;
  for (const auto& p : paths) {
    const auto named = files_of(p);
    if (named.empty()) warn(p + ": no .jsonl trace files in this directory");
    files.insert(files.end(), named.begin(), named.end());
  }
  for (const auto& f : files) {
    std::ifstream in(f);
    if (!in) {
      warn(f + ": cannot open");
      continue;
    }
    std::size_t line_no = 0;
    for (std::string line; std::getline(in, line);) {
      ++line_no;
      if (line.empty() || !wanted(line)) continue;
      auto r = parse_record(line);
      if (!r) {
        warn(f + ":" + std::to_string(line_no) + ": not a valid trace record, skipped");
        continue;
      }
      if (!ids.empty()) {
        if (std::find(ids.begin(), ids.end(), r->id) == ids.end()) continue;
        r->raw = std::move(line);
      }
      out.records.push_back(std::move(*r));
    }
  }
  return out;
}

}  // namespace tokentap::replay
