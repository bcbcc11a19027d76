"""Smoke tests of the GPU-library promises: torch.compile without graph breaks, autocast, device moves."""

import pytest
import torch

from course_utils import GPT, MultiHeadAttention, Transformer


def test_mha_compiles_without_graph_breaks():
    """fullgraph=True fails on any graph break; aot_eager checks capture cheaply (inductor is tested on CUDA)."""
    torch._dynamo.reset()
    mha = MultiHeadAttention(16, 4).eval()
    compiled = torch.compile(mha, backend="aot_eager", fullgraph=True)
    x = torch.randn(2, 6, 16)
    torch.testing.assert_close(compiled(x, is_causal=True), mha(x, is_causal=True))


def test_whole_models_compile_without_graph_breaks():
    """GPT and the seq2seq Transformer, including the embedding's vocabulary check, in one graph each."""
    torch._dynamo.reset()
    gpt = GPT(50, max_len=16, n_layers=2, n_heads=2, d_model=32, dropout=0.0).eval()
    ids = torch.randint(0, 50, (2, 16))
    torch.testing.assert_close(torch.compile(gpt, backend="aot_eager", fullgraph=True)(ids), gpt(ids))
    seq2seq = Transformer(30, 30, d_model=32, n_heads=4,
                          n_encoder_layers=1, n_decoder_layers=1, d_ff=64, dropout=0.0).eval()
    src, tgt = torch.randint(1, 30, (2, 7)), torch.randint(1, 30, (2, 5))
    compiled = torch.compile(seq2seq, backend="aot_eager", fullgraph=True)
    torch.testing.assert_close(compiled(src, tgt), seq2seq(src, tgt))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="inductor GPU compile needs CUDA")
def test_gpt_compiles_with_inductor_on_cuda():
    model = GPT(50, max_len=32, n_layers=2, n_heads=2, d_model=32).cuda()
    compiled = torch.compile(model)
    ids = torch.randint(0, 50, (4, 32), device="cuda")
    compiled(ids).float().mean().backward()


@pytest.mark.parametrize("amp_dtype", [torch.bfloat16, torch.float16])
def test_autocast_forward_backward(device, amp_dtype):
    if device == "cpu" and amp_dtype == torch.float16:
        pytest.skip("float16 autocast is a CUDA feature; CPU autocast uses bfloat16")
    if device == "cuda" and amp_dtype == torch.bfloat16 and not torch.cuda.is_bf16_supported():
        pytest.skip("this GPU has no bfloat16")
    model = Transformer(30, 30, d_model=32, n_heads=4, n_encoder_layers=1, n_decoder_layers=1, d_ff=64).to(device)
    src = torch.randint(1, 30, (2, 7), device=device)
    tgt = torch.randint(1, 30, (2, 5), device=device)
    with torch.autocast(device_type=device, dtype=amp_dtype):
        logits = model(src, tgt)
    assert logits.dtype == amp_dtype
    logits.float().logsumexp(-1).mean().backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
