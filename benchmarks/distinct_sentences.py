"""Sentences no student repeats (issue 53): captions and everyday sentences of mixed length, made from fixed
word lists with a seed, checked against every training set the shipped models read, written one per line.

  python -m benchmarks.distinct_sentences --out benchmarks/sentences/distinct-en.txt --n 400

benchmarks/class_load.py's `distinct` scenario gives each student the next unused line: within a run no sentence
comes twice, so no student finds a page another one computed. The file is committed (the same sentences for
every build compared); --check-data names the training files to check against (default: the shipped models' own,
under ../shared/data), and a sentence found there is replaced.
"""
from __future__ import annotations

import argparse
import gzip
import random
from pathlib import Path

PEOPLE = ["man", "woman", "boy", "girl", "child", "teenager", "old man", "young woman", "chef", "farmer", "nurse",
          "musician", "tourist", "student", "worker", "cyclist", "dancer", "painter", "fisherman", "teacher"]
ADJECTIVES = ["tall", "small", "smiling", "tired", "young", "elderly", "happy", "busy", "quiet", "curious"]
COLOURS = ["red", "blue", "green", "yellow", "black", "white", "orange", "purple", "brown", "gray"]
CLOTHES = ["jacket", "shirt", "hat", "dress", "coat", "sweater", "scarf", "helmet", "apron", "uniform"]
ACTIONS = ["is reading a newspaper", "is carrying a heavy box", "is playing the violin", "is painting a fence",
           "is feeding the ducks", "is selling vegetables", "is repairing a bicycle", "is waiting for a bus",
           "is climbing a wooden ladder", "is taking a photograph", "is walking a small dog", "is cooking soup",
           "is writing a letter", "is cleaning a window", "is pushing a cart", "is drinking coffee"]
PLACES = ["in a crowded market", "on a snowy street", "next to a river", "in front of a church", "at the beach",
          "in a quiet library", "near an old bridge", "in a busy kitchen", "on a green hill", "inside a train station",
          "under a large tree", "beside a fountain", "in a small garden", "on a rooftop"]
EVERYDAY = [
    "My {rel} wants to {plan} {when} because {reason}.",
    "Could you tell me where I can {need} in this part of the city?",
    "We decided to {plan} {when}, but {rel2} thinks it is a bad idea.",
    "I have never {done} before, so I am a little nervous about it.",
    "If it does not rain {when}, we will {plan} with our {rel3}.",
    "The {thing} I bought last week stopped working after only {n} days.",
    "Please remember to {chore} before you leave the house {when}.",
    "Nobody in my family knew that my {rel} had learned to {skill} as a child.",
]
RELATIONS = ["brother", "sister", "cousin", "neighbour", "grandmother", "uncle", "best friend", "colleague"]
PLANS = ["visit the museum", "go hiking in the mountains", "paint the kitchen", "learn to swim", "sell the old car",
         "cook dinner for everyone", "travel to the coast", "plant tomatoes in the garden"]
WHENS = ["tomorrow morning", "next weekend", "after lunch", "on Friday evening", "this summer", "before Christmas"]
REASONS = ["the weather will be better", "the tickets are cheaper then", "everyone has time", "it is her birthday",
           "the shops are closed", "he finally has a day off"]
NEEDS = ["buy fresh bread", "find a pharmacy", "rent a bicycle", "change some money", "catch the night bus",
         "print a document"]
DONE = ["flown in a small plane", "eaten raw fish", "spoken in front of so many people", "driven on the left side",
        "slept in a tent", "baked a cake on my own"]
THINGS = ["kettle", "lamp", "phone charger", "vacuum cleaner", "radio", "alarm clock"]
CHORES = ["water the plants", "turn off the oven", "lock the back door", "feed the cat", "close the windows",
          "take out the rubbish"]
SKILLS = ["play the piano", "speak Italian", "ride a horse", "juggle", "knit", "sail a boat"]


def caption(rng: random.Random) -> str:
    """An image caption of 6 to 16 words, as Multi30K's look."""
    person = f"{rng.choice(['A', 'An'])} {rng.choice(ADJECTIVES)} {rng.choice(PEOPLE)}"
    person = ("An " if person.split()[1][0] in "aeiou" else "A ") + person.split(" ", 1)[1]
    shape = rng.randrange(3)
    if shape == 0:
        return f"{person} {rng.choice(ACTIONS)}."
    if shape == 1:
        return f"{person} in a {rng.choice(COLOURS)} {rng.choice(CLOTHES)} {rng.choice(ACTIONS)} {rng.choice(PLACES)}."
    return f"Two {rng.choice(PEOPLE)}s {rng.choice(ACTIONS).replace('is ', 'are ')} {rng.choice(PLACES)}."


def everyday(rng: random.Random) -> str:
    """An everyday sentence of 8 to 15 words, as a teacher types them."""
    return rng.choice(EVERYDAY).format(
        rel=rng.choice(RELATIONS), rel2=f"my {rng.choice(RELATIONS)}", rel3=f"{rng.choice(RELATIONS)}s",
        plan=rng.choice(PLANS), when=rng.choice(WHENS), reason=rng.choice(REASONS), need=rng.choice(NEEDS),
        done=rng.choice(DONE), thing=rng.choice(THINGS), n=rng.choice(["two", "three", "five", "ten"]),
        chore=rng.choice(CHORES), skill=rng.choice(SKILLS))


def training_sentences(paths: list[Path]) -> set[str]:
    """Every line of the files that exist (gzipped or not), lowercased."""
    seen: set[str] = set()
    for path in paths:
        if path.is_file():
            opener = gzip.open if path.suffix == ".gz" else open
            with opener(path, "rt", encoding="utf-8", errors="replace") as f:
                seen |= {line.strip().lower() for line in f}
    return seen


def sentences(n: int, seed: int, known: set[str]) -> list[str]:
    """n distinct sentences, half captions and half everyday ones, alternating, none in `known`."""
    rng = random.Random(seed)
    out: list[str] = []
    seen: set[str] = set()
    for _ in range(100 * n):
        if len(out) == n:
            break
        text = caption(rng) if len(out) % 2 == 0 else everyday(rng)
        if text.lower() not in seen and text.lower() not in known:
            seen.add(text.lower())
            out.append(text)
    if len(out) < n:
        raise SystemExit(f"only {len(out)} distinct sentences from the word lists; ask for fewer")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="benchmarks/sentences/distinct-en.txt")
    p.add_argument("--n", type=int, default=400)
    p.add_argument("--seed", type=int, default=53)
    p.add_argument("--check-data", nargs="*", default=[
        f"../shared/data/{corpus}/{split}.en.gz" for corpus, splits in (
            ("multi30k", ("train", "val", "test_2016_flickr")),
            ("tatoeba-en-de", ("train", "val", "test", "val-long", "test-long")),
            ("everyday-extra", ("train",))) for split in splits])
    args = p.parse_args(argv)
    known = training_sentences([Path(x) for x in args.check_data])
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(sentences(args.n, args.seed, known)) + "\n")
    print(f"wrote {args.n} distinct sentences to {out} (checked against {len(known):,} training sentences)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
