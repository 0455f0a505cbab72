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

}  // namespace tokentap::bench
