"""Issue 21 §2: every shortcut and wrong answer the reviewers found accepted, plus our own, run against its check
by tests/test_exercises.py (each must be refused, with part of the message given here).

``REFUSALS[lesson][check]`` is a tuple of ``(bullet, answer, part of the message)``; ``bullet`` names the item of
the issue it reproduces (``BULLETS``), so a test can see that every item is covered. The checks' extra arguments
(a model, a tokenizer) come from the lesson's entry in tests/exercise_answers_*.py.
"""

from __future__ import annotations

import exercise_answers_00_07 as a07
import exercise_answers_04 as a04
import exercise_answers_05 as a05
import torch
import torch.nn.functional as F

import course_utils
import course_utils.multihead
import course_utils.speed

# The items of issue 21 §2, in its words (each must be reproduced at least once below).
BULLETS = ("another route to the layer", "state_dict / _parameters", "list comprehension", "loop over unbind",
           "loop in map", "loop in a helper function", "while loop", "instance_norm / batch_norm", "merge_heads",
           "logsumexp", "dummy backward + closed form", "patience against the previous loss", "85/7.5/7.5 split",
           "selection ignoring p", "unused generator", "dense d x d rotation", "table of the check's inputs",
           "global h instead of n_heads", "hard-coded pad id", "ignored generator argument", "in-place change",
           "gradient test skipped without grad", "another alias of the library function")

_MHA = course_utils.MultiHeadAttention(8, 2)
_LAYER = course_utils.DecoderLayer(8, 4, 16, bias=False, norm="rms")
_GPT = course_utils.GPT(10, max_len=8, n_layers=1, n_heads=4, d_model=64, d_ff=256)    # "the trained model"
H = 2                                            # the notebook's global h (lesson 04 uses 2 heads in its demo)
PAD = 0                                          # the notebook's pad id


def _count(module) -> int:
    return sum(p.numel() for p in module.parameters())


# --- lesson 00, 07, 11: counting parameters by another route ---------------------------------------------------

def _mha_through_linear(d, h):                   # 4d² + 4d, but from a built nn.Linear
    return _count(torch.nn.Linear(d, 4 * d))


def _block_by_state_dict(d, f):
    block = course_utils.GPT(10, max_len=8, n_layers=1, n_heads=4, d_model=d, d_ff=f).blocks.layers[0]
    return sum(t.numel() for t in block.state_dict().values())


def _block_by_private_parameters(d, f):
    block = course_utils.GPT(10, max_len=8, n_layers=1, n_heads=4, d_model=d, d_ff=f).blocks.layers[0]
    return sum(p.numel() for m in block.modules() for p in m._parameters.values() if p is not None)


def _block_by_encoder_layer(d, f):               # a GPT block is an encoder layer with a causal mask
    return _count(course_utils.EncoderLayer(d, 4, f))


def _trained_block_by_children(d, f):            # the trained model's block, whatever d and d_ff are asked
    return sum(p.numel() for c in _GPT.blocks.layers[0].children() for p in c._parameters.values())


# --- lesson 02: the dense d × d rotation ----------------------------------------------------------------------

def _dense_rotation(x, k):
    d = x.shape[-1]
    omega = 1 / 10000 ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    c, s = torch.cos(k * omega).to(x.dtype), torch.sin(k * omega).to(x.dtype)
    rot = torch.zeros(d, d, dtype=x.dtype)                 # O(d²) memory and work: what the exercise rules out
    rot[0::2, 0::2] = torch.diag(c)
    rot[0::2, 1::2] = torch.diag(s)
    rot[1::2, 0::2] = torch.diag(-s)
    rot[1::2, 1::2] = torch.diag(c)
    return x @ rot.T


# --- lesson 03, 05, 07, 10: loops in disguise, hard-coded pad ids --------------------------------------------

def _jacobian_by_comprehension(a):
    return torch.stack([torch.diag(row) - torch.outer(row, row) for row in a.reshape(-1, a.shape[-1])]).reshape(
        *a.shape, a.shape[-1])


def _sliding_by_while(t, window):
    rows, i = [], 0
    j = torch.arange(t)
    while i < t:
        rows.append((j <= i) & (j > i - window))
        i += 1
    return torch.stack(rows)


def _row_mask(row, pad_id, t):
    return ((row != pad_id).unsqueeze(0) & torch.tril(torch.ones(t, t, dtype=torch.bool))) | torch.eye(
        t, dtype=torch.bool)


def _left_padded_by_helper(ids, pad_id):         # the loop lives in a helper the answer calls
    return _stack_rows(ids, pad_id).unsqueeze(1)


def _stack_rows(ids, pad_id):
    return torch.stack([_row_mask(r, pad_id, ids.shape[1]) for r in ids])


def _left_padded_hard_pad(ids, pad_id):
    t = ids.shape[1]
    visible = (ids != PAD)[:, None, None, :] & torch.tril(torch.ones(t, t, dtype=torch.bool))
    return visible | torch.eye(t, dtype=torch.bool)


def _reverse_hard_pad(src, pad_id):
    lengths = (src != PAD).sum(-1, keepdim=True)
    positions = torch.arange(src.shape[1])
    index = (lengths - 1 - positions).clamp(min=0)
    return torch.gather(src, 1, index).masked_fill(positions >= lengths, PAD)


# --- lesson 04: the notebook's h, the library's merge -----------------------------------------------------------

def _split_global_h(x, n_heads):
    b, t, d = x.shape
    return x.view(b, t, H, d // H).transpose(1, 2)


def _split_by_library_method(x, n_heads):        # the unbound method, reached through the class
    layer = object.__new__(course_utils.multihead.MultiHeadAttention)
    layer.n_heads, layer.d_k, layer.d_model = n_heads, x.shape[-1] // n_heads, x.shape[-1]
    return course_utils.multihead.MultiHeadAttention.split_heads(layer, x)


def _forward_global_h(x, mha):
    b, t, d = x.shape
    q, k, v = (z.view(b, t, H, d // H).transpose(1, 2) for z in mha.qkv_proj(x).split(d, dim=-1))
    out = torch.softmax(q @ k.transpose(-2, -1) / (d // H) ** 0.5, -1) @ v
    return mha.out_proj(out.transpose(1, 2).reshape(b, t, d))


# --- lesson 06: library normalisation and dropout by other names ------------------------------------------------

def _layer_norm_by_torch_alias(x, gamma, beta, eps):
    return torch.layer_norm(x, x.shape[-2:], gamma, beta, eps)


def _instance_norm(x, gamma, beta, eps):
    return F.instance_norm(x.reshape(x.shape[0], 1, -1), eps=eps).reshape(x.shape) * gamma + beta


def _batch_norm(x, gamma, beta, eps):
    flat = x.reshape(x.shape[0], -1).T
    return F.batch_norm(flat, None, None, training=True, eps=eps).T.reshape(x.shape) * gamma + beta


def _dropout_by_torch_alias(x, p, training):
    return torch.dropout(x, p, training)


# --- lesson 08: logsumexp, a detached answer, the dummy backward ---------------------------------------------------

def _bce(z, y):
    m = torch.clamp(z, min=0)
    return m + torch.log(torch.exp(-m) + torch.exp(z - m)) - y * z


def _bce_by_logsumexp(z, y):
    return torch.logsumexp(torch.stack([torch.zeros_like(z), z]), 0) - y * z


def _bce_detached(z, y):                         # right values, but no gradient reaches z
    return _bce(z, y).detach()


def _bce_by_torch_alias(z, y):
    return torch.binary_cross_entropy_with_logits(z, y, None, None, 0)


def _soft_ce_detached(logits, q):
    with torch.no_grad():
        return -(q * (logits - torch.logsumexp(logits, -1, keepdim=True))).sum(-1).mean()


def _dummy_backward_then_formula(eps, n_classes):
    torch.zeros(1, requires_grad=True).sum().backward()
    return 1 - eps + eps / n_classes


def _many_dummy_backwards_then_formula(eps, n_classes):
    for _ in range(20):
        torch.ones(1, requires_grad=True).sum().backward()
    return 1 - eps + eps / n_classes


# --- lesson 09: patience against the previous loss ------------------------------------------------------------------

def _patience_against_previous(dev_losses, patience):
    best, waited = 0, 0
    for i in range(1, len(dev_losses)):
        if dev_losses[i] < dev_losses[best]:
            best = i
        if dev_losses[i] < dev_losses[i - 1]:
            waited = 0
        else:
            waited += 1
            if waited == patience:
                return i, best
    return len(dev_losses) - 1, best


# --- lesson 12: the 80/10/10 rule bent, p ignored, the generator ignored --------------------------------------------

def _bert_mask_with(ids, mask_id, vocab_size, special_ids, p, generator, *, split=(0.8, 0.1), rate=None,
                    use_generator=True):
    g = generator if use_generator else None
    special = torch.tensor(list(special_ids))
    selected = (torch.rand(ids.shape, generator=g) < (p if rate is None else rate)) & ~torch.isin(ids, special)
    u = torch.rand(ids.shape, generator=g)
    ordinary = torch.tensor([i for i in range(vocab_size) if i not in special_ids])
    random_ids = ordinary[torch.randint(len(ordinary), ids.shape, generator=g)]
    inputs = torch.where(selected & (u < split[0]), mask_id, ids)
    inputs = torch.where(selected & (u >= split[0]) & (u < split[0] + split[1]), random_ids, inputs)
    return inputs, torch.where(selected, ids, -100)


def _bert_85_75_75(ids, mask_id, vocab_size, special_ids, p, generator):
    return _bert_mask_with(ids, mask_id, vocab_size, special_ids, p, generator, split=(0.85, 0.075))


def _bert_rate_ignores_p(ids, mask_id, vocab_size, special_ids, p, generator):
    return _bert_mask_with(ids, mask_id, vocab_size, special_ids, p, generator, rate=0.17)


def _bert_global_rng(ids, mask_id, vocab_size, special_ids, p, generator):
    return _bert_mask_with(ids, mask_id, vocab_size, special_ids, p, generator, use_generator=False)


def _bert_own_generator(ids, mask_id, vocab_size, special_ids, p, generator):   # the argument is never used
    return _bert_mask_with(ids, mask_id, vocab_size, special_ids, p, torch.Generator().manual_seed(0))


def _whole_word_global_rng(ids, p, space_id, special_ids, generator):
    in_word = ~torch.isin(ids, torch.tensor([space_id, *special_ids]))
    starts = in_word & ~F.pad(in_word, (1, 0))[:, :-1]
    word = starts.cumsum(dim=1)
    chosen = torch.rand(ids.size(0), ids.size(1) + 1) < p                      # the global RNG, not generator
    return in_word & chosen.gather(1, word)


# --- lesson 13: a detached loss ------------------------------------------------------------------------------------

def _symmetric_detached(a, b, scale):
    logits = scale * a @ b.T
    one_way = (torch.logsumexp(logits, 1) - logits.diagonal()).mean()
    other_way = (torch.logsumexp(logits, 0) - logits.diagonal()).mean()
    return ((one_way + other_way) / 2).detach()


REFUSALS = {
    "l00_welcome": {
        "check_mha_parameter_count": (
            ("another route to the layer", _mha_through_linear, "the formula"),
            ("another route to the layer", lambda d, h: _count(type(_MHA)(d, h)), "the formula"),
        ),
        "check_attention_memory": (
            ("another alias of the library function", lambda b, h, t: course_utils.speed.attention_weights_bytes(
                b, h, t), "the course's answer"),),
    },
    "l02_positional": {
        "check_rotate": (("dense d x d rotation", _dense_rotation, "d × d"),),
    },
    "l03_attention": {
        "check_softmax_jacobian": (("list comprehension", _jacobian_by_comprehension, "loop"),),
    },
    "l04_multihead": {
        "check_split_heads": (("global h instead of n_heads", _split_global_h, "n_heads="),
                              ("another alias of the library function", _split_by_library_method, "library")),
        "check_mha_forward": (("global h instead of n_heads", _forward_global_h, "n_heads="),
                              ("merge_heads", a04._forward_merged_by_the_library, "merge_heads")),
    },
    "l05_masking": {
        "check_left_padded_mask": (("loop in a helper function", _left_padded_by_helper, "Python loops"),
                                   ("hard-coded pad id", _left_padded_hard_pad, "pad"),
                                   ("loop over unbind", a05._left_padded_by_unbind, "Python loops"),
                                   ("in-place change", a05._left_padded_in_place, "in place")),
        "check_sliding_window_mask": (("while loop", _sliding_by_while, "Python loops"),
                                      ("list comprehension", a05._sliding_by_comprehension, "Python loops")),
    },
    "l06_ffn_norm": {
        "check_layer_norm_2d": (("another alias of the library function", _layer_norm_by_torch_alias, "library"),
                                ("instance_norm / batch_norm", _instance_norm, "instance_norm"),
                                ("instance_norm / batch_norm", _batch_norm, "batch_norm")),
        "check_dropout": (("another alias of the library function", _dropout_by_torch_alias, "library"),),
    },
    "l07_encoder_decoder": {
        "check_lean_decoder_layer_params": (
            ("another route to the layer",
             lambda d, f: _count(type(_LAYER)(d, 4, f, bias=False, norm="rms")), "built a DecoderLayer"),),
        "check_reverse_tokens": (("hard-coded pad id", _reverse_hard_pad, "pad"),
                                 ("loop in map", a07._reverse_by_map, "loops over the batch"),
                                 ("in-place change", a07._reverse_in_place, "in place")),
    },
    "l08_output_loss": {
        "check_binary_cross_entropy": (("gradient test skipped without grad", _bce_detached, "gradient"),
                                       ("another alias of the library function", _bce_by_torch_alias, "trick"),
                                       ("logsumexp", _bce_by_logsumexp, "logsumexp")),
        "check_soft_cross_entropy": (("gradient test skipped without grad", _soft_ce_detached, "gradient"),),
        "check_smoothed_confidence": (
            ("dummy backward + closed form", _dummy_backward_then_formula, "without training anything"),
            ("dummy backward + closed form", _many_dummy_backwards_then_formula, "without training anything")),
    },
    "l09_classifier": {
        "check_early_stop": (("patience against the previous loss", _patience_against_previous, "expected"),),
    },
    "l11_gpt": {
        "check_gpt_block_params": (
            ("state_dict / _parameters", _block_by_state_dict, "counted the parameters"),
            ("state_dict / _parameters", _block_by_private_parameters, "counted the parameters"),
            ("another route to the layer", _block_by_encoder_layer, "counted the parameters"),
            ("another route to the layer", _trained_block_by_children, "counted the parameters")),
    },
    "l12_masked_lm": {
        "check_bert_masking": (("85/7.5/7.5 split", _bert_85_75_75, "expected about"),
                               ("selection ignoring p", _bert_rate_ignores_p, "expected p ="),
                               ("unused generator", _bert_own_generator, "generator"),
                               ("ignored generator argument", _bert_global_rng, "generator")),
        "check_whole_word_masking": (("ignored generator argument", _whole_word_global_rng, "generator"),),
    },
    "l13_pretrained": {
        "check_symmetric_loss": (("gradient test skipped without grad", _symmetric_detached, "gradient"),),
    },
}


# --- issue 39 §1, lessons 08-14: one class at a time -----------------------------------------------------------

BULLETS += ("library function under another name", "ties and off-by-ones")


def _min_p_by_transformers(logits, p_base):      # an installed package's ready-made min-p filter
    from transformers.generation.logits_process import MinPLogitsWarper
    flat = logits.reshape(-1, logits.shape[-1]).float()
    return MinPLogitsWarper(p_base)(None, flat).reshape(logits.shape)


def _unigram_from_the_labels(train_ids, labels, special_ids):   # the most frequent *label*: a peek at the answers
    scored = labels[labels != -100]
    return (scored == torch.mode(scored).values).float().mean()


REFUSALS.setdefault("l11_gpt", {}).setdefault("check_min_p", ())
REFUSALS["l11_gpt"]["check_min_p"] += (("library function under another name", _min_p_by_transformers,
                                        "MinPLogitsWarper"),)
REFUSALS.setdefault("l12_masked_lm", {}).setdefault("check_unigram_baseline", ())
REFUSALS["l12_masked_lm"]["check_unigram_baseline"] += (("ties and off-by-ones", _unigram_from_the_labels,
                                                          "most frequent *label*"),)


def _bce_by_cross_entropy_on_two_logits(z, y):   # the two-class softmax loss over (0, z): the trick done for you
    return F.cross_entropy(torch.stack([torch.zeros_like(z), z], -1), y.long(), reduction="none")


def _bce_by_log_softmax_method(z, y):
    return -(torch.stack([torch.zeros_like(z), z], -1).log_softmax(-1) * torch.stack([1 - y, y], -1)).sum(-1)


REFUSALS.setdefault("l08_output_loss", {}).setdefault("check_binary_cross_entropy", ())
REFUSALS["l08_output_loss"]["check_binary_cross_entropy"] += (
    ("library function under another name", _bce_by_cross_entropy_on_two_logits, "cross_entropy"),
    ("library function under another name", _bce_by_log_softmax_method, "log_softmax"))


def _early_stop_on_ties(dev_losses, patience):   # "<=": a tie with the best resets the patience
    best, waited = 0, 0
    for i, loss in enumerate(dev_losses):
        if loss <= dev_losses[best]:
            best, waited = i, 0
        else:
            waited += 1
            if waited == patience:
                return i, best
    return len(dev_losses) - 1, best


REFUSALS.setdefault("l09_classifier", {}).setdefault("check_early_stop", ())
REFUSALS["l09_classifier"]["check_early_stop"] += (("ties and off-by-ones", _early_stop_on_ties, "<= instead of <"),)


def _symmetric_by_course_cross_entropy(a, b, scale):   # the course's cross-entropy: the forbidden one, renamed
    logits = scale * a @ b.T
    target = torch.arange(len(a))
    return (course_utils.losses.cross_entropy(logits, target) + course_utils.losses.cross_entropy(logits.T, target)) / 2


REFUSALS.setdefault("l13_pretrained", {}).setdefault("check_symmetric_loss", ())
REFUSALS["l13_pretrained"]["check_symmetric_loss"] += (("library function under another name",
                                                         _symmetric_by_course_cross_entropy, "You called"),)


def _wordpiece_by_the_tokenizers_package(word, vocab):   # the Rust WordPiece of `tokenizers`, imported inside
    from tokenizers import Tokenizer
    from tokenizers.models import WordPiece
    tok = Tokenizer(WordPiece({piece: i for i, piece in enumerate(sorted(vocab))}, unk_token="[UNK]"))
    return tok.encode(word).tokens


REFUSALS.setdefault("l13_pretrained", {}).setdefault("check_wordpiece", ())
REFUSALS["l13_pretrained"]["check_wordpiece"] += (("library function under another name",
                                                    _wordpiece_by_the_tokenizers_package, "You called"),)


BULLETS += ("measuring instead of deriving", "misleading verdict")


def _flops_by_counter(b, t_q, t_k, d):            # counts a real module's FLOPs instead of deriving them
    from torch.utils.flop_counter import FlopCounterMode
    mha = torch.nn.MultiheadAttention(d, 1, batch_first=True, device="meta")
    q, kv = torch.empty(b, t_q, d, device="meta"), torch.empty(b, t_k, d, device="meta")
    with FlopCounterMode(display=False) as counter:
        mha(q, kv, kv, need_weights=False)
    return counter.get_total_flops()


def _flops_all_projections_at_t_q(b, t_q, t_k, d):   # the usual slip: Q, K, V, O all over the T_q positions
    return 8 * b * t_q * d * d + 4 * b * t_q * t_k * d


REFUSALS.setdefault("l14_fast", {}).setdefault("check_cross_attention_flops", ())
REFUSALS["l14_fast"]["check_cross_attention_flops"] += (
    ("measuring instead of deriving", _flops_by_counter, "You measured"),
    ("misleading verdict", _flops_all_projections_at_t_q, "K and V are projections of the encoder output"))
