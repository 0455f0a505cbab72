#!/usr/bin/env python3
"""One `tokentap bench run` under three sets of definitions: ours (its summary.json), AIPerf's and
vLLM's `bench serve` (recomputed here from the raw reads in the run's trace records, the way each
tool defines its figures: ../shared/reference/bench-runners.md).  Prints a Markdown table for
docs/bench.md.

    test/bench/definitions.py RUN_DIR [LEVEL]
"""
import base64
import glob
import json
import statistics
import sys


def events_of(record):
    """(t_ms, payload dict) of every SSE data event, timed by the read that completed it."""
    out, buf = [], b""
    for ev in record["events"]:
        buf += ev["raw"].encode() if "raw" in ev else base64.b64decode(ev["raw_b64"])
        while b"\n\n" in buf:
            event, buf = buf.split(b"\n\n", 1)
            for line in event.decode("utf-8", "replace").split("\n"):
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    out.append((ev["t_us"] / 1000, None))
                    continue
                try:
                    out.append((ev["t_us"] / 1000, json.loads(data)))
                except ValueError:
                    pass
    return out


def delta_text(payload):
    choices = (payload or {}).get("choices") or []
    if not choices:
        return None
    delta = choices[0].get("delta") or {}
    return "".join(delta.get(k) or "" for k in ("content", "reasoning_content", "reasoning"))


def pct(xs, q):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = (len(xs) - 1) * q / 100
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def main():
    run, level = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 0
    rows = [json.loads(l) for l in open(f"{run}/requests.jsonl")]
    rows = [r for r in rows if r["level"] == level and not r.get("warmup") and r["ok"]]
    records = {}
    for f in glob.glob(f"{run}/traces/*.jsonl"):
        for l in open(f):
            r = json.loads(l)
            records[r["id"]] = r
    summary = json.load(open(f"{run}/summary.json"))["levels"][level]
    m = summary["metrics"]

    aiperf = {"ttft": [], "ttfo": [], "itl": [], "e2e": []}
    vllm = {"ttft": [], "itl": [], "tpot": [], "e2e": []}
    tokens, starts, ends = 0, [], []
    for row in rows:
        rec = records[row["trace_id"]]
        evs = events_of(rec)
        out = rec["usage"]["output_tokens"]
        wall = rec["start"]
        start_s = int(wall[11:13]) * 3600 + int(wall[14:16]) * 60 + float(wall[17:-1])
        last = evs[-1][0]
        starts.append(start_s)
        ends.append(start_s + last / 1000)
        tokens += out
        # AIPerf: TTFT at the first non-empty response, reasoning included; request latency to
        # the last response; ITL = (latency - TTFT) / (OSL - 1), one per request.
        first_text = next(t for t, p in evs if delta_text(p))
        aiperf["ttft"].append(first_text)
        # TTFO: the first content (not reasoning) token.
        aiperf["ttfo"].append(next(t for t, p in evs
                                   if p and (p.get("choices") or [{}])[0].get("delta", {}).get("content")))
        aiperf["e2e"].append(last)
        aiperf["itl"].append((last - first_text) / (out - 1))
        # vLLM: TTFT at the first event with choices, even an empty delta; one ITL sample per
        # later such event (the gap since the event before it, whatever it was); latency to the
        # last data event; TPOT = (latency - TTFT) / (out - 1).
        data = [(t, p) for t, p in evs if p is not None]
        ttft = next(t for t, p in data if p.get("choices"))
        vllm["ttft"].append(ttft)
        previous = None
        for t, p in data:
            if p.get("choices") and previous is not None and t > ttft - 1e-9 and previous >= ttft:
                vllm["itl"].append(t - previous)
            previous = t
        latency = data[-1][0]
        vllm["e2e"].append(latency)
        vllm["tpot"].append((latency - ttft) / (out - 1))
    duration = max(ends) - min(starts)

    def f(x):
        return f"{x:.3f}"

    print(f"run {run}, level {level}: {len(rows)} requests, {tokens} output tokens\n")
    print("| figure | ours | AIPerf's definition | vLLM's definition |")
    print("|---|---|---|---|")
    print(f"| TTFT mean (ms) | {f(m['ttft_ms']['mean'])} | {f(statistics.mean(aiperf['ttft']))} "
          f"| {f(statistics.mean(vllm['ttft']))} |")
    print(f"| TTFT P50 (ms) | {f(m['ttft_ms']['p50'])} | {f(pct(aiperf['ttft'], 50))} "
          f"| {f(pct(vllm['ttft'], 50))} |")
    print(f"| TTFO mean (ms) | {f(m['ttfo_ms']['mean'])} | {f(statistics.mean(aiperf['ttfo']))} "
          f"| — |")
    print(f"| ITL mean (ms) | {f(m['itl_ms']['mean'])} (per gap) "
          f"| {f(statistics.mean(aiperf['itl']))} (per request) "
          f"| {f(statistics.mean(vllm['itl']))} (per event) |")
    print(f"| ITL P99 (ms) | {f(m['itl_ms']['p99'])} | {f(pct(aiperf['itl'], 99))} "
          f"| {f(pct(vllm['itl'], 99))} |")
    print(f"| TPOT mean (ms) | {f(m['tpot_ms']['mean'])} | {f(statistics.mean(aiperf['itl']))} "
          f"| {f(statistics.mean(vllm['tpot']))} |")
    print(f"| end to end mean (ms) | {f(m['e2e_ms']['mean'])} | {f(statistics.mean(aiperf['e2e']))} "
          f"| {f(statistics.mean(vllm['e2e']))} |")
    print(f"| output tokens/s | {summary['throughput']['output_tokens_per_s']:.1f} "
          f"| {tokens / duration:.1f} | {tokens / duration:.1f} |")


main()
