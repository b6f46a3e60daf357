"""Sentencepiece subword tokenizer, trained by our own code on the training text.

Special ids are fixed for every model this project trains: pad 0, unk 1, bos 2, eos 3
(sentencepiece's own defaults differ and disable padding). They are recorded in the
checkpoint's config.json.
"""
from __future__ import annotations

import io
from collections.abc import Iterable
from pathlib import Path

import sentencepiece as spm

PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3


class Tokenizer:
    """A loaded sentencepiece model: text <-> ids, ids -> display pieces."""

    def __init__(self, model_proto: bytes) -> None:
        self.proto = model_proto
        self.sp = spm.SentencePieceProcessor(model_proto=model_proto)

    @classmethod
    def load(cls, path: str | Path) -> "Tokenizer":
        return cls(Path(path).read_bytes())

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
        sp = self.sp
        return {"pad_id": sp.pad_id(), "unk_id": sp.unk_id(), "bos_id": sp.bos_id(), "eos_id": sp.eos_id()}

    @property
    def vocab_size(self) -> int:
        return self.sp.get_piece_size()

    def encode(self, text: str) -> list[int]:
        """Text -> ids, without bos/eos."""
        return self.sp.encode(text, out_type=int)

    def decode(self, ids: Iterable[int]) -> str:
        """Ids -> detokenized text; special ids are dropped."""
        return self.sp.decode([i for i in ids if i > EOS_ID])

    def pieces(self, ids: Iterable[int]) -> list[str]:
        """Ids -> the subword pieces as shown on plot axes ("▁" marks a word start)."""
        return [self.sp.id_to_piece(int(i)) for i in ids]
