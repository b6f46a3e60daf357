"""The data of a distillation run (issue 52), apart from the GPU visit that runs it
(model/commands/visit.py): the bundle that travels to the GPU, the pairs a teacher trains on, the
sentences it translates, the mix a student trains on, and the compact form the translations come back in.

Everything here is plain files and text (gzip, xz): a stage of the visit writes a corpus directory that
train.py reads (`write_dir`), and reads back what another stage left (`read_distilled`)."""
from __future__ import annotations

import gzip
import hashlib
import json
import lzma
import random
import shutil
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

DIRECTIONS = (("en", "de"), ("de", "en"))
PART_BYTES = 15 * 2 ** 20            # what comes back: files under 16 MB

# ---- the bundle: what travels beside the checkout ------------------------------------------------
# name in the bundle <- path under ../shared/data
PAIRS = {"multi30k": ("multi30k", ("train", "val", "test_2016_flickr")),
         "tatoeba": ("tatoeba-en-de", ("train", "val", "val-long", "test", "test-long")),
         "extra": ("everyday-extra", ("train",))}
MONO = {"sgd.en": "everyday-extra/mono/sgd-dialogues.en.gz", "cv.en": "everyday-extra/mono/commonvoice.en.gz",
        "cv.de": "everyday-extra/mono/commonvoice.de.gz"}
LEXICON = "everyday-extra/lexicon.en-de.tsv.gz"
LEXICON_MAX = 40_000


def _words(text: str) -> list[str]:
    return [w.lower().strip(".,!?;:'\"") for w in text.split()]


def lexicon_entries(lines: list[str], english: Counter, german: Counter, limit: int = LEXICON_MAX,
                    least: int = 3) -> list[tuple[str, str]]:
    """The dictionary entries worth a place among the pairs: one or two plain words a side (no `{m}`,
    `sb.`, `/abbr/` notes), every word of both sides seen at least `least` times in real English and
    German sentences (what people type: cities, foods, months) and not only the 300 commonest English
    words (the pairs teach those in context); of an English entry's German senses the most common one;
    the most common English first, at most `limit`."""
    best: dict[str, tuple[int, str, str]] = {}
    common = {w for w, _ in english.most_common(300)}      # "in", "for", "is": the pairs teach them in context
    notes = {"sb.", "sth.", "jdm.", "etw.", "jdn.", "jds.", "jd."}
    for line in lines:
        en, _, de = line.partition("\t")
        en, de = en.strip(), de.strip()
        if not en or not de or any(c in en + de for c in "{}[]()/;|<>=+:"):
            continue
        if not (1 <= len(en.split()) <= 2 and 1 <= len(de.split()) <= 2) or notes & set((en + " " + de).split()):
            continue
        if all(w in common for w in _words(en)):
            continue
        en_freq, de_freq = min(english[w] for w in _words(en)), min(german[w] for w in _words(de))
        if en_freq < least or de_freq < least:
            continue
        key = en.lower()
        if key not in best or de_freq > best[key][0]:
            best[key] = (de_freq, en, de)
    ranked = sorted(best.values(), key=lambda v: -min(english[w] for w in _words(v[1])))
    return [(en, de) for _, en, de in ranked[:limit]]


def make_bundle(shared: Path, to: Path) -> dict[str, Any]:
    """Copy what the visit trains on into `to` (gzip as it is), with a filtered lexicon and a manifest."""
    to.mkdir(parents=True, exist_ok=True)
    files: dict[str, Any] = {}
    for name, (folder, splits) in PAIRS.items():
        for split in splits:
            for lang in ("en", "de"):
                dst = to / f"{name}.{split}.{lang}.gz"
                shutil.copyfile(shared / folder / f"{split}.{lang}.gz", dst)
                files[dst.name] = _count(dst)
    for name, rel in MONO.items():
        dst = to / f"{name}.gz"
        shutil.copyfile(shared / rel, dst)
        files[dst.name] = _count(dst)
    counts: dict[str, Counter] = {"en": Counter(), "de": Counter()}
    for path in sorted(to.glob("*.gz")):
        lang = path.name.split(".")[-2]
        if lang in counts and ".train." in path.name or path.name.startswith(("sgd.", "cv.")):
            counts[lang].update(w for line in _lines(path) for w in _words(line))
    entries = lexicon_entries(_lines(shared / LEXICON), counts["en"], counts["de"])
    with gzip.open(to / "lexicon.tsv.gz", "wt", encoding="utf-8") as f:
        f.writelines(f"{en}\t{de}\n" for en, de in entries)
    files["lexicon.tsv.gz"] = len(entries)
    manifest = {"from": str(shared), "files": files,
                "sha256": {p.name: hashlib.sha256(p.read_bytes()).hexdigest()[:16] for p in sorted(to.glob("*.gz"))}}
    (to / "MANIFEST.json").write_text(json.dumps(manifest, indent=1))
    return manifest


def _lines(path: Path) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n").strip() for line in f]


def _count(path: Path) -> int:
    return len(_lines(path))


# ---- data for the runs ------------------------------------------------------------------------------
def pairs(bundle: Path, name: str, split: str) -> tuple[list[str], list[str]]:
    return _lines(bundle / f"{name}.{split}.en.gz"), _lines(bundle / f"{name}.{split}.de.gz")


def write_dir(folder: Path, split: str, en: list[str], de: list[str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    assert len(en) == len(de), (split, len(en), len(de))
    (folder / f"{split}.en").write_text("".join(s.replace("\n", " ") + "\n" for s in en), encoding="utf-8")
    (folder / f"{split}.de").write_text("".join(s.replace("\n", " ") + "\n" for s in de), encoding="utf-8")


def real_pairs(bundle: Path) -> tuple[list[str], list[str]]:
    """Every training pair: Multi30K, Tatoeba, everyday-extra, and the filtered lexicon."""
    en, de = [], []
    for name in PAIRS:
        e, d = pairs(bundle, name, "train")
        en += e
        de += d
    for line in _lines(bundle / "lexicon.tsv.gz"):
        e, _, d = line.partition("\t")
        en.append(e)
        de.append(d)
    return en, de


def val_pairs(bundle: Path, seed: int = 0) -> tuple[list[str], list[str]]:
    """Multi30K val + Tatoeba val + val-long, shuffled (a run's per-epoch score reads the first few)."""
    rows = []
    for name, split in (("multi30k", "val"), ("tatoeba", "val"), ("tatoeba", "val-long")):
        rows += list(zip(*pairs(bundle, name, split)))
    random.Random(seed).shuffle(rows)
    return [r[0] for r in rows], [r[1] for r in rows]


def sources(bundle: Path, lang: str) -> dict[str, list[str]]:
    """What a teacher translating from `lang` is given, most useful first: the sources of the real
    pairs (each distinct sentence once), then the monolingual sentences."""
    out: dict[str, list[str]] = {}
    for name in PAIRS:
        out[name] = list(dict.fromkeys(_lines(bundle / f"{name}.train.{lang}.gz")))
    for name in MONO:
        if name.endswith("." + lang):
            out[name.split(".")[0]] = list(dict.fromkeys(_lines(bundle / f"{name}.gz")))
    return out


def read_distilled(path: Path) -> list[tuple[str, str, str]]:
    if not path.is_file():
        return []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f]
    return [(r[0], r[1], r[2]) for r in rows if len(r) == 3 and r[1].strip() and r[2].strip()]


def student_pairs(bundle: Path, src: str, tgt: str, work: Path) -> tuple[list[str], list[str], dict[str, int]]:
    """The real pairs, the teacher's translations of every `src` sentence (forward), and the other
    teacher's translations of monolingual `tgt` sentences (back-translation: the target side is real)."""
    en, de = real_pairs(bundle)
    s, t = (en, de) if src == "en" else (de, en)
    counts = {"real": len(s)}
    forward = read_distilled(work / f"distill-{src}-{tgt}.tsv.gz")
    s, t = s + [r[1] for r in forward], t + [r[2] for r in forward]
    counts["forward"] = len(forward)
    back = [r for r in read_distilled(work / f"distill-{tgt}-{src}.tsv.gz") if r[0] in {n.split(".")[0] for n in MONO}]
    s, t = s + [r[2] for r in back], t + [r[1] for r in back]
    counts["back"] = len(back)
    return s, t, counts


def one_field(text: str) -> str:
    return " ".join(text.split("\t")).replace("\n", " ")


def compact(tsv: Path, target: Path) -> None:
    """The way back is narrow: only corpus and translation, one line per source sentence in the order
    `sources(bundle, src)` gives them ("" where time ran out); `read_compact` puts the sources back."""
    with gzip.open(tsv, "rt", encoding="utf-8") as f, lzma.open(target, "wt", encoding="utf-8", preset=6) as g:
        for line in f:
            corpus, _, translation = line.rstrip("\n").split("\t", 2)
            g.write(f"{corpus}\t{translation}\n")


def read_compact(path: Path, bundle: Path, src: str) -> list[tuple[str, str, str]]:
    """(corpus, source, translation) of a returned distill-SRC-TGT.txt.xz, sources from the bundle; rows
    with no translation dropped. Raises ValueError when a corpus's count does not match the bundle's."""
    with lzma.open(path, "rt", encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t", 1) for line in f]
    by_corpus: dict[str, list[str]] = {}
    for corpus, translation in rows:
        by_corpus.setdefault(corpus, []).append(translation)
    texts = sources(bundle, src)
    out = []
    for corpus, translations in by_corpus.items():
        if len(translations) != len(texts.get(corpus, [])):
            raise ValueError(f"{path}: {corpus} has {len(translations)} lines, the bundle {len(texts.get(corpus, []))}")
        out += [(corpus, s, t) for s, t in zip(texts[corpus], translations) if t.strip()]
    return out


def unpack_distilled(folder: Path, bundle: Path, work: Path, log: Callable[[str], None]) -> dict[str, int]:
    """An earlier visit's distill-*.txt.xz (joined from parts) back into the work folder's tsv.gz, as
    the distill stage would have left them."""
    work.mkdir(parents=True, exist_ok=True)
    counts = {}
    for s, t in DIRECTIONS:
        name = f"distill-{s}-{t}.txt.xz"
        parts = sorted(folder.glob(name + ".part-*")) or ([folder / name] if (folder / name).is_file() else [])
        if not parts:
            continue
        joined = work / name
        joined.write_bytes(b"".join(p.read_bytes() for p in parts))
        rows = read_compact(joined, bundle, s)
        with gzip.open(work / f"distill-{s}-{t}.tsv.gz", "wt", encoding="utf-8") as f:
            f.writelines(f"{c}\t{one_field(src)}\t{out}\n" for c, src, out in rows)
        counts[f"{s}-{t}"] = len(rows)
        log(f"distilled {s}-{t} from {folder}: {len(rows)} translations")
    return counts


def split_file(path: Path, part_bytes: int = PART_BYTES) -> list[Path]:
    """path -> path.part-00, -01, ... each at most part_bytes; the whole is removed."""
    parts = []
    with open(path, "rb") as f:
        i = 0
        while chunk := f.read(part_bytes):
            part = path.with_name(f"{path.name}.part-{i:02d}")
            part.write_bytes(chunk)
            parts.append(part)
            i += 1
    path.unlink()
    return parts
