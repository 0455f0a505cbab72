#pragma once
// An inference engine's own Prometheus text (/metrics), read for what a proxy can use beside its
// own measurements (DESIGN.md §13): sequences running, requests waiting, KV-cache use and the
// engine's TTFT histogram — by vLLM's, SGLang's, TGI's or llama.cpp's names, the engine told by
// the names it sees when asked for `auto`.  Series of one name (vLLM's per-engine `engine` label,
// …) are summed; a histogram's buckets by their bound.
//
// Pure: no I/O, never throws; fed the body as it arrives, in any pieces.  Lines past
// max_line_bytes, and lines that are no sample, are skipped and counted.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tokentap::parsers {

enum class engine_kind : std::uint8_t { unknown, vllm, sglang, tgi, llamacpp };
std::string_view to_string(engine_kind k) noexcept;  ///< vllm, sglang, tgi, llama.cpp ("" unknown)
/// `auto` is unknown (read by names); false for a name that is none of them.
bool engine_kind_of(std::string_view name, engine_kind& out) noexcept;

/// A cumulative histogram bucket: observations at or under `le` (the last one's is +Inf).
struct histogram_bucket {
  double le = 0;
  double count = 0;
  bool operator==(const histogram_bucket&) const = default;
};

struct engine_load {
  engine_kind kind = engine_kind::unknown;  ///< as asked, or as recognized
  double running = -1, waiting = -1;        ///< -1: the engine has no such figure
  double kv_usage = -1;                     ///< 0 .. 1
  std::uint64_t samples = 0;                ///< lines of the engine's kind that were read
  std::uint64_t skipped = 0;                ///< lines that were no sample, or too long
  /// The engine's time to first token (vLLM's and SGLang's `time_to_first_token_seconds`), in
  /// seconds, by ascending bound; empty when it has none (TGI, llama.cpp).  At most max_buckets.
  std::vector<histogram_bucket> ttft;
  static constexpr std::size_t max_buckets = 128;
  /// Whether the text looked like the engine's metrics at all (a figure of its kind was read).
  bool recognized() const noexcept { return samples > 0; }
};

/// Prometheus' histogram_quantile: the rank q·total found in the cumulative buckets (ascending,
/// the last +Inf), linear within its bucket, the first bucket starting at 0; a rank in the +Inf
/// bucket gives the largest finite bound.  -1 without observations.
double bucket_quantile(double q, const std::vector<histogram_bucket>& buckets) noexcept;

/// `now` less `before` bucket by bucket: what was observed between two reads.  False (and `out`
/// empty) when their bounds differ or a count fell — the engine restarted in between.
bool bucket_delta(const std::vector<histogram_bucket>& now,
                  const std::vector<histogram_bucket>& before, std::vector<histogram_bucket>& out);

class engine_metrics_reader {
 public:
  static constexpr std::size_t max_line_bytes = 64 * 1024;
  explicit engine_metrics_reader(engine_kind asked = engine_kind::unknown) { load_.kind = asked; }
  void feed(std::string_view bytes);
  /// The end of the text (a last line without its newline is read).
  const engine_load& finish();

 private:
  void line(std::string_view l);
  void bucket(std::string_view labels, double count);
  std::string partial_;
  bool overlong_ = false;  // the partial line passed max_line_bytes: skipped to its end
  double kv_sum_ = 0;
  std::uint64_t kv_n_ = 0;
  engine_load load_;
};

}  // namespace tokentap::parsers
