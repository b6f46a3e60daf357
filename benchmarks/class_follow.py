"""A class following its teacher, over Streamlit's own protocol (issue 28's numbers), against a
running app (`make serve`, its classes in Redis; or one process).

  .venv/bin/python -m benchmarks.class_follow --url http://127.0.0.1:8501 --students 30

One teacher (a session like any other) starts a class on the step page; --students followers open the
join link at once. Every session runs its timed fragments and its class bell as a browser does (a
follower's page waits on the bell and checks its class every 2 s anyway; the teacher counts followers every
2 s). Then:
  changes  the teacher presses Next --changes times and types a new sentence once, a few seconds
           apart; per change and follower: from the teacher's run finishing (its view is published then)
           to the follower's page writing the same link (the end of the run that applied it); all
           changes together (follow_p*), and each kind alone (follow_next_p*, follow_sentence_p*)
  idle     --idle seconds of following with nothing changing: the server's CPU (app processes,
           HAProxy, Redis) over that time, in cores
  poll     the teacher opens "What comes next?", every follower types an answer, the teacher
           reveals: per follower, from the teacher's click to its page first showing the chart
Errors: runs that did not finish, exception elements, followers that never caught up. Dropped (not errors): a
bell's fragment rerun that Streamlit never started because a whole run in between drew the fragment anew (a browser
asks and does not wait; that whole run read the class too).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import time

from benchmarks.class_load import SENTENCES, cpu_seconds, pct, server_processes
from serving.class_client import (  # noqa: F401
    CODE,
    Session,
    caught_up,
    change,
    end_class,
    open_class,
    params,
    wait_for,
)


async def measure(args) -> dict:
    teacher, followers, tasks = await open_class(args.url, args.students, SENTENCES[0])
    await asyncio.sleep(3)

    latencies, missed, by_kind = [], 0, {"next": [], "sentence": []}
    for i in range(args.changes):
        sentence = SENTENCES[1] if i == args.changes // 2 else None
        got, lost = await change(teacher, followers, f"change {i}", sentence, args.timeout)
        latencies += got
        by_kind["sentence" if sentence else "next"] += got
        missed += lost
        await asyncio.sleep(args.think)

    procs = server_processes()
    before, start = cpu_seconds(procs), time.monotonic()
    await asyncio.sleep(args.idle)
    idle_cores = (cpu_seconds(procs) - before) / (time.monotonic() - start)

    await teacher.run("ask", [teacher.s.press("class-ask-next-token")])
    opened = await wait_for(lambda: all(any(k.startswith("poll-own-") for k in f.s.widgets) for f in followers),
                            args.timeout)
    for n, f in enumerate(followers):
        own = next((k for k in f.s.widgets if k.startswith("poll-own-")), None)
        if own is None:
            f.errors.append("the poll never showed")
            continue
        await f.run("type", [f.s.type(own, f"Wort{n}")])
        send = next(k for k in f.s.widgets if k.startswith("poll-send-"))
        await f.run("answer", [f.s.press(send)])
    revealed = time.monotonic()                    # the click: the reveal is stored as the teacher's run starts
    await teacher.run("reveal", [teacher.s.press("class-reveal")])
    await wait_for(lambda: all(any(k.startswith("poll-results-") for k in f.s.widgets) for f in followers),
                   args.timeout)
    reveal = [min(t for k, t in f.s.first_seen.items() if k.startswith("poll-results-")) - revealed
              for f in followers if any(k.startswith("poll-results-") for k in f.s.first_seen)]
    await end_class(teacher, followers, tasks)
    errors = [e for x in (teacher, *followers) for e in x.errors]
    return {"students": args.students, "changes": args.changes, "follow_p50": pct(latencies, 0.5),
            "follow_p95": pct(latencies, 0.95), "follow_max": max(latencies, default=None), "missed": missed,
            **{f"follow_{kind}_p{q}": pct(xs, q / 100) for kind, xs in by_kind.items() for q in (50, 95)},
            "idle_seconds": args.idle, "idle_cores": idle_cores, "poll_opened": opened,
            "reveal_p50": pct(reveal, 0.5), "reveal_p95": pct(reveal, 0.95), "reveal_max": max(reveal, default=None),
            "revealed_to": len(reveal), "errors": len(errors), "error_samples": errors[:5],
            "dropped": sum(x.dropped for x in (teacher, *followers))}


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.class_follow", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", default="http://127.0.0.1:8501")
    p.add_argument("--students", type=int, default=30)
    p.add_argument("--changes", type=int, default=10)
    p.add_argument("--think", type=float, default=2.0, help="seconds between the teacher's changes")
    p.add_argument("--idle", type=float, default=30.0, help="seconds of idle following measured")
    p.add_argument("--timeout", type=float, default=20.0, help="seconds a follower may take to catch up")
    p.add_argument("--json", default=None, help="also write the result here")
    args = p.parse_args()
    result = asyncio.run(measure(args))
    for k, v in result.items():
        print(f"{k}: {round(v, 3) if isinstance(v, float) else v}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
