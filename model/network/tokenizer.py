"""Sentencepiece subword tokenizer, trained by our own code on the training text.

Special ids are fixed for every model this project trains: pad 0, unk 1, bos 2, eos 3
(sentencepiece's own defaults differ and disable padding). They are recorded in the
checkpoint's config.json.

An imported Marian model numbers its pieces by its own `vocab.json` (one vocabulary
shared by a source and a target sentencepiece model; `</s>` 0, `<unk>` 1, `<pad>` last):
`Tokenizer(proto, vocab)` maps pieces through it, as MarianTokenizer does.
"""
from __future__ import annotations

import io
import os
from collections.abc import Iterable
from pathlib import Path

import sentencepiece as spm

PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3


SPECIAL_PIECES = {"pad_id": "<pad>", "unk_id": "<unk>", "bos_id": "<s>", "eos_id": "</s>"}


class Tokenizer:
    """A loaded sentencepiece model: text <-> ids, ids -> display pieces. With `vocab`
    (piece -> id), ids are that vocabulary's, not the sentencepiece model's."""

    def __init__(self, model_proto: bytes, vocab: dict[str, int] | None = None) -> None:
        self.proto, self.vocab = model_proto, vocab
        self.sp = spm.SentencePieceProcessor(model_proto=model_proto)
        if vocab is not None:
            self._pieces = [""] * (max(vocab.values()) + 1)
            for piece, i in vocab.items():
                self._pieces[i] = piece
        self._specials = set(self.special_ids.values())

    @classmethod
    def load(cls, path: str | Path, vocab: dict[str, int] | None = None) -> "Tokenizer":
        return cls(Path(path).read_bytes(), vocab)

    def save(self, path: str | Path) -> None:
        Path(path).write_bytes(self.proto)

    @classmethod
    def train(cls, sentences: Iterable[str], vocab_size: int, model_type: str = "bpe",
              character_coverage: float = 1.0) -> "Tokenizer":
        buffer = io.BytesIO()
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(list(sentences)), model_writer=buffer, vocab_size=vocab_size,
            model_type=model_type, character_coverage=character_coverage,
            pad_id=PAD_ID, unk_id=UNK_ID, bos_id=BOS_ID, eos_id=EOS_ID,
            pad_piece="<pad>", unk_piece="<unk>", bos_piece="<s>", eos_piece="</s>",
            num_threads=2, minloglevel=2, hard_vocab_limit=False,
        )
        return cls(buffer.getvalue())

    @property
    def special_ids(self) -> dict[str, int]:
        """pad_id, unk_id, bos_id, eos_id as this sentencepiece model defines them (the
        names of ModelConfig's fields): a model's config takes them from here once."""
        if self.vocab is not None:   # Marian: no <s>; the decoder starts with <pad>
            ids = {name: self.vocab[piece] for name, piece in SPECIAL_PIECES.items() if piece in self.vocab}
            return {**ids, "bos_id": ids.get("bos_id", ids["pad_id"])}
        sp = self.sp
        return {"pad_id": sp.pad_id(), "unk_id": sp.unk_id(), "bos_id": sp.bos_id(), "eos_id": sp.eos_id()}

    @property
    def vocab_size(self) -> int:
        return len(self._pieces) if self.vocab is not None else self.sp.get_piece_size()

    def encode(self, text: str) -> list[int]:
        """Text -> ids, without bos/eos."""
        if self.vocab is None:
            return self.sp.encode(text, out_type=int)
        unk = self.vocab["<unk>"]
        return [self.vocab.get(p, unk) for p in self.sp.encode(text, out_type=str)]

    def encode_many(self, texts: list[str]) -> list[list[int]]:
        """encode() of each text, in sentencepiece's own threads when it can (a corpus at once)."""
        if self.vocab is None:
            return self.sp.encode(list(texts), out_type=int, num_threads=os.cpu_count() or 1)
        return [self.encode(t) for t in texts]

    def encode_sampled(self, texts: list[str], alpha: float, seed: int) -> list[list[int]]:
        """encode() of each text with subword sampling (for a BPE model, BPE-dropout: each merge is
        skipped with probability alpha), one thread and a seeded generator: the same seed, the same
        split. Training only; a Marian vocabulary is not sampled."""
        if self.vocab is not None:
            return self.encode_many(texts)
        spm.set_random_generator_seed(seed)
        return self.sp.encode(list(texts), out_type=int, enable_sampling=True, alpha=alpha, nbest_size=-1,
                              num_threads=1)

    def decode(self, ids: Iterable[int]) -> str:
        """Ids -> detokenized text; special ids are dropped."""
        kept = [int(i) for i in ids if int(i) not in self._specials]
        if self.vocab is None:
            return self.sp.decode(kept)
        return self.sp.decode_pieces([self._pieces[i] for i in kept])

    def pieces(self, ids: Iterable[int]) -> list[str]:
        """Ids -> the subword pieces as shown on plot axes ("▁" marks a word start)."""
        if self.vocab is not None:
            return [self._pieces[int(i)] for i in ids]
        return [self.sp.id_to_piece(int(i)) for i in ids]

    def piece_id(self, piece: str) -> int | None:
        """The id of a piece as shown ("▁der", "s"), or None if the vocabulary has no such piece."""
        if self.vocab is not None:
            return self.vocab.get(piece)
        i = self.sp.piece_to_id(piece)
        return None if i == self.sp.unk_id() and piece != self.sp.id_to_piece(i) else i
