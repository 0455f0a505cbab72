#pragma once
// When an open-loop level sends its requests (DESIGN.md §14, `--rate`, `--arrival`,
// `--burstiness`): a schedule made before the level starts, so the client's own delays show as
// schedule lag (sent − planned) instead of silently lowering the rate.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace tokentap::bench {

enum class arrival : std::uint8_t { constant, poisson, gamma };
/// `constant`, `poisson` or `gamma`; nullopt for another name.
std::optional<arrival> arrival_of(std::string_view name) noexcept;

/// Planned send times, in seconds from the level's start, of `n` requests at `rate` per second
/// (> 0): the first at 0, then
/// - constant: every 1 / rate;
/// - poisson: exponential gaps (gamma with shape 1);
/// - gamma: gaps of shape `burstiness` and scale 1 / (rate × burstiness) — vLLM's
///   `--burstiness`: 1 is Poisson, below 1 burstier, above 1 more even (a gap's coefficient of
///   variation is 1 / √burstiness).
/// Drawn gaps are rescaled so that the n gaps sum to n / rate exactly: the level's mean rate is
/// the one asked for, where unscaled draws drift by a percent or two (vLLM's fix of #21104).
/// `seed` makes a schedule repeatable, so two runs of an experiment send alike.
std::vector<double> schedule(std::size_t n, double rate, arrival kind, double burstiness,
                             std::uint64_t seed);

/// A recorded schedule (`--workload DIR_OF_TRACES`): planned send times, in seconds from the
/// level's start, of recorded requests whose offsets from the first are `at` (ascending, the
/// first 0), played `speed` times as fast (> 0).  Request i is recorded request i mod n: a
/// workload shorter than the level repeats, each pass one recorded span plus one mean gap after
/// the one before (so a pass's first request does not land on the last one's).  The times run
/// while the count is below `max_requests` (0: no bound) and the time below `until_s` (≤ 0: no
/// bound); with neither bound, one pass.
std::vector<double> recorded_schedule(const std::vector<double>& at, double speed,
                                      std::size_t max_requests, double until_s);

}  // namespace tokentap::bench
