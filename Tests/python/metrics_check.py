"""Checks a `/metrics` scrape against the journal it must agree with.

    python metrics_check.py METRICS.txt EVENTS.jsonl

METRICS.txt is what `GET /metrics` answered (parsed with prometheus_client's text parser, the
one Prometheus-compatible parser on PyPI); EVENTS.jsonl is `orchestrate events --json` (every
event of the store). Every counter and histogram count the engine feeds is recomputed from the
journal and compared; prints each disagreement and exits 1 if there is any.
"""
import json
import sys
from collections import Counter, defaultdict

from prometheus_client.parser import text_string_to_metric_families


def samples(text):
    """{(sample name, frozenset(labels)): value} of every sample in the scrape."""
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return out


def direction(step_type):
    name = step_type.partition(".")[2]
    if "upload" in name or "accept" in name:
        return "upload"
    if "download" in name:
        return "download"
    return "local"


def expected(events):
    """What the counters must say, recomputed from the journal."""
    want = defaultdict(Counter)
    step_type = {}  # (run, step) -> uses of its latest attempt
    moved = defaultdict(int)  # (run, step) -> bytes moved by its earlier attempts
    attempt_moved = defaultdict(int)  # (run, step) -> furthest bytes_moved of its current attempt
    last_status = {}  # run -> final status
    for event in events:
        kind, data = event["type"], event.get("data", {})
        key = (event.get("run"), event.get("step"))
        if kind == "step.started" and "attempt" in data:
            step_type[key] = data["uses"]
            moved[key] += attempt_moved.pop(key, 0)
            want["orchestrate_step_attempts_total"][(("step_type", data["uses"]),)] += 1
        elif kind in ("step.retrying", "step.failed") and "attempt" in data and key in step_type:
            labels = (("code", data.get("code") or ""), ("kind", data["kind"]), ("step_type", step_type[key]))
            want["orchestrate_step_failures_total"][labels] += 1
        elif kind == "step.progress" and key in step_type:
            attempt_moved[key] = max(attempt_moved[key], data["bytes_moved"])
        elif kind == "run.finished":
            last_status[event["run"]] = data["status"]
            want["orchestrate_runs_finished_total"][(("status", data["status"]),)] += 1
        elif kind == "run.started":
            want["orchestrate_queue_wait_seconds_count"][(("queue", data["queue"]),)] += 1
        if kind in ("step.succeeded", "step.retrying", "step.failed", "step.cancelled", "step.interrupted") \
                and "attempt" in data and key in step_type:
            outcome = "failed" if kind == "step.retrying" else kind.split(".")[1]
            want["orchestrate_step_duration_seconds_count"][(("outcome", outcome), ("step_type", step_type[key]))] += 1
    for key, done in attempt_moved.items():
        moved[key] += done
    for key, done in moved.items():
        if done:
            labels = (("direction", direction(step_type[key])), ("plugin", step_type[key].split(".")[0]))
            want["orchestrate_bytes_moved_total"][labels] += done
    for status, count in Counter(last_status.values()).items():
        want["orchestrate_runs"][(("queue", "default"), ("status", status))] = count
    return want


def main():
    text = open(sys.argv[1], encoding="utf-8").read()
    events = [json.loads(line) for line in open(sys.argv[2], encoding="utf-8") if line.strip()]
    got = samples(text)
    problems = []
    want = expected(events)
    for name, series in want.items():
        for labels, value in series.items():
            have = got.get((name, frozenset(labels)))
            if have != value:
                problems.append(f"{name}{dict(labels)}: journal says {value}, /metrics says {have}")
        # Nothing counted that the journal does not have.
        for (sample, labels), value in got.items():
            if sample == name and tuple(sorted(labels)) not in series and value != 0:
                problems.append(f"{name}{dict(labels)}: /metrics says {value}, the journal has none")
    if not any(name == "orchestrate_store_commit_seconds_count" and value > 0 for (name, _), value in got.items()):
        problems.append("orchestrate_store_commit_seconds_count: no commit timed")
    if ("orchestrate_steps_held", frozenset()) not in got:
        problems.append("orchestrate_steps_held: missing")
    for problem in problems:
        print(problem)
    checked = sum(len(series) for series in want.values())
    print(f"{checked} series checked against {len(events)} events, {len(problems)} disagreements")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
