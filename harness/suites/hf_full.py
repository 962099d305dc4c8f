"""``hf-models-full``: a view of the zoo's Hugging Face list (``harness.suites.zoo``), eleven real-size models.

The suite was once built by a Hugging Face builder of its own; the zoo builds these models the same way (dynamo's
``huggingface.py``: each class from its *default* config, T5Small from t5-small's sizes, GPT-2 and RoBERTa with
``pad_token_id = 0``, T5 and BART fed ``decoder_input_ids = input_ids``, caches off, batch 1, dynamo's sequence
lengths), so there is one builder now, and these are the zoo's rows. Two inputs follow the zoo (dynamo) where the
old builder did not: RoBERTa is fed ``randint(0, 1)`` (dynamo's rule; the old builder drew from the vocabulary and
set ``is_decoder``), and BART's inputs end with its EOS token.

Each case keeps its old id, ``model.<name>.full``, as an alias of the zoo row it runs (``spec["zoo"]``) until
2027-06-01: filters, expectations and history keyed on the old ids go on working, and ``bti run`` says once which
zoo ids they stand for. Use ``-s zoo -k 'zoo.huggingface.<name>'`` in new work.
"""

from __future__ import annotations

import dataclasses
import sys

from harness.cases.case import Case

# the eleven models, by their name in dynamo's huggingface list (the zoo's ids: zoo.huggingface.<name>)
NAMES = ("BertForMaskedLM", "BertForQuestionAnswering", "GPT2ForSequenceClassification", "T5Small", "DistilBertForMaskedLM",
         "RobertaForCausalLM", "AlbertForMaskedLM", "BartForConditionalGeneration", "ElectraForQuestionAnswering",
         "LayoutLMForMaskedLM", "MobileBertForMaskedLM")
ALIASES_UNTIL = "2027-06-01"


def alias(name: str) -> str:
    """The deprecated id of the zoo row ``name``."""
    return f"model.{name}.full"


def hf_full_cases(suite: str = "hf-models-full") -> list[Case]:
    from harness.suites.zoo import zoo_cases

    print(f"bti: warning: {suite}'s ids model.<name>.full are aliases of the zoo's zoo.huggingface.<name> until "
          f"{ALIASES_UNTIL}: use -s zoo -k 'zoo.huggingface.<name>'", file=sys.stderr)
    rows = {c.spec["model"]: c for c in zoo_cases(suite, lists=("huggingface",), only=tuple(f"zoo.huggingface.{n}" for n in NAMES))}
    return [dataclasses.replace(rows[n], id=alias(n), tags=(*rows[n].tags, "hf", "full"),
                                spec={**rows[n].spec, "zoo": rows[n].id}) for n in NAMES]
