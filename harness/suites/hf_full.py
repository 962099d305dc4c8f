"""``hf-models-full``: real-size Hugging Face models, as PyTorch's dynamo benchmarks run them
(``benchmarks/dynamo/huggingface_models_list.txt`` and ``huggingface.py``): each model class built from
its *default* config (so BERT is bert-base, ALBERT albert-xxlarge, BART bart-large, as dynamo does),
T5-small from t5-small's sizes, GPT-2 and RoBERTa with ``pad_token_id = 0``, T5 and BART fed
``decoder_input_ids = input_ids``, caches off. Weights are random (seeded); nothing is downloaded.

Sequence lengths follow dynamo's table (1024 for GPT-2, BART and T5; 512 for BERT, RoBERTa, ALBERT,
ELECTRA, LayoutLM; 128 otherwise). The batch is 1, not dynamo's (8–256): these run on a vendor's device
and on CPUs alike; a recipe can scale them (the ``batch`` and ``seq`` spec keys are part of the case).

Each model states its task and how it is judged beyond the element-wise rule:

* ``lm`` (masked and causal LMs, seq2seq): token agreement (argmax over the vocabulary at every
  position) against the reference;
* ``classifier`` (sequence classification, question answering start logits): top-1 agreement.

A recipe's ``accuracy.top1`` gates that agreement; the outputs themselves are held to dynamo's rule on
torch-eager and torch-compile.
"""

from __future__ import annotations

import hashlib
import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.cases.case import Case


@dataclass(frozen=True)
class FullModel:
    name: str  # dynamo's list name
    model: str  # transformers class
    config: str
    seq: int  # dynamo's sequence length for this family
    task: str  # lm | classifier
    overrides: dict[str, Any] = field(default_factory=dict)
    seq2seq: bool = False  # decoder_input_ids = input_ids (T5, BART)
    params_m: int = 0  # parameters, millions (for the cost estimate)


T5_SMALL = {"d_model": 512, "d_ff": 2048, "num_layers": 6, "num_decoder_layers": 6, "num_heads": 8, "d_kv": 64, "vocab_size": 32128}
MODELS: tuple[FullModel, ...] = (
    FullModel("BertForMaskedLM", "BertForMaskedLM", "BertConfig", 512, "lm", params_m=110),
    FullModel("BertForQuestionAnswering", "BertForQuestionAnswering", "BertConfig", 512, "classifier", params_m=109),
    FullModel("GPT2ForSequenceClassification", "GPT2ForSequenceClassification", "GPT2Config", 1024, "classifier",
              {"pad_token_id": 0}, params_m=124),
    FullModel("T5Small", "T5ForConditionalGeneration", "T5Config", 1024, "lm", T5_SMALL, seq2seq=True, params_m=60),
    FullModel("DistilBertForMaskedLM", "DistilBertForMaskedLM", "DistilBertConfig", 128, "lm", params_m=67),
    FullModel("RobertaForCausalLM", "RobertaForCausalLM", "RobertaConfig", 512, "lm", {"pad_token_id": 0, "is_decoder": True}, params_m=125),
    FullModel("AlbertForMaskedLM", "AlbertForMaskedLM", "AlbertConfig", 512, "lm", params_m=223),
    FullModel("BartForConditionalGeneration", "BartForConditionalGeneration", "BartConfig", 1024, "lm", seq2seq=True, params_m=406),
    FullModel("ElectraForQuestionAnswering", "ElectraForQuestionAnswering", "ElectraConfig", 512, "classifier", params_m=13),
    FullModel("LayoutLMForMaskedLM", "LayoutLMForMaskedLM", "LayoutLMConfig", 512, "lm", params_m=113),
    FullModel("MobileBertForMaskedLM", "MobileBertForMaskedLM", "MobileBertConfig", 128, "lm", params_m=37),
)


def hf_full_cases(suite: str = "hf-models-full") -> list[Case]:
    code = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]
    return [Case(id=f"model.{m.name}.full", suite=suite, kind="hf-full", op=None, tags=("hf", "full", m.task),
                 spec={"model": m.name, "seq": m.seq, "batch": 1, "task": m.task, "code": code,
                       "check": "dynamo rule; " + ("token agreement" if m.task == "lm" else "top-1 agreement"),
                       # seconds per item on a 2-core CPU, roughly: build, export, reference, lower/compile and run
                       "cost": round(20 + m.params_m * m.seq / 1024, 1)},
                 dtypes=("float32",), shapes=("static",), source=f"transformers.{m.model}") for m in MODELS]


def build_hf_full(case: Case, axes: Any, seed: int) -> Any:
    import torch

    from harness.builders.build import Built, torch_dtype

    try:
        transformers = importlib.import_module("transformers")
    except ImportError:
        raise RuntimeError("python package 'transformers' is not installed (pip install .[models])") from None
    m = next(x for x in MODELS if x.name == case.spec["model"])
    torch.manual_seed(seed)
    config = getattr(transformers, m.config)(**m.overrides)
    if hasattr(config, "use_cache"):
        config.use_cache = False
    if hasattr(config, "_attn_implementation"):
        config._attn_implementation = "eager"
    inner = getattr(transformers, m.model)(config).eval()
    if torch_dtype(axes.dtype).is_floating_point:
        inner = inner.to(torch_dtype(axes.dtype))

    class Full(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: torch.Tensor) -> Any:
            kwargs: dict[str, Any] = {"input_ids": input_ids, "return_dict": True}
            if m.seq2seq:
                kwargs["decoder_input_ids"] = input_ids
            out = self.inner(**kwargs)
            logits = getattr(out, "logits", None)
            return logits if logits is not None else out.start_logits

    vocab = int(getattr(config, "vocab_size", 30000))
    g = torch.Generator().manual_seed(seed)
    example = (torch.randint(0, vocab, (int(case.spec["batch"]), int(case.spec["seq"])), generator=g),)
    return Built(Full().eval(), example, example, None, task=m.task)
