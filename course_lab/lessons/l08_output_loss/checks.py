"""Lesson 08 — the exercise checks (binary cross-entropy, the gradient of a soft-target cross-entropy, the smoothed
confidence experiment)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from course_utils import losses

from ...exercises import (
    as_number,
    attempt,
    autograd_routes,
    fail,
    fresh_generator,
    grad_problem,
    is_tensor,
    never_raises,
    passed,
    report,
    slow_exercise,
    watching,
)


def smoothed_target(target: int, n_classes: int, smoothing: float) -> torch.Tensor:
    """PyTorch's label-smoothed target distribution: ``1 − ε + ε/V`` on the target, ``ε/V`` elsewhere."""
    q = torch.full((n_classes,), smoothing / n_classes)
    q[target] += 1.0 - smoothing
    return q


def _gradient_reaches(got: torch.Tensor, leaf: torch.Tensor, want: torch.Tensor,
                      where: torch.Tensor | None = None) -> bool:
    """The answer carries a gradient back to ``leaf`` (not detached, not computed under no_grad), and it is the
    right one, finite even where the logits are ±1000: a loss trains a model only through its gradient."""
    problem = grad_problem(got)
    if problem is not None:
        return report(problem, "gradient", "梯度")
    (grad,) = torch.autograd.grad(got.sum(), leaf, allow_unused=True)
    if grad is None or not torch.isfinite(grad).all():
        return fail("The gradient with respect to the logits is missing or not finite (nan/inf): a loss trains a "
                    "model only through its gradient. Keep every step differentiable and finite for logits like "
                    "±1000 (take the maximum out before exp).",
                    "关于 logits 的梯度缺失或不是有限值（nan/inf）：损失只能通过梯度来训练模型。"
                    "请让每一步都可微，并且在 logits 为 ±1000 时仍是有限值（先提出最大值再取 exp）。")
    if where is not None:  # compared only there (e.g. off a kink, where autograd picks one of many slopes)
        grad, want = grad[where], want[where]
    if not torch.allclose(grad.float(), want.float(), atol=1e-4, rtol=1e-4):
        err = float((grad.float() - want.float()).abs().max())
        return fail(f"The gradient is wrong (largest difference {err:.3g}): compute the loss from the logits with "
                    "torch operations only.",
                    f"梯度不对（最大差值 {err:.3g}）：请只用 torch 运算从 logits 算出损失。")
    return True


def _forbidden(calls, en_why: str, zh_why: str) -> bool:
    """The verdict for a forbidden library call: name what was called and why the exercise rules it out."""
    names = ", ".join(dict.fromkeys(calls))
    return fail(f"You called {names}: {en_why}", f"你调用了 {names}：{zh_why}")


# What exercise 1 rules out: library functions that apply the stabilising trick for the student.
# logsumexp too: log(1 + e^z) = logsumexp([0, z]) is the max trick done by the library; and so are a log-softmax or
# a cross-entropy over the two logits (0, z), the same loss under another name.
STABLE_BINARY = ((F, "binary_cross_entropy_with_logits"), (torch, "binary_cross_entropy_with_logits"),
                 (F, "logsigmoid"), (F, "softplus"), (torch, "logaddexp"), (torch, "logsumexp"),
                 (F, "log_softmax"), (torch, "log_softmax"), (torch.Tensor, "log_softmax"), (F, "cross_entropy"),
                 (losses, "cross_entropy"), (F, "nll_loss"))


@never_raises
def check_binary_cross_entropy(fn) -> bool:
    """Exercise 1: ``fn(z (N,), y (N,) of 0./1.)`` = per-example ``−[y log σ(z) + (1 − y) log(1 − σ(z))]``,
    finite for logits like ±1000, written without the library functions that stabilise it."""
    g = fresh_generator()
    cases = [(3 * torch.randn(7, generator=g), torch.tensor([0.0, 1, 1, 0, 1, 0, 1])),
             (torch.tensor([1000.0, -1000.0, 0.0, 50.0, -50.0, 1000.0]), torch.tensor([0.0, 1, 1, 1, 0, 1]))]
    for z, y in cases:
        z_in = z.clone().requires_grad_(True)                   # the loss must carry a gradient back to z
        with watching(fn, STABLE_BINARY) as calls:
            ok, got = attempt(fn, z_in, y.clone())
        if not ok:
            return False
        if calls:
            return _forbidden(calls, "it applies the trick for you. Write log(1 + e^z) with the maximum "
                                     "max(0, z) taken out, as log_softmax does for (0, z).",
                              "它替你用了这个技巧。请自己写出 log(1 + e^z)，先把最大值 max(0, z) 提出来，"
                              "就像 log_softmax 对 (0, z) 所做的那样。")
        if not is_tensor(got, z.shape, "loss per example", "每个样本的损失"):
            return False
        want = F.binary_cross_entropy_with_logits(z, y, reduction="none")
        got, got_graph = got.detach().float(), got
        if not torch.isfinite(got).all():
            return fail("inf or nan for z = ±1000: σ(z) rounds to exactly 0 or 1 and its log is −inf. Never take "
                        "the log of σ(z); use log σ(z) = z − log(1 + e^z) with the maximum taken out.",
                        "z = ±1000 时出现了 inf 或 nan：σ(z) 被舍入成恰好 0 或 1，取对数就是 −inf。不要对 σ(z) 取对数；"
                        "用 log σ(z) = z − log(1 + e^z)，并先提出最大值。")
        if torch.allclose(got, -want, atol=1e-4):
            return fail("The sign is flipped: the loss is the *negative* log-likelihood, never below 0.",
                        "符号反了：损失是**负**对数似然，不会小于 0。")
        if not torch.allclose(got, want, atol=1e-4, rtol=1e-5):
            err = float((got - want).abs().max())
            return fail(f"Wrong values (largest difference {err:.3g}): the loss is log(1 + e^z) − y·z.",
                        f"数值不对（最大差值 {err:.3g}）：损失应为 log(1 + e^z) − y·z。")
        # At z = 0, max(0, z) and |z| have a kink: autograd returns one of the slopes there (0 for relu, 0.5 for
        # torch.maximum), so a right formula may give another gradient at that one point; it is compared elsewhere.
        if not _gradient_reaches(got_graph, z_in, torch.sigmoid(z) - y, where=z != 0):
            return False
    return passed("Correct: a single logit is a two-class softmax over (0, z), so the same max trick keeps it "
                  "finite. PyTorch's version is F.binary_cross_entropy_with_logits. (At z = 0 the max has a kink: "
                  "autograd picks one slope there, so the gradient was compared away from it.)",
                  "正确：一个 logit 就是对 (0, z) 做二分类 softmax，同样的减最大值技巧让它保持有限。"
                  "PyTorch 里对应的是 F.binary_cross_entropy_with_logits。（z = 0 处 max 有一个折点，"
                  "autograd 在那里只取其中一个斜率，所以梯度是在折点以外比较的。）")


def _torch_gradient(logits: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """∂/∂logits of PyTorch's cross-entropy with probability targets (mean over the rows), by autograd."""
    leaf = logits.detach().clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(F.cross_entropy(leaf, q), leaf)
    return grad


@never_raises
def check_soft_target_gradient(fn) -> bool:
    """Exercise 2: ``fn(logits (N, V), q (N, V))`` = ∂L/∂logits of L = mean over rows of ``−Σ_k q_k log p_k``,
    ``p = softmax(logits)``, derived, not asked of autograd; finite for logits like ±1000. Compared with autograd
    through ``F.cross_entropy(logits, q)``; the mistakes a derivation makes (sign, the mean's 1/N, the gradient
    with respect to p instead of the logits, the hard label instead of q) are named."""
    g = fresh_generator()
    n_classes, eps = 6, 0.1
    hard = torch.tensor([2, 0, 5, 1])
    cases = [(3 * torch.randn(4, n_classes, generator=g), torch.softmax(torch.randn(4, n_classes, generator=g), -1)),
             (2 * torch.randn(4, n_classes, generator=g),
              torch.stack([smoothed_target(int(t), n_classes, eps) for t in hard])),
             (torch.tensor([[1000.0, 0.0, -1000.0, 5.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0, 0.0, 1000.0]]),
              torch.tensor([[0.5, 0.5, 0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0, 0.0, 1.0]]))]
    for logits, q in cases:
        want = _torch_gradient(logits, q)
        n = len(q)
        with watching(fn, autograd_routes()) as calls:
            ok, got = attempt(fn, logits.clone(), q.clone())
        if calls:
            return fail("Your function asked autograd for the gradient (.backward(), torch.autograd or torch.func): "
                        "the exercise is to derive it. Write log p_k = z_k − log Σ_j e^{z_j}, differentiate "
                        "−Σ_k q_k log p_k with respect to z_j, and use Σ_k q_k = 1.",
                        "你的函数让 autograd 替你求了梯度（.backward()、torch.autograd 或 torch.func）："
                        "本题要你自己推导。写出 log p_k = z_k − log Σ_j e^{z_j}，对 z_j 求 −Σ_k q_k log p_k 的导数，"
                        "再用上 Σ_k q_k = 1。")
        if not ok or not is_tensor(got, logits.shape, "gradient", "梯度"):
            return False
        got = got.detach().float()
        if not torch.isfinite(got).all():
            return fail("nan or inf for logits like ±1000: e^1000 overflows. Compute p with a stable softmax "
                        "(torch.softmax, or the exp of this lesson's log_softmax).",
                        "logits 为 ±1000 时出现了 nan 或 inf：e^1000 会上溢。请用稳定的 softmax 计算 p"
                        "（torch.softmax，或对本课的 log_softmax 取 exp）。")
        if torch.allclose(got, want, atol=1e-5, rtol=1e-4):
            continue
        if logits.abs().max() >= 1000:                  # right on the ordinary cases, wrong where p underflows
            return fail("Right for ordinary logits, wrong for logits like ±1000, where some p_k round to exactly 0. "
                        "Your route loses those classes (through 1/p_k, or p_k times something large): simplify the "
                        "formula first. The gradient of −Σ_k q_k log p_k needs no division by p.",
                        "普通的 logits 都对，但 logits 为 ±1000 时不对：这时有些 p_k 被舍入成恰好 0，你的算法丢掉了这些"
                        "类别（经过了 1/p_k，或者 p_k 乘上一个很大的数）。请先把公式化简：−Σ_k q_k log p_k 的梯度"
                        "根本不需要除以 p。")
        p = torch.softmax(logits, -1)
        if torch.allclose(got, -want, atol=1e-5):
            return fail("The sign is flipped. Raising the logit of a class that q wants more than p predicts lowers "
                        "the loss, so the gradient there is negative: gradient descent steps against it.",
                        "符号反了。q 想要的比 p 预测的多的那个类别，把它的 logit 调高会让损失下降，"
                        "所以那里的梯度是负的：梯度下降是逆着梯度走的。")
        if n > 1 and torch.allclose(got, want * n, atol=1e-5):
            return fail("You left out the 1/N: L is the mean over the N rows, so each row's gradient is divided by N.",
                        "你漏掉了 1/N：L 是 N 行的平均值，所以每一行的梯度都要除以 N。")
        d_p = -q / p.clamp_min(1e-30)                                        # ∂L/∂p of one row
        if torch.allclose(got, d_p / n, atol=1e-4) or torch.allclose(got, d_p, atol=1e-4):
            return fail("That is ∂L/∂p, the gradient with respect to the probabilities. The question asks for the "
                        "logits z: p = softmax(z), so carry it through the softmax (its Jacobian, lesson 03), or "
                        "differentiate log p_k = z_k − log Σ_j e^{z_j} directly.",
                        "这是 ∂L/∂p，也就是对概率的梯度。题目要的是对 logits z 的梯度：p = softmax(z)，"
                        "要再经过 softmax（它的雅可比矩阵，见第 03 课），"
                        "或者直接对 log p_k = z_k − log Σ_j e^{z_j} 求导。")
        one_hot = F.one_hot(q.argmax(-1), q.shape[-1]).float()
        if torch.allclose(got, (p - one_hot) / n, atol=1e-5):
            return fail("You used the hard label (the argmax of q) instead of q: that is the gradient without "
                        "smoothing. With a soft target every class k gets p_k − q_k.",
                        "你用了硬标签（q 的 argmax）而不是 q：这是不加平滑时的梯度。目标是软分布时，"
                        "每个类别 k 得到的都是 p_k − q_k。")
        err = float((got - want).abs().max())
        return fail(f"Not yet (largest difference {err:.3g}). Differentiate −Σ_k q_k (z_k − log Σ_j e^{{z_j}}) with "
                    "respect to z_j, use Σ_k q_k = 1, and do not forget the mean over the rows.",
                    f"还不对（最大差值 {err:.3g}）。对 z_j 求 −Σ_k q_k (z_k − log Σ_j e^{{z_j}}) 的导数，用上 "
                    "Σ_k q_k = 1，也别忘了对各行取平均。")
    return passed("Correct: ∂L/∂z = (softmax(z) − q) / N. Each row sums to 0, it vanishes when the prediction is "
                  "q, and with a one-hot q it is p − 1 on the correct class, close to −1 when the model is "
                  "confidently wrong.",
                  "正确：∂L/∂z = (softmax(z) − q) / N。每行之和为 0；预测恰好等于 q 时梯度为 0；q 是独热向量时，"
                  "正确类别上的梯度是 p − 1，模型自信地犯错时接近 −1。")


GRADIENT_CALLS = ((torch.Tensor, "backward"), (torch.autograd, "backward"), (torch.autograd, "grad"))


def _backpropagated_losses(calls) -> list[float]:
    """The values of the scalar losses the student backpropagated, in order (from the watched calls)."""
    values = []
    for _, args, kwargs in calls.records:
        target = args[0] if args else kwargs.get("tensors", kwargs.get("outputs"))
        target = target[0] if isinstance(target, (list, tuple)) and target else target
        if isinstance(target, torch.Tensor) and target.numel() == 1:
            values.append(float(target.detach()))
    return values


def _smoothed_entropy(eps: float, n_classes: int) -> float:
    """The lowest value of the label-smoothed cross-entropy: the entropy of the smoothed target itself."""
    q = torch.full((n_classes,), eps / n_classes, dtype=torch.float64)
    q[0] += 1 - eps
    return float(-(q * q.clamp_min(1e-300).log()).sum())


@never_raises
def check_smoothed_confidence(fn) -> bool:
    """Exercise 3 (an experiment): ``fn(eps, n_classes)`` trains free logits with label smoothing ``eps`` and
    returns the probability the trained model gives the correct class (the optimum is ``1 − ε + ε/V``)."""
    found = []
    for eps, n_classes in ((0.1, 12), (0.3, 5), (0.0, 4)):
        with watching(fn, GRADIENT_CALLS) as calls, slow_exercise():     # it trains: allow minutes, not seconds
            ok, got = attempt(fn, eps, n_classes)
        if not ok:
            return False
        losses_seen = _backpropagated_losses(calls)
        if len(losses_seen) < 10 or not losses_seen[0] > losses_seen[-1] + 0.1:
            return fail("You returned a number without training anything (no training loop whose loss goes down "
                        "was run). The exercise is an experiment: train, then measure; the formula comes afterwards.",
                        "你没有训练任何东西就返回了一个数（没有运行损失不断下降的训练循环）。这个练习是一个实验："
                        "先训练，再测量；公式放在最后再看。")
        value, problem = as_number(got)
        if problem:
            return report(problem, "Return the probability as a number", "请把概率作为一个数返回")
        cap = 1 - eps + eps / n_classes
        if eps > 0 and value > cap + 0.01:
            return fail(f"With ε = {eps} you measured {value:.3f}, above what the smoothed loss allows: is "
                        "label_smoothing=eps passed to the loss you minimise?",
                        f"ε = {eps} 时你测得 {value:.3f}，比平滑后的损失所允许的还高：你最小化的损失里传了 "
                        "label_smoothing=eps 吗？")
        if abs(value - cap) > 0.01:
            return fail(f"For ε = {eps}, |V| = {n_classes} you measured {value:.3f}, still moving: train longer "
                        "(or with a larger learning rate) until the probability stops changing, then read it.",
                        f"ε = {eps}、|V| = {n_classes} 时你测得 {value:.3f}，还没有收敛：训练更久（或用更大的学习率），"
                        "等概率不再变化时再读数。")
        floor = _smoothed_entropy(eps, n_classes)
        if abs(losses_seen[-1] - floor) > 0.05:
            return fail(f"For ε = {eps}, |V| = {n_classes} the last loss you minimised is {losses_seen[-1]:.3f}; the "
                        f"label-smoothed cross-entropy cannot go below {floor:.3f} and gets there once trained. "
                        "Train with label_smoothing=eps until the loss stops falling.",
                        f"ε = {eps}、|V| = {n_classes} 时，你最后最小化的损失是 {losses_seen[-1]:.3f}；带标签平滑的"
                        f"交叉熵不可能低于 {floor:.3f}，训练充分时正好到达这个值。请用 label_smoothing=eps "
                        "训练，直到损失不再下降。")
        found.append(f"ε = {eps}, |V| = {n_classes}: {value:.3f}")
    return passed("Measured " + "; ".join(found) + ". The smoothed loss is lowest when the model predicts the "
                  "smoothed target itself, so the confidence stops at 1 − ε + ε/|V|: never 100 %.",
                  "测得 " + "；".join(found) + "。模型预测出平滑后的目标分布本身时，平滑损失最小，"
                  "所以置信度停在 1 − ε + ε/|V|，永远到不了 100%。")
