"""Marian interop (model/storage/convert.py) against `transformers` itself, offline: a small random
MarianMTModel built from a MarianConfig, with sentencepiece models trained here, imported
into our format must give the same logits, attention, greedy and beam outputs; our own
checkpoints exported to Marian must give the same logits and translations in
`transformers`. Skips when the optional extra is not installed (pip install -e ".[hf]")."""
from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
import sentencepiece as spm
import torch

from model.commands.convert import main
from model.inference.decoding import decode
from model.inference.options import DecodeOptions, max_output_length
from model.network.trace import Trace
from model.storage.checkpoint import load_checkpoint
from model.storage.convert import ConvertError, export_marian, import_marian
from tests.support import ROOT, make_checkpoint, sentences

transformers = pytest.importorskip("transformers", reason="the optional extra is not installed: pip install -e '.[hf]'")
torch.manual_seed(0)

TEXTS = ["the dog runs in the park", "a red ball", "the woman sits on a big blue ball and a child plays"]


def train_spm(lines: list[str], size: int) -> bytes:
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=buf, vocab_size=size,
                                   model_type="unigram", minloglevel=2, hard_vocab_limit=False)
    return buf.getvalue()


def marian_vocab(*protos: bytes) -> dict[str, int]:
    """Marian's layout: </s> 0, <unk> 1, the pieces of both models, <pad> last."""
    vocab = {"</s>": 0, "<unk>": 1}
    for proto in protos:
        sp = spm.SentencePieceProcessor(model_proto=proto)
        for i in range(sp.get_piece_size()):
            if not (sp.is_control(i) or sp.is_unknown(i)):
                vocab.setdefault(sp.id_to_piece(i), len(vocab))
    vocab["<pad>"] = len(vocab)
    return vocab


@pytest.fixture(scope="module")
def marian_dir(tmp_path_factory) -> Path:
    """A random MarianMTModel (swish, 2+2 layers) saved as a Hugging Face directory."""
    d = tmp_path_factory.mktemp("marian")
    src, tgt = train_spm(sentences(300, seed=0), 50), train_spm(sentences(300, seed=1), 45)
    vocab = marian_vocab(src, tgt)
    pad = vocab["<pad>"]
    cfg = transformers.MarianConfig(
        vocab_size=len(vocab), decoder_vocab_size=len(vocab), d_model=32, encoder_layers=2, decoder_layers=2,
        encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
        activation_function="swish", max_position_embeddings=64, scale_embedding=True, pad_token_id=pad,
        eos_token_id=0, decoder_start_token_id=pad, forced_eos_token_id=None, init_std=0.4, dropout=0.0)
    torch.manual_seed(3)
    model = transformers.MarianMTModel(cfg).eval()
    with torch.no_grad():       # outputs that end at varied lengths, and never <pad>
        model.final_logits_bias.normal_(0, 0.5)
        model.final_logits_bias[0, 0] = 2.5
        model.final_logits_bias[0, pad] = -1e4
    model.save_pretrained(d, safe_serialization=True)
    (d / "source.spm").write_bytes(src)
    (d / "target.spm").write_bytes(tgt)
    (d / "vocab.json").write_text(json.dumps(vocab))
    (d / "tokenizer_config.json").write_text(json.dumps({"source_lang": "en", "target_lang": "de"}))
    return d


@pytest.fixture(scope="module")
def hf_model(marian_dir):
    return transformers.MarianMTModel.from_pretrained(marian_dir, attn_implementation="eager").eval()


@pytest.fixture(scope="module")
def ours(marian_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("ours") / "opus-mt-en-de"
    import_marian(marian_dir, out)
    return load_checkpoint(out)


def batch(ckpt, texts: list[str]) -> torch.Tensor:
    ids = [ckpt.src_tokenizer.encode(t) + [ckpt.config.eos_id] for t in texts]
    out = torch.full((len(ids), max(map(len, ids))), ckpt.config.pad_id)
    for i, row in enumerate(ids):
        out[i, : len(row)] = torch.tensor(row)
    return out


def test_the_import_reads_marians_shape(ours):
    cfg = ours.config
    assert (cfg.activation, cfg.pe_layout, cfg.logits_bias, cfg.scale_embedding) == ("swish", "halves", True, True)
    assert cfg.bos_id == cfg.pad_id and cfg.eos_id == 0 and (ours.src_lang, ours.tgt_lang) == ("en", "de")


def test_tokenizers_agree(marian_dir, ours):
    tok = transformers.MarianTokenizer.from_pretrained(marian_dir)
    for text in TEXTS:
        assert tok(text).input_ids == ours.src_tokenizer.encode(text) + [ours.config.eos_id]
        ids = tok(text_target=text).input_ids
        assert ours.tgt_tokenizer.decode(ids) == tok.decode(ids, skip_special_tokens=True)


def test_logits_and_attention_equal_transformers(hf_model, ours):
    src = batch(ours, TEXTS[:2])                                              # padded
    tgt = torch.tensor([[ours.config.bos_id, 5, 9, 7, 11], [ours.config.bos_id, 8, 6, 12, 4]])
    with torch.inference_mode():
        theirs = hf_model(input_ids=src, attention_mask=src != ours.config.pad_id, decoder_input_ids=tgt,
                          output_attentions=True)
        trace = Trace()
        logits = ours.model(src, tgt, trace)
    assert torch.allclose(logits, theirs.logits, atol=1e-4), (logits - theirs.logits).abs().max()
    for name, hf_attn in (("encoder_self", theirs.encoder_attentions), ("decoder_self", theirs.decoder_attentions),
                          ("cross", theirs.cross_attentions)):
        assert torch.allclose(trace.attention(name), torch.stack(hf_attn), atol=1e-5), name


def generated(hf_model, ckpt, text: str, **kw) -> list[int]:
    src = batch(ckpt, [text])
    n = max_output_length(src.size(1), ckpt.config.max_positions)
    with torch.inference_mode():
        out = hf_model.generate(src, attention_mask=src != ckpt.config.pad_id, max_new_tokens=n, do_sample=False,
                                **kw)[0].tolist()[1:]
    return out[: out.index(ckpt.config.eos_id)] if ckpt.config.eos_id in out else out


@pytest.mark.parametrize("text", TEXTS)
def test_greedy_equals_generate(hf_model, ours, text):
    mine = decode(ours.model, batch(ours, [text]), DecodeOptions("greedy"))[0].tokens
    assert mine == generated(hf_model, ours, text, num_beams=1)


@pytest.mark.parametrize("penalty,lp", [("none", 0.0), ("average", 1.0)])
@pytest.mark.parametrize("text", TEXTS)
def test_beam_equals_generate(hf_model, ours, text, penalty, lp):
    mine = decode(ours.model, batch(ours, [text]), DecodeOptions("beam", beam_size=4, length_penalty=penalty))[0]
    assert mine.tokens == generated(hf_model, ours, text, num_beams=4, length_penalty=lp, early_stopping=True)


def test_our_checkpoint_exported_to_marian_gives_our_logits_and_translations(tokenizer, tmp_path):
    ours_dir = tmp_path / "tiny"
    make_checkpoint(tokenizer, ours_dir)
    export_marian(ours_dir, tmp_path / "hf")
    ckpt = load_checkpoint(ours_dir)
    theirs = transformers.MarianMTModel.from_pretrained(tmp_path / "hf").eval()
    tok = transformers.MarianTokenizer.from_pretrained(tmp_path / "hf")
    src = batch(ckpt, TEXTS)
    tgt = torch.tensor([[ckpt.config.bos_id, 5, 9, 7]] * len(TEXTS))
    with torch.inference_mode():
        assert torch.allclose(ckpt.model(src, tgt), theirs(input_ids=src, attention_mask=src != 0,
                                                           decoder_input_ids=tgt).logits, atol=1e-4)
    for text in TEXTS:
        assert tok(text).input_ids == ckpt.src_tokenizer.encode(text) + [ckpt.config.eos_id]
        mine = decode(ckpt.model, batch(ckpt, [text]), DecodeOptions("greedy"))[0].tokens
        assert mine == generated(theirs, ckpt, text, num_beams=1)


def test_the_round_trip_ours_marian_ours_keeps_the_logits(tokenizer, tmp_path):
    make_checkpoint(tokenizer, tmp_path / "tiny")
    first = load_checkpoint(tmp_path / "tiny")
    export_marian(tmp_path / "tiny", tmp_path / "hf")
    again = load_checkpoint(import_marian(tmp_path / "hf", tmp_path / "back"))
    src, tgt = batch(first, TEXTS), torch.tensor([[first.config.bos_id, 5, 9, 7]] * len(TEXTS))
    with torch.inference_mode():
        assert torch.allclose(first.model(src, tgt), again.model(src, tgt), atol=1e-4)


@pytest.fixture(scope="module")
def trained_marian(tokenizer, tmp_path_factory):
    """A Marian-shaped model of ours (swish, halves PE, logits bias, <pad> as the start
    symbol) trained briefly to reverse word sequences, so its beams finish at varied
    lengths; exported to a Marian directory."""
    from model.network.batch import Example, collate
    from model.network.config import preset
    from model.network.transformer import Transformer
    from model.storage.checkpoint import save_checkpoint
    from model.training.loop import StepSettings, train_step
    cfg = preset("tiny", src_vocab_size=tokenizer.vocab_size, tgt_vocab_size=tokenizer.vocab_size, bos_id=0,
                 activation="swish", pe_layout="halves", logits_bias=True)
    torch.manual_seed(0)
    model = Transformer(cfg)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    texts = sentences(2000, seed=7)
    data = [Example(tokenizer.encode(t) + [3], [0] + tokenizer.encode(" ".join(t.split()[::-1])) + [3])
            for t in texts]
    for step in range(150):
        train_step(model, opt, [collate(data[(step * 32) % 1984:][:32], 0)], 3e-3, StepSettings(), 0)
    d = tmp_path_factory.mktemp("trained")
    save_checkpoint(d / "ours", model.eval(), tokenizer, tokenizer, meta={"src_lang": "en", "tgt_lang": "en"})
    export_marian(d / "ours", d / "hf")
    return load_checkpoint(d / "ours"), transformers.MarianMTModel.from_pretrained(d / "hf").eval()


@pytest.mark.parametrize("penalty,lp", [("none", 0.0), ("average", 1.0)])
def test_beams_that_finish_equal_generate(trained_marian, penalty, lp):
    ckpt, theirs = trained_marian
    for text in [*TEXTS, "the man plays", "a child sits on the red ball in the street"]:
        mine = decode(ckpt.model, batch(ckpt, [text]), DecodeOptions("beam", beam_size=4, length_penalty=penalty))[0]
        assert mine.hypotheses[0].finished and 0 < len(mine.tokens)
        assert mine.tokens == generated(theirs, ckpt, text, num_beams=4, length_penalty=lp, early_stopping=True)


SHIPPED = ROOT / "checkpoints" / "multi30k-en-de"


@pytest.mark.skipif(not (SHIPPED / "config.json").is_file(), reason="no shipped checkpoint")
def test_the_shipped_model_translates_the_same_in_transformers(tmp_path):
    export_marian(SHIPPED, tmp_path / "hf")
    ckpt = load_checkpoint(SHIPPED)
    theirs = transformers.MarianMTModel.from_pretrained(tmp_path / "hf").eval()
    tok = transformers.MarianTokenizer.from_pretrained(tmp_path / "hf")
    for text in ["A man in an orange hat starring at something.", "Two dogs play in the snow."]:
        out = generated(theirs, ckpt, text, num_beams=1)
        assert tok.decode(out, skip_special_tokens=True) == ckpt.tgt_tokenizer.decode(
            decode(ckpt.model, batch(ckpt, [text]), DecodeOptions("greedy"))[0].tokens)


# ---- refusals ------------------------------------------------------------------------------------
def test_models_of_another_shape_are_refused_with_what_differs(marian_dir, tmp_path):
    t5 = tmp_path / "t5"
    t5.mkdir()
    (t5 / "config.json").write_text(json.dumps({"model_type": "t5"}))
    with pytest.raises(ConvertError, match="relative position"):
        import_marian(t5, tmp_path / "out")
    prenorm = tmp_path / "prenorm"
    prenorm.mkdir()
    hf = json.loads((marian_dir / "config.json").read_text())
    (prenorm / "config.json").write_text(json.dumps({**hf, "normalize_before": True, "activation_function": "tanh"}))
    with pytest.raises(ConvertError, match="pre-norm.*activation 'tanh'"):
        import_marian(prenorm, tmp_path / "out")


def test_a_pickle_only_directory_is_refused_with_how_to_convert_it(marian_dir, tmp_path, capsys):
    d = tmp_path / "bin"
    d.mkdir()
    for name in ("config.json", "source.spm", "target.spm", "vocab.json"):
        (d / name).write_bytes((marian_dir / name).read_bytes())
    (d / "pytorch_model.bin").write_bytes(b"not loaded")
    assert main(["from-hf", str(d), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "pickle" in err and "safe_serialization=True" in err and not (tmp_path / "out").exists()


def test_every_page_works_on_an_imported_model(ours, monkeypatch):
    """The imported model alone in the checkpoints directory: each page, in the order a
    student might visit them, without an exception."""
    from streamlit.testing.v1 import AppTest

    from app.pages import PAGES
    from tests.support import APP, goto, page_of, tour
    monkeypatch.setenv("TRANSFORMER_CHECKPOINTS", str(ours.path.parent))
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert not at.exception and at.title[0].value.endswith("en → de")
    at.text_input(key="text").set_value("the dog runs in the park").run()
    route = tour([p.slug for p in PAGES], "explore")
    for a, b in zip(route, route[1:]):
        goto(at, b)
        assert not at.exception and page_of(at) == b, (a, b, at.exception)
    goto(at, "card")
    assert any("**Imported**" in m.value for m in at.markdown)
    goto(at, "positional")
    assert any("cosines in the second" in c.value for c in at.caption)


def test_every_head_of_an_imported_model_across_a_set(ours):
    """Marian's start symbol is <pad>: the statistics must not take it for padding."""
    from model.analysis.heads import compute, sentence_set
    stats = compute(ours, sentence_set(ours, [*TEXTS, "", "the dog " * 40], "marian"),
                    DecodeOptions("greedy"), knockout_sentences=2, agreement_sentences=2)
    assert len(stats.sentences) == 3 and len(stats.skipped) == 2
    for kind in stats.kinds.values():
        assert kind.knockout.shape == (2, 4) and not np.isnan(kind.knockout).any()
        assert np.allclose(sum(kind.means[m] for m in ("left", "previous", "same", "next", "right")), 1.0)
    decoder = stats.kinds["decoder_self"]
    assert decoder.rows == sum(len(t) - 1 for t in stats.target_tokens)    # every row after the start symbol
    assert stats.agreement_sentences == 2 and stats.kinds["cross"].agreement is not None


# ---- by name: the Hugging Face cache, offline --------------------------------------------------
def hub_cache(root: Path, repo_id: str, files: dict[str, bytes]) -> None:
    """A Hugging Face cache laid out as huggingface_hub writes it: each file's bytes under blobs/ by
    hash, a snapshot of relative links per commit, refs/main naming the commit."""
    import hashlib
    repo = root / ("models--" + repo_id.replace("/", "--"))
    commit = hashlib.sha1(repo_id.encode()).hexdigest()
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True)
    (repo / "blobs").mkdir()
    for name, data in files.items():
        blob = hashlib.sha256(data).hexdigest()
        (repo / "blobs" / blob).write_bytes(data)
        (snapshot / name).symlink_to(Path("..") / ".." / "blobs" / blob)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)


@pytest.fixture
def offline_cache(marian_dir, tmp_path, monkeypatch):
    cache = tmp_path / "hf"
    hub_cache(cache, "tiny-nlp/opus-mt-en-de", {f.name: f.read_bytes() for f in marian_dir.iterdir() if f.is_file()})
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMER_CHECKPOINTS", str(tmp_path / "mine"))
    return cache


def test_a_model_is_opened_by_its_name_from_the_cache_offline(offline_cache, ours, tmp_path, capsys):
    assert main(["from-hf", "tiny-nlp/opus-mt-en-de"]) == 0
    written = tmp_path / "mine" / "opus-mt-en-de"                      # the user's checkpoints, by the model's name
    assert f"wrote {written}" in capsys.readouterr().err
    by_name = load_checkpoint(written)
    src = batch(ours, TEXTS)
    opts = DecodeOptions("greedy")
    assert [r.tokens for r in decode(by_name.model, src, opts)] == [r.tokens for r in decode(ours.model, src, opts)]


def test_what_cannot_be_had_by_name_is_said(offline_cache, marian_dir, monkeypatch, capsys):
    from model.storage import hub
    assert main(["from-hf", "tiny-nlp/opus-mt-en-fr"]) == 2                  # not in the cache, offline
    assert "not in the local Hugging Face cache" in capsys.readouterr().err
    hub_cache(offline_cache, "tiny-nlp/pickled", {"config.json": (marian_dir / "config.json").read_bytes(),
                                                  "pytorch_model.bin": b"not a pickle we would ever open"})
    assert main(["from-hf", "tiny-nlp/pickled"]) == 2
    assert "never loads a pickle" in capsys.readouterr().err
    hub_cache(offline_cache, "tiny-nlp/t5-small", {"config.json": json.dumps({"model_type": "t5"}).encode(),
                                                   "model.safetensors": b"x"})
    assert main(["from-hf", "tiny-nlp/t5-small"]) == 2
    assert "not Marian-shaped: T5 uses relative position biases" in capsys.readouterr().err
    import huggingface_hub
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError
    response = type("Response", (), {"headers": {}, "request": None})()
    for error, said in ((RepositoryNotFoundError, "no model 'Helsinki-NLP/opus-mt-en-dee'"),
                        (GatedRepoError, "is gated")):
        def refuse(*a, error=error, **kw):
            raise error("refused", response=response)
        monkeypatch.setattr(huggingface_hub, "snapshot_download", refuse)
        assert main(["from-hf", "Helsinki-NLP/opus-mt-en-dee"]) == 2
        err = capsys.readouterr().err
        assert said in err and err.count("\n") == 1
    assert hub.is_repo_id("Helsinki-NLP/opus-mt-en-de") and not hub.is_repo_id("just-a-name")
    assert main(["from-hf", "no/such/dir"]) == 2 and "no such directory" in capsys.readouterr().err


def test_the_app_adds_a_model_by_name_and_opens_it(offline_cache, app_checkpoints, tmp_path):
    import shutil

    from streamlit.testing.v1 import AppTest

    from tests.support import APP
    shutil.copytree(app_checkpoints, tmp_path / "mine")
    at = AppTest.from_file(APP, default_timeout=120).run()
    assert at.selectbox(key="checkpoint").options == ["multi30k-de-en", "multi30k-en-de"]
    at.text_input(key="add_model_name").set_value("tiny-nlp/opus-mt-en-fr").run()
    at.button(key="add_model_go").click().run()
    assert any("not in the local Hugging Face cache" in e.value for e in at.error) and not at.exception
    at.text_input(key="add_model_name").set_value("tiny-nlp/opus-mt-en-de").run()
    at.button(key="add_model_go").click().run()
    assert not at.exception, at.exception
    assert at.selectbox(key="checkpoint").value == "opus-mt-en-de"
    assert (tmp_path / "mine" / "opus-mt-en-de" / "model.safetensors").is_file()
    assert "en → de" in at.title[0].value
