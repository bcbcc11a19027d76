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
import exercise_answers_15 as a15
import torch
import torch.nn.functional as F

import course_utils
import course_utils.multihead
import course_utils.speed


def _best_pair_by_chunk_counts(table):          # lesson 15: the library counts the chunks' pairs for it
    from course_utils.bpe import chunk_counts, train_merges

    text = "".join(bytes(c).decode("utf-8") * n for c, n in table.items())
    return train_merges(chunk_counts(text), 1, min_frequency=1)[0]


def _stream_by_join(ids, tok):                   # lesson 15: the tokenizer's own join, on the whole prefix
    out, shown = [], ""
    for k in range(1, len(ids) + 1):
        text = tok._join(tok.ids_to_tokens(ids[:k])).rstrip("\ufffd")
        out.append(text[len(shown):])
        shown = text
    return out


# The items of issue 21 §2, in its words (each must be reproduced at least once below).
BULLETS = ("another route to the layer", "state_dict / _parameters", "list comprehension", "loop over unbind",
           "loop in map", "loop in a helper function", "while loop", "instance_norm / batch_norm", "merge_heads",
           "logsumexp", "dummy backward + closed form", "patience against the previous loss", "85/7.5/7.5 split",
           "selection ignoring p", "unused generator", "dense d x d rotation", "table of the check's inputs",
           "global h instead of n_heads", "hard-coded pad id", "ignored generator argument", "in-place change",
           "gradient test skipped without grad", "another alias of the library function",
           "LoRA B initialised non-zero", "LoRA base not frozen", "LoRA scale r / alpha", "LoRA A and B both zero",
           "merge changes the given layer")

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

def _grouped_global_h(x, w_q, w_k, w_v, n_heads):     # the notebook's h, whatever the layer's n_heads
    return a04._grouped(x, w_q, w_k, w_v, H)


def _grouped_by_library_method(x, w_q, w_k, w_v, n_heads):    # the unbound split, reached through the class
    b, t, d = x.shape
    layer = object.__new__(course_utils.multihead.MultiHeadAttention)
    layer.n_heads, layer.d_k, layer.d_model = n_heads, d // n_heads, d
    split = course_utils.multihead.MultiHeadAttention.split_heads
    q = split(layer, x @ w_q)
    k, v = (a04._split(x @ w, w.shape[1] // layer.d_k).repeat_interleave(n_heads * layer.d_k // w.shape[1], 1)
            for w in (w_k, w_v))
    return a04._merge(torch.softmax(q @ k.transpose(-2, -1) / layer.d_k ** 0.5, -1) @ v)


def _averaged_global_h(x, mha):
    b, t, d = x.shape
    q, k, _ = F.linear(x, mha.in_proj_weight, mha.in_proj_bias).chunk(3, dim=-1)
    q, k = a04._split(q, H), a04._split(k, H)
    return torch.softmax(q @ k.transpose(-2, -1) / (d // H) ** 0.5, -1).mean(1)


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


def _soft_target_grad_by_vjp(logits, q):         # autograd through torch.func, under another name
    from torch.func import vjp
    _, pull = vjp(lambda z: F.cross_entropy(z, q), logits)
    return pull(torch.tensor(1.0))[0]


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


# --- lesson 12: shares derived wrong, or measured instead of derived; whole words at a rate that ignores p ---------
# (Exercise 1 was a retyped 80/10/10 function with a statistical check; it is now a derivation of the shares, so
# the 85/7.5/7.5 split is refused there as a split that is off, and "selection ignoring p" moved to exercise 2.)

def _shares_85_75_75(p_mask, p_random, two_draws):     # the old bypass's split: 5 points moved from the other two
    return p_mask + 0.05, p_random - 0.025, 1 - p_mask - p_random - 0.025


def _shares_by_mask_tokens(p_mask, p_random, two_draws):   # measured with the library (approximately), not derived
    from course_utils import mlm

    ids = torch.randint(5, 40, (400, 100), generator=torch.Generator().manual_seed(0))
    inputs, labels = mlm.mask_tokens(ids, 40, 4, [0, 1, 2, 3, 4], p=1.0, generator=torch.Generator().manual_seed(1))
    n = ids.numel()
    masked = float((inputs == 4).sum()) / n
    unchanged = float((inputs == ids).sum()) / n
    return masked, 1 - masked - unchanged, unchanged


def _whole_word_own_generator(ids, p, space_id, special_ids, generator):   # the argument is never used
    return _whole_word_with(ids, p, space_id, special_ids, torch.Generator().manual_seed(0))


def _whole_word_rate_ignores_p(ids, p, space_id, special_ids, generator):  # one fixed rate below 1, whatever p is
    return _whole_word_with(ids, 0.17 if p < 1 else 1.0, space_id, special_ids, generator)


def _whole_word_with(ids, p, space_id, special_ids, generator):
    in_word = ~torch.isin(ids, torch.tensor([space_id, *special_ids]))
    starts = in_word & ~F.pad(in_word, (1, 0))[:, :-1]
    word = starts.cumsum(dim=1)
    chosen = torch.rand(ids.size(0), ids.size(1) + 1, generator=generator) < p
    return in_word & chosen.gather(1, word)


def _whole_word_global_rng(ids, p, space_id, special_ids, generator):
    return _whole_word_with(ids, p, space_id, special_ids, None)                # the global RNG, not generator



# --- lesson 17: LoRA layers with the classic bugs; a merge that changes its input -------------------------------

class _LoRABase(torch.nn.Module):
    def __init__(self, base, r, alpha, b_init=torch.zeros, a_scale=1.0, freeze=True, scale=None):
        super().__init__()
        self.base = base.requires_grad_(not freeze)
        self.scale = alpha / r if scale is None else scale(r, alpha)
        self.A = torch.nn.Parameter(a_scale * torch.randn(r, base.in_features) / base.in_features ** 0.5)
        self.B = torch.nn.Parameter(b_init(base.out_features, r))

    def forward(self, x):
        return self.base(x) + self.scale * (x @ self.A.T) @ self.B.T


def _lora_b_random(base, r, alpha):
    return _LoRABase(base, r, alpha, b_init=lambda o, r: 0.01 * torch.randn(o, r))


def _lora_unfrozen(base, r, alpha):
    return _LoRABase(base, r, alpha, freeze=False)


def _lora_r_over_alpha(base, r, alpha):
    return _LoRABase(base, r, alpha, scale=lambda r, alpha: r / alpha)


def _lora_both_zero(base, r, alpha):
    return _LoRABase(base, r, alpha, a_scale=0.0)


def _merge_in_place(layer):
    with torch.no_grad():
        layer.base.weight += layer.scale * layer.lora_B @ layer.lora_A
    return layer.base


# --- lesson 13: a detached loss ------------------------------------------------------------------------------------

def _symmetric_detached(a, b, scale):
    logits = scale * a @ b.T
    one_way = (torch.logsumexp(logits, 1) - logits.diagonal()).mean()
    other_way = (torch.logsumexp(logits, 0) - logits.diagonal()).mean()
    return ((one_way + other_way) / 2).detach()


# --- lesson 16: Hugging Face's helpers under other names, an input scaled in place, a counted module -------------

def _rope_by_hf_rotate_half(x, positions, base=10000.0):
    from transformers.models.llama.modeling_llama import rotate_half

    d_k = x.shape[-1]
    angle = positions[:, None, :, None].to(x.dtype) * base ** (-torch.arange(0, d_k, 2, dtype=x.dtype) / d_k)
    return x * torch.cat([angle.cos()] * 2, -1) + rotate_half(x) * torch.cat([angle.sin()] * 2, -1)


def _rope_by_hf_module(x, positions, base=10000.0):
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    d_k = x.shape[-1]
    rotary = LlamaRotaryEmbedding(LlamaConfig(hidden_size=2 * d_k, num_attention_heads=2,
                                              rope_parameters={"rope_type": "default", "rope_theta": base}))
    cos, sin = (t[:, None].to(x.dtype) for t in rotary(x, positions))                  # (B, 1, T, d_k)
    return x * cos + torch.cat([-x[..., d_k // 2:], x[..., : d_k // 2]], -1) * sin


def _gqa_by_repeat_kv(q, k, v):
    from transformers.models.llama.modeling_llama import repeat_kv

    group = q.size(1) // k.size(1)
    k, v = repeat_kv(k, group), repeat_kv(v, group)
    T, T_k = q.size(2), k.size(2)
    keep = torch.ones(T, T_k, dtype=torch.bool).tril(T_k - T)
    return (q @ k.transpose(-2, -1) / q.size(-1) ** 0.5).masked_fill(~keep, float("-inf")).softmax(-1) @ v


def _gqa_scaling_q_in_place(q, k, v):            # divides the caller's q by √d_k
    q.div_(q.size(-1) ** 0.5)
    group = q.size(1) // k.size(1)
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    T, T_k = q.size(2), k.size(2)
    keep = torch.ones(T, T_k, dtype=torch.bool).tril(T_k - T)
    return (q @ k.transpose(-2, -1)).masked_fill(~keep, float("-inf")).softmax(-1) @ v


def _llama_block_by_linears(d, h, h_kv, f):      # the maps built as nn.Linear, then counted
    d_kv = h_kv * (d // h)
    with torch.device("meta"):                   # shapes only: a 4096-wide block allocates nothing
        maps = [torch.nn.Linear(d, d, bias=False), torch.nn.Linear(d, d_kv, bias=False),
                torch.nn.Linear(d, d_kv, bias=False), torch.nn.Linear(d, d, bias=False)]
    return sum(m.weight.numel() for m in maps) + 3 * d * f + 2 * d


def _llama_block_by_state_dict(d, h, h_kv, f):
    d_kv = h_kv * (d // h)
    with torch.device("meta"):
        block = torch.nn.ModuleDict({"q": torch.nn.Linear(d, d, bias=False), "k": torch.nn.Linear(d, d_kv, bias=False),
                                     "v": torch.nn.Linear(d, d_kv, bias=False), "o": torch.nn.Linear(d, d, bias=False),
                                     "gate": torch.nn.Linear(d, f, bias=False), "up": torch.nn.Linear(d, f, bias=False),
                                     "down": torch.nn.Linear(f, d, bias=False)})
    return sum(t.numel() for t in block.state_dict().values()) + 2 * d


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
        "check_grouped_heads": (("global h instead of n_heads", _grouped_global_h, "n_heads="),
                                ("another alias of the library function", _grouped_by_library_method, "library"),
                                ("merge_heads", a04._grouped_merged_by_the_library, "merge_heads")),
        "check_averaged_weights": (("global h instead of n_heads", _averaged_global_h, "num_heads="),),
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
        "check_soft_target_gradient": (("another alias of the library function", _soft_target_grad_by_vjp,
                                        "asked autograd"),),
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
        "check_corruption_shares": (("85/7.5/7.5 split", _shares_85_75_75, "expected"),
                                    ("measuring instead of deriving", _shares_by_mask_tokens, "simulation")),
        "check_whole_word_masking": (("ignored generator argument", _whole_word_global_rng, "generator"),
                                     ("unused generator", _whole_word_own_generator, "generator"),
                                     ("selection ignoring p", _whole_word_rate_ignores_p, "expected p =")),
    },
    "l13_pretrained": {
        "check_symmetric_loss": (("gradient test skipped without grad", _symmetric_detached, "gradient"),),
    },
    "l17_fine_tuning": {
        "check_lora_layer": (("LoRA B initialised non-zero", _lora_b_random, "B does not start at zero"),
                             ("LoRA base not frozen", _lora_unfrozen, "freeze it"),
                             ("LoRA scale r / alpha", _lora_r_over_alpha, "not r / α"),
                             ("LoRA A and B both zero", _lora_both_zero, "A is zero too")),
        "check_merge": (("merge changes the given layer", _merge_in_place, "changed the LoRA layer"),),
    },
    "l15_bpe": {
        "check_best_pair": (("another alias of the library function", _best_pair_by_chunk_counts, "the course's BPE"),),
        "check_encode_chunk": (("another alias of the library function", a15._encode_by_tokenizer,
                                "the course's BPE"),),
        "check_stream_decode": (("another alias of the library function", _stream_by_join, "O(n²)"),),
    },
    "l16_modern_decoder": {
        "check_rope_at": (("another alias of the library function", _rope_by_hf_rotate_half, "rotation yourself"),
                          ("another alias of the library function", _rope_by_hf_module, "rotation yourself")),
        "check_gqa_attention": (("another alias of the library function", _gqa_by_repeat_kv, "do the grouping"),
                                ("in-place change", _gqa_scaling_q_in_place, "in place")),
        "check_llama_block_params": (("another route to the layer", _llama_block_by_linears, "counted the parameters"),
                                     ("state_dict / _parameters", _llama_block_by_state_dict,
                                      "counted the parameters")),
    },
}


# --- issue 39 §1, lessons 00-07: one class at a time -----------------------------------------------------------

import itertools  # noqa: E402

from course_lab.lessons import l02_positional as l02  # noqa: E402

BULLETS += ("autograd through another door", "library function under another name", "measuring instead of deriving",
            "loop the detector missed", "gradients silenced", "misleading verdict")


def _embedding_grad_by_jacfwd(ids, grad_out, vocab_size):        # forward mode: the Jacobian of the lookup
    jac = torch.func.jacfwd(lambda e: e[ids])(torch.zeros(vocab_size, grad_out.shape[-1]))   # (..., C, |V|, C)
    return torch.einsum("...c,...cvd->vd", grad_out, jac)


def _embedding_grad_by_vmapped_jvp(ids, grad_out, vocab_size):   # one jvp per basis direction, under vmap
    c = grad_out.shape[-1]
    basis = torch.eye(vocab_size * c).reshape(-1, vocab_size, c)

    def along(direction):
        return (torch.func.jvp(lambda e: e[ids], (torch.zeros(vocab_size, c),), (direction,))[1] * grad_out).sum()
    return torch.func.vmap(along)(basis).reshape(vocab_size, c)


def _jacobian_by_vmapped_jacfwd(a):
    rows = a.reshape(-1, a.shape[-1]).log()
    return torch.func.vmap(torch.func.jacfwd(lambda s: torch.softmax(s, -1)))(rows).reshape(*a.shape, a.shape[-1])


def _jacobian_by_vmapped_jvp(a):
    s, eye = a.log(), torch.eye(a.shape[-1], dtype=a.dtype)

    def column(v):
        return torch.func.jvp(lambda z: torch.softmax(z, -1), (s,), (v.expand_as(s),))[1]
    return torch.func.vmap(column, out_dims=-1)(eye)


def _jacobian_by_dual_numbers(a):
    import torch.autograd.forward_ad as fwAD
    s, eye, columns = a.log(), torch.eye(a.shape[-1], dtype=a.dtype), []
    with fwAD.dual_level():
        for j in range(a.shape[-1]):
            columns.append(fwAD.unpack_dual(torch.softmax(fwAD.make_dual(s, eye[j].expand_as(s)), -1)).tangent)
    return torch.stack(columns, -1)


def _dropout_1d(x, p, training):                 # channel dropout: the library, under another name
    return F.dropout1d(x, p, training)


def _dropout_by_vf(x, p, training):
    return torch._VF.dropout(x, p, training)


def _dropout_by_module(x, p, training):
    return torch.nn.Dropout(p).train(training)(x)


def _bytes_by_meta_tensor(b, h, t):              # measures an empty (B, h, T, T) tensor instead of deriving
    return torch.empty(b, h, t, t, device="meta").nbytes


def _bytes_by_element_size(b, h, t):
    weights = torch.empty(b, h, t, t, device="meta")
    return weights.numel() * weights.element_size()


def _shift_back_by_own_table(v, k):              # a table typed from the formula, the row found by its direction
    d = v.shape[-1]
    pos = torch.arange(512, dtype=torch.float64)[:, None]
    omega = 1 / 10000 ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    table = torch.stack([torch.sin(pos * omega), torch.cos(pos * omega)], -1).flatten(-2)     # (512, d)
    scale = v.norm() / table[0].norm()
    row = int((table @ v).argmax())
    return scale * table[row - k]


def _sliding_by_starmap(t, window):              # a loop by another name, with no comprehension
    def row(i, size):
        j = torch.arange(size)
        return (j <= i) & (j > i - window)
    return torch.stack(list(itertools.starmap(row, zip(range(t), itertools.repeat(t)))))


def _left_padded_by_starmap(ids, pad_id):
    t = ids.shape[1]
    causal = torch.tril(torch.ones(t, t, dtype=torch.bool))

    def one(row, _):
        return ((row != pad_id)[None, :] & causal) | torch.eye(t, dtype=torch.bool)
    return torch.stack(list(itertools.starmap(one, zip(ids, itertools.repeat(None)))))[:, None]


class _ReverseByWhile:                           # a callable object: its while loop is not in a function's code
    def __call__(self, src, pad_id):
        out, b = src.clone(), 0
        while b < src.shape[0]:
            n = int((src[b] != pad_id).sum())
            out[b, :n] = src[b, :n].flip(0)
            b += 1
        return out


def _reverse_by_recursion(src, pad_id):          # a loop over the batch with no loop statement at all
    if src.shape[0] == 0:
        return src
    n = int((src[0] != pad_id).sum())
    first = torch.cat([src[0, :n].flip(0), src[0, n:]])[None]
    return torch.cat([first, _reverse_by_recursion(src[1:], pad_id)])


def _reverse_by_starmap(src, pad_id):
    def one(row, n):
        return torch.cat([row[:n].flip(0), row[n:]])
    return torch.stack(list(itertools.starmap(one, zip(src, (src != pad_id).sum(-1).tolist()))))


def _jacobian_by_recursion(a):
    rows = a.reshape(-1, a.shape[-1])

    def stack(i):
        if i == len(rows):
            return []
        return [torch.diag(rows[i]) - torch.outer(rows[i], rows[i]), *stack(i + 1)]
    return torch.stack(stack(0)).reshape(*a.shape, a.shape[-1])


def _masked_softmax_no_grad(scores, keep):       # NaN rows repaired afterwards, the gradient switched off
    with torch.no_grad():
        return torch.softmax(scores.masked_fill(~keep, float("-inf")), -1).nan_to_num(0.0)


def _masked_softmax_tiny_eps(scores, keep):      # no fill at all; 1e-30 is 0 in float16, so 0/0 on empty rows
    e = torch.exp(scores - scores.detach().amax(-1, keepdim=True)) * keep
    return e / e.sum(-1, keepdim=True).clamp_min(1e-30)


def _cross_mask_one_axis_short(x, memory, keep, mha):   # keep[:, None, :]: (B, 1, T_k) against (B, h, T_q, T_k)
    b_q, b_k, b_v = mha.qkv_proj.bias.split(mha.d_model)
    q, k, v = (a04._split(F.linear(z, w, bias), mha.n_heads)
               for z, w, bias in ((x, mha.w_q, b_q), (memory, mha.w_k, b_k), (memory, mha.w_v, b_v)))
    scores = (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).masked_fill(~keep[:, None, :], float("-inf"))
    return mha.out_proj(a04._merge(torch.softmax(scores, -1) @ v))


def _rotate_concatenated(x, k):                  # right pairs and angles, then laid out [new evens, new odds]
    omega = 1 / 10000 ** (torch.arange(0, x.shape[-1], 2, dtype=x.dtype) / x.shape[-1])
    c, s = torch.cos(k * omega), torch.sin(k * omega)
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.cat([c * even + s * odd, -s * even + c * odd], dim=-1)


ISSUE_39 = {
    "l00_welcome": {
        "check_mha_parameter_count": (("misleading verdict", lambda d, h: h * (4 * d * d + 4 * d), "share"),
                                      ("misleading verdict", lambda d, h: 4 * d * d, "four biases")),
        "check_attention_memory": (("measuring instead of deriving", _bytes_by_meta_tensor, "meta device"),
                                   ("measuring instead of deriving", _bytes_by_element_size, "meta device")),
    },
    "l01_tokens": {
        "check_embedding_grad": (("autograd through another door", _embedding_grad_by_jacfwd, "autograd"),
                                 ("autograd through another door", _embedding_grad_by_vmapped_jvp, "autograd")),
    },
    "l02_positional": {
        "check_wavelengths": (("misleading verdict", lambda d: 1 / 10000 ** (torch.arange(0, d, 2) / d),
                               "angular frequencies"),),
        "check_shift_back": (("measuring instead of deriving", _shift_back_by_own_table, "Not yet"),
                             ("misleading verdict", lambda v, k: l02.shift_matrix(k, v.shape[-1]) @ v,
                              "shift forward")),
        "check_rotate": (("misleading verdict", _rotate_concatenated, "Interleave"),),
    },
    "l03_attention": {
        "check_softmax_jacobian": (("autograd through another door", _jacobian_by_vmapped_jacfwd, "autograd"),
                                   ("autograd through another door", _jacobian_by_vmapped_jvp, "autograd"),
                                   ("autograd through another door", _jacobian_by_dual_numbers, "autograd"),
                                   ("loop the detector missed", _jacobian_by_recursion, "loops")),
    },
    "l04_multihead": {
        "check_cross_attention": (("misleading verdict", _cross_mask_one_axis_short, "one axis short"),),
    },
    "l05_masking": {
        "check_left_padded_mask": (("loop the detector missed", _left_padded_by_starmap, "Python loops"),),
        "check_masked_softmax": (("gradients silenced", _masked_softmax_no_grad, "requires_grad is False"),
                                 ("misleading verdict", _masked_softmax_tiny_eps, "rows are not finite")),
        "check_sliding_window_mask": (("loop the detector missed", _sliding_by_starmap, "Python loops"),),
    },
    "l06_ffn_norm": {
        "check_dropout": (("library function under another name", _dropout_1d, "dropout1d"),
                          ("library function under another name", _dropout_by_vf, "library"),
                          ("library function under another name", _dropout_by_module, "library")),
    },
    "l07_encoder_decoder": {
        "check_reverse_tokens": (("loop the detector missed", _ReverseByWhile(), "loops over the batch"),
                                 ("loop the detector missed", _reverse_by_recursion, "loops over the batch"),
                                 ("loop the detector missed", _reverse_by_starmap, "loops over the batch")),
    },
}

for _lesson, _table in ISSUE_39.items():
    for _check, _entries in _table.items():
        REFUSALS.setdefault(_lesson, {})[_check] = REFUSALS.get(_lesson, {}).get(_check, ()) + _entries


# --- issue 39 §1, lessons 08-14: one class at a time -----------------------------------------------------------

BULLETS += ("library function under another name", "ties and off-by-ones")


def _min_p_by_transformers(logits, p_base):      # an installed package's ready-made min-p filter
    from transformers.generation.logits_process import MinPLogitsWarper
    flat = logits.reshape(-1, logits.shape[-1]).float()
    return MinPLogitsWarper(p_base)(None, flat).reshape(logits.shape)


REFUSALS.setdefault("l11_gpt", {}).setdefault("check_min_p", ())
REFUSALS["l11_gpt"]["check_min_p"] += (("library function under another name", _min_p_by_transformers,
                                        "MinPLogitsWarper"),)


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


# --- review turn 4, lesson 12: the new exercises 1 (shares derived) and 4 (the table at K = 4) ------------------

BULLETS += ("two draws taken as one", "shares in the wrong order", "the table of another K",
            "neighbours read from the original text")


def _shares_of(p_mask, p_random, two_draws):
    rest = 1 - p_mask
    return (p_mask, rest * p_random, rest * (1 - p_random)) if two_draws else (p_mask, p_random, 1 - p_mask - p_random)


def _shares_two_draws_as_one(p_mask, p_random, two_draws):     # "0.1 of the rest" read as 0.1 of all selected
    return p_mask, p_random, 1 - p_mask - p_random


def _shares_random_out_of_unchanged(p_mask, p_random, two_draws):   # a second draw inside the unchanged share
    if not two_draws:
        return _shares_of(p_mask, p_random, False)
    rest = 1 - p_mask - p_random
    return p_mask, p_random * rest, rest * (1 - p_random)


def _shares_mask_unchanged_random(p_mask, p_random, two_draws):
    m, r, u = _shares_of(p_mask, p_random, two_draws)
    return m, u, r


def _shares_random_first(p_mask, p_random, two_draws):
    m, r, u = _shares_of(p_mask, p_random, two_draws)
    return r, m, u


def _shares_recipes_swapped(p_mask, p_random, two_draws):      # the flag read the other way round
    return _shares_of(p_mask, p_random, not two_draws)


def _table_of_k(k):
    from exercise_answers_12 import _table_accuracy

    return lambda K, train_ids, inputs, labels: _table_accuracy(k, train_ids, inputs, labels)


def _table_upwards(K, train_ids, inputs, labels):              # the back-off loop run 0, 1, ..., K
    from exercise_answers_12 import _table_accuracy

    return _table_accuracy(0, train_ids, inputs, labels)


def _table_on_the_original_text(K, train_ids, inputs, labels):  # neighbours from val_windows instead of dev_in
    from exercise_answers_12 import _table_accuracy

    return _table_accuracy(K, train_ids, torch.where(labels != -100, labels, inputs), labels)


REFUSALS.setdefault("l12_masked_lm", {}).setdefault("check_corruption_shares", ())
REFUSALS["l12_masked_lm"]["check_corruption_shares"] += (
    ("two draws taken as one", _shares_two_draws_as_one, "p_random of *all* the selected tokens"),
    ("two draws taken as one", _shares_random_out_of_unchanged, "add up to"),
    ("two draws taken as one", _shares_recipes_swapped, "two-draw recipe"),
    ("shares in the wrong order", _shares_mask_unchanged_random, "wrong order"),
    ("shares in the wrong order", _shares_random_first, "wrong order"))
REFUSALS.setdefault("l12_masked_lm", {}).setdefault("check_table_accuracy", ())
REFUSALS["l12_masked_lm"]["check_table_accuracy"] += (
    ("the table of another K", _table_of_k(3), "the accuracy of the 3 + 3 table"),
    ("the table of another K", _table_upwards, "ran upwards"),
    ("neighbours read from the original text", _table_on_the_original_text, "original text"))
