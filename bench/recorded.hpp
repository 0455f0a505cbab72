#pragma once
// Recorded traces as a workload (DESIGN.md §14, `--workload DIR_OF_TRACES`): each trace record's
// request, sent as it was recorded — method, path, body — at its recorded offset from the first
// (bench/arrivals.hpp, recorded_schedule), or in a closed or open loop like any workload.
#include <optional>
#include <string>
#include <vector>

#include "bench/workload.hpp"

namespace tokentap::bench {

/// The requests of the trace records in `dir` (its *.jsonl files), in the order they started.
/// nullopt with `error` when there are none, or when one was recorded without its body
/// (`trace.bodies: false`, or a body over the record's limit): such a trace cannot be replayed.
/// `skipped`: lines that were not records (torn or malformed), left out.
std::optional<std::vector<task>> recorded_tasks(const std::string& dir, std::size_t& skipped,
                                                std::string& error);

}  // namespace tokentap::bench
