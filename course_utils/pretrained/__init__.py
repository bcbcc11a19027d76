"""Real pretrained weights in the course's encoder (lesson 13): a BERT layer *is* the post-norm GELU encoder layer, so
all-MiniLM-L6-v2 loads strictly; ``load_minilm()`` finds it (pip package, folder, HF cache), checks ``known_files``."""

from .bert import BertConfig, BertEmbeddings, BertEncoder, BertPooler, SentenceClassifier, SentenceEncoder
from .known_files import GPT2, KNOWN_MODELS, MINILM, KnownFile, KnownModel, UnverifiedWeightsWarning, check_model_files
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
