"""Print the README table of the course models from their manifests (course_models/*.json), in English or Chinese.

    python tools/course_models_table.py en        # the block between the course-models markers of README.md
    python tools/course_models_table.py zh        # the same for README_zh.md

tests/test_course_models.py checks that both READMEs hold exactly this output, so no figure there is typed by hand.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "course_models"
LESSONS = {"sst2_classifier": "09", "translator_en_zh": "10", "gpt_shakespeare": "11", "mlm_shakespeare": "12",
           "minilm_sst2_full": "17", "minilm_sst2_lora": "17"}
HEADERS = {"en": "| model | lesson | held-out result (manifest) | baseline, same data | made by | on |",
           "zh": "| 模型 | 课 | 留出数据上的结果（清单文件） | 同一数据上的基线 | 训练命令 | 训练环境 |"}


TEMPLATES = {  # kind -> (result, baseline) in each language, filled from the manifest's metrics
    "gpt": {"en": ("validation loss {val_loss:.3f}", "best n-gram: computed in lesson 11"),
            "zh": ("验证损失 {val_loss:.3f}", "最好的 n 元语法：见第 11 课")},
    "transformer": {"en": ("BLEU {bleu_beam:.1f} beam, {bleu_greedy:.1f} greedy, {test_sentences:,} sentences",
                           "nearest neighbour {lookup_bleu:.1f}"),
                    "zh": ("BLEU {bleu_beam:.1f}（束搜索），{bleu_greedy:.1f}（贪心），{test_sentences:,} 个句子",
                           "最近邻 {lookup_bleu:.1f}")},
    "masked_lm": {"en": ("masked-character accuracy {masked_accuracy_plain:.1%} (plain fill-in; on BERT's 80/10/10 "
                         "input, where 10 % can be copied: {masked_accuracy_80_10_10:.1%})",
                         "context table: computed in lesson 12"),
                  "zh": ("被遮字符准确率 {masked_accuracy_plain:.1%}（单纯完形填空；在 BERT 的 80/10/10 输入上，"
                         "其中 10% 可以照抄：{masked_accuracy_80_10_10:.1%}）", "上下文计数表：见第 12 课")},
    "minilm_classifier": {"en": ("dev accuracy {dev_accuracy:.1%}, test {test_accuracy:.1%}",
                                 "linear probe and LoRA: lesson 17"),
                          "zh": ("开发集准确率 {dev_accuracy:.1%}，测试集 {test_accuracy:.1%}",
                                 "线性探测和 LoRA：见第 17 课")},
    "minilm_lora": {"en": ("dev accuracy {dev_accuracy:.1%}, test {test_accuracy:.1%}",
                           "linear probe and full fine-tuning: lesson 17"),
                    "zh": ("开发集准确率 {dev_accuracy:.1%}，测试集 {test_accuracy:.1%}",
                           "线性探测和全参数微调：见第 17 课")},
    "encoder_classifier": {"en": ("dev accuracy {dev_accuracy:.1%}", "bag-of-words logistic regression: lesson 09"),
                           "zh": ("开发集准确率 {dev_accuracy:.1%}", "词袋逻辑回归：见第 09 课")},
}


def result(m: dict, lang: str) -> tuple[str, str]:
    return tuple(text.format(**m["metrics"]) for text in TEMPLATES[m["kind"]][lang])


def table(lang: str) -> str:
    lines = [HEADERS[lang], "|---|---|---|---|---|---|"]
    for name, lesson in LESSONS.items():
        path = ROOT / f"{name}.json"
        if not path.is_file():
            continue
        m = json.loads(path.read_text(encoding="utf-8"))
        ours, baseline = result(m, lang)
        where = (f"{m['device']}，{m['threads']} 个线程，{m['minutes']:.0f} 分钟" if lang == "zh"
                 else f"{m['device']}, {m['threads']} thread{'s' if m['threads'] != 1 else ''}, {m['minutes']:.0f} min")
        lines.append(f"| `{name}` | {lesson} | {ours} | {baseline} | `{m['command']}` | {where} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(table(sys.argv[1] if len(sys.argv) > 1 else "en"))
