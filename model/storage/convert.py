"""Marian translation models (Hugging Face MarianMT / OPUS-MT) in, our checkpoints out.

  python -m model.convert from-hf Helsinki-NLP/opus-mt-en-de     # by name: the hub, or the local cache
  python -m model.convert from-hf DIR --out checkpoints/NAME [--src-lang en --tgt-lang de]
  python -m model.convert to-hf checkpoints/multi30k-en-de --out DIR

from-hf reads a Marian model (config.json, model.safetensors, source.spm, target.spm,
vocab.json) from a directory, or by its hub name through huggingface_hub (model/storage/hub.py: fetched
when online, from the Hugging Face cache when offline), and writes a checkpoint of this project
(by default into your checkpoints, model/storage/places.py) that the app and the command-line tools
open like any other. to-hf writes a directory that
`transformers.MarianMTModel.from_pretrained` and `MarianTokenizer.from_pretrained` load,
and that translates as our model does. Neither needs `transformers`; nothing is
downloaded. Weights are read from safetensors only, never from a pickle.

Marian is the paper's architecture (post-norm, sinusoidal positions, scaled and tied
embeddings) with a few differences, which our ModelConfig carries as settings: the FFN
activation (often swish), the positional encoding's layout (sines in the first half of the
dimensions, cosines in the second), a bias on the output logits, one vocabulary
(vocab.json) shared by a source and a target sentencepiece model, and <pad> as the
decoder's start symbol. Models of other shapes are refused with what differs.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import Tensor

from model.network.config import ACTIVATIONS, ModelConfig
from model.network.layers import halves_order, sinusoid_table
from model.network.tokenizer import Tokenizer
from model.network.transformer import Transformer
from model.storage.checkpoint import CheckpointError, load_checkpoint, save_checkpoint

EMBEDDING_KEYS = ("model.shared.weight", "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight",
                  "lm_head.weight")
POSITION_KEYS = ("model.encoder.embed_positions.weight", "model.decoder.embed_positions.weight")
SPECIAL_PIECES = ("</s>", "<unk>", "<pad>")
HF_ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "swish": "swish", "silu": "swish"}
NOT_MARIAN = {   # model_type -> what differs from the paper's (and Marian's) architecture
    "t5": "T5 uses relative position biases instead of sinusoidal positions, and pre-norm RMSNorm blocks",
    "mt5": "mT5 uses relative position biases instead of sinusoidal positions, and pre-norm RMSNorm blocks",
    "bart": "BART uses learned positional embeddings (offset by 2) and a LayerNorm on the embeddings",
    "mbart": "mBART uses learned positional embeddings and pre-norm blocks with a final LayerNorm",
    "m2m_100": "M2M-100 uses pre-norm blocks with a final LayerNorm per stack",
    "nllb": "NLLB uses pre-norm blocks with a final LayerNorm per stack",
    "fsmt": "FSMT (fairseq WMT19) uses separate source and target vocabularies and learned-offset positions",
    "pegasus": "Pegasus uses pre-norm blocks with a final LayerNorm per stack",
}
# Inside one layer: our module name -> Marian's.
LAYER_NAMES = {
    "encoder": {"self_attn.w_q": "self_attn.q_proj", "self_attn.w_k": "self_attn.k_proj",
                "self_attn.w_v": "self_attn.v_proj", "self_attn.w_o": "self_attn.out_proj",
                "norm1": "self_attn_layer_norm", "feed_forward.w_1": "fc1", "feed_forward.w_2": "fc2",
                "norm2": "final_layer_norm"},
    "decoder": {"self_attn.w_q": "self_attn.q_proj", "self_attn.w_k": "self_attn.k_proj",
                "self_attn.w_v": "self_attn.v_proj", "self_attn.w_o": "self_attn.out_proj",
                "norm1": "self_attn_layer_norm", "cross_attn.w_q": "encoder_attn.q_proj",
                "cross_attn.w_k": "encoder_attn.k_proj", "cross_attn.w_v": "encoder_attn.v_proj",
                "cross_attn.w_o": "encoder_attn.out_proj", "norm2": "encoder_attn_layer_norm",
                "feed_forward.w_1": "fc1", "feed_forward.w_2": "fc2", "norm3": "final_layer_norm"},
}


class ConvertError(Exception):
    """A model that cannot be converted; the message says why (one paragraph)."""


def name_pairs(cfg: ModelConfig) -> list[tuple[str, str]]:
    """(our parameter name, Marian's) for every layer parameter."""
    pairs = []
    for stack, n in (("encoder", cfg.n_encoder_layers), ("decoder", cfg.n_decoder_layers)):
        for i in range(n):
            for ours, theirs in LAYER_NAMES[stack].items():
                for kind in ("weight", "bias"):
                    pairs.append((f"{stack}.layers.{i}.{ours}.{kind}", f"model.{stack}.layers.{i}.{theirs}.{kind}"))
    return pairs


# ---- Marian -> ours ------------------------------------------------------------------------------
def read_marian_config(directory: Path) -> dict[str, Any]:
    path = directory / "config.json"
    if not path.is_file():
        raise ConvertError(f"{path}: missing (expected a Hugging Face model directory)")
    hf = json.loads(path.read_text())
    kind = hf.get("model_type", "?")
    if kind != "marian":
        reason = NOT_MARIAN.get(kind, f"model_type {kind!r} is not a Marian model")
        raise ConvertError(f"{directory} is not Marian-shaped: {reason}. Only MarianMT (OPUS-MT) models convert.")
    problems = _marian_differences(hf)
    if problems:
        raise ConvertError(f"{directory} differs from the architecture this project models: " + "; ".join(problems))
    return hf


def _marian_differences(hf: dict[str, Any]) -> list[str]:
    out = []
    if hf.get("normalize_before"):
        out.append("pre-norm blocks (normalize_before: true); the paper and this project use post-norm")
    if hf.get("normalize_embedding") or hf.get("add_final_layer_norm"):
        out.append("an extra LayerNorm on the embeddings or after the last layer")
    if hf.get("activation_function", "gelu") not in HF_ACTIVATIONS:
        out.append(f"activation {hf.get('activation_function')!r} (supported: {', '.join(ACTIVATIONS)}, silu)")
    if hf.get("encoder_attention_heads") != hf.get("decoder_attention_heads"):
        out.append("different head counts in encoder and decoder")
    if hf.get("encoder_ffn_dim") != hf.get("decoder_ffn_dim"):
        out.append("different FFN sizes in encoder and decoder")
    if not hf.get("share_encoder_decoder_embeddings", True) or hf.get("decoder_vocab_size") not in (
            None, hf.get("vocab_size")):
        out.append("separate source and target vocabularies (share_encoder_decoder_embeddings: false)")
    return out


def marian_config(hf: dict[str, Any], vocab: dict[str, int]) -> ModelConfig:
    try:
        return ModelConfig(
            src_vocab_size=hf["vocab_size"], tgt_vocab_size=hf["vocab_size"], d_model=hf["d_model"],
            n_heads=hf["encoder_attention_heads"], n_encoder_layers=hf["encoder_layers"],
            n_decoder_layers=hf["decoder_layers"], d_ff=hf["encoder_ffn_dim"], dropout=float(hf.get("dropout", 0.1)),
            max_positions=hf.get("max_position_embeddings", 1024), tie_embeddings=True, norm_first=False,
            pad_id=hf["pad_token_id"], unk_id=vocab["<unk>"],
            bos_id=hf.get("decoder_start_token_id", hf["pad_token_id"]),
            eos_id=hf["eos_token_id"], activation=HF_ACTIVATIONS[hf.get("activation_function", "gelu")],
            pe_layout="halves", scale_embedding=bool(hf.get("scale_embedding", False)), logits_bias=True)
    except (KeyError, TypeError, ValueError) as exc:
        raise ConvertError(f"config.json does not describe a usable Marian model: {exc}") from None


def read_marian_weights(directory: Path) -> dict[str, Tensor]:
    path = directory / "model.safetensors"
    if not path.is_file():
        if (directory / "pytorch_model.bin").is_file():
            raise ConvertError(
                f"{directory} has only pytorch_model.bin, a pickle, which this project never loads. Convert it "
                "once with transformers itself, where you trust the file:\n"
                f"  python -c \"from transformers import MarianMTModel as M; "
                f"M.from_pretrained('{directory}').save_pretrained('{directory}', safe_serialization=True)\"")
        raise ConvertError(f"{path}: missing")
    try:
        return {k: v.float() for k, v in load_file(str(path)).items()}
    except (SafetensorError, OSError) as exc:
        raise ConvertError(f"{path}: cannot be read ({exc})") from None


def marian_state_dict(weights: dict[str, Tensor], cfg: ModelConfig) -> dict[str, Tensor]:
    """Marian's tensors under our names (every one of our parameters, strictly)."""
    embed = next((weights[k] for k in EMBEDDING_KEYS if k in weights), None)
    if embed is None:
        raise ConvertError(f"no token embedding in the weights (looked for {', '.join(EMBEDDING_KEYS)})")
    _check_positions(weights, cfg)
    state = {"src_embed.lut.weight": embed, "tgt_embed.lut.weight": embed, "generator.weight": embed,
             "generator.bias": weights.get("final_logits_bias", torch.zeros(1, cfg.tgt_vocab_size)).reshape(-1)}
    missing = [theirs for _, theirs in name_pairs(cfg) if theirs not in weights]
    if missing:
        raise ConvertError(f"{len(missing)} tensors missing from the weights, e.g. {missing[0]}")
    state.update({ours: weights[theirs] for ours, theirs in name_pairs(cfg)})
    return state


def _check_positions(weights: dict[str, Tensor], cfg: ModelConfig) -> None:
    """Stored position tables (older exports keep them) must be Marian's fixed sinusoids."""
    expected = sinusoid_table(cfg.max_positions, cfg.d_model, "halves")
    for key in POSITION_KEYS:
        if key in weights and not torch.allclose(weights[key][: cfg.max_positions], expected, atol=1e-4):
            raise ConvertError(f"{key} holds learned positions, not Marian's sinusoids")


def marian_tokenizers(directory: Path) -> tuple[Tokenizer, Tokenizer]:
    paths = {name: directory / name for name in ("source.spm", "target.spm", "vocab.json")}
    absent = [str(p) for p in paths.values() if not p.is_file()]
    if absent:
        raise ConvertError(f"missing tokenizer files: {', '.join(absent)}")
    vocab = json.loads(paths["vocab.json"].read_text())
    lacking = [p for p in SPECIAL_PIECES if p not in vocab]
    if lacking:
        raise ConvertError(f"{paths['vocab.json']} lacks {', '.join(lacking)}")
    return Tokenizer.load(paths["source.spm"], vocab), Tokenizer.load(paths["target.spm"], vocab)


def languages(directory: Path, src: str | None, tgt: str | None) -> tuple[str, str]:
    """--src-lang / --tgt-lang, else tokenizer_config.json's source_lang / target_lang."""
    path = directory / "tokenizer_config.json"
    tc = json.loads(path.read_text()) if path.is_file() else {}
    return src or tc.get("source_lang") or "src", tgt or tc.get("target_lang") or "tgt"


def import_marian(directory: str | Path, out: str | Path, src_lang: str | None = None,
                  tgt_lang: str | None = None) -> Path:
    """A local Marian model directory -> our checkpoint directory `out`."""
    directory = Path(directory)
    hf = read_marian_config(directory)
    src_tok, tgt_tok = marian_tokenizers(directory)
    cfg = marian_config(hf, src_tok.vocab)
    if src_tok.vocab_size != cfg.src_vocab_size:
        raise ConvertError(f"vocab.json has {src_tok.vocab_size} entries, config.json says {cfg.src_vocab_size}")
    model = Transformer(cfg)
    try:
        model.load_state_dict(marian_state_dict(read_marian_weights(directory), cfg))   # strict
    except RuntimeError as exc:
        raise ConvertError(f"the weights do not fit the configuration: {str(exc).splitlines()[0]}") from None
    src, tgt = languages(directory, src_lang, tgt_lang)
    meta = {"src_lang": src, "tgt_lang": tgt, "imported_from": str(directory.resolve()), "origin": "Marian (MarianMT)"}
    card = (f"# {Path(out).name}\n\nA Marian translation model ({src} -> {tgt}) imported from `{directory}` by "
            f"`python -m model.convert from-hf`. {model.num_parameters():,} parameters; "
            f"{cfg.n_encoder_layers}+{cfg.n_decoder_layers} layers, d_model {cfg.d_model}, {cfg.n_heads} heads, "
            f"d_ff {cfg.d_ff}, {cfg.activation} FFN, vocabulary {cfg.src_vocab_size}.\n")
    return save_checkpoint(out, model.eval(), src_tok, tgt_tok, meta=meta, extra_files={"README.md": card})


# ---- ours -> Marian ------------------------------------------------------------------------------
def exportable(cfg: ModelConfig) -> None:
    if cfg.norm_first:
        raise ConvertError("a pre-norm model has no Marian equivalent (Marian is post-norm)")
    if not cfg.tie_embeddings:
        raise ConvertError("a model with separate source and target embeddings does not fit MarianMTModel's "
                           "shared vocabulary")
    if cfg.ablations:
        raise ConvertError(f"a model built without {', '.join(cfg.ablations)} has no Marian equivalent")


def to_marian_weights(model: Transformer) -> dict[str, Tensor]:
    """Our weights under Marian's names. An interleaved-PE model is turned into the exactly
    equivalent halves-PE model by reordering the model dimension everywhere (embeddings,
    every linear map into or out of the residual stream, LayerNorms), since Marian's
    positional table is fixed to the halves layout."""
    cfg, state = model.cfg, model.state_dict()
    order = halves_order(cfg.d_model) if cfg.pe_layout == "interleaved" else torch.arange(cfg.d_model)
    out = {"model.shared.weight": state["src_embed.lut.weight"][:, order]}
    out["final_logits_bias"] = (state["generator.bias"] if cfg.logits_bias else torch.zeros(cfg.tgt_vocab_size))[None]
    for ours, theirs in name_pairs(cfg):
        out[theirs] = _reordered(ours, state[ours], order)
    return {k: v.detach().float().contiguous().clone() for k, v in out.items()}


def _reordered(name: str, t: Tensor, order: Tensor) -> Tensor:
    module, kind = name.rsplit(".", 1)
    if ".norm" in name or module.endswith(("w_o", "w_2")):           # writes into the residual stream
        return t[order]
    if module.endswith(("w_q", "w_k", "w_v", "w_1")) and kind == "weight":   # reads from it
        return t[:, order]
    return t


def marian_hf_config(cfg: ModelConfig) -> dict[str, Any]:
    return {
        "architectures": ["MarianMTModel"], "model_type": "marian", "vocab_size": cfg.tgt_vocab_size,
        "decoder_vocab_size": cfg.tgt_vocab_size, "d_model": cfg.d_model, "encoder_layers": cfg.n_encoder_layers,
        "decoder_layers": cfg.n_decoder_layers, "encoder_attention_heads": cfg.n_heads,
        "decoder_attention_heads": cfg.n_heads, "encoder_ffn_dim": cfg.d_ff, "decoder_ffn_dim": cfg.d_ff,
        "activation_function": cfg.activation, "max_position_embeddings": cfg.max_positions,
        "scale_embedding": cfg.scale_embedding, "share_encoder_decoder_embeddings": True,
        "tie_word_embeddings": True, "normalize_before": False, "dropout": cfg.dropout, "attention_dropout": 0.0,
        "activation_dropout": 0.0, "pad_token_id": cfg.pad_id, "eos_token_id": cfg.eos_id,
        "decoder_start_token_id": cfg.bos_id, "forced_eos_token_id": None, "is_encoder_decoder": True,
    }


def export_marian(checkpoint: str | Path, out: str | Path) -> Path:
    """Our checkpoint directory -> a MarianMT directory `out`."""
    try:
        ckpt = load_checkpoint(checkpoint)
    except CheckpointError as exc:
        raise ConvertError(str(exc)) from None
    cfg = ckpt.config
    exportable(cfg)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    save_file(to_marian_weights(ckpt.model), str(out / "model.safetensors"), metadata={"format": "pt"})
    (out / "config.json").write_text(json.dumps(marian_hf_config(cfg), indent=2) + "\n")
    banned = sorted({cfg.pad_id, cfg.bos_id})             # never generated by our decoding either
    generation = {"decoder_start_token_id": cfg.bos_id, "eos_token_id": cfg.eos_id, "pad_token_id": cfg.pad_id,
                  "bad_words_ids": [[i] for i in banned], "num_beams": 4, "max_length": cfg.max_positions}
    (out / "generation_config.json").write_text(json.dumps(generation, indent=2) + "\n")
    _write_marian_tokenizer(ckpt, out)
    return out


def _write_marian_tokenizer(ckpt, out: Path) -> None:
    src, tgt = ckpt.src_tokenizer, ckpt.tgt_tokenizer
    (out / "source.spm").write_bytes(src.proto)
    (out / "target.spm").write_bytes(tgt.proto)
    vocab = src.vocab if src.vocab is not None else {p: i for i, p in enumerate(src.pieces(range(src.vocab_size)))}
    (out / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False, indent=1) + "\n")
    (out / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "MarianTokenizer", "source_lang": ckpt.src_lang, "target_lang": ckpt.tgt_lang,
        "model_max_length": ckpt.config.max_positions, "separate_vocabs": False,
        "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"}, indent=2) + "\n")
